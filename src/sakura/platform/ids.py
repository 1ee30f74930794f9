"""Template ids: the one format accepted everywhere (they become object keys and URL parts)."""

from __future__ import annotations

import re
from typing import TypeGuard

from sakura.platform.errors import InvalidTemplateId, shown

TEMPLATE_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
_TEMPLATE_ID = re.compile(TEMPLATE_ID_PATTERN)


def is_template_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _TEMPLATE_ID.fullmatch(value) is not None


def validate_template_id(value: object) -> str:
    """Return ``value`` if it is a valid template id, else raise :class:`InvalidTemplateId`."""
    if not is_template_id(value):
        raise InvalidTemplateId(
            f"invalid template id {shown(value)}: expected 1-64 characters of a-z, 0-9, '.', '_', '-' "
            "starting with a letter or digit"
        )
    return value
