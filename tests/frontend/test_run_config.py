"""`run --config FILE`: a run configuration's `cache:`, its located errors, and the order in
which flags, environment variables, the configuration and the defaults decide.

The error output is compared with files in expected/ (regenerate with `UPDATE_EXPECTED=1`
only after reading the diff).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend import CacheConfig, read_run_config
from converge_dsl.frontend._run_config import MODES, schema_modes
from converge_dsl.models.caching import CACHE_MODES
from converge_dsl.runtime import cache_settings

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
DEFAULT = Path("/home/u/.cache/converge-dsl/answers")


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths in the messages, as a user types them
    monkeypatch.delenv("CONVERGE_DSL_CACHE_MODE", raising=False)
    monkeypatch.delenv("CONVERGE_DSL_CACHE", raising=False)


@pytest.mark.parametrize("name", ["bad-mode", "dir-is-a-file"])
def test_a_bad_cache_in_a_run_configuration_is_located(name: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    config = f"tests/frontend/data/{name}.run.yaml"
    code = run(["run", "pipelines/market-entry.yaml", "--config", config], out, err)
    assert code == 2
    assert out.getvalue() == ""
    expected = HERE / "expected" / f"config-{name}.stderr.txt"
    if os.environ.get("UPDATE_EXPECTED") == "1":
        expected.write_text(err.getvalue(), encoding="utf-8")
    assert err.getvalue() == expected.read_text(encoding="utf-8")


def test_the_mode_error_says_which_mode_was_meant() -> None:
    with pytest.raises(PipelineInvalid) as caught:
        read_run_config(HERE / "data" / "bad-mode.run.yaml")
    (problem,) = caught.value.diagnostics
    assert (problem.code, problem.line, problem.column) == ("CD978", 4, 9)
    assert problem.path == ("cache", "mode")
    assert problem.hint == "did you mean 'read-write'?"


def test_a_field_the_schema_lacks_is_located(tmp_path: Path) -> None:
    config = tmp_path / "dev.run.yaml"
    config.write_text(
        "apiVersion: converge-dsl/v1\nkind: RunConfig\ncache: {mode: 'off', dirr: x}\n",
        encoding="utf-8",
    )
    with pytest.raises(PipelineInvalid) as caught:
        read_run_config(config)
    assert [(d.path, d.hint) for d in caught.value.diagnostics] == [
        (("cache", "dirr"), "did you mean 'dir'?")
    ]


def test_the_folder_is_relative_to_the_configuration(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "dev.run.yaml"
    config.parent.mkdir()
    config.write_text(
        "apiVersion: converge-dsl/v1\nkind: RunConfig\ncache: {mode: read-only, dir: ../ans}\n",
        encoding="utf-8",
    )
    assert read_run_config(config).cache == CacheConfig("read-only", config.parent / "../ans")


CONFIG = CacheConfig("read-only", Path("/project/answers"))


@pytest.mark.parametrize(
    ("flags", "env", "config", "mode", "folder"),
    [
        # nothing said: off, in the user cache folder
        ({}, {}, None, "off", DEFAULT),
        # the configuration, below everything else
        ({}, {}, CONFIG, "read-only", Path("/project/answers")),
        # the environment wins over the configuration, each for what it says
        ({}, {"CONVERGE_DSL_CACHE_MODE": "off"}, CONFIG, "off", Path("/project/answers")),
        ({}, {"CONVERGE_DSL_CACHE": "/env"}, CONFIG, "read-only", Path("/env/answers")),
        # a flag wins over both
        ({"cache": True}, {"CONVERGE_DSL_CACHE_MODE": "read-only"}, CONFIG, "read-write", None),
        ({"offline": True}, {"CONVERGE_DSL_CACHE_MODE": "read-write"}, None, "read-only", None),
        ({"cache_dir": Path("/flag")}, {"CONVERGE_DSL_CACHE": "/env"}, CONFIG, None, Path("/flag")),
        # --explain-cache keeps the mode the others give, and turns an off cache on
        ({"explain": True}, {}, CONFIG, "read-only", None),
        ({"explain": True}, {"CONVERGE_DSL_CACHE_MODE": "off"}, CONFIG, "read-write", None),
    ],
)
def test_flag_then_environment_then_configuration_then_default(  # noqa: PLR0917
    flags: dict[str, object],
    env: dict[str, str],
    config: CacheConfig | None,
    mode: str | None,
    folder: Path | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("converge_dsl.models.answer_store.default_cache_dir", lambda: DEFAULT)
    settings = cache_settings(env=env, config=config, **flags)  # type: ignore[arg-type]
    if mode is not None:
        assert settings.mode == mode
    if folder is not None:
        assert settings.folder == folder


@pytest.mark.parametrize("flags", [{}, {"cache": True}, {"offline": True}])
def test_a_mode_variable_that_is_none_of_the_three_is_refused(flags: dict[str, bool]) -> None:
    with pytest.raises(UsageError, match="CD976"):
        cache_settings(env={"CONVERGE_DSL_CACHE_MODE": "on"}, config=CONFIG, **flags)


def test_validate_checks_a_run_configuration_as_run_reads_it(tmp_path: Path) -> None:
    (tmp_path / "dev.run.yaml").write_text(
        (HERE / "data" / "bad-mode.run.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "ok.run.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: RunConfig\ncache: {mode: read-only}\n",
        encoding="utf-8",
    )
    out, err = io.StringIO(), io.StringIO()
    code = run(["validate", str(tmp_path)], out, err)
    assert code == 2
    text = out.getvalue() + err.getvalue()
    assert "error[CD978]: cache.mode 'read-wrte' is not a cache mode" in text
    assert "dev.run.yaml:4:9" in text
    assert "1 error in 2 files" in text


def test_the_modes_are_the_schemas_and_the_caches() -> None:
    assert MODES == schema_modes() == CACHE_MODES
