"""Shard serving under concurrent clients, side by side in one run (loopback only).

    python bench/serve_load.py [--clients 16] [--seconds 8] [--json OUT.json]

Modes: Ray Serve proxy mode answering from replica memory; proxy mode reading the store on
every request (memory cache off); redirect mode (307 to a presigned URL, then a ranged GET from
the store); and a plain static file server serving the same payloads as files (nginx when
installed, else Python's threaded http.server). The store is a real S3-protocol server (moto).
Every client loop is bounded in time; every address is 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_library(endpoint: str, model: str) -> tuple[str, list[tuple[int, str, int]]]:
    import boto3

    from tests.helpers import make_library

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench-serve")
    uri = f"s3://bench-serve/lib?endpoint={endpoint}"
    library = make_library(uri, ["skimage:brick"], template_id="bench", model=model, steps=2)
    manifest = library.manifest("bench", 1)
    targets = [(s.index, lv.name, s.levels[lv.name].length) for s in manifest.shards for lv in manifest.levels
               if lv.name in ("medium", "full")]
    return uri, targets


def drive(urls: list[str], clients: int, seconds: float, follow: bool, range_header: bool = False) -> dict:
    latencies: list[float] = []
    nbytes = [0]
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    errors: list[str] = []

    def worker(offset: int) -> None:
        try:
            run(offset)
        except Exception as exc:  # surfaced after the join
            errors.append(repr(exc))

    def run(offset: int) -> None:
        local, got = [], 0
        with httpx.Client(timeout=30, follow_redirects=False) as client:
            i = offset
            while time.perf_counter() < stop_at:
                url = urls[i % len(urls)]
                i += 1
                start = time.perf_counter()
                r = client.get(url)
                if follow and r.status_code == 307:
                    r = client.get(r.headers["location"], headers={"Range": r.headers["x-sakura-range"]})
                r.raise_for_status()
                local.append(time.perf_counter() - start)
                got += len(r.content)
        with lock:
            latencies.extend(local)
            nbytes[0] += got

    threads = [threading.Thread(target=worker, args=(i * 7,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed, e.g. {errors[0]}")
    latencies.sort()
    return {"requests": len(latencies), "mb_s": nbytes[0] / elapsed / 1e6, "req_s": len(latencies) / elapsed,
            "p50_ms": 1000 * statistics.median(latencies), "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))]}


def static_server(folder: Path) -> tuple[subprocess.Popen, int, str]:
    port = free_port()
    if shutil.which("nginx"):
        conf = folder / "nginx.conf"
        conf.write_text(f"daemon off; worker_processes 2; user {os.environ.get('USER', 'root')}; "
                        f"pid {folder}/nginx.pid; error_log {folder}/error.log;\n"
                        "events { worker_connections 1024; }\n"
                        "http { access_log off; sendfile on; keepalive_requests 100000;\n"
                        f"  server {{ listen 127.0.0.1:{port}; root {folder}/files; }} }}")
        return subprocess.Popen(["nginx", "-c", str(conf)]), port, "nginx"
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(folder / "files")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port, "python http.server"


def wait_http(url: str) -> None:
    for _ in range(240):
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.25)
    raise RuntimeError(f"{url} did not come up")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--model", default="tiny-flux")
    p.add_argument("--json")
    args = p.parse_args()
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "RAY_AUTH_MODE": "disabled"}.items():
        os.environ.setdefault(k, v)
    import logging

    import ray
    from moto.server import ThreadedMotoServer
    from ray import serve

    from sakura.serve.app import build_app

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    s3_port = free_port()
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=s3_port, verbose=False)
    s3.start()
    endpoint = f"http://127.0.0.1:{s3_port}"
    uri, targets = build_library(endpoint, args.model)
    print(f"{len(targets)} shards, {sum(t[2] for t in targets) / len(targets) / 1e3:.1f} kB mean; "
          f"{args.clients} clients x {args.seconds:.0f} s per mode")

    # Logical CPUs: three one-CPU replicas must fit beside the proxy on a 2-core machine.
    ray.init(address="local", num_cpus=8, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    serve_port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": serve_port}, logging_config={"log_level": "WARNING"})
    serve.run(build_app({"store": uri}), name="memory", route_prefix="/memory")
    serve.run(build_app({"store": uri, "memory_cache_bytes": 0}), name="store", route_prefix="/store")
    serve.run(build_app({"store": uri, "mode": "redirect"}), name="redirect", route_prefix="/redirect")
    base = f"http://127.0.0.1:{serve_port}"
    wait_http(f"{base}/memory/healthz")

    def urls(prefix: str) -> list[str]:
        return [f"{base}/{prefix}/v1/templates/bench/versions/1/shards/{i}/{lv}" for i, lv, _ in targets]

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "files").mkdir()
        for i, lv, _ in targets:
            url = urls("memory")[targets.index((i, lv, _))]
            (folder / "files" / f"{i}-{lv}.bin").write_bytes(httpx.get(url).content)
        proc, port, kind = static_server(folder)
        try:
            wait_http(f"http://127.0.0.1:{port}/")
            plan = [
                ("serve-proxy-memory", urls("memory"), False),
                ("serve-proxy-store", urls("store"), False),
                ("serve-redirect", urls("redirect"), True),
                (f"static ({kind})", [f"http://127.0.0.1:{port}/{i}-{lv}.bin" for i, lv, _ in targets], False),
            ]
            print(f"{'mode':28s} {'MB/s':>8s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s}")
            for name, u, follow in plan:
                r = drive(u, args.clients, args.seconds, follow)
                results[name] = r
                print(f"{name:28s} {r['mb_s']:8.1f} {r['req_s']:8.0f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f}",
                      flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    static = next(v for k, v in results.items() if k.startswith("static"))
    ratios = {k: {"mb_s_vs_static": v["mb_s"] / static["mb_s"], "p50_vs_static": v["p50_ms"] / static["p50_ms"]}
              for k, v in results.items() if not k.startswith("static")}
    for k, v in ratios.items():
        print(f"{k:28s} throughput {v['mb_s_vs_static']:.3f}x of static, p50 {v['p50_vs_static']:.1f}x")
    serve.shutdown()
    ray.shutdown()
    s3.stop()
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "ratios": ratios, "clients": args.clients,
                                               "seconds": args.seconds}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
