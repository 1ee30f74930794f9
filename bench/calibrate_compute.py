"""Calibrate the FLOP compute model on this CPU: predicted vs measured seconds of every block.

    python bench/calibrate_compute.py --json bench/out/calibration.json [--repeats 3] [--no-large]

Builds FLUX.2, FLUX.1 and SD3.5-style transformers of real diffusers classes at several widths
(``sakura.evaluation.calibration``: the fitted case, the checked cases, and with ``--no-large``
left out the phone-scale ones), times each block by hooks, fits this machine's effective
throughput (counted FLOPs / seconds) on the fitted case only and predicts every other block from
it. Two settings: one thread on the process's CPU clock (what the test checks) and torch's
default threads on the wall clock (the ``this-machine`` profile's throughput: run it on a quiet
machine; the load averages before and after are written with the figures).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import torch
from _args import bench_parser
from _provenance import provenance

from sakura.evaluation.calibration import (
    CHECK_CASES,
    FIT_CASE,
    LARGE_CASES,
    BlockTime,
    fit_flops_per_s,
    measure,
)


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__)
    p.add_argument("--repeats", type=int, default=3, help="timed forwards per case (fastest kept), after one warm-up")
    p.add_argument("--no-large", action="store_true", help="leave out the phone-scale cases (seconds per block)")
    args = p.parse_args(argv)
    cases = [FIT_CASE, *CHECK_CASES, *(() if args.no_large else LARGE_CASES)]
    # the wall clock first, while the machine is as quiet as when the run started
    settings = {"default-threads-wall-clock": (torch.get_num_threads(), "wall"), "one-thread-cpu-clock": (1, "cpu")}
    out: dict = {"provenance": provenance("sakura.evaluation.calibration", "sakura.evaluation.flops",
                                          "sakura.evaluation.architectures"),
                 "command": "python bench/calibrate_compute.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                 "torch": torch.__version__, "cpu": _cpu_name(), "cores": os.cpu_count(),
                 "fit_case": asdict(FIT_CASE), "load_average_before": os.getloadavg(), "settings": {}}
    for name, (threads, clock) in settings.items():
        times = measure(cases, repeats=args.repeats, threads=threads, clock=clock)
        fit = fit_flops_per_s([t for t in times if t.case == FIT_CASE])
        print(f"\n{name}: {threads} thread(s), {clock} clock; fitted on {FIT_CASE.name}: {fit / 1e9:.1f} GFLOP/s")
        print(f"{'case':42s} {'block':6s} {'GFLOP':>7s} {'measured ms':>11s} {'predicted ms':>12s} {'error':>7s}")
        for t in times:
            mark = " (fitted)" if t.case == FIT_CASE else ""
            print(f"{t.case.name:42s} {t.kind:6s} {t.flops / 1e9:7.2f} {t.seconds * 1e3:11.1f} "
                  f"{t.predicted_s(fit) * 1e3:12.1f} {t.error(fit):+7.1%}{mark}", flush=True)
        checked = [abs(t.error(fit)) for t in times if t.case != FIT_CASE]
        print(f"largest |error| over the {len(checked)} blocks not fitted: {max(checked):.1%}")
        out["settings"][name] = {"threads": threads, "clock": clock, "flops_per_s": fit,
                                 "max_abs_error_not_fitted": max(checked), "blocks": [_row(t, fit) for t in times]}
    out["load_average_after"] = os.getloadavg()
    out["this_machine_flops_per_s"] = out["settings"]["default-threads-wall-clock"]["flops_per_s"]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
        print(f"\nwrote {args.json}")
    return 0


def _row(t: BlockTime, flops_per_s: float) -> dict:
    return {"case": t.case.name, **asdict(t.case), "width": t.case.width, "block": t.kind, "fitted": t.case == FIT_CASE,
            "flops": t.flops, "measured_s": t.seconds, "predicted_s": t.predicted_s(flops_per_s),
            "error": t.error(flops_per_s)}


def _cpu_name() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


if __name__ == "__main__":
    sys.exit(main())
