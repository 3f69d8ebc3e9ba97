"""Pipeline-side pack checks, as diagnostics located in the pipeline file.

The front end registers `check_pipeline_packs` (or the finer functions).
Codes:

| code  | meaning                                                                  |
|-------|--------------------------------------------------------------------------|
| CD320 | the pipeline uses packs but `converge.lock` is missing                   |
| CD321 | `converge.lock` is stale or unreadable (one diagnostic per reason)       |
| CD322 | a locked pack cannot be installed (digest, signature, archive, network)  |
| CD323 | `use:` names a suggestor the pack does not offer                         |
| CD324 | a `with:` parameter does not fit the pack suggestor's parameters schema  |
| CD325 | `use:` is not of the form PACK/SUGGESTOR                                  |
| CD326 | the pack suggestor names a solver no installed distribution registers    |
| CD350 | pack.yaml: the version is not a version                                  |
| CD351 | pack.yaml: a `requires` specifier is not a PEP 440 specifier             |
| CD352 | pack.yaml: a file it names is missing, outside the pack, or not JSON     |
| CD353 | pack.yaml: an invariant names an unknown suggestor                       |
| CD354 | pack.yaml: an invariant check does not compile                           |

Near-miss names get a "did you mean" hint. A `use:` naming an undeclared
pack (CD205) and a malformed `packs:` specifier (CD212) are reported by the
front end's semantic checks, so they are not repeated here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema

from converge_dsl.diagnostics import Diagnostic, JsonPath, did_you_mean
from converge_dsl.errors import PackError, PipelineInvalid
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.packs._cache import PackCache
from converge_dsl.packs._lockfile import LOCK_NAME, lock_path, read_lock, stale_reasons
from converge_dsl.packs._manifest import Pack
from converge_dsl.packs._registry import SolverRegistry, installed_solvers
from converge_dsl.packs._workspace import load_locked_packs


def _at(
    doc: LoadedDocument, code: str, message: str, path: JsonPath, hint: str | None = None
) -> Diagnostic:
    return Diagnostic.at(code, message, doc.source_map.span(path), path=path, hint=hint)


def _guess(word: str, names: Any) -> str | None:
    guess = did_you_mean(word, names)
    return f"did you mean {guess!r}?" if guess else None


def _data(doc: LoadedDocument) -> Mapping[str, Any]:
    return doc.data if isinstance(doc.data, Mapping) else {}


def check_lock(doc: LoadedDocument) -> Iterator[Diagnostic]:
    """CD320-CD321: `converge.lock` exists and is current."""
    data = _data(doc)
    packs = {str(k): str(v) for k, v in (data.get("packs") or {}).items()}
    if not packs:
        return
    pipeline = Path(doc.file)
    fix = f"run: converge-dsl lock {pipeline.name}"
    try:
        lock = read_lock(lock_path(pipeline))
    except PackError as exc:
        yield _at(doc, "CD321", exc.message, ("packs",), hint=fix)
        return
    if lock is None:
        yield _at(
            doc, "CD320", f"{LOCK_NAME} is missing: the pipeline uses packs", ("packs",), hint=fix
        )
        return
    for reason in stale_reasons(lock, packs, tuple(data.get("repositories") or ())):
        yield _at(doc, "CD321", f"{LOCK_NAME} is stale: {reason}", ("packs",), hint=fix)


def _pack_suggestors(data: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for index, item in enumerate(data.get("suggestors") or ()):
        if isinstance(item, Mapping) and item.get("kind") == "pack":
            yield index, item


def check_pack_uses(
    doc: LoadedDocument,
    packs: Mapping[str, Pack] | None,
    solvers: SolverRegistry | None = None,
) -> Iterator[Diagnostic]:
    """CD323-CD326 for every `kind: pack` suggestor; `packs` None skips pack contents."""
    data = _data(doc)
    for index, item in _pack_suggestors(data):
        path: JsonPath = ("suggestors", index)
        use = str(item.get("use", ""))
        pack_name, slash, suggestor = use.partition("/")
        if not slash or not pack_name or not suggestor:
            yield _at(doc, "CD325", f"use: {use!r} must be PACK/SUGGESTOR", (*path, "use"))
            continue
        pack = (packs or {}).get(pack_name)
        if pack is None:
            continue
        definition = pack.suggestors.get(suggestor)
        if definition is None:
            offered = ", ".join(sorted(pack.suggestors))
            yield _at(
                doc,
                "CD323",
                f"pack {pack_name} {pack.version} has no suggestor {suggestor!r}",
                (*path, "use"),
                hint=_guess(suggestor, pack.suggestors) or f"it offers: {offered}",
            )
            continue
        if definition.solver is not None and definition.solver not in (
            solvers or installed_solvers()
        ):
            yield _at(
                doc,
                "CD326",
                f"solver {definition.solver!r} is not installed",
                (*path, "use"),
                hint="install the distribution that registers it",
            )
        validator = jsonschema.Draft202012Validator(definition.parameters)
        for error in validator.iter_errors(dict(item.get("with") or {})):
            where: JsonPath = (*path, "with", *error.absolute_path)
            yield _at(
                doc,
                "CD324",
                f"{use}: {error.message}",
                where,
                hint=f"parameters of {use} are described in pack {pack_name} {pack.version}",
            )


def check_pipeline_packs(
    doc: LoadedDocument, *, cache: PackCache | None = None
) -> Iterator[Diagnostic]:
    """Every pack check: lock first, then (when the lock is usable) the pack suggestors."""
    problems = list(check_lock(doc))
    yield from problems
    packs: Mapping[str, Pack] | None = None
    if not problems:
        try:
            packs = load_locked_packs(Path(doc.file), _data(doc), cache=cache)
        except PipelineInvalid as exc:
            yield from exc.diagnostics
        except PackError as exc:
            yield _at(doc, "CD322", exc.message, ("packs",), hint=exc.hint)
    yield from check_pack_uses(doc, packs)
