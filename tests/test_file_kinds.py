"""`_file_kinds.file_kind` reads the top-level kind from the parser's events as a whole
load of the file reads it (`_top_entries`, a load where the events cannot tell)."""

from __future__ import annotations

from pathlib import Path

import pytest

import converge_dsl._pyyaml
from converge_dsl import _file_kinds
from converge_dsl._file_kinds import file_kind

TEXTS = [
    "apiVersion: converge-dsl/v1\nkind: Pack\nx: [1, {kind: ModelScript}]\n",
    "kind: Pack\nnested:\n  - kind: ModelScript\n  - [kind, Pipeline]\n  - {a: [b, {c: d}]}\n",
    "kind: [Pack]\n",
    "kind: {Pack: 1}\n",
    "- kind: Pack\n",
    "kind: Pack\n---\nkind: Pack\n",
    "kind: Pipeline\nkind: Pack\n",  # the last wins
    "a: &x Pack\nkind: *x\n",
    "a: *y\nkind: Pack\n",  # an undefined alias
    "a: &x 1\nb: &x 2\nkind: Pack\n",  # a repeated anchor
    "kind: !!str Pack\n",
    "<<: {kind: Pack}\n",
    "kind: Pack\nz: =\n",  # a plain scalar the safe loader has no type for
    "kind: Pack\nz: 2001-02-30\n",  # a date out of range
    "kind: Pack\nz: 2001-02-03\n",
    "kind: Pack\n=: 1\n",  # a `=` key loads as a string
    "kind: ModelScript\nx: {=: 1}\n",
    "kind: Pack\n? =\n: 1\n",
    "kind: Pack\n2024-13-01: 1\n",  # a key out of range still fails the load
    "kind: Pack\nz: " + "1" * 5000 + "\n",  # past Python's digits limit
    "kind: Pack\nz: {[1]: 2}\n",  # a key a load cannot hash
    "kind: Pack\nz: [a, b\n",  # does not parse
    "kind: Pack\nz: !custom x\n",
    "'kind': \"Pack\"\n",
    "? kind\n: Pack\n",
    "{kind: Pack, apiVersion: x}",
    "kind:\n",
    "apiVersion: converge-dsl/v1\n",
    "name: x\n",
    "kind",
    "a:\n  - b: 1\n    c: [d]\n  - e\nkind: Pack\n",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("name", ["pack.yaml", "x.yaml"])
def test_the_kind_is_what_a_whole_load_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, name: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    read = file_kind(path)

    def unsure(text: str) -> None:
        raise _file_kinds._Unsure

    monkeypatch.setattr(_file_kinds, "_top_entries", unsure)
    assert read == file_kind(path)


def test_a_plain_pipeline_is_read_from_its_events_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole file was loaded (PyYAML's constructor) to read its kind: four times
    the events' time at 16,000 suggestors (`bench/validate.py --scaling`)."""
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: converge-dsl/v1\nkind: Pipeline\nx: [1, {a: b}]\n")

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("loaded whole")

    monkeypatch.setattr(converge_dsl._pyyaml.yaml, "load", no_load)
    assert file_kind(path) == "Pipeline"


def test_plain_scalars_are_made_alike_on_several_threads() -> None:
    # One constructor served every thread: one thread's cleanup wiped the node another
    # was making, and reading a kind raised KeyError (about 50 in 80,000 reads).
    import sys
    import threading

    from converge_dsl._file_kinds import _made_as_loaded

    failures: list[BaseException] = []
    texts = ["12345", "2024-01-01", "-7", "0x1f"]

    def read() -> None:
        for i in range(6000):
            try:
                _made_as_loaded(texts[i % len(texts)])
            except Exception as exc:  # any failure is the finding
                failures.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
