"""``sakura serve``: run the shard service on a local Ray until Ctrl-C, then stop cleanly."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sakura serve", description=__doc__)
    p.add_argument("--store", default=os.environ.get("SAKURA_STORE", "file://./sakura-data"))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--mode", choices=["proxy", "redirect"], default="proxy")
    p.add_argument("--cdn-base-url", help="redirect mode: send clients to this base URL instead of presigned S3 URLs")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--disk-cache-dir", help="node-local disk cache (default: none)")
    p.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS"), help="default: start a local Ray")
    args = p.parse_args(argv)

    import ray
    from ray import serve

    from sakura.platform.store import open_store
    from sakura.serve.app import build_app

    open_store(args.store).check_reachable()
    ray.init(address=args.ray_address or "local", include_dashboard=False, logging_level="WARNING")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        overrides = {"store": args.store, "mode": args.mode, "cdn_base_url": args.cdn_base_url,
                     "disk_cache_dir": args.disk_cache_dir}
        serve.run(build_app({k: v for k, v in overrides.items() if v is not None}, num_replicas=args.replicas),
                  name="sakura", route_prefix="/")
        print(f"serving {args.store} on http://{args.host}:{args.port} ({args.mode} mode); Ctrl-C stops", flush=True)
        stop.wait()
    finally:
        serve.shutdown()
        ray.shutdown()
    print("stopped", flush=True)
    return 0


def run_app(store: str, *, host: str = "127.0.0.1", port: int = 0, name: str = "sakura") -> str:
    """Start Serve (on the connected Ray) serving ``store``; returns the base URL. ``port`` 0: a free one."""
    import socket

    from ray import serve

    from sakura.serve.app import build_app

    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_app({"store": store}), name=name, route_prefix="/")
    return f"http://{host}:{port}"


if __name__ == "__main__":
    sys.exit(main())
