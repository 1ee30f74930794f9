"""The README's "embed the client" example runs, unchanged, against a live shard API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_example_edits_an_image(api, tmp_path):
    text = README.read_text()
    block = re.search(r"<!-- embed-example:.*?-->\n```python\n(.*?)```", text, re.S)
    assert block, "the README lost its embed-the-client example"
    env = {**os.environ, "SAKURA_SERVER": api.url, "SAKURA_TEMPLATE": "portrait", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", block.group(1)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "edited.png").stat().st_size > 0 and "levels" in proc.stdout
    assert any((tmp_path / ".cache" / "sakura-shards" / "portrait").rglob("*.*"))
