"""Atomic writes and payload checks (:mod:`sakura.platform.integrity`), shared by the local store,
the server's disk cache and the phone's cache."""

from __future__ import annotations

import hashlib
import os

import pytest

from sakura.platform.integrity import TMP_PREFIX, matches, temp_beside, write_atomic


def test_matches_checks_the_sha256_and_the_length_when_given():
    data = b"template kv"
    sha = hashlib.sha256(data).hexdigest()
    assert matches(data, sha) and matches(data, sha, len(data))
    assert not matches(data, sha, len(data) + 1)
    assert not matches(data + b"!", sha)
    assert not matches(data, sha.upper()[::-1])


def test_write_atomic_replaces_the_file_whole_and_leaves_no_temp(tmp_path):
    target = tmp_path / "deep" / "shard.bin"
    write_atomic(target, b"old")
    write_atomic(target, b"new", sync_dir=True)
    assert target.read_bytes() == b"new"
    assert [p.name for p in target.parent.iterdir()] == ["shard.bin"]


def test_a_failed_rename_keeps_the_old_file_and_removes_the_temp(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    write_atomic(target, b"v1")

    def no_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, b"v2")
    assert target.read_bytes() == b"v1"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_the_temp_file_is_never_written_through_a_planted_link(tmp_path, monkeypatch):
    """A temp name that exists already (an attacker's link) is an error, not a write through it."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    monkeypatch.setattr("uuid.uuid4", lambda: type("U", (), {"hex": "fixed"})())
    os.symlink(victim, tmp_path / f"{TMP_PREFIX}fixed")
    with pytest.raises(FileExistsError), temp_beside(tmp_path / "target", b"evil"):
        pass
    assert victim.read_bytes() == b"keep"
