"""`build_model`: turn one `models.<name>` entry of a pipeline into a `Model`.

The runtime calls it once per entry with the entry's typed record from the
manifest (`converge_dsl.frontend.ModelSpec`); a hand-written mapping (the
Python API, tests) is checked for its adapter, fields and roster, then
converted to that record, so both are built, and refused, alike. Paths are
relative to the pipeline's folder and must resolve inside it or one of the
allowed `roots` (`converge_dsl._files.referenced_path`, the check `validate`
makes), before anything is read or written; API keys are read from the
environment mapping it is given (never from YAML). Configuration mistakes
raise `ModelError(E_CONFIG)` with a hint; a missing environment variable is
named, its value never shown. Any adapter but `replay` may add `record: PATH`
to record its calls into a cassette; the HTTP adapters take `accounts`
optionally (none means one keyless account).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from converge_dsl._files import ReferenceRefused, referenced_path
from converge_dsl._urls import display_url
from converge_dsl.clock import Clock
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.frontend import (
    HTTP_NUMBERS,
    HttpModelSpec,
    ModelSpec,
    ReplayModelSpec,
    ScriptedModelSpec,
    model_spec,
)
from converge_dsl.models._accounts import Account, accounts_from_config, roster_problem
from converge_dsl.models._limits import limits_from, limits_problem
from converge_dsl.models.port import Model, ModelError, ModelErrorCode
from converge_dsl.models.scripted import ScriptedModel

if TYPE_CHECKING:
    import httpx

    from converge_dsl.models._wire import StructuredOutput
    from converge_dsl.models.http import HttpSettings

# The HTTP adapters (httpx, httpcore, their wire formats) and the cassettes are imported
# by the functions that build such a model: a worker process of a batch on a scripted
# model never loads them.

HTTP_KEYS = frozenset(
    {
        "adapter",
        "base_url",
        "model",
        "accounts",
        "timeout_s",
        "connect_timeout_s",
        "read_timeout_s",
        "retries",
        "max_tokens",
        "temperature",
        "stream",
        "record",
        "max_retry_wait_s",
        "max_connections",
        "limits",
        "structured_output",
    }
)
# The JSON Schema's model definitions (schemas/pipeline.v1.json) list the same keys
# per adapter; tests/models/test_factory.py fails on any difference.
ALLOWED_KEYS: Mapping[str, frozenset[str]] = {
    "scripted": frozenset({"adapter", "script", "record"}),
    "replay": frozenset({"adapter", "cassette"}),
    "openai": HTTP_KEYS,
    "anthropic": HTTP_KEYS,
}
# How the Anthropic adapter can ask for a schema-shaped answer (`structured_output`):
# it forces its answer tool (`json_schema`) or asks nothing (`none`); the OpenAI one
# as its wire format allows (`_structured_outputs`).
_ANTHROPIC_STRUCTURED = ("json_schema", "none")
# The OpenAI base URL includes its version path; the Anthropic one is the host only
# (the adapter appends `/v1/messages`).
_BASE_URL_EXAMPLES: Mapping[str, str] = {
    "openai": "http://127.0.0.1:8080/v1",
    "anthropic": "http://127.0.0.1:8080",
}


def build_model(
    name: str,
    config: ModelSpec | Mapping[str, Any],
    *,
    base_dir: Path,
    env: Mapping[str, str],
    clock: Clock,
    rng: random.Random | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    attempt_gate: Callable[[], bool] | None = None,
    deadline: float | None = None,
    wall_time: Callable[[], float] = time.time,
    roots: Sequence[Path] = (),
    resolved: MutableMapping[tuple[object, ...], Path] | None = None,
) -> Model:
    """Build the model `name` from its record (or a hand-written configuration).

    Files it names (`script`, `cassette`, `record`) must resolve inside
    `base_dir` or one of `roots`; else `ModelError(E_CONFIG)` before any is used.
    `resolved` keeps the paths found so (a loaded pipeline's, for all its runs):
    a file is then resolved and checked once, and a script is still read again
    when it changed.

    `attempt_gate`, `deadline` and `wall_time` reach the HTTP adapters (see
    `HttpModel`): the run's budget is asked before every retry or failover,
    no retry starts past `deadline` (monotonic, on `clock`), and `wall_time`
    (epoch seconds) reads `Retry-After` dates. Other adapters never retry. `rng` draws
    the HTTP adapters' retry jitter (None: `random.Random(0)`, made only for them).
    """
    spec = config if isinstance(config, ModelSpec) else checked_spec(name, config)
    model: Model
    if isinstance(spec, ScriptedModelSpec):
        from converge_dsl.models._script_checks import load_script

        script = require_str(name, spec.script, "script")
        path = _file(name, script, "script", base_dir, roots, resolved=resolved)
        model = ScriptedModel(load_script(path, display=script, env=env), name=name, clock=clock)
    elif isinstance(spec, ReplayModelSpec):
        cassette = require_str(name, spec.cassette, "cassette")
        path = _file(name, cassette, "cassette", base_dir, roots, resolved=resolved)
        from converge_dsl.models.cassette import ReplayModel

        return ReplayModel.from_file(path, attempt_gate=attempt_gate, clock=clock)
    else:
        assert isinstance(spec, HttpModelSpec)
        from converge_dsl.models.http import WIRES, HttpModel

        settings, accounts = _http_settings(spec, env)
        model = HttpModel(
            name,
            WIRES[spec.adapter],
            settings,
            accounts,
            clock=clock,
            rng=random.Random(0) if rng is None else rng,
            transport=transport,
            attempt_gate=attempt_gate,
            deadline=deadline,
            wall_time=wall_time,
        )
    if spec.record is not None:
        record = require_str(name, spec.record, "record")
        from converge_dsl.models.cassette import RecordingModel

        path = _file(name, record, "record", base_dir, roots, read=False, resolved=resolved)
        model = RecordingModel(model, path)
    return model


def _structured_outputs(adapter: str) -> tuple[str, ...]:
    """The `structured_output` values the HTTP adapter `adapter` takes."""
    if adapter == "anthropic":
        return _ANTHROPIC_STRUCTURED
    from converge_dsl.models._wire import STRUCTURED_OUTPUTS

    return STRUCTURED_OUTPUTS


def checked_spec(name: str, config: Mapping[str, Any]) -> ModelSpec:
    """The record of a hand-written `models.<name>` mapping, once its adapter, its
    fields and its roster's shape are known ones (`ModelError(E_CONFIG)` if not)."""
    adapter = config.get("adapter")
    if adapter not in ALLOWED_KEYS:
        raise _unknown(
            name, f"unknown adapter {adapter!r}", str(adapter), ALLOWED_KEYS, "use one of"
        )
    allowed = ALLOWED_KEYS[str(adapter)]
    for key in config:
        if key not in allowed:
            message = f"unknown field {key!r} for adapter {adapter}"
            raise _unknown(name, message, str(key), allowed, "allowed")
    problem = roster_problem(name, config.get("accounts"))
    if problem is not None:
        raise problem
    return model_spec(name, config)


def _file(
    name: str,
    raw: str,
    key: str,
    base_dir: Path,
    roots: Sequence[Path],
    *,
    read: bool = True,
    resolved: MutableMapping[tuple[object, ...], Path] | None = None,
) -> Path:
    """The path of the file `models.<name>.<key>` names, checked to lie inside the roots
    (or as `resolved` kept it; a file found there is kept in it)."""
    found = (raw, key, base_dir, tuple(roots), read)
    if resolved is not None and found in resolved:
        return resolved[found]
    try:
        path = referenced_path(raw, base_dir, roots, field=f"{key} file", read=read)
    except ReferenceRefused as exc:
        raise config_error(name, exc.cited, exc.hint or "") from None
    if resolved is not None and path.exists():  # a missing file is looked for again
        resolved[found] = path
    return path


def _unknown(name: str, message: str, word: str, known: Iterable[str], label: str) -> ModelError:
    """A configuration error for an unknown word, with the closest known one or the list."""
    guess = did_you_mean(word, known)
    hint = suggestion(guess) if guess else f"{label}: {', '.join(sorted(known))}"
    return config_error(name, message, hint)


def config_error(name: str, problem: str, hint: str) -> ModelError:
    return ModelError(ModelErrorCode.CONFIG, f"model {name!r}: {problem}", hint=hint)


def require_str(name: str, value: object, key: str) -> str:
    """`value` (of `models.<name>.<key>`) as a non-empty string, else `ModelError(E_CONFIG)`."""
    if not isinstance(value, str) or not value:
        raise config_error(name, f"`{key}` must be a non-empty string", f"set models.{name}.{key}")
    return value


# The numeric settings that must be whole numbers; the others are floats.
_INTEGERS = frozenset({"retries", "max_tokens"})


def _number(name: str, key: str, value: object) -> int | float:
    """A numeric HTTP setting, checked to be a non-negative number of its kind."""
    kind = int if key in _INTEGERS else float
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < 0
        or (kind is int and not isinstance(value, int))
    ):
        raise config_error(
            name, f"`{key}` must be a non-negative {kind.__name__}", f"fix models.{name}.{key}"
        )
    return kind(value)


def _http_settings(
    spec: HttpModelSpec, env: Mapping[str, str]
) -> tuple[HttpSettings, list[Account]]:
    """The settings and accounts of an `openai` or `anthropic` `models.<name>` entry."""
    from converge_dsl.models._transport import certificates_in
    from converge_dsl.models.http import HttpSettings

    name, adapter = spec.name, spec.adapter
    base_url = require_str(name, spec.base_url, "base_url")
    model = require_str(name, spec.model, "model")
    if urlsplit(base_url).scheme not in ("http", "https"):
        raise config_error(
            name,
            f"base_url {display_url(base_url)!r} is not an http(s) URL",
            f"e.g. base_url: {_BASE_URL_EXAMPLES[adapter]}",
        )
    numbers: dict[str, Any] = {
        key: _number(name, key, spec.numbers[key]) for key in HTTP_NUMBERS if key in spec.numbers
    }
    stream = False if spec.stream is None else spec.stream
    if not isinstance(stream, bool):
        raise config_error(name, "`stream` must be true or false", f"fix models.{name}.stream")
    structured = spec.structured_output or "json_schema"
    allowed = _structured_outputs(adapter)
    if structured not in allowed:
        raise config_error(
            name,
            f"`structured_output` must be one of {', '.join(allowed)}",
            f"fix models.{name}.structured_output",
        )
    limits = spec.limits
    problem = None if limits is None else limits_problem(limits)
    if problem is not None:
        field, message = problem
        raise config_error(name, message, f"fix models.{name}.limits{'.' if field else ''}{field}")
    settings = HttpSettings(
        base_url=base_url,
        model=model,
        stream=stream,
        max_connections=_max_connections(name, spec.max_connections),
        structured_output=cast("StructuredOutput", structured),  # checked above
        limits=limits_from(limits),
        certificates=certificates_in(env),
        **numbers,
    )
    return settings, accounts_from_config(name, spec.accounts, env)


def _max_connections(name: str, value: object) -> int:
    """`models.<name>.max_connections`: an integer from 1 to `MAX_CONNECTIONS_LIMIT`."""
    from converge_dsl.models.http import DEFAULT_MAX_CONNECTIONS, MAX_CONNECTIONS_LIMIT

    if value is None:
        return DEFAULT_MAX_CONNECTIONS
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_CONNECTIONS_LIMIT
    ):
        raise config_error(
            name,
            f"`max_connections` must be an integer from 1 to {MAX_CONNECTIONS_LIMIT}",
            f"fix models.{name}.max_connections (default {DEFAULT_MAX_CONNECTIONS})",
        )
    return value
