"""Compile a pipeline's `kind: pack` entry into a suggestor.

`compile_pack_suggestor(spec, ctx)` is the compiler's builder for
`kind: pack` (a `SuggestorBuilder`). It finds the pack among the pipeline's
locked packs (`ctx.packs` when the context carries them, else loaded through
the lock file beside the pipeline), then:

- `kind: solver`: binds the registered native solver into a
  `PackSolverSuggestor` (see `_suggestor` for its gating rules);
- `rule`, `llm`, `agent`: instantiates the pack's template as a pipeline
  suggestor body (name from the pipeline, `target`/emit keys defaulting to
  `output`, `dependencies` to `[input]`, `model` to `default`; `when` and
  `description` from the pipeline), parses it with that kind's parser and
  builds it with the kind's builder (`ctx.kinds`), in a context whose templates
  also see `params` (the `with:` values). No schema checked the pack's
  template: a field its kind requires that it lacks is refused (CD606).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl.compiler import CompileContext, RenderScopes, SuggestorBuilder
from converge_dsl.engine.types import ContextView, Suggestor
from converge_dsl.errors import PackError
from converge_dsl.packs._bind import instantiate_template
from converge_dsl.packs._kind import PackSuggestorSpec
from converge_dsl.packs._loaded import keep_packs, kept_packs, lock_bytes
from converge_dsl.packs._lockfile import lock_hint
from converge_dsl.packs._manifest import Pack, SuggestorDef
from converge_dsl.packs._registry import SolverRegistry, installed_solvers
from converge_dsl.packs._suggestor import PackSolverSuggestor
from converge_dsl.packs._workspace import load_locked_packs


class _ParamScopes(RenderScopes):
    """The pipeline's render scopes plus `params`: delegates, never rebuilds."""

    __slots__ = ("_base", "_cache", "_params")

    def __init__(self, base: RenderScopes, params: JsonObject) -> None:
        # Deliberately not calling RenderScopes.__init__: every method is delegated.
        self._base = base
        self._params = dict(params)
        self._cache: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.names = base.names | {"params"}

    def scope(self, view: ContextView) -> dict[str, Any]:
        base = self._base.scope(view)
        if self._cache is None or self._cache[0] is not base:
            self._cache = (base, {**base, "params": self._params})
        return self._cache[1]

    def own_sources(self, view: ContextView, key: str) -> frozenset[str]:
        return self._base.own_sources(view, key)


def _packs(ctx: CompileContext) -> Mapping[str, Pack]:
    """The pipeline's locked packs, read once per loaded document and lock file
    (`_loaded`): those its validation read, else read here and kept.

    A pipeline loaded once and run many times (a batch) reads its packs once;
    a changed lock file (or another load of the pipeline) reads them again.
    """
    given: Mapping[str, Pack] | None = getattr(ctx, "packs", None)
    if given is not None:
        return given
    pipeline = Path(ctx.source_map.file)
    packs = kept_packs(ctx.document, pipeline)
    if packs is not None:
        return packs
    lock = lock_bytes(pipeline)
    packs = load_locked_packs(pipeline)
    keep_packs(ctx.document, lock, packs)
    return packs


def compile_pack_suggestor(
    suggestor: PackSuggestorSpec,
    ctx: CompileContext,
    *,
    solvers: SolverRegistry | None = None,
) -> Suggestor:
    """Build the suggestor of one `kind: pack` entry; raises a located `PipelineInvalid`."""
    path = suggestor.path
    pack_name, name = suggestor.pack, suggestor.suggestor
    try:
        packs = _packs(ctx)
    except PackError as exc:
        raise ctx.invalid(
            codes.PACK_NOT_INSTALLABLE, exc.cited, (*path, "use"), hint=exc.hint
        ) from None
    pack = packs.get(pack_name)
    if pack is None:
        raise ctx.invalid(
            codes.PACK_NOT_INSTALLABLE,
            f"pack {pack_name!r} is not locked for this pipeline",
            (*path, "use"),
            hint=lock_hint(Path(ctx.source_map.file)),
        )
    definition = pack.suggestors.get(name)
    if definition is None:
        raise ctx.invalid(
            codes.UNKNOWN_PACK_SUGGESTOR,
            f"pack {pack_name} {pack.version} has no suggestor {name!r}",
            (*path, "use"),
        )
    params = dict(suggestor.parameters)
    if definition.kind != "solver":
        return _template_suggestor(suggestor, definition, pack, params, ctx)
    assert definition.solver is not None
    try:
        solver = (solvers or installed_solvers()).get(definition.solver)
    except PackError as exc:
        raise ctx.invalid(
            codes.SOLVER_NOT_INSTALLED, exc.cited, (*path, "use"), hint=exc.hint
        ) from None
    return PackSolverSuggestor(
        name=suggestor.name,
        input_key=suggestor.input,
        output_key=suggestor.output,
        solver=solver,
        definition=definition,
        invariants=pack.invariants_for(definition.name),
        params=params,
        source=ctx.source(suggestor.name),
    )


def _template_suggestor(
    suggestor: PackSuggestorSpec,
    definition: SuggestorDef,
    pack: Pack,
    params: dict[str, Any],
    ctx: CompileContext,
) -> Suggestor:
    """A rule/llm/agent pack suggestor, built by its kind's builder; a field the template
    lacks is CD606 (the pack's template is not schema-checked)."""
    path = suggestor.path
    kind = ctx.kinds.get(definition.kind)
    if kind is None:
        raise ctx.invalid(
            codes.PACK_NOT_INSTALLABLE,
            f"no builder for {definition.kind!r} suggestors",
            (*path, "use"),
        )
    spec = kind.parse(path, instantiate_template(suggestor, definition))
    if spec.missing:
        where = spec.missing[0]
        raise ctx.invalid(
            codes.COMPILE_MISSING_FIELD,
            f"the template of {suggestor.use} (pack {pack.name} {pack.version}) lacks "
            f"{'.'.join(str(p) for p in where[len(path) :])}, which a suggestor of kind "
            f"{kind.name} requires",
            (*path, "use"),
            hint="the pack must be fixed by its author",
        )
    scoped = replace(ctx, scopes=_ParamScopes(ctx.scopes, params))
    builder: SuggestorBuilder = kind.builder()
    return builder(spec, scoped)
