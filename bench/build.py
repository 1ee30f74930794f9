"""Build throughput: templates per minute with 1 and with 2 Ray workers, side by side.

    python bench/build.py [--models tiny-flux tiny-sd3] [--templates 6] [--json OUT.json]

Each run builds the same templates into a fresh local store on one local Ray instance; the
time counted is the build itself (Ray start-up excluded, actor start-up and model loading
included).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import ray
from _args import bench_parser
from _provenance import provenance

from sakura.jobs import build
from sakura.jobs.progress import Progress
from sakura.platform.images import load_image

IMAGES = ["skimage:brick", "skimage:coffee", "skimage:chelsea", "skimage:rocket", "skimage:astronaut",
          "skimage:grass", "skimage:gravel", "skimage:retina"]


def write_spec(folder: Path, count: int) -> Path:
    from skimage import io

    lines = ["templates:"]
    for i in range(count):
        io.imsave(folder / f"t{i}.png", load_image(IMAGES[i % len(IMAGES)])[:, ::-1 if i >= len(IMAGES) else 1],
                  check_contrast=False)
        lines += [f"  - id: bench-{i}", "    task: try_on", f"    image: t{i}.png", f"    prompt: template {i}"]
    (folder / "spec.yaml").write_text("\n".join(lines) + "\n")
    return folder / "spec.yaml"


def timed_build(spec: Path, model: str, workers: int, store: str) -> float:
    args = build.parse_args(["--spec", str(spec), "--model", model, "--store", store, "--workers", str(workers),
                             "--cpus-per-worker", "1", "--create"])  # a fresh library each run
    spec_obj, settings, library, fingerprint = build.preflight(args)
    _, jobs = build.plan(spec_obj, settings, library, fingerprint)
    start = time.perf_counter()
    progress = Progress([j.entry.id for j in jobs], stream=open("/dev/null", "w"))
    rows = build.run_jobs(args, settings, library, jobs, progress)
    elapsed = time.perf_counter() - start
    assert all(r.status == "published" for r in rows), rows
    return elapsed


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=["tiny-flux", "tiny-sd3"])
    parser.add_argument("--templates", type=int, default=6)
    args = parser.parse_args()
    stamp = provenance("sakura.jobs", "sakura.platform")  # the tree as the run starts
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        spec = write_spec(Path(tmp), args.templates)
        print(f"{'model':10s} {'workers':>7s} {'seconds':>8s} {'templates/min':>14s} {'speed-up':>8s}")
        for model in args.models:
            base = None
            for workers in (1, 2):
                seconds = timed_build(spec, model, workers, f"file://{tmp}/store-{model}-{workers}")
                per_min = args.templates / seconds * 60
                base = base or per_min
                results.setdefault(model, {})[str(workers)] = {"seconds": seconds, "templates_per_min": per_min,
                                                               "speedup": per_min / base}
                print(f"{model:10s} {workers:7d} {seconds:8.1f} {per_min:14.1f} {per_min / base:8.2f}", flush=True)
    ray.shutdown()
    if args.json:
        Path(args.json).write_text(json.dumps({"provenance": stamp, **results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
