"""Every reader of files we did not write refuses FIFOs, devices, sockets and links to them.

`converge_dsl._reading` is the one opener; this drives each entry point of the
command line with each special file in the place of the file it reads, and
asks for a located refusal within 2 s, no traceback, and the entry point's
exit code (a cache entry is only ignored: the run goes on without it).
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from converge_dsl import codes
from converge_dsl._reading import ReadRefused, read_bytes
from converge_dsl.cli import run

GATED = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
promotion: {gated_keys: [strategies]}
seeds: [{id: a, content: x}]
suggestors:
  - name: plan
    kind: rule
    when: "true"
    emit: [{key: strategies, id: s1, content: "go"}]
"""

MODELLED = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: m
models: {default: {adapter: scripted, script: s.yaml}}
seeds: [{id: a, content: x}]
suggestors:
  - name: ask
    kind: llm
    model: default
    dependencies: [seeds]
    target: strategies
    prompt: {user: "hello"}
    output: {format: lines, id: "s-{{ index }}"}
"""

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules: [{match: {suggestor: ask}, reply: "one"}]
"""

PACK = """\
apiVersion: converge-dsl/v1
kind: Pack
name: alpha
version: 1.0.0
description: test pack
requires: {converge-dsl: ">=0.1", packs: {}}
suggestors:
  note:
    kind: rule
    template:
      emit: [{id: note, content: "x"}]
"""

PACKED = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: demo
packs: {alpha: ">=1"}
repositories: [{path: repo}]
suggestors:
  - {name: noter, kind: pack, use: alpha/note, input: seeds, output: strategies}
"""


class _Hung(BaseException):
    """Raised by the alarm: the reader blocked (not an Exception, so nothing catches it)."""


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVERGE_DSL_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _cli(*argv: str | Path) -> tuple[int, str, str, float]:
    """Exit code, stdout, stderr and seconds taken; a read that blocks 10 s fails the test."""

    def hung(signum: int, frame: FrameType | None) -> None:
        raise _Hung

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 10)
    started = time.monotonic()
    try:
        code = run([str(a) for a in argv], out, err)
    except _Hung:
        pytest.fail(f"{argv} blocked for 10 s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - started


# -- the special files ---------------------------------------------------------------

KINDS = (
    "fifo", "socket", "/dev/zero", "/dev/urandom",
    "link-to-fifo", "link-to-socket", "link-to-/dev/zero", "link-to-/dev/urandom",
)  # fmt: skip


def _plain(kind: str, path: Path, holder: list[socket.socket]) -> Path:
    """Make the special file `kind` at `path` (a device is linked: it cannot be made)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        here = Path.cwd()
        os.chdir(path.parent)  # a relative name: socket paths are short
        try:
            server.bind(path.name)
        finally:
            os.chdir(here)
        holder.append(server)
    else:
        path.symlink_to(kind)
    return path


@pytest.fixture
def special(tmp_path: Path) -> Iterator[Callable[[str, Path], Path]]:
    """make(kind, path) puts a special file of `kind` at `path` (replacing what is there)."""
    sockets: list[socket.socket] = []

    def make(kind: str, path: Path) -> Path:
        if path.is_symlink() or path.exists():
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        if kind.startswith("link-to-"):
            target = kind.removeprefix("link-to-")
            real = Path(target) if target.startswith("/") else tmp_path / f"real-{target}"
            if not target.startswith("/"):
                _plain(target, real, sockets)
            path.symlink_to(real)
            return path
        return _plain(kind, path, sockets)

    yield make
    for server in sockets:
        server.close()


# -- the entry points ----------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _paused(tmp_path: Path) -> tuple[Path, Path]:
    pipeline = _write(tmp_path / "p.yaml", GATED)
    assert _cli("run", pipeline, "--checkpoint", tmp_path / "ck")[0] == 6
    return pipeline, tmp_path / "ck"


def _packed(tmp_path: Path) -> Path:
    from converge_dsl.packs import PackCache, lock_pipeline, publish

    _write(tmp_path / "src" / "pack.yaml", PACK)
    publish(tmp_path / "src", tmp_path / "repo")
    pipeline = _write(tmp_path / "pipeline.yaml", PACKED)
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "warm"))
    return pipeline


Make = Callable[[str, Path], Path]
Entry = Callable[[Path, Make, str], tuple[str | Path, ...]]


def _validate(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    return ("validate", make(kind, tmp / "p.yaml"))


def _run_pipeline(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    return ("run", make(kind, tmp / "p.yaml"))


def _model_script(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _write(tmp / "m.yaml", MODELLED)
    make(kind, tmp / "s.yaml")
    return ("run", pipeline)


def _replay(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _write(tmp / "m.yaml", MODELLED)
    _write(tmp / "s.yaml", SCRIPT)
    return ("run", pipeline, "--replay", make(kind, tmp / "c.jsonl"))


def _resume(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline, ckpt = _paused(tmp)
    make(kind, ckpt / "checkpoint.jsonl")
    return ("run", pipeline, "--resume", ckpt, "--approve", "s1")


def _kept_decisions(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline, ckpt = _paused(tmp)
    make(kind, ckpt / "decisions.json")
    return ("run", pipeline, "--resume", ckpt, "--approve", "s1")


def _decisions(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline, ckpt = _paused(tmp)
    return ("run", pipeline, "--resume", ckpt, "--decisions", make(kind, tmp / "d.json"))


def _inputs(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _write(tmp / "p.yaml", GATED)
    return ("run", pipeline, "--inputs", make(kind, tmp / "i.json"))


def _cases(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _write(tmp / "p.yaml", GATED)
    cases = make(kind, tmp / "cases.jsonl")
    return ("run", pipeline, "--cases", cases, "--out", tmp / "out.jsonl")


def _results(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _write(tmp / "p.yaml", GATED)
    cases = _write(tmp / "cases.jsonl", "{}\n")
    return ("run", pipeline, "--cases", cases, "--out", make(kind, tmp / "out.jsonl"))


def _report(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    return ("report", make(kind, tmp / "t.jsonl"), "-o", tmp / "page.html")


def _trace_expand(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    return ("trace", "expand", make(kind, tmp / "t.jsonl"), "r1")


def _test_file(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    return ("test", make(kind, tmp / "x.test.yaml"))


def _key(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _write(tmp / "p.yaml", GATED)
    (tmp / "config").mkdir(mode=0o700)
    make(kind, tmp / "config" / "checkpoint.key")
    return ("run", pipeline, "--checkpoint", tmp / "ck")


def _lock(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _packed(tmp)
    make(kind, tmp / "converge.lock")
    return ("pack", "fetch", pipeline)


def _archive(tmp: Path, make: Make, kind: str) -> tuple[str | Path, ...]:
    pipeline = _packed(tmp)
    (archive,) = (tmp / "repo").rglob("*.tar.gz")
    make(kind, archive)
    return ("pack", "fetch", pipeline)


# entry point -> (how to call it, exit code, a word its message must hold)
ENTRIES: dict[str, tuple[Entry, int, str]] = {
    "validate PIPELINE": (_validate, 2, codes.READ_NOT_REGULAR),
    "run PIPELINE": (_run_pipeline, 2, codes.READ_NOT_REGULAR),
    "run: models.X.script": (_model_script, 2, "s.yaml"),
    "run --replay CASSETTE": (_replay, 3, "c.jsonl"),
    "run --resume DIR (journal)": (_resume, 3, "checkpoint.jsonl"),
    "run --resume DIR (kept decisions)": (_kept_decisions, 3, "decisions.json"),
    "run --decisions FILE": (_decisions, 3, codes.READ_NOT_REGULAR),
    "run --inputs FILE": (_inputs, 3, codes.READ_NOT_REGULAR),
    "run --cases FILE": (_cases, 3, codes.READ_NOT_REGULAR),
    "run --cases --out FILE (kept results)": (_results, 3, "out.jsonl"),
    "report TRACE": (_report, 3, codes.READ_NOT_REGULAR),
    "trace expand TRACE": (_trace_expand, 3, codes.READ_NOT_REGULAR),
    "test FILE": (_test_file, 3, "x.test.yaml"),
    "checkpoint key": (_key, 3, codes.CHECKPOINT_KEY_UNUSABLE),
    "lock file": (_lock, 3, "converge.lock"),
    "pack archive": (_archive, 1, ".tar.gz"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("entry", ENTRIES)
def test_each_reader_refuses_each_special_file_at_once(
    tmp_path: Path, special: Make, entry: str, kind: str
) -> None:
    call, expected, word = ENTRIES[entry]
    argv = call(tmp_path, special, kind)
    code, out, err, took = _cli(*argv)
    said = out + err
    assert took < 2, f"{entry} took {took:.1f} s"
    assert "Traceback" not in said
    assert code == expected, said
    assert word in said, said


@pytest.mark.parametrize("kind", KINDS)
def test_a_special_compile_cache_entry_is_ignored_and_the_run_goes_on(
    tmp_path: Path, special: Make, kind: str
) -> None:
    ungated = GATED.replace("promotion: {gated_keys: [strategies]}\n", "")
    pipeline = _write(tmp_path / "p.yaml", ungated)
    assert _cli("run", pipeline)[0] == 0
    (entry,) = (tmp_path / "cache" / "compiled").glob("*.bin")
    special(kind, entry)
    code, out, err, took = _cli("run", pipeline)
    assert took < 2
    assert (code, "Traceback" in out + err) == (0, False), out + err


def test_read_bytes_stops_at_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 1001)
    assert read_bytes(path, "thing", cap=1001) == b"x" * 1001
    with pytest.raises(ReadRefused) as caught:
        read_bytes(path, "thing", cap=1000)
    assert caught.value.code == codes.READ_TOO_LARGE
    assert str(path) in caught.value.message


def test_a_missing_file_and_a_folder_stay_os_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "absent", "thing")
    with pytest.raises(IsADirectoryError):
        read_bytes(tmp_path, "thing")


def _sparse(kind: str, path: Path) -> Path:
    """A file of 1 GiB that holds nothing (sparse): read whole, it would take that memory."""
    path.unlink(missing_ok=True)
    with path.open("wb") as handle:
        handle.truncate(1 << 30)
    return path


@pytest.mark.parametrize(
    "entry",
    [
        "run --inputs FILE",
        "run --decisions FILE",
        "run --resume DIR (journal)",
        "run --resume DIR (kept decisions)",
        "run --cases --out FILE (kept results)",
        "run --replay CASSETTE",
    ],
)
def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path, entry: str) -> None:
    call, expected, word = ENTRIES[entry]
    code, out, err, took = _cli(*call(tmp_path, _sparse, "sparse"))
    said = out + err
    assert took < 2, f"{entry} took {took:.1f} s"
    assert (code, "Traceback" in said) == (expected, False), said
    assert codes.READ_TOO_LARGE in said or word in said, said
