"""`converge-dsl run` and the compile cache: a second run skips compiling; `--no-cache`."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import EXIT_OK, run
from converge_dsl.compiler import _sources

PIPELINE = """apiVersion: converge-dsl/v1
kind: Pipeline
name: cached
keys: [{name: out}]
suggestors:
""" + "".join(
    f"  - {{name: r{i}, kind: rule, emit: [{{key: out, id: 'f{{{{ cycle }}}}-{i}', "
    f"content: '{{{{ count(\"out\") + {i} }}}}'}}]}}\n"
    for i in range(30)
)


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", "--format", "json", *argv], out, err)
    return code, out.getvalue()


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CONVERGE_DSL_NO_CACHE", raising=False)
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE, encoding="utf-8")
    monkeypatch.setattr(_sources, "SOURCES", _sources.SourceCache())
    from converge_dsl.compiler import _compile_cache, _context, _template

    for module in (_context, _template, _compile_cache):
        monkeypatch.setattr(module, "SOURCES", _sources.SOURCES)
    return pipeline, tmp_path / "cache" / "compiled"


def test_a_second_run_of_an_unchanged_pipeline_skips_compilation(
    setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, folder = setup
    code, first = _run(str(pipeline))
    assert code == EXIT_OK
    assert len(list(folder.glob("*.bin"))) == 1
    _sources.SOURCES.clear()  # a new process

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("compiled although cached")

    monkeypatch.setattr(_sources, "generated", refuse)
    code, second = _run(str(pipeline))
    assert code == EXIT_OK
    assert second == first


def test_no_cache_flag_and_environment_turn_it_off(
    setup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline, folder = setup
    code, _ = _run("--no-cache", str(pipeline))
    assert code == EXIT_OK
    assert not folder.exists()
    monkeypatch.setenv("CONVERGE_DSL_NO_CACHE", "1")
    code, _ = _run(str(pipeline))
    assert code == EXIT_OK
    assert not folder.exists()


def test_an_edited_pipeline_gets_its_own_entry(setup: tuple[Path, Path]) -> None:
    pipeline, folder = setup
    _run(str(pipeline))
    pipeline.write_text(PIPELINE.replace("+ 1 }}", "+ 100 }}"), encoding="utf-8")
    _sources.SOURCES.clear()
    code, out = _run(str(pipeline))
    assert code == EXIT_OK
    assert '"content": "100"' in out
    assert len(list(folder.glob("*.bin"))) == 2
