"""MkDocs hooks (mkdocs.yml ``hooks:``).

The pages show the figures that benchmarks write to ``bench/out/`` (outside ``docs/``), linked as
``../bench/out/...`` so they also resolve when a page is read in the repository. The build adds
every picture of ``bench/out`` to the site as ``bench-out/...`` and points those links there, so
``mkdocs build --strict`` still checks that each one exists.

The docstrings cross-reference in Sphinx's roles (``:class:`EdgeError```), which Markdown leaves
as text: the API page shows them as plain code (``~`` keeps the last name, as Sphinx does)."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
BENCH_OUT = ROOT / "bench" / "out"
SITE_DIR = "bench-out"
PICTURES = (".png", ".svg", ".jpg")
LINK = re.compile(r"\]\((?:\.\./)+bench/out/")
ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj|const):<code>(~)?([^<]*)</code>")


def on_files(files: Files, config) -> Files:
    for path in sorted(BENCH_OUT.rglob("*")):
        if path.suffix in PICTURES and path.is_file():
            files.append(File.generated(config, f"{SITE_DIR}/{path.relative_to(BENCH_OUT).as_posix()}",
                                        abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    depth = page.file.src_uri.count("/")
    return LINK.sub(f"]({'../' * depth}{SITE_DIR}/", markdown)


def on_page_content(html: str, page, config, files: Files) -> str:
    return ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)
