"""Codec levels as data: a new level is a new entry, not new code.

Three kinds. A *lossless* level reproduces the input bit for bit. A *transform* level (wire format
v2, :mod:`~sakura.platform.codec.lowrank`) codes each shard's K and V as mean + basis +
coefficients, with a rank and step per tensor chosen at build time to meet its ``target``
attention-output error at the fewest bytes. A *class* level (format v1) lists precision classes
from the most to the least important rows: each takes a fraction of every head's template tokens
(ranked by importance) and a nominal bit depth; the quantiser is entropy-coded, so a class of
``b`` bits costs roughly ``b - 0.5`` bits per value after zstd, and fractional bit depths are
allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sakura.platform.errors import CodecError

LEVEL_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
MAX_CLASSES = 16


class PrecisionClass(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fraction: float = Field(gt=0.0, le=1.0)
    bits: float = Field(ge=1.0, le=16.0)


class TransformSpec(BaseModel):
    """A transform level's stage: a low-rank basis per tensor, the rank and step per tensor chosen
    at build time to meet ``target`` at the fewest bytes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["lowrank"] = "lowrank"
    #: Relative attention-output error the level is built to: root mean square over a template's
    #: shards of ``|O' - O| / |O|`` (O: the attention output of calibration queries with exact KV).
    target: float = Field(gt=0.0, le=1.0)
    #: Fit each basis with token weights from importance (a weighted PCA); False: every token alike.
    weighted: bool = True
    #: How the error is spread over shards and K/V (:mod:`~sakura.platform.codec.allocate`):
    #: ``marginal`` by measured error per byte, ``uniform`` the same relative step everywhere.
    allocation: Literal["marginal", "uniform"] = "marginal"


class LevelSpec(BaseModel):
    """One representation of a shard. ``lossless`` levels reproduce the input bit for bit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=LEVEL_NAME_PATTERN)
    lossless: bool = False
    classes: tuple[PrecisionClass, ...] = ()
    #: Half-range, in standard deviations, that ``2**bits - 1`` steps span (values beyond it
    #: are not clipped: they just cost more bits).
    kappa: float = Field(default=3.0, gt=0.0, le=64.0)
    #: Rotate head_dim by a Hadamard matrix first (spreads outlier channels; power-of-2 dims).
    rotate: bool = True
    zstd_level: int = Field(default=9, ge=1, le=22)
    #: A transform stage (wire format v2) instead of precision classes.
    transform: TransformSpec | None = None

    @model_validator(mode="after")
    def _classes_fit_the_kind(self) -> LevelSpec:
        if self.lossless and (self.classes or self.transform):
            raise ValueError("a lossless level has no precision classes and no transform")
        if self.transform is not None and self.classes:
            raise ValueError("a transform level has no precision classes")
        if not self.lossless and self.transform is None:
            if not 1 <= len(self.classes) <= MAX_CLASSES:
                raise ValueError(f"a lossy level needs 1 to {MAX_CLASSES} precision classes")
            total = sum(c.fraction for c in self.classes)
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"class fractions must sum to 1, not {total}")
        return self

    @property
    def format(self) -> int:
        """The wire format version this level's payloads use (a phone that cannot read it skips it)."""
        return 2 if self.transform is not None else 1


def _lossy(name: str, *classes: tuple[float, float]) -> LevelSpec:
    return LevelSpec(name=name, classes=tuple(PrecisionClass(fraction=f, bits=b) for f, b in classes))


def _transform(name: str, target: float) -> LevelSpec:
    return LevelSpec(name=name, transform=TransformSpec(target=target))


#: The class levels of wire format v1, as builds produced them until transform levels replaced
#: them: still valid level specs, and what v1 payloads (and the golden fixtures) were made with.
V1_LEVELS: tuple[LevelSpec, ...] = (
    _lossy("compact", (0.1, 4.0), (0.9, 2.5)),
    _lossy("medium", (0.1, 6.0), (0.3, 5.0), (0.6, 4.0)),
    LevelSpec(name="full", lossless=True),
)

#: The levels every build produces, smallest first: ``compact`` and ``medium`` at the
#: attention-output error of the v1 levels of those names on the trained reference model
#: (``bench/out/codec-reference-frontier.json``: 0.029 and 0.0043), far fewer bytes.
DEFAULT_LEVELS: tuple[LevelSpec, ...] = (
    _transform("compact", 0.03),
    _transform("medium", 0.004),
    LevelSpec(name="full", lossless=True),
)


def default_levels() -> dict[str, LevelSpec]:
    return {level.name: level for level in DEFAULT_LEVELS}


def v1_levels() -> dict[str, LevelSpec]:
    return {level.name: level for level in V1_LEVELS}


def parse_levels(raw: Iterable[dict[str, Any]]) -> dict[str, LevelSpec]:
    """Levels from plain data (e.g. a YAML list); raises :class:`CodecError` naming the level."""
    levels: dict[str, LevelSpec] = {}
    for i, entry in enumerate(raw):
        name = entry.get("name", f"#{i + 1}") if isinstance(entry, dict) else f"#{i + 1}"
        try:
            level = LevelSpec.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(level)"
            raise CodecError(f"level {name!r}: field '{field}': {err['msg']}") from None
        if level.name in levels:
            raise CodecError(f"level {level.name!r}: duplicate level name")
        levels[level.name] = level
    return levels
