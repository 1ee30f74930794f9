"""Typed errors shared by every part of SAKURA.

Each error carries a stable machine-readable ``code`` so the CLI, the HTTP API and the edge
client can report the same failure the same way.
"""

from __future__ import annotations


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
