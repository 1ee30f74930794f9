"""`sakura serve` refuses a store that is not there, without creating it and before Ray starts."""

from __future__ import annotations

import sys

from sakura.cli import main


def test_sakura_serve_refuses_a_missing_store_without_creating_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # importing ray would fail: it must not be reached
    missing = tmp_path / "moved-away" / "lib"
    assert main(["serve", "--store", f"file://{missing}"]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and len(err.strip().splitlines()) == 1
    assert not missing.parent.exists()
