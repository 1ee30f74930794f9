"""Operator commands over a library: ``catalog ls|show``, ``alias set|rm``, ``gc``."""

from __future__ import annotations

import argparse
import functools
import json
import os
from collections.abc import Callable
from typing import Any

from sakura._argparse import group
from sakura.platform.library import LATEST, RETIRE_GRACE_S, TemplateLibrary, UnknownTemplate
from sakura.platform.store import StoreError

DEFAULT_STORE = os.environ.get("SAKURA_STORE", "file://./sakura-data")


def add_commands(commands: argparse._SubParsersAction) -> None:
    catalog = group(commands, "catalog", help="list and inspect published templates")
    ls = catalog.add_parser("ls", help="templates with their versions and aliases")
    show = catalog.add_parser("show", help="one version's manifest summary")
    show.add_argument("template", help="template id")
    show.add_argument("--version", default="latest", help="number or alias")
    alias = group(commands, "alias", help="move aliases (pin, roll back) or remove them")
    alias_set = alias.add_parser("set", help="point ALIAS of TEMPLATE at VERSION")
    alias_set.add_argument("template", help="template id")
    alias_set.add_argument("alias", help="alias name, e.g. latest or stable")
    alias_set.add_argument("version", type=int, help="a published version number")
    alias_set.add_argument("--allow-model-change", action="store_true",
                           help="move the alias onto a version built for another model than the one it serves")
    alias_set.add_argument("--force", action="store_true",
                           help="overwrite an alias document that cannot be read (still compare-and-swap; logged)")
    alias_rm = alias.add_parser("rm", help="remove ALIAS of TEMPLATE (not latest)")
    alias_rm.add_argument("template", help="template id")
    alias_rm.add_argument("alias", help="alias name, e.g. stable")
    gc = commands.add_parser("gc", help="delete old unreferenced versions and orphaned builds")
    gc.add_argument("--keep", type=int, required=True, help="newest versions to keep per template")
    gc.add_argument("--grace", type=_seconds, default=RETIRE_GRACE_S, metavar="SECONDS",
                    help="keep a version this long after it stops being aliased")
    gc.add_argument("--template", help="only this template (default: every template)")
    gc.add_argument("--dry-run", action="store_true", help="say which versions gc would retire; change nothing")
    for parser, run in ((ls, catalog_ls), (show, catalog_show), (alias_set, set_alias),
                        (alias_rm, remove_alias), (gc, collect)):
        parser.add_argument("--store", default=DEFAULT_STORE, help="library root: file://DIR or s3://bucket/prefix "
                            "(SAKURA_STORE sets the default)")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(run=_suggesting(run))


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def _library(args: argparse.Namespace) -> TemplateLibrary:
    library = TemplateLibrary.open(args.store)
    if not library.store.root_exists():  # a typo: never an empty catalogue, never a gc of nothing
        raise StoreError(f"store {args.store} does not exist: check the path (`sakura build --create` starts a "
                         "library)")
    return library


def _suggesting(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run``, whose unknown-template errors name the closest published ids."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except UnknownTemplate as exc:
            raise exc.suggest(_library(args).templates()) from None

    return wrapper


def catalog_ls(args: argparse.Namespace) -> int:
    library = _library(args)
    rows: list[dict[str, Any]] = []
    for t in library.templates():
        aliases = library.aliases(t)
        model = library.model_of(t, aliases[LATEST]) if LATEST in aliases else None
        rows.append({"template": t, "versions": library.versions(t), "retired": library.retired(t),
                     "aliases": aliases, "model": model[0] if model else None})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'template':24s} {'model (latest)':16s} {'versions (* retired)':20s} aliases")
    for r in rows:
        names = ", ".join(f"{a}={v}" for a, v in sorted(r["aliases"].items()))
        versions = ",".join(f"{v}*" if v in r["retired"] else str(v) for v in r["versions"])
        print(f"{r['template']:24s} {r['model'] or '-':16s} {versions:20s} {names}")
    return 0


def catalog_show(args: argparse.Namespace) -> int:
    manifest = _library(args).manifest(args.template, args.version)
    summary = {
        "template": manifest.template_id, "version": manifest.version, "task": manifest.task, "prompt": manifest.prompt,
        "model": manifest.model.name, "fingerprint": manifest.model.fingerprint, "steps": manifest.schedule.steps,
        "shards": len(manifest.shards), "template_tokens": manifest.tokens.template, "created_at": manifest.created_at,
        "kv_bytes_fp16": manifest.kv_bytes_fp16,
        "levels": {lv.name: {"bytes": lv.bytes, "ratio_vs_fp16": round(manifest.kv_bytes_fp16 / max(1, lv.bytes), 3),
                             "store": lv.store or args.store} for lv in manifest.levels},
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for key, value in summary.items():
            print(f"{key:16s} {value}")
    return 0


def set_alias(args: argparse.Namespace) -> int:
    _library(args).set_alias(args.template, args.alias, args.version, force=args.force,
                             allow_model_change=args.allow_model_change)
    print(json.dumps({"template": args.template, "alias": args.alias, "version": args.version}) if args.json
          else f"{args.template}: {args.alias} -> {args.version}")
    return 0


def remove_alias(args: argparse.Namespace) -> int:
    _library(args).remove_alias(args.template, args.alias)
    print(json.dumps({"template": args.template, "alias": args.alias, "removed": True}) if args.json
          else f"{args.template}: {args.alias} removed")
    return 0


def collect(args: argparse.Namespace) -> int:
    """gc every template (versions past their grace period), then its orphaned claims' files."""
    library = _library(args)
    templates = [args.template] if args.template else library.templates(unpublished=True)
    if args.template and args.template not in library.templates(unpublished=True):
        raise UnknownTemplate(args.template)
    if args.dry_run:
        doomed = {t: library.gc_candidates(t, args.keep) for t in templates}
        if args.json:
            print(json.dumps(doomed))
            return 0
        for t, versions in doomed.items():
            print(f"{t}: would retire {versions or 'nothing'}"
                  + (f" (deleted once unaliased for {args.grace:.0f} s)" if versions else ""))
        return 0
    report = {}
    for t in templates:
        deleted = library.gc(t, args.keep, grace_s=args.grace)
        report[t] = {"deleted": deleted, "retired": library.retired(t), "orphans_removed": library.clean_orphans(t)}
    if args.json:
        print(json.dumps(report))
        return 0
    for t, done in report.items():
        parts = [f"deleted {done['deleted']}"] if done["deleted"] else []
        if done["retired"]:
            parts.append(f"retired {done['retired']} (deleted by a gc once unaliased for {args.grace:.0f} s)")
        if done["orphans_removed"]:
            parts.append(f"orphaned builds removed {done['orphans_removed']}")
        print(f"{t}: {'; '.join(parts) or 'nothing to retire or delete'}")
    return 0
