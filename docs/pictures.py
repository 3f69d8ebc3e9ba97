"""Make the README's pictures: `docs/graph.png` and `docs/report.png`.

    python docs/pictures.py [graph|report]...

- `graph`: `converge-dsl graph --format html` of `pipelines/support-triage.yaml`,
  with the node `suggestor:classify` chosen through the page's `#node=` address,
  so the side panel shows its YAML source;
- `report`: `converge-dsl run pipelines/incident-triage.yaml --report` (its
  scripted model: no network), with the fact `bad-deploy` opened through
  `#fact=`, which shows its data, provenance and the suggestor's YAML.

Each page is screenshotted in headless Chromium (Debian's `chromium`). With
no name, both are made. Run it after changing a page or an example, from
anywhere, and look at the PNGs.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]


class Picture:
    """One picture: how to write its page, which address to open, the window."""

    def __init__(
        self, write_page: Callable[[Path], None], fragment: str, size: str, scale: str
    ) -> None:
        self.write_page, self.fragment, self.size, self.scale = write_page, fragment, size, scale


def _graph_page(page: Path) -> None:
    from converge_dsl.graph import graph_pipeline, render

    graph = graph_pipeline(Path("pipelines/support-triage.yaml"), inputs={})
    page.write_text(render(graph, "html"), encoding="utf-8")


def _report_page(page: Path) -> None:
    from converge_dsl.cli import run

    err = io.StringIO()
    if run(["run", "pipelines/incident-triage.yaml", "--report", str(page)], io.StringIO(), err):
        raise SystemExit(err.getvalue())


PICTURES = {
    "graph": Picture(
        _graph_page, "#node=" + quote("suggestor:classify", safe=""), "1400,760", "1.5"
    ),
    "report": Picture(_report_page, "#fact=bad-deploy", "1280,1120", "1"),
}


def screenshot(browser: str, picture: Picture, out: Path) -> None:
    """Write `picture`'s page, open it in headless `browser`, save the window to `out`."""
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "page.html"
        picture.write_page(page)
        command = [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            f"--window-size={picture.size}",
            f"--force-device-scale-factor={picture.scale}",
            "--virtual-time-budget=3000",
            f"--screenshot={out.resolve()}",
            page.as_uri() + picture.fragment,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"chromium could not screenshot {out.name}:\n{done.stderr}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="graph|report", help="default: both")
    names = parser.parse_args().names or list(PICTURES)
    unknown = sorted(set(names) - PICTURES.keys())
    if unknown:
        parser.error(f"no picture {unknown[0]!r} (choose from {', '.join(PICTURES)})")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium is not installed (Debian: apt-get install chromium)", file=sys.stderr)
        return 1
    os.chdir(ROOT)  # the pages name `pipelines/...`: their source excerpts are found from here
    for name in names:
        out = ROOT / "docs" / f"{name}.png"
        screenshot(browser, PICTURES[name], out)
        print(f"wrote docs/{out.name} ({out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
