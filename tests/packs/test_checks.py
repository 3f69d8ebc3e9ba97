from __future__ import annotations

from pathlib import Path

from converge_dsl.frontend import load_file
from converge_dsl.packs import PackCache, check_pipeline_packs, lock_pipeline

from .conftest import make_pack, write_pipeline


def test_missing_lock_is_reported_at_packs(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    (found,) = list(check_pipeline_packs(load_file(pipeline), cache=PackCache(tmp_path / "c")))
    assert (found.code, found.line, found.path) == ("CD500", 4, ("packs",))
    assert found.hint == "run: converge-dsl lock pipeline.yaml"


def test_a_missing_repository_folder_is_the_hint_not_lock(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}', "[builtin, {path: ./norepo}]")
    (found,) = list(check_pipeline_packs(load_file(pipeline), cache=PackCache(tmp_path / "c")))
    assert found.code == "CD500"
    assert found.hint == (
        "repository ./norepo does not exist (paths under repositories: are relative to "
        "the pipeline file); fix repositories:, then lock again"
    )


def test_with_parameters_and_suggestor_names_are_checked_in_the_pipeline(tmp_path: Path) -> None:
    from converge_dsl.packs import publish

    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    pipeline = write_pipeline(tmp_path, '{alpha: ">=1"}')
    text = pipeline.read_text().replace("with: {topic: x}", "with: {topic: 3, colour: red}")
    text += "  - {name: other, kind: pack, use: alpha/nots, input: seeds, output: strategies}\n"
    pipeline.write_text(text)
    cache = PackCache(tmp_path / "c")
    lock_pipeline(pipeline, cache=cache)
    found = sorted(
        check_pipeline_packs(load_file(pipeline), cache=cache), key=lambda d: (d.code, d.path)
    )
    assert [(d.code, d.line) for d in found] == [("CD503", 9), ("CD504", 7), ("CD504", 7)]
    assert found[0].hint == "did you mean 'note'?"
    assert found[1].path == ("suggestors", 0, "with")
    assert "'colour' was unexpected" in found[1].message, found[1].message
    assert found[2].path == ("suggestors", 0, "with", "topic")


def test_solver_discovery_reads_what_importlib_metadata_reads() -> None:
    from importlib.metadata import entry_points

    from converge_dsl.packs._registry import declared_entry_points

    for group in ("converge_dsl.solvers", "console_scripts"):
        expected = {e.name: e.value for e in entry_points(group=group)}
        assert declared_entry_points(group) == expected


def test_entry_points_of_a_folder_first_distribution_wins(tmp_path: Path) -> None:
    from converge_dsl.packs._registry import declared_entry_points

    for folder, target in (("a", "one:One"), ("b", "two:Two")):
        info = tmp_path / folder / "my_dist-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "entry_points.txt").write_text(f"[g]\n# note\nx = {target}\n[h]\ny = z:Z\n")
    paths = [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "missing")]
    assert declared_entry_points("g", paths) == {"x": "one:One"}
