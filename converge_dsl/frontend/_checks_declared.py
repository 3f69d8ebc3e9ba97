"""Semantic checks of what a pipeline declares and names: unique names, known keys/models/packs."""

from __future__ import annotations

from collections.abc import Iterator

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl.diagnostics import Diagnostic, did_you_mean, suggestion
from converge_dsl.frontend._facts import PipelineFacts
from converge_dsl.keys import BUILTIN_KEYS


def _suggest(word: str, candidates: frozenset[str] | set[str]) -> str | None:
    guess = did_you_mean(word, sorted(candidates))
    return suggestion(guess) if guess else None


def unique_names(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Suggestor, invariant and declared-key names are unique; declared keys are not built in."""
    yield from facts.duplicates(
        [((*spec.path, "name"), spec.name) for spec in facts.specs],
        codes.DUPLICATE_NAME,
        "suggestor",
    )
    manifest = facts.manifest
    yield from facts.duplicates(
        [((*v.path, "name"), v.name) for v in manifest.invariants],
        codes.DUPLICATE_INVARIANT,
        "invariant",
    )
    declared = [((*k.path, "name"), k.name) for k in manifest.keys]
    yield from facts.duplicates(declared, codes.DUPLICATE_KEY_DECLARATION, "key")
    for path, name in declared:
        if name in BUILTIN_KEYS:
            yield facts.error(
                codes.DUPLICATE_KEY_DECLARATION,
                f"key {quoted(name)} is built in",
                path,
                hint="remove it from 'keys:'; built-in keys need no declaration",
            )


def known_keys(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Every key a suggestor reads or writes is built in or declared under `keys:`."""
    for path, key in facts.key_references:
        if key not in facts.declared_keys:
            yield facts.error(
                codes.UNKNOWN_CONTEXT_KEY,
                f"unknown context key {quoted(key)}",
                path,
                hint=_suggest(key, facts.declared_keys) or f"declare it: keys: [{{name: {key}}}]",
            )


def known_models(facts: PipelineFacts) -> Iterator[Diagnostic]:
    for spec in facts.specs:
        for path, model in spec.model_references():
            if model not in facts.models:
                yield facts.error(
                    codes.UNKNOWN_MODEL,
                    f"unknown model {quoted(model)}",
                    path,
                    hint=_suggest(model, facts.models) or "declare it under 'models:'",
                )


def declared_packs(facts: PipelineFacts) -> Iterator[Diagnostic]:
    for spec in facts.specs:
        for path, pack in spec.pack_references():
            if pack not in facts.packs:
                yield facts.error(
                    codes.UNDECLARED_PACK,
                    f"pack {quoted(pack)} is not declared",
                    path,
                    hint=_suggest(pack, facts.packs)
                    or f"add it under 'packs:' ({pack}: \">=1.0\")",
                )


def pack_specifiers(facts: PipelineFacts) -> Iterator[Diagnostic]:
    packs = facts.manifest.packs
    if not packs:
        return
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    for pack in packs:
        try:
            SpecifierSet(pack.specifier)
        except InvalidSpecifier:
            yield facts.error(
                codes.BAD_SPECIFIER,
                f"{pack.specifier!r} is not a PEP 440 version specifier",
                pack.path,
                hint='write e.g. ">=1.0,<2" or "==1.2.0"',
            )
