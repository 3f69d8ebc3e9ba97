"""Pipeline-side pack checks, as diagnostics located in the pipeline file.

`check_packs` (a `converge_dsl.frontend.Check`, composed by
`converge_dsl.validation` for `validate`) runs `check_pipeline_packs` for
every pipeline that declares `packs:` or has a `kind: pack` suggestor, and
returns at once for the others. It reads packs from the cache only: it never
touches the network and never writes the cache. `fetching_pack_check(on_fetch)`
is the same check for `run`, which installs what the cache lacks (today's
install path) and says so through `on_fetch`. Codes (`converge_dsl.codes`,
CD5xx, documented in docs/errors.md):

- `LOCK_MISSING` / `LOCK_STALE`: the pipeline's lock file (`lock_path`) is
  missing, unreadable, or no longer matches `packs:` / `repositories:`;
- `PACK_NOT_FETCHED`: a locked pack is not in the cache (validate only; the
  hint names `converge-dsl pack fetch`);
- `LOCKED_PIN_YANKED` (a warning): the lock pins a version its repository has
  yanked since, as far as the repositories read without the network tell
  (folders, `builtin`); the hint is the `lock --upgrade NAME` that moves off it;
- `PACK_NOT_INSTALLABLE`: a locked pack cannot be installed or used (digest,
  signature, archive, network, an altered cache folder);
- `UNKNOWN_PACK_SUGGESTOR`, `SOLVER_NOT_INSTALLED`, `BAD_PACK_PARAMETER`:
  a `kind: pack` suggestor does not fit its pack (the schema already checked
  that `use:` has the form PACK/SUGGESTOR);
- the tool servers of packs the pipeline uses (`_pack_tools.check_pack_tools`:
  declared by the pack, allowed, trusted under `trust:`, and pinned in the lock);
- the templates of the pack suggestors used (`_lint.template_diagnostics`:
  syntax, names, filters, the pipeline's inputs and keys), located in the
  pack's own files (`NAME-VERSION/pack.yaml`, prompt files), as `run` would
  reject them.

Near-miss names get a "did you mean" hint. A `use:` naming an undeclared pack
(`UNDECLARED_PACK`) and a malformed `packs:` specifier (`BAD_SPECIFIER`) are
reported by the front end's own checks, so they are not repeated here.
Heavy modules (the lock file, the cache, httpx) are imported only when a
pipeline has packs, and the cache only when a lock is usable. Parameters are
checked with one compiled jsonschema-rs validator per distinct schema; Python
jsonschema is imported only to word the errors once jsonschema-rs has said no.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, did_you_mean, suggestion
from converge_dsl.errors import PackError, PipelineInvalid
from converge_dsl.frontend import LoadedDocument, PipelineManifest, build_manifest
from converge_dsl.packs._kind import PackSuggestorSpec, pack_suggestors

if TYPE_CHECKING:
    from converge_dsl.frontend import Check, KindRegistry, PipelineFacts, SuggestorSpec
    from converge_dsl.packs._cache import PackCache
    from converge_dsl.packs._lockfile import LockedPack
    from converge_dsl.packs._manifest import Pack
    from converge_dsl.packs._registry import SolverRegistry


def _at(
    doc: LoadedDocument,
    code: str,
    message: str,
    path: JsonPath,
    hint: str | None = None,
    *,
    on_key: bool = False,
) -> Diagnostic:
    return doc.source_map.diagnostic(code, message, path, hint=hint, on_key=on_key)


def _guess(word: str, names: Any) -> str | None:
    guess = did_you_mean(word, names)
    return suggestion(guess) if guess else None


def _data(doc: LoadedDocument) -> Mapping[str, Any]:
    return doc.data if isinstance(doc.data, Mapping) else {}


def check_lock(
    doc: LoadedDocument, pipeline: Path | None = None, manifest: PipelineManifest | None = None
) -> Iterator[Diagnostic]:
    """`LOCK_MISSING` / `LOCK_STALE` (one per reason), located at `packs:`.

    `pipeline` is where the file is (default: `doc.file`); the hint names
    `doc.file`, as the user wrote it. `manifest` is the document's (built here
    when not given).
    """
    from converge_dsl.packs._lockfile import lock_hint, lock_problems, missing_repository_hint

    manifest = manifest or build_manifest(doc)
    packs = _requested(manifest)
    if not _well_formed(packs):
        return  # the front end reports the malformed specifier (BAD_SPECIFIER) first
    repositories = tuple(r.written for r in manifest.repositories)
    where = pipeline or Path(doc.file)
    hint = missing_repository_hint(where, repositories) or lock_hint(Path(doc.file))
    for code, message in lock_problems(where, packs, repositories):
        yield _at(doc, code, message, ("packs",), hint=hint, on_key=True)


def _requested(manifest: PipelineManifest) -> dict[str, str]:
    return {p.name: p.specifier for p in manifest.packs}


def _well_formed(packs: Mapping[str, str]) -> bool:
    from converge_dsl.packs._manifest import parse_specifier

    return all(parse_specifier(text) is not None for text in packs.values())


def template_specs(
    doc: LoadedDocument, packs: Mapping[str, Pack], kinds: KindRegistry
) -> dict[JsonPath, SuggestorSpec]:
    """The suggestor each `kind: pack` entry's template stands for as the pipeline binds
    it (`instantiate_template`, parsed by its kind), by the entry's path: built once for
    every check that reads them (the bound reads here, the tool references of
    `_pack_tools`). An entry whose pack, suggestor, template or kind is unknown has none."""
    from converge_dsl.packs._bind import instantiate_template

    found: dict[JsonPath, SuggestorSpec] = {}
    for spec in pack_suggestors(_data(doc)):
        pack = packs.get(spec.pack)
        definition = None if pack is None else pack.suggestors.get(spec.suggestor)
        if definition is None or definition.template is None:
            continue
        kind = kinds.get(definition.kind)
        if kind is not None:
            found[spec.path] = kind.parse(spec.path, instantiate_template(spec, definition))
    return found


def check_pack_uses(
    doc: LoadedDocument,
    packs: Mapping[str, Pack] | None,
    solvers: SolverRegistry | None = None,
    manifest: PipelineManifest | None = None,
    facts: PipelineFacts | None = None,
    *,
    templates: Mapping[JsonPath, SuggestorSpec] | None = None,
) -> Iterator[Diagnostic]:
    """Each `kind: pack` suggestor against its pack; nothing when `packs` is None.

    `manifest` is the document's (built here when needed and not given). With the
    pipeline's `facts`, a template suggestor's reads are held against its binding
    (`frontend.bound_template_reads`: keys nothing writes, keys it is not re-run on);
    `templates` are its `template_specs` when the caller built them already."""
    data = _data(doc)
    if facts is not None and templates is None:
        templates = template_specs(doc, packs or {}, facts.kinds)
    used: dict[str, set[str]] = {}  # pack -> its template suggestors the pipeline uses
    for spec in pack_suggestors(data):
        path, use = spec.path, spec.use
        pack_name, slash, suggestor = use.partition("/")
        pack = (packs or {}).get(pack_name) if slash else None  # the schema checks the form
        if pack is None:
            continue
        definition = pack.suggestors.get(suggestor)
        if definition is None:
            offered = ", ".join(sorted(pack.suggestors))
            yield _at(
                doc,
                codes.UNKNOWN_PACK_SUGGESTOR,
                f"pack {pack_name} {pack.version} has no suggestor {suggestor!r}",
                (*path, "use"),
                hint=_guess(suggestor, pack.suggestors) or f"it offers: {offered}",
            )
            continue
        if definition.solver is not None:
            if solvers is None:
                from converge_dsl.packs._registry import installed_solvers

                solvers = installed_solvers()
            if definition.solver not in solvers:
                yield _at(
                    doc,
                    codes.SOLVER_NOT_INSTALLED,
                    f"solver {definition.solver!r} is not installed",
                    (*path, "use"),
                    hint=_guess(definition.solver, solvers.names())
                    or "install the distribution that registers it",
                )
        else:
            used.setdefault(pack_name, set()).add(suggestor)
            bound = None if facts is None or templates is None else templates.get(path)
            if facts is not None and bound is not None:
                from converge_dsl.frontend import bound_template_reads

                yield from bound_template_reads(facts, path, bound, use)
        yield from _parameter_problems(doc, spec, pack)
    if used and packs:
        manifest = manifest or build_manifest(doc)
        yield from _template_problems(manifest, {n: packs[n] for n in sorted(used)}, used)


def _template_problems(
    manifest: PipelineManifest, packs: Mapping[str, Pack], used: Mapping[str, set[str]]
) -> Iterator[Diagnostic]:
    from converge_dsl.keys import BUILTIN_KEYS
    from converge_dsl.packs._lint import template_diagnostics

    inputs = frozenset(manifest.inputs)
    keys = frozenset(BUILTIN_KEYS) | {k.name for k in manifest.keys}
    for name, pack in packs.items():
        yield from template_diagnostics(pack, suggestors=used[name], inputs=inputs, keys=keys)


@lru_cache(maxsize=256)
def _parameters_validator(schema_text: str) -> Any:
    """A compiled jsonschema-rs validator per distinct parameters schema (None if it cannot).

    Linear-time regexes and no retrieval (`converge_dsl.sandbox`)."""
    from converge_dsl.sandbox import fast_validator

    try:
        return fast_validator(json.loads(schema_text))
    except Exception:  # a schema it cannot compile goes to Python jsonschema
        return None


def _unsafe_parameters(
    doc: LoadedDocument, path: JsonPath, use: str, pack: Pack, schema: Any
) -> list[Diagnostic]:
    """A diagnostic per `$ref` outside the pack's parameters schema or regex RE2 refuses."""
    from converge_dsl.sandbox import PROBLEM_CODES, schema_problems

    return [
        _at(
            doc,
            PROBLEM_CODES[kind],
            f"{use}: the parameters schema of pack {pack.name} {pack.version}, at "
            f"{''.join(f'/{p}' for p in where) or '/'}: {message}",
            path,
            hint="the pack's schema must be fixed by its author; it is never applied as is",
        )
        for where, kind, message in schema_problems(schema)
    ]


def _parameter_problems(
    doc: LoadedDocument, spec: PackSuggestorSpec, pack: Pack
) -> Iterator[Diagnostic]:
    path, use = spec.path, spec.use
    definition = pack.suggestors[spec.suggestor]
    given = dict(spec.parameters)
    unsafe = _unsafe_parameters(doc, path, use, pack, definition.parameters)
    if unsafe:
        yield from unsafe
        return
    fast = _parameters_validator(json.dumps(definition.parameters, sort_keys=True))
    if fast is not None and fast.is_valid(given):
        return
    from converge_dsl.sandbox import python_validator  # to word the errors

    validator = python_validator(definition.parameters)
    for error in validator.iter_errors(given):
        where: JsonPath = (*path, "with", *error.absolute_path)
        yield _at(
            doc,
            codes.BAD_PACK_PARAMETER,
            f"{use}: {error.message}",
            where,
            hint=f"parameters of {use} are described in pack {pack.name} {pack.version}",
        )


def check_pipeline_packs(
    doc: LoadedDocument,
    *,
    pipeline: Path | None = None,
    cache: PackCache | None = None,
    fetch: bool = False,
    on_fetch: Callable[[str], object] | None = None,
    manifest: PipelineManifest | None = None,
    facts: PipelineFacts | None = None,
) -> Iterator[Diagnostic]:
    """Every pack check: lock first, then (when the lock is usable) the pack suggestors
    (with `facts`, their templates' reads as bound too: `check_pack_uses`).

    `pipeline` is the file's path when `doc.file` is only its display name.
    Without `fetch`, packs come from the cache only (`PACK_NOT_FETCHED` for
    each one it lacks); with it, missing packs are installed, and `on_fetch`
    hears one line per pack downloaded.
    """
    pipeline = pipeline or Path(doc.file)
    manifest = manifest or build_manifest(doc)
    problems = list(check_lock(doc, pipeline, manifest))
    yield from problems
    packs: Mapping[str, Pack] | None = None
    requested = _requested(manifest)
    if not problems and requested and _well_formed(requested):
        try:
            if fetch:
                from converge_dsl.packs._loaded import keep_packs, lock_bytes
                from converge_dsl.packs._workspace import load_locked_packs

                lock = lock_bytes(pipeline)
                packs = load_locked_packs(pipeline, manifest, cache=cache, on_fetch=on_fetch)
                keep_packs(doc, lock, packs)  # the run compiling this document reads them once
            else:
                from converge_dsl.packs._workspace import read_locked_packs

                found, missing = read_locked_packs(
                    pipeline, manifest, cache=cache, shown=Path(doc.file)
                )
                packs = found
                yield from _not_fetched(doc, missing, requested)
            yield from _yanked(doc, pipeline, manifest, requested)
        except PipelineInvalid as exc:
            yield from exc.diagnostics
        except PackError as exc:
            code = getattr(exc, "code", codes.PACK_NOT_INSTALLABLE)  # a PackRefused's own
            yield _at(doc, code, exc.message, ("packs",), hint=exc.hint, on_key=True)
    templates = None if facts is None else template_specs(doc, packs or {}, facts.kinds)
    yield from check_pack_uses(doc, packs, manifest=manifest, facts=facts, templates=templates)
    if packs and facts is not None and templates is not None:
        from converge_dsl.packs._pack_tools import check_pack_tools

        yield from check_pack_tools(doc, packs, manifest, facts, pipeline, templates=templates)


def _yanked(
    doc: LoadedDocument, pipeline: Path, manifest: PipelineManifest, declared: Mapping[str, str]
) -> Iterator[Diagnostic]:
    """A `LOCKED_PIN_YANKED` warning per yanked pin, at its `packs:` entry if it has one."""
    from converge_dsl.diagnostics import Severity
    from converge_dsl.packs._workspace import yanked_pins

    for name, notice in yanked_pins(pipeline, manifest, shown=Path(doc.file)):
        path: JsonPath = ("packs", name) if name in declared else ("packs",)
        yield doc.source_map.diagnostic(
            notice.code, str(notice), path, hint=notice.hint, on_key=True, severity=Severity.WARNING
        )


def _not_fetched(
    doc: LoadedDocument, missing: list[LockedPack], declared: Mapping[str, str]
) -> Iterator[Diagnostic]:
    """`PACK_NOT_FETCHED` per locked pack the cache lacks, at its `packs:` entry if it has one."""
    from converge_dsl.packs._workspace import fetch_hint

    for locked in missing:
        path: JsonPath = ("packs", locked.name) if locked.name in declared else ("packs",)
        yield _at(
            doc,
            codes.PACK_NOT_FETCHED,
            f"pack {locked.name} {locked.version} is locked but not fetched "
            "(validate reads packs from the cache only)",
            path,
            hint=fetch_hint(Path(doc.file)),
            on_key=True,
        )


def _uses_packs(facts: PipelineFacts) -> bool:
    return bool(facts.packs) or any(spec.pack_references() for spec in facts.specs)


def _pipeline_path(facts: PipelineFacts) -> Path | None:
    if facts.base_dir is None:
        return None
    return facts.base_dir / Path(facts.document.file).name


def check_packs(facts: PipelineFacts, cache: PackCache | None = None) -> Iterator[Diagnostic]:
    """Lock and pack-suggestor checks (CD5xx), from the cache only (`cache`, default:
    the process environment's `PackCache()`).

    Nothing for a pipeline without packs; never touches the network, never
    writes the cache.
    """
    if _uses_packs(facts):
        yield from check_pipeline_packs(
            facts.document,
            pipeline=_pipeline_path(facts),
            cache=cache,
            manifest=facts.manifest,
            facts=facts,
        )


def fetching_pack_check(
    on_fetch: Callable[[str], object] | None = None, cache: PackCache | None = None
) -> Check:
    """`check_packs` for `run`: locked packs the cache lacks are fetched and verified first.

    `on_fetch` hears one line per pack actually downloaded (none for a warm cache);
    `cache` is the pack cache (default: the process environment's `PackCache()`).
    """

    def check_and_fetch_packs(facts: PipelineFacts) -> Iterator[Diagnostic]:
        if _uses_packs(facts):
            yield from check_pipeline_packs(
                facts.document,
                pipeline=_pipeline_path(facts),
                cache=cache,
                fetch=True,
                on_fetch=on_fetch,
                manifest=facts.manifest,
                facts=facts,
            )

    return check_and_fetch_packs
