"""``sakura edit``: edit one image with a template from a shard server, and report the timeline."""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import sys

from sakura._argparse import command_parser
from sakura.edge_client import EdgeSession, LevelPolicy, UrlPolicy, make_policy, policy_names

#: The session's own defaults, read off its public constructor (one place says them).
_SESSION_DEFAULTS = {name: p.default for name, p in inspect.signature(EdgeSession).parameters.items()}


def _parser() -> argparse.ArgumentParser:
    p = command_parser("sakura edit", __doc__)
    p.add_argument("--server", required=True, help="base URL of the shard service, e.g. http://127.0.0.1:8000")
    p.add_argument("--template", required=True, help="template id")
    p.add_argument("--version", default="latest", help="version number or alias")
    p.add_argument("--image", required=True, help="input image: a file, or skimage:NAME")
    p.add_argument("--out", required=True, help="where to write the edited image (PNG)")
    p.add_argument("--policy", default="hybrid",
                   help=f"level policy: {', '.join(policy_names())}, fixed-<level>, or oracle (with --trace: it is "
                        "handed the true bandwidth); hybrid computes or fetches each block")
    p.add_argument("--min-level",
                   help="adaptive policies: never fetch below this level (a quality floor); none: no floor")
    p.add_argument("--trace", help="shape the link in process with this bandwidth trace file; none: no shaping")
    p.add_argument("--trace-offset", type=float, default=0.0, help="start this many seconds into the trace")
    p.add_argument("--rtt-ms", type=float, default=40.0, help="round trip added by --trace, in milliseconds")
    p.add_argument("--slowdown", type=float, default=1.0, help="emulate a phone this many times slower than this CPU")
    p.add_argument("--model", help="this device's model: a diffusers pipeline folder (loaded as a phone would: VAE "
                                   "and transformer only) or a named model; none: the named model the template names")
    p.add_argument("--encode-prompts", action="store_true",
                   help="this device holds the model's text encoder: load --model's whole pipeline and encode "
                        "the template's prompt here instead of downloading its embeddings (unless that is known "
                        "to be sooner)")
    p.add_argument("--cache-dir", help="on-device shard cache directory; none: no cache")
    p.add_argument("--cache-budget-mb", type=float, default=_SESSION_DEFAULTS["cache_budget_bytes"] / 2**20,
                   help="size limit of the on-device shard cache, in MiB (with --cache-dir)")
    p.add_argument("--seed", type=int, default=0, help="noise seed for the edit")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds a network wait may last; with --min-rate it bounds every download")
    p.add_argument("--min-rate", type=float, default=_SESSION_DEFAULTS["min_rate_bytes_per_s"],
                   help="bytes/s below which a download counts as stalled after --timeout")
    p.add_argument("--https-only", action="store_true", help="refuse a plain-http server URL or redirect")
    p.add_argument("--redirect-host", action="append", metavar="HOST",
                   help="follow redirects only to this host (repeatable); none: any http(s) host")
    p.add_argument("--json", action="store_true", help="print the whole timeline as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _say_retries()
    from sakura.emulation import SlowDevice, TraceLink
    from sakura.emulation.traces import load_trace
    from sakura.platform.images import load_image, save_image

    link = policy = None
    if args.trace:
        trace = load_trace(args.trace)
        link = TraceLink(trace, rtt_s=args.rtt_ms / 1000, offset_s=args.trace_offset)
    policy = _policy(args, link)
    image = load_image(args.image)
    device = SlowDevice(args.slowdown) if args.slowdown > 1 else None
    urls = UrlPolicy(https_only=args.https_only,
                     redirect_hosts=frozenset(args.redirect_host) if args.redirect_host else None)
    with EdgeSession(args.server, cache_dir=args.cache_dir, cache_budget_bytes=int(args.cache_budget_mb * 2**20),
                     api_key=os.environ.get("SAKURA_API_KEY"), timeout_s=args.timeout, link=link, device=device,
                     urls=urls, min_rate_bytes_per_s=args.min_rate, encode_prompts=args.encode_prompts,
                     **_models(args)) as session:
        if link is not None:
            link.start()
        result = session.edit(image, args.template, args.version, policy, seed=args.seed)
    save_image(result.image, args.out)
    resized = _resize_note(image.shape, result.image.shape)
    report = {"template": result.template, "version": result.version, "out": args.out,
              "input_size": list(image.shape[:2]), "output_size": list(result.image.shape[:2]),
              **(result.timeline.to_dict() if args.json else result.timeline.summary())}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    if resized:
        print(f"sakura edit: note: {resized}", file=sys.stderr)
    s = result.timeline.summary()
    encoded = f", prompt encoded here {s['precompute_s']:.3f} s" if s["precompute_s"] else ""
    print(f"{result.template} v{result.version} -> {args.out}: {s['latency_s']:.3f} s "
          f"(model load {s['model_load_s']:.3f} s, manifest and objects "
          f"{s['manifest_s'] - s['model_load_s'] - s['precompute_s']:.3f} s{encoded}), "
          f"stalls {s['stall_s']:.3f} s, {s['network_bytes']} bytes, levels {s['levels']} ({s['policy']})")
    return 0


def _resize_note(photo: tuple[int, ...], edited: tuple[int, ...]) -> str:
    """What happened to the user's photo on the way in, if anything (the model works at one size)."""
    (h, w), (eh, ew) = photo[:2], edited[:2]
    if (h, w) == (eh, ew):
        return ""
    crop = " centre-cropped to a square and" if h != w else ""
    return f"the {w}x{h} photo was{crop} resized to {ew}x{eh}, the size the template's model edits at"


def _say_retries() -> None:
    """Retries against a server that does not answer take seconds: say so as they happen."""
    log = logging.getLogger("sakura.edge_client")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("sakura edit: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _models(args: argparse.Namespace) -> dict:
    """``--model``: the app's own model for whatever the manifest calls it (the fingerprint check
    still refuses a template built for another model)."""
    if args.model is None:
        return {}
    from sakura.platform.models import load_model

    adapter = load_model(args.model, phone=not args.encode_prompts)
    return {"models": lambda _name: adapter}


def _policy(args: argparse.Namespace, link: object | None) -> LevelPolicy:
    if args.policy in ("hybrid", "mpc", "throughput"):
        return make_policy(args.policy, min_level=args.min_level)
    if args.policy != "oracle":
        return make_policy(args.policy)
    if link is None:
        raise SystemExit("sakura edit: --policy oracle needs --trace (it is handed the true bandwidth)")
    from sakura.evaluation.oracle import oracle_policy

    offset = args.trace_offset
    return oracle_policy(trace=link.trace, trace_time=lambda t: offset + t)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
