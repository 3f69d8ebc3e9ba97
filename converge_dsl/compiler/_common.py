"""What seed, rule and llm suggestors share: identity, `accepts`, value rendering.

`accepts` is pure: with a `when` expression it is that expression's truth;
without, it is the idempotent default of docs/architecture.md §6 — true only while none of
the suggestor's own facts or pending proposals exist for its target keys, answered
from the context's index of sources by key (`RenderScopes.owns`), in O(targets).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from converge_dsl._long_lines import head_and_tail
from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.engine.types import (
    ContextView,
    ProposedFact,
    Provenance,
    canonical_json,
    freeze_json,
)
from converge_dsl.errors import TemplateRunError
from converge_dsl.frontend import SuggestorSpec

from ._context import CompileContext
from ._scope import RenderScopes
from ._template import CompiledExpression, CompiledTemplate

# The characters of a diagnostic's content, and of each text of its data, kept: they
# quote what came from outside (a tool's error, a model's answer, a schema error naming
# the value). A diagnostic over the gate's max_content_length (data counted as JSON,
# where a control character takes six) would be rejected, its message lost: under a
# lower limit the quotes are shortened until it fits (`SuggestorCore.diagnostic`).
QUOTED_CHARS = 1000
FEWEST_QUOTED_CHARS = 40


def quoted(text: str, chars: int = QUOTED_CHARS) -> str:
    """`text`, or its start and end, `chars` characters in all, and a note of what was
    cut of its length (`head_and_tail`)."""
    return head_and_tail(text, chars)


@dataclass(frozen=True, slots=True)
class SuggestorCore:
    """Identity and acceptance of a compiled suggestor."""

    name: str
    source: str
    dependencies: tuple[str, ...]
    targets: tuple[str, ...]
    when: CompiledExpression | None
    span: SourceSpan
    scopes: RenderScopes
    max_content_length: int  # the gate's (`CompileContext.max_content_length`)

    @classmethod
    def of(
        cls, spec: SuggestorSpec, ctx: CompileContext, targets: tuple[str, ...] | None = None
    ) -> SuggestorCore:
        """The core of `spec`, writing `targets` (default: the spec's own)."""
        when, path = spec.when, spec.path
        return cls(
            name=spec.name,
            source=ctx.source(spec.name),
            dependencies=spec.dependencies,
            targets=tuple(dict.fromkeys(spec.targets if targets is None else targets)),
            when=None if when is None else ctx.expression(when, (*path, "when")),
            span=ctx.span(path),
            scopes=ctx.scopes,
            max_content_length=ctx.max_content_length,
        )

    def diagnostic(
        self, kind: str, cycle: int, content: str, provenance: Provenance, **data: Any
    ) -> ProposedFact:
        """A `diagnostic` proposal `kind:<name>:<cycle>` of this suggestor: `content`,
        and `data` between its name and cycle and its location. The content and each
        text of `data` are quoted (`quoted`), shorter than `QUOTED_CHARS` when the whole
        would be over `max_content_length` (down to `FEWEST_QUOTED_CHARS`)."""
        chars = QUOTED_CHARS
        while True:
            said = {
                name: quoted(value, chars) if isinstance(value, str) else value
                for name, value in data.items()
            }
            fact = ProposedFact(
                key="diagnostic",
                id=f"{kind}:{self.name}:{cycle}",
                content=quoted(content, chars),
                confidence=1.0,
                provenance=provenance,
                data={"suggestor": self.name, **said, "cycle": cycle, "location": str(self.span)},
            )
            size = len(fact.content) + len(canonical_json(fact.data))
            if size <= self.max_content_length or chars <= FEWEST_QUOTED_CHARS:
                return fact
            chars = max(
                FEWEST_QUOTED_CHARS, min(chars - 2, chars * self.max_content_length // size)
            )

    def warning(
        self, code: str, kind: str, cycle: int, text: str, provenance: Provenance, **data: Any
    ) -> ProposedFact:
        """A warning fact `kind:<name>:<cycle>` on `diagnostic` saying `text` of this
        suggestor: its content reads `warning[CODE]: <name> (at <span>) <text>`."""
        content = f"warning[{code}]: {self.name} (at {self.span}) {text}"
        return self.diagnostic(kind, cycle, content, provenance, code=code, **data)

    def accepts(self, view: ContextView) -> bool:
        if self.when is not None:
            scope = self.scopes.scope(view)
            return bool(self.when.evaluate(scope, suggestor=self.name, cycle=view.cycle))
        targets = self.targets
        if len(targets) == 1:  # the usual case: one target key, asked without a generator
            return not self.scopes.owns(view, targets[0], self.source)
        return not any(self.scopes.owns(view, key, self.source) for key in targets)


class CoreSuggestor:
    """Mixin delegating the protocol's identity members to `self.core`."""

    __slots__ = ()
    core: SuggestorCore

    @property
    def name(self) -> str:
        return self.core.name

    @property
    def dependencies(self) -> tuple[str, ...]:
        return self.core.dependencies

    @property
    def span(self) -> SourceSpan:
        return self.core.span

    def accepts(self, ctx: ContextView) -> bool:
        return self.core.accepts(ctx)

    def provenance(self) -> Provenance:
        return Provenance(self.core.source)

    def complexity_hint(self) -> str | None:
        return None


# A value that is a template (str) or a JSON object whose string leaves are templates.
Value = CompiledTemplate | Mapping[str, Any] | tuple[Any, ...] | int | float | bool | None


def compile_value(
    raw: Any, path: JsonPath, ctx: CompileContext, extra: frozenset[str] = frozenset()
) -> Any:
    """Compile every string of `raw` (a template or JSON value) into a `CompiledTemplate`."""
    if isinstance(raw, str):
        return ctx.template(raw, path, extra=extra)
    if isinstance(raw, Mapping):
        return {k: compile_value(v, (*path, k), ctx, extra) for k, v in raw.items()}
    if isinstance(raw, list | tuple):
        return tuple(compile_value(v, (*path, i), ctx, extra) for i, v in enumerate(raw))
    return raw


def render_value(value: Any, scope: dict[str, Any], name: str, cycle: int) -> Any:
    """Render a value from `compile_value`; objects stay objects (frozen)."""
    if isinstance(value, CompiledTemplate):
        return value.render(scope, suggestor=name, cycle=cycle)
    if isinstance(value, Mapping):
        return freeze_json({k: render_value(v, scope, name, cycle) for k, v in value.items()})
    if isinstance(value, tuple):
        return tuple(render_value(v, scope, name, cycle) for v in value)
    return value


def render_confidence(value: Any, scope: dict[str, Any], name: str, cycle: int) -> float:
    """A confidence is a number or a template rendering to one."""
    if not isinstance(value, CompiledTemplate):
        return float(value)
    text = value.render(scope, suggestor=name, cycle=cycle).strip()
    try:
        return float(text)
    except ValueError:
        raise TemplateRunError(
            f"confidence template rendered {text[:40]!r}, not a number",
            span=value.span,
            suggestor=name,
            cycle=cycle,
        ) from None
