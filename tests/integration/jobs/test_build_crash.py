"""Kill the build (driver or worker) at random points: no reader ever sees a partial version.

A kill test like tests/integration/cluster's: it runs with them (``make test-cluster``).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.integration.jobs.test_build import check_library, write_spec

pytestmark = pytest.mark.cluster

#: Half kill the driver, half a builder; tests/integration/cluster kills whole nodes (make test-cluster).
TRIALS = 5


def _change_images(tmp_path, trial: int) -> None:
    """Every trial changes every image, so every template needs a new version."""
    from skimage import io as skio

    for png in sorted(tmp_path.glob("tpl-*.png")):
        img = skio.imread(png)
        skio.imsave(png, np.roll(img, 1 + trial, axis=1), check_contrast=False)


def _builder_pids() -> list[int]:
    import psutil

    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "TemplateBuilder" in cmdline:
            pids.append(proc.info["pid"])
    return pids


def test_sigkill_at_random_points_never_exposes_a_partial_version(tmp_path, ray_cluster):
    spec = write_spec(tmp_path, {"tpl-a": "skimage:brick", "tpl-b": "skimage:coffee", "tpl-c": "skimage:chelsea"})
    store = f"file://{tmp_path}/lib"
    cmd = [
        sys.executable, "-m", "sakura.jobs.build", "--spec", str(spec), "--model", "tiny-flux", "--store", store,
        "--create", "--ray-address", ray_cluster.address, "--calibration", "1",
    ]
    rng = random.Random(20261129)
    outcomes = []
    for trial in range(TRIALS):
        _change_images(tmp_path, trial)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + rng.uniform(1.0, 9.0)
        victim = "driver" if trial % 2 == 0 else "worker"
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        workers = _builder_pids() if victim == "worker" else []
        if proc.poll() is not None:
            outcomes.append("finished first")
        elif workers:
            subprocess.run(["kill", "-9", str(workers[0])], check=False)
            outcomes.append("worker killed")
        else:
            proc.kill()
            outcomes.append("driver killed")
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        check_library(store)  # every visible version is complete and verifies
    assert sum(o != "finished first" for o in outcomes) >= TRIALS // 2, outcomes

    final = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr[-2000:]
    library = check_library(store)
    assert library.templates() == ["tpl-a", "tpl-b", "tpl-c"]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "nothing new to publish" in again.stdout
