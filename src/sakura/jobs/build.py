"""``sakura build`` / ``python -m sakura.jobs.build``: build and publish a template library on Ray.

    sakura build --spec examples/templates.yaml --model tiny-flux --store file://./sakura-data --create
    ray job submit -- python -m sakura.jobs.build --spec ... --store s3://bucket/prefix

Everything is checked before anything is written (spec, model, every store). Templates whose
content hash matches a published version are skipped; the others fan out over an actor pool
(one model per actor) that captures, scores, encodes and writes level files, and the driver
publishes each version with a create-only manifest. Idempotent, and safe to kill at any point.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from sakura._argparse import command_parser
from sakura._ray import join_or_start
from sakura.jobs.builder import BuildJob, BuildOutcome, BuildSettings, TemplateBuilder, content_hash
from sakura.jobs.progress import Progress
from sakura.platform.codec import LevelSpec, default_levels
from sakura.platform.errors import SakuraError
from sakura.platform.images import image_size
from sakura.platform.library import CLAIM_RENEW_S, TemplateLibrary
from sakura.platform.models import load_model
from sakura.platform.models.registry import default_steps
from sakura.platform.spec import TemplateSpec, load_spec
from sakura.platform.store import StoreError, open_store, store_environment


@dataclass
class Row:
    template_id: str
    status: str
    version: int | None = None
    level_bytes: dict[str, int] | None = None
    kv_bytes_fp16: int = 0
    seconds: float = 0.0
    error: str = ""  # why it failed, or a warning about a published version
    node: str = ""  # the Ray node that built it (empty: built in this process)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = command_parser("sakura build", __doc__)
    p.add_argument("--spec", required=True, type=Path, help="template spec YAML")
    p.add_argument("--model", required=True, help="named model or diffusers checkpoint directory")
    p.add_argument("--store", default="file://./sakura-data", help="library root: file://DIR or s3://bucket/prefix")
    p.add_argument("--allow-model-change", action="store_true",
                   help="move `latest` onto the new version even when it serves one built for another model "
                        "(every phone with that model then fails)")
    p.add_argument("--move-latest", action="store_true",
                   help="move `latest` onto the new version even where an operator set it (`sakura alias set`, "
                        "a rollback or a pin), which builds otherwise leave")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (one object per template)")
    p.add_argument("--create", action="store_true",
                   help="start a new library if the store's folder does not exist yet (else a missing store is a "
                        "mistake: a typo in the path); an s3:// bucket must exist either way")
    p.add_argument("--tier", action="append", default=[], metavar="LEVEL=URI",
                   help="put a level's files on another store (repeatable), e.g. full=s3://cold/lib")
    p.add_argument("--steps", type=int, help="denoising steps the library is built for; none: the model's default")
    p.add_argument("--strength", type=float, default=1.0,
                   help="noise level edits start from: 1.0 pure noise, lower keeps more of the user's photo")
    p.add_argument("--calibration", type=int, default=2,
                   help="calibration requests per template (sample photos that score the KV blocks)")
    p.add_argument("--workers", type=int, default=1,
                   help="Ray actors (one model each), spread over the cluster's nodes")
    p.add_argument("--cpus-per-worker", type=float, default=1.0,
                   help="CPUs reserved per actor; also sets its thread count")
    p.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per actor (clusters with GPUs)")
    p.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS"),
                   help="Ray cluster address (the default comes from RAY_ADDRESS); none: start a local Ray")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        spec, settings, library, fingerprint = preflight(args)
    except SakuraError as exc:
        print(f"sakura build: error: {exc}", file=sys.stderr)
        return 2
    rows, jobs = plan(spec, settings, library, fingerprint)
    progress = Progress([e.id for e in spec.templates])
    for row in rows:
        progress.update(row.template_id, f"{row.status} (v{row.version})", done=True)
    if jobs:
        # With --json, stdout carries the JSON alone: Ray prints cluster events (a node lost...) to
        # whatever sys.stdout is, from a thread of its own, so they go to stderr meanwhile.
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            rows += run_jobs(args, settings, library, jobs, progress)
    progress.close()
    if args.json:
        print(json.dumps([asdict(r) for r in sorted(rows, key=lambda r: r.template_id)], indent=1))
    else:
        print_summary(rows)
    return 1 if any(r.status == "failed" for r in rows) else 0


def preflight(args: argparse.Namespace) -> tuple[TemplateSpec, BuildSettings, TemplateLibrary, str]:
    """Validate spec (every image's header too), model and stores; nothing is written if any is wrong."""
    tiers = dict(_parse_tier(t) for t in args.tier)
    return prepare(load_spec(args.spec), model=args.model, store=args.store, tiers=tiers, steps=args.steps,
                   strength=args.strength, calibration=args.calibration, source=str(args.spec), create=args.create)


def prepare(spec: TemplateSpec, *, model: str, store: str, tiers: dict[str, str] | None = None,
            steps: int | None = None, strength: float = 1.0, calibration: int = 2, source: str = "spec",
            create: bool = False, levels: tuple[LevelSpec, ...] | None = None,
            ) -> tuple[TemplateSpec, BuildSettings, TemplateLibrary, str]:
    """Check ``spec`` against ``model`` and open every store (each must exist, unless ``create``
    may start it, and be writable): the build's settings, its library and the model's fingerprint."""
    adapter = load_model(model)
    for entry in spec.templates:
        if entry.resolution is not None and entry.resolution != adapter.resolution:
            raise SakuraError(f"{source}: template {entry.id!r}: field 'resolution': {entry.resolution} does not "
                              f"match model {model!r} ({adapter.resolution})")
        note = _resize_note(entry.image, spec.base_dir, adapter.resolution)
        if note:
            print(f"sakura build: {entry.id}: {note}", file=sys.stderr)
    tiers = tiers or {}
    levels = levels or tuple(default_levels().values())
    unknown = set(tiers) - {lv.name for lv in levels}
    if unknown:
        raise SakuraError(f"--tier names unknown levels {sorted(unknown)}")
    for uri in {store, *tiers.values()}:
        try:
            opened = open_store(uri)
            if not create and not opened.root_exists():
                raise SakuraError(f"store {uri} does not exist: check the path, or pass --create to start a new "
                                  "library there")
            opened.check_reachable()
        except StoreError as exc:
            raise SakuraError(f"store {uri} is not usable: {exc}") from None
    if not 0.0 < strength <= 1.0:
        raise SakuraError(f"--strength must be in (0, 1], got {strength}")
    settings = BuildSettings(model=model, levels=levels, steps=steps or default_steps(model), strength=strength,
                             calibration=calibration, store=store, tiers=tuple(sorted(tiers.items())))
    library = TemplateLibrary.open(store, tiers)
    return spec, settings, library, adapter.fingerprint


def build_in_process(spec: TemplateSpec, store: str, *, model: str, steps: int | None = None,
                     allow_model_change: bool = False, move_latest: bool = False,
                     levels: tuple[LevelSpec, ...] | None = None) -> list[Row]:
    """The build job without Ray: the same checks, skip rule, claims and publish, one template after
    another in this process (how the evaluation builds its libraries; it must not need a cluster).
    A build that fails with a :class:`SakuraError` is a failed row; any other error propagates."""
    spec, settings, library, fingerprint = prepare(spec, model=model, store=store, steps=steps, create=True,
                                                   levels=levels)
    rows, jobs = plan(spec, settings, library, fingerprint)
    builder = TemplateBuilder(settings) if jobs else None
    for job in jobs:
        try:
            outcome = builder.build(job)  # type: ignore[union-attr]
        except SakuraError as exc:
            rows.append(Row(job.entry.id, "failed", job.version, error=_first_line(exc)))
            continue
        rows.append(_publish(library, job, outcome, allow_model_change, move_latest))
    return rows


def plan(spec: TemplateSpec, settings: BuildSettings, library: TemplateLibrary,
         fingerprint: str) -> tuple[list[Row], list[BuildJob]]:
    """Skip templates already published (completing a publish that a crash cut short), claim a
    version for each of the others."""
    rows, jobs = [], []
    for entry in spec.templates:
        digest = content_hash(entry, spec.base_dir, fingerprint, settings)
        existing = library.find_by_hash(entry.id, digest)
        if existing is not None:
            rows.append(_finish(library, entry.id, existing))
            continue
        library.clean_orphans(entry.id, levels=[lv.name for lv in settings.levels])
        version = library.claim_version(entry.id, digest, tiers=dict(settings.tiers))
        jobs.append(BuildJob(entry, str(spec.base_dir), version, digest))
    return rows, jobs


def _finish(library: TemplateLibrary, template_id: str, version: int) -> Row:
    """A published version's row; a publish interrupted after its manifest is completed first."""
    try:
        finished = library.finish_publish(template_id, version)
    except SakuraError as exc:
        return Row(template_id, "failed", version, error=_first_line(exc))
    return Row(template_id, "completed" if finished else "unchanged", version)


def _renew(library: TemplateLibrary, jobs: list[BuildJob]) -> None:
    """Renew every unpublished claim's lease, so orphan cleanup leaves long builds alone."""
    for job in jobs:
        with contextlib.suppress(SakuraError):  # a lapsed lease shows as a failed publish
            library.renew_claim(job.entry.id, job.version)


#: Tries per template when its actor dies (a node lost, an OOM kill); a build error is not retried.
BUILD_ATTEMPTS = 3


class _RayTemplateBuilder(TemplateBuilder):
    """The Ray actor: a builder whose outcomes name the node that built them."""

    def build(self, job: BuildJob) -> BuildOutcome:
        import ray

        outcome = super().build(job)
        outcome.node = ray.get_runtime_context().get_node_id()
        return outcome


def run_jobs(args: argparse.Namespace, settings: BuildSettings, library: TemplateLibrary, jobs: list[BuildJob],
             progress: Progress) -> list[Row]:
    """Fan jobs out over a pool of builder actors, spread over the cluster's nodes. A job whose
    actor dies is retried on a new actor under a new version (the old claim is abandoned, so a
    zombie builder can never publish or clobber it), up to :data:`BUILD_ATTEMPTS` tries."""
    import ray

    owns_ray = not ray.is_initialized()  # a caller (a test, a notebook) may have connected already
    if owns_ray:
        progress.note(f"connecting to Ray at {args.ray_address}" if args.ray_address
                      else "starting a local Ray (about 10 s)")
        join_or_start(args.ray_address)
    env = store_environment(settings.store, *dict(settings.tiers).values())  # actors see only their node's
    builder = ray.remote(_RayTemplateBuilder).options(
        num_cpus=args.cpus_per_worker, num_gpus=args.num_gpus, scheduling_strategy="SPREAD",
        **({"runtime_env": {"env_vars": env}} if env else {}))
    threads = max(1, int(args.cpus_per_worker))
    rows: list[Row] = []
    queue = list(jobs)
    tries = {job.entry.id: 1 for job in jobs}
    running: dict[Any, tuple[BuildJob, Any]] = {}  # object ref -> (job, actor handle)
    idle: list[Any] = [builder.remote(settings, threads=threads) for _ in range(max(1, min(args.workers, len(jobs))))]
    renewed = time.monotonic()
    try:
        while queue or running:
            while queue and idle:
                job, actor = queue.pop(0), idle.pop()
                progress.update(job.entry.id, f"building v{job.version}")
                running[actor.build.remote(job)] = (job, actor)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=CLAIM_RENEW_S)
            if time.monotonic() - renewed >= CLAIM_RENEW_S:
                _renew(library, queue + [j for j, _ in running.values()])
                renewed = time.monotonic()
            if not ready:
                continue
            job, actor = running.pop(ready[0])
            try:
                outcome: BuildOutcome = ray.get(ready[0])
            except ray.exceptions.RayActorError as exc:
                idle.append(builder.remote(settings, threads=threads))
                retry = _retry_after_lost_actor(library, settings, job, tries, exc)
                if isinstance(retry, BuildJob):
                    progress.update(job.entry.id, f"actor lost, retrying as v{retry.version}")
                    queue.append(retry)
                else:
                    progress.update(job.entry.id, "failed", done=True)
                    rows.append(retry)
                continue
            except Exception as exc:  # the build raised
                idle.append(actor)
                progress.update(job.entry.id, "failed", done=True)
                rows.append(Row(job.entry.id, "failed", job.version, error=_first_line(exc)))
                continue
            idle.append(actor)
            rows.append(row := _publish(library, job, outcome, args.allow_model_change, args.move_latest))
            progress.update(job.entry.id, f"published v{row.version} ({row.seconds:.1f} s)"
                            if row.status == "published" else "failed", done=True)
    finally:
        for actor in idle + [a for _, a in running.values()]:
            ray.kill(actor)
        if owns_ray:
            ray.shutdown()
    return rows


def _retry_after_lost_actor(library: TemplateLibrary, settings: BuildSettings, job: BuildJob,
                            tries: dict[str, int], exc: BaseException) -> BuildJob | Row:
    """The job again under a fresh claim, or its failed row once it has used every try."""
    template_id = job.entry.id
    try:
        library.abandon_claim(template_id, job.version)
        if tries[template_id] >= BUILD_ATTEMPTS:
            return Row(template_id, "failed", job.version,
                       error=f"its builder died {BUILD_ATTEMPTS} times (last: {_first_line(exc)})")
        tries[template_id] += 1
        version = library.claim_version(template_id, job.content_hash, tiers=dict(settings.tiers))
    except SakuraError as store_exc:  # the store is down: nothing to retry against
        return Row(template_id, "failed", job.version, error=_first_line(store_exc))
    return replace(job, version=version)


def _resize_note(image: str, base_dir: Path, resolution: int) -> str:
    """What the build does to a template image the model does not take as it is ("" if nothing)."""
    width, height = image_size(image, base_dir)
    if width == height == resolution:
        return ""
    side = min(width, height)
    crop = f"centre-cropped to {side}x{side} and " if width != height else ""
    return f"its image is {width}x{height}; the model works at {resolution}x{resolution}, so it is {crop}resized"


def _publish(library: TemplateLibrary, job: BuildJob, outcome: BuildOutcome, allow_model_change: bool,
             move_latest: bool) -> Row:
    try:
        latest = library.publish(outcome.manifest, allow_model_change=allow_model_change, move_held=move_latest)
    except SakuraError as exc:  # its claim was abandoned, the store is down...
        return Row(job.entry.id, "failed", job.version, error=_first_line(exc))
    warning, tid, version = "", job.entry.id, outcome.version
    if latest is not None and latest != version and not library.same_model(tid, latest, version):
        warning = (f"warning: latest stays at v{latest}, built for another model than {outcome.manifest.model.name}; "
                   f"`sakura alias set {tid} latest {version} --allow-model-change` moves it")
    elif latest is not None and latest < version:  # not a newer build's: an operator set it
        warning = (f"warning: latest stays at v{latest}, where `sakura alias set` put it (a rollback or a pin); "
                   f"`sakura alias set {tid} latest {version}` or a build with --move-latest moves it")
    if warning:
        print(f"sakura build: {tid}: {warning}", file=sys.stderr)
    return Row(job.entry.id, "published", outcome.version, outcome.level_bytes, outcome.manifest.kv_bytes_fp16,
               outcome.seconds, warning, outcome.node)


def print_summary(rows: list[Row]) -> None:
    published = [r for r in rows if r.status == "published"]
    levels = list(published[0].level_bytes or {}) if published else []
    print(f"{'template':24s} {'status':10s} {'version':>7s} " + " ".join(f"{n:>10s} {'x fp16':>6s}" for n in levels)
          + f" {'seconds':>8s}")
    for r in sorted(rows, key=lambda r: r.template_id):
        sizes = r.level_bytes or {}
        cells = " ".join(f"{sizes[n]:10d} {r.kv_bytes_fp16 / sizes[n]:6.2f}" if n in sizes else f"{'-':>10s} {'':6s}"
                         for n in levels)
        print(f"{r.template_id:24s} {r.status:10s} {r.version or '-':>7} {cells} {r.seconds:8.1f}"
              + (f"  {r.error}" if r.error else ""))
    if rows and all(r.status == "unchanged" for r in rows):
        print("nothing new to publish: every template matches a published version")


def _first_line(exc: BaseException) -> str:
    """One line for the summary table: a typed error's message, else the type and first line.

    Ray wraps a worker's exception in a ``RayTaskError`` whose text is the remote traceback; the
    original exception is its ``cause``.
    """
    cause = getattr(exc, "cause", None)
    exc = cause if isinstance(cause, BaseException) else exc
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if not isinstance(exc, SakuraError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text[:200]


def _parse_tier(text: str) -> tuple[str, str]:
    level, sep, uri = text.partition("=")
    if not sep or not level or not uri:
        raise SakuraError(f"--tier expects LEVEL=URI, got {text!r}")
    return level, uri


if __name__ == "__main__":
    sys.exit(main())
