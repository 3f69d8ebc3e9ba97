"""OpenTelemetry spans of model calls made outside a run: an evaluation's judges.

`CallSpans.start(name, attributes, options, env, clock)` opens one span (`name`,
e.g. `evaluate triage.eval.yaml`) on the telemetry a run would use (`--otel`,
the `OTEL_*` variables; None when export is off). `call(facts, request, extra)`
opens a `chat MODEL` span under it with the GenAI attributes a run's model-call
spans carry (`_otel_genai.call_started`, with `extra` attributes, e.g. the case
and the metric); `CallSpan.finished(answer, error)` adds what the answer says
(`call_finished`: tokens, response model, finish reason, `error.type`) and, with
`content` (`--otel-content`), the request and the answer, then ends it. `close()`
ends the outer span and flushes the export, bounded as a run's is.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from converge_dsl.clock import Clock

from ._options import OtelOptions

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from converge_dsl.models.port import ModelRequest, ModelReturn

    from ._otel import Telemetry
    from ._otel_genai import ModelFacts


@dataclass(frozen=True, slots=True)
class _Started:
    """What `call_started` reads of a model call (a run's `model_call_started` event)."""

    model: str
    call: int
    suggestor: str | None
    turn: int | None = None


@dataclass(frozen=True, slots=True)
class _Finished:
    """What `call_finished` reads of a model call (a run's `model_call_finished` event)."""

    input_tokens: int
    output_tokens: int
    model_id: str
    stop_reason: str | None
    account: str | None
    status: str
    attempts: int = 1
    status_code: int | None = None


class CallSpan:
    """One model call's open span (see the module docstring)."""

    def __init__(
        self, spans: CallSpans, span: Span, facts: ModelFacts, request: ModelRequest
    ) -> None:
        self._spans = spans
        self._span = span
        self._facts = facts
        self._request = request

    def finished(self, answer: ModelReturn | None, error: str | None = None) -> None:
        """End the span with `answer` (None: the call failed with the code `error`)."""
        from opentelemetry.trace import Status, StatusCode

        from . import _otel_genai as genai

        usage = answer.usage if answer is not None else None
        event = _Finished(
            input_tokens=0 if usage is None else usage.input_tokens,
            output_tokens=0 if usage is None else usage.output_tokens,
            model_id="" if answer is None else answer.model_id,
            stop_reason=None if answer is None else answer.stop_reason,
            account=None if answer is None else answer.account,
            status="ok" if answer is not None else (error or "error"),
        )
        self._span.set_attributes(genai.call_finished(self._facts, event))
        if self._spans.content:
            self._span.set_attributes(genai.content(self._request, answer, lambda text: text))
        if answer is None:
            self._span.set_status(Status(StatusCode.ERROR))
        self._span.end(end_time=self._spans.now())


class CallSpans:
    """An outer span and the model-call spans under it (see the module docstring)."""

    def __init__(self, telemetry: Telemetry, clock: Clock, name: str, attributes: Any) -> None:
        self._telemetry = telemetry
        self._clock = clock
        self._calls = itertools.count(1)
        self.content = telemetry.settings.content
        self._tracer = telemetry.recorder.tracer
        self._outer = self._tracer.start_span(name, attributes=attributes, start_time=self.now())

    @classmethod
    def start(
        cls,
        name: str,
        attributes: Mapping[str, Any],
        options: OtelOptions,
        env: Mapping[str, str],
        clock: Clock,
    ) -> CallSpans | None:
        """The spans on the telemetry `options` and `env` ask for, or None when export is
        off (`--otel` without the SDK: `OtelRefused`, as for a run)."""
        from ._telemetry import start_telemetry

        telemetry = start_telemetry(options, env, clock)
        return None if telemetry is None else cls(telemetry, clock, name, dict(attributes))

    def now(self) -> int:
        return self._telemetry.recorder.epoch_ns(self._clock.monotonic())

    def call(
        self, facts: ModelFacts, model: str, request: ModelRequest, extra: Mapping[str, Any]
    ) -> CallSpan:
        """Open the `chat MODEL` span of one call of the model named `model`."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        from . import _otel_genai as genai

        started = _Started(model, next(self._calls), request.suggestor)
        attributes = {**genai.call_started(facts, started), **extra}
        span = self._tracer.start_span(
            facts.span_name,
            context=trace.set_span_in_context(self._outer),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=self.now(),
        )
        return CallSpan(self, span, facts, request)

    def close(self) -> None:
        """End the outer span and export what is left (bounded; losses are a warning)."""
        self._outer.end(end_time=self.now())
        self._telemetry.close()
