"""Render the README's picture of a run report: `docs/report.png`.

Runs the example `pipelines/incident-triage.yaml` (its scripted model: no
network) with `--report`, then screenshots the page in headless Chromium
(Debian's `chromium`) with one fact opened (`#fact=bad-deploy`, which shows
its data, provenance and the suggestor's YAML).

Run from anywhere: python docs/report_picture.py [--out docs/report.png]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = "pipelines/incident-triage.yaml"
FACT = "bad-deploy"
WINDOW = "1280,1120"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 1
    from converge_dsl.cli import run

    os.chdir(ROOT)  # spans name `pipelines/...`: the excerpts are found from here
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "report.html"
        err = io.StringIO()
        code = run(["run", PIPELINE, "--report", str(page)], io.StringIO(), err)
        if code != 0:
            print(err.getvalue(), file=sys.stderr)
            return code
        command = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--window-size={WINDOW}",
            "--virtual-time-budget=3000",
            f"--screenshot={args.out.resolve()}",
            f"{page.as_uri()}#fact={FACT}",
        ]
        subprocess.run(command, check=True, capture_output=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
