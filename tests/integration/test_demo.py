"""``sakura demo`` (what ``make demo`` runs): the whole mission, and nothing left running after it.
Its behaviour, not its timing: two of its three traces (the 3G one spends most of its minute on
the manifest) and a faster paced phone (``--block-s 0.1``: the link is scaled to match), and the
test asks that every part of the output be there, never what it measured. Its Ray cluster keeps
its files under a folder of its own (``RAY_TMPDIR``), so what it leaves behind is told apart from
the processes of other test runs on this machine (CI runs the kill tests' clusters beside it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

TRACES = ("4G", "5G")
LEGEND = ("trace:", "trace mean:", "SAKURA:", "phone alone:", "SAKURA / phone alone:", "SAKURA fetched:")


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """A short folder for the demo's cluster (Ray's socket paths under it must stay within the
    kernel's 107 characters, so not under pytest's ``tmp_path``)."""
    folder = Path(tempfile.mkdtemp(prefix="sakura-demo-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _processes_under(folder: Path) -> list[str]:
    """Processes whose command line names ``folder``: the raylet, the GCS and the workers of a
    cluster that keeps its files there."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or ())
        if str(folder) in cmdline:
            found.append(cmdline[:200])
    return found


def test_demo_runs_the_mission_and_leaves_no_process(tmp_path, ray_tmp):
    sakura = str(Path(sys.executable).with_name("sakura"))
    proc = subprocess.run([sakura, "demo", "--out", str(tmp_path), "--traces", ",".join(TRACES), "--block-s", "0.1"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "RAY_TMPDIR": str(ray_tmp)})
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
    assert list(ray_tmp.glob("**/session_*")), "the demo's cluster kept its files elsewhere"
    assert _processes_under(ray_tmp) == []  # its own Ray cluster is gone
