"""Make the README's picture of `converge-dsl graph`: an example's HTML page, screenshotted.

    python docs/graph_picture.py [--pipeline pipelines/support-triage.yaml]
                                 [--select suggestor:classify] [--out docs/graph.png]

Renders the pipeline's graph to one HTML page (`converge-dsl graph --format
html`), opens it in headless Chromium (Debian's `chromium`) with the node
`--select` chosen through the page's `#node=ID` address, so the side panel
shows that node's YAML source, and saves a PNG of the window. Run it from the
repository's root after changing the page or the example; look at the PNG.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from converge_dsl.graph import graph_pipeline, render

ROOT = Path(__file__).resolve().parents[1]


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default="pipelines/support-triage.yaml")
    parser.add_argument("--select", default="suggestor:classify", metavar="NODE_ID")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "graph.png")
    parser.add_argument("--size", default="1400,760", help="window WIDTH,HEIGHT in CSS pixels")
    parser.add_argument("--scale", default="1.5", help="device pixels per CSS pixel")
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium is not installed (Debian: apt-get install chromium)", file=sys.stderr)
        return 1
    graph = graph_pipeline(Path(args.pipeline), inputs={})
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "graph.html"
        page.write_text(render(graph, "html"), encoding="utf-8")
        address = page.as_uri() + (f"#node={quote(args.select, safe='')}" if args.select else "")
        command = [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            f"--window-size={args.size}",
            f"--force-device-scale-factor={args.scale}",
            f"--screenshot={args.out.resolve()}",
            address,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or not args.out.exists():
        print(done.stderr, file=sys.stderr)
        return 1
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB) from {args.pipeline}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
