"""``bench/e2e.py`` end to end on a small folder laid out like ../shared/traces (real trace files)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TRACES = ROOT.parent / "shared" / "traces"
PICK = {"norway-hsdpa": "norway_tram_21", "lumos-5g": "5g_trace_104_driving"}


@pytest.mark.skipif(not TRACES.exists(), reason="needs ../shared/traces")
def test_e2e_writes_every_figure_the_issue_names(tmp_path, monkeypatch):
    for family, name in PICK.items():
        (tmp_path / "traces" / family).mkdir(parents=True)
        shutil.copy(TRACES / family / name, tmp_path / "traces" / family / name)
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import e2e

    out, plots = tmp_path / "e2e.json", tmp_path / "plots"
    assert e2e.main(["--traces", str(tmp_path / "traces"), "--json", str(out), "--plots", str(plots),
                     "--starts", "2", "--repeats", "1"]) == 0
    report = json.loads(out.read_text())
    for family in [*PICK, "cellular", "overall"]:
        for system in ("sakura", "sakura-no-pipeline", "sakura-fixed-medium", "full-sequential", "cachegen",
                       "on-device", "oracle"):
            assert set(report["families"][family][system]) == {"median_s", "p90_s", "psnr_db"}
        assert set(report["ratios"][family]) >= {"cachegen_over_sakura", "ondevice_over_sakura", "sakura_over_oracle"}
        assert set(report["ondevice_by_token_ratio"][family]) == {"1", "2", "4"}
    assert report["families"]["overall"]["full-sequential"]["psnr_db"] == 100.0
    assert report["ratios"]["overall"]["sakura_over_oracle"] >= 0.99  # the oracle knows the future
    assert {p.name for p in plots.iterdir()} >= {"latency-cdf.png", "timeline-norway-hsdpa.png", "bandwidth-lumos-5g.png"}
    sys.modules.pop("e2e", None)
