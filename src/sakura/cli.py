"""The ``sakura`` command."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from sakura.platform.errors import SakuraError

#: Commands that are whole programs of their own; their flags are theirs (`sakura build --help`).
DELEGATED = {
    "build": "sakura.jobs.build",
    "demo": "sakura.demo",
    "edit": "sakura.edit",
    "serve": "sakura.serve.local",
    "train-reference": "sakura.jobs.train_reference",
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        try:
            return _delegate(DELEGATED[argv[0]], argv[1:])
        except SakuraError as exc:
            print(f"sakura: error: {exc}", file=sys.stderr)
            return 1
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except SakuraError as exc:
        print(f"sakura: error: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sakura", description=__doc__)
    commands = parser.add_subparsers(title="commands")

    models = commands.add_parser("models", help="list and verify model adapters").add_subparsers(title="models")
    ls = models.add_parser("list", help="list the named models")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=_models_list)

    verify = models.add_parser("verify", help="check that replaying cached template KV equals full computation")
    verify.add_argument("model", help="a named model (see `sakura models list`) or a diffusers checkpoint directory")
    verify.add_argument("--steps", type=int, default=4, help="denoising steps (default 4)")
    verify.add_argument("--repeats", type=int, default=3, help="timed repetitions per loop (median reported)")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.set_defaults(run=_models_verify)

    export = models.add_parser("export", help="write a tiny diffusers pipeline folder (no download) to try --model DIR")
    export.add_argument("name", help="tiny-klein, tiny-kontext or tiny-sd3-pipeline")
    export.add_argument("--out", required=True, help="a new (or empty) folder")
    export.set_defaults(run=_models_export)

    commands.add_parser("demo", help="run the end-to-end demo on the embedded default")
    commands.add_parser("build", help="build and publish a template library (a Ray job)")
    commands.add_parser("edit", help="edit an image with a template from a shard server (the edge client)")
    commands.add_parser("serve", help="serve a library over HTTP with Ray Serve")
    commands.add_parser("train-reference", help="train the reference editing model (a Ray job)")

    from sakura import admin

    admin.add_commands(commands)

    spec = commands.add_parser("spec", help="template spec files").add_subparsers(title="spec")
    check = spec.add_parser("check", help="validate a template spec file")
    check.add_argument("path")
    check.set_defaults(run=_spec_check)
    return parser


def _delegate(module: str, argv: list[str]) -> int:
    """Run a job module's own ``main`` (its flags are documented by ``--help`` there)."""
    import importlib

    return int(importlib.import_module(module).main(argv) or 0)


def _models_list(args: argparse.Namespace) -> int:
    from sakura.platform.models import named_models

    models = named_models()
    if args.json:
        print(json.dumps({name: m.description for name, m in models.items()}, indent=2))
    else:
        for name, m in models.items():
            print(f"{name:12s} {m.family:5s} {m.description}")
    return 0


def _models_verify(args: argparse.Namespace) -> int:
    from sakura.platform.verify import verify_model

    report = verify_model(args.model, steps=args.steps, repeats=args.repeats)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for key, value in report.to_dict().items():
            print(f"{key:16s} {value}")
    return 0 if report.exact else 3


def _models_export(args: argparse.Namespace) -> int:
    from sakura.platform.models.pipelines.tiny import export

    print(export(args.name, args.out))
    return 0


def _spec_check(args: argparse.Namespace) -> int:
    from sakura.platform.spec import load_spec

    spec = load_spec(args.path)
    for entry in spec.templates:
        print(f"{entry.id:24s} {entry.task.value:15s} {entry.image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
