"""Benchmark: `converge-dsl lsp` over stdio on a 1,000-suggestor pipeline, against `validate`.

Generates the pipeline of `bench/validate.py` (1,000 suggestors of every kind,
about 9,000 lines) in a temporary folder, starts `python -m converge_dsl lsp`
as an editor does and drives it with pygls's client:

  (a) one full `validate` of the file in this process
      (`converge_dsl.validation.check_pipeline`), the median of `--repeat` runs;
  (b) edit -> diagnostics: a one-character edit (`didChange`, incremental) and
      the time until the diagnostics of that version are published, one edit at
      a time, `--edits` of them (p50 and p95); the server's debounce (10 ms) is
      part of it, as it is for a user. The edits go round three places, each
      typed and then taken out again: an `x` in the pipeline's description (a
      top-level entry), an `x` in the description of a rule half-way down (a
      suggestor), and Enter at the end of that line (a line added, then removed:
      everything below it moves); the p50 of each place is printed too;
  (c) completion: the time of a `textDocument/completion` request inside
      a rule half-way down (a `dependencies` list, an expression after `count('`, a
      template after `facts.`), `--completions` of them (p50 and p95).

Each time is printed in milliseconds and as a ratio to (a), with the load
average beside them. Last line:
`lsp edit-p95/validate: X  completion-p95/validate: Y`.

A second part (`--burst-only` runs it alone) takes a large document: the
pipeline of `--burst-suggestors` (7,400: about 2 MB, 65,000 lines), opened,
then `--burst-edits` one-character incremental edits sent at once (an `x`
typed in a rule's description half-way down and taken out again, in turn)
and a request after them, `--burst-repeat` times:

  (d) the wall time until that request's answer, and the server's CPU time
      meanwhile, over the number of edits: what taking one edit costs the
      server (reading the frame, applying the change, scheduling the check),
      the analysis aside (it waits for the pause after the burst); and how
      many versions had their diagnostics published for the burst (1: the
      burst was taken as one text, as the debounce means);
  (e) the same edits applied in this process to the document's text by the
      server's `Document` and by pygls's `TextDocument` (what the server ran
      before), interleaved, the minimum of the rounds: microseconds an edit,
      and the ratio. (e) needs a checkout with `Document`; another prints (d).

The burst's last line: `lsp burst edit us: X  cpu us: Y  document/pygls: Z`.
The issue's absolute targets (p95 <= 150 ms and <= 50 ms) are for a quiet
machine; the ratios are what compare across machines and loads.

A third part (`--outline-only` runs it alone) takes a pipeline of `--outline-mb`
(5 MB: about 17,000 suggestors, 150,000 lines), opened in a server of this
checkout and, with `--before OTHER-CHECKOUT`, in one of that checkout too (each
in its own folder), then asks each server in turn for `documentSymbol` and
`semanticTokens/full`, `--outline-repeat` rounds after one that makes the
editor model:

  (f) the wall time of each request and the server's CPU time for it (from /proc),
      the minimum of the rounds, per checkout, and before/after ratios.

Its last line: `lsp outline documentSymbol ms: X  semanticTokens ms: Y ...`.

A fourth part (`--huge-only` runs it alone) asks whether a huge message holds the server
up for the others. A server of this checkout (and, with `--before`, one of that
checkout) has a small pipeline open; the time of a `documentSymbol` request on it is
the baseline (the minimum of `--huge-repeat`). Then, each followed at once by that
request, the time from the huge message handed to the client's stream to the answer:

  (g) `didOpen` of a pipeline of `--huge-mb` (20 MB: over the file-size cap, so it gets
      its one CD011 diagnostic and no analysis);
  (h) a notification of a method the server has no handler for (`$/bench`) whose
      params are `--huge-mb` of small JSON objects (pygls made a class for each one
      before dropping it: 39 to 60 s);
  (i) `didOpen` of a pipeline just under the cap (`--under-mb`, 7.5 MB), then an edit of
      the small pipeline: the time until the small pipeline's diagnostics, against the
      same edit's alone (analyses of different documents run side by side: it no longer
      waits for the large one's to end).

Each is printed in seconds and as a ratio to its baseline measured in the same run. Its
last line: `lsp huge didOpen/baseline: X  notification/baseline: Y  under-cap edit/baseline: Z`.

On a shared machine the wall times carry the waits for a core. The CPU time
the server spent on the edits (read from /proc on Linux: its user and system
time before and after them, over the number of edits) against validate's own
CPU time (`time.process_time`) is printed too: what one edit costs, the load
aside (`edit cpu/validate cpu`).

The server runs the `converge_dsl` this process imports (its checkout is put on
the server's PYTHONPATH), so `PYTHONPATH=OTHER-CHECKOUT python bench/lsp.py`
measures another checkout with the same benchmark (before/after comparisons).

Run: .venv/bin/python bench/lsp.py [--suggestors N] [--edits E] [--completions C]
     [--burst-only] [--burst-suggestors N] [--burst-edits E] [--burst-repeat R]
     [--outline-only] [--outline-mb M] [--outline-repeat R] [--before OTHER-CHECKOUT]
     [--huge-only] [--huge-mb M] [--under-mb M] [--huge-repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate import generate  # the same generated pipeline


def _checkout() -> Path:
    """The checkout of the `converge_dsl` this process imports (the server runs it too)."""
    import converge_dsl

    return Path(converge_dsl.__file__).resolve().parent.parent


def _validate_time(path: Path, repeat: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one validate: the medians of `repeat` runs."""
    from converge_dsl.validation import check_pipeline

    check_pipeline(path)  # imports and caches warm, as in the long-lived server
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        check_pipeline(path)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), statistics.median(cpu)


def _children() -> list[int]:
    """This process's child processes (Linux's /proc), [] where it cannot tell."""
    found = []
    for listing in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        found += [int(pid) for pid in listing.read_text().split()]
    return found


def _cpu_seconds(pid: int) -> float | None:
    """A process's user plus system CPU time (Linux's /proc), None where it cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _at(text: str, needle: str, offset: int, start: int = 0) -> lsp.Position:
    """The position `offset` characters after the first `needle` from `start` on."""
    index = text.index(needle, start) + offset
    return lsp.Position(text.count("\n", 0, index), index - (text.rfind("\n", 0, index) + 1))


class Driver:
    """A pygls client on the server, keeping when each version's diagnostics arrive."""

    def __init__(self) -> None:
        self.client = LanguageClient("bench", "1")
        self.published: dict[int, float] = {}
        self.event = asyncio.Event()

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: lsp.PublishDiagnosticsParams) -> None:
            if params.version is not None:
                self.published[params.version] = time.perf_counter()
                self.event.set()

    async def start(self, folder: Path, checkout: Path | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(checkout or _checkout())}
        # In the pipeline's folder, as an editor starts it: `-m` puts the working
        # folder first on the path, and the code measured is the one on PYTHONPATH.
        await self.client.start_io(
            sys.executable, "-m", "converge_dsl", "lsp", env=env, cwd=str(folder)
        )
        await self.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(), root_uri=folder.as_uri(), process_id=None
            )
        )
        self.client.initialized(lsp.InitializedParams())

    async def wait_for(self, version: int, timeout: float = 60) -> float:
        deadline = time.perf_counter() + timeout
        while version not in self.published:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), max(deadline - time.perf_counter(), 0.01))
        return self.published[version]

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def _places(text: str) -> list[tuple[str, lsp.Position, str]]:
    """Where the edits go: (name, position, what is typed there and then taken out)."""
    middle = text.index("description: Turns", len(text) // 2)
    line_end = text.index("\n", middle)
    return [
        ("top-level entry", _at(text, "description: Generated", 13), "x"),
        ("suggestor", _at(text, "description: Turns", 13, middle), "x"),
        ("new line", _at(text, "\n", 0, line_end), "\n"),
    ]


def _change(where: lsp.Position, typed: str, insert: bool) -> lsp.TextDocumentContentChangePartial:
    """Type `typed` at `where`, or (not `insert`) take it out again."""
    if insert:
        return lsp.TextDocumentContentChangePartial(range=lsp.Range(where, where), text=typed)
    end = (
        lsp.Position(where.line + 1, 0)
        if typed == "\n"
        else lsp.Position(where.line, where.character + len(typed))
    )
    return lsp.TextDocumentContentChangePartial(range=lsp.Range(where, end), text="")


async def _opened(
    path: Path, timeout: float = 60, checkout: Path | None = None
) -> tuple[Driver, int | None, str, str]:
    """A server (of `checkout`, default this one) started on `path`'s folder with `path`
    open and its first diagnostics published (within `timeout` seconds): the driver, the
    server's process id, the document's URI and text."""
    before = set(_children())
    driver = Driver()
    await driver.start(path.parent, checkout)
    server = next(iter(set(_children()) - before), None)
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    driver.client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "yaml", 1, text))
    )
    await driver.wait_for(1, timeout=timeout)
    return driver, server, uri, text


async def _run(
    path: Path, edits: int, completions: int
) -> tuple[list[tuple[str, float]], list[float], float | None]:
    """The edit times (with their place), the completion times, and the server's CPU
    seconds per edit."""
    driver, server, uri, text = await _opened(path)
    edit_times = []
    places = _places(text)
    cpu_start = _cpu_seconds(server) if server is not None else None
    for version in range(2, edits + 2):
        # A one-character edit, typed at one of the places, then taken out again.
        name, where, typed = places[(version - 2) // 2 % len(places)]
        change = _change(where, typed, insert=version % 2 == 0)
        sent = time.perf_counter()
        driver.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), [change]
            )
        )
        edit_times.append((name, await driver.wait_for(version) - sent))
    # The editor model made after the last diagnostics is part of an edit's cost too.
    await asyncio.sleep(0.2)
    cpu_end = _cpu_seconds(server) if server is not None else None
    cpu = None if cpu_start is None or cpu_end is None else (cpu_end - cpu_start) / edits
    middle = text.index("name: rule-", len(text) // 2)
    spots = [("dependencies: [", 15), ("count('", 7), ("{{ facts.", 9)]
    completion_times = []
    for index in range(completions):
        needle, offset = spots[index % len(spots)]
        position = _at(text, needle, offset, middle)
        start = time.perf_counter()
        result = await driver.client.text_document_completion_async(
            lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), position)
        )
        completion_times.append(time.perf_counter() - start)
        items = result.items if isinstance(result, lsp.CompletionList) else result or []
        if not items:
            sys.exit(f"no completion at {needle!r} (line {position.line + 1})")
    await driver.stop()
    return edit_times, completion_times, cpu


def _burst_changes(text: str, count: int) -> list[lsp.TextDocumentContentChangePartial]:
    """`count` one-character edits half-way down: an `x` typed, then taken out, in turn."""
    _, where, _ = _places(text)[1]
    return [_change(where, "x", insert=index % 2 == 0) for index in range(count)]


async def _burst(path: Path, edits: int, repeat: int) -> list[tuple[float, float | None, int]]:
    """Per round: (wall seconds an edit, server CPU seconds an edit, versions published)."""
    driver, server, uri, text = await _opened(path, timeout=300)
    changes = _burst_changes(text, edits)
    elsewhere = lsp.HoverParams(
        lsp.TextDocumentIdentifier((path.parent / "elsewhere.yaml").as_uri()), lsp.Position(0, 0)
    )
    rounds = []
    version = 1
    for _ in range(repeat):
        first = version + 1
        cpu_start = _cpu_seconds(server) if server is not None else None
        start = time.perf_counter()
        for change in changes:
            version += 1
            driver.client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), [change]
                )
            )
        await driver.client.text_document_hover_async(elsewhere)
        wall = time.perf_counter() - start
        cpu_end = _cpu_seconds(server) if server is not None else None
        cpu = None if cpu_start is None or cpu_end is None else cpu_end - cpu_start
        await driver.wait_for(version, timeout=300)
        published = sum(1 for seen in driver.published if first <= seen <= version)
        rounds.append((wall / edits, None if cpu is None else cpu / edits, published))
    await driver.stop()
    return rounds


def _document_edits(text: str, edits: int, repeat: int) -> tuple[float, float] | None:
    """(Document, pygls TextDocument) seconds an edit, the minimum of `repeat` interleaved
    rounds; None when this checkout has no `Document`."""
    try:
        from converge_dsl.lsp._document import Document
    except ImportError:
        return None
    from pygls.workspace.text_document import TextDocument

    changes = _burst_changes(text, edits)
    ours, pygls = [], []
    for _ in range(repeat):
        document = Document(text)
        start = time.perf_counter()
        for change in changes:
            document.apply(change)
        ours.append((time.perf_counter() - start) / edits)
        old = TextDocument("file:///bench.yaml", text)
        start = time.perf_counter()
        for change in changes:
            old.apply_change(change)
        pygls.append((time.perf_counter() - start) / edits)
        if document.text != old.source:
            sys.exit("the server's Document and pygls's TextDocument disagree")
    return min(ours), min(pygls)


def burst(suggestors: int, edits: int, repeat: int) -> None:
    """The second part (see the module's docstring): print (d) and (e)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"burst-{suggestors}.yaml"
        text = generate(suggestors)
        path.write_text(text, encoding="utf-8")
        rounds = asyncio.run(_burst(path, edits, repeat))
        # A few hundred edits in process: pygls's path costs milliseconds each.
        document = _document_edits(text, min(edits, 200), repeat)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    size = len(text.encode()) / 1e6
    print(
        f"burst: {edits} edits at once to {suggestors} suggestors ({size:.1f} MB, "
        f"{text.count(chr(10))} lines); load average {load}; code: {_checkout()}"
    )
    wall = min(w for w, _, _ in rounds)
    cpus = [c for _, c, _ in rounds if c is not None]
    print(f"server, wall time an edit (min):  {wall * 1e6:9.1f} us")
    if cpus:
        print(f"server, CPU time an edit (min):   {min(cpus) * 1e6:9.1f} us")
    print(f"versions published per burst:     {', '.join(str(p) for _, _, p in rounds)}")
    ratio = "n/a"
    if document is not None:
        ours, pygls = document
        ratio = f"{ours / pygls:.5f}"
        print(f"Document.apply an edit (min):     {ours * 1e6:9.1f} us")
        print(f"pygls TextDocument an edit (min): {pygls * 1e6:9.1f} us  ({ratio})")
    cpu = f"{min(cpus) * 1e6:.1f}" if cpus else "n/a"
    print(f"lsp burst edit us: {wall * 1e6:.1f}  cpu us: {cpu}  document/pygls: {ratio}")


def compared(before: Path | None) -> dict[str, Path]:
    """The checkouts measured: this one ("after") and, when given, `before` first."""
    checkouts = {"after": _checkout()}
    return checkouts if before is None else {"before": before.resolve(), **checkouts}


def copies(folder: Path, checkouts: dict[str, Path], file: str, text: str) -> dict[str, Path]:
    """`text` written as `file` in a folder of `folder` for each checkout (a server analyses
    what its folder holds): the path of each."""
    paths = {}
    for name in checkouts:
        (folder / name).mkdir()
        paths[name] = folder / name / file
        paths[name].write_text(text, encoding="utf-8")
    return paths


async def _outline_times(
    paths: dict[str, Path], checkouts: dict[str, Path], repeat: int
) -> dict[str, dict[str, list[float]]]:
    """Per checkout, the seconds of each `documentSymbol` and `semanticTokens/full` request
    on its copy of the pipeline, the servers asked in turn, `repeat` rounds."""
    drivers = {}
    for name, path in paths.items():
        driver, pid, uri, _ = await _opened(path, timeout=600, checkout=checkouts[name])
        drivers[name] = (driver, pid, lsp.TextDocumentIdentifier(uri))
    requests = {
        "documentSymbol": lambda d, doc: d.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(doc)
        ),
        "semanticTokens": lambda d, doc: d.client.text_document_semantic_tokens_full_async(
            lsp.SemanticTokensParams(doc)
        ),
    }
    times: dict[str, dict[str, list[float]]] = {
        n: {k: [] for r in requests for k in (r, f"{r} cpu")} for n in paths
    }
    for round_ in range(repeat + 1):  # the first round makes each server's editor model
        for name, (driver, pid, doc) in drivers.items():
            for request, send in requests.items():
                cpu = _cpu_seconds(pid) if pid is not None else None
                start = time.perf_counter()
                answer = await send(driver, doc)
                wall = time.perf_counter() - start
                cpu_end = _cpu_seconds(pid) if pid is not None else None
                if not answer or (request == "semanticTokens" and not answer.data):
                    sys.exit(f"{name}: {request} answered nothing")
                if round_:
                    times[name][request].append(wall)
                    if cpu is not None and cpu_end is not None:
                        times[name][f"{request} cpu"].append(cpu_end - cpu)
    for driver, _, _ in drivers.values():
        await driver.stop()
    return times


def outline(megabytes: float, before: Path | None, repeat: int) -> None:
    """The third part: `documentSymbol` and `semanticTokens/full` on a pipeline of about
    `megabytes` MB, from this checkout and (`--before`) another one, interleaved."""
    per_suggestor = len(generate(100).encode()) / 100
    suggestors = int(megabytes * 1e6 / per_suggestor)
    text = generate(suggestors)
    checkouts = compared(before)
    with tempfile.TemporaryDirectory() as folder:
        paths = copies(Path(folder), checkouts, f"outline-{suggestors}.yaml", text)
        times = asyncio.run(_outline_times(paths, checkouts, repeat))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"outline: {suggestors} suggestors ({len(text.encode()) / 1e6:.1f} MB, "
        f"{text.count(chr(10))} lines); load average {load}; min of {repeat}, interleaved"
    )
    for name, checkout in checkouts.items():
        figures = "  ".join(f"{r}: {min(t) * 1000:7.1f} ms" for r, t in times[name].items() if t)
        print(f"{name:6} {figures}  ({checkout})")
    shown = {r: t for r, t in times["after"].items() if t}
    last = "  ".join(f"{r.replace(' ', '-')} ms: {min(t) * 1000:.1f}" for r, t in shown.items())
    if "before" in times:
        last += "  " + "  ".join(
            f"{r.replace(' ', '-')} before/after: {min(times['before'][r]) / min(t):.2f}"
            for r, t in shown.items()
        )
    print(f"lsp outline {last}")


def _sized(megabytes: float) -> str:
    """The generated pipeline of about `megabytes` MB."""
    per_suggestor = len(generate(100).encode()) / 100
    return generate(int(megabytes * 1e6 / per_suggestor))


async def _huge_times(
    folder: Path, checkout: Path, megabytes: float, under: float, repeat: int
) -> dict[str, float]:
    """Seconds of (g), (h) and (i) and of their baselines (the module's docstring)."""
    small = folder / "small.yaml"
    small.write_text(generate(3), encoding="utf-8")
    driver, _, uri, text = await _opened(small, checkout=checkout)
    document = lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))
    version = 1

    async def symbols_after(send: Callable[[], None]) -> float:
        send()  # its making aside: pygls's client takes seconds to make 20 MB of objects
        start = time.perf_counter()
        await driver.client.text_document_document_symbol_async(document)
        return time.perf_counter() - start

    async def edit_diagnostics() -> float:
        nonlocal version
        version += 1
        change = lsp.TextDocumentContentChangeWholeDocument(text + "\n" * (version % 2))
        start = time.perf_counter()
        driver.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), [change]
            )
        )
        return await driver.wait_for(version, timeout=600) - start

    def opened(name: str, body: str) -> Callable[[], None]:
        item = lsp.TextDocumentItem((folder / name).as_uri(), "yaml", 1, body)
        return lambda: driver.client.text_document_did_open(lsp.DidOpenTextDocumentParams(item))

    times = {
        "baseline": min([await symbols_after(lambda: None) for _ in range(repeat)]),
        "edit baseline": min([await edit_diagnostics() for _ in range(repeat)]),
    }
    times["didOpen"] = await symbols_after(opened("huge.yaml", _sized(megabytes)))
    objects = [{"n": n, "of": {"n": n}} for n in range(int(megabytes * 1e6 / 40))]
    times["notification"] = await symbols_after(
        lambda: driver.client.protocol.notify("$/bench", {"all": objects})
    )
    opened("under.yaml", _sized(under))()
    await asyncio.sleep(0.5)  # its analysis under way
    times["under-cap edit"] = await edit_diagnostics()
    await driver.stop()
    return times


def huge(megabytes: float, under: float, before: Path | None, repeat: int) -> None:
    """The fourth part: a small request after a huge message (the module's docstring)."""
    checkouts = compared(before)
    results = {}
    for name, checkout in checkouts.items():
        with tempfile.TemporaryDirectory() as folder:
            results[name] = asyncio.run(
                _huge_times(Path(folder), checkout, megabytes, under, repeat)
            )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"huge: {megabytes} MB messages, {under} MB under the cap; load average {load}")
    ratios = {}
    for name, times in results.items():
        ratios[name] = {
            "didOpen": times["didOpen"] / times["baseline"],
            "notification": times["notification"] / times["baseline"],
            "under-cap edit": times["under-cap edit"] / times["edit baseline"],
        }
        figures = "  ".join(f"{k}: {v:.3f} s" for k, v in times.items())
        print(f"{name:6} {figures}  ({checkouts[name]})")
        print(f"{name:6} " + "  ".join(f"{k}/baseline: {v:.1f}" for k, v in ratios[name].items()))
    print(
        "lsp huge "
        + "  ".join(f"{k}/baseline: {v:.1f}" for k, v in ratios["after"].items()).replace(
            "under-cap edit", "under-cap-edit"
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--suggestors", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--completions", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--burst-suggestors", type=int, default=7400)
    parser.add_argument("--burst-edits", type=int, default=1000)
    parser.add_argument("--burst-repeat", type=int, default=3)
    parser.add_argument("--burst-only", action="store_true")
    parser.add_argument("--outline-mb", type=float, default=5.0)
    parser.add_argument("--outline-repeat", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a checkout to compare the outline with")
    parser.add_argument("--outline-only", action="store_true")
    parser.add_argument("--huge-mb", type=float, default=20.0)
    parser.add_argument("--under-mb", type=float, default=7.5)
    parser.add_argument("--huge-repeat", type=int, default=5)
    parser.add_argument("--huge-only", action="store_true")
    args = parser.parse_args()
    if args.huge_only:
        huge(args.huge_mb, args.under_mb, args.before, args.huge_repeat)
        return
    if args.outline_only:
        outline(args.outline_mb, args.before, args.outline_repeat)
        return
    if args.burst_only:
        burst(args.burst_suggestors, args.burst_edits, args.burst_repeat)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"bench-{args.suggestors}.yaml"
        path.write_text(generate(args.suggestors), encoding="utf-8")
        validate, validate_cpu = _validate_time(path, args.repeat)
        edits, completions, edit_cpu = asyncio.run(_run(path, args.edits, args.completions))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"pipeline: {args.suggestors} suggestors; load average {load}; code: {_checkout()}")
    print(f"validate (one, in process):      {validate * 1000:7.1f} ms")
    print(f"validate CPU time:               {validate_cpu * 1000:7.1f} ms")
    edit_times = [seconds for _, seconds in edits]
    for label, values in (("edit -> diagnostics", edit_times), ("completion", completions)):
        for q, name in ((0.5, "p50"), (0.95, "p95")):
            value = _p(values, q)
            print(f"{label + ' ' + name + ':':32} {value * 1000:7.1f} ms  ({value / validate:.2f})")
        if label.startswith("edit"):
            for place in dict.fromkeys(name for name, _ in edits):
                value = _p([s for name, s in edits if name == place], 0.5)
                print(
                    f"{'  p50, ' + place + ':':32} {value * 1000:7.1f} ms  ({value / validate:.2f})"
                )
    if edit_cpu is not None:
        ratio = edit_cpu / validate_cpu
        print(f"server CPU time per edit:        {edit_cpu * 1000:7.1f} ms  ({ratio:.2f})")
        print(f"lsp edit cpu/validate cpu: {ratio:.2f}")
    print(
        f"lsp edit-p95/validate: {_p(edit_times, 0.95) / validate:.2f}  "
        f"completion-p95/validate: {_p(completions, 0.95) / validate:.2f}"
    )
    burst(args.burst_suggestors, args.burst_edits, args.burst_repeat)
    outline(args.outline_mb, args.before, args.outline_repeat)
    huge(args.huge_mb, args.under_mb, args.before, args.huge_repeat)


if __name__ == "__main__":
    main()
