"""``sakura demo`` (what ``make demo`` runs): the whole mission, and nothing left running after it.
Its behaviour, not its timing: two of its three traces (the 3G one spends most of its minute on
the manifest) and a faster paced phone (``--block-s 0.1``: the link is scaled to match), and the
test asks that every part of the output be there, never what it measured."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psutil

TRACES = ("4G", "5G")
LEGEND = ("trace:", "trace mean:", "SAKURA:", "phone alone:", "SAKURA / phone alone:", "SAKURA fetched:")


def _ray_processes() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name", "cmdline"])
            if "raylet" in (p.info["name"] or "") or "gcs_server" in (p.info["name"] or "")}


def test_demo_runs_the_mission_and_leaves_no_process(tmp_path):
    before = _ray_processes()
    sakura = str(Path(sys.executable).with_name("sakura"))
    proc = subprocess.run([sakura, "demo", "--out", str(tmp_path), "--traces", ",".join(TRACES), "--block-s", "0.1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "processes left behind: none" in out and "exact True" in out
    emulation, edits, table = out.split("== 3.")[1].split("== 4.")[0], out.split("== 4.")[1].split("== 5.")[0], \
        out.split("== 5.")[1].split("== 6.")[0]
    # what the pacing stands for, the scale factor, and that it is an emulation
    assert "klein-4b-ref1024 on flagship-npu" in emulation and "an emulation" in emulation
    assert re.search(r"x k = \d", emulation) and "optimistic bracket" in emulation
    for label in TRACES:
        for name in (f"edits-{label.lower()}.png", f"timeline-{label.lower()}.png", f"bandwidth-{label.lower()}.png"):
            assert (tmp_path / name).stat().st_size > 0, name
        section = edits.split(f"   {label}: ")[1].split("SAKURA / phone alone")[0]
        # each edit's per-shard decisions: every one of the six blocks computed or fetched at a level
        sakura_blocks = re.search(r"SAKURA\s+blocks\s+(.*)", section)
        alone_blocks = re.search(r"phone alone\s+blocks\s+(.*)", section)
        assert sakura_blocks and alone_blocks, section
        assert re.findall(r"(\d):(computed|compact|medium|full)", sakura_blocks.group(1))[-1][0] == "5"
        assert [i for i, _ in re.findall(r"(\d):(computed)", alone_blocks.group(1))] == list("012345")
        assert re.search(rf"^   {label}\s+\S+ Mbit/s\s+\S+ s\s+\S+ s\s+\d+\.\d\d (SAKURA faster|SAKURA slower|no "
                         r"difference).*\d of 6 blocks", table, re.M), table  # its verdict row
    assert "3G" not in table.split("\n   trace:")[0]  # only the traces asked for
    for column in LEGEND:  # a legend line per column
        assert f"\n   {column} " in table, column
    assert _ray_processes() <= before  # its own Ray cluster is gone
