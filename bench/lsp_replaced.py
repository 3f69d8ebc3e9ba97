"""Benchmark: `converge-dsl lsp` when a large document's text is replaced while it is analysed.

Opens the pipeline of `bench/validate.py` with `--suggestors` (3,000) suggestors in
a server of this checkout and, with `--before OTHER-CHECKOUT`, in one of that
checkout too (each in its own folder, started as `bench/lsp.py` starts them), and
waits for its first diagnostics. Then, `--repeat` rounds, the servers in turn:
`--edits` (10) whole-text replacements (an `x` typed in the description of
a rule further down each time), `--gap` seconds (0.05) apart, past the
server's pause in typing (10 ms), so that each edit's analysis is scheduled
while the one before is queued or running; and

  (a) the time from the last edit sent to its diagnostics published (the minimum
      over the rounds), and how many versions had theirs published in the round.

A server that analyses each replaced text to its end makes the last edit wait for
the analyses before it; one that drops them does not. Last line:
`lsp replaced last-edit ms: X` and, with `--before`, `before/after: R`.

Run: .venv/bin/python bench/lsp_replaced.py [--suggestors N] [--edits E] [--gap S]
     [--repeat R] [--before OTHER-CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp import Driver, _opened, compared, copies  # the same client and server start
from validate import generate  # the same generated pipeline


def _texts(text: str, edits: int) -> list[str]:
    """`edits` texts, each `text` with an `x` typed in the description of a rule further down."""
    places, start = [], len(text) // 4
    for _ in range(edits):
        start = text.index("description: Turns", start + 1)
        places.append(start + len("description: "))
    return [text[:at] + "x" + text[at:] for at in places]


async def _round(driver: Driver, uri: str, texts: list[str], version: int, gap: float) -> float:
    """Send `texts` as versions after `version`, `gap` seconds apart: the seconds from the
    last sent to its diagnostics."""
    sent = 0.0
    for number, text in enumerate(texts, start=version + 1):
        if number > version + 1:
            await asyncio.sleep(gap)
        sent = time.perf_counter()
        driver.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=number),
                [lsp.TextDocumentContentChangeWholeDocument(text)],
            )
        )
    return await driver.wait_for(version + len(texts), timeout=600) - sent


async def _times(
    paths: dict[str, Path], checkouts: dict[str, Path], edits: int, gap: float, repeat: int
) -> dict[str, list[tuple[float, int]]]:
    """Per checkout, each round's (seconds to the last edit's diagnostics, versions
    published in the round)."""
    servers = {}
    for name, path in paths.items():
        driver, _, uri, text = await _opened(path, timeout=600, checkout=checkouts[name])
        servers[name] = (driver, uri, text)
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in paths}
    version = 1
    for round_ in range(repeat):
        for name, (driver, uri, text) in servers.items():
            texts = _texts(text, edits)
            if round_ % 2:  # back and forth: every round's first edit changes the text
                texts = texts[::-1]
            seconds = await _round(driver, uri, texts, version, gap)
            published = sum(1 for seen in driver.published if seen > version)
            results[name].append((seconds, published))
        version += edits
    for driver, _, _ in servers.values():
        await driver.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--suggestors", type=int, default=3000)
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a checkout to compare with")
    args = parser.parse_args()
    checkouts = compared(args.before)
    text = generate(args.suggestors)
    with tempfile.TemporaryDirectory() as folder:
        paths = copies(Path(folder), checkouts, f"replaced-{args.suggestors}.yaml", text)
        results = asyncio.run(_times(paths, checkouts, args.edits, args.gap, args.repeat))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"replaced: {args.edits} edits {args.gap * 1000:.0f} ms apart to {args.suggestors} "
        f"suggestors ({len(text.encode()) / 1e6:.1f} MB); load average {load}; "
        f"min of {args.repeat}, interleaved"
    )
    best = {}
    for name, rounds in results.items():
        best[name] = min(seconds for seconds, _ in rounds)
        published = ", ".join(str(count) for _, count in rounds)
        print(
            f"{name:6} last edit -> diagnostics: {best[name] * 1000:8.1f} ms  "
            f"versions published per round: {published}  ({checkouts[name]})"
        )
    last = f"lsp replaced last-edit ms: {best['after'] * 1000:.1f}"
    if "before" in best:
        last += f"  before/after: {best['before'] / best['after']:.2f}"
    print(last)


if __name__ == "__main__":
    main()
