"""Model scripts: load, validate and compile the YAML that drives the scripted adapter.

A script is loaded with the front-end loader (strict YAML with a source map),
validated against `schemas/model-script.v1.json`, then checked semantically:
regexes compile (CD701) on RE2, whose matching is linear in the prompt, so no
pattern can backtrack for hours; one RE2 cannot run (a backreference,
lookaround) is refused with the reason (CD703). Every problem becomes a located
`Diagnostic`; a bad script raises `PipelineInvalid` carrying all of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, SourceSpan, best_first
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import LoadedDocument, load_file, load_text, schema_diagnostics
from converge_dsl.sandbox import UnsafeSchema, compile_regex, spend

if TYPE_CHECKING:  # the port's dataclasses are imported when a script is run, not checked
    from converge_dsl.models.port import ModelErrorCode, ModelRequest

SCHEMA_NAME = "model-script.v1.json"
# CD701 (CD7xx: model scripts and model configuration): a rule's match.regex does not compile.
CODE_BAD_REGEX = codes.MODEL_SCRIPT_BAD_REGEX
# CD703: a regex RE2 cannot run (backreferences, lookaround).
CODE_NOT_LINEAR_REGEX = codes.MODEL_SCRIPT_REGEX_NOT_LINEAR


class ScriptMatch(Record):
    """Conditions of a rule; every given one must hold."""

    _fields = ("suggestor", "contains", "turn", "regex")
    __slots__ = _fields

    def __init__(
        self,
        suggestor: str | None = None,
        contains: str | None = None,
        turn: int | None = None,
        regex: Any = None,
    ) -> None:
        self.suggestor = suggestor
        self.contains = contains
        self.turn = turn
        self.regex = regex  # a compiled RE2 regex: matching is linear in the text

    def holds(self, req: ModelRequest, text: str) -> bool:
        if self.suggestor is not None and req.suggestor != self.suggestor:
            return False
        if self.turn is not None and req.turn != self.turn:
            return False
        if self.contains is not None and self.contains not in text:
            return False
        if self.regex is None:
            return True
        spend(1, len(text))  # the governor's deadline holds while scripts match
        return self.regex.search(text) is not None


class ScriptToolCall(Record):
    _fields = ("name", "input", "id")
    __slots__ = _fields

    def __init__(self, name: str, input: Mapping[str, Any], id: str | None = None) -> None:
        self.name = name
        self.input = input
        self.id = id


class ScriptError(Record):
    _fields = ("code", "message", "retry_after")
    __slots__ = _fields

    def __init__(
        self, code: ModelErrorCode, message: str, retry_after: float | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.retry_after = retry_after


class ScriptOutcome(Record):
    """What to answer: text and/or tool calls, or an error; after `delay_s` seconds.

    `off_schema`: the reply is given as written even where it does not fit the
    request's response schema (a model ignoring the schema, on purpose).
    """

    _fields = ("reply", "tool_calls", "error", "delay_s", "off_schema")
    __slots__ = _fields

    def __init__(
        self,
        reply: str | None,
        tool_calls: tuple[ScriptToolCall, ...],
        error: ScriptError | None,
        delay_s: float,
        off_schema: bool = False,
    ) -> None:
        self.reply = reply
        self.tool_calls = tool_calls
        self.error = error
        self.delay_s = delay_s
        self.off_schema = off_schema


class ScriptRule(Record):
    """Rule `index` of a script."""

    _fields = ("index", "match", "outcome", "times", "span")
    __slots__ = _fields

    def __init__(
        self,
        index: int,
        match: ScriptMatch,
        outcome: ScriptOutcome,
        times: int | None,
        span: SourceSpan,
    ) -> None:
        self.index = index
        self.match = match
        self.outcome = outcome
        self.times = times
        self.span = span


class Script(Record):
    _fields = ("file", "rules", "default")
    __slots__ = _fields

    def __init__(
        self, file: str, rules: tuple[ScriptRule, ...], default: ScriptOutcome | None
    ) -> None:
        self.file = file
        self.rules = rules
        self.default = default

    def describe_rules(self) -> str:
        return ", ".join(f"rules[{r.index}] ({r.span})" for r in self.rules) or "no rules"


def load_script_file(
    path: Path, *, display: str | None = None, env: Mapping[str, str] | None = None
) -> Script:
    """`display` is how the file is named in messages (a relative path), default `path`;
    `env` the environment whose file-size cap it is read under (default: the process's)."""
    return compile_script(load_file(path, display=display, env=env))


def load_script_text(text: str, file: str) -> Script:
    return compile_script(load_text(text, file))


def compile_script(doc: LoadedDocument) -> Script:
    """Validate a loaded script and compile it; raises `PipelineInvalid` when it is bad."""
    problems = [d for d in schema_diagnostics(doc, SCHEMA_NAME) if d.is_error]
    if problems:
        raise PipelineInvalid(best_first(problems))
    data: Mapping[str, Any] = doc.data
    rules: list[ScriptRule] = []
    for index, raw in enumerate(data.get("rules") or []):
        path = ("rules", index)
        regex_path = (*path, "match", "regex")
        try:
            match = _match(raw["match"])
        except re.error as exc:
            raise PipelineInvalid(
                [
                    Diagnostic.at(
                        CODE_BAD_REGEX,
                        f"invalid regular expression in model script: {exc}",
                        doc.source_map.span(regex_path),
                        path=regex_path,
                        hint="use RE2 syntax; escape ( [ . and friends with a backslash",
                    )
                ]
            ) from None
        except UnsafeSchema as exc:
            raise PipelineInvalid(
                [
                    Diagnostic.at(
                        CODE_NOT_LINEAR_REGEX,
                        f"match.regex: {exc.cited}",
                        doc.source_map.span(regex_path),
                        path=regex_path,
                        hint="regexes run on RE2, in time linear in the prompt: "
                        "no backreferences (\\1) or lookaround ((?=, (?!, (?<=, (?<!)",
                    )
                ]
            ) from None
        rules.append(
            ScriptRule(
                index=index,
                match=match,
                outcome=_outcome(raw),
                times=raw.get("times"),
                span=doc.source_map.span(path),
            )
        )
    default = data.get("default")
    return Script(
        file=doc.file,
        rules=tuple(rules),
        default=None if default is None else _outcome(default),
    )


def _match(raw: Mapping[str, Any]) -> ScriptMatch:
    """The rule's conditions; raises `re.error` (syntax) or `UnsafeSchema` (not RE2)."""
    regex = raw.get("regex")
    if regex is not None:
        re.compile(regex)  # a syntax error is worded by Python's parser (CD701)
    return ScriptMatch(
        suggestor=raw.get("suggestor"),
        contains=raw.get("contains"),
        turn=raw.get("turn"),
        regex=None if regex is None else compile_regex(regex),
    )


def _outcome(raw: Mapping[str, Any]) -> ScriptOutcome:
    error = raw.get("error")
    return ScriptOutcome(
        reply=raw.get("reply"),
        tool_calls=tuple(
            ScriptToolCall(name=c["name"], input=dict(c.get("input") or {}), id=c.get("id"))
            for c in raw.get("tool_calls") or []
        ),
        error=None
        if error is None
        else ScriptError(
            code=_error_code(error["code"]),
            message=error.get("message", "scripted failure"),
            retry_after=error.get("retry_after"),
        ),
        delay_s=float(raw.get("delay_s", 0.0)),
        off_schema=bool(raw.get("off_schema", False)),
    )


def first_match(
    script: Script, req: ModelRequest, used: Mapping[int, int]
) -> tuple[ScriptRule | None, ScriptOutcome | None]:
    """The first rule that matches and still has uses left (else the default outcome)."""
    # Imported here: `validate` compiles scripts through this module and must
    # not pay for `_common`'s engine imports.
    from converge_dsl.models._common import request_text

    text = request_text(req)
    for rule in script.rules:
        if rule.times is not None and used.get(rule.index, 0) >= rule.times:
            continue
        if rule.match.holds(req, text):
            return rule, rule.outcome
    return None, script.default


def _error_code(code: str) -> ModelErrorCode:
    from converge_dsl.models.port import ModelErrorCode

    return ModelErrorCode(code)
