"""Where things live in a store (docs/architecture.md, "The store layout"), the same on local disk and on S3.

```
templates/<id>/versions/<version>/manifest.json
templates/<id>/versions/<version>/<level>.parquet      one row group per shard
templates/<id>/versions/<version>/importance.npz       scores, to re-encode without recapture
templates/<id>/versions/<version>/claim/<seq>.json     the claim's records; record 1 reserves the number
templates/<id>/versions/<version>/retired/<seq>.json   gc's retirement mark's records (library.py)
templates/<id>/versions/<version>/claim.json           a claim from before the log
templates/<id>/versions/<version>/retired.json         a retirement mark from before the log
templates/<id>/aliases/<alias>/<seq>.json              {"version": N}: the newest record is the alias
templates/<id>/aliases/<alias>.json                    an alias from before the log (alias_log.py)
```

Claims and marks are never deleted (a version's tombstones); each ``<seq>.json`` folder is a log
of create-only records whose newest is the value (:mod:`sakura.platform.record_log`).
"""

from __future__ import annotations

import re

from sakura.platform.errors import SakuraError, shown
from sakura.platform.ids import validate_template_id

ALIAS_PATTERN = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")
MAX_VERSION = 10**9
#: ASCII digits only: ``str.isdigit()`` accepts "²" and "١", which ``int()`` then rejects or
#: reads as another number (a non-canonical URL for the same version).
_ASCII_NUMBER = re.compile(r"(?:0|[1-9][0-9]*)", re.ASCII)


class InvalidName(SakuraError, ValueError):
    code = "invalid_name"


def validate_version(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERSION:
        raise InvalidName(f"invalid version {shown(value)}: expected an integer in [1, {MAX_VERSION}]")
    return value


def parse_number(text: object, *, max_digits: int = 10) -> int | None:
    """``text`` as a non-negative integer if it is canonical ASCII decimal (no sign, no leading
    zero, at most ``max_digits`` digits), else None. Use it wherever a number comes from a URL
    or a file name."""
    if not isinstance(text, str) or len(text) > max_digits or _ASCII_NUMBER.fullmatch(text) is None:
        return None
    return int(text)


def version_ref(ref: object) -> int | None:
    """A version reference from outside (URL, CLI, API): its number, or None for a valid alias.

    Raises :class:`InvalidName` for anything else (a malformed number is not an alias either).
    """
    if isinstance(ref, int) and not isinstance(ref, bool):
        return validate_version(ref)
    if isinstance(ref, str) and ref[:1].isdigit():
        number = parse_number(ref)
        if number is None:
            raise InvalidName(f"invalid version {shown(ref)}: expected an integer in [1, {MAX_VERSION}]")
        return validate_version(number)
    validate_alias(ref)
    return None


def validate_alias(value: object) -> str:
    if not isinstance(value, str) or ALIAS_PATTERN.fullmatch(value) is None:
        raise InvalidName(f"invalid alias {shown(value)}: expected a-z, 0-9, '.', '_', '-' starting with a letter")
    return value


def validate_level(value: object) -> str:
    from sakura.platform.codec.levels import LEVEL_NAME_PATTERN

    if not isinstance(value, str) or re.fullmatch(LEVEL_NAME_PATTERN, value) is None:
        raise InvalidName(f"invalid level name {shown(value)}")
    return value


def validate_object_name(value: object) -> str:
    """A context or source object's name (:mod:`sakura.platform.context`)."""
    from sakura.platform.context import CONTEXT_NAME_PATTERN

    if not isinstance(value, str) or re.fullmatch(CONTEXT_NAME_PATTERN, value) is None:
        raise InvalidName(f"invalid context object name {shown(value)}")
    return value


def template_prefix(template_id: str) -> str:
    return f"templates/{validate_template_id(template_id)}/"


def versions_prefix(template_id: str) -> str:
    return template_prefix(template_id) + "versions/"


def version_prefix(template_id: str, version: int) -> str:
    return f"{versions_prefix(template_id)}{validate_version(version)}/"


def manifest_key(template_id: str, version: int) -> str:
    return version_prefix(template_id, version) + "manifest.json"


#: The file names (under a version's folder) of its claim's and retirement mark's logs.
CLAIM_LOG, RETIRED_LOG = "claim", "retired"


def claim_prefix(template_id: str, version: int) -> str:
    """The claim's log (:mod:`sakura.platform.version_state`)."""
    return version_prefix(template_id, version) + f"{CLAIM_LOG}/"


def retired_prefix(template_id: str, version: int) -> str:
    """The retirement mark's log (:mod:`sakura.platform.version_state`)."""
    return version_prefix(template_id, version) + f"{RETIRED_LOG}/"


def claim_key(template_id: str, version: int) -> str:
    """A claim from before the log (read until its first move)."""
    return version_prefix(template_id, version) + "claim.json"


def retired_key(template_id: str, version: int) -> str:
    """A retirement mark from before the log (read until its first move)."""
    return version_prefix(template_id, version) + "retired.json"


def importance_key(template_id: str, version: int) -> str:
    return version_prefix(template_id, version) + "importance.npz"


def context_key(template_id: str, version: int, name: str) -> str:
    """A context object (e.g. prompt embeddings): see :mod:`sakura.platform.context`."""
    return version_prefix(template_id, version) + f"context-{validate_object_name(name)}.zst"


def image_key(template_id: str, version: int, name: str) -> str:
    """The template's published image: see :mod:`sakura.platform.template_image`."""
    return version_prefix(template_id, version) + f"image-{validate_object_name(name)}.jpg"


def level_key(template_id: str, version: int, level: str) -> str:
    return version_prefix(template_id, version) + f"{validate_level(level)}.parquet"


def alias_prefix(template_id: str, alias: str) -> str:
    """The alias's log (:mod:`sakura.platform.alias_log`)."""
    return template_prefix(template_id) + f"aliases/{validate_alias(alias)}/"


def alias_key(template_id: str, alias: str) -> str:
    """An alias from before the log (read until its first move)."""
    return template_prefix(template_id) + f"aliases/{validate_alias(alias)}.json"


def parse_version_key(key: str) -> tuple[str, int, str] | None:
    """``(template_id, version, name)`` for a key under some version, else None. The name is the
    file's, or ``claim/<seq>.json`` / ``retired/<seq>.json`` for a record of those logs."""
    m = re.fullmatch(rf"templates/([^/]+)/versions/([1-9][0-9]{{0,9}})/((?:(?:{CLAIM_LOG}|{RETIRED_LOG})/)?[^/]+)",
                     key, re.ASCII)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else None


def is_claim(name: str) -> bool:
    """Whether a name :func:`parse_version_key` gives is part of the version's claim."""
    return name == "claim.json" or name.startswith(f"{CLAIM_LOG}/")


def is_mark(name: str) -> bool:
    """Whether a name :func:`parse_version_key` gives is part of gc's retirement mark."""
    return name == "retired.json" or name.startswith(f"{RETIRED_LOG}/")
