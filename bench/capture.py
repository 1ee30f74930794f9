"""Capture and replay cost per model: KV bytes per template, capture time, replay vs full compute.

    python bench/capture.py [--models tiny-flux tiny-sd3 bench-flux] [--steps 4] [--json OUT.json]

Full computation is what a phone without a KV cache runs (template tokens included every
step); replay is what SAKURA's phone runs. Their ratio is the compute the cache saves.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from sakura.platform.verify import verify_model

DEFAULT_MODELS = ["tiny-flux", "tiny-sd3", "bench-flux"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="timed loops per model (median)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()

    rows = []
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.steps}-step loop")
    header = f"{'model':12s} {'tpl tok':>7s} {'req tok':>7s} {'shards':>6s} {'KV fp16 MB':>10s} {'capture s':>9s} {'full s':>8s} {'replay s':>8s} {'full/replay':>11s} {'exact':>5s}"
    print(header)
    for name in args.models:
        repeats = 1 if name.startswith("bench") else args.repeats
        r = verify_model(name, steps=args.steps, repeats=repeats)
        row = r.to_dict() | {"full_over_replay": r.full_s / r.replay_s, "full_s_per_step": r.full_s / r.steps,
                             "replay_s_per_step": r.replay_s / r.steps}
        rows.append(row)
        print(f"{name:12s} {r.template_tokens:7d} {r.request_tokens:7d} {r.shards:6d} {r.kv_bytes_fp16 / 1e6:10.2f} "
              f"{r.capture_s:9.3f} {r.full_s:8.3f} {r.replay_s:8.3f} {r.full_s / r.replay_s:11.2f} {str(r.exact):>5s}")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"steps": args.steps, "models": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
