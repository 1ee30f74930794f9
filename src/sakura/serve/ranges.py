"""HTTP ``Range: bytes=...`` parsing (RFC 9110), single ranges only."""

from __future__ import annotations

import re

#: ASCII digits only (``\d`` would also match "١", which ``int()`` reads as 1).
_RANGE = re.compile(r"bytes=([0-9]{0,19})-([0-9]{0,19})")


class RangeNotSatisfiable(ValueError):
    pass


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``[start, end)`` for a satisfiable single range; None to ignore the header (multi or malformed)."""
    m = _RANGE.fullmatch(header.strip())
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    if not first and not last:
        return None
    if not first:  # suffix: the last N bytes
        n = int(last)
        if n == 0:
            raise RangeNotSatisfiable(header)
        return max(0, size - n), size
    start = int(first)
    end = size if not last else min(size, int(last) + 1)
    if last and int(last) < start:
        return None  # invalid syntax: ignore, per RFC
    if start >= size:
        raise RangeNotSatisfiable(header)
    return start, end
