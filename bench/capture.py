"""Capture and replay cost per model: KV bytes per template, capture time, replay vs full compute.

    python bench/capture.py [--models tiny-flux tiny-sd3 bench-flux] [--steps 4] [--json OUT.json]

Full computation is what a phone without a KV cache runs (template tokens included every
step); replay is what SAKURA's phone runs. Their ratio is the compute the cache saves.

At a real model's shapes, a few blocks and extrapolated to all of them:

    python bench/capture.py --model klein-4b-shape --blocks 2 [--resolutions 512 1024] [--repeats 1]

builds only ``--blocks`` of FLUX.2 [klein] 4B's 25 blocks (random weights), times each block's
capture (the ``extract`` pass) and replay (one ``cached`` step) and measures its KV, checks the KV
against ``2 x tokens x heads x head_dim x 2 bytes``, extrapolates to every block, and checks the
extrapolation on ``--check`` (klein 4B's block structure at a sixth of its width), built with
``--blocks`` and then whole (``--check-repeats`` times each: it is cheap). Each figure is the
fastest of the repeats. Before and after, it fits this host's throughput on the calibration's
blocks (``calibration.FIT_CASE``): a record of the host's speed that hour, which moves from hour
to hour on this shared host. Writes ``bench/out/capture-NAME.json`` unless ``--json`` says where.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from _args import bench_parser
from _provenance import provenance

from sakura.platform.verify import verify_model

DEFAULT_MODELS = ["tiny-flux", "tiny-sd3", "bench-flux"]
#: The code capture and replay run: what the JSON's provenance digests.
MEASURED = ("sakura.platform.models", "sakura.platform.verify", "sakura.evaluation.calibration")
OUT = Path(__file__).resolve().parent / "out"


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed loops per model (median; default 3), "
                             "or per block with --model (fastest; default 1)")
    parser.add_argument("--model", help="a klein shape (klein-4b-shape, klein-9b-shape): per block, extrapolated")
    parser.add_argument("--blocks", type=int, default=2, help="blocks to build with --model (default 2)")
    parser.add_argument("--resolutions", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--check", default="klein-check-shape", help="the shape the extrapolation is checked on")
    parser.add_argument("--check-resolution", type=int, default=512)
    parser.add_argument("--check-repeats", type=int, default=3)
    args = parser.parse_args()
    if args.model:
        return shape_main(args)

    rows = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.steps}-step loop")
    header = (f"{'model':12s} {'tpl tok':>7s} {'req tok':>7s} {'shards':>6s} {'KV fp16 MB':>10s} {'capture s':>9s} "
              f"{'full s':>8s} {'replay s':>8s} {'full/replay':>11s} {'exact':>5s}")
    print(header)
    for name in args.models:
        repeats = 1 if name.startswith("bench") else (args.repeats or 3)
        r = verify_model(name, steps=args.steps, repeats=repeats)
        row = r.to_dict() | {"full_over_replay": r.full_s / r.replay_s, "full_s_per_step": r.full_s / r.steps,
                             "replay_s_per_step": r.replay_s / r.steps}
        rows.append(row)
        print(f"{name:12s} {r.template_tokens:7d} {r.request_tokens:7d} {r.shards:6d} {r.kv_bytes_fp16 / 1e6:10.2f} "
              f"{r.capture_s:9.3f} {r.full_s:8.3f} {r.replay_s:8.3f} {r.full_s / r.replay_s:11.2f} {str(r.exact):>5s}")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"provenance": provenance(*MEASURED), "steps": args.steps, "models": rows}, fh, indent=2)
    return 0


def shape_main(args: argparse.Namespace) -> int:
    from sakura.platform.models.pipelines.klein_shapes import SHAPES, SOURCES, parameter_counts

    if args.model not in SHAPES or args.check not in SHAPES:
        print(f"--model and --check take one of {sorted(SHAPES)}", file=sys.stderr)
        return 2
    shape, repeats = SHAPES[args.model], args.repeats or 1
    double, single = shape.split(args.blocks)
    params = parameter_counts(shape)
    print(f"{shape.name}: {shape.double_blocks} double + {shape.single_blocks} single blocks, {shape.heads} heads x "
          f"{shape.head_dim}; transformer {params['transformer'] / 1e9:.3f} B parameters, "
          f"built here: {double} double + {single} single; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, load {_load()}")
    report = {"provenance": provenance(*MEASURED), "model": shape.name, "torch": torch.__version__,
              "threads": torch.get_num_threads(),
              "structure": {"double_blocks": shape.double_blocks, "single_blocks": shape.single_blocks,
                            "heads": shape.heads, "head_dim": shape.head_dim, "transformer": dict(shape.transformer),
                            "vae": dict(shape.vae), "parameters": params},
              "built": {"double": double, "single": single}, "repeats": repeats,
              "check_repeats": args.check_repeats, "sources": SOURCES,
              "load_before": _load(), "host_flops_per_s": {"before": _host_flops_per_s()}, "resolutions": {}}
    for resolution in args.resolutions:
        report["resolutions"][str(resolution)] = row = shape_row(shape, args.blocks, resolution, repeats)
        print_row(shape, row)
    report["check"] = check_row(SHAPES[args.check], args.blocks, args.check_resolution, args.check_repeats)
    print_check(report["check"])
    report["load_after"] = _load()
    report["host_flops_per_s"]["after"] = _host_flops_per_s()
    out = Path(args.json) if args.json else OUT / f"capture-{shape.name}.json"
    out.write_text(json.dumps(report, indent=2, default=list))
    print(f"wrote {out}")
    return 0


def shape_row(shape, blocks: int | None, resolution: int, repeats: int) -> dict:
    """One resolution: the measurement, its per-block figures (wall and CPU seconds), the
    analytic KV and the whole model."""
    from sakura.evaluation.block_costs import CLOCKS, extrapolate, measure, per_block
    from sakura.platform.models.pipelines.klein_shapes import build_adapter

    start = time.perf_counter()
    adapter = build_adapter(shape, blocks=blocks, resolution=resolution)
    built_s = time.perf_counter() - start
    m = measure(adapter, repeats=repeats)
    del adapter
    analytic = shape.kv_bytes_per_block(resolution)
    measured_kv = m.kv_bytes_fp16["double"] + m.kv_bytes_fp16["single"]
    return {"resolution": resolution, "reference_tokens": m.reference_tokens, "text_tokens": m.text_tokens,
            "build_s": built_s, "measurement": asdict(m),
            "per_block": {clock: per_block(m, clock) for clock in CLOCKS},
            "kv_bytes_per_block_analytic": analytic, "kv_matches_analytic": all(b == analytic for b in measured_kv),
            "whole_model": {clock: extrapolate(m, shape.double_blocks, shape.single_blocks, clock) for clock in CLOCKS},
            "whole_model_kv_bytes_analytic": shape.blocks * analytic}


def check_row(shape, blocks: int, resolution: int, repeats: int) -> dict:
    """The extrapolation from ``blocks`` blocks against the whole model run, on a shape small enough."""
    part = shape_row(shape, blocks, resolution, repeats)
    whole = shape_row(shape, None, resolution, repeats)
    predicted, measured = part["whole_model"], whole["whole_model"]
    return {"model": shape.name, "resolution": resolution, "built": part["measurement"]["built"],
            "predicted": predicted, "measured": measured,
            "error": {clock: {key: predicted[clock][key] / measured[clock][key] - 1.0 for key in measured[clock]}
                      for clock in measured},
            "part": part, "whole": whole}


def print_row(shape, row: dict) -> None:
    res, vae = row["resolution"], row["measurement"]["vae_encode_s"]
    print(f"\n{res}x{res}: {row['reference_tokens']} reference tokens, {row['text_tokens']} text tokens "
          f"(one VAE encode: {vae['wall']:.2f} s wall, {vae['cpu']:.2f} CPU s)")
    print(f"  {'per block':26s} {'double':>9s} {'single':>9s} {'mean':>9s} {'rest of transformer':>20s}")
    for clock in ("wall", "cpu"):
        b = row["per_block"][clock]
        for phase, label in (("capture", "capture"), ("replay", "replay / step")):
            total = shape.double_blocks * b[phase]["double_s"] + shape.single_blocks * b[phase]["single_s"]
            mean = total / shape.blocks
            print(f"  {label + (' s' if clock == 'wall' else ' CPU s'):26s} {b[phase]['double_s']:9.3f} "
                  f"{b[phase]['single_s']:9.3f} {mean:9.3f} {b[phase]['other_s']:20.3f}")
    kv = row["per_block"]["wall"]["kv_bytes_fp16"]
    print(f"  {'KV fp16 MB':26s} {kv['double'] / 1e6:9.2f} {kv['single'] / 1e6:9.2f}  analytic "
          f"{row['kv_bytes_per_block_analytic'] / 1e6:.2f} ({'equal' if row['kv_matches_analytic'] else 'DIFFERENT'})")
    w, c = row["whole_model"]["wall"], row["whole_model"]["cpu"]
    print(f"  all {shape.blocks} blocks: capture {w['capture_s']:.1f} s ({c['capture_s']:.1f} CPU s), replay "
          f"{w['replay_s']:.1f} s / step ({c['replay_s']:.1f} CPU s), KV {w['kv_bytes_fp16'] / 1e6:.1f} MB "
          f"(analytic {row['whole_model_kv_bytes_analytic'] / 1e6:.1f} MB)")
    sys.stdout.flush()


def print_check(check: dict) -> None:
    built = check["built"]
    print(f"\ncheck on {check['model']} at {check['resolution']}x{check['resolution']}: extrapolated from "
          f"{built['double']} double + {built['single']} single blocks vs the whole model run")
    for clock in ("wall", "cpu"):
        for key in ("capture_s", "replay_s") + (("kv_bytes_fp16",) if clock == "wall" else ()):
            print(f"  {key + ' (' + clock + ')':22s} predicted {check['predicted'][clock][key]:12.4g} measured "
                  f"{check['measured'][clock][key]:12.4g} error {check['error'][clock][key]:+.1%}")


def _host_flops_per_s() -> float:
    """This host's throughput now, fitted on the calibration's blocks (the fastest of 3 each)."""
    from sakura.evaluation.calibration import this_machine_flops_per_s

    return this_machine_flops_per_s(repeats=3)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


if __name__ == "__main__":
    sys.exit(main())
