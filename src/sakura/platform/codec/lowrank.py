"""The transform stage of wire format v2: one tensor (K or V of a shard, ``tokens x width``) as
mean + basis + coefficients, quantised with the entropy-coded scalar quantiser's integer codes.

Transform coding as the textbook has it: a Karhunen-Loeve basis (a PCA of the tensor, optionally
weighted by token importance), then one uniform step ``step`` for every coefficient, which is
what minimises squared error at a given entropy-coded rate. Components whose variance is below
the quantiser's own noise (``step^2 / 12``) are dropped: reverse water-filling, so the rank
follows from the step, never fixed. The basis and mean are quantised at the steps that make
their errors cost what a coefficient's does (equal slope): basis row ``j`` at ``step / |c_j|``
(its error is scaled by its coefficients' norm), the mean at ``step / sqrt(tokens)`` (its error
lands on every token). Coefficients are then refitted to the quantised basis by least squares.
Where the tensor is not low rank, the identity basis (no basis at all) codes it at the same step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sakura.platform.codec.container import INT16_MAX, codes_from_bytes, planes_bytes
from sakura.platform.codec.format_v2 import TensorHeader
from sakura.platform.errors import CodecError
from sakura.platform.kv import LowRank

#: Token weights below this share of the mean weight count as this (keeps a weighted fit well posed).
WEIGHT_FLOOR = 0.01


@dataclass(frozen=True)
class TensorCode:
    """One tensor quantised: the integer codes and steps a version 2 payload carries."""

    mean_step: float
    coef_step: float
    mean_codes: np.ndarray  # (width,) int
    coef_codes: np.ndarray  # (tokens, rank) int
    basis_steps: np.ndarray | None = None  # (rank,) float32; None: the identity basis
    basis_codes: np.ndarray | None = None  # (rank, width) int

    @property
    def rank(self) -> int:
        return int(self.coef_codes.shape[1])

    @property
    def header(self) -> TensorHeader:
        return TensorHeader(self.basis_steps is not None, self.rank, self.mean_step, self.coef_step)

    def raw_sections(self) -> list[bytes]:
        """The tensor's sections, raw, in the order format v2 lists them."""
        out = [planes_bytes(self.mean_codes)]
        if self.basis_steps is not None and self.basis_codes is not None:
            out += [self.basis_steps.astype("<f4").tobytes(), planes_bytes(self.basis_codes)]
        return [*out, planes_bytes(np.ascontiguousarray(self.coef_codes.T))]

    def factors(self) -> LowRank:
        """The dequantised factors (what the decoder computes, bit for bit)."""
        mean = self.mean_codes.astype(np.float32) * np.float32(self.mean_step)
        coefficients = self.coef_codes.astype(np.float32) * np.float32(self.coef_step)
        basis = None
        if self.basis_steps is not None and self.basis_codes is not None:
            basis = self.basis_codes.astype(np.float32) * self.basis_steps.astype(np.float32)[:, None]
        return LowRank(coefficients, basis, mean)


def from_sections(header: TensorHeader, sections: list[bytes], tokens: int, width: int) -> TensorCode:
    """A tensor's codes from its decompressed sections (their sizes already match ``header``)."""
    mean_codes = codes_from_bytes(sections[0], (width,))
    coef_codes = codes_from_bytes(sections[-1], (header.rank, tokens)).T
    if not header.basis:
        return TensorCode(header.mean_step, header.coef_step, mean_codes, coef_codes)
    steps = np.frombuffer(sections[1], dtype="<f4").astype(np.float32)
    if not (np.isfinite(steps).all() and (steps > 0).all()):
        raise CodecError("basis steps are not finite and positive")
    basis_codes = codes_from_bytes(sections[2], (header.rank, width))
    return TensorCode(header.mean_step, header.coef_step, mean_codes, coef_codes, steps, basis_codes)


@dataclass(frozen=True)
class Fit:
    """A tensor and its basis, fitted once and then quantised at many steps."""

    x: np.ndarray  # (tokens, width), float64
    mean: np.ndarray  # (width,): the tensor's mean over tokens
    components: np.ndarray  # (k, width): orthonormal rows, most weighted energy first
    coefficients: np.ndarray  # (tokens, k): ``x - mean`` in the components' coordinates
    rms: float  # RMS of ``x`` about its mean: the scale steps are quoted against

    @property
    def tokens(self) -> int:
        return int(self.x.shape[0])

    @property
    def width(self) -> int:
        return int(self.x.shape[1])


def fit(x: np.ndarray, weights: np.ndarray | None = None) -> Fit:
    """The basis of ``x`` (tokens x width): a PCA, weighted per token by ``weights`` if given
    (tokens that matter more are reconstructed better)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (x.shape[0],) or not np.isfinite(w).all() or (w < 0).any():
        raise CodecError(f"token weights must be {x.shape[0]} finite non-negative numbers")
    w = np.maximum(w / w.mean(), WEIGHT_FLOOR) if w.sum() > 0 else np.ones_like(w)
    weighted_mean = (w[:, None] * x).sum(axis=0) / w.sum()
    _, _, vt = np.linalg.svd((x - weighted_mean) * np.sqrt(w)[:, None], full_matrices=False)
    mean = x.mean(axis=0)
    centred = x - mean
    return Fit(x, mean, vt, centred @ vt.T, float(np.sqrt((centred**2).mean())))


def quantise(f: Fit, step: float, *, identity: bool = False) -> TensorCode:
    """``f``'s tensor at coefficient step ``step``: low rank, or with the identity basis."""
    mean_step = fit_step(step / math.sqrt(f.tokens), f.mean)
    mean_codes = np.rint(f.mean / mean_step).astype(np.int32)
    shift = mean_codes * mean_step - f.mean  # the quantised mean's error, taken out of every token
    centred = f.x - (f.mean + shift)
    if identity:
        coef_step = fit_step(step, centred)
        return TensorCode(mean_step, coef_step, mean_codes, np.rint(centred / coef_step).astype(np.int32))
    coefficients = f.coefficients - shift @ f.components.T
    keep = (coefficients**2).mean(axis=0) > step**2 / 12.0
    components, norms = f.components[keep], np.sqrt((coefficients[:, keep] ** 2).sum(axis=0))
    basis_steps = np.maximum(step / np.maximum(norms, 1e-30), np.abs(components).max(axis=1, initial=0.0) / INT16_MAX)
    basis_steps = basis_steps.astype(np.float32).astype(np.float64)
    basis_codes = np.rint(components / basis_steps[:, None]).astype(np.int32)
    live = (basis_codes != 0).any(axis=1)
    basis_codes, basis_steps = basis_codes[live], basis_steps[live]
    basis = basis_codes * basis_steps[:, None]
    # Coefficients refitted to the quantised basis: least squares through its r x r Gram matrix.
    coefficients = np.linalg.lstsq(basis @ basis.T, basis @ centred.T, rcond=None)[0].T if len(basis) \
        else np.zeros((f.tokens, 0))
    coef_step = fit_step(step, coefficients)
    coef_codes = np.rint(coefficients / coef_step).astype(np.int32)
    return TensorCode(mean_step, coef_step, mean_codes, coef_codes, basis_steps.astype(np.float32), basis_codes)


def fit_step(step: float, values: np.ndarray) -> float:
    """``step`` as a float32, coarsened where needed so no code of ``values`` leaves the int16 range."""
    largest = float(np.abs(values).max(initial=0.0))
    return float(np.float32(max(step, largest / INT16_MAX * (1 + 1e-6), 1e-30)))
