"""`build_model`: every adapter, and configuration errors with clear hints."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models import (
    Model,
    ModelError,
    ModelErrorCode,
    RecordingModel,
    ReplayModel,
    ScriptedModel,
    build_model,
)
from converge_dsl.models.http import HttpModel

SCRIPT = "apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: hi}\n"


def build(config: dict[str, Any], tmp_path: Path, env: dict[str, str] | None = None) -> Model:
    return build_model(
        "fast", config, base_dir=tmp_path, env=env or {}, clock=FakeClock(), rng=random.Random(1)
    )


def test_scripted_and_replay_paths_are_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCRIPT)
    (tmp_path / "c.jsonl").write_text("")
    assert isinstance(build({"adapter": "scripted", "script": "s.yaml"}, tmp_path), ScriptedModel)
    assert isinstance(build({"adapter": "replay", "cassette": "c.jsonl"}, tmp_path), ReplayModel)
    recording = build({"adapter": "scripted", "script": "s.yaml", "record": "out.jsonl"}, tmp_path)
    assert isinstance(recording, RecordingModel)
    assert (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_http_adapters_build_from_config(tmp_path: Path, adapter: str) -> None:
    model = build(
        {
            "adapter": adapter,
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "accounts": [{"name": "main", "api_key_env": "K_KEY"}],
            "timeout_s": 5,
            "retries": 1,
            "stream": True,
        },
        tmp_path,
        {"K_KEY": "secret-value"},
    )
    assert isinstance(model, HttpModel)
    assert model.model_id() == f"{adapter}:m"
    assert "secret-value" not in repr(model)


def test_missing_env_var_is_named_never_valued(tmp_path: Path) -> None:
    config = {
        "adapter": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "accounts": [{"name": "main", "api_key_env": "OPENAI_API_KEY"}],
    }
    with pytest.raises(ModelError) as caught:
        build(config, tmp_path, {"OTHER": "x"})
    assert caught.value.code is ModelErrorCode.CONFIG
    assert "OPENAI_API_KEY" in str(caught.value)
    assert "main" in str(caught.value)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"adapter": "scriptd", "script": "s.yaml"}, "did you mean 'scripted'"),
        ({"adapter": "scripted", "scrpt": "s.yaml"}, "did you mean 'script'"),
        ({"adapter": "openai", "model": "m"}, "base_url"),
        ({"adapter": "openai", "base_url": "ftp://x", "model": "m"}, "not an http(s) URL"),
        ({"adapter": "openai", "base_url": "http://x", "model": "m", "retries": -1}, "retries"),
        ({"adapter": "openai", "base_url": "http://x", "model": "m", "stream": "yes"}, "stream"),
        (
            {"adapter": "anthropic", "base_url": "http://x", "model": "m", "accounts": []},
            "non-empty list",
        ),
        (
            {"adapter": "openai", "base_url": "http://x", "model": "m", "structured_output": "x"},
            "`structured_output` must be one of json_schema, json_object, none",
        ),
        (
            # Anthropic takes structured_output too, but has no json_object form.
            {
                "adapter": "anthropic",
                "base_url": "http://x",
                "model": "m",
                "structured_output": "json_object",
            },
            "`structured_output` must be one of json_schema, none",
        ),
    ],
)
def test_config_errors_are_e_config_with_a_hint(
    tmp_path: Path, config: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ModelError) as caught:
        build(config, tmp_path)
    assert caught.value.code is ModelErrorCode.CONFIG
    assert expected in str(caught.value)
    assert caught.value.hint


def test_structured_output_is_an_openai_setting_in_the_pipeline_schema_too() -> None:
    from converge_dsl.frontend import load_text, schema_diagnostics

    def problems(model: str) -> list[str]:
        text = (
            "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\n"
            f"models: {{m: {model}}}\nsuggestors: []\n"
        )
        document = load_text(text, "p.yaml")
        return [d.message for d in schema_diagnostics(document, "pipeline.v1.json")]

    base = "adapter: openai, base_url: 'http://x', model: m, accounts: [{name: a, api_key_env: K}]"
    for setting in ("json_schema", "json_object", "none"):
        assert problems(f"{{{base}, structured_output: {setting}}}") == []
    (problem,) = problems(f"{{{base}, structured_output: strict}}")
    assert "models.m.structured_output" in problem


def _schema_keys() -> dict[str, frozenset[str]]:
    """Each adapter's allowed keys, as the pipeline schema's model definitions list them."""
    import json

    from converge_dsl._resources import read_schema_text

    defs = json.loads(read_schema_text("pipeline.v1.json"))["$defs"]
    keys: dict[str, frozenset[str]] = {}
    for branch in defs["model"]["allOf"]:
        adapter = branch["if"]["properties"]["adapter"]["const"]
        definition = defs[branch["then"]["$ref"].rsplit("/", 1)[1]]
        assert definition["additionalProperties"] is False
        keys[adapter] = frozenset(definition["properties"])
    return keys


def test_the_factory_and_the_pipeline_schema_allow_the_same_keys_per_adapter() -> None:
    from converge_dsl.models.factory import ALLOWED_KEYS

    assert _schema_keys() == dict(ALLOWED_KEYS)


def _schema_problems(model: str) -> list[str]:
    from converge_dsl.frontend import load_text, schema_diagnostics

    text = (
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\n"
        f"models: {{m: {model}}}\nsuggestors: []\n"
    )
    return [d.message for d in schema_diagnostics(load_text(text, "p.yaml"), "pipeline.v1.json")]


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_record_retry_wait_and_keyless_accounts_pass_schema_and_factory(
    tmp_path: Path, adapter: str
) -> None:
    entry = (
        f"{{adapter: {adapter}, base_url: 'http://127.0.0.1:9', model: m,"
        " max_retry_wait_s: 2.5, record: out.jsonl}"
    )
    assert _schema_problems(entry) == []
    config = {
        "adapter": adapter,
        "base_url": "http://127.0.0.1:9",
        "model": "m",
        "max_retry_wait_s": 2.5,
        "record": "out.jsonl",
    }
    model = build(config, tmp_path)
    assert isinstance(model, RecordingModel)


def test_scripted_record_passes_the_schema() -> None:
    assert _schema_problems("{adapter: scripted, script: s.yaml, record: out.jsonl}") == []


def test_an_unknown_model_key_is_refused_by_both_with_its_location(tmp_path: Path) -> None:
    (problem,) = _schema_problems("{adapter: replay, cassette: c.jsonl, record: out.jsonl}")
    assert "models.m" in problem
    with pytest.raises(ModelError) as caught:
        build({"adapter": "replay", "cassette": "c.jsonl", "record": "out.jsonl"}, tmp_path)
    assert "model 'fast': unknown field 'record' for adapter replay" in str(caught.value)


def test_the_base_url_hint_names_each_wire_formats_own_root(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as caught:
        build({"adapter": "anthropic", "base_url": "ftp://x", "model": "m"}, tmp_path)
    assert caught.value.hint == "e.g. base_url: http://127.0.0.1:8080"


HTTP_ENTRY: dict[str, Any] = {
    "adapter": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "model": "m",
    "accounts": [{"name": "a", "api_key_env": "A_KEY"}, {"name": "b", "api_key_env": "B_KEY"}],
    "timeout_s": 5,
    "retries": 2,
    "max_connections": 3,
    "limits": {"max_response_bytes": 4096},
}


def _manifest_model(tmp_path: Path, entry: dict[str, Any]) -> Any:
    """The `ModelSpec` the manifest reads from a pipeline declaring `entry` as `fast`."""
    import json

    from converge_dsl.frontend import build_manifest, load_text

    header = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: p\n"
    text = f"{header}models:\n  fast: {json.dumps(entry)}\n"
    return build_manifest(load_text(text, str(tmp_path / "p.yaml"))).models["fast"]


def test_a_manifest_record_builds_the_model_its_mapping_builds(tmp_path: Path) -> None:
    env = {"A_KEY": "ka", "B_KEY": "kb"}
    spec = _manifest_model(tmp_path, HTTP_ENTRY)
    typed = build_model(
        "fast", spec, base_dir=tmp_path, env=env, clock=FakeClock(), rng=random.Random(1)
    )
    mapped = build(HTTP_ENTRY, tmp_path, env)
    assert isinstance(typed, HttpModel)
    assert isinstance(mapped, HttpModel)
    assert typed._settings == mapped._settings
    assert typed._settings.retries == 2
    assert typed._settings.max_connections == 3
    assert typed.account_roster() == mapped.account_roster()


def test_a_manifest_record_is_refused_with_the_mappings_message(tmp_path: Path) -> None:
    entry = {**HTTP_ENTRY, "accounts": [{"name": "a", "api_key_env": "MISSING_KEY"}]}
    with pytest.raises(ModelError) as typed:
        build_model(
            "fast",
            _manifest_model(tmp_path, entry),
            base_dir=tmp_path,
            env={},
            clock=FakeClock(),
            rng=random.Random(1),
        )
    with pytest.raises(ModelError) as mapped:
        build(entry, tmp_path)
    assert typed.value.message == mapped.value.message
    assert "MISSING_KEY, which is not set" in typed.value.message
    assert typed.value.hint == mapped.value.hint


def test_a_scripted_record_reads_its_script_and_records(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCRIPT)
    spec = _manifest_model(
        tmp_path, {"adapter": "scripted", "script": "s.yaml", "record": "out.jsonl"}
    )
    model = build_model(
        "fast", spec, base_dir=tmp_path, env={}, clock=FakeClock(), rng=random.Random(1)
    )
    assert isinstance(model, RecordingModel)
    assert (tmp_path / "out.jsonl").exists()


def test_a_kept_path_is_resolved_once_and_its_script_read_again_when_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.models import factory

    (tmp_path / "s.yaml").write_text(SCRIPT)
    resolutions: list[str] = []
    real = factory.referenced_path

    def counted(raw: str, *args: Any, **kwargs: Any) -> Path:
        resolutions.append(raw)
        return real(raw, *args, **kwargs)

    monkeypatch.setattr(factory, "referenced_path", counted)
    kept: dict[tuple[object, ...], Path] = {}
    config = {"adapter": "scripted", "script": "s.yaml"}

    def script() -> object:
        model = build_model(
            "m",
            config,
            base_dir=tmp_path,
            env={},
            clock=FakeClock(),
            rng=random.Random(1),
            resolved=kept,
        )
        assert isinstance(model, ScriptedModel)
        return model._script

    first = script()
    assert script() is first
    (tmp_path / "s.yaml").write_text(SCRIPT.replace("hi", "ho"))
    assert script() is not first  # the file changed: read again
    assert resolutions == ["s.yaml"]  # its path: resolved once
    # A missing file is not kept: the next build looks for it again.
    missing = {"adapter": "scripted", "script": "gone.yaml"}
    for _ in range(2):
        with pytest.raises(Exception, match="No such file"):
            build_model(
                "m",
                missing,
                base_dir=tmp_path,
                env={},
                clock=FakeClock(),
                rng=random.Random(1),
                resolved=kept,
            )
    assert resolutions == ["s.yaml", "gone.yaml", "gone.yaml"]
