"""The manifest's model records: one per adapter, with the account roster.

`model_spec` converts one `models.<name>` mapping and checks nothing: from a
schema-checked document the values have the schema's types, and the models
factory checks a hand-written configuration before it converts one
(docs/architecture.md §4).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend._located import Located, Number
from converge_dsl.frontend.document import SourceMap

# The `models.<name>` fields that name a file the model reads.
READ_FIELDS = ("script", "cassette")


class AccountSpec(Located):
    """One entry of a model's account roster: a label and the variable holding its API key."""

    _fields = ("name", "api_key_env", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self, name: str, api_key_env: str, path: JsonPath, source_map: SourceMap | None = None
    ) -> None:
        self.name = name
        self.api_key_env = api_key_env
        self.path = path
        self.source_map = source_map


class ModelSpec(Located):
    """A `models.<name>` entry; one subclass per adapter.

    Built by `model_spec`, which converts without checking: from a schema-checked
    document the values have the schema's types; the models factory checks a
    hand-written configuration before it converts one.
    """

    __slots__ = ()
    name: str
    adapter: str
    record: str | None

    @property
    def files(self) -> Mapping[str, str]:
        """Each field naming a file the model reads (`script`, `cassette`) -> the path written."""
        return {f: v for f in READ_FIELDS if isinstance(v := getattr(self, f, None), str)}

    @property
    def named_files(self) -> Mapping[str, str]:
        """Each field naming a file, read or written (`script`, `cassette`, `record`) -> path."""
        return {**self.files, **({"record": self.record} if isinstance(self.record, str) else {})}

    @property
    def details(self) -> tuple[tuple[str, str], ...]:
        """(field, value) of the fields that say what the model is, as the graph shows them."""
        return tuple(
            (f, str(v))
            for f in ("model", "base_url", "script")
            if (v := getattr(self, f, None)) is not None
        )


class ScriptedModelSpec(ModelSpec):
    """`adapter: scripted`: replies from a model script."""

    _fields = ("name", "adapter", "script", "record", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self,
        name: str,
        script: str,
        record: str | None,
        path: JsonPath,
        source_map: SourceMap | None = None,
    ) -> None:
        self.name = name
        self.adapter = "scripted"
        self.script = script
        self.record = record
        self.path = path
        self.source_map = source_map


class ReplayModelSpec(ModelSpec):
    """`adapter: replay`: answers from a recorded cassette."""

    _fields = ("name", "adapter", "cassette", "record", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self, name: str, cassette: str, path: JsonPath, source_map: SourceMap | None = None
    ) -> None:
        self.name = name
        self.adapter = "replay"
        self.cassette = cassette
        self.record: str | None = None
        self.path = path
        self.source_map = source_map


class HttpModelSpec(ModelSpec):
    """`adapter: openai` or `anthropic`: a provider over HTTP with an account roster.

    `accounts` is None when none are written (one keyless account); `numbers`
    holds the numeric settings written (`timeout_s`, `retries`, ...) by name.
    """

    _fields = (
        "name",
        "adapter",
        "base_url",
        "model",
        "accounts",
        "numbers",
        "stream",
        "structured_output",
        "max_connections",
        "limits",
        "record",
        "path",
        "source_map",
    )
    __slots__ = _fields

    def __init__(
        self,
        *,
        name: str,
        adapter: str,
        base_url: str,
        model: str,
        accounts: tuple[AccountSpec, ...] | None,
        numbers: Mapping[str, Number],
        stream: bool | None,
        structured_output: str | None,
        max_connections: int | None,
        limits: Mapping[str, int] | None,
        record: str | None,
        path: JsonPath,
        source_map: SourceMap | None = None,
    ) -> None:
        self.name = name
        self.adapter = adapter
        self.base_url = base_url
        self.model = model
        self.accounts = accounts
        self.numbers = numbers
        self.stream = stream
        self.structured_output = structured_output
        self.max_connections = max_connections
        self.limits = limits
        self.record = record
        self.path = path
        self.source_map = source_map


# The numeric settings of an HTTP model (`HttpModelSpec.numbers`).
HTTP_NUMBERS = (
    "timeout_s",
    "connect_timeout_s",
    "read_timeout_s",
    "max_retry_wait_s",
    "retries",
    "max_tokens",
    "temperature",
)


def model_spec(
    name: str, raw: Mapping[str, Any], path: JsonPath = (), source_map: SourceMap | None = None
) -> ModelSpec:
    """The typed record of one `models.<name>` entry; converts, checks nothing.

    An adapter other than scripted and replay reads as HTTP. Values are kept as
    written (the models factory checks a hand-written entry before converting it).
    """
    adapter = raw.get("adapter")
    record = raw.get("record")
    if adapter == "scripted":
        return ScriptedModelSpec(name, raw.get("script"), record, path, source_map)  # type: ignore[arg-type]
    if adapter == "replay":
        return ReplayModelSpec(name, raw.get("cassette"), path, source_map)  # type: ignore[arg-type]
    accounts = raw.get("accounts")
    roster = None
    if isinstance(accounts, list):
        roster = tuple(
            AccountSpec(a.get("name"), a.get("api_key_env"), (*path, "accounts", i), source_map)
            for i, a in enumerate(accounts)
        )
    return HttpModelSpec(
        name=name,
        adapter=str(adapter),
        base_url=raw.get("base_url"),  # type: ignore[arg-type]
        model=raw.get("model"),  # type: ignore[arg-type]
        accounts=roster,
        numbers=MappingProxyType({f: raw[f] for f in HTTP_NUMBERS if raw.get(f) is not None}),
        stream=raw.get("stream"),
        structured_output=raw.get("structured_output"),
        max_connections=raw.get("max_connections"),
        limits=raw.get("limits"),
        record=record,
        path=path,
        source_map=source_map,
    )


def roster_accounts(models: Iterable[ModelSpec]) -> Iterator[AccountSpec]:
    """Every account of the HTTP models' rosters, in model then roster order."""
    for model in models:
        if isinstance(model, HttpModelSpec):
            yield from model.accounts or ()
