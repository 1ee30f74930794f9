"""The grammar of an inline figure in the docs (see :data:`FIG`): one or several values of a bench
JSON, reduced and formatted into the text between its markers. ``bench/tables.py`` loads the JSON
and renders every page."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

__all__ = ["FIG", "REDUCE", "pointer", "pointer_figure"]

#: A figure quoted in the text, generated like the tables: ``<!-- fig: FILE | POINTER | HOW -->VALUE<!-- /fig -->``.
#: FILE is a JSON of ``bench/out``; POINTER a JSON pointer into it (RFC 6901: ``/maps/reference/this-machine``,
#: ``~1`` for a ``/`` in a key), where ``*`` takes every member or item at its level (``klein-*``: every
#: member whose name matches; ``sakura|cachegen``: those two); HOW, space-separated: a
#: Python format spec (``.2f``, ``,.0f``, ``+.1%``), optionally a scale (``/1e6``, ``*1000``) and, over
#: several values, ``min``, ``max`` or ``range`` (``lo-hi``; one value if both print alike). A fourth
#: field ``over POINTER`` (``minus POINTER``) divides each value by (subtracts) the one at the same place
#: there (``over OTHER.json:POINTER``: in another JSON). FILE may be
#: ``NAME@COMMIT``: the file as that commit holds it, for the figures of an earlier run the text quotes
#: as such. ``<!-- fig: NAME ARG... -->`` instead names a figure of ``tables.FIGURES`` (with its arguments),
#: for one no pointer reaches.
FIG = re.compile(r"<!-- fig: (?P<spec>[^>]+?) -->(?P<body>[^<]*)<!-- /fig -->")
REDUCE: dict[str, Callable[[list[float]], list[float]]] = {
    "min": lambda v: [min(v)], "max": lambda v: [max(v)], "range": lambda v: sorted({min(v), max(v)}),
}


def pointer(data: object, path: str) -> list:
    """The values at a JSON pointer with ``*`` wildcards (every member or item at that level)."""
    values = [data]
    for raw in path.removeprefix("/").split("/") if path not in ("", "/") else []:
        key, found = raw.replace("~1", "/").replace("~0", "~"), []
        for v in values:
            if key == "*":
                found += list(v.values()) if isinstance(v, dict) else list(v)  # type: ignore[union-attr, call-overload]
            elif isinstance(v, list) and "|" in key:  # items, "|" between their indexes
                found += [v[int(i)] for i in key.split("|")]
            elif "*" in key or "|" in key:  # patterns, "|" between them: the members whose names match
                found += [x for k, x in v.items()  # type: ignore[union-attr]
                          if any(fnmatch.fnmatchcase(k, pattern) for pattern in key.split("|"))]
            else:
                found.append(v[int(key)] if isinstance(v, list) else v[key])  # type: ignore[index]
        values = found
    return values


def pointer_figure(spec: str, load: Callable[[str], object]) -> str:
    """The text of the inline figure ``spec`` (``FILE | POINTER | HOW``), its JSON read by ``load``."""
    name, path, *rest = spec.split(" | ")
    how = rest[0].split() if rest else []
    try:
        values = [float(v) for v in pointer(load(name), path) if v is not None]
        if len(rest) > 1:  # "over POINTER" / "minus POINTER": each value over / less the one there
            op, other = rest[1].split(" ", 1)
            other_name, other = other.split(":", 1) if ":" in other else (name, other)  # FILE:POINTER: another JSON's
            ws = [float(v) for v in pointer(load(other_name), other)]
            ws = ws * len(values) if len(ws) == 1 else ws
            values = [v / w if op == "over" else v - w for v, w in zip(values, ws, strict=True)]
    except (FileNotFoundError, KeyError, IndexError, ValueError, TypeError) as exc:
        raise SystemExit(f"figure {spec!r}: {type(exc).__name__} {exc}") from None
    fmt, reduce = "g", None
    for token in how:
        if token in REDUCE:
            reduce = REDUCE[token]
        elif token[:1] in "/*" and len(token) > 1:
            factor = float(token[1:])
            values = [v / factor if token[0] == "/" else v * factor for v in values]
        else:
            fmt = token
    if not values or (len(values) > 1 and reduce is None):
        raise SystemExit(f"figure {spec!r}: {len(values)} values; a figure of several needs min, max or range")
    texts = list(dict.fromkeys(format(v, fmt) for v in (reduce(values) if reduce else values)))
    unit = "%" if all(text.endswith("%") for text in texts) and len(texts) > 1 else ""
    return (" to " if texts[0].startswith("-") else "-").join(text.removesuffix(unit) for text in texts) + unit
