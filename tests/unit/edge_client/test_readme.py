"""The docs' "embed the client" example runs, unchanged, against a live shard API. Its home is
docs/embedding.md; the README and the quickstart page carry the same block, which must not drift."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EMBEDDING = ROOT / "docs" / "embedding.md"
#: Other pages that show the example; each copy must be the tested one.
COPIES = (ROOT / "README.md", ROOT / "docs" / "quickstart.md")
EXAMPLE = re.compile(r"<!-- embed-example:.*?-->\n```python\n(.*?)```", re.S)


def _example(doc: Path) -> str:
    block = EXAMPLE.search(doc.read_text())
    assert block, f"{doc.relative_to(ROOT)} lost its embed-the-client example"
    return block.group(1)


def test_every_copy_of_the_example_is_the_tested_one():
    tested = _example(EMBEDDING)
    for doc in COPIES:
        assert _example(doc) == tested, f"{doc.relative_to(ROOT)}'s example differs from docs/embedding.md's"


def test_the_embedding_example_edits_an_image(api, tmp_path):
    env = {**os.environ, "SAKURA_SERVER": api.url, "SAKURA_TEMPLATE": "portrait", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _example(EMBEDDING)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "edited.png").stat().st_size > 0 and "levels" in proc.stdout
    assert any((tmp_path / ".cache" / "sakura-shards" / "portrait").rglob("*.*"))
