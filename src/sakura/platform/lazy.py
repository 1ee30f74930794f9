"""Names of code, resolved when used: a registry row says ``"package.module:function"`` and the
module is imported only when the row is used (reading a registry imports nothing)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["resolve"]


def resolve(ref: str) -> Any:
    """The attribute ``ref`` (``"module:attr"``) names, importing its module now."""
    module, sep, name = ref.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"{ref!r} is not 'module:attr'")
    return getattr(importlib.import_module(module), name)
