"""End to end: pipelines/staffing-plan.yaml uses both built-in packs and runs offline."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.packs import lock_path, read_lock

PIPELINES = Path(__file__).resolve().parent.parent.parent / "pipelines"
PIPELINE = PIPELINES / "staffing-plan.yaml"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def cold_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold cache: the built-in repository must serve everything, no network."""
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(PIPELINES.parent)


def test_the_committed_lock_pins_both_builtin_packs_and_is_current() -> None:
    lock = read_lock(PIPELINE)
    assert lock is not None
    assert {n: (p.version, p.repository) for n, p in lock.packs.items()} == {
        "optimization": ("1.0.0", "builtin"),
        "strategy": ("1.0.0", "builtin"),
    }
    code, out, _ = _cli("validate", "pipelines/staffing-plan.yaml")
    assert code == 2  # validate reads the (cold) cache only
    assert out.count("is locked but not fetched") == 2
    assert "hint: run: converge-dsl pack fetch pipelines/staffing-plan.yaml" in out
    assert _cli("pack", "fetch", "pipelines/staffing-plan.yaml") == (
        0,
        "fetched pack optimization 1.0.0 from builtin\n"
        "fetched pack strategy 1.0.0 from builtin\n"
        "2 pack(s) fetched, 0 already cached\n",
        "",
    )
    assert _cli("validate", "pipelines/staffing-plan.yaml") == (0, "1 file valid\n", "")


def test_it_runs_offline_and_converges_with_the_optimal_staffing() -> None:
    code, out, err = _cli("run", "pipelines/staffing-plan.yaml", "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["stop_reason"], result["converged"]) == ("converged", True)
    facts = {(key, f["id"]): f for key, fs in result["facts"].items() for f in fs}
    plan = facts[("assignments", "staffing-plan")]["data"]["plan"]
    assert plan["total_cost"] == 9
    assert {a["agent"]: a["task"] for a in plan["assignments"]} == {
        "ana": "market-research",
        "ben": "pricing",
        "chen": "partnerships",
    }
    assert facts[("strategies", "positioning")]["content"].startswith(
        "Position RouteKit against Freightly"
    )
    # the solver read its problem from the seed's data: no deprecation notice
    assert not [f for f in result["facts"].get("diagnostic", []) if "deprecated" in f["id"]]


def test_another_pipelines_section_does_not_serve_it_and_survives_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    for name in ("staffing-plan.yaml", "staffing-plan.script.yaml"):
        (folder / name).write_text((PIPELINES / name).read_text("utf-8"), "utf-8")
    committed = json.loads(lock_path(PIPELINE).read_text("utf-8"))
    other = committed["pipelines"]["staffing-plan.yaml"]
    body = {"lock-version": 1, "pipelines": {"other.yaml": other}}
    lock_path(folder / "x.yaml").write_text(json.dumps(body), "utf-8")
    monkeypatch.chdir(folder)
    code, out, _ = _cli("validate", "staffing-plan.yaml")
    assert code == 2
    assert "converge.lock has no section for staffing-plan.yaml" in out
    assert "hint: run: converge-dsl lock staffing-plan.yaml" in out
    assert _cli("lock", "staffing-plan.yaml")[0] == 0
    written = json.loads(lock_path(folder / "staffing-plan.yaml").read_text("utf-8"))
    assert written["pipelines"] == {"other.yaml": other, "staffing-plan.yaml": other}
