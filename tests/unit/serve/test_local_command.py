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


def test_sakura_serve_refuses_a_busy_port_naming_it_before_ray_starts(tmp_path, monkeypatch, capsys):
    """Serve's proxy fails to bind a busy port in its own process; the command printed "serving ...
    on http://127.0.0.1:PORT" while another server answered there."""
    import socket

    monkeypatch.setitem(sys.modules, "ray", None)
    (tmp_path / "lib").mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--store", f"file://{tmp_path / 'lib'}", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "--port" in err and len(err.strip().splitlines()) == 1
