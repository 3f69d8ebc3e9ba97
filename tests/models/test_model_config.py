"""Model configuration: `api_key_env` names must look like a key's; `limits` are checked.

Both are refused where the user can fix them: a located `validate` diagnostic
(the schema for `limits`, the model-config check for `api_key_env`), and the
same refusal at run time (`E_CONFIG`), before any variable is read.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.clock import FakeClock
from converge_dsl.frontend import PipelineFacts, load_text, schema_diagnostics
from converge_dsl.models import ModelError, ModelErrorCode, build_model, check_model_config
from converge_dsl.models._key_env import ALLOWED_KEY_ENVS, key_env_refused

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
models:
  m:
    adapter: {adapter}
    base_url: "http://127.0.0.1:9"
    model: m
    accounts: [{{name: main, api_key_env: {variable}}}]
{extra}suggestors: []
"""


def document(variable: str = "OPENAI_API_KEY", extra: str = "", adapter: str = "openai") -> Any:
    return load_text(PIPELINE.format(adapter=adapter, variable=variable, extra=extra), "p.yaml")


def build(variable: str, env: dict[str, str], **extra: Any) -> object:
    config = {
        "adapter": "openai",
        "base_url": "http://127.0.0.1:9",
        "model": "m",
        "accounts": [{"name": "main", "api_key_env": variable}],
        **extra,
    }
    return build_model(
        "m", config, base_dir=Path("."), env=env, clock=FakeClock(), rng=random.Random(0)
    )


@pytest.mark.parametrize(
    "name",
    ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_KEY", "GITHUB_TOKEN", "OPENAI_KEY_2", "KEY"],
)
def test_names_that_look_like_keys_are_accepted(name: str) -> None:
    assert not key_env_refused(name, {})


@pytest.mark.parametrize(
    "name", ["DB_PASSWORD", "HOME", "AWS_SECRET_ACCESS_KEY_ID", "KEYRING", "PATH", "MONKEY"]
)
def test_other_names_are_refused_unless_the_environment_allows_them(name: str) -> None:
    assert key_env_refused(name, {})
    assert not key_env_refused(name, {ALLOWED_KEY_ENVS: f"OTHER, {name}"})
    assert key_env_refused(name, {ALLOWED_KEY_ENVS: "OTHER"})


def test_run_refuses_the_name_without_reading_the_variable() -> None:
    with pytest.raises(ModelError) as caught:
        build("DB_PASSWORD", {"DB_PASSWORD": "hunter2-database"})
    error = caught.value
    assert error.code is ModelErrorCode.CONFIG
    assert "DB_PASSWORD" in error.message
    assert "hunter2" not in str(error)
    assert error.hint is not None
    assert ALLOWED_KEY_ENVS in error.hint


def test_the_users_environment_can_allow_a_name() -> None:
    env = {"DB_PASSWORD": "value", ALLOWED_KEY_ENVS: "DB_PASSWORD"}
    assert build("DB_PASSWORD", env) is not None


def test_validate_locates_a_refused_name() -> None:
    facts = PipelineFacts(document("DB_PASSWORD"), None)
    (problem,) = check_model_config(facts, {})
    assert problem.code == codes.MODEL_KEY_ENV_REFUSED
    assert (problem.line, problem.column) == (9, 42)
    assert list(check_model_config(facts, {ALLOWED_KEY_ENVS: "DB_PASSWORD"})) == []
    assert list(check_model_config(PipelineFacts(document(), None), {})) == []


def test_validate_on_the_command_line_reads_the_users_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(adapter="anthropic", variable="HOME", extra=""), "utf-8")
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.delenv(ALLOWED_KEY_ENVS, raising=False)
    assert run(["validate", str(path)], out, err) == 2
    assert "error[CD710]: api_key_env HOME" in out.getvalue() + err.getvalue()
    monkeypatch.setenv(ALLOWED_KEY_ENVS, "HOME")
    assert run(["validate", str(path)], io.StringIO(), io.StringIO()) == 0


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_limits_pass_the_schema_and_reach_the_model(adapter: str) -> None:
    extra = "    limits: {max_response_bytes: 2048, max_sse_line_bytes: 1024}\n"
    assert schema_diagnostics(document(extra=extra, adapter=adapter), "pipeline.v1.json") == []
    model = build("MAIN_KEY", {"MAIN_KEY": "k"}, limits={"max_response_bytes": 2048})
    assert model._settings.limits.max_response_bytes == 2048  # type: ignore[attr-defined]
    assert model._settings.limits.max_sse_line_bytes == 1024 * 1024  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ("{max_response_bytes: 10}", "models.m.limits.max_response_bytes"),
        ("{max_response_bytes: 1.5}", "models.m.limits.max_response_bytes"),
        ("{max_error_bytes: 99999999999}", "models.m.limits.max_error_bytes"),
        ("{max_lines: 2048}", "models.m.limits"),
        ("[1]", "models.m.limits"),
    ],
)
def test_bad_limits_are_located_schema_errors(limits: str, expected: str) -> None:
    found = schema_diagnostics(document(extra=f"    limits: {limits}\n"), "pipeline.v1.json")
    assert found
    assert expected in found[0].message
    assert found[0].line == 10
