"""An LLM judge's verdicts: `Judges(evaluation).verdicts(case, run)` -> score by metric.

A judge metric (`judge: {model, rubric, system, verdict}`) renders its rubric
in the pipelines' sandbox over `case` (`name`, `inputs`, `expected`) and `run`
(`facts` by key, each `id`, `content`, `data`, `confidence`; `stop_reason`;
`usage`), and asks the judge model (declared under `judges:` as a pipeline
declares a model) with the system message and the rubric as the user
message. The request's `suggestor` is `judge:METRIC` (a model script can
match on it).

The verdict is the answer's text as one JSON object (a fenced ```json block
is unwrapped): with `verdict: score` (the default) `{"score": 0..1, "reason":
"..."}`, with `verdict: pass` `{"pass": true|false, "reason": "..."}` (1 or
0). Anything else is a bad verdict (CD806) and a failed call (a provider
error, a replay or cache miss) a judge failure (CD807); either scores the case
0 and is a diagnostic located at the metric's `judge` in the evaluation file.
A case expecting its run to be refused (`expected.stop_reason: usage_error`) is
not judged: no call is made for it, and no judge metric scores it.

The judge models go through the model stack of runs: each is built once per
evaluation by the models factory, behind the answer cache when the
evaluation has one (`--cache`, `--offline`), recorded into a cassette
(`--record`) or answered from one (`--replay`), so a judged evaluation reruns
offline with the same verdicts.

The judges' calls count toward the evaluation's caps (`eval --max-model-calls`,
`--max-tokens`) with the cases' own: each call holds one call and its tokens
(the prompt's estimate and the answer cap) in the evaluation's `BudgetPool`
(`draw_from`) before it is made and settles them when it is answered, as a
case's model call does; its answer cap is lowered to what the tokens cap
leaves. A call the spent caps refuse is not made: the case is not judged by
that metric (no score, CD812, located at the metric's `judge`), which fails the
evaluation. A case's own budget (`--case-max-*`, the pipeline's `budget:`)
is its pipeline run's and does not cover its judging. `usage` keeps the
judges' calls and tokens apart from the cases' as well.

When the evaluation is traced (`eval --otel`), each judge call is a `chat
MODEL` span under the evaluation's (`converge_dsl.runtime.CallSpans`), with
the GenAI attributes of a run's model calls and `converge_dsl.eval.case`,
`converge_dsl.eval.metric` (and `converge_dsl.eval.configuration`).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._json_text import loads
from converge_dsl.diagnostics import Diagnostic

from ._eval_dataset import EvalCase, refused
from ._eval_spec import EvalFile, Rubric

if TYPE_CHECKING:
    from converge_dsl.batch import BudgetPool
    from converge_dsl.clock import Clock
    from converge_dsl.engine import StopReason
    from converge_dsl.models import Model, ModelRequest, ModelReturn
    from converge_dsl.runtime import AnswerCaching, CallSpans

# The judge's answer cap: a verdict is one short object.
JUDGE_MAX_TOKENS = 512


@dataclass(frozen=True, slots=True)
class Verdict:
    """One judge metric's verdict on one case: its score (0 when `problem`; None when the
    evaluation's caps left no call to judge it, CD812), its reason."""

    metric: str
    score: float | None
    reason: str
    problem: Diagnostic | None = None


@dataclass(frozen=True, slots=True)
class JudgeOptions:
    """Where the judges' answers come from besides their models: the answer cache,
    a cassette recorded (`record`) or replayed (`replay`)."""

    caching: AnswerCaching | None = None
    record: Path | None = None
    replay: Path | None = None


class Judges:
    """The judge models of one evaluation on one event loop, built on first use."""

    def __init__(
        self,
        evaluation: EvalFile,
        *,
        env: Mapping[str, str],
        clock: Clock,
        options: JudgeOptions = JudgeOptions(),
        steps: Iterator[int] | None = None,
        fresh: bool = True,
        spans: CallSpans | None = None,
        configuration: str | None = None,
    ) -> None:
        """`steps` numbers the recorded calls (shared by the judges of every configuration
        of one evaluation); `fresh`: the first model recorded starts the cassette afresh
        (else every one appends to it)."""
        self._evaluation = evaluation
        self._env = env
        self._clock = clock
        self._options = options
        self._models: dict[str, Model] = {}
        self._steps = steps if steps is not None else itertools.count(1)
        self._recorded = not fresh
        # The judges' calls and tokens (answered calls; cached answers included).
        self.usage = [0, 0, 0]
        self._pool: BudgetPool | None = None
        self._spans = spans
        self._configuration = configuration

    def draw_from(self, pool: BudgetPool | None) -> None:
        """Count every later call in `pool`, the evaluation's caps (None: no cap)."""
        self._pool = pool

    @property
    def any(self) -> bool:
        return bool(self._evaluation.rubrics)

    def _model(self, name: str) -> Model:
        found = self._models.get(name)
        if found is not None:
            return found
        from converge_dsl.models import ReplayModel, build_model
        from converge_dsl.models.cassette import RecordingModel

        options = self._options
        model: Model
        if options.replay is not None:
            model = ReplayModel.from_file(options.replay, name=name, clock=self._clock)
        else:
            declared = self._evaluation.judges[name]
            model = build_model(
                name,
                declared.spec,
                base_dir=declared.base_dir,
                env=self._env,
                clock=self._clock,
                rng=random.Random(0),
                roots=self._evaluation.roots,
            )
            if options.caching is not None:
                model = options.caching.open(self._clock).wrap(name, model)
            if options.record is not None:
                append = self._recorded
                self._recorded = True
                model = RecordingModel(
                    model, options.record, append=append, name=name, steps=self._steps
                )
        self._models[name] = model
        return model

    async def verdicts(self, case: EvalCase, run: Mapping[str, Any]) -> dict[str, Verdict]:
        """Every judge metric's verdict on `case`, whose run result is `run`; none (no
        call) for a case expecting its run to be refused: it is measured by that alone."""
        if refused(case):
            return {}
        return {
            rubric.metric: await self._verdict(rubric, case, run)
            for rubric in self._evaluation.rubrics.values()
        }

    async def _verdict(self, rubric: Rubric, case: EvalCase, run: Mapping[str, Any]) -> Verdict:
        from converge_dsl.errors import ConvergeError
        from converge_dsl.models import Message, ModelError, ModelRequest
        from converge_dsl.sandbox import GLOBALS, render

        scope = {
            **GLOBALS,
            "case": {"name": case.name, "inputs": case.inputs, "expected": case.expected},
            "run": {
                "facts": run.get("facts") or {},
                "stop_reason": run.get("stop_reason"),
                "usage": run.get("usage") or {},
            },
        }
        try:
            text = render(rubric.template, scope)
        except ConvergeError as exc:
            return self._bad(rubric, case, codes.EVAL_BAD_RUBRIC, f"rubric failed: {exc.cited}")
        from converge_dsl.models import estimate_tokens

        estimate = estimate_tokens(rubric.system + text)
        answer_cap: int | None = JUDGE_MAX_TOKENS
        pool = self._pool
        if pool is not None:
            refused, answer_cap = pool.try_reserve(estimate, JUDGE_MAX_TOKENS)
            if refused is not None:
                return self._not_judged(rubric, case, pool, refused)
        held = estimate + (answer_cap or 0)
        spent, called = (0, 0), False
        try:
            model = self._model(rubric.model)
            request = ModelRequest(
                model=model.model_id(),
                messages=(Message.text("user", text),),
                system=(rubric.system,),
                max_tokens=answer_cap or JUDGE_MAX_TOKENS,
                temperature=0.0,
                suggestor=f"judge:{rubric.metric}",
                turn=0,
            )
            called = True
            answer = await self._call(rubric, case, model, request)
            spent = (answer.usage.input_tokens, answer.usage.output_tokens)
            self.usage[0] += 1
            self.usage[1] += spent[0]
            self.usage[2] += spent[1]
        except ModelError as exc:
            return self._bad(
                rubric,
                case,
                codes.EVAL_JUDGE_FAILED,
                f"judge call failed: {exc.coded_message}",
            )
        finally:
            if pool is not None:  # held -> spent in one step (a failed call is a call)
                pool.add(int(called), spent[0] + spent[1], -1, -held)
        score, reason, problem = parse_verdict(answer.text, rubric.verdict)
        if problem is not None:
            return self._bad(rubric, case, codes.EVAL_BAD_VERDICT, problem)
        return Verdict(rubric.metric, score, reason)

    async def _call(
        self, rubric: Rubric, case: EvalCase, model: Model, request: ModelRequest
    ) -> ModelReturn:
        """The judge's answer to `request`, its call a span under the evaluation's (with
        the case and the metric) when the evaluation is traced (`--otel`)."""
        if self._spans is None:
            return await model.call(request)
        from converge_dsl.models import ModelError
        from converge_dsl.models.factory import checked_spec
        from converge_dsl.runtime import facts_of

        declared = self._evaluation.judges[rubric.model]
        replayed = self._options.replay is not None
        facts = facts_of(rubric.model, checked_spec(rubric.model, declared.spec), model, replayed)
        extra: dict[str, str] = {
            "converge_dsl.eval.case": case.name,
            "converge_dsl.eval.metric": rubric.metric,
        }
        if self._configuration is not None:
            extra["converge_dsl.eval.configuration"] = self._configuration
        span = self._spans.call(facts, rubric.model, request, extra)
        try:
            answer = await model.call(request)
        except ModelError as exc:
            span.finished(None, exc.code.value)
            raise
        span.finished(answer)
        return answer

    def _not_judged(
        self, rubric: Rubric, case: EvalCase, pool: BudgetPool, reason: StopReason
    ) -> Verdict:
        cap = pool.limits.cap(reason)
        spent = "caps are" if cap is None else f"{cap.setting} {cap.limit} is"
        problem = f"not judged: the evaluation's {spent} spent"
        source_map = self._evaluation.document.source_map
        message = (
            f"judge {rubric.model!r} of metric {rubric.metric!r}, case {case.name!r}: {problem}"
        )
        hint = (
            "judge calls count toward --max-model-calls and --max-tokens with the cases' "
            "calls; raise the cap or judge fewer cases"
        )
        diagnostic = source_map.diagnostic(codes.EVAL_NOT_JUDGED, message, rubric.path, hint=hint)
        return Verdict(rubric.metric, None, problem, diagnostic)

    def _bad(self, rubric: Rubric, case: EvalCase, code: str, problem: str) -> Verdict:
        source_map = self._evaluation.document.source_map
        hint = {
            codes.EVAL_BAD_VERDICT: (
                'a verdict is {"score": 0..1, "reason": "..."}'
                if rubric.verdict == "score"
                else 'a verdict is {"pass": true|false, "reason": "..."}'
            ),
            codes.EVAL_JUDGE_FAILED: "check the judge model (its cassette, the answer cache, the "
            "provider); `converge-dsl explain CD807`",
        }.get(code, "a rubric reads `case` and `run`")
        message = (
            f"judge {rubric.model!r} of metric {rubric.metric!r}, case {case.name!r}: {problem}"
        )
        diagnostic = source_map.diagnostic(code, message, rubric.path, hint=hint)
        return Verdict(rubric.metric, 0.0, problem, diagnostic)

    async def aclose(self) -> None:
        for model in self._models.values():
            await model.aclose()
        self._models.clear()


def parse_verdict(text: str, verdict: str) -> tuple[float, str, str | None]:
    """(score, reason, None) from a judge's answer, or (0, "", what is wrong with it).

    What is wrong names each field that is missing or of the wrong kind, the value
    found where there is one, and ends with the answer the judge should give."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        value = loads(body)
    except (ValueError, RecursionError):
        return 0.0, "", f"the answer is not JSON: {_short(text)!r}"
    if not isinstance(value, dict):
        return 0.0, "", "the answer is not a JSON object"
    field, wanted = ("pass", "true or false") if verdict == "pass" else ("score", "a number")
    found = value.get(field, _MISSING)
    if verdict == "pass":
        fits = isinstance(found, bool)
    else:
        fits = isinstance(found, int | float) and not isinstance(found, bool)
    problems = [] if fits else [_wrong(field, found, wanted)]
    reason = value.get("reason", _MISSING)
    if not isinstance(reason, str):
        problems.append(_wrong("reason", reason, "text"))
    if problems:
        answer = _VERDICT_FORMS[verdict]
        return 0.0, "", f"the verdict {' and '.join(problems)}; a judge answers {answer}"
    if verdict == "pass":
        return float(found), reason, None
    if not 0.0 <= float(found) <= 1.0:
        return 0.0, "", f"the verdict's score {found} is not in [0, 1]"
    return float(found), reason, None


_VERDICT_FORMS = {
    "score": '{"score": a number from 0 to 1, "reason": "..."}',
    "pass": '{"pass": true or false, "reason": "..."}',
}
_KINDS = {str: "text", bool: "a boolean", dict: "an object", list: "a list"}
_MISSING = object()


def _wrong(field: str, value: object, wanted: str) -> str:
    """`field` missing, or of the wrong kind (its value shown, shortened)."""
    if value is _MISSING:
        return f"gives no `{field}` ({wanted})"
    if value is None:
        return f"gives `{field}` as null where {wanted} is needed"
    kind = _KINDS.get(type(value), "a number")
    shown = _short(json.dumps(value), 30)
    return f"gives `{field}` as {kind} ({shown}) where {wanted} is needed"


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
