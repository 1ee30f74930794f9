"""``sakura serve``: run the shard service on a local Ray until Ctrl-C, then stop cleanly."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading

from sakura._argparse import command_parser
from sakura.platform.errors import SakuraError


def main(argv: list[str] | None = None) -> int:
    p = command_parser("sakura serve", __doc__)
    p.add_argument("--store", default=os.environ.get("SAKURA_STORE", "file://./sakura-data"),
                   help="URI of the template library to serve (file://DIR or s3://bucket/prefix); "
                        "the default comes from SAKURA_STORE when set")
    p.add_argument("--host", default="127.0.0.1", help="address the HTTP server listens on")
    p.add_argument("--port", type=int, default=8000, help="TCP port the HTTP server listens on")
    p.add_argument("--mode", choices=["proxy", "redirect"], default="proxy",
                   help="proxy: stream shard bytes through the service; "
                        "redirect: send clients to presigned S3 URLs or --cdn-base-url")
    p.add_argument("--cdn-base-url",
                   help="redirect mode: send clients to this base URL instead of presigned S3 URLs")
    p.add_argument("--replicas", type=int, default=1, help="number of Serve replicas of the shard service")
    p.add_argument("--disk-cache-dir",
                   help="node-local disk cache directory; none: no disk cache, unless SAKURA_DISK_CACHE_DIR names one")
    p.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS"),
                   help="Ray cluster address (the default comes from RAY_ADDRESS); none: start a local Ray")
    p.add_argument("--json", action="store_true", help="print the startup and stop lines as JSON objects")
    args = p.parse_args(argv)
    _check_store(args.store)
    if not args.ray_address:  # a Serve of a shared cluster may already listen there, for this cluster
        _check_port(args.host, args.port)

    import ray
    from ray import serve

    from sakura._ray import join_or_start

    own_cluster = join_or_start(args.ray_address)
    logging.getLogger("ray.serve").setLevel(logging.WARNING)  # the startup line below says what matters
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        url = run_app(args.store, host=args.host, port=args.port, num_replicas=args.replicas, name=APP_NAME,
                      mode=args.mode, cdn_base_url=args.cdn_base_url, disk_cache_dir=args.disk_cache_dir)
        print(json.dumps({"event": "serving", "store": args.store, "url": url, "mode": args.mode}) if args.json
              else f"serving {args.store} on {url} ({args.mode} mode); Ctrl-C stops", flush=True)
        stop.wait()
    finally:
        # Our own local Ray stops with everything on it at once; Serve's graceful shutdown would wait
        # ~30 s for its controller. On a shared cluster, take down only this application.
        if not own_cluster and serve.status().applications.get(APP_NAME) is not None:
            serve.delete(APP_NAME)
        ray.shutdown()
    print(json.dumps({"event": "stopped"}) if args.json else "stopped", flush=True)
    return 0


APP_NAME = "sakura"


def _check_store(uri: str) -> None:
    """Refuse a store that is not there; read-only (the server never creates the library's root)."""
    from sakura.platform.store import StoreError, open_store

    if not open_store(uri, retry=None).root_exists():
        raise StoreError(f"store {uri} does not exist: nothing to serve (build a library into it first)")


class PortInUse(SakuraError, OSError):
    code = "port_in_use"


def _check_port(host: str, port: int) -> None:
    """Refuse a port something already listens on: Serve's proxy would fail to bind it in its own
    process and log it there, while this command announced the other server's URL as its own."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise PortInUse(f"cannot listen on {host}:{port}: {exc.strerror or exc} "
                            "(another server there? choose another --port)") from None


def run_app(store: str, *, host: str = "127.0.0.1", port: int = 0, name: str = "sakura", num_replicas: int = 1,
            **config: object) -> str:
    """Start Serve (on the connected Ray) serving ``store``; returns the base URL. ``port`` 0: a
    free one; ``config``: further ServeConfig fields (None values are left at their defaults)."""
    import socket

    from ray import serve

    from sakura.serve.app import build_app

    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    serve.start(http_options={"host": host, "port": port})
    overrides = {"store": store, **{k: v for k, v in config.items() if v is not None}}
    serve.run(build_app(overrides, num_replicas=num_replicas), name=name, route_prefix="/")
    return f"http://{host}:{port}"


if __name__ == "__main__":
    sys.exit(main())
