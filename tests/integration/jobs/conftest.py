"""Fixtures shared by this folder's test modules (pytest looks them up by name in a conftest.py)."""

from __future__ import annotations

from tests.unit.platform.test_images import decodes

__all__ = ["decodes"]
