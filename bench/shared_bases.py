"""Shared bases: do per-(model, layer) bases learned over a library's templates, shipped once per
model as an object the phone caches, beat each shard's own basis in bytes per edit?

    python bench/shared_bases.py --json bench/out/shared-bases.json

On the trained reference model: a library of templates (the three examples and more on held-out
images, every task); for each example template, the bases of each layer's K and V are fitted over
the *other* templates (leave one out: a new template is never in the basis it is coded with),
stored as fp16 up to the largest rank any coded template uses, and the template is coded at each
default transform level's target against them: the mean and coefficients only, the error spread
by the same marginal allocation, measured on the same calibration queries. Bytes per edit: a warm
phone (holds the bases), a cold one (fetches them first), against the per-shard basis of wire
format v2 as built.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _args import bench_parser  # noqa: E402
from _provenance import provenance  # noqa: E402

from sakura.platform import importance as imp  # noqa: E402
from sakura.platform.codec import (  # noqa: E402
    QueryProbe,
    allocate,  # noqa: E402
    default_levels,
    encode_shards,
)
from sakura.platform.codec.container import CHECKSUM_BYTES, HEADER, SECTION, compress, planes_bytes  # noqa: E402
from sakura.platform.codec.format_v2 import TENSOR  # noqa: E402
from sakura.platform.codec.lowrank import fit_step  # noqa: E402
from sakura.platform.codec.transform import LADDER, NEGLIGIBLE, joint  # noqa: E402
from sakura.platform.images import fit_image, load_image  # noqa: E402
from sakura.platform.kv import ShardKey, TemplateKV  # noqa: E402
from sakura.platform.models import EditRequest, Schedule, Template, load_model, query_probe  # noqa: E402
from sakura.platform.models.registry import default_steps  # noqa: E402

#: The library: the three example templates first (those are coded), then more on held-out images.
LIBRARY = [
    ("skimage:lfw_subset/85", "face_swap"), ("skimage:brick", "try_on"), ("skimage:coffee", "style_transfer"),
    ("skimage:lfw_subset/80", "face_swap"), ("skimage:lfw_subset/83", "face_swap"),
    ("skimage:lfw_subset/88", "face_swap"), ("skimage:lfw_subset/94", "face_swap"),
    ("skimage:retina", "try_on"), ("skimage:cat", "try_on"), ("skimage:hubble_deep_field", "try_on"),
    ("skimage:retina", "style_transfer"), ("skimage:cat", "style_transfer"),
    ("skimage:hubble_deep_field", "style_transfer"), ("skimage:horse", "style_transfer"),
]
CODED = 3
CALIBRATION = ("skimage:chelsea", 101)


@dataclass
class Captured:
    kv: TemplateKV
    scores: imp.ImportanceScores
    probes: list[QueryProbe]


def capture(adapter, image: str, task: str, schedule: Schedule) -> Captured:
    res = adapter.resolution
    template = Template(fit_image(load_image(image), res), "a template", task)
    request = EditRequest(fit_image(load_image(CALIBRATION[0]), res), seed=CALIBRATION[1])
    captured = adapter.capture(template, request, schedule)
    probe: dict = {}
    adapter.replay(captured.kv, template.prompt, request, schedule, probe=probe)
    return Captured(captured.kv, imp.from_attention([captured.attention_mass]),
                    [query_probe(probe[k]) for k in captured.kv.keys])


def fit_shared(library: list[Captured], key: ShardKey, which: int) -> np.ndarray:
    """The basis (k x width, orthonormal rows) of one layer's K or V over ``library``'s templates."""
    xs = [joint((c.kv[key].k, c.kv[key].v)[which]).astype(np.float64) for c in library]
    _, _, vt = np.linalg.svd(np.concatenate([x - x.mean(axis=0) for x in xs]), full_matrices=False)
    return vt


def code_against(x: np.ndarray, basis: np.ndarray, step: float) -> tuple[int, np.ndarray, int]:
    """``x`` (tokens x width) at ``step`` against a shared ``basis`` (its fp16 rows): the bytes of its
    mean and coefficients, the rebuilt tensor, and the rank (a prefix of the shared basis)."""
    tokens = x.shape[0]
    mean = x.mean(axis=0)
    mean_step = fit_step(step / math.sqrt(tokens), mean)
    mean_codes = np.rint(mean / mean_step).astype(np.int32)
    centred = x - mean_codes * mean_step
    energy = ((centred @ basis.T) ** 2).mean(axis=0)
    kept = np.flatnonzero(energy > step**2 / 12.0)
    rank = int(kept.max()) + 1 if len(kept) else 0
    b = basis[:rank]
    coefficients = (np.linalg.lstsq(b @ b.T, b @ centred.T, rcond=None)[0].T if rank
                    else np.zeros((tokens, 0)))
    coef_step = fit_step(step, coefficients)
    coef_codes = np.rint(coefficients / coef_step).astype(np.int32)
    rebuilt = (coef_codes * np.float32(coef_step)).astype(np.float32) @ b.astype(np.float32) \
        + (mean_codes * np.float32(mean_step)).astype(np.float32)
    sections = [planes_bytes(mean_codes), planes_bytes(np.ascontiguousarray(coef_codes.T))]
    nbytes = TENSOR.size + sum(SECTION.size + len(compress(s, 9)) for s in sections)
    return nbytes, rebuilt, rank


def shared_template_bytes(c: Captured, bases: dict, target: float) -> tuple[int, dict]:
    """``c`` coded against ``bases`` at ``target``: its bytes and each unit's rank."""
    units, ranks, keys = [], [], c.kv.keys
    for key, probe in zip(keys, c.probes):
        pair = c.kv[key]
        exact = probe.output(pair.k, pair.v)
        for which in (0, 1):
            x = joint((pair.k, pair.v)[which]).astype(np.float64)
            heads, tokens, head_dim = pair.k.shape
            rms = float(np.sqrt(((x - x.mean(axis=0)) ** 2).mean()))
            options, unit_ranks = [], []
            for rung, relative in enumerate(LADDER):
                nbytes, rebuilt, rank = code_against(x, bases[key, which], max(relative * rms, 1e-30))
                tensor = rebuilt.reshape(tokens, heads, head_dim).transpose(1, 0, 2)
                error = probe.squared_error(exact, *((tensor, pair.v) if which == 0 else (pair.k, tensor)))
                options.append(allocate.Option(nbytes, error, rung))
                unit_ranks.append(rank)
                if rms == 0 or error < NEGLIGIBLE * target**2:
                    break
            units.append(options)
            ranks.append(unit_ranks)
    picks = allocate.marginal(units, len(keys) * target**2)
    overhead = HEADER.size + 8 + 1 + CHECKSUM_BYTES  # container, level name, section count, trailer
    total = sum(units[u][i].nbytes for u, i in enumerate(picks)) + overhead * len(keys)
    return total, {f"{keys[u // 2]}/{'KV'[u % 2]}": ranks[u][i] for u, i in enumerate(picks)}


def basis_object_bytes(bases: dict, ranks: dict) -> int:
    """The shared bases as the phone would fetch them: each unit's rows up to its largest rank, fp16, zstd."""
    total = 0
    for (key, which), basis in bases.items():
        top = max(r for name, r in ranks.items() if name == f"{key}/{'KV'[which]}")
        total += len(compress(basis[:top].astype(np.float16).tobytes(), 19)) + SECTION.size
    return total


def main() -> int:
    p = bench_parser(__doc__)
    args = p.parse_args()
    adapter = load_model("reference")
    schedule = Schedule(steps=default_steps("reference"))
    print(f"capturing {len(LIBRARY)} templates ...", flush=True)
    library = [capture(adapter, image, task, schedule) for image, task in LIBRARY]
    levels = {name: lv for name, lv in default_levels().items() if lv.transform is not None}
    rows = []
    for i in range(CODED):
        c, others = library[i], [t for j, t in enumerate(library) if j != i and LIBRARY[j][0] != LIBRARY[i][0]]
        bases = {(key, which): fit_shared(others, key, which) for key in c.kv.keys for which in (0, 1)}
        keys = c.kv.keys
        row: dict = {"template": f"{LIBRARY[i][0]} ({LIBRARY[i][1]})", "fitted_on": len(others)}
        all_ranks: dict = {}
        for name, level in levels.items():
            own = sum(map(len, encode_shards([c.kv[k] for k in keys], level, [c.scores[k] for k in keys], c.probes)))
            shared, ranks = shared_template_bytes(c, bases, level.transform.target)  # type: ignore[union-attr]
            for unit, rank in ranks.items():
                all_ranks.setdefault(unit, []).append(rank)
            row[name] = {"own_basis_bytes": own, "shared_basis_bytes": shared, "ranks": ranks}
        row["basis_object_bytes"] = basis_object_bytes(bases, {u: max(r) for u, r in all_ranks.items()})
        for name in levels:
            r = row[name]
            r["warm_over_own"] = r["shared_basis_bytes"] / r["own_basis_bytes"]
            r["cold_over_own"] = (r["shared_basis_bytes"] + row["basis_object_bytes"]) / r["own_basis_bytes"]
            print(f"{row['template']:40s} {name:8s} own {r['own_basis_bytes']:7d} B  "
                  f"shared {r['shared_basis_bytes']:7d} B (+ bases {row['basis_object_bytes']} B cold): "
                  f"warm {r['warm_over_own']:.2f}x, "
                  f"cold {r['cold_over_own']:.2f}x of own", flush=True)
        rows.append(row)
    summary = {name: {"warm_over_own": float(np.mean([r[name]["warm_over_own"] for r in rows])),
                      "cold_over_own": float(np.mean([r[name]["cold_over_own"] for r in rows]))} for name in levels}
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"provenance": provenance("sakura.platform.codec"), "model": "reference",
                                         "library": LIBRARY, "summary": summary, "templates": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
