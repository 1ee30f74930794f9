"""Library protocol on a local store: publish, aliases, gc, orphans, manifest validation."""

from __future__ import annotations

import json
import threading
import time

import pytest

from sakura.cli import main as cli
from sakura.platform import layout
from sakura.platform.library import LibraryError, TemplateLibrary
from sakura.platform.manifest import Manifest, ManifestError
from sakura.platform.store import open_store
from tests.helpers import make_library


@pytest.fixture
def library(tmp_path):
    uri = f"file://{tmp_path}/lib"
    return make_library(uri, ["skimage:brick", "skimage:grass", "skimage:gravel"]), uri


def test_versions_aliases_and_manifests(library):
    lib, _ = library
    assert lib.templates() == ["tpl"] and lib.versions("tpl") == [1, 2, 3]
    assert lib.aliases("tpl") == {"latest": 3}
    m = lib.manifest("tpl", "latest")
    assert m.version == 3 and len(m.shards) == m.model.layers and [lv.name for lv in m.levels] == ["compact", "medium", "full"]
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
    assert lib.gc("tpl", keep=1) == [2]
    assert lib.versions("tpl") == [1, 3]
    assert not list(open_store(uri).list(layout.version_prefix("tpl", 2)))


def test_orphaned_claims_are_invisible_and_cleaned_after_the_grace_period(library):
    lib, uri = library
    store = open_store(uri)
    v = lib.claim_version("tpl", "0" * 64)
    store.put(layout.level_key("tpl", v, "compact"), b"half a build")
    assert v not in lib.versions("tpl") and lib.resolve("tpl", "latest") == 3
    assert lib.clean_orphans("tpl", grace_s=3600) == []
    assert lib.clean_orphans("tpl", grace_s=0, levels=["compact"]) == [v]
    assert not list(store.list(layout.version_prefix("tpl", v)))


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
    assert json.loads(capsys.readouterr().out) == [{"template": "tpl", "versions": [1, 2, 3], "aliases": {"latest": 3}}]
    assert cli(["catalog", "show", "tpl", "--version", "2", "--store", uri, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 2 and set(shown["levels"]) == {"compact", "medium", "full"}
    assert cli(["alias", "set", "tpl", "stable", "2", "--store", uri]) == 0
    assert cli(["alias", "set", "tpl", "stable", "42", "--store", uri]) == 1
    assert "no published version 42" in capsys.readouterr().err
    assert cli(["gc", "--keep", "1", "--store", uri, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"tpl": [1]}
