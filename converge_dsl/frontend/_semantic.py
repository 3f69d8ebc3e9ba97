"""Semantic checks of a schema-valid pipeline: a registry of small functions.

A check is `Check = Callable[[PipelineFacts], Iterator[Diagnostic]]`: it reads
the facts (document, data, source map, declared keys/models/packs/inputs)
and yields diagnostics built with `facts.error(...)` / `facts.warning(...)`.
Checks run only on documents that passed the JSON Schema, so they may trust
the shapes the schema guarantees.

Adding a check is one line: define the function (here or in your own module)
and register it::

    from converge_dsl.frontend import CHECKS
    CHECKS.append(my_check)          # or decorate it with @check

Take the next free code in docs/errors.md (`CD2xx` errors, `CD3xx` warnings)
and document it there with an example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity, did_you_mean
from converge_dsl.frontend.document import LoadedDocument, SourceMap
from converge_dsl.keys import BUILTIN_KEYS

# Names every template and expression sees (DESIGN §2); extras per place below.
BASE_NAMES = frozenset({"facts", "proposals", "count", "has", "fact", "cycle", "inputs"})
ITEM_NAMES = BASE_NAMES | {"item", "index"}
TURN_NAMES = BASE_NAMES | {"goal", "turn", "conversation"}
# A summarizer prompt is rendered with the cleared span only (agents/_summarizer.py).
SUMMARY_NAMES = frozenset({"span"})


@dataclass(frozen=True)
class TemplateSite:
    """One template or expression in the pipeline and the names it may read."""

    path: JsonPath
    text: str
    expression: bool
    names: frozenset[str]


def suggestor_sites(
    path: JsonPath, s: Mapping[str, Any], extra: frozenset[str] = frozenset()
) -> list[TemplateSite]:
    """The templates and expressions of one suggestor body at `path`.

    `extra` names are readable everywhere in it (a pack template's `params`).
    """
    sites: list[TemplateSite] = []

    def add(where: JsonPath, value: Any, names: frozenset[str], expression: bool = False) -> None:
        if isinstance(value, str):
            sites.append(TemplateSite(where, value, expression, names | extra))

    add((*path, "when"), s.get("when"), BASE_NAMES, expression=True)
    for j, fact in enumerate(s.get("facts", ())):
        for field in ("id", "content"):
            add((*path, "facts", j, field), fact.get(field), BASE_NAMES)
    for j, emit in enumerate(s.get("emit", ())):
        for field in ("id", "content", "confidence"):
            add((*path, "emit", j, field), emit.get(field), BASE_NAMES)
    for field in ("system", "user"):
        add((*path, "prompt", field), s.get("prompt", {}).get(field), BASE_NAMES)
    if s.get("kind") == "llm":
        for field in ("id", "content", "confidence"):
            add((*path, "output", field), s.get("output", {}).get(field), ITEM_NAMES)
    add((*path, "goal"), s.get("goal"), BASE_NAMES)
    for j, contributor in enumerate(s.get("contributors", ())):
        for field in ("text", "template"):
            add((*path, "contributors", j, field), contributor.get(field), TURN_NAMES)
    add((*path, "summarizer", "prompt"), s.get("summarizer", {}).get("prompt"), SUMMARY_NAMES)
    return sites


@dataclass(frozen=True)
class PipelineFacts:
    """What checks read: the document plus indexes derived from it once."""

    document: LoadedDocument
    base_dir: Path | None = None  # folder of the pipeline file, for relative paths

    @property
    def data(self) -> Mapping[str, Any]:
        data: Mapping[str, Any] = self.document.data
        return data

    @property
    def source_map(self) -> SourceMap:
        return self.document.source_map

    @cached_property
    def declared_keys(self) -> frozenset[str]:
        """Built-in keys plus those under `keys:`."""
        return frozenset(BUILTIN_KEYS) | {k["name"] for k in self.data.get("keys", [])}

    @cached_property
    def models(self) -> frozenset[str]:
        return frozenset(self.data.get("models", {}))

    @cached_property
    def packs(self) -> frozenset[str]:
        return frozenset(self.data.get("packs", {}))

    @cached_property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.data.get("inputs", {}))

    @property
    def suggestors(self) -> Iterator[tuple[JsonPath, Mapping[str, Any]]]:
        """(path, suggestor) in registration order."""
        for index, suggestor in enumerate(self.data.get("suggestors", [])):
            yield ("suggestors", index), suggestor

    @cached_property
    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        """Every place that names a context key, with the key."""
        refs: list[tuple[JsonPath, str]] = []

        def many(path: JsonPath, keys: Any) -> None:
            refs.extend(((*path, i), key) for i, key in enumerate(keys or ()))

        for i, seed in enumerate(self.data.get("seeds", [])):
            if "key" in seed:
                refs.append((("seeds", i, "key"), seed["key"]))
        many(("promotion", "gated_keys"), self.data.get("promotion", {}).get("gated_keys"))
        for path, s in self.suggestors:
            many((*path, "dependencies"), s.get("dependencies"))
            for field in ("target", "input", "output") if s["kind"] == "pack" else ("target",):
                if field in s:
                    refs.append(((*path, field), s[field]))
            for j, emit in enumerate(s.get("emit", ())):
                refs.append(((*path, "emit", j, "key"), emit["key"]))
            for j, contributor in enumerate(s.get("contributors", ())):
                many((*path, "contributors", j, "keys"), contributor.get("keys"))
        return tuple(refs)

    @cached_property
    def produced_keys(self) -> frozenset[str]:
        """Keys that can ever hold facts (seeds, targets, emits, pack outputs, diagnostics)."""
        keys = {"diagnostic"}
        keys.update(seed.get("key", "seeds") for seed in self.data.get("seeds", []))
        for _, s in self.suggestors:
            kind = s["kind"]
            if kind == "seed":
                keys.add(s.get("target", "seeds"))
            elif kind == "rule":
                keys.update(emit["key"] for emit in s["emit"])
            elif kind == "pack":
                keys.add(s["output"])
            else:
                keys.add(s["target"])
        return frozenset(keys)

    @cached_property
    def templates(self) -> tuple[TemplateSite, ...]:
        """Every template and expression, with the names valid where it sits."""
        sites = [site for path, s in self.suggestors for site in suggestor_sites(path, s)]
        for k, invariant in enumerate(self.data.get("invariants", [])):
            path: JsonPath = ("invariants", k)
            sites.append(TemplateSite((*path, "check"), invariant["check"], True, BASE_NAMES))
            if isinstance(invariant.get("message"), str):
                sites.append(
                    TemplateSite((*path, "message"), invariant["message"], False, BASE_NAMES)
                )
        return tuple(sites)

    def error(
        self,
        code: str,
        message: str,
        path: JsonPath,
        *,
        hint: str | None = None,
        on_key: bool = False,
    ) -> Diagnostic:
        """An error located at `path` (at the key naming it with `on_key`)."""
        return self._at(code, message, path, hint=hint, on_key=on_key, severity=Severity.ERROR)

    def warning(
        self,
        code: str,
        message: str,
        path: JsonPath,
        *,
        hint: str | None = None,
        on_key: bool = False,
    ) -> Diagnostic:
        return self._at(code, message, path, hint=hint, on_key=on_key, severity=Severity.WARNING)

    def _at(
        self,
        code: str,
        message: str,
        path: JsonPath,
        *,
        hint: str | None,
        on_key: bool,
        severity: Severity,
    ) -> Diagnostic:
        span = self.source_map.key_span(path) if on_key else self.source_map.span(path)
        return Diagnostic.at(code, message, span, path=path, hint=hint, severity=severity)


Check = Callable[[PipelineFacts], Iterator[Diagnostic]]
CHECKS: list[Check] = []


def check(function: Check) -> Check:
    """Register `function` in `CHECKS` (order of registration = order of running)."""
    CHECKS.append(function)
    return function


def _suggest(word: str, candidates: frozenset[str] | set[str]) -> str | None:
    guess = did_you_mean(word, sorted(candidates))
    return f"did you mean {guess!r}?" if guess else None


def _duplicates(
    facts: PipelineFacts, items: Sequence[tuple[JsonPath, Any]], code: str, what: str
) -> Iterator[Diagnostic]:
    first: dict[str, JsonPath] = {}
    for path, name in items:
        if name in first:
            line = facts.source_map.span(first[name]).line
            yield facts.error(
                code,
                f"{what} {name!r} is defined twice",
                path,
                hint=f"the first one is on line {line}; names must be unique",
            )
        else:
            first[name] = path


@check
def unique_names(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Suggestor, invariant and declared-key names are unique; declared keys are not built in."""
    yield from _duplicates(
        facts,
        [((*p, "name"), s["name"]) for p, s in facts.suggestors],
        codes.DUPLICATE_NAME,
        "suggestor",
    )
    invariants = facts.data.get("invariants", [])
    yield from _duplicates(
        facts,
        [(("invariants", i, "name"), v["name"]) for i, v in enumerate(invariants)],
        codes.DUPLICATE_INVARIANT,
        "invariant",
    )
    declared = [(("keys", i, "name"), k["name"]) for i, k in enumerate(facts.data.get("keys", []))]
    yield from _duplicates(facts, declared, codes.DUPLICATE_KEY_DECLARATION, "key")
    for path, name in declared:
        if name in BUILTIN_KEYS:
            yield facts.error(
                codes.DUPLICATE_KEY_DECLARATION,
                f"key {name!r} is built in",
                path,
                hint="remove it from 'keys:'; built-in keys need no declaration",
            )


@check
def unique_contributors(facts: PipelineFacts) -> Iterator[Diagnostic]:
    for path, s in facts.suggestors:
        named = [
            ((*path, "contributors", j, "name"), c.get("name", f"{c['kind']}-{j}"))
            for j, c in enumerate(s.get("contributors", ()))
        ]
        yield from _duplicates(facts, named, codes.DUPLICATE_CONTRIBUTOR, "contributor")


@check
def known_keys(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Every key a suggestor reads or writes is built in or declared under `keys:`."""
    for path, key in facts.key_references:
        if key not in facts.declared_keys:
            yield facts.error(
                codes.UNKNOWN_CONTEXT_KEY,
                f"unknown context key {key!r}",
                path,
                hint=_suggest(key, facts.declared_keys) or f"declare it: keys: [{{name: {key}}}]",
            )


@check
def known_models(facts: PipelineFacts) -> Iterator[Diagnostic]:
    for path, s in facts.suggestors:
        for where in (("model",), ("summarizer", "model")):
            holder: Any = s
            for part in where[:-1]:
                holder = holder.get(part, {})
            model = holder.get(where[-1])
            if model is not None and model not in facts.models:
                yield facts.error(
                    codes.UNKNOWN_MODEL,
                    f"unknown model {model!r}",
                    (*path, *where),
                    hint=_suggest(model, facts.models) or "declare it under 'models:'",
                )


@check
def declared_packs(facts: PipelineFacts) -> Iterator[Diagnostic]:
    for path, s in facts.suggestors:
        if s["kind"] == "pack":
            pack = s["use"].split("/", 1)[0]
            if pack not in facts.packs:
                yield facts.error(
                    codes.UNDECLARED_PACK,
                    f"pack {pack!r} is not declared",
                    (*path, "use"),
                    hint=_suggest(pack, facts.packs)
                    or f"add it under 'packs:' ({pack}: \">=1.0\")",
                )


@check
def pack_specifiers(facts: PipelineFacts) -> Iterator[Diagnostic]:
    packs = facts.data.get("packs", {})
    if not packs:
        return
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    for name, spec in packs.items():
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            yield facts.error(
                codes.BAD_SPECIFIER,
                f"{spec!r} is not a PEP 440 version specifier",
                ("packs", name),
                hint='write e.g. ">=1.0,<2" or "==1.2.0"',
            )


@check
def model_files(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Scripts and replay cassettes exist next to the pipeline; scripts load as `run` loads them.

    A scripted model's script goes through the scripted adapter's own loader
    (`models._script.load_script_file`: strict YAML, `model-script.v1.json`,
    regexes that compile and cannot backtrack for hours), exactly as `run`
    loads it; that module imports neither the HTTP adapters nor the engine.
    Problems are located in the script file.
    """
    if facts.base_dir is None:
        return
    for name, model in facts.data.get("models", {}).items():
        for field in ("script", "cassette"):
            if field not in model:
                continue
            path = facts.base_dir / model[field]
            if not path.is_file():
                what = "is a folder, not a file" if path.is_dir() else "not found"
                yield facts.error(
                    codes.MISSING_FILE,
                    f"{field} file {model[field]!r} {what}",
                    ("models", name, field),
                    hint="paths are relative to the pipeline file",
                )
            elif field == "script" and model.get("adapter") == "scripted":
                display = (Path(facts.document.file).parent / model[field]).as_posix()
                yield from _script_problems(path, display)


def _script_problems(path: Path, display: str) -> Iterator[Diagnostic]:
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.models._script import load_script_file

    try:
        load_script_file(path, display=display)
    except PipelineInvalid as exc:
        yield from exc.diagnostics


@check
def templates_compile(facts: PipelineFacts) -> Iterator[Diagnostic]:
    from converge_dsl.frontend._templates import template_problems

    for site in facts.templates:
        yield from template_problems(
            facts.document,
            site.path,
            site.text,
            expression=site.expression,
            names=site.names,
            inputs=facts.inputs,
        )


@check
def reachable_suggestors(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Warn about suggestors none of whose dependencies can ever hold facts."""
    for path, s in facts.suggestors:
        deps = s.get("dependencies") or []
        if deps and not any(key in facts.produced_keys for key in deps):
            yield facts.warning(
                codes.NEVER_RUNS,
                f"suggestor {s['name']!r} never runs: nothing produces "
                + ", ".join(repr(k) for k in deps),
                (*path, "dependencies"),
                hint="add a seed or suggestor that targets one of these keys",
            )


@check
def unused_declarations(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Warn about models, declared keys and inputs that nothing uses."""
    used_models = set()
    for _, s in facts.suggestors:
        used_models.add(s.get("model"))
        used_models.add(s.get("summarizer", {}).get("model"))
        if s["kind"] == "pack":
            used_models.add("default")  # pack llm/agent templates run on model `default`
    for name in sorted(facts.models - used_models):
        yield facts.warning(
            codes.UNUSED_MODEL,
            f"model {name!r} is never used",
            ("models", name),
            on_key=True,
            hint="remove it, or use it in an llm or agent suggestor",
        )
    texts = " ".join(site.text for site in facts.templates)
    referenced = {key for _, key in facts.key_references}
    for i, key in enumerate(facts.data.get("keys", [])):
        name = key["name"]
        if name not in referenced and name not in texts:
            yield facts.warning(
                codes.UNUSED_KEY,
                f"key {name!r} is declared but never used",
                ("keys", i, "name"),
                hint="remove it, or read or write it",
            )
    for name in sorted(facts.inputs):
        if name not in texts:
            yield facts.warning(
                codes.UNUSED_INPUT,
                f"input {name!r} is never read",
                ("inputs", name),
                on_key=True,
                hint=f"read it as '{{{{ inputs.{name} }}}}', or remove it",
            )


@check
def agent_checks(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """The agents' own checks (CD4xx), imported only for pipelines that have an agent."""
    if any(s["kind"] == "agent" for _, s in facts.suggestors):
        from converge_dsl.agents._checks import agent_diagnostics

        yield from agent_diagnostics(facts.data, facts.source_map)


@check
def pack_checks(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Lock and pack-suggestor checks (CD5xx), only for pipelines that use packs."""
    if facts.packs or any(s["kind"] == "pack" for _, s in facts.suggestors):
        from converge_dsl.packs._checks import check_pipeline_packs

        pipeline = None
        if facts.base_dir is not None:
            pipeline = facts.base_dir / Path(facts.document.file).name
        yield from check_pipeline_packs(facts.document, pipeline=pipeline)


def semantic_diagnostics(facts: PipelineFacts) -> list[Diagnostic]:
    """Run every registered check."""
    return [diagnostic for run in CHECKS for diagnostic in run(facts)]
