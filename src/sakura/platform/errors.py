"""Typed errors shared by every part of SAKURA.

Each error carries a stable machine-readable ``code`` so the CLI, the HTTP API and the edge
client can report the same failure the same way.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How much of a value from outside an error message shows (a name is at most 64 characters).
SHOWN_CHARS = 70


def shown(value: object) -> str:
    """``value``'s repr for an error message, cut to :data:`SHOWN_CHARS`: a name a client sent
    may be kilobytes long, and the message goes back to it and into the logs."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS - 3]}... ({len(text)} characters)"


def closest(word: str, known: Iterable[str]) -> list[str]:
    """The entries of ``known`` closest to ``word`` (a typo), best first."""
    return difflib.get_close_matches(word, list(known), n=3, cutoff=0.6)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """"; did you mean 'x'?" naming the entries of ``known`` closest to ``word``, or ""."""
    return _hint(closest(word, known))


def _hint(close: list[str]) -> str:
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


class SakuraError(Exception):
    """Base class of every error SAKURA raises on purpose."""

    code = "sakura_error"


class InvalidTemplateId(SakuraError, ValueError):
    code = "invalid_template_id"


class SpecError(SakuraError, ValueError):
    """A template spec file is malformed; the message names the file, template and field of
    every problem found (``problems``: one dict each, for ``--json``)."""

    code = "invalid_spec"

    def __init__(self, message: str, problems: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [{"message": message}]


class UnknownModel(SakuraError, LookupError):
    code = "unknown_model"


class ModelError(SakuraError, RuntimeError):
    """A model cannot do what was asked (wrong family, incompatible KV, bad inputs)."""

    code = "model_error"


class ImageError(SakuraError, ValueError):
    code = "invalid_image"


class CodecError(SakuraError, ValueError):
    """A shard payload is malformed, truncated, corrupt or hostile, or cannot be encoded."""

    code = "invalid_shard"


# -- the template library ------------------------------------------------------------
class LibraryError(SakuraError, LookupError):
    code = "not_found"


class UnknownTemplate(LibraryError):
    """No version of the template was ever published (a typo, most often): ``suggestions`` are
    the closest ids the caller knows of."""

    code = "unknown_template"

    def __init__(self, template_id: str, suggestions: Iterable[str] = ()) -> None:
        self.template_id, self.suggestions = template_id, list(suggestions)
        hint = _hint(self.suggestions)
        super().__init__(f"unknown template {template_id!r}{hint}")

    def suggest(self, known: Iterable[str]) -> UnknownTemplate:
        """The same error with the ids of ``known`` closest to the one asked for."""
        return UnknownTemplate(self.template_id, closest(self.template_id, known))


class VersionRetired(LibraryError):
    """gc has begun deleting the version: no alias may point at it any more."""

    code = "version_retired"


class ModelChange(SakuraError, ValueError):
    """Moving an alias would switch the model its phones need (another model name or weights)."""

    code = "model_change"


class AliasUnreadable(SakuraError, ValueError):
    code = "alias_unreadable"
