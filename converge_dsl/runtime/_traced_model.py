"""Model-call events in the trace: a `Model` wrapper that reports each call to the run's sink.

`CallTracer` numbers a run's calls in the order they start and wraps each
model of the run (`tracer.wrap(name, model)`) when the run's events go
somewhere. The wrapper emits `model_call_started`, one `model_call_attempt`
per request an adapter reports (`converge_dsl.models.events.ATTEMPT_OBSERVER`),
and `model_call_finished` with the status, the tokens and the latency
(`timing.duration_s`). The suggestor is the engine's `SPENDER` of the task
making the call, the purpose what the call is for (`models.events.purpose_of`:
an agent's turn, its summarizer's side call, or an answer). Prompts and answers
are never put in these events.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from converge_dsl.clock import Clock
from converge_dsl.engine import Timing
from converge_dsl.engine.budget import SPENDER
from converge_dsl.engine.events import from_fields
from converge_dsl.models import CALL_NOTE, CallNote
from converge_dsl.models.events import (
    ATTEMPT_OBSERVER,
    AttemptReport,
    ModelCallAttempt,
    ModelCallFinished,
    ModelCallStarted,
    purpose_of,
)
from converge_dsl.models.port import (
    Model,
    ModelError,
    ModelRequest,
    ModelReturn,
    ModelWrapper,
    OnEarlyToolCall,
    OnIncrement,
)

# Hears a call's request (and its answer, None when it failed) just before its
# `model_call_finished` event: what OpenTelemetry records when content is opted in.
Exchanges = Callable[[int, ModelRequest, ModelReturn | None], None]


class CallTracer:
    """Numbers the calls of one run and wraps its models so each call is traced.

    `exchanges`, when given, hears each call's request and answer (`Exchanges`);
    the events themselves never hold either.
    """

    def __init__(
        self, sink: Callable[[BaseModel], None], clock: Clock, exchanges: Exchanges | None = None
    ) -> None:
        self.emit = sink
        self._clock = clock
        self._calls = 0
        self.exchanges = exchanges

    def wrap(self, name: str, model: Model) -> Model:
        return TracedModel(name, model, self)

    def next_call(self) -> int:
        self._calls += 1
        return self._calls

    def timing(self, at: float, duration: float | None = None) -> Timing:
        return from_fields(Timing, {"at": at, "duration_s": duration})

    def now(self) -> float:
        return self._clock.monotonic()


class TracedModel(ModelWrapper):
    """Forwards every call to `inner`, emitting the model-call events around it."""

    def __init__(self, name: str, inner: Model, tracer: CallTracer) -> None:
        self._name = name
        self._inner = inner
        self._tracer = tracer

    def __repr__(self) -> str:
        return f"TracedModel({self._inner!r})"

    def model_id(self) -> str:
        return self._inner.model_id()

    def redact(self, text: str) -> str:
        """`text` with the wrapped model's secrets masked (unchanged when it has none)."""
        redactor = getattr(self._inner, "redact", None)
        return redactor(text) if callable(redactor) else text

    async def call(self, req: ModelRequest) -> ModelReturn:
        return await self._traced(req, lambda: self._inner.call(req))

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        return await self._traced(req, lambda: self._inner.call_streaming(req, on_increment))

    async def call_speculating(
        self, req: ModelRequest, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> ModelReturn:
        return await self._traced(
            req, lambda: self._inner.call_speculating(req, on_increment, on_early_call)
        )

    async def _traced(
        self, req: ModelRequest, make: Callable[[], Awaitable[ModelReturn]]
    ) -> ModelReturn:
        tracer = self._tracer
        call, suggestor, started = tracer.next_call(), SPENDER.get(), tracer.now()
        common: dict[str, object] = {
            "call": call,
            "model": self._name,
            "suggestor": suggestor,
            "purpose": purpose_of(req.turn),
        }
        tracer.emit(
            from_fields(
                ModelCallStarted, {**common, "turn": req.turn, "timing": tracer.timing(started)}
            )
        )
        attempts: list[AttemptReport] = []

        def observe(report: AttemptReport) -> None:
            attempts.append(report)
            tracer.emit(
                from_fields(
                    ModelCallAttempt,
                    {
                        **common,
                        "attempt": len(attempts),
                        "account": report.account,
                        "status_code": report.status_code,
                        "error": report.error,
                        "timing": tracer.timing(report.ended, report.ended - report.started),
                    },
                )
            )

        token = ATTEMPT_OBSERVER.set(observe)
        note, outer = CallNote(), CALL_NOTE.get()
        noting = CALL_NOTE.set(note)
        try:
            answer = await make()
        except ModelError as exc:
            self._exchange(call, req, None)
            self._finished(common, started, attempts, status=exc.code.value)
            raise
        except Exception:
            self._exchange(call, req, None)
            self._finished(common, started, attempts, status="error")
            raise
        except BaseException:  # cancelled in flight (a deadline, a sibling's failure)
            self._exchange(call, req, None)
            self._finished(common, started, attempts, status="cancelled")
            raise
        finally:
            ATTEMPT_OBSERVER.reset(token)
            CALL_NOTE.reset(noting)
        if note.cached and outer is not None:
            outer.cached = True
        self._exchange(call, req, answer)
        self._finished(common, started, attempts, status="ok", answer=answer, cached=note.cached)
        return answer

    def _exchange(self, call: int, req: ModelRequest, answer: ModelReturn | None) -> None:
        exchanges = self._tracer.exchanges
        if exchanges is not None:
            exchanges(call, req, answer)

    def _finished(
        self,
        common: dict[str, object],
        started: float,
        attempts: list[AttemptReport],
        *,
        status: str,
        answer: ModelReturn | None = None,
        cached: bool = False,
    ) -> None:
        tracer = self._tracer
        end = tracer.now()
        last = attempts[-1] if attempts else None
        event = from_fields(
            ModelCallFinished,
            {
                **common,
                "status": status,
                "status_code": None if last is None else last.status_code,
                "attempts": max(1, len(attempts)),
                "model_id": None if answer is None else answer.model_id,
                "account": answer.account if answer is not None else (last and last.account),
                "input_tokens": 0 if answer is None else answer.usage.input_tokens,
                "output_tokens": 0 if answer is None else answer.usage.output_tokens,
                "stop_reason": None if answer is None else answer.stop_reason,
                "cached": True if cached else None,
                "timing": tracer.timing(end, end - started),
            },
        )
        tracer.emit(event)
