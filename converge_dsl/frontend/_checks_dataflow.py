"""Semantic checks of the data flow: what templates read, against keys, dependencies and runs.

Every template and expression's key reads (`_dataflow.reads`, once per text) are
held against what the pipeline declares and what its suggestors write:

- `key_flow`, one pass over the reads of every suggestor and invariant:
  - a key read by name is built in or declared (CD250, at the key's characters
    inside the string, with "did you mean"); a key named at run time is a note
    that the analysis stops there (CD251), never a guess;
  - the one rule for keys nothing writes (no seed, no suggestor's target): a
    suggestor none of whose dependencies can hold a fact never runs (CD300); a
    template that reads such a key otherwise is warned where it reads it (CD253);
  - a suggestor with dependencies that reads a key it is not re-run on is warned
    (CD252), except a key it writes itself (the guard of the idempotency
    contract: `not has('evaluations')` in the suggestor that writes
    `evaluations`) and a key its `when` reads only as a stop (`not has('risks')`,
    `count('risks') < 3`: facts only grow, so a re-run could only turn it off;
    `_dataflow.stop_guards`). `dependencies: auto` cannot drift.
- `refused_ids`: a literal fact id (a seed's, a rule's emit) that cannot name a fact
  (`converge_dsl._fact_ids`: a NUL byte, a control or hidden character, a `..`
  segment between slashes), which the run's gate would reject (CD272).
- `same_id_other_content`: two emits (seeds, rule emits, pipeline seeds) with one
  literal id into one key and other literal content or constant data: whichever
  comes second is a conflict that stops the run (CD256).
- `refires_on_own_output`: a suggestor with a `when` that writes a key it is
  re-run on, whose emit reads that key while its `when` does not (no guard),
  or one run every cycle (no dependencies) whose emit reads `cycle`: each run
  proposes another fact, or conflicts with its last one (CD257). A `when` that
  reads `cycle` is a bound.

`bound_template_reads` holds a pack's template suggestor, as a pipeline binds it
(`dependencies`, else its `input`), to the same rules (the pack checks call it).

Where the analysis cannot decide (a key named at run time, data not constant),
it says nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from converge_dsl import codes
from converge_dsl._escapes import HIDDEN, quoted, written, yaml_scalar
from converge_dsl.diagnostics import (
    Diagnostic,
    JsonPath,
    Severity,
    SourceSpan,
    did_you_mean,
    suggestion,
)
from converge_dsl.frontend._dataflow import (
    KeyRead,
    ordinals,
    read_span,
    reads,
    stop_guards,
    word_span,
)
from converge_dsl.frontend._facts import PipelineFacts
from converge_dsl.frontend._jinja_strings import spellings
from converge_dsl.frontend._kinds import SuggestorSpec, TemplateSite
from converge_dsl.frontend.document import LoadedDocument

_MARKERS = ("{{", "{%", "{#")


def _located(
    doc: LoadedDocument,
    site: TemplateSite,
    found: tuple[KeyRead, ...],
    index: int,
    *,
    code: str,
    message: str,
    hint: str,
    severity: Severity = Severity.WARNING,
) -> Diagnostic:
    span = read_span(doc, site.path, site.text, found[index], _nth(site, index))
    return Diagnostic.at(code, message, span, path=site.path, hint=hint, severity=severity)


def _nth(site: TemplateSite, index: int) -> int:
    """How many reads equal to the template's `index`th come before it (counted once per
    template, and only for a finding: the common case hashes nothing)."""
    return ordinals(site.text, site.expression)[index]


def _owner(owner: object) -> str:
    kind = "suggestor" if isinstance(owner, SuggestorSpec) else "invariant"
    return f"{kind} {quoted(getattr(owner, 'name', ''))}"


def key_flow(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """One pass over every template's key reads: unknown keys (CD250), keys named at run
    time (CD251), keys nothing writes (CD300, CD253) and reads that are no dependency
    (CD252), each key reported once per suggestor or invariant."""
    declared, produced = facts.declared_keys, facts.produced_keys
    guesses: dict[str, str | None] = {}
    for owner, sites in facts.owned_templates:
        said: set[str] = set()
        spec = owner if isinstance(owner, SuggestorSpec) else None
        never = spec is not None and _never_runs(spec, produced)
        if never and spec is not None:
            said.update(spec.dependencies)
            yield facts.warning(
                codes.NEVER_RUNS,
                f"suggestor {quoted(spec.name)} never runs: nothing produces "
                + ", ".join(quoted(k) for k in spec.dependencies),
                (*spec.path, "dependencies"),
                hint="add a seed or suggestor that targets one of these keys",
            )
        triggers = spec.triggers() if spec is not None and not never else ()
        # (a suggestor that never runs has no dependency to miss)
        allowed = {*triggers, *spec.targets} if spec is not None and triggers else None
        for site in sites:
            found = reads(site.text, site.expression)
            stops: frozenset[str] | None = None
            for index, read in enumerate(found):
                key = read.key
                if key is None:
                    if _nth(site, index) == 0:
                        yield _named_later(facts, owner, site, found, index)
                elif key not in declared:
                    if key not in guesses:
                        guesses[key] = did_you_mean(key, sorted(declared))
                    yield _unknown(facts.document, site, found, index, guesses[key])
                elif key in said:
                    continue
                elif key not in produced:
                    said.add(key)
                    yield _never_written(facts, owner, site, found, index)
                elif spec is not None and allowed is not None and key not in allowed:
                    if stops is None:
                        stops = stop_guards(site.text) if site.path[-1] == "when" else frozenset()
                    if key not in stops:
                        said.add(key)
                        yield _not_dependency(facts, spec, site, found, index)


def _never_runs(spec: SuggestorSpec, produced: frozenset[str]) -> bool:
    """It has dependencies and nothing can write any of them."""
    deps = spec.dependencies
    return bool(deps) and not any(key in produced for key in deps)


def _named_later(
    facts: PipelineFacts,
    owner: object,
    site: TemplateSite,
    found: tuple[KeyRead, ...],
    index: int,
) -> Diagnostic:
    hint = "name the key with a literal, e.g. count('tickets'), to have it checked"
    if isinstance(owner, SuggestorSpec) and owner.auto_dependencies:
        hint += "; `dependencies: auto` cannot include it"
    return _located(
        facts.document,
        site,
        found,
        index,
        code=codes.KEY_NAMED_AT_RUN_TIME,
        message=f"{found[index].written} names its key at run time: the keys, dependencies "
        "and data it reads are not checked here",
        hint=hint,
        severity=Severity.NOTE,
    )


def _unknown(
    doc: LoadedDocument,
    site: TemplateSite,
    found: tuple[KeyRead, ...],
    index: int,
    guess: str | None,
) -> Diagnostic:
    key = found[index].key
    diagnostic = _located(
        doc,
        site,
        found,
        index,
        code=codes.UNKNOWN_READ_KEY,
        message=f"{'expression' if site.expression else 'template'} reads unknown context "
        f"key '{written(str(key), unprintable=True)}'",
        hint=suggestion(guess, unprintable=True)
        if guess
        else f"declare it: keys: [{{name: {yaml_scalar(str(key))}}}]",
        severity=Severity.ERROR,
    )
    # a hidden character, or a space that is not U+0020 (the message shows both escaped);
    # a flag `HIDDEN` matches whole is one piece, shown as it is
    noted = f"{HIDDEN}|[^\\S ]"
    pieces = (match.group() for match in re.finditer(noted, str(key)))
    unshown = [char for char in dict.fromkeys(pieces) if len(char) == 1]
    span = diagnostic.span
    if not unshown or span is None or span.line != span.end_line:
        return diagnostic
    location = doc.source_map.get(site.path)
    as_written = doc.line(span.line)[span.column - 1 : span.end_column - 1]
    sources: dict[str, dict[str, None]] = {}  # character -> the texts that write it
    for char, source in spellings(as_written, None if location is None else location.style):
        sources.setdefault(char, {})[source] = None
    spelled = "; ".join(_spelled(char, list(sources.get(char, ()))) for char in unshown)
    return diagnostic._replace(message=f"{diagnostic.message} ({spelled})")


def _spelled(char: str, sources: list[str]) -> str:
    """How the file writes `char`, a character the message shows escaped (a bidi or
    control character, a line or paragraph separator, a no-break space...), given the
    `sources` that write it in the key's source text: the character itself (which the
    excerpt shows escaped, `\\u202e`, and an editor may not show at all) and each escape
    of it (`\\u202E`, `\\x85`, `\\N`, `\\L`, `\\\\x1b`), which the user can search for."""
    escapes = [source for source in sources if source != char]
    itself = []
    if char in sources:
        hidden = " (invisible in most editors)" if escapes else ", invisible in most editors"
        itself = [f"the character itself{hidden}"]
    return f"U+{ord(char):04X} is written as {' and as '.join(itself + escapes) or 'an escape'}"


def unknown_reads(
    doc: LoadedDocument, site: TemplateSite, keys: frozenset[str]
) -> Iterator[Diagnostic]:
    """CD250 for each key `site` reads by name that is not among `keys` (a pack's template,
    located in its own file, against the keys of the pipeline that uses it)."""
    found = reads(site.text, site.expression)
    for index, read in enumerate(found):
        if read.key is not None and read.key not in keys:
            yield _unknown(doc, site, found, index, did_you_mean(read.key, sorted(keys)))


def _never_written(
    facts: PipelineFacts,
    owner: object,
    site: TemplateSite,
    found: tuple[KeyRead, ...],
    index: int,
) -> Diagnostic:
    read = found[index]
    guess = did_you_mean(str(read.key), sorted(facts.produced_keys - {"diagnostic"}))
    named = quoted(str(read.key))
    return _located(
        facts.document,
        site,
        found,
        index,
        code=codes.READ_NEVER_WRITTEN,
        message=f"{_owner(owner)} reads {named}, which no seed or suggestor writes: "
        f"{read.written} never sees a fact",
        hint=(suggestion(guess) + " " if guess else "")
        + f"write {named} (a seed, or a suggestor that targets it), or read a key that "
        "is written",
    )


def _not_dependency(
    facts: PipelineFacts,
    owner: SuggestorSpec,
    site: TemplateSite,
    found: tuple[KeyRead, ...],
    index: int,
) -> Diagnostic:
    key = str(found[index].key)
    listed = ", ".join((*owner.triggers(), key))
    return _located(
        facts.document,
        site,
        found,
        index,
        code=codes.READ_NOT_DEPENDENCY,
        message=f"{quoted(owner.name)} reads {quoted(key)} but is not re-run when {quoted(key)} "
        f"changes: it decides on the {quoted(key)} of its last run",
        hint=f"add it to its dependencies ([{listed}]), or write `dependencies: auto`",
    )


def _literal(text: object) -> str | None:
    """The text a template renders (less one trailing newline) when it is the same every
    time: no Jinja syntax, or only `{{ }}` blocks of one text or integer literal
    (`n-{{ 1 }}`); None for any other template."""
    if not isinstance(text, str) or "\r" in text:
        return None
    if any(marker in text for marker in _MARKERS):
        text = _constant_blocks(text)
        if text is None:
            return None
    return text[:-1] if text.endswith("\n") else text


def _constant_blocks(text: str) -> str | None:
    """`text` with each `{{ }}` replaced by its literal, when each holds one, else None."""
    from converge_dsl.frontend._fastjinja import BLOCK, parsed
    from converge_dsl.frontend._mininodes import Const, Slot

    trees = parsed(text, expression=False)  # None for statements, comments, other syntax
    if not trees:
        return None
    values: list[str] = []
    for _, tree, literals in trees:
        if type(tree) is not Const or not isinstance(tree.value, Slot):
            return None
        value = literals[tree.value.index]
        if not isinstance(value, str | int) or isinstance(value, bool):
            return None  # a float's text is Python's, not the one written
        values.append(str(value))
    rendered = iter(values)
    return BLOCK.sub(lambda _: next(rendered), text)


_UNKNOWN = object()  # data an expression computes


def _emits(facts: PipelineFacts) -> Iterator[tuple[str, JsonPath, str, str, str, Any]]:
    """(who, path, key, id, content, data) of every fact proposed with a literal id and
    content; data is `_UNKNOWN` where an expression computes it (constant ones are read).
    A pipeline seed's are the manifest's, the values the run proposes: the text as YAML
    gives it (a block scalar `|` keeps its last line break), never rendered; an object
    as content read as the run reads it (`text_and_data`: its JSON text, and the data)."""
    for seed in facts.manifest.seeds:
        text, value = seed.content, seed.data
        if not isinstance(text, str):  # the legacy object form: the engine only then
            from converge_dsl.engine.types import text_and_data

            text, value = text_and_data(text, value)
        yield "seeds", seed.path, seed.key, seed.id, text, value
    for spec in facts.specs:
        data: dict[JsonPath, Any] | None = None
        for proposal in spec.proposal_specs():
            item_id = _literal(proposal.id)
            content = _literal(proposal.content) if item_id is not None else None
            if item_id is None or content is None:
                continue
            if data is None:  # only for a suggestor with a literal emit
                data = {site.path: site for site in spec.data_sites()}
            site = data.get(proposal.path)
            value = None if site is None else site.value
            if site is not None and site.expression:
                from converge_dsl.frontend._checks_data import constant

                value = constant(site.value, _UNKNOWN)
            yield spec.name, proposal.path, proposal.key, item_id, content, value


def refused_ids(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """A literal fact id the run's gate would refuse (CD272): a pipeline seed's id as
    written (the run does not render it), a seed suggestor's or a rule emit's as its
    template renders when it is constant."""
    from converge_dsl._fact_ids import id_problem, written_id

    ids: list[tuple[JsonPath, str | None]] = [((*s.path, "id"), s.id) for s in facts.manifest.seeds]
    for spec in facts.specs:
        ids.extend(((*p.path, "id"), _literal(p.id)) for p in spec.proposal_specs())
    for path, item_id in ids:
        if item_id is None or (problem := id_problem(item_id)) is None:
            continue
        hint = "write an id of visible characters, with no '..' path segment"
        if item_id.endswith("\n"):
            hint += _line_break_hint(facts.document, path)
        yield facts.error(
            codes.FACT_ID_REFUSED,
            f"fact id '{written_id(item_id)}' {problem}: the run's gate would reject it",
            path,
            hint=hint,
        )


def _line_break_hint(doc: LoadedDocument, path: JsonPath) -> str:
    """What makes the id at `path` end in a line break, for its scalar's style."""
    location = doc.source_map.get(path)
    style = None if location is None else location.style
    if location is not None and style in ("|", ">"):
        span = location.span
        header = re.match(r"[|>][1-9]?[+-]?[1-9]?", doc.line(span.line)[span.column - 1 :])
        indicator = style if header is None else header.group()
        if "+" in indicator:
            return (
                f" (a block scalar `{indicator}` keeps every line break at its end;"
                f" `{style}-` drops them)"
            )
        return f" (a block scalar `{indicator}` keeps its last line break; `{style}-` drops it)"
    if style == '"':
        return " (the quoted string ends in a line break, `\\n`: remove it)"
    return " (it ends in a line break: remove it)"


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
        by = "twice" if other == who else f"as '{written(other)}' does (line {line})"
        hint = f"give one of them another id, or the same content and data (line {line})"
        if what == "content" and content.rstrip("\n") == content_before.rstrip("\n"):
            longer = path if len(content) > len(content_before) else where
            hint += _line_break_note(facts.document, (*longer, "content"))
        if what == "content":
            hint += _unrendered_note(facts, ((path, content), (where, content_before)))
        yield facts.warning(
            codes.SAME_ID_OTHER_CONTENT,
            f"'{written(who)}' proposes id '{written(item_id)}' to key '{written(key)}' {by}, "
            f"with other {what}: "
            "whichever comes second is a conflict that stops the run",
            (*path, "id"),
            hint=hint,
        )


def _unrendered_note(facts: PipelineFacts, emits: tuple[tuple[JsonPath, str], ...]) -> str:
    """A note for a pipeline seed among `emits` (path, content) whose content holds
    template syntax: the run proposes it as written, never rendered."""
    for path, content in emits:
        if path[0] == "seeds" and any(marker in content for marker in _MARKERS):
            line = facts.source_map.span((*path, "content")).line
            return (
                f"; a pipeline seed is never rendered: its content at line {line} is proposed "
                "as written, `{{ }}` and all (a seed suggestor's is rendered)"
            )
    return ""


def _line_break_note(doc: LoadedDocument, path: JsonPath) -> str:
    """Two contents that differ only in line breaks at their end: which one has more (a
    pipeline seed's is the text as written; a template's output drops one), and why."""
    line = doc.source_map.span(path).line
    return f"; the content at line {line} ends in a line break the other lacks" + (
        _line_break_hint(doc, path)
    )


def refires_on_own_output(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """A suggestor re-run on its own output (or every cycle) whose emit changes each time,
    with no guard in its `when` (CD257)."""
    for spec, owned in facts.owned_templates:
        if not isinstance(spec, SuggestorSpec) or spec.when is None:
            continue  # an invariant; without `when`, the idempotent default fires once
        triggers = spec.triggers()
        if triggers and not any(key in triggers for key in spec.targets):
            continue  # not re-run on what it writes
        proposals = spec.proposal_specs()
        if not proposals:
            continue
        guard = reads(spec.when, True)
        if any(read.key is None for read in guard) or "cycle" in _names(spec.when, True):
            continue  # a guard the analysis cannot see through, or one bounded by cycles
        guarded = {read.key for read in guard}
        sites = {site.path: site for site in owned}
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
            named = quoted(key)
            rerun = f"is re-run when {named} changes" if triggers else "is a candidate every cycle"
            yield Diagnostic.at(
                codes.REFIRES_ON_OWN_OUTPUT,
                f"{quoted(spec.name)} writes {named}, {rerun}, and its {proposal.label} reads "
                f"{what}: "
                "each run proposes another fact (or conflicts with its last one), so the run "
                "stops only on a budget (max_cycles, max_facts)",
                span,
                path=path,
                hint=f"guard it: make its `when` read {named} (e.g. `not has({named})`) or "
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
        found = reads(site.text, site.expression)
        for index, read in enumerate(found):
            if read.key == key:
                span = read_span(facts.document, site.path, site.text, read, _nth(site, index))
                return span, site.path, quoted(key)
        if every_cycle and "cycle" in _names(site.text, site.expression):
            return word_span(facts.document, site.path, site.text, "cycle"), site.path, "`cycle`"
    return None


def bound_template_reads(
    facts: PipelineFacts, path: JsonPath, spec: SuggestorSpec, use: str
) -> Iterator[Diagnostic]:
    """The key reads of a pack's template suggestor as the pipeline binds it (`spec`: the
    suggestor it stands for, `path`: the pipeline's `kind: pack` entry): keys nothing in
    the pipeline writes (CD253) and keys the binding is not re-run on (CD252), located at
    its `use` (the pack's own files name the template; unknown keys are reported there)."""
    triggers = spec.triggers()
    allowed = {*triggers, *spec.targets}
    declared, produced = facts.declared_keys, facts.produced_keys
    said: set[str] = set()
    for site in spec.templates(frozenset({"params"})):
        stops = stop_guards(site.text) if site.path[-1] == "when" else frozenset()
        for read in reads(site.text, site.expression):
            key = read.key
            if key is None or key in said or key not in declared:
                continue
            if key not in produced:
                said.add(key)
                yield facts.warning(
                    codes.READ_NEVER_WRITTEN,
                    f"{quoted(spec.name)} ({use}) reads {quoted(key)} in its pack template "
                    f"({read.written}), which no seed or suggestor writes",
                    (*path, "use"),
                    hint=f"write {quoted(key)} (a seed, or a suggestor that targets it)",
                )
            elif triggers and key not in allowed and key not in stops:
                said.add(key)
                yield facts.warning(
                    codes.READ_NOT_DEPENDENCY,
                    f"{quoted(spec.name)} ({use}) reads {quoted(key)} in its pack template "
                    f"({read.written}) but is not re-run when {quoted(key)} changes",
                    (*path, "use"),
                    hint=f"give it dependencies: [{', '.join((*triggers, key))}]",
                )
