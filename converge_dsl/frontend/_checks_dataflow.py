"""Semantic checks of the data flow: what templates read, against keys, dependencies and runs.

Every template and expression's key reads (`_dataflow.reads`, once per text) are
held against what the pipeline declares and what its suggestors write:

- `key_reads`: a key read by name is built in or declared (CD250, at the key's
  characters inside the string, with "did you mean"); a key named at run time
  is a note that the analysis stops there (CD251), never a guess.
- `dependency_reads`: a suggestor with dependencies that reads a key it is not
  re-run on is warned (CD252), except a key it writes itself (the guard of the
  idempotency contract: `not has('evaluations')` in the suggestor that writes
  `evaluations`) and a key its `when` reads only as a stop (`not has('risks')`,
  `count('risks') < 3`: facts only grow, so a re-run could only turn it off,
  `_dataflow.stop_guards`); `dependencies: auto` cannot drift.
- `unproduced_reads`: the one rule for keys nothing writes (no seed, no
  suggestor's target): a suggestor none of whose dependencies can hold a fact
  never runs (CD300); a template of a suggestor or invariant that reads such a
  key otherwise is warned where it reads it (CD253).
- `same_id_other_content`: two emits (seeds, rule emits, pipeline seeds) with one
  literal id into one key and other literal content or constant data: whichever
  comes second is a conflict that stops the run (CD256).
- `refires_on_own_output`: a suggestor with a `when` that writes a key it is
  re-run on, whose emit reads that key while its `when` does not (no guard),
  or one run every cycle (no dependencies) whose emit reads `cycle`: each run
  proposes another fact, or conflicts with its last one (CD257). A `when` that
  reads `cycle` is a bound.

Where the analysis cannot decide (a key named at run time, data not constant),
it says nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity, SourceSpan, did_you_mean
from converge_dsl.frontend._dataflow import KeyRead, read_span, reads, stop_guards, word_span
from converge_dsl.frontend._facts import PipelineFacts
from converge_dsl.frontend._kinds import SuggestorSpec, TemplateSite

_MARKERS = ("{{", "{%", "{#")


def _located(
    facts: PipelineFacts,
    site: TemplateSite,
    read: KeyRead,
    nth: int,
    *,
    code: str,
    message: str,
    hint: str,
    severity: Severity = Severity.WARNING,
) -> Diagnostic:
    span = read_span(facts.document, site.path, site.text, read, nth)
    return Diagnostic.at(code, message, span, path=site.path, hint=hint, severity=severity)


def _counted(found: tuple[KeyRead, ...]) -> Iterator[tuple[KeyRead, int]]:
    """Each read with how many equal reads came before it in its template."""
    seen: dict[KeyRead, int] = {}
    for read in found:
        nth = seen.get(read, 0)
        seen[read] = nth + 1
        yield read, nth


def _owner(owner: object) -> str:
    kind = "suggestor" if isinstance(owner, SuggestorSpec) else "invariant"
    return f"{kind} {getattr(owner, 'name', '')!r}"


def key_reads(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Keys read by name are built in or declared (CD250); a key named at run time is a note."""
    declared = facts.declared_keys
    guesses: dict[str, str | None] = {}
    for owner, sites in facts.owned_templates:
        for site in sites:
            for read, nth in _counted(reads(site.text, site.expression)):
                key = read.key
                if key is None:
                    if nth == 0:
                        yield _located(
                            facts,
                            site,
                            read,
                            0,
                            code=codes.KEY_NAMED_AT_RUN_TIME,
                            message=f"{read.written} names its key at run time: the keys, "
                            "dependencies and data it reads are not checked here",
                            hint=_named_later_hint(owner),
                            severity=Severity.NOTE,
                        )
                elif key not in declared:
                    if key not in guesses:
                        guesses[key] = did_you_mean(key, sorted(declared))
                    guess = guesses[key]
                    what = "expression" if site.expression else "template"
                    yield _located(
                        facts,
                        site,
                        read,
                        nth,
                        code=codes.UNKNOWN_READ_KEY,
                        message=f"{what} reads unknown context key {key!r}",
                        hint=f"did you mean {guess!r}?"
                        if guess
                        else f"declare it: keys: [{{name: {key}}}]",
                        severity=Severity.ERROR,
                    )


def _named_later_hint(owner: object) -> str:
    hint = "name the key with a literal, e.g. count('tickets'), to have it checked"
    if isinstance(owner, SuggestorSpec) and owner.auto_dependencies:
        hint += "; `dependencies: auto` cannot include it"
    return hint


def dependency_reads(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """A suggestor re-run on some keys reads only those and its own (CD252)."""
    declared, produced = facts.declared_keys, facts.produced_keys
    for owner, sites in facts.owned_templates:
        if not isinstance(owner, SuggestorSpec) or not owner.triggers():
            continue  # an invariant, or a candidate every cycle
        triggers = owner.triggers()
        allowed = {*triggers, *owner.targets}
        reported: set[str] = set()
        for site in sites:
            stops = stop_guards(site.text) if site.path[-1] == "when" else frozenset()
            for read, nth in _counted(reads(site.text, site.expression)):
                key = read.key
                if key is None or key in allowed or key in reported or key in stops:
                    continue
                if key not in declared or key not in produced:
                    continue  # CD250 or CD253 says what is wrong with it
                reported.add(key)
                listed = ", ".join((*triggers, key))
                yield _located(
                    facts,
                    site,
                    read,
                    nth,
                    code=codes.READ_NOT_DEPENDENCY,
                    message=f"{owner.name!r} reads {key!r} but is not re-run when {key!r} "
                    f"changes: it decides on the {key!r} of its last run",
                    hint=f"add it to its dependencies ([{listed}]), or write `dependencies: auto`",
                )


def unproduced_reads(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Keys nothing writes: a suggestor that depends only on those never runs (CD300); a
    template that reads one otherwise is warned where it reads it (CD253)."""
    declared, produced = facts.declared_keys, facts.produced_keys
    for owner, sites in facts.owned_templates:
        said: set[str] = set()
        if isinstance(owner, SuggestorSpec):
            deps = owner.dependencies
            if deps and not any(key in produced for key in deps):
                said.update(deps)
                yield facts.warning(
                    codes.NEVER_RUNS,
                    f"suggestor {owner.name!r} never runs: nothing produces "
                    + ", ".join(repr(k) for k in deps),
                    (*owner.path, "dependencies"),
                    hint="add a seed or suggestor that targets one of these keys",
                )
        for site in sites:
            for read, nth in _counted(reads(site.text, site.expression)):
                key = read.key
                if key is None or key in produced or key not in declared or key in said:
                    continue
                said.add(key)
                guess = did_you_mean(key, sorted(produced - {"diagnostic"}))
                yield _located(
                    facts,
                    site,
                    read,
                    nth,
                    code=codes.READ_NEVER_WRITTEN,
                    message=f"{_owner(owner)} reads {key!r}, which no seed or suggestor "
                    f"writes: {read.written} never sees a fact",
                    hint=(f"did you mean {guess!r}? " if guess else "")
                    + f"write {key!r} (a seed, or a suggestor that targets it), or read a key "
                    "that is written",
                )


def _literal(text: object) -> str | None:
    """The text a literal template renders (less one trailing newline); None for a template."""
    if not isinstance(text, str) or any(marker in text for marker in _MARKERS) or "\r" in text:
        return None
    return text[:-1] if text.endswith("\n") else text


_UNKNOWN = object()  # data an expression computes


def _emits(facts: PipelineFacts) -> Iterator[tuple[str, JsonPath, str, Any, str, Any]]:
    """(who, path, key, id, content, data) of every fact proposed as written."""
    from converge_dsl.frontend._checks_data import constant

    for index, seed in enumerate(facts.data.get("seeds") or ()):
        item_id, content = _literal(seed.get("id")), _literal(seed.get("content"))
        if item_id is not None and content is not None:
            key = str(seed.get("key", "seeds"))
            yield "seeds", ("seeds", index), key, item_id, content, seed.get("data")
    for spec in facts.specs:
        proposals = spec.proposal_specs()
        if not proposals:
            continue
        data = {site.path: site for site in spec.data_sites()}
        for proposal in proposals:
            item_id, content = _literal(proposal.id), _literal(proposal.content)
            if item_id is None or content is None:
                continue
            site = data.get(proposal.path)
            value = None if site is None else site.value
            if site is not None and site.expression:
                value = constant(site.value, _UNKNOWN)
            yield spec.name, proposal.path, proposal.key, item_id, content, value


def same_id_other_content(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Two emits of one literal id into one key disagree on literal content or data (CD256)."""
    first: dict[tuple[str, str], tuple[str, JsonPath, str, Any]] = {}
    for who, path, key, item_id, content, data in _emits(facts):
        earlier = first.setdefault((key, item_id), (who, path, content, data))
        if earlier[1] == path:
            continue
        other, where, content_before, data_before = earlier
        if content == content_before and (
            data is _UNKNOWN or data_before is _UNKNOWN or data == data_before
        ):
            continue
        what = "content" if content != content_before else "data"
        line = facts.source_map.span(where).line
        by = "twice" if other == who else f"as {other!r} does (line {line})"
        yield facts.warning(
            codes.SAME_ID_OTHER_CONTENT,
            f"{who!r} proposes id {item_id!r} to key {key!r} {by}, with other {what}: "
            "whichever comes second is a conflict that stops the run",
            (*path, "id"),
            hint=f"give one of them another id, or the same content and data (line {line})",
        )


def refires_on_own_output(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """A suggestor re-run on its own output (or every cycle) whose emit changes each time,
    with no guard in its `when` (CD257)."""
    for spec in facts.specs:
        proposals = spec.proposal_specs()
        if spec.when is None or not proposals:
            continue  # without `when`, the idempotent default fires once
        guard = reads(spec.when, True)
        if any(read.key is None for read in guard) or "cycle" in _names(spec.when, True):
            continue  # a guard the analysis cannot see through, or one bounded by cycles
        guarded = {read.key for read in guard}
        triggers = spec.triggers()
        sites = {site.path: site for site in spec.templates()}
        reported: set[str] = set()
        for proposal in proposals:
            key = proposal.key
            if key in guarded or key in reported or (triggers and key not in triggers):
                continue
            found = _changing(facts, sites, proposal.path, key, every_cycle=not triggers)
            if found is None:
                continue
            span, path, what = found
            reported.add(key)
            rerun = f"is re-run when {key!r} changes" if triggers else "is a candidate every cycle"
            yield Diagnostic.at(
                codes.REFIRES_ON_OWN_OUTPUT,
                f"{spec.name!r} writes {key!r}, {rerun}, and its {proposal.label} reads {what}: "
                "each run proposes another fact (or conflicts with its last one), so the run "
                "stops only at max_cycles",
                span,
                path=path,
                hint=f"guard it: make its `when` read {key!r} (e.g. `not has({key!r})`) or "
                "`cycle`, or give it dependencies it does not write",
                severity=Severity.WARNING,
            )


def _names(text: str, expression: bool) -> frozenset[str]:
    from converge_dsl.frontend._templates import names_read

    return names_read(text, expression=expression)


def _changing(
    facts: PipelineFacts,
    sites: dict[JsonPath, TemplateSite],
    path: JsonPath,
    key: str,
    *,
    every_cycle: bool,
) -> tuple[SourceSpan, JsonPath, str] | None:
    """Where the id, content or data of the emit at `path` first reads `key` (or `cycle`,
    for a suggestor run every cycle): (span, path, what it reads)."""
    for field in ("id", "content", "data"):
        site = sites.get((*path, field))
        if site is None:
            continue
        for read, nth in _counted(reads(site.text, site.expression)):
            if read.key == key:
                span = read_span(facts.document, site.path, site.text, read, nth)
                return span, site.path, repr(key)
        if every_cycle and "cycle" in _names(site.text, site.expression):
            return word_span(facts.document, site.path, site.text, "cycle"), site.path, "`cycle`"
    return None
