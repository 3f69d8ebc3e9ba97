"""An evaluation file's typed form: `read_eval_file(path)` -> `EvalFile`, or `PipelineInvalid`.

An evaluation file (`*.eval.yaml`, `kind: Evaluation`) goes through the strict
loader of the front end and `schemas/eval.v1.json`, like a test file; the files
it names follow the test file's rules (CD220, CD221, CD230: `_spec._Reader`).
What the schema cannot see is checked here, each problem located in the
evaluation file: a dataset that is not there or not `.jsonl`/`.csv` (CD800), a
dataset line that is not a case (CD801, located at the dataset's line), a key
the pipeline lacks, an expected value no case gives or an input the cases give
that the pipeline does not declare (CD802, "did you mean"; the input once, at its
first use in the dataset, unless only cases expecting `stop_reason: usage_error`
give it and it is no likely typo of a declared input),
a pattern RE2 cannot run (CD803), two metrics or cases of one name (CD804), a
metric with none or several measures (CD805), a judge's rubric that is not a
template or reads a name other than `case` and `run` (CD808), a judge or a
configuration naming a model that is not declared (CD809, "did you mean"), a
model declaration that cannot be built or names a file that is not there
(CD810), two configurations of one name (CD811).

`judges:` and a configuration's `models:` declare models as a pipeline does
(the same adapters and fields, files relative to the evaluation file); a
configuration's models replace the pipeline's of those names for its runs
(`converge_dsl.batch.ModelOverride`). No configuration: one, the pipeline as
declared, named `default`.

The dataset's cases are read by `_eval_dataset`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._files import display_name
from converge_dsl._json_types import JsonObject
from converge_dsl.diagnostics import (
    JsonPath,
    SourceSpan,
    best_first,
    unknown_name_hint,
)
from converge_dsl.errors import PipelineInvalid

from ._eval_dataset import EvalCase, dataset_path, read_cases, recode
from ._spec import _Reader

if TYPE_CHECKING:
    from converge_dsl.batch import ModelOverride, Pipeline
    from converge_dsl.frontend import LoadedDocument

EVAL_SUFFIXES = (".eval.yaml", ".eval.yml")
SCHEMA_NAME = "eval.v1.json"
MEASURES = (
    "exact",
    "subset",
    "numeric",
    "regex",
    "set",
    "schema",
    "stop_reason",
    "usage",
    "latency",
    "judge",
)
# The names a judge's rubric reads: the case and its run.
RUBRIC_NAMES = ("case", "run")
DEFAULT_CONFIGURATION = "default"


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric: its `name`, which measure (`kind`, one of `MEASURES`), the measure's
    settings as written (`spec`), its pass threshold over the cases' mean score,
    and where it sits in the evaluation file."""

    name: str
    kind: str
    spec: JsonObject
    threshold: float | None
    path: JsonPath


@dataclass(frozen=True, slots=True)
class Configuration:
    """A model configuration to compare: its name and the pipeline's models it declares
    anew (none: the pipeline as declared)."""

    name: str
    models: Mapping[str, ModelOverride]


@dataclass(frozen=True, slots=True)
class Rubric:
    """A judge metric's compiled parts: the judge model's name, the system message,
    the rubric template (sandboxed) and the verdict's form (`score` or `pass`)."""

    metric: str
    model: str
    system: str
    template: Any
    verdict: str
    path: JsonPath


@dataclass(frozen=True, slots=True)
class EvalFile:
    """A loaded, checked evaluation file, its dataset and its pipeline (loaded once)."""

    path: Path
    display: str
    document: LoadedDocument
    pipeline: Pipeline
    dataset: Path
    cases: tuple[EvalCase, ...]
    metrics: tuple[Metric, ...]
    threshold: float | None
    tolerance: float
    configurations: tuple[Configuration, ...] = (Configuration(DEFAULT_CONFIGURATION, {}),)
    # The judge models by name (`models.<name>` mappings, files relative to `path`'s folder).
    judges: Mapping[str, ModelOverride] = field(default_factory=dict)
    rubrics: Mapping[str, Rubric] = field(default_factory=dict)
    roots: tuple[Path, ...] = ()

    def span(self, path: JsonPath) -> SourceSpan:
        return self.document.source_map.span(path)


def is_eval_file(path: Path) -> bool:
    return path.name.endswith(EVAL_SUFFIXES)


def read_eval_file(
    path: Path,
    *,
    env: Mapping[str, str] | None = None,
    allow_roots: Sequence[str | os.PathLike[str]] = (),
) -> EvalFile:
    """Load, validate and check the evaluation file at `path`, its dataset and pipeline.

    Raises `PipelineInvalid` with every located problem (of the evaluation file,
    its dataset, or the pipeline it names). `env` is the environment the files are
    read and the pipeline loaded in (default: the process's).
    """
    from converge_dsl._file_kinds import EVALUATION, refuse_other_kind
    from converge_dsl.frontend import load_file, schema_diagnostics

    display = display_name(path)
    document = load_file(path, display=display, env=env)
    refuse_other_kind(document, EVALUATION)  # not ten errors of the schema's
    problems = [d for d in schema_diagnostics(document, SCHEMA_NAME) if d.is_error]
    if problems:
        raise PipelineInvalid(best_first(problems))
    reader = _Reader(path, document, env, allow_roots, {})
    data: Mapping[str, Any] = document.data
    pipeline = reader.pipeline(str(data["pipeline"]), ("pipeline",))
    dataset = dataset_path(reader, str(data["dataset"]))
    before = len(reader.problems)
    cases = read_cases(reader, dataset, display_name(dataset), pipeline) if dataset else ()
    if dataset is not None and not cases and len(reader.problems) == before:
        reader.problem(
            codes.EVAL_NO_CASES,
            f"dataset {str(data['dataset'])!r} holds no case: nothing would be measured",
            ("dataset",),
            "add a case a line (JSONL) or a row under the header (CSV)",
        )
    judges = _models(reader, data.get("judges") or {}, ("judges",))
    metrics = _metrics(reader, data["metrics"], pipeline, cases)
    rubrics = _rubrics(reader, metrics, judges)
    configurations = _configurations(reader, data.get("configurations"), pipeline)
    if reader.problems or pipeline is None or dataset is None:
        raise PipelineInvalid(best_first(reader.problems))
    from converge_dsl._files import user_roots

    roots = user_roots([os.fspath(root) for root in allow_roots], env)
    return EvalFile(
        path=path,
        display=display,
        document=document,
        pipeline=pipeline,
        dataset=dataset,
        cases=cases,
        metrics=metrics,
        threshold=data.get("threshold"),
        tolerance=float(data.get("tolerance", 0.0)),
        configurations=configurations,
        judges=judges,
        rubrics=rubrics,
        roots=tuple(roots),
    )


def _models(reader: _Reader, raw: Mapping[str, Any], where: JsonPath) -> dict[str, ModelOverride]:
    """Model declarations (`judges:`, a configuration's `models:`), each checked as the
    models factory checks a pipeline's, its files there (CD810)."""
    from converge_dsl.batch import ModelOverride
    from converge_dsl.models import ModelError
    from converge_dsl.models.factory import checked_spec

    out: dict[str, ModelOverride] = {}
    for name, spec in raw.items():
        at: JsonPath = (*where, name)
        try:
            checked = checked_spec(name, spec)
        except ModelError as exc:
            reader.problem(codes.EVAL_BAD_MODEL, exc.cited, at, exc.hint, on_key=True)
            continue
        found = True
        for field_name, value in checked.files.items():
            before = len(reader.problems)
            if reader.file(value, (*at, field_name), field_name) is None:
                found = False
                for i in range(before, len(reader.problems)):
                    reader.problems[i] = recode(reader.problems[i], codes.EVAL_BAD_MODEL)
        if found:
            out[name] = ModelOverride(dict(spec), reader.base.resolve())
    return out


def _configurations(
    reader: _Reader, raw: Sequence[Mapping[str, Any]] | None, pipeline: Pipeline | None
) -> tuple[Configuration, ...]:
    if not raw:
        return (Configuration(DEFAULT_CONFIGURATION, {}),)
    out: list[Configuration] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        where: JsonPath = ("configurations", index)
        name = str(item["name"])
        if name in seen:
            line = reader.document.source_map.span(("configurations", seen[name], "name")).line
            reader.problem(
                codes.EVAL_BAD_CONFIGURATION,
                f"two configurations are named {name!r}",
                (*where, "name"),
                f"the first is on line {line}; give each configuration its own name",
            )
        seen.setdefault(name, index)
        declared = item.get("models") or {}
        if pipeline is not None:
            for model in declared:
                if model not in pipeline.models:
                    listed = ", ".join(pipeline.models) or "none"
                    reader.problem(
                        codes.EVAL_UNKNOWN_MODEL,
                        f"pipeline {pipeline.name!r} declares no model {model!r}",
                        (*where, "models", model),
                        unknown_name_hint(model, pipeline.models, f"its models: {listed}"),
                        on_key=True,
                    )
        models = _models(reader, declared, (*where, "models"))
        out.append(Configuration(name, models))
    return tuple(out)


def _rubrics(
    reader: _Reader, metrics: Sequence[Metric], judges: Mapping[str, ModelOverride]
) -> dict[str, Rubric]:
    """Each judge metric's rubric, compiled in the sandbox (CD808), its model known (CD809)."""
    from converge_dsl.sandbox import (
        GLOBALS,
        TemplateCompileError,
        compile_template,
        generated,
    )

    declared = reader.data.get("judges") or {}
    out: dict[str, Rubric] = {}
    for metric in metrics:
        if metric.kind != "judge":
            continue
        spec = metric.spec
        at: JsonPath = (*metric.path, "judge")
        model = str(spec["model"])
        if model not in declared:
            listed = ", ".join(declared) or "none (add `judges:` to the evaluation file)"
            reader.problem(
                codes.EVAL_UNKNOWN_MODEL,
                f"no judge model {model!r} is declared under `judges`",
                (*at, "model"),
                unknown_name_hint(model, list(declared), f"judges: {listed}"),
            )
        source = str(spec["rubric"])
        try:
            names = generated(source).names
            template = compile_template(source)
        except TemplateCompileError as exc:
            reader.problem(
                codes.EVAL_BAD_RUBRIC,
                f"rubric of metric {metric.name!r} is not a template: {exc.message}",
                (*at, "rubric"),
                "a rubric is a Jinja template over `case` and `run`",
            )
            continue
        unknown = sorted(n for n in names if n not in RUBRIC_NAMES and n not in GLOBALS)
        if unknown:
            reader.problem(
                codes.EVAL_BAD_RUBRIC,
                f"rubric of metric {metric.name!r} reads {unknown[0]!r}, which it is not given",
                (*at, "rubric"),
                unknown_name_hint(
                    unknown[0],
                    RUBRIC_NAMES,
                    "a rubric reads `case` (name, inputs, expected) and `run` "
                    "(facts by key, stop_reason, usage)",
                ),
            )
            continue
        verdict = str(spec.get("verdict", "score"))
        system = JUDGE_SYSTEM_PASS if verdict == "pass" else JUDGE_SYSTEM
        out[metric.name] = Rubric(
            metric.name, model, str(spec.get("system", system)), template, verdict, at
        )
    return out


JUDGE_SYSTEM = (
    "You are a strict evaluator. Judge the answer by the rubric. Reply with one JSON object "
    'only: {"score": a number from 0 to 1, "reason": one sentence}.'
)
JUDGE_SYSTEM_PASS = (
    "You are a strict evaluator. Judge the answer by the rubric. Reply with one JSON object "
    'only: {"pass": true or false, "reason": one sentence}.'
)


def _metrics(
    reader: _Reader,
    raw: Sequence[Mapping[str, Any]],
    pipeline: Pipeline | None,
    cases: Sequence[EvalCase],
) -> tuple[Metric, ...]:
    out: list[Metric] = []
    seen: dict[str, int] = {}
    expected_names = sorted({name for case in cases for name in case.expected})
    for index, item in enumerate(raw):
        where: JsonPath = ("metrics", index)
        name = str(item["name"])
        if name in seen:
            line = reader.document.source_map.span(("metrics", seen[name], "name")).line
            reader.problem(
                codes.EVAL_DUPLICATE,
                f"two metrics are named {name!r}",
                (*where, "name"),
                f"the first is on line {line}; give each metric its own name",
            )
        seen.setdefault(name, index)
        given = [m for m in MEASURES if m in item]
        if len(given) != 1:
            reader.problem(
                codes.EVAL_BAD_METRIC,
                f"metric {name!r} must give exactly one measure",
                where,
                f"one of: {', '.join(MEASURES)}",
            )
            continue
        kind = given[0]
        spec: JsonObject = dict(item[kind])
        at: JsonPath = (*where, kind)
        key = spec.get("key")
        if pipeline is not None and isinstance(key, str) and key not in pipeline.keys:
            listed = ", ".join(pipeline.keys)
            reader.problem(
                codes.EVAL_UNKNOWN_NAME,
                f"pipeline {pipeline.name!r} has no key {key!r} for metric {name!r}",
                (*at, "key"),
                unknown_name_hint(key, pipeline.keys, f"its keys: {listed}"),
            )
        wanted = spec.get("expected")
        if isinstance(wanted, str) and cases and wanted not in expected_names:
            reader.problem(
                codes.EVAL_UNKNOWN_NAME,
                f"no case of the dataset gives an expected {wanted!r}",
                (*at, "expected"),
                unknown_name_hint(wanted, expected_names, f"expected: {', '.join(expected_names)}"),
            )
        if kind == "regex":
            _check_pattern(reader, str(spec["pattern"]), (*at, "pattern"))
        if kind == "schema":
            _check_schema(reader, spec["schema"], (*at, "schema"))
        threshold = item.get("threshold")
        out.append(Metric(name, kind, spec, None if threshold is None else float(threshold), where))
    return tuple(out)


def _check_schema(reader: _Reader, schema: object, path: JsonPath) -> None:
    """A schema metric's schema as key schemas are held: valid JSON Schema, and checkable
    in bounded time (`sandbox.schema_problems`), so scoring cannot hang or fail."""
    from converge_dsl.sandbox import meta_error, schema_problems

    problems = [(where, message) for where, _, message in schema_problems(schema)]
    if not problems:
        invalid = meta_error(schema)
        if invalid is not None:
            problems = [(tuple(invalid.path), f"it is not a JSON Schema: {invalid.message}")]
    for where, message in problems:
        reader.problem(
            codes.EVAL_BAD_SCHEMA,
            f"the metric's schema cannot be used: {message}",
            (*path, *where),
            "write a JSON Schema (2020-12) with '#/$defs/NAME' references only, RE2 "
            "patterns, within the limits of schemas in the reference",
        )


def _check_pattern(reader: _Reader, pattern: str, path: JsonPath) -> None:
    from converge_dsl.sandbox import regex_problem

    reason = regex_problem(pattern)
    if reason is not None:
        reader.problem(
            codes.EVAL_BAD_REGEX,
            f"pattern is not a regular expression RE2 can run: {reason}",
            path,
            "use RE2 syntax: no backreferences or lookaround; escape ( [ . with \\",
        )
