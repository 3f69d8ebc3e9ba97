"""The `agent` suggestor kind: its typed spec, checks, builder and registration.

Light on purpose (docs/architecture.md §16): validate imports this module (not
the turn loop) for a pipeline with an agent; the checks and the builder import
their modules on first call. The spec is the agent as written, parsed once:
its parts (`AgentContributor`, `AgentSummarizer` with its `SummaryBudget`,
`AgentCompaction`, `AgentToolChoice`) keep their JSON paths, and the defaults
the schema documents are filled in here, their one home.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._page_assets import Names
from converge_dsl._record import Record
from converge_dsl.agents._summary_budget import SummaryBudget
from converge_dsl.diagnostics import Diagnostic, JsonPath
from converge_dsl.frontend import (
    GraphStyle,
    SpecHead,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
    required,
    tool_reference,
)
from converge_dsl.sandbox import CONTEXT_NAMES

if TYPE_CHECKING:
    from converge_dsl.frontend import PipelineFacts

TURN_NAMES = CONTEXT_NAMES | {"goal", "turn", "conversation"}
# A summarizer prompt is rendered with the cleared span only (agents/_summarizer.py).
SUMMARY_NAMES = frozenset({"span"})

# The defaults of what an agent may leave out (the schema's descriptions state them).
DEFAULT_MAX_TURNS = 10
DEFAULT_CONTEXT_WINDOW = 8000
DEFAULT_THRESHOLD = 0.8
DEFAULT_EMERGENCY = 0.95
TOOL_NAMES = ("context.read", "context.propose", "finish")  # every tool: `tools` left out
_BUDGET = (
    "max_calls",
    "max_input_chars",
    "timeout_s",
    "expected_summary_bytes",
    "cost_floor_multiple",
)


class AgentContributor(Record):
    """One `contributors[]` entry at `path`: `kind` (reminder, plan, facts, template),
    `name` (None when not written: `label` is then `<kind>-<index>`), `role`,
    `persist`, `every` (reminders), `keys` (plan and facts) and `template` (a
    reminder's `text`, a template contributor's `template`; None for the others)."""

    _fields = ("path", "kind", "name", "role", "persist", "every", "keys", "template")
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (the fields, in order)
        self,
        path: JsonPath,
        kind: str,
        name: str | None,
        role: str,
        persist: bool,
        every: int,
        keys: tuple[str, ...],
        template: str | None,
    ) -> None:
        self.path = path
        self.kind = kind
        self.name = name
        self.role = role
        self.persist = persist
        self.every = every
        self.keys = keys
        self.template = template

    @property
    def label(self) -> str:
        """Its name, or `<kind>-<index>` when it has none."""
        return self.name or f"{self.kind}-{self.path[-1]}"

    @property
    def template_field(self) -> str:
        """The field its template is written in."""
        return "text" if self.kind == "reminder" else "template"


class AgentSummarizer(Record):
    """The `summarizer` at `path`: the model of its side calls, the age of the turns it
    clears, its `prompt` template (None: the built-in one) and its `budget`."""

    _fields = ("path", "model", "clear_turns_older_than", "prompt", "budget")
    __slots__ = _fields

    def __init__(
        self,
        path: JsonPath,
        model: str,
        clear_turns_older_than: int,
        prompt: str | None,
        budget: SummaryBudget,
    ) -> None:
        self.path = path
        self.model = model
        self.clear_turns_older_than = clear_turns_older_than
        self.prompt = prompt
        self.budget = budget


class AgentCompaction(Record):
    """`compaction` at `path`: its `threshold` and `emergency`, fractions of the window."""

    _fields = ("path", "threshold", "emergency")
    __slots__ = _fields

    def __init__(self, path: JsonPath, threshold: float, emergency: float) -> None:
        self.path = path
        self.threshold = threshold
        self.emergency = emergency


class AgentToolChoice(Record):
    """`tool_choice`: the `choice` (auto, required or a tool's name), written at `path`,
    and whether it holds for the first turn of each execution only."""

    _fields = ("path", "choice", "first_only")
    __slots__ = _fields

    def __init__(self, path: JsonPath, choice: str, first_only: bool) -> None:
        self.path = path
        self.choice = choice
        self.first_only = first_only


class AgentSuggestorSpec(SuggestorSpec):
    """An `agent` suggestor: a turn loop on `model` towards `goal` (a template), proposing
    to its `target`, with its `tools`, `contributors`, `summarizer` (None: stubs),
    `tool_choice` (None: the provider's), `max_turns`, `context_window` and
    `compaction` (defaults filled in)."""

    _fields = (
        *SuggestorSpec._fields,
        "model",
        "target",
        "goal",
        "max_turns",
        "context_window",
        "compaction",
        "tools",
        "tool_choice",
        "contributors",
        "summarizer",
    )
    __slots__ = _fields[len(SuggestorSpec._fields) :]

    def __init__(
        self,
        head: SpecHead,
        *,
        model: str,
        target: str,
        goal: str,
        max_turns: int,
        context_window: int,
        compaction: AgentCompaction,
        tools: tuple[str, ...],
        tool_choice: AgentToolChoice | None,
        contributors: tuple[AgentContributor, ...],
        summarizer: AgentSummarizer | None,
        missing: tuple[JsonPath, ...] = (),
    ) -> None:
        super().__init__(*head, missing=missing)
        self.model = model
        self.target = target
        self.goal = goal
        self.max_turns = max_turns
        self.context_window = context_window
        self.compaction = compaction
        self.tools = tools
        self.tool_choice = tool_choice
        self.contributors = contributors
        self.summarizer = summarizer

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        found: list[tuple[JsonPath, object, frozenset[str], bool]] = [
            (("goal",), self.goal, CONTEXT_NAMES, False)
        ]
        found += [
            (("contributors", j, c.template_field), c.template, TURN_NAMES, False)
            for j, c in enumerate(self.contributors)
        ]
        if self.summarizer is not None:
            found.append((("summarizer", "prompt"), self.summarizer.prompt, SUMMARY_NAMES, False))
        return (*super().templates(extra), *self.sites(extra, found))

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        contributed = tuple(
            ((*c.path, "keys", i), key) for c in self.contributors for i, key in enumerate(c.keys)
        )
        own = self.references("target", self.target)
        return (*self.dependency_references(), *own, *contributed)

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        summarizer = self.summarizer
        side = () if summarizer is None else (((*summarizer.path, "model"), summarizer.model),)
        return (*self.references("model", self.model), *side)

    def contributor_names(self) -> tuple[str, ...]:
        """Each contributor as `name (kind)`, its default name `<kind>-<index>`."""
        return tuple(f"{c.label} ({c.kind})" for c in self.contributors)

    def side_reads(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(key for c in self.contributors for key in c.keys))

    def side_calls(self) -> tuple[tuple[str, str], ...]:
        summarizer = self.summarizer
        return () if summarizer is None else (("summarizer", summarizer.model),)

    def tool_references(self) -> tuple[tuple[JsonPath, str, str], ...]:
        return tuple(
            ((*self.path, "tools", i), *reference)
            for i, name in enumerate(self.tools)
            if (reference := tool_reference(name)) is not None
        )

    def parts(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        found = [("tools", self.tools), ("contributors", self.contributor_names())]
        return tuple((label, items) for label, items in found if items)

    def details(self) -> tuple[tuple[str, str], ...]:
        # `Names`: texts that name things, which a page shows as it shows names
        found: list[tuple[str, str]] = [("tools", Names(self.tools))]
        if self.contributors:
            found.append(("contributors", Names(self.contributor_names())))
        summarizer = self.summarizer
        if summarizer is not None:
            older = summarizer.clear_turns_older_than
            after = f", clears turns older than {older}"
            found.append(("summarizer", Names((summarizer.model,), "", "model ", after)))
        return (*super().details(), *tuple(found))


def _contributor(
    path: JsonPath, data: Mapping[str, Any], missing: list[JsonPath]
) -> AgentContributor:
    kind = str(required(data, "kind", path, missing, ""))
    name = data.get("name")
    return AgentContributor(
        path,
        kind,
        None if name is None else str(name),
        str(data.get("role", "user")),
        bool(data.get("persist", True)),
        int(data.get("every", 0)),
        tuple(str(k) for k in data.get("keys", ())),
        _text(data.get("text" if kind == "reminder" else "template")),
    )


def _summarizer(
    path: JsonPath, data: Mapping[str, Any], missing: list[JsonPath]
) -> AgentSummarizer:
    budget: Mapping[str, Any] = required(data, "budget", path, missing, {})
    where: JsonPath = (*path, "budget")
    numbers = {field: required(budget, field, where, missing, 0) for field in _BUDGET}
    return AgentSummarizer(
        path,
        str(required(data, "model", path, missing, "")),
        int(required(data, "clear_turns_older_than", path, missing, 0)),
        _text(data.get("prompt")),
        SummaryBudget(
            max_calls=int(numbers["max_calls"]),
            max_input_chars=int(numbers["max_input_chars"]),
            timeout_s=float(numbers["timeout_s"]),
            expected_summary_bytes=int(numbers["expected_summary_bytes"]),
            cost_floor_multiple=_number(numbers["cost_floor_multiple"]),
        ),
    )


def _number(value: Any) -> float:
    """A number of the (schema-valid) pipeline: an integer stays one, with all its digits."""
    return value if isinstance(value, int) else float(value)


def _tool_choice(path: JsonPath, raw: object) -> AgentToolChoice | None:
    """The (schema-valid) `tool_choice`: a value, or `{choice, turns}`."""
    if isinstance(raw, Mapping):
        return AgentToolChoice(
            (*path, "tool_choice", "choice"), str(raw["choice"]), raw.get("turns") == "first"
        )
    return None if raw is None else AgentToolChoice((*path, "tool_choice"), str(raw), False)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def parse_agent_spec(path: JsonPath, raw: Mapping[str, Any]) -> AgentSuggestorSpec:
    """The typed spec of an agent mapping (schema-valid, or a pack's template)."""
    missing: list[JsonPath] = []
    target = str(raw.get("target", ""))
    compaction: Mapping[str, Any] = raw.get("compaction") or {}
    summarizer = raw.get("summarizer")
    tools = raw.get("tools")
    return AgentSuggestorSpec(
        SuggestorSpec.head("agent", path, raw, (target,)),
        model=str(required(raw, "model", path, missing, "")),
        target=target,
        goal=str(required(raw, "goal", path, missing, "")),
        max_turns=int(raw.get("max_turns", DEFAULT_MAX_TURNS)),
        context_window=int(raw.get("context_window", DEFAULT_CONTEXT_WINDOW)),
        compaction=AgentCompaction(
            (*path, "compaction"),
            float(compaction.get("threshold", DEFAULT_THRESHOLD)),
            float(compaction.get("emergency", DEFAULT_EMERGENCY)),
        ),
        tools=TOOL_NAMES if tools is None else tuple(str(t) for t in tools),
        tool_choice=_tool_choice(path, raw.get("tool_choice")),
        contributors=tuple(
            _contributor((*path, "contributors", j), c, missing)
            for j, c in enumerate(raw.get("contributors") or ())
        ),
        summarizer=None
        if summarizer is None
        else _summarizer((*path, "summarizer"), summarizer, missing),
        missing=tuple(missing),
    )


def agent_specs(specs: Iterable[SuggestorSpec]) -> tuple[AgentSuggestorSpec, ...]:
    """The agents among `specs`, in order."""
    return tuple(spec for spec in specs if isinstance(spec, AgentSuggestorSpec))


def parse_agents(data: Mapping[str, Any]) -> tuple[AgentSuggestorSpec, ...]:
    """The typed agents of a (schema-valid) pipeline's data, in order (for `plan` and tests,
    which have no registry of every kind to parse the rest with)."""
    return tuple(
        parse_agent_spec(("suggestors", index), raw)
        for index, raw in enumerate(data.get("suggestors") or ())
        if raw.get("kind") == "agent"
    )


def unique_contributors(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Contributor names (default `<kind>-<index>`) are unique within an agent."""
    for spec in agent_specs(facts.specs):
        named = [((*c.path, "name"), c.label) for c in spec.contributors]
        yield from facts.duplicates(named, codes.DUPLICATE_CONTRIBUTOR, "contributor")


AGENT = SuggestorKind(
    "agent",
    "agentSuggestor",
    None,
    parse_agent_spec,
    (unique_contributors, "converge_dsl.agents._checks:agent_checks"),
    "converge_dsl.agents._agent:compile_agent",
    GraphStyle("#ffedd5", "#ea580c", "#7c2d12", "box", "agent"),
    operation="invoke_agent",
)
