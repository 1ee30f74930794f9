"""Library protocol on a local store: publish, aliases, gc, orphans, manifest validation."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time

import pytest

from sakura.cli import main as cli
from sakura.platform import alias_log, layout
from sakura.platform.library import (
    AliasUnreadable,
    ClaimAbandoned,
    LibraryError,
    TemplateLibrary,
    VersionRetired,
    write_once,
)
from sakura.platform.manifest import Manifest, ManifestError
from sakura.platform.store import AlreadyExists, open_store
from sakura.platform.version_state import Claim, Retirement, claim_log, mark_log, read_claim
from tests.helpers import make_library
from tests.unit.platform.library_helpers import (
    LEVEL,
    Faulty,
    age_claim,
    build_files,
    level_bytes,
    put_version,
    synthetic_manifest,
    tombstones,
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Three versions of one template, built once per module (a build is seconds of model work)."""
    root = tmp_path_factory.mktemp("built") / "lib"
    make_library(f"file://{root}", ["skimage:brick", "skimage:grass", "skimage:gravel"])
    return root


@pytest.fixture
def library(built, tmp_path):
    """A private copy of the built library: a test may change its aliases and versions freely."""
    shutil.copytree(built, tmp_path / "lib", symlinks=True)
    uri = f"file://{tmp_path}/lib"
    return TemplateLibrary(open_store(uri)), uri


def test_versions_aliases_and_manifests(library):
    lib, _ = library
    assert lib.templates() == ["tpl"] and lib.versions("tpl") == [1, 2, 3]
    assert lib.aliases("tpl") == {"latest": 3}
    m = lib.manifest("tpl", "latest")
    assert m.version == 3 and len(m.shards) == m.model.layers
    assert [lv.name for lv in m.levels] == ["compact", "medium", "full"]
    assert lib.find_by_hash("tpl", m.content_hash) == 3
    with pytest.raises(LibraryError):
        lib.manifest("tpl", 9)
    with pytest.raises(LibraryError):
        lib.manifest("tpl", "stable")


def test_alias_moves_only_to_published_versions_and_latest_never_goes_back(library):
    lib, _ = library
    lib.set_alias("tpl", "stable", 1)
    assert lib.resolve("tpl", "stable") == 1
    with pytest.raises(LibraryError):
        lib.set_alias("tpl", "stable", 99)
    lib.advance_alias("tpl", "latest", 2)
    assert lib.resolve("tpl", "latest") == 3


def test_gc_keeps_the_newest_and_every_aliased_version(library):
    lib, uri = library
    lib.set_alias("tpl", "pinned", 1)
    assert lib.gc("tpl", keep=1, grace_s=0) == [2]
    assert lib.versions("tpl") == [1, 3]
    assert tombstones(open_store(uri), "tpl", 2) == {"claim", "retired"}  # 2 is never reused or re-aliased


def test_orphaned_claims_are_invisible_and_cleaned_after_the_grace_period(library):
    lib, uri = library
    store = open_store(uri)
    v = lib.claim_version("tpl", "0" * 64)
    store.put(layout.level_key("tpl", v, "compact"), b"half a build")
    assert v not in lib.versions("tpl") and lib.resolve("tpl", "latest") == 3
    assert lib.clean_orphans("tpl", grace_s=3600) == []
    assert lib.clean_orphans("tpl", grace_s=0, levels=["compact"]) == [v]
    assert tombstones(store, "tpl", v) == {"claim"}


def test_concurrent_claims_never_share_a_number(library):
    lib, _ = library
    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(lib.claim_version("tpl", "2" * 64))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == len(set(got)) == 6


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema_version=7), "schema_version"),
    (lambda d: d.update(template_id="Bad Id"), "template_id"),
    (lambda d: d["shards"][0]["levels"].pop("full"), "lacks a level"),
    (lambda d: d["shards"][0].update(index=5), "indexes"),
    (lambda d: d.update(surprise=1), "surprise"),
])
def test_invalid_manifests_are_rejected(library, mutate, message):
    lib, _ = library
    raw = json.loads(lib.manifest("tpl", 3).to_bytes())
    mutate(raw)
    with pytest.raises(ManifestError, match=message):
        Manifest.from_bytes(json.dumps(raw).encode())
    with pytest.raises(ManifestError):
        Manifest.from_bytes(b"\xff not json")


def test_operator_commands(library, capsys):
    _, uri = library
    assert cli(["catalog", "ls", "--store", uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"template": "tpl", "versions": [1, 2, 3], "retired": [],
                                                    "aliases": {"latest": 3}, "model": "tiny-sd3"}]
    assert cli(["catalog", "show", "tpl", "--version", "2", "--store", uri, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 2 and set(shown["levels"]) == {"compact", "medium", "full"}
    assert cli(["alias", "set", "tpl", "stable", "2", "--store", uri]) == 0
    assert cli(["alias", "set", "tpl", "stable", "42", "--store", uri]) == 1
    assert "no published version 42" in capsys.readouterr().err
    # version 1: retired and waiting out the grace period, which gc says, and so does the catalogue
    assert cli(["gc", "--keep", "1", "--store", uri]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "tpl: retired [1] (deleted by a gc once unaliased for 3600 s)")
    assert cli(["catalog", "ls", "--store", uri]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].split()[2] == "1*,2,3"
    assert cli(["gc", "--keep", "1", "--grace", "0", "--store", uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {
        "tpl": {"deleted": [1], "retired": [], "orphans_removed": []}}


# -- publishing protocol, retirement and repair (synthetic versions: no model) -------------------
@pytest.fixture
def bare(tmp_path):
    uri = f"file://{tmp_path}/bare"
    return TemplateLibrary(open_store(uri)), uri


def _mark(lib, version):
    return json.loads(mark_log(lib.store, "tpl", version).head().data)


def _newest(lib, template_id: str, alias: str) -> str:
    """The key of the alias's newest record (what it points at)."""
    return alias_log.record_key(template_id, alias, alias_log.head(lib.store, template_id, alias).seq)


def test_a_truncated_alias_is_repaired_only_with_force_which_is_logged(bare, caplog, capsys):
    lib, uri = bare
    put_version(lib, "tpl"), put_version(lib, "tpl")
    key = _newest(lib, "tpl", "latest")
    lib.store.put(key, lib.store.get(key)[:5])  # truncated
    with pytest.raises(AliasUnreadable, match="--force"):
        lib.set_alias("tpl", "latest", 1)
    assert cli(["alias", "set", "tpl", "latest", "1", "--store", uri]) == 1
    assert "--force" in capsys.readouterr().err
    with caplog.at_level(logging.WARNING, logger="sakura.library"):
        lib.set_alias("tpl", "latest", 1, force=True)
    assert lib.resolve("tpl", "latest") == 1
    assert any(r.name == "sakura.library" and "unreadable" in r.getMessage() for r in caplog.records)
    lib.store.put(_newest(lib, "tpl", "latest"), b"{")
    assert cli(["alias", "set", "tpl", "latest", "2", "--force", "--store", uri]) == 0
    assert lib.resolve("tpl", "latest") == 2


def test_a_forced_overwrite_still_writes_the_next_record_create_only(bare):
    """Another operator repairs the alias between our read and our write: our record number is
    taken, so we read again and move from the repaired alias (never over it)."""
    lib, uri = bare
    put_version(lib, "tpl"), put_version(lib, "tpl"), put_version(lib, "tpl")
    lib.store.put(alias_log.record_key("tpl", "stable", 1), b"garbage")
    inner, writes = open_store(uri), []

    def repair_first(op, k):
        if "/aliases/stable/" in k:
            writes.append(op)
            if alias_log.head(inner, "tpl", "stable").data == b"garbage":
                inner.put_if_absent(alias_log.record_key("tpl", "stable", 2), b'{"version": 1}')

    racing = TemplateLibrary(Faulty(inner, hook=repair_first))
    racing.set_alias("tpl", "stable", 2, force=True)
    assert writes[:2] == ["put_if_absent", "put_if_absent"]  # record 2 was taken: re-read, then record 3
    assert lib.resolve("tpl", "stable") == 2 and alias_log.head(lib.store, "tpl", "stable").seq == 3
    racing.set_alias("tpl", "stable", 3, force=True)  # readable now: an ordinary move
    assert lib.resolve("tpl", "stable") == 3


def test_an_alias_from_before_the_log_is_read_and_moved_on_from(bare):
    """A library written before the log: its alias document is the alias until the first move,
    which writes record 1 from it."""
    lib, _ = bare
    put_version(lib, "tpl"), put_version(lib, "tpl")
    lib.store.put(layout.alias_key("tpl", "old"), b'{"version": 1}')
    assert lib.resolve("tpl", "old") == 1 and lib.aliases("tpl")["old"] == 1
    lib.advance_alias("tpl", "old", 2)
    assert lib.resolve("tpl", "old") == 2 and alias_log.head(lib.store, "tpl", "old").seq == 1
    lib.advance_alias("tpl", "old", 1)  # never backwards
    assert lib.resolve("tpl", "old") == 2


def test_aliases_need_no_compare_and_swap(bare):
    """Every alias move is a create-only write: a store whose compare-and-swap is not to be
    trusted (SeaweedFS's If-Match) is never asked for one by an alias move."""
    lib, uri = bare
    put_version(lib, "tpl"), put_version(lib, "tpl"), put_version(lib, "tpl")
    ops: list[tuple[str, str]] = []
    moving = TemplateLibrary(Faulty(open_store(uri), hook=lambda op, k: ops.append((op, k))))
    moving.set_alias("tpl", "stable", 1)
    moving.set_alias("tpl", "stable", 3)
    moving.advance_alias("tpl", "latest", 3)
    assert [op for op, k in ops if "/aliases/" in k] == ["put_if_absent", "put_if_absent"]
    assert moving.aliases("tpl") == {"latest": 3, "stable": 3}


def test_an_alias_removed_is_gone_and_no_longer_keeps_its_version(bare, capsys):
    lib, uri = bare
    put_version(lib, "tpl"), put_version(lib, "tpl"), put_version(lib, "tpl")
    lib.set_alias("tpl", "stable", 1)
    assert lib.gc("tpl", keep=1, grace_s=0) == [2]  # stable keeps 1
    assert cli(["alias", "rm", "tpl", "stable", "--store", uri]) == 0
    assert capsys.readouterr().out.strip() == "tpl: stable removed"
    assert "stable" not in lib.aliases("tpl")
    with pytest.raises(LibraryError, match="no alias 'stable'"):
        lib.resolve("tpl", "stable")
    assert lib.gc("tpl", keep=1, grace_s=0) == [1]  # nothing keeps it now
    # removing it again, an alias never set, latest, another template's: one line each, nothing written
    before = sorted(o.key for o in lib.store.list("templates/"))
    for argv, message in ((["tpl", "stable"], "no alias 'stable'"), (["tpl", "latest"], "follows the builds"),
                          (["nope", "stable"], "nope")):
        assert cli(["alias", "rm", *argv, "--store", uri]) == 1
        assert message in capsys.readouterr().err
    assert sorted(o.key for o in lib.store.list("templates/")) == before
    lib.set_alias("tpl", "stable", 3)  # and it can be set again, after its removal record
    assert lib.resolve("tpl", "stable") == 3


def test_a_rollback_of_latest_holds_it_until_a_build_is_told_to_move_it(bare):
    """An operator who rolled latest back did it for a reason: the next build publishes past it but
    leaves latest there (advance_alias is what a build calls), until told to move it."""
    lib, _ = bare
    put_version(lib, "tpl"), put_version(lib, "tpl")
    lib.set_alias("tpl", "latest", 1)  # the rollback
    assert json.loads(alias_log.head(lib.store, "tpl", "latest").data) == {"version": 1, "held": True}
    assert put_version(lib, "tpl") == 3 and lib.resolve("tpl", "latest") == 1
    assert lib.advance_alias("tpl", "latest", 3) is None and lib.resolve("tpl", "latest") == 1
    assert lib.advance_alias("tpl", "latest", 3, move_held=True) is not None
    assert json.loads(alias_log.head(lib.store, "tpl", "latest").data) == {"version": 3}  # released
    assert put_version(lib, "tpl") == 4 and lib.resolve("tpl", "latest") == 4  # builds move it again
    lib.set_alias("tpl", "latest", 4)  # a pin where it is: held from now on, one more record
    assert json.loads(alias_log.head(lib.store, "tpl", "latest").data) == {"version": 4, "held": True}
    lib.set_alias("tpl", "stable", 4)  # other aliases are never moved by builds: nothing to hold
    assert json.loads(alias_log.head(lib.store, "tpl", "stable").data) == {"version": 4}


def test_old_records_are_pruned_and_record_numbers_only_grow(bare):
    lib, _ = bare
    put_version(lib, "tpl"), put_version(lib, "tpl")
    for i in range(3 * alias_log.KEEP):
        lib.set_alias("tpl", "flip", 1 + i % 2)
    seqs = [int(o.key.rsplit("/", 1)[1].removesuffix(".json")) for o in lib.store.list("templates/tpl/aliases/flip/")]
    assert max(seqs) == 3 * alias_log.KEEP and len(seqs) <= alias_log.KEEP + 1
    assert lib.resolve("tpl", "flip") == 2


def test_gc_keeps_a_version_for_the_grace_period_after_it_stops_being_aliased(bare):
    lib, _ = bare
    put_version(lib, "tpl"), put_version(lib, "tpl")  # latest moved 1 -> 2
    assert lib.gc("tpl", keep=1) == []  # default grace: edits in flight on v1 keep working
    assert lib.versions("tpl") == [1, 2] and _mark(lib, 1)["state"] == "retired"
    assert lib.gc("tpl", keep=1, grace_s=3600) == []
    assert lib.gc("tpl", keep=1, grace_s=0) == [1]
    assert lib.versions("tpl") == [2]


def test_a_rollback_during_the_grace_period_reinstates_and_restarts_it(bare):
    lib, _ = bare
    put_version(lib, "tpl"), put_version(lib, "tpl")
    assert lib.gc("tpl", keep=1, grace_s=3600) == [] and _mark(lib, 1)["state"] == "retired"
    lib.set_alias("tpl", "latest", 1)  # roll back onto the retired version: allowed
    assert _mark(lib, 1)["state"] == "reinstated"
    assert lib.gc("tpl", keep=1, grace_s=0) == [] and lib.versions("tpl") == [1, 2]
    lib.set_alias("tpl", "latest", 2)
    unpinned = time.time()
    assert lib.gc("tpl", keep=1, grace_s=3600) == []
    assert _mark(lib, 1)["state"] == "retired" and _mark(lib, 1)["at"] >= unpinned  # the clock restarted


def test_an_alias_moved_onto_a_version_gc_is_deleting_is_undone(bare):
    lib, uri = bare
    for _ in range(3):
        put_version(lib, "tpl")
    lib.set_alias("tpl", "stable", 2)
    inner = open_store(uri)
    deleting = Retirement("deleting", time.time()).to_bytes()

    def gc_commits_first(op, key):  # gc swaps v1's mark to "deleting" just before our alias move
        if "/aliases/stable/" in key or "/aliases/fresh/" in key:
            inner.put(layout.retired_key("tpl", 1), deleting)

    racing = TemplateLibrary(Faulty(inner, hook=gc_commits_first))
    with pytest.raises(VersionRetired):
        racing.set_alias("tpl", "stable", 1)
    assert lib.resolve("tpl", "stable") == 2  # undone: the mover took its record back
    with pytest.raises(VersionRetired):
        racing.set_alias("tpl", "fresh", 1)
    assert "fresh" not in lib.aliases("tpl")  # a new alias is removed again
    with pytest.raises(VersionRetired):
        lib.set_alias("tpl", "stable", 1)  # refused up front once the mark is there


def test_gc_deletes_nothing_while_an_alias_is_unreadable(bare):
    lib, _ = bare
    for _ in range(3):
        put_version(lib, "tpl")
    lib.store.put(alias_log.record_key("tpl", "stable", 1), b'{"vers')  # it may have pointed at v1
    assert lib.gc("tpl", keep=1, grace_s=0) == []
    assert lib.versions("tpl") == [1, 2, 3]


def test_a_version_number_is_never_handed_out_twice(bare):
    lib, _ = bare
    manifest = build_files(lib, "tpl")  # a build whose jobs are still queued...
    age_claim(lib.store, "tpl", manifest.version, 7200)  # ...an hour later
    assert lib.clean_orphans("tpl") == [manifest.version]  # another build's cleanup
    assert lib.claim_version("tpl", "d" * 64) == manifest.version + 1
    with pytest.raises(ClaimAbandoned):  # and the first build cannot publish over deleted files
        lib.publish(manifest)
    assert lib.versions("tpl") == [] and "latest" not in lib.aliases("tpl")


def test_a_renewed_claim_is_not_an_orphan(bare):
    lib, _ = bare
    alive, dead = build_files(lib, "tpl"), build_files(lib, "tpl")
    for m in (alive, dead):
        age_claim(lib.store, "tpl", m.version, 7200)
    assert lib.renew_claim("tpl", alive.version)
    assert lib.clean_orphans("tpl") == [dead.version]
    assert not lib.renew_claim("tpl", dead.version)
    lib.publish(alive)
    assert lib.resolve("tpl", "latest") == alive.version


def test_an_abandoned_claim_is_cleaned_at_once_and_never_published(bare):
    lib, _ = bare
    lost = build_files(lib, "tpl")  # its builder died after writing the files
    lib.abandon_claim("tpl", lost.version)
    assert not lib.renew_claim("tpl", lost.version)
    with pytest.raises(ClaimAbandoned):
        lib.publish(lost)
    assert lib.clean_orphans("tpl") == [lost.version]  # no grace period: nobody holds it
    assert tombstones(lib.store, "tpl", lost.version) == {"claim"}
    retry = build_files(lib, "tpl")
    assert retry.version == lost.version + 1
    lib.publish(retry)
    assert lib.versions("tpl") == [retry.version]


def test_write_once_accepts_its_own_lost_reply_and_nothing_else(bare):
    lib, _ = bare
    write_once(lib.store, "a/b", b"mine")
    write_once(lib.store, "a/b", b"mine")  # the retry of a write whose reply was lost
    with pytest.raises(AlreadyExists):
        write_once(lib.store, "a/b", b"theirs")
    assert lib.store.get("a/b") == b"mine"


def test_the_library_writes_only_create_only_records_and_deletes(bare):
    """No compare-and-swap, no overwrite: publishing, claims, aliases, gc and orphan cleanup ask
    the store for create-only writes and deletes only (SeaweedFS's If-Match is not atomic)."""
    lib, uri = bare
    ops: list[str] = []
    watched = TemplateLibrary(Faulty(open_store(uri), hook=lambda op, key: ops.append(op)))
    for _ in range(3):
        put_version(watched, "tpl")
    watched.set_alias("tpl", "stable", 1)
    watched.advance_alias("tpl", "next", 2)
    alive, dead = build_files(watched, "tpl"), build_files(watched, "tpl")
    assert watched.renew_claim("tpl", alive.version)
    watched.abandon_claim("tpl", dead.version)
    assert watched.clean_orphans("tpl") == [dead.version]
    watched.set_alias("tpl", "stable", 3)
    assert watched.gc("tpl", keep=1, grace_s=0) == [1]  # 2 stays: "next" points at it
    assert set(ops) == {"put_if_absent", "delete"}, sorted(set(ops))


def test_a_claim_and_a_mark_from_before_the_logs_are_read_and_moved_on_from(bare):
    """A library written before the logs: ``claim.json`` and ``retired.json`` are the claim and
    the mark until their first move, which writes record 1 from them."""
    lib, _ = bare
    store = lib.store
    store.put(layout.claim_key("tpl", 1), Claim(1, "c" * 64, time.time()).to_bytes())  # a build in flight
    store.put(layout.level_key("tpl", 1, LEVEL), level_bytes("tpl", 1))
    store.put(layout.claim_key("tpl", 2), Claim(2, "d" * 64, time.time()).to_bytes())  # another, not published
    assert read_claim(store, "tpl", 1).state == "building" and lib.claim_version("tpl", "e" * 64) == 3
    lib.publish(synthetic_manifest("tpl", 1))
    assert read_claim(store, "tpl", 1).state == "published" and lib.resolve("tpl", "latest") == 1
    assert claim_log(store, "tpl", 1).seqs() == [1, 2]  # publishing (from claim.json), then published
    lib.publish(synthetic_manifest("tpl", 3, "e" * 64))
    store.put(layout.retired_key("tpl", 1), Retirement("retired", 0.0).to_bytes())  # gc's mark, long ago
    assert lib.gc("tpl", keep=1, grace_s=60) == [1] and lib.versions("tpl") == [3]
    assert _mark(lib, 1)["state"] == "deleting" and mark_log(store, "tpl", 1).seqs() == [1]
    assert tombstones(store, "tpl", 1) == {"claim", "claim.json", "retired", "retired.json"}
    with pytest.raises(LibraryError, match="no published version 1"):
        lib.set_alias("tpl", "stable", 1)


def test_gc_undoes_an_alias_move_whose_mover_died_before_it_could(bare):
    """A mover wrote its record onto a version gc was deleting, then was killed before reading the
    mark: the next gc puts the alias back where it was, as the mover would have."""
    lib, uri = bare
    for _ in range(3):
        put_version(lib, "tpl")
    lib.set_alias("tpl", "stable", 2)
    mark_log(lib.store, "tpl", 1).move(lambda h: Retirement("deleting", time.time()).to_bytes())
    found = alias_log.head(lib.store, "tpl", "stable")
    alias_log.append(lib.store, "tpl", "stable", found, 1)  # ...and nothing more
    assert lib.resolve("tpl", "stable") == 1
    assert lib.gc("tpl", keep=1, grace_s=3600) == [1]  # deleting already: no grace left
    assert lib.resolve("tpl", "stable") == 2 and lib.versions("tpl") == [2, 3]
    assert alias_log.head(lib.store, "tpl", "stable").seq == found.seq + 2  # an undo is a record too


def test_an_undo_skips_earlier_values_that_are_being_deleted_too(bare):
    """Two movers' records, both onto versions gc is deleting, the later one's undo must not put
    the alias back on the earlier one: it goes back to the newest value not being deleted, or,
    with none left, the alias is removed."""
    lib, _ = bare
    for _ in range(4):
        put_version(lib, "tpl")
    lib.set_alias("tpl", "stable", 3)
    for version in (1, 2):
        mark_log(lib.store, "tpl", version).move(lambda h: Retirement("deleting", time.time()).to_bytes())
    for version in (1, 2):
        alias_log.append(lib.store, "tpl", "stable", alias_log.head(lib.store, "tpl", "stable"), version)
    alias_log.settle(lib.store, "tpl", "stable")
    assert lib.resolve("tpl", "stable") == 3
    alias_log.append(lib.store, "tpl", "fresh", alias_log.head(lib.store, "tpl", "fresh"), 1)
    lib.gc("tpl", keep=1, grace_s=0)
    assert "fresh" not in lib.aliases("tpl") and lib.versions("tpl") == [3, 4]
    with pytest.raises(LibraryError, match="no alias"):
        lib.resolve("tpl", "fresh")
    lib.set_alias("tpl", "fresh", 4)  # a removed alias can be set again
    assert lib.aliases("tpl") == {"latest": 4, "stable": 3, "fresh": 4}


@pytest.mark.parametrize("data", [b"[" * 100_000 + b"]" * 100_000, b'{"state": ' * 50_000 + b"1" + b"}" * 50_000,
                                  b'{"levels": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"])
def test_a_claim_or_mark_nested_too_deeply_is_a_typed_error(data):
    """json.loads recurses per level: a record a hostile writer nested deep ends in ManifestError,
    not a RecursionError that escapes gc and the readers."""
    with pytest.raises(ManifestError, match="claim of version 3"):
        Claim.from_bytes(3, data)
    with pytest.raises(ManifestError, match="retirement mark"):
        Retirement.from_bytes(data)
