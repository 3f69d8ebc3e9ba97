from __future__ import annotations

import io
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.packs import BuiltinRepository, add_pack_requirement, read_lock

from .conftest import make_pack

PIPELINE = """\
# yaml-language-server: $schema=../schemas/pipeline.v1.json
apiVersion: converge-dsl/v1
kind: Pipeline
name: demo   # the name
repositories:
  - builtin
  - {path: repo}
suggestors:
  - name: greet      # keep me
    kind: seed
    facts: [{id: hi, content: "hello"}]
"""


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


def test_add_keeps_comments_order_and_layout() -> None:
    edited = add_pack_requirement(PIPELINE, "alpha", ">=1,<2")
    expected = PIPELINE.replace(
        "name: demo   # the name\n", "name: demo   # the name\npacks:\n  alpha: '>=1,<2'\n"
    )
    assert edited == expected
    again = add_pack_requirement(edited, "alpha", ">=1.5,<2")
    assert again == expected.replace("'>=1,<2'", "'>=1.5,<2'")


def test_cli_publish_add_lock_verify(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, out, err = _cli(
        "pack", "publish", str(make_pack(tmp_path, "alpha", "1.4.0")), "--repo", str(repo)
    )
    assert code == 0, err
    assert out.startswith("published alpha 1.4.0 sha256:")  # the name in pack.yaml
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    cache = str(tmp_path / "cache")
    code, out, err = _cli("pack", "add", "alpha", str(pipeline), "--cache", cache)
    assert code == 0, err
    assert "packs:\n  alpha: '>=1.4,<2'\n" in pipeline.read_text()
    lock = read_lock(pipeline)
    assert lock is not None
    assert lock.packs["alpha"].version == "1.4.0"
    code, out, _ = _cli("pack", "verify", str(pipeline), "--cache", cache)
    assert (code, out) == (0, "ok  alpha 1.4.0\n1 pack(s) verified\n")
    code, out, _ = _cli("pack", "info", "alpha", "--repo", str(repo))
    assert code == 0
    assert "1.4.0" in out
    code, out, _ = _cli("lock", str(pipeline), "--cache", cache)
    assert code == 0
    assert out.startswith("locked 1 pack(s) of pipeline.yaml into converge.lock")


def test_cli_add_of_an_unknown_pack_leaves_the_pipeline_untouched(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    (tmp_path / "repo").mkdir()
    code, _, err = _cli(
        "pack", "add", "nosuch", ">=1", str(pipeline), "--cache", str(tmp_path / "c")
    )
    assert code == 1
    assert "no repository has pack 'nosuch'" in err
    assert pipeline.read_text() == PIPELINE


def test_builtin_repository_serves_the_shipped_packs() -> None:
    repository = BuiltinRepository()
    assert {"optimization", "strategy"} <= set(repository.names())
    index = repository.fetch_index("strategy")
    assert index is not None
    again = BuiltinRepository().fetch_index("strategy")
    assert again is not None
    assert again.entries[0].sha256 == index.entries[0].sha256
    code, out, _ = _cli("pack", "list")
    assert code == 0
    assert "strategy  1.0.0" in out


def test_pack_list_says_when_a_folder_lists_no_pack_or_a_pack_no_version(
    tmp_path: Path,
) -> None:
    # Both printed nothing, or "(all yanked)" for a pack with no version at all.
    code, out, _ = _cli("pack", "list", "--repo", str(tmp_path))
    assert (code, out) == (0, f"repository path:{tmp_path.as_posix()} lists no pack\n")
    (tmp_path / "names.json").write_text('["alpha"]')
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "alpha.json").write_text('{"name": "alpha", "versions": []}')
    assert _cli("pack", "list", "--repo", str(tmp_path))[1] == "alpha  (no version)\n"


def test_keygen_into_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = _cli("pack", "keygen", str(tmp_path / "nodir" / "k"))
    assert code == 3
    assert "cannot write" in err
    assert "does not exist" in err
    code, out, err = _cli("pack", "keygen", str(tmp_path / "k"))
    assert (code, (tmp_path / "k").stat().st_mode & 0o777) == (0, 0o600)
    assert out.startswith("ed25519:")
    assert _cli("pack", "keygen", str(tmp_path / "k"))[0] == 3  # never overwritten


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe garbage", "is not a key file (not UTF-8 text)"),
        (b"garbage\n", "signing key must start with 'ed25519:'"),
        (b"ed25519:AAAA\n", "signing key must hold 32 raw bytes"),
    ],
)
def test_publish_with_a_garbage_sign_key_is_refused_clearly(
    tmp_path: Path, content: bytes, message: str
) -> None:
    key = tmp_path / "key"
    key.write_bytes(content)
    pack = make_pack(tmp_path, "alpha", "1.0.0")
    code, _, err = _cli(
        "pack", "publish", str(pack), "--repo", str(tmp_path / "r"), "--sign-key", str(key)
    )
    assert code in (1, 3)
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "r" / "index").exists()


BROKEN = """\
apiVersion: converge-dsl/v1
kind: Pack
name: broken
version: "1.0.0"
description: templates that do not compile
suggestors:
  a:
    kind: rule
    template:
      emit:
        - {id: "{{ x.__class__ }}", content: "{{ params.a | nofilter }}"}
  b:
    kind: llm
    template:
      output: {format: text, id: "{{ item }}"}
    prompt_files: {user: prompts/user.txt}
"""


def _broken_pack(root: Path) -> Path:
    folder = root / "packs" / "broken2"
    (folder / "prompts").mkdir(parents=True)
    (folder / "pack.yaml").write_text(BROKEN)
    (folder / "prompts" / "user.txt").write_text("Line one\nAbout {{ params.topic }\n")
    return folder


def test_publish_refuses_broken_templates_with_locations_in_the_pack_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_pack(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli("pack", "publish", "packs/broken2", "--repo", "repo")
    assert (code, out) == (2, "")
    assert (
        "error[CD208]: template reads unknown name 'x'\n  --> packs/broken2/pack.yaml:11:20" in err
    )
    assert "error[CD209]: template uses unknown filter 'nofilter'" in err
    assert "--> packs/broken2/prompts/user.txt:2:1" in err
    assert "11 |         - {id:" in err  # the source line is shown
    assert not (tmp_path / "repo").exists()


def test_publish_schema_errors_are_located_and_the_real_name_is_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_pack(tmp_path, "alpha", "1.0.0")
    monkeypatch.chdir(folder.parent)
    (folder / "pack.yaml").write_text((folder / "pack.yaml").read_text().replace("1.0.0", "1.0"))
    code, _, err = _cli("pack", "publish", folder.name, "--repo", "r")
    assert code == 2
    assert f"--> {folder.name}/pack.yaml:4:10" in err
    (folder / "pack.yaml").write_text((folder / "pack.yaml").read_text().replace("1.0", '"2.0.0"'))
    code, out, _ = _cli("pack", "publish", folder.name, "--repo", "r")
    assert code == 0
    assert out.startswith("published alpha 2.0.0 ")  # pack.yaml's name, not the folder's


def test_validate_reports_a_published_broken_template_in_the_pack_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.packs import PackCache, _lint, lock_pipeline, publish

    monkeypatch.setattr(_lint, "template_diagnostics", lambda *a, **k: [])  # an old publisher
    publish(_broken_pack(tmp_path), tmp_path / "repo")
    monkeypatch.undo()
    pipeline = tmp_path / "use.yaml"
    pipeline.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: use\n"
        'packs: {broken: "==1.0.0"}\nrepositories: [{path: repo}]\n'
        "seeds: [{id: s, content: seed}]\nsuggestors:\n"
        "  - {name: hi, kind: pack, use: broken/a, input: seeds, output: strategies}\n"
    )
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    code, out, _ = _cli("validate", "use.yaml")
    assert code == 2
    located = "error[CD208]: template reads unknown name 'x'\n  --> broken-1.0.0/pack.yaml:11:20"
    assert located in out
    assert "unknown filter 'nofilter'\n  --> broken-1.0.0/pack.yaml:11:" in out
    assert "user.txt" not in out  # only the suggestors the pipeline uses
    code, _, err = _cli("run", "use.yaml")
    assert code == 2
    assert "broken-1.0.0/pack.yaml:11:20" in err


def test_lock_names_a_repository_folder_that_does_not_exist(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        PIPELINE.replace("{path: repo}", "{path: ./norepo}") + 'packs: {alpha: ">=1"}\n'
    )
    code, _, err = _cli("lock", str(pipeline), "--cache", str(tmp_path / "c"))
    assert code == 1
    assert err.startswith("error[CD325]: repository ./norepo does not exist\n")
    assert "relative to the pipeline file" in err
    code, _, err = _cli("pack", "list", "--repo", str(tmp_path / "nodir"))
    assert code == 1
    assert "does not exist" in err
    code, _, err = _cli("pack", "yank", "alpha", "1.0.0", "--repo", "http://127.0.0.1:9/r")
    assert code == 3
    assert "needs a folder repository" in err


EDITS = Path(__file__).parent / "edits"


@pytest.mark.parametrize("name", ["four_spaces", "markers", "trailing_comment"])
def test_add_changes_only_the_packs_lines(name: str) -> None:
    original = (EDITS / f"{name}.yaml").read_bytes().decode("utf-8")
    expected = (EDITS / f"{name}.expected.yaml").read_bytes().decode("utf-8")
    assert add_pack_requirement(original, "optimization", ">=1.0") == expected
    crlf = add_pack_requirement(original.replace("\n", "\r\n"), "optimization", ">=1.0")
    assert crlf == expected.replace("\n", "\r\n")


def test_a_new_entry_goes_above_a_comment_that_introduces_the_next_key() -> None:
    text = "name: x\npacks:\n  a: '>=1'\n# the seeds\nseeds: []\n"
    assert add_pack_requirement(text, "b", ">=2") == (
        "name: x\npacks:\n  a: '>=1'\n  b: '>=2'\n# the seeds\nseeds: []\n"
    )


def test_a_pack_error_shows_its_place_on_one_line_and_json_keeps_it() -> None:
    """A pipeline whose name holds a newline: the `-->` line is one line (escaped)."""
    import json

    from converge_dsl.cli import _report
    from converge_dsl.cli._render import render_error
    from converge_dsl.packs._files import PackRefused

    error = PackRefused("CD506", "pack alpha 1.0.0 is locked but not fetched", hint="fetch it")
    error.where = "a\nb.yaml:4:9"
    out, err = io.StringIO(), io.StringIO()
    render_error(error, out)  # as the command line reports it under --format json
    _report(err, f"{error.printed()}\n")
    assert err.getvalue() == (
        "error[CD506]: pack alpha 1.0.0 is locked but not fetched\n"
        " --> a\\nb.yaml:4:9\n  hint: fetch it\n"
    )
    assert json.loads(out.getvalue())["error"]["where"] == "a\nb.yaml:4:9"
