"""The scripted adapter: the embedded default model, answering from a YAML script.

No network, and no global state but caches of pure values (the verdict on a
reply against a response schema, `schema_problem`, and each response schema's
validator, both by text): the only clock it touches is
the injected one (for `delay_s`), so the same script and the same requests
give the same returns, run after run. Streaming splits the reply into word
increments.

A request with a `response_schema` gets only a reply that is JSON conforming
to it, as a server constraining its decoding would give: any other scripted
reply is `E_SCRIPT`, naming the rule that gave it and the JSON pointer of the
first failure, so a script that disagrees with its pipeline fails loudly. A
reply marked `off_schema: true` is given as written instead, as a model that
ignores the schema would give it, so the caller's handling of a non-conforming
answer can be tested offline.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from converge_dsl.clock import Clock, SystemClock
from converge_dsl.models._common import (
    emit_increments,
    estimate_usage,
    request_key,
    thaw_json,
)
from converge_dsl.models._script import (
    Script,
    ScriptOutcome,
    ScriptRule,
    first_match,
    load_script_file,
    load_script_text,
)
from converge_dsl.models.port import (
    Message,
    ModelDefaults,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    OnIncrement,
    Part,
    TextPart,
    ToolCallPart,
)
from converge_dsl.sandbox import GovernedValidator, UnsafeSchema, python_validator

_V = TypeVar("_V")
_RETRYABLE = frozenset(
    {ModelErrorCode.TIMEOUT, ModelErrorCode.RATE_LIMITED, ModelErrorCode.PROVIDER}
)
# How a user recovers from each error, as the provider adapters would say it.
_RECOVERY = {
    ModelErrorCode.TIMEOUT: "with a provider, raise timeout_s or check the server's load",
    ModelErrorCode.RATE_LIMITED: "with a provider, wait, lower max_concurrency or add accounts",
    ModelErrorCode.PROVIDER: "with a provider, retry later or fail over to another account",
    ModelErrorCode.AUTH: "with a provider, check the API key in the environment",
}


class ScriptedModel(ModelDefaults):
    """A model that replies from a script; first matching rule wins."""

    def __init__(
        self, script: Script, *, name: str = "scripted", clock: Clock | None = None
    ) -> None:
        self.name = name
        self._script = script
        self._clock: Clock = clock or SystemClock()
        self._used: dict[int, int] = {}
        self._id = _model_id(script.file)

    @classmethod
    def from_file(
        cls,
        path: Path,
        *,
        name: str = "scripted",
        clock: Clock | None = None,
        display: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ScriptedModel:
        """Load, validate and compile `path`; raises `PipelineInvalid` on a bad script.

        `display` names the file in diagnostics and errors (e.g. the path as the
        pipeline wrote it); default: `path` itself. `env` is the environment whose
        file-size cap it is read under (default: the process's).
        """
        script = load_script_file(Path(path), display=display, env=env)
        return cls(script, name=name, clock=clock)

    @classmethod
    def from_text(
        cls, text: str, file: str, *, name: str = "scripted", clock: Clock | None = None
    ) -> ScriptedModel:
        return cls(load_script_text(text, file), name=name, clock=clock)

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, script={self._script.file!r})"

    def model_id(self) -> str:
        return self._id

    @property
    def script_file(self) -> str:
        """The script's file, as messages name it."""
        return self._script.file

    async def call(self, req: ModelRequest) -> ModelReturn:
        return await self._answer(req, None)

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        return await self._answer(req, on_increment)

    async def _answer(self, req: ModelRequest, on_increment: OnIncrement | None) -> ModelReturn:
        # Pick the rule and count its use before awaiting, so concurrent calls
        # consume `times` in call order.
        rule, outcome = first_match(self._script, req, self._used)
        if rule is not None:
            self._used[rule.index] = self._used.get(rule.index, 0) + 1
        if outcome is None:
            raise ModelError(
                ModelErrorCode.SCRIPT,
                f"no rule of model script {self._script.file} matches the request"
                f" (suggestor {req.suggestor!r}, turn {req.turn!r})",
                hint="add a matching rule or a `default:` reply; tried "
                + self._script.describe_rules(),
            )
        if outcome.delay_s > 0:
            await self._clock.sleep(outcome.delay_s)
        result = self._build(req, outcome, rule)
        if on_increment is not None:
            emit_increments(result.text, on_increment)
        return result

    def _build(
        self, req: ModelRequest, outcome: ScriptOutcome, rule: ScriptRule | None
    ) -> ModelReturn:
        if outcome.error is not None:
            error = outcome.error
            where = "default" if rule is None else f"rules[{rule.index}] ({rule.span})"
            recovery = _RECOVERY.get(error.code)
            raise ModelError(
                error.code,
                f"{error.message} (scripted in {self._script.file})",
                retryable=error.code in _RETRYABLE,
                retry_after=error.retry_after,
                hint=(f"{recovery}; " if recovery else "")
                + f"this failure is scripted by {where}: edit the model script to change it",
            )
        if req.response_schema is not None and not outcome.off_schema:
            self._check_schema(req.response_schema, outcome.reply or "", rule)
        parts: list[Part] = []
        if outcome.reply:
            parts.append(TextPart(outcome.reply))
        if outcome.tool_calls:
            call_id = _call_ids(req)
            parts.extend(
                ToolCallPart(call.id or call_id(i), call.name, thaw_json(call.input))
                for i, call in enumerate(outcome.tool_calls)
            )
        message = Message("assistant", tuple(parts))
        return ModelReturn(
            message=message,
            usage=estimate_usage(req, message),
            stop_reason="tool_use" if outcome.tool_calls else "end_turn",
            model_id=self._id,
        )

    def _check_schema(self, schema: Mapping[str, Any], reply: str, rule: ScriptRule | None) -> None:
        """Raise `E_SCRIPT` unless `reply` is JSON that conforms to `schema`."""
        problem = schema_problem(reply, schema)
        if problem is None:
            return
        where = "the default reply" if rule is None else f"rules[{rule.index}] ({rule.span})"
        raise ModelError(
            ModelErrorCode.SCRIPT,
            f"model script {self._script.file}: {where} gives a reply that does not fit "
            f"the request's response schema: {problem}",
            hint="a model constrained to the schema would never answer this: make the reply "
            "JSON that fits the llm suggestor's output schema (or its key's schema), or mark "
            "it `off_schema: true` to test how the pipeline handles a non-conforming answer",
        )


@functools.lru_cache(maxsize=64)
def _model_id(file: str) -> str:
    """The model id of a script from `file` (kept: a batch builds a model per case)."""
    return f"scripted:{Path(file).name}"


# The verdicts of `schema_problem` so far, by (reply text, schema text), and the
# validator of each schema text (or why it has none), so another reply against a
# schema met before is checked without making its validator again.
_VERDICTS: dict[tuple[str, str], str | None] = {}
_CHECKS: dict[str, GovernedValidator | str] = {}
_KEEP = 256


def schema_problem(text: str, schema: Mapping[str, Any]) -> str | None:
    """Why `text` is not JSON conforming to `schema` (naming the JSON pointer), or None.

    The verdict on a (text, schema) pair is kept, and the validator of a schema:
    a batch asks it of the same scripted replies and response schema in every case.
    """
    try:
        schema_text = json.dumps(schema, sort_keys=True, default=_plain)
    except (TypeError, ValueError):
        return _schema_problem(text, _check(thaw_json(schema)))
    key = (text, schema_text)
    if key in _VERDICTS:
        return _VERDICTS[key]
    check = _CHECKS.get(schema_text)
    if check is None:
        check = _keep(_CHECKS, schema_text, _check(thaw_json(schema)))
    return _keep(_VERDICTS, key, _schema_problem(text, check))


def _keep(kept: dict[Any, _V], key: Any, value: _V) -> _V:
    if len(kept) >= _KEEP:
        kept.clear()
    kept[key] = value
    return value


def _plain(value: object) -> Any:
    """A frozen mapping (a `MappingProxyType`) as `json.dumps` takes it."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(type(value).__name__)


def _check(plain: Any) -> GovernedValidator | str:
    """The validator of response schema `plain`, or why this project will not apply it."""
    try:
        return python_validator(plain, "the response schema")
    except UnsafeSchema as exc:
        return exc.message


def _schema_problem(text: str, check: GovernedValidator | str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"the reply is not JSON ({exc})"
    if isinstance(check, str):
        return check
    try:
        error = check.best_error(value)
    except Exception as exc:  # python-jsonschema's, imported only when data did not fit
        import jsonschema
        import referencing.exceptions

        if isinstance(exc, jsonschema.exceptions.SchemaError):
            return f"the schema is not valid: {exc.message}"
        if isinstance(exc, referencing.exceptions.Unresolvable):
            return f"the schema has a reference that does not resolve: {exc}"
        raise
    if error is None:
        return None
    pointer = "".join(f"/{_escape(str(p))}" for p in error.absolute_path)
    return f"at JSON pointer {pointer or '/'}: {error.message}"


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _call_ids(req: ModelRequest) -> Callable[[int], str]:
    """Tool-call ids derived from the request, so they do not depend on call order."""
    stem = request_key(req)[:10]
    return lambda index: f"call_{stem}_{index}"
