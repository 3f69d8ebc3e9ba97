"""Pack fetching is explicit: `validate` reads the cache only; `pack fetch` and `run` fetch."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.packs import PackCache, lock_pipeline, publish

from .conftest import make_pack, write_pipeline


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty pack cache (not even created) and the pipeline folder as working folder."""
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cold"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cold"


NOT_FETCHED = (
    "error[CD506]: pack alpha 1.0.0 is locked but not fetched "
    "(validate reads packs from the cache only)\n"
    " --> pipeline.yaml:4:9\n"
)
HINT = "  = hint: run: converge-dsl pack fetch pipeline.yaml\n"


def _locked_from_folder(tmp_path: Path) -> Path:
    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "warm"))
    return pipeline


def test_validate_on_an_empty_cache_reports_the_pack_and_reads_no_repository(
    tmp_path: Path, cold: Path
) -> None:
    _locked_from_folder(tmp_path)
    (tmp_path / "repo").rename(tmp_path / "away")  # any read of the repository would fail
    code, out, _ = _cli("validate", "pipeline.yaml")
    assert code == 2
    assert out.startswith(NOT_FETCHED)
    assert HINT in out
    assert not cold.exists()  # nothing written, not even the cache folder


def test_pack_fetch_then_validate_passes(tmp_path: Path, cold: Path) -> None:
    _locked_from_folder(tmp_path)
    assert _cli("pack", "fetch", "pipeline.yaml") == (
        0,
        "fetched pack alpha 1.0.0 from path:repo\n1 pack(s) fetched, 0 already cached\n",
        "",
    )
    assert any(name.startswith("unpacked/") for name in _files(cold))
    code, out, _ = _cli("validate", "pipeline.yaml")
    assert (code, "CD506" in out) == (0, False), out
    assert _cli("pack", "fetch", "pipeline.yaml")[1] == "0 pack(s) fetched, 1 already cached\n"


def test_validate_over_http_makes_no_request_and_fetch_does(
    tmp_path: Path, cold: Path, http_root: tuple[Path, str], http_requests: list[str]
) -> None:
    served, url = http_root
    publish(make_pack(tmp_path, "alpha", "1.0.0"), served)
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', repositories=f"[{{url: {url}}}]")
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "warm"))
    http_requests.clear()
    code, out, _ = _cli("validate", "pipeline.yaml")
    assert (code, http_requests, cold.exists()) == (2, [], False)
    assert out.startswith(NOT_FETCHED)
    assert HINT in out
    code, out, _ = _cli("pack", "fetch", "pipeline.yaml")
    assert (code, out.splitlines()[0]) == (0, f"fetched pack alpha 1.0.0 from url:{url}")
    assert http_requests == ["/archives/alpha/alpha-1.0.0.tar.gz"]
    http_requests.clear()
    code, out, _ = _cli("validate", "pipeline.yaml")
    assert (code, "CD506" in out, http_requests) == (0, False, [])


def test_run_on_a_cold_cache_fetches_and_says_so_once(tmp_path: Path, cold: Path) -> None:
    _locked_from_folder(tmp_path)
    code, _, err = _cli("run", "pipeline.yaml")
    assert (code, err) == (0, "fetched pack alpha 1.0.0 from path:repo\n")
    code, _, err = _cli("run", "pipeline.yaml")
    assert (code, err) == (0, "")  # the cache had it


def test_load_pipeline_reports_fetches_to_the_given_listener(tmp_path: Path, cold: Path) -> None:
    from converge_dsl.validation import load_pipeline

    pipeline = _locked_from_folder(tmp_path)
    heard: list[str] = []
    load_pipeline(pipeline, fetch=True, on_fetch=heard.append)
    load_pipeline(pipeline, fetch=True, on_fetch=heard.append)
    assert heard == ["fetched pack alpha 1.0.0 from path:repo"]


def test_an_altered_cached_pack_is_reported_by_validate_and_repaired_by_fetch(
    tmp_path: Path, cold: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.packs import _cache

    _locked_from_folder(tmp_path)
    assert _cli("pack", "fetch", "pipeline.yaml")[0] == 0
    monkeypatch.setattr(_cache, "_PROVEN", set())  # as in a new process: prove folders again
    (readme,) = cold.glob("unpacked/*/prompts/readme.md")
    readme.write_text("edited\n")
    before = {name: (cold / name).read_bytes() for name in _files(cold) if (cold / name).is_file()}
    code, out, _ = _cli("validate", "pipeline.yaml")
    assert code == 2
    assert out.startswith(
        "error[CD502]: the unpacked copy of alpha 1.0.0 in the pack cache does not match "
        "its locked archive (altered)\n --> pipeline.yaml:4:1\n"
    )
    assert HINT in out
    after = {name: (cold / name).read_bytes() for name in _files(cold) if (cold / name).is_file()}
    assert after == before  # validate repaired nothing
    code, out, _ = _cli("pack", "fetch", "pipeline.yaml")
    assert (code, out) == (
        0,
        "re-installed alpha 1.0.0: its copy in the pack cache was altered\n"
        "0 pack(s) fetched, 1 already cached\n",
    )
    assert readme.read_text() == "alpha 1.0.0\n"
    assert _cli("validate", "pipeline.yaml")[0] == 0
