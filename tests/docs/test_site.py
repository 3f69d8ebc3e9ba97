"""The documentation site builds with MkDocs in strict mode: a broken link fails it.

`docs/mkdocs.yml` turns every link check on (missing pages, missing anchors,
absolute links) and `strict: true` makes each finding fatal; `.ci/run`
builds the site the same way.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _build(docs: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict -f docs/mkdocs.yml` from the folder holding `docs`.

    The config is named by a relative path, as `.ci/run` names it: MkDocs
    accepts `docs_dir: .` (the pages beside the config) only then.
    """
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "docs/mkdocs.yml"]
    return subprocess.run(
        [*command, "-d", str(site)],
        cwd=docs.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = _build(DOCS, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    for page in ("tutorial", "reference", "agents", "packs", "stop-reasons", "errors"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


def test_every_page_is_in_the_navigation() -> None:
    nav = (DOCS / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        assert f": {page.name}\n" in nav, page.name


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    page = docs / "agents.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\n[gone](nowhere.md) [lost](reference.md#no-such)\n",
        encoding="utf-8",
    )
    done = _build(docs, tmp_path / "site")
    assert done.returncode != 0
    assert "nowhere.md" in done.stderr
    assert "no-such" in done.stderr
