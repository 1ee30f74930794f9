"""The catalogue at scale: a library of N templates next to one of 10, in one run.

    python bench/catalog_scale.py --templates 10000 --json bench/out/catalog_scale.json

Every version is published through the library's own protocol (claim, level files and context
objects, create-only manifest, alias compare-and-swap); only the payload takes a fast path: one
template is built for real and the others carry copies of its bytes under their own keys. Both
libraries live on local disk and are served by the same FastAPI app Ray Serve runs, on uvicorn
over loopback (one process, this machine's 2 cores). Measured for each: the catalogue's first
page and a page deep in it, manifest and shard requests of random templates (p50/p99), the
admin listing (`sakura catalog ls`), the build's planning for one template, `gc --dry-run` of one
template, the serving process's RSS growth, and the RSS of a Ray Serve replica of the library
once it answers and after the same requests. ``p99_ratio`` (top level) is the larger of the
manifest and shard p99 ratios, N templates over 10, with the service's default caches.

At 10 templates those caches hold every manifest and shard after the first few requests; at
10,000 almost nothing repeats, so that ratio compares a dictionary lookup with a store read.
``p99_ratio_uncached`` isolates what the issue asks about (nothing on a request path that grows
with the catalogue): the same requests with the manifest cache at one entry, the memory tier off
and no template asked twice in a row, so both libraries read the store for every request.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _args import bench_parser  # noqa: E402
from _provenance import provenance  # noqa: E402

from sakura.platform import http_api, layout  # noqa: E402
from sakura.platform.library import TemplateLibrary  # noqa: E402
from sakura.platform.manifest import Manifest  # noqa: E402
from sakura.platform.store import open_store  # noqa: E402
from tests.edge_servers import ApiServer  # noqa: E402
from tests.helpers import make_library  # noqa: E402

SEED = "seed"


def publish_copies(uri: str, seed: Manifest, ids: list[str]) -> float:
    """Publish a version of each id with the seed's bytes; seconds per publish."""
    library = TemplateLibrary(open_store(uri))
    source = TemplateLibrary(open_store(uri)).store
    blobs = {lv.name: source.get(lv.key) for lv in seed.levels}
    objects = {e.name: source.get(e.key) for e in [*seed.context, *seed.source]}
    start = time.perf_counter()
    for template_id in ids:
        version = library.claim_version(template_id, seed.content_hash)
        levels = []
        for lv in seed.levels:
            key = layout.level_key(template_id, version, lv.name)
            library.store.put(key, blobs[lv.name])
            levels.append(lv.model_copy(update={"key": key, "store": None}))
        context, source_objects = [], []
        for entries, out in ((seed.context, context), (seed.source, source_objects)):
            for e in entries:
                key = layout.context_key(template_id, version, e.name)
                library.store.put(key, objects[e.name])
                out.append(e.model_copy(update={"key": key}))
        manifest = seed.model_copy(update={"template_id": template_id, "version": version, "levels": levels,
                                           "context": context, "source": source_objects, "importance_key": None})
        library.publish(manifest)
    return (time.perf_counter() - start) / max(1, len(ids))


def build_library(root: Path, n: int) -> tuple[str, list[str], float]:
    uri = f"file://{root}"
    make_library(uri, ["skimage:brick"], template_id=SEED, model="reference", steps=2)
    seed = TemplateLibrary(open_store(uri)).manifest(SEED, 1)
    ids = [f"t{i:05d}" for i in range(n - 1)]
    return uri, [SEED, *ids], publish_copies(uri, seed, ids)


def quantiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50_ms": 1000 * statistics.median(ordered),
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], "n": len(ordered)}


def timed(client: httpx.Client, paths: list[str]) -> dict:
    samples = []
    for path in paths:
        start = time.perf_counter()
        r = client.get(path)
        r.raise_for_status()
        samples.append(time.perf_counter() - start)
    return quantiles(samples)


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


#: The service with its caches out of the way: one manifest entry (the least it takes) and no
#: memory tier; with no template asked twice in a row, every request reads the store.
UNCACHED = {"manifest_cache_entries": 1, "memory_cache_bytes": 0}


def picks_without_repeats(ids: list[str], n: int, rng: random.Random) -> list[str]:
    """``n`` random templates, never the same one twice in a row."""
    out: list[str] = []
    while len(out) < n:
        pick = rng.choice(ids)
        if not out or pick != out[-1]:
            out.append(pick)
    return out


def manifests_and_shards(client: httpx.Client, seed: Manifest, picks: list[str], rng: random.Random) -> dict:
    """The manifest of each template in ``picks``, then a random shard of each."""
    return {"manifest": timed(client, [http_api.manifest_path(t, 1) for t in picks]),
            "shard": timed(client, [http_api.shard_path(t, 1, rng.randrange(len(seed.shards)), "medium")
                                    for t in picks])}


def uncached_latencies(uri: str, ids: list[str], seed: Manifest, requests: int, rng: random.Random) -> dict:
    """Manifest and shard requests of random templates (never the same twice in a row) to a
    service whose caches are out of the way (:data:`UNCACHED`)."""
    picks = picks_without_repeats(ids, requests, rng)
    with ApiServer(uri, **UNCACHED) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        client.get(http_api.CATALOGUE).raise_for_status()  # warm: imports, first store reads
        return manifests_and_shards(client, seed, picks, rng)


def measure(uri: str, ids: list[str], requests: int, rng: random.Random) -> dict:
    from sakura import admin
    from sakura.jobs.build import plan, prepare
    from sakura.platform.spec import parse_spec

    library = TemplateLibrary(open_store(uri))
    seed = library.manifest(SEED, 1)
    process = psutil.Process()
    rss_before = process.memory_info().rss
    with ApiServer(uri) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        client.get(http_api.CATALOGUE).raise_for_status()  # warm: imports, first store reads
        deep = http_api.encode_cursor(sorted(ids, key=lambda t: t + "/")[len(ids) // 2])
        picks = [rng.choice(ids) for _ in range(requests)]
        out = {
            "catalogue_first_page": timed(client, [http_api.CATALOGUE + "?limit=100"] * 20),
            "catalogue_deep_page": timed(client, [http_api.CATALOGUE + f"?limit=100&cursor={deep}"] * 20),
            **manifests_and_shards(client, seed, picks, rng),
        }
    out["server_rss_growth_mb"] = (process.memory_info().rss - rss_before) / 2**20
    out["uncached"] = uncached_latencies(uri, ids, seed, requests, rng)
    quiet = argparse.Namespace(store=uri, json=True, template=None, keep=1, dry_run=True, grace_s=3600.0)
    with open("/dev/null", "w") as devnull:
        stdout, sys.stdout = sys.stdout, devnull
        try:
            out["catalog_ls_s"] = seconds(lambda: admin.catalog_ls(quiet))
        finally:
            sys.stdout = stdout
    spec = parse_spec({"templates": [{"id": ids[-1], "task": "try_on", "image": "skimage:brick", "prompt": "p"}]},
                      source="bench", base_dir=ROOT)
    spec, settings, lib, fingerprint = prepare(spec, model="reference", store=uri, steps=2, create=False)
    out["build_plan_one_template_s"] = seconds(lambda: plan(spec, settings, lib, fingerprint))
    out["gc_dry_run_one_template_s"] = seconds(lambda: library.gc_candidates(ids[-1], keep=1))
    return out


def replica_memory(libraries: dict[int, tuple[str, list[str]]], requests: int, rng: random.Random) -> dict:
    """A Ray Serve replica of each library (one local Ray, one application per library): its RSS
    once it answers, and after ``requests`` manifest and shard requests of random templates."""
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray import serve

    from sakura.serve.app import build_app
    from tests.edge_servers import free_port

    ray.init(address="local", num_cpus=4, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    out = {}
    try:
        for n, (uri, ids) in libraries.items():
            serve.run(build_app({"store": uri}), name=f"lib{n}", route_prefix=f"/lib{n}")
            replica = next(p for p in psutil.process_iter(["cmdline"])
                           if f"ServeReplica:lib{n}:" in " ".join(p.info["cmdline"] or []))
            with httpx.Client(base_url=f"http://127.0.0.1:{port}/lib{n}", timeout=60) as client:
                client.get(http_api.CATALOGUE).raise_for_status()
                ready = replica.memory_info().rss
                seed = TemplateLibrary(open_store(uri)).manifest(SEED, 1)
                for t in (rng.choice(ids) for _ in range(requests)):
                    client.get(http_api.manifest_path(t, 1)).raise_for_status()
                    client.get(http_api.shard_path(t, 1, rng.randrange(len(seed.shards)), "medium")).raise_for_status()
                served = replica.memory_info().rss
            out[n] = {"replica_rss_ready_mb": ready / 2**20, "replica_rss_after_mb": served / 2**20}
    finally:
        serve.shutdown()
        ray.shutdown()
    return out


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__.split("\n\n")[0])
    p.add_argument("--templates", type=int, default=10_000, help="templates in the large library")
    p.add_argument("--baseline", type=int, default=10, help="templates in the small library")
    p.add_argument("--requests", type=int, default=400, help="manifest and shard requests per library")
    args = p.parse_args(argv)
    stamp = provenance("sakura.serve", "sakura.platform")  # the tree as the run starts
    rng = random.Random(0)
    results, libraries = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (args.baseline, args.templates):
            uri, ids, publish_s = build_library(Path(tmp) / f"lib{n}", n)
            libraries[n] = (uri, ids)
            results[n] = {"templates": n, "publish_s_per_version": publish_s, **measure(uri, ids, args.requests, rng)}
        for n, memory in replica_memory(libraries, args.requests, rng).items():
            results[n].update(memory)
            print(json.dumps(results[n], indent=1))
    small, large = results[args.baseline], results[args.templates]
    ratios = {k: large[k]["p99_ms"] / small[k]["p99_ms"] for k in ("manifest", "shard")}
    uncached = {k: large["uncached"][k]["p99_ms"] / small["uncached"][k]["p99_ms"] for k in ("manifest", "shard")}
    report = {"provenance": stamp, "p99_ratio": max(ratios.values()), "p99_ratios": ratios,
              "p99_ratio_uncached": max(uncached.values()), "p99_ratios_uncached": uncached,
              "baseline": small, "large": large,
              "command": "python bench/catalog_scale.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    print(f"p99 ratio {args.templates} / {args.baseline} templates: manifest {ratios['manifest']:.2f}, "
          f"shard {ratios['shard']:.2f}; caches out of the way: manifest {uncached['manifest']:.2f}, "
          f"shard {uncached['shard']:.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
