"""``sakura edit`` against the real shard API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from skimage.io import imread

from sakura.cli import main

TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "norway-hsdpa" / "norway_bus_18"


def test_edit_writes_the_image_and_prints_the_timeline(api, tmp_path, capsys):
    out = tmp_path / "edited.png"
    args = [
        "edit", "--server", api.url, "--template", "portrait", "--image", "skimage:coffee", "--out", str(out), "--json"
    ]
    if TRACE.exists():
        args += ["--trace", str(TRACE), "--policy", "oracle", "--rtt-ms", "10"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert imread(out).shape == (32, 32, 3)
    assert report["template"] == "portrait" and report["version"] == 1 and len(report["shards"]) == 6
    assert sum(report["levels"].values()) == 6 and report["latency_s"] > 0


def test_edit_reports_errors_without_a_traceback(api, tmp_path, capsys):
    args = [
        "edit", "--server", api.url, "--template", "missing", "--image", "skimage:coffee",
        "--out", str(tmp_path / "x.png"),
    ]
    assert main(args) == 1
    assert "HTTP 404" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["edit", "--server", api.url, "--template", "portrait", "--image", "skimage:coffee",
              "--out", str(tmp_path / "y.png"), "--policy", "oracle"])


@pytest.mark.parametrize("server", ["127.0.0.1:8000", "ftp://127.0.0.1/", "http://127.0.0.1:99999"])
def test_a_malformed_server_url_is_a_one_line_error(server, tmp_path, capsys):
    args = [
        "edit", "--server", server, "--template", "portrait", "--image", "skimage:coffee",
        "--out", str(tmp_path / "x.png"),
    ]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("sakura: error: server URL") and err.count("\n") == 1 and "Traceback" not in err


def test_https_only_refuses_a_plain_http_server(api, tmp_path, capsys):
    args = ["edit", "--server", api.url, "--template", "portrait", "--image", "skimage:coffee",
            "--out", str(tmp_path / "x.png"), "--https-only"]
    assert main(args) == 1 and "https" in capsys.readouterr().err


def test_edit_says_when_it_resizes_the_photo_and_reports_model_loading_apart(api, tmp_path, capsys):
    from sakura.platform.images import load_image, save_image

    photo = tmp_path / "photo.png"
    save_image(load_image("skimage:coffee").transpose(1, 0, 2), photo)  # 400 wide, 600 high
    assert main(["edit", "--server", api.url, "--template", "portrait", "--image", str(photo),
                 "--out", str(tmp_path / "x.png")]) == 0
    captured = capsys.readouterr()
    assert "the 400x600 photo was centre-cropped to a square and resized to 32x32" in captured.err
    assert "model load" in captured.out
    assert main(["edit", "--server", api.url, "--template", "portrait", "--image", str(photo),
                 "--out", str(tmp_path / "y.png"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["input_size"] == [600, 400] and report["output_size"] == [32, 32]
    assert 0 <= report["model_load_s"] <= report["manifest_s"]
