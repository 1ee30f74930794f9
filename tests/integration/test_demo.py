"""``sakura demo`` (what ``make demo`` runs): the whole mission, and nothing left running after it.
Its behaviour, not its timing: one pair of live edits per template (``make demo`` runs seven, for
its medians), and the test asks that every part of the output be there, never what it measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil


def _ray_processes() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name", "cmdline"])
            if "raylet" in (p.info["name"] or "") or "gcs_server" in (p.info["name"] or "")}


def test_demo_runs_the_mission_and_leaves_no_process(tmp_path):
    before = _ray_processes()
    sakura = str(Path(sys.executable).with_name("sakura"))
    proc = subprocess.run([sakura, "demo", "--out", str(tmp_path), "--repeats", "1"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "processes left behind: none" in out and "exact True" in out
    for template in ("face-lfw85", "tryon-brick", "style-coffee"):
        assert f"{template}" in out.split("== 3.")[1]
        for name in (f"{template}.png", f"timeline-{template}.png", f"bandwidth-{template}.png"):
            assert (tmp_path / name).stat().st_size > 0
    assert "cachegen" in out and "on-device" in out  # the latency table against the baselines
    assert out.count("SAKURA / phone alone (live, median of 1 back-to-back pairs)") == 3  # a verdict per template
    assert _ray_processes() <= before  # its own Ray cluster is gone
