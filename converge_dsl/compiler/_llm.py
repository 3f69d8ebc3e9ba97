"""The `llm` suggestor kind: render a prompt, call a model, parse its answer into proposals.

Output formats (docs/architecture.md §14): `text` (the whole answer is one item), `lines`
(each non-blank line is an item) and `json` (an array of items, or one object =
one item). With `output.schema`, the parsed JSON answer must satisfy that JSON
Schema. Without it, when the target key has a schema and `output.data` is
absent, each item must satisfy the key's schema (the item is the fact's data);
`response_schema` records the expected answer (`output.schema`, or an array of
such items) for the model port. An answer that does not parse or conform yields
one `diagnostic` proposal (id `llm:invalid-output:<suggestor>:<cycle>`) and
none of its items, unless `output.retries` (default 0) asks again: the request,
the unusable answer and the errors located in it (JSON pointers, at most 5, or
the JSON error's position), each attempt one more metered call traced with
purpose `repair` (docs/architecture.md §8); the last attempt's answer decides.

`id`, `content`, `confidence` are templates over `item` and `index`; `data` is
an expression over them (the `when` language) whose value must be JSON.
Defaults: id `<suggestor>-<index>`, content the item itself (a JSON item's
canonical JSON text; content is always text), data the item for `json` and
none for `text` and `lines`, confidence 0.7.
Every call first reserves one call, its input estimate and its answer's cap
in the usage meter (`metered_call`: under a token budget the request is sent
with the cap the budget leaves); the reservation is settled with the tokens
the model reports, whether or not the answer then parses (or, when the call
fails, with none: it reached the model all the same). A refused reservation,
or a model that refuses a retry for the run's budget, yields no proposal and
leaves the refusal to the engine (the run stops with the budget's reason). An
answer longer than the cap it was sent with (a server that ignores the cap)
adds a `diagnostic` proposal `budget:overshoot:<suggestor>:<cycle>`; an answer
cut at the cap that does not parse says it was cut. Provenance is
`name@pipeline` with the model id and account label.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from converge_dsl import codes
from converge_dsl._json_pointer import error_pointer, pointer
from converge_dsl._json_text import loads
from converge_dsl._json_types import JsonSchema
from converge_dsl.engine.types import (
    AgentEffect,
    ContextView,
    ProposedFact,
    Provenance,
    text_and_data,
)
from converge_dsl.frontend import LlmOutput, LlmSpec
from converge_dsl.models import Metered, metered_call
from converge_dsl.models.events import CALL_PURPOSE
from converge_dsl.models.port import (
    Message,
    Model,
    ModelRequest,
    ModelReturn,
)
from converge_dsl.sandbox import (
    Exhausted,
    GovernedValidator,
    UnsafeSchema,
    meta_error,
    python_validator,
)

from ._common import (
    CoreSuggestor,
    SuggestorCore,
    compile_value,
    render_confidence,
    render_value,
)
from ._context import CompileContext, RunParts, UsageRecorder
from ._scope import with_item
from ._template import CompiledExpression, CompiledTemplate

ITEM_NAMES = frozenset({"item", "index"})
DEFAULT_LLM_CONFIDENCE = 0.7


class _BadAnswer(Exception):
    """The answer does not parse or conform (becomes a diagnostic proposal, or a repair
    request). `errors` are what a repair request tells the model: each located in the
    answer (a JSON pointer, or the position of a JSON error) with its message."""

    def __init__(self, reason: str, errors: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.errors = errors or (reason,)


@dataclass(frozen=True, slots=True)
class ItemMapping:
    """How an answer's text becomes proposals to `target` (an llm answer, a tool's
    result): `format` splits it into items, `validator` checks a json answer
    (`output.schema`), `item_validator` each item (the key's schema); `id`,
    `content`, `confidence` templates and the `data` expression make each item's
    proposal; `located`: every schema error is located (for a repair request).
    `name` is the suggestor's."""

    name: str
    target: str
    format: str
    validator: GovernedValidator | None
    item_id: CompiledTemplate | None
    item_content: Any
    item_confidence: Any
    item_data: CompiledExpression | None = None
    item_validator: GovernedValidator | None = None
    located: bool = False

    def proposal(
        self,
        scope: dict[str, Any],
        item: Any,
        index: int,
        cycle: int,
        provenance: Provenance,
        *,
        checked: object = None,
    ) -> ProposedFact:
        """The proposal of `item`; `checked`: the evidence that `item` fits the key's schema
        (`judged`), carried when the item is the proposal's data."""
        name = self.name
        item_id = (
            f"{name}-{index}"
            if self.item_id is None
            else self.item_id.render(scope, suggestor=name, cycle=cycle)
        )
        content = (
            item
            if self.item_content is None
            else render_value(self.item_content, scope, name, cycle)
        )
        if self.item_data is not None:
            what = "output.data"
            data = self.item_data.evaluate_data(scope, what=what, suggestor=name, cycle=cycle)
        else:
            data = item if self.format == "json" else None
        text, data = text_and_data(content, data)
        proposal = ProposedFact(
            key=self.target,
            id=item_id,
            content=text,
            confidence=render_confidence(self.item_confidence, scope, name, cycle),
            provenance=provenance,
            data=data,
        )
        return proposal if checked is None or data is not item else proposal._vouched(checked)

    def items(self, text: str) -> list[Any]:
        """The answer's items (raises `_BadAnswer` when it does not parse or conform)."""
        return [item for item, _ in self.judged(text)]

    def judged(self, text: str) -> list[tuple[Any, object]]:
        """The answer's items, each with the evidence that it fits the key's schema (None
        when there is none: no item check, or one the quick check did not answer)."""
        if self.format == "text":
            return [(text.strip(), None)] if text.strip() else []
        if self.format == "lines":
            return [(line.strip(), None) for line in text.splitlines() if line.strip()]
        try:
            data = loads(_strip_fence(text))
        except ValueError as exc:
            raise _BadAnswer(f"answer is not JSON: {exc}") from None
        located = self.located
        if self.validator is not None:
            _conform(self.validator, data, "answer", "output.schema", located=located)
        if isinstance(data, list):
            items = data
        elif isinstance(data, dict):
            items = [data]
        else:
            raise _BadAnswer(f"answer is a JSON {type(data).__name__}, not an array or object")
        if self.item_validator is None:
            return [(item, None) for item in items]
        schema = f"the schema of key {self.target!r}"
        judged: list[tuple[Any, object]] = []
        for index, item in enumerate(items):
            at = () if isinstance(data, dict) else (index,)
            what = f"answer item {index}"
            fitted = _conform(self.item_validator, item, what, schema, located=located, at=at)
            judged.append((item, fitted))
        return judged


def compile_mapping(
    name: str, output: LlmOutput, ctx: CompileContext, *, default_confidence: float
) -> tuple[ItemMapping, JsonSchema | None]:
    """The `ItemMapping` of an `output` (its templates compiled once) and the answer's
    expected schema (None when nothing describes it)."""
    out_path = output.path
    validator, item_validator, response_schema = _schemas(output, ctx)
    mapping = ItemMapping(
        name=name,
        target=output.key,
        format=output.format,
        validator=validator,
        item_id=None
        if output.id is None
        else ctx.template(output.id, (*out_path, "id"), extra=ITEM_NAMES),
        item_content=None
        if output.content is None
        else compile_value(output.content, (*out_path, "content"), ctx, ITEM_NAMES),
        item_confidence=compile_value(
            default_confidence if output.confidence is None else output.confidence,
            (*out_path, "confidence"),
            ctx,
            ITEM_NAMES,
        ),
        item_data=None
        if output.data is None
        else ctx.expression(output.data, (*out_path, "data"), extra=ITEM_NAMES),
        item_validator=item_validator,
        located=output.retries > 0,  # only a repair request needs every error located
    )
    return mapping, response_schema


@dataclass(frozen=True, slots=True)
class LlmSuggestor(CoreSuggestor):
    core: SuggestorCore
    model_name: str
    model: Model
    usage: UsageRecorder
    system: CompiledTemplate | None
    user: CompiledTemplate
    mapping: ItemMapping  # how the answer's items become proposals
    max_tokens: int | None
    temperature: float | None
    response_schema: JsonSchema | None = None
    retries: int = 0  # further requests for an unusable answer, each with its errors

    @property
    def target(self) -> str:
        return self.mapping.target

    @property
    def format(self) -> str:
        return self.mapping.format

    def for_run(self, run: RunParts) -> LlmSuggestor:
        """This suggestor in another run: that run's model and usage meter."""
        return replace(self, model=run.models[self.model_name], usage=run.usage)

    async def execute(self, ctx: ContextView) -> AgentEffect:
        core = self.core
        scope = core.scopes.scope(ctx)
        cycle = ctx.cycle
        system = (
            ()
            if self.system is None
            else (self.system.render(scope, suggestor=core.name, cycle=cycle),)
        )
        request = ModelRequest(
            model=self.model.model_id(),
            messages=(
                Message.text("user", self.user.render(scope, suggestor=core.name, cycle=cycle)),
            ),
            system=system,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            suggestor=core.name,
            response_schema=self.response_schema if self.format == "json" else None,
        )
        warning: ProposedFact | None = None
        for attempt in range(self.retries + 1):
            metered = await self._call(request, repair=attempt > 0)
            if metered is None:  # the budget refused this attempt: the engine stops the run
                return AgentEffect(())
            answer = metered.answer
            provenance = Provenance(
                core.source, answer.model_id or self.model.model_id(), answer.account
            )
            warning = self._overshoot(metered, cycle, provenance) or warning
            warnings = () if warning is None else (warning,)
            try:
                items = self.mapping.judged(_text_of(answer))
            except _BadAnswer as exc:
                if attempt < self.retries:
                    request = _repair_request(
                        request, answer, exc, json_answer=self.format == "json"
                    )
                    continue
                reason = str(exc) + _cut_note(answer, metered.max_tokens)
                return AgentEffect((self._diagnostic(reason, cycle, provenance), *warnings))
            except Exhausted as exc:  # the answer was too costly to check: located here
                if exc.code is not None and exc.span is None:
                    exc.span = self.core.span
                raise
            propose = self.mapping.proposal
            return AgentEffect(
                tuple(
                    propose(
                        with_item(scope, item, index),
                        item,
                        index,
                        cycle,
                        provenance,
                        checked=fitted,
                    )
                    for index, (item, fitted) in enumerate(items)
                )
                + warnings
            )
        raise AssertionError("unreachable: the last attempt returns")  # pragma: no cover

    def _overshoot(
        self, metered: Metered, cycle: int, provenance: Provenance
    ) -> ProposedFact | None:
        """The warning of an answer past the cap it was sent with (None: within it)."""
        note = metered.overshoot_note()
        if note is None:
            return None
        return self.core.warning(
            codes.TOKEN_CAP_IGNORED,
            "budget:overshoot",
            cycle,
            note,
            provenance,
            max_tokens=metered.max_tokens,
            overshoot=metered.overshoot,
        )

    async def _call(self, request: ModelRequest, *, repair: bool = False) -> Metered | None:
        """The model's answer under a reservation; None when the run's budget refused it.
        A repair attempt is traced as such (purpose `repair`)."""
        chars = sum(len(t) for t in request.system) + sum(
            len(m.text_content) for m in request.messages
        )
        said = CALL_PURPOSE.set("repair") if repair else None
        try:
            return await metered_call(self.model, request, self.usage, -(-chars // 4))
        finally:
            if said is not None:
                CALL_PURPOSE.reset(said)

    def _diagnostic(self, reason: str, cycle: int, provenance: Provenance) -> ProposedFact:
        core = self.core
        content = f"{core.name} (at {core.span}) gave no usable answer: {reason}"
        return core.diagnostic(
            "llm:invalid-output", cycle, content, provenance, target=self.target, error=reason
        )


def _text_of(answer: ModelReturn) -> str:
    """The answer's text; an answer that holds only tool calls (an llm suggestor runs
    no tools) is unusable, not empty."""
    calls = answer.message.tool_calls
    if calls and not answer.text.strip():
        names = ", ".join(call.name for call in calls)
        raise _BadAnswer(f"the answer holds only tool calls ({names}), no text")
    return answer.text


def _cut_note(answer: ModelReturn, max_tokens: int | None) -> str:
    """What to add to an unusable answer's reason when the model stopped at its token cap."""
    if answer.stop_reason != "max_tokens":
        return ""
    cap = "" if max_tokens is None else f" ({max_tokens})"
    return (
        f"; the answer was cut at the token limit{cap}: raise the suggestor's max_tokens "
        "(or the model's), or the run's budget.max_tokens when the budget set the cap"
    )


def _conform(
    validator: GovernedValidator,
    value: Any,
    what: str,
    schema: str,
    *,
    located: bool = False,
    at: tuple[int, ...] = (),
) -> object:
    """Raise `_BadAnswer` unless `value` (found at `at` in the answer) fits `validator`;
    `located`: with every error (up to `_MAX_REPAIR_ERRORS`) by its pointer in the answer.
    Returns the evidence that it fits, when the quick check gave one (else None)."""
    error, fitted = validator.judge(value)
    if error is None:
        return fitted
    where = "/".join(str(p) for p in error.absolute_path) or "<root>"
    reason = f"{what} does not match {schema} at {where}: {error.message}"
    if not located:
        raise _BadAnswer(reason)
    found = sorted(
        validator.iter_errors(value), key=lambda e: (list(map(str, e.absolute_path)), e.message)
    )
    errors = tuple(
        f"at {pointer(at) + error_pointer(e) or 'the root'}: {e.message}"
        for e in found[:_MAX_REPAIR_ERRORS]
    )
    raise _BadAnswer(reason, errors)


_MAX_REPAIR_ERRORS = 5


def _repair_request(
    request: ModelRequest, answer: ModelReturn, bad: _BadAnswer, *, json_answer: bool
) -> ModelRequest:
    """`request` asked again: the unusable answer, then what is wrong with it."""
    listed = "\n".join(f"- {error}" for error in bad.errors)
    form = "as JSON only" if json_answer else "as text, calling no tool"
    ask = f"Your answer cannot be used:\n{listed}\nAnswer again with the whole corrected answer, "
    ask += f"{form}."
    said = Message.text("assistant", answer.text or "(no text)")
    return replace(request, messages=(*request.messages, said, Message.text("user", ask)))


def _strip_fence(text: str) -> str:
    """Accept an answer wrapped in a ``` fence (models often add one)."""
    stripped = text.strip()
    if stripped.startswith("```"):
        body = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        return body.rsplit("```", 1)[0]
    return stripped


def build_llm(spec: LlmSpec, ctx: CompileContext) -> LlmSuggestor:
    path = spec.path
    model_name = spec.model
    model = ctx.models.get(model_name)
    if model is None:
        raise ctx.invalid(
            codes.COMPILE_UNKNOWN_MODEL,
            f"unknown model {model_name!r}",
            (*path, "model"),
            hint=f"declared models: {', '.join(sorted(ctx.models)) or 'none'}",
        )
    prompt, output = spec.prompt, spec.output
    mapping, response_schema = compile_mapping(
        spec.name, output, ctx, default_confidence=DEFAULT_LLM_CONFIDENCE
    )
    return LlmSuggestor(
        core=SuggestorCore.of(spec, ctx),
        model_name=model_name,
        model=model,
        usage=ctx.usage,
        system=None
        if prompt.system is None
        else ctx.template(prompt.system, (*prompt.path, "system")),
        user=ctx.template(prompt.user, (*prompt.path, "user")),
        mapping=mapping,
        max_tokens=spec.max_tokens,
        temperature=spec.temperature,
        response_schema=response_schema,
        retries=output.retries,
    )


def _schemas(
    output: LlmOutput, ctx: CompileContext
) -> tuple[GovernedValidator | None, GovernedValidator | None, JsonSchema | None]:
    """(answer validator, item validator, response schema) of an llm `output`.

    `output.schema` checks the whole answer. Without it, a `json` answer whose
    items are the facts' data (no `output.data`) on a key with a schema has its
    items checked against that schema, and the expected answer is derived: an
    array of such items.
    """
    schema = output.schema
    if schema is not None:
        try:
            # Refuses an unsafe schema first (its one `check_safe`): the meta check is linear.
            validator = python_validator(schema, "output.schema")
            error = meta_error(schema)  # python-jsonschema's `SchemaError`, or None
            problem = None if error is None else str(error.message)
        except UnsafeSchema as exc:
            problem = exc.message
        if problem is not None:
            raise ctx.invalid(
                codes.COMPILE_BAD_OUTPUT_SCHEMA,
                f"output.schema is not a valid JSON Schema: {problem}",
                (*output.path, "schema"),
            ) from None
        return validator, None, schema
    target = output.key
    key_schema = ctx.key_schemas.get(target)
    if key_schema is None or not output.json or output.data is not None:
        return None, None, None
    return (
        None,
        python_validator(key_schema, f"the schema of key {target!r}"),
        _array_of(key_schema),
    )


def _array_of(item: JsonSchema) -> JsonSchema:
    """A schema of an array of `item`s. The item's `$defs` and `definitions` move to
    the root, so its local `$ref`s (`#/$defs/...`) still point at them."""
    moved = ("$defs", "definitions", "$schema")
    hoisted = {k: item[k] for k in moved if k in item}
    inner = {k: v for k, v in item.items() if k not in moved}
    return MappingProxyType({"type": "array", "items": inner, **hoisted})
