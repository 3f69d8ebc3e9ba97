"""The span summarizer (docs/architecture.md §9): a budgeted side call that never blocks the loop.

`side_call` runs a summarizer off the event loop under a timeout: an async
summarizer as its own task, a synchronous one in a daemon thread (a thread
that overruns its timeout is abandoned, never joined). Every failure, blank
answer or timeout is reported as a fallback reason, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from converge_dsl.compiler import CompiledTemplate, UsageRecorder
from converge_dsl.models import metered_call
from converge_dsl.models.events import CALL_PURPOSE
from converge_dsl.models.port import Message, Model, ModelRequest

T = TypeVar("T")


class SpanSummarizer(Protocol):
    """Summarise a cleared span. `summarize` may be sync or async; it raises on failure."""

    def model_id(self) -> str: ...

    def summarize(self, span_text: str) -> str | Awaitable[str]: ...


class ModelSummarizer:
    """A summarizer backed by a model of the pipeline.

    With a `meter`, each call is made under a reservation of the run's meter
    (settled with the model's usage; a refusal raises, and the caller keeps the stub).
    """

    def __init__(
        self,
        model: Model,
        model_name: str,
        prompt: CompiledTemplate,
        *,
        suggestor: str,
        meter: UsageRecorder | None = None,
    ) -> None:
        self._model = model
        self._model_name = model_name
        self._prompt = prompt
        self._suggestor = suggestor
        self._meter = meter

    def model_id(self) -> str:
        return self._model.model_id()

    async def summarize(self, span_text: str) -> str:
        request = ModelRequest(
            model=self._model_name,
            messages=(
                Message.text(
                    "user", self._prompt.render({"span": span_text}, suggestor=self._suggestor)
                ),
            ),
            suggestor=self._suggestor,
        )
        said = CALL_PURPOSE.set("summary")  # the trace tells this call from the agent's turns
        try:
            metered = await metered_call(self._model, request, self._meter)
        finally:
            CALL_PURPOSE.reset(said)
        if metered is None:
            raise RuntimeError("the run's model budget is spent")
        return metered.answer.text


@dataclass(frozen=True, slots=True)
class SideCallResult:
    """`text` when a summary was taken, else `reason` (and `detail`) for the stub."""

    text: str | None
    reason: str | None = None
    detail: str = ""


async def _in_thread(fn: Callable[[str], Any], arg: str) -> Any:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            future.set_result(value) if ok else future.set_exception(value)

    def work() -> None:
        try:
            value, ok = fn(arg), True
        except BaseException as exc:  # reported to the awaiting side, whatever it is
            value, ok = exc, False
        # A closed loop raises RuntimeError: nobody waits for this answer any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, ok, value)

    threading.Thread(target=work, name="span-summarizer", daemon=True).start()
    return await future


async def side_call(summarizer: SpanSummarizer, span_text: str, timeout_s: float) -> SideCallResult:
    """Ask `summarizer` for a summary within `timeout_s`; never raises."""
    if inspect.iscoroutinefunction(summarizer.summarize):
        work: Awaitable[Any] = summarizer.summarize(span_text)
    else:
        work = _in_thread(summarizer.summarize, span_text)
    try:
        text = await asyncio.wait_for(work, timeout_s)
    except TimeoutError:
        return SideCallResult(None, "timeout", f"no answer within {timeout_s:g}s")
    except Exception as exc:  # any summarizer failure keeps the stub (docs/architecture.md §9)
        return SideCallResult(None, "error", str(exc) or type(exc).__name__)
    if not isinstance(text, str) or not text.strip():
        return SideCallResult(None, "blank", "the summarizer answered nothing")
    return SideCallResult(text.strip())
