"""The ``sakura`` command.

Every error is one line on stderr (what, which input, what to do) and a non-zero exit;
``--debug`` (anywhere on the line) or ``SAKURA_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from sakura import __version__
from sakura._argparse import HelpFormatter, SubcommandParser, group
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
    debug = "--debug" in argv or os.environ.get("SAKURA_DEBUG", "") not in ("", "0")
    argv = [arg for arg in argv if arg != "--debug"]
    try:
        return _run(argv)
    except KeyboardInterrupt:
        if debug:
            raise
        print("sakura: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every error is one line, unless asked for the traceback
        if debug:
            raise
        print(f"sakura: error: {_one_line(exc)}", file=sys.stderr)
        return 1


def _run(argv: list[str]) -> int:
    if argv and argv[0] in DELEGATED:
        return _delegate(DELEGATED[argv[0]], argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    return int(args.run(args) or 0)


def _one_line(exc: BaseException) -> str:
    """A typed error's own message; anything else is unexpected, and says how to see more."""
    if isinstance(exc, SakuraError):
        return str(exc)
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"unexpected {type(exc).__name__}{': ' + text if text else ''} (run with --debug for the traceback)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sakura", description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"sakura {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks (also SAKURA_DEBUG=1)")
    commands = parser.add_subparsers(title="commands", parser_class=SubcommandParser)

    models = group(commands, "models", help="list and verify model adapters")
    ls = models.add_parser("list", help="list the models this installation can load by name")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(run=_models_list)

    verify = models.add_parser("verify", help="check that replaying cached template KV equals full computation")
    verify.add_argument("model", help="a named model (see `sakura models list`) or a diffusers checkpoint directory")
    verify.add_argument("--steps", type=int, default=4, help="denoising steps")
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

    spec = group(commands, "spec", help="template spec files")
    check = spec.add_parser("check", help="validate a template spec file")
    check.add_argument("path", help="the spec's YAML file")
    check.add_argument("--json", action="store_true", help="print JSON: the templates, or every problem found")
    check.set_defaults(run=_spec_check)
    return parser


def _delegate(module: str, argv: list[str]) -> int:
    """Run a job module's own ``main`` (its flags are documented by ``--help`` there)."""
    import importlib

    return int(importlib.import_module(module).main(argv) or 0)


def _models_list(args: argparse.Namespace) -> int:
    from sakura.platform.models.registry import model_catalogue

    models = model_catalogue()
    if args.json:
        print(json.dumps({name: description for name, _, description in models}, indent=2))
    else:
        width = max(len(name) for name, _, _ in models)
        for name, family, description in models:
            print(f"{name:{width}s}  {family:11s} {description}")
    return 0


def _models_verify(args: argparse.Namespace) -> int:
    from sakura.platform.verify import verify_model

    report = verify_model(args.model, steps=args.steps, repeats=args.repeats,
                          say=lambda stage: print(f"sakura models verify: {stage} ...", file=sys.stderr, flush=True))
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
    from sakura.platform.errors import SpecError
    from sakura.platform.spec import load_spec

    try:
        spec = load_spec(args.path)
    except SpecError as exc:
        if not args.json:
            raise
        print(json.dumps({"ok": False, "problems": exc.problems}, indent=2))
        return 1
    if args.json:
        print(json.dumps({"ok": True, "templates": [e.model_dump(mode="json") for e in spec.templates]}, indent=2))
        return 0
    for entry in spec.templates:
        print(f"{entry.id:24s} {entry.task.value:15s} {entry.image}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
