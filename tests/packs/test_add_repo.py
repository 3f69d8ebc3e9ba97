"""`pack add NAME PIPELINE --repo REPO`: the repository is added to `repositories:` when needed."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.packs import publish, read_lock

from .conftest import make_pack

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: demo   # the name
{repositories}suggestors:
  - name: greet      # keep me
    kind: seed
    facts: [{{id: hi, content: "hello"}}]
"""


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pipeline in `proj/`, a repository `repo/` beside it; the cwd is their parent."""
    publish(make_pack(tmp_path, "alpha", "1.4.0"), tmp_path / "repo")
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))  # what validate reads
    return tmp_path / "proj" / "pipeline.yaml"


def _write(pipeline: Path, repositories: str = "") -> str:
    text = PIPELINE.format(repositories=repositories)
    pipeline.write_text(text)
    return text


def _add(pipeline: Path, *words: str) -> tuple[int, str, str]:
    return _cli("pack", "add", *words, str(pipeline), "--cache", "cache", "--repo", "repo")


def test_a_folder_is_added_relative_to_the_pipeline_with_builtin_kept_first(
    project: Path,
) -> None:
    _write(project)
    code, out, err = _add(project, "alpha")
    assert (code, err) == (0, "")
    assert out == (
        "added repository {path: ../repo} to pipeline.yaml\n"
        "added alpha '>=1.4,<2' to pipeline.yaml; locked alpha 1.4.0\n"
    )
    assert project.read_text() == PIPELINE.format(repositories="").replace(
        "name: demo   # the name\n",
        "name: demo   # the name\npacks:\n  alpha: '>=1.4,<2'\n"
        "repositories:\n  - builtin\n  - {path: ../repo}\n",
    )
    lock = read_lock(project)
    assert lock is not None
    assert lock.packs["alpha"].repository == "path:../repo"
    assert _cli("validate", str(project))[0] == 0


def test_a_listed_repository_is_not_added_again(project: Path) -> None:
    listed = "repositories: [builtin, {path: ../repo/}]   # ours\n"
    before = _write(project, listed)
    code, out, _ = _add(project, "alpha", ">=1")
    assert code == 0
    assert out == "added alpha '>=1' to pipeline.yaml; locked alpha 1.4.0\n"
    assert project.read_text() == before.replace(listed, "packs:\n  alpha: '>=1'\n" + listed)


def test_builtin_is_listed_implicitly(project: Path) -> None:
    before = _write(project)
    code, out, _ = _cli(
        "pack", "add", "strategy", str(project), "--cache", "c", "--repo", "builtin"
    )
    assert code == 0
    assert "added repository" not in out
    assert "repositories" not in project.read_text()
    assert project.read_text() != before


def test_an_existing_block_list_gets_a_new_last_entry(project: Path) -> None:
    _write(project, "repositories:\n  - builtin   # shipped\n")
    assert _add(project, "alpha")[0] == 0
    assert "repositories:\n  - builtin   # shipped\n  - {path: ../repo}\n" in project.read_text()


def test_a_folder_that_does_not_exist_changes_nothing(project: Path) -> None:
    before = _write(project)
    code, out, err = _cli("pack", "add", "alpha", str(project), "--repo", "nowhere")
    assert (code, out) == (1, "")
    assert err.startswith("error[CD325]: repository nowhere does not exist\n  hint: give a folder")
    assert project.read_text() == before
    code, _, err = _cli("pack", "add", "alpha", str(project), "--repo", str(project))
    assert (code, err.startswith(f"error[CD325]: repository {project} is not a folder\n")) == (
        1,
        True,
    )
    assert project.read_text() == before


def test_an_unknown_pack_changes_nothing(project: Path) -> None:
    before = _write(project)
    code, _, err = _add(project, "nosuch")
    assert code == 1
    assert "no repository has pack 'nosuch' (searched: builtin, path:../repo)" in err
    assert project.read_text() == before
    code, _, _ = _add(project, "nosuch", ">=1")  # failing at the lock: restored too
    assert code == 1
    assert project.read_text() == before


def test_an_unreachable_url_changes_nothing(project: Path) -> None:
    before = _write(project)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/repo"
    code, _, err = _cli("pack", "add", "alpha", str(project), "--repo", url, "--cache", "c")
    assert code == 1
    assert err.startswith("error[CD327]: ")
    assert "Traceback" not in err
    assert project.read_text() == before


def test_a_url_is_added_once(project: Path, http_root: tuple[Path, str]) -> None:
    served, url = http_root
    publish(make_pack(project.parent.parent, "beta", "2.1.0"), served)
    _write(project)
    code, out, _ = _cli("pack", "add", "beta", str(project), "--repo", url + "/", "--cache", "c")
    assert code == 0
    assert out.startswith(f"added repository {{url: {url}}} to pipeline.yaml\n")
    assert f"repositories:\n  - builtin\n  - {{url: {url}}}\n" in project.read_text()
    code, out, _ = _cli("pack", "add", "beta", ">=2", str(project), "--repo", url, "--cache", "c")
    assert (code, out) == (0, "added beta '>=2' to pipeline.yaml; locked beta 2.1.0\n")


def test_a_pack_an_earlier_repository_has_is_warned_about(project: Path) -> None:
    publish(make_pack(project.parent, "strategy", "9.0.0"), project.parent / "repo")
    _write(project)
    code, out, err = _add(project, "strategy")
    assert code == 0
    assert out.endswith("locked strategy 1.0.0\n")
    assert err == (
        "warning[CD576]: strategy 1.0.0 comes from builtin, which the pipeline lists before "
        "path:../repo (the first repository that has a pack provides it)\n"
        "  hint: to take it from path:../repo, list that repository first in repositories:, "
        "then run: converge-dsl lock pipeline.yaml\n"
    )


def test_single_entry_mappings_in_a_flow_list_keep_their_braces() -> None:
    from converge_dsl.packs import add_pack_requirement, add_repository

    text = "name: x\nrepositories: [builtin, {path: a}]\nsuggestors: []\n"
    assert add_pack_requirement(text, "b", ">=2") == text.replace(
        "name: x\n", "name: x\npacks:\n  b: '>=2'\n"
    )
    assert add_repository(text, {"path": "c"}) == text.replace(
        "{path: a}]", "{path: a}, {path: c}]"
    )


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("repositories: 5\n", "error[CD326]: pipeline.yaml: repositories: must be a list\n"),
        (
            "packs: 5\n",
            "error[CD326]: pipeline.yaml: packs: must be a mapping of pack name to specifier\n",
        ),
    ],
)
def test_malformed_pack_fields_are_errors_not_tracebacks(
    project: Path, field: str, message: str
) -> None:
    before = _write(project, field)
    for argv in (
        ("pack", "add", "strategy", str(project), "--repo", "repo"),
        ("pack", "add", "strategy", str(project)),
        ("pack", "verify", str(project)),
        ("lock", str(project)),
    ):
        code, _, err = _cli(*argv)
        assert (code, err.split("  hint:")[0]) == (1, message), argv
    assert project.read_text() == before


def test_added_as_json(project: Path) -> None:
    from converge_dsl.packs import PackCache, add_pack

    _write(project)
    done = add_pack(project, "alpha", repo="repo", cache=PackCache(project.parent.parent / "c"))
    assert done.as_json() == {
        "name": "alpha",
        "specifier": ">=1.4,<2",
        "locked": "1.4.0",
        "repository": "path:../repo",
        "repository_added": "{path: ../repo}",
    }
