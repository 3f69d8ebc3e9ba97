"""The front end's semantic checks: a fixed sequence of small functions (`CHECKS`).

A check is a `Check` (`PipelineFacts -> Iterator[Diagnostic]`, see `_facts`).
The front end's own checks are generic: names, keys, models, declared packs,
templates, the data flow (`_checks_dataflow`: the keys templates read, against
declarations, dependencies and what is written) and unused declarations;
`kind_checks` runs the checks each suggestor kind the pipeline uses carries
(docs/architecture.md §16). Checks that belong to a
domain (model scripts, agents, packs) live in their packages and are composed
with these by `converge_dsl.validation`, which `validate` and `run` call.

`CHECKS` is a tuple, composed once: adding a check is adding it to this
tuple (a generic check) or to `converge_dsl.validation.CHECKS` (a domain
check), in the order it should run. A caller with checks of its own passes
its sequence to `check_pipeline` / `check_document`. Take the next free code
in docs/errors.md (`CD2xx` errors, `CD3xx` warnings) and document it there
with an example.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from converge_dsl.diagnostics import Diagnostic
from converge_dsl.frontend._checks_data import constant_data, data_fields, key_schemas_valid
from converge_dsl.frontend._checks_dataflow import (
    key_flow,
    refires_on_own_output,
    refused_ids,
    same_id_other_content,
)
from converge_dsl.frontend._checks_declared import (
    declared_packs,
    known_keys,
    known_models,
    pack_specifiers,
    unique_names,
)
from converge_dsl.frontend._checks_tools import pack_tool_packs, tool_references, tool_servers
from converge_dsl.frontend._checks_usage import (
    object_content,
    templates_compile,
    unused_declarations,
)
from converge_dsl.frontend._facts import Check, PipelineFacts


def kind_checks(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Each suggestor kind's own checks, once for a pipeline that uses the kind."""
    for kind in facts.kinds_used:
        for run in kind.check_functions():
            yield from run(facts)


CHECKS: tuple[Check, ...] = (
    unique_names,
    kind_checks,
    known_keys,
    known_models,
    declared_packs,
    pack_specifiers,
    tool_servers,
    tool_references,
    pack_tool_packs,
    key_schemas_valid,
    templates_compile,
    key_flow,
    data_fields,
    constant_data,
    refused_ids,
    same_id_other_content,
    refires_on_own_output,
    unused_declarations,
    object_content,
)


def semantic_diagnostics(
    facts: PipelineFacts, checks: Iterable[Check] = CHECKS
) -> list[Diagnostic]:
    """Run `checks` (default: the front end's `CHECKS`) in order."""
    return [diagnostic for run in checks for diagnostic in run(facts)]
