"""Publishers, alias movers and gc racing in separate OS processes on a real S3 server
(SeaweedFS, whose ``If-Match`` is not atomic), some SIGKILLed at random moments; then the
recovery any operator's cron runs (a rerun completes interrupted publishes, gc, orphan cleanup)
and the checks: no acknowledged alias move lost, no alias on a deleted or deleting version, no
version number handed out twice, every version readable.

Each worker journals what the library acknowledged (one ``os.write`` per line, so a SIGKILL
leaves whole lines). The kill moments come from a seeded generator (the seed is printed; set
``SAKURA_RACE_SEED`` to replay one), but where in the protocol a kill lands is up to the
scheduler: a failing seed is a lead, not a replay.

What passes on the old (compare-and-swap) code too: all of it, as far as we saw. Run against the
code before aafe371 (whose set_alias returns no record number: without the record-number checks),
four seeds passed. The races the old code lost on SeaweedFS (two moves of one claim or mark both
"winning": a publish and orphan cleanup's abandonment, or a pin's reinstatement and gc's move to
``deleting``) need the two writes within milliseconds of each other, and a mover killed between
its alias record and its undo (which the old code never repaired, and gc now settles) needs a
kill in a window of a few requests; a handful of rounds rarely lines either up. So this test
guards the new protocol under kills; it does not reproduce the old bugs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from sakura.platform import alias_log
from sakura.platform.errors import SakuraError, VersionRetired
from sakura.platform.library import TemplateLibrary
from sakura.platform.record_log import KEEP
from sakura.platform.store import open_store
from sakura.platform.version_state import DELETING, mark_state
from tests.unit.platform.library_helpers import build_files, check_aliases, level_bytes, tombstones

TEMPLATE = "tpl"
ROUNDS = 3
RUN_S = 3.0  # how long a round's workers run once all are ready (killed ones stop sooner)
ROLES = ("publisher", "publisher", "pinner", "advancer", "collector")


def _journal(fd: int, **entry: object) -> None:
    os.write(fd, (json.dumps(entry) + "\n").encode())


def _worker(role: str, lib: TemplateLibrary, seed: int, journal: str, ready: Barrier) -> None:
    """One racer: once every racer is ready, repeats its role's operation for :data:`RUN_S`,
    journalling each acknowledgement."""
    rng, fd = random.Random(seed), os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    seen: set[int] = set()  # versions this mover saw published: gc may be deleting them now
    ready.wait(timeout=60)
    until = time.monotonic() + RUN_S
    while time.monotonic() < until:
        try:
            if role == "publisher":
                content = hashlib.sha256(f"{seed} {time.time()} {rng.random()}".encode()).hexdigest()
                manifest = build_files(lib, TEMPLATE, content)
                _journal(fd, op="claim", version=manifest.version, hash=content)
                lib.publish(manifest)
                _journal(fd, op="publish", version=manifest.version)
            elif role in ("pinner", "advancer"):
                seen.update(lib.versions(TEMPLATE))
                if not seen:
                    continue
                version = rng.choice(sorted(seen))
                if role == "pinner":
                    alias, seq = "stable", lib.set_alias(TEMPLATE, "stable", version)
                else:
                    alias, seq = "next", lib.advance_alias(TEMPLATE, "next", version)
                if seq is not None:
                    _journal(fd, op="move", alias=alias, version=version, seq=seq)
            else:
                lib.gc(TEMPLATE, keep=1, grace_s=0)
                lib.clean_orphans(TEMPLATE, grace_s=rng.choice([0.0, 0.5]))
        except SakuraError as exc:  # refused (VersionRetired, ClaimAbandoned, a version gone): not acknowledged
            _journal(fd, op="refused", error=type(exc).__name__)
        except Exception as exc:  # noqa: BLE001 - a bug: reported to the test
            _journal(fd, op="error", error=repr(exc))
        time.sleep(rng.uniform(0, 0.02))


def _round(uri: str, rng: random.Random, folder: Path, round_: int) -> tuple[list[dict], int]:
    """Start every role in its own process, SIGKILL a random few at random moments, wait for the
    rest; the journal entries, and how many were killed."""
    context = multiprocessing.get_context("fork")  # forked: a fresh interpreter takes seconds to import boto3 here
    ready = context.Barrier(len(ROLES) + 1)
    procs = []
    for i, role in enumerate(ROLES):
        journal = folder / f"round{round_}-{i}-{role}.jsonl"
        lib = TemplateLibrary(open_store(uri))  # a client of its own, made here and first used in the child
        procs.append((context.Process(target=_worker, args=(role, lib, rng.randrange(2**32), str(journal), ready),
                                      daemon=True), journal))
    for proc, _ in procs:
        proc.start()
    victims = rng.sample(range(len(procs)), k=rng.randint(1, 3))
    ready.wait(timeout=60)
    start = time.monotonic()
    for when, victim in sorted((rng.uniform(0.2, RUN_S), v) for v in victims):
        time.sleep(max(0.0, when - (time.monotonic() - start)))
        pid = procs[victim][0].pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
    for proc, _ in procs:
        proc.join(timeout=60)
    assert not any(proc.is_alive() for proc, _ in procs), "a racer hangs"
    entries = []
    for _, journal in procs:
        if journal.exists():
            entries += [json.loads(line) for line in journal.read_text().splitlines()]
    return entries, len(victims)


def _recover(lib: TemplateLibrary) -> None:
    """What an operator's next runs do: the build reruns complete publishes cut short, then gc."""
    for version in lib.versions(TEMPLATE):
        with contextlib.suppress(VersionRetired):  # one gc is deleting: it never becomes `latest` again
            lib.finish_publish(TEMPLATE, version)
    lib.gc(TEMPLATE, keep=1, grace_s=0)
    lib.clean_orphans(TEMPLATE, grace_s=0)


def _check(lib: TemplateLibrary, entries: list[dict]) -> None:
    errors = [e for e in entries if e["op"] == "error"]
    assert not errors, errors
    claims = [e for e in entries if e["op"] == "claim"]
    assert len({e["version"] for e in claims}) == len(claims), "a version number was handed out twice"
    hashes = {e["version"]: e["hash"] for e in claims}
    published = lib.versions(TEMPLATE)
    for version in published:  # readable, whole, and built by the one build that claimed it
        manifest = lib.manifest(TEMPLATE, version)
        assert lib.store.get(manifest.levels[0].key) == level_bytes(TEMPLATE, version)
        assert manifest.content_hash == hashes.get(version, manifest.content_hash), version
    for version in {e["version"] for e in claims}:
        tombstones(lib.store, TEMPLATE, version)  # the claim's record 1 keeps every number taken
    aliases = check_aliases(lib, TEMPLATE)  # no alias on a deleted version
    for alias, version in aliases.items():
        assert mark_state(lib.store, TEMPLATE, version) != DELETING, (alias, version)
    if published:
        assert aliases["latest"] == max(published)
    for alias in ("stable", "next"):  # no acknowledged move lost: each owns its record number
        moves = [e for e in entries if e["op"] == "move" and e["alias"] == alias]
        assert len({e["seq"] for e in moves}) == len(moves), (alias, sorted(e["seq"] for e in moves))
        log = alias_log.log(lib.store, TEMPLATE, alias)
        newest = log.head().seq
        for move in moves:
            if move["seq"] >= newest - KEEP and move["seq"] in log.seqs():
                assert json.loads(lib.store.get(log.key(move["seq"]))) == {"version": move["version"]}, move


@pytest.mark.cluster  # about 25 s on two cores: make test-cluster
@pytest.mark.timeout(300)
def test_killed_publishers_movers_and_gc_leave_a_consistent_library(seaweed_uri, tmp_path):
    seed = int(os.environ.get("SAKURA_RACE_SEED", random.randrange(2**31)))
    print(f"SAKURA_RACE_SEED={seed}")
    rng = random.Random(seed)
    lib = TemplateLibrary(open_store(seaweed_uri))
    entries: list[dict] = []
    killed = 0
    for round_ in range(ROUNDS):
        started = time.monotonic()
        new, victims = _round(seaweed_uri, rng, tmp_path, round_)
        entries, killed = entries + new, killed + victims
        _recover(lib)
        _check(lib, entries)  # every round's journals so far: numbers are never reused across rounds
        print(f"round {round_}: {time.monotonic() - started:.1f} s, {len(new)} journal entries, {victims} killed")
    totals = Counter(e["op"] if e["op"] != "refused" else e["error"] for e in entries)
    print(f"seed {seed}: {totals}, {killed} killed")
    assert totals["publish"] >= 2 and totals["move"] >= 2, totals  # the racers got going
    assert lib.templates() == [TEMPLATE]
