"""OpenTelemetry export of a run: the SDK set up from `OtelSettings`, and its bounded end.

`Telemetry(settings, clock, warn, exporter=None)`: one run's export, made by
`_telemetry.start_telemetry(options)` when export is on; that is the only
importer of this module, the one place that imports the OpenTelemetry SDK
(without it, `start_telemetry` refuses `--otel` or warns; see there). A
setting the SDK refuses is an `OtelRefused` (CD981) raised from here.

`Telemetry.recorder` (a `SpanRecorder`) listens to the run's events. Spans go
through a batch processor to the exporter on a background thread, so a slow
or absent collector never slows the run; the exporter is wrapped so that its
failures are counted instead of logged. `close()` waits for the spans still
queued for at most `OtelSettings.flush_s` seconds and then says on stderr
(through `warn`, code CD982) how many spans were not delivered and why: an
exporter failure never fails the run nor changes its exit code.

The provider is the run's own (never the process's global one), so runs in
one process (tests, batches) never share exporters. A run inside the caller's
current span becomes its child.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from converge_dsl import codes
from converge_dsl._urls import display_url as display
from converge_dsl.clock import Clock
from converge_dsl.frontend import SuggestorKind

from ._otel_config import OtelRefused, OtelSettings
from ._otel_genai import ModelFacts
from ._otel_spans import SpanRecorder
from ._trace import wall_clock

Warn = Callable[[str], object]
# The SDK's loggers: their messages are gathered into one warning at the end.
_LOGGER = "opentelemetry"
# How long the end of a run still waits once the exporter has failed (it retries).
_GRACE_S = 1.0
_ERRNO = re.compile(r"\[Errno -?\d+\] [^\"')(]+")


def _reason(message: str) -> str:
    """The gist of an exporter failure: the system error when there is one."""
    found = _ERRNO.search(message)
    return found.group(0).strip() if found else message[:160]


class _QuietLogger:
    """Keeps the SDK's logger from propagating while any export is open.

    Runs export at once (batch cases on one loop, nested runs): each saving and
    restoring the flag itself would interleave and leave it off, so the first to
    enter saves it and the last to leave gives it back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._saved = True

    def enter(self) -> None:
        with self._lock:
            logger = logging.getLogger(_LOGGER)
            if self._open == 0:
                self._saved = logger.propagate
                logger.propagate = False
            self._open += 1

    def leave(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0:
                logging.getLogger(_LOGGER).propagate = self._saved


_QUIET = _QuietLogger()


class _Problems(logging.Handler):
    """Keeps the first few messages the SDK logs (instead of printing them)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.first_at: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.first_at is None:
            self.first_at = time.monotonic()
        if len(self.messages) < 5:
            try:
                self.messages.append(record.getMessage().splitlines()[0][:300])
            except Exception:  # a malformed log record must not break the export thread
                self.messages.append(record.msg if isinstance(record.msg, str) else "error")


class CountingExporter(SpanExporter):
    """Forwards to `inner`, counting spans delivered and lost; never raises.

    Once `stop()` is called every further batch is refused at once: the run's
    end has waited long enough.
    """

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.sent = 0
        self.lost = 0
        self.error: str | None = None
        self._stopped = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped:
            self._count(len(spans), ok=False)
            return SpanExportResult.FAILURE
        try:
            result = self._inner.export(spans)
        except Exception as exc:
            with self._lock:
                self.error = self.error or f"{type(exc).__name__}: {exc}"[:300]
            result = SpanExportResult.FAILURE
        self._count(len(spans), ok=result is SpanExportResult.SUCCESS)
        return result

    def _count(self, spans: int, *, ok: bool) -> None:
        with self._lock:
            if ok:
                self.sent += spans
            else:
                self.lost += spans

    def stop(self) -> None:
        self._stopped = True

    def shutdown(self) -> None:
        try:
            self._inner.shutdown()
        except Exception as exc:
            self.error = self.error or f"{type(exc).__name__}: {exc}"[:300]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def otlp_exporter(settings: OtelSettings) -> SpanExporter:
    """The exporter `settings` name, every value passed in (none read from the environment)."""
    if settings.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(
        endpoint=settings.endpoint,
        certificate_file=settings.certificate,
        headers=dict(settings.headers),
        timeout=settings.timeout_s,
        compression=Compression.Gzip
        if settings.compression == "gzip"
        else Compression.NoCompression,
        session=capped_session(MAX_RESPONSE_BYTES),
    )


# What a collector's answer may hold: an OTLP answer is a few bytes (a partial-success
# message at most), so anything larger is refused as it arrives.
MAX_RESPONSE_BYTES = 1 << 20
_CHUNK = 64 * 1024


class ResponseTooLarge(OSError):
    """A collector answered more than the cap (the export fails; the run goes on)."""


def capped_session(cap: int) -> Any:
    """A `requests.Session` that reads at most `cap` bytes of any answer.

    Every request streams its answer and reads it chunk by chunk; past `cap`
    bytes the connection is closed and `ResponseTooLarge` raised, which the
    exporter reports as a failed export. So a hostile collector answering an
    endless body costs `cap` bytes of memory, not the body's size.
    """
    import requests

    class CappedSession(requests.Session):
        def request(self, *args: Any, **kwargs: Any) -> requests.Response:
            kwargs["stream"] = True
            response = super().request(*args, **kwargs)
            body = bytearray()
            try:
                for chunk in response.iter_content(_CHUNK):
                    body += chunk
                    if len(body) > cap:
                        raise ResponseTooLarge(f"the collector's answer is over {cap} bytes")
            finally:
                response.close()
            response._content = bytes(body)
            return response

    return CappedSession()


def sampler(settings: OtelSettings) -> Sampler:
    """The sampler `OTEL_TRACES_SAMPLER` names (`_otel_config.SAMPLERS`)."""
    name = settings.sampler.removeprefix("parentbased_")
    root: Sampler = {"always_on": ALWAYS_ON, "always_off": ALWAYS_OFF}.get(
        name, TraceIdRatioBased(settings.sampler_arg)
    )
    return ParentBased(root) if settings.sampler.startswith("parentbased_") else root


class Telemetry:
    """One run's tracer provider, its recorder, and the bounded end of its export."""

    def __init__(
        self,
        settings: OtelSettings,
        clock: Clock,
        warn: Warn,
        exporter: SpanExporter | None = None,
    ) -> None:
        from converge_dsl._version import __version__

        self.settings = settings
        self._warn = warn
        self._problems = _Problems()
        logging.getLogger(_LOGGER).addHandler(self._problems)
        _QUIET.enter()
        self._quiet = True
        attributes: dict[str, Any] = {"service.version": __version__, **dict(settings.resource)}
        attributes |= {"service.name": settings.service_name, "telemetry.sdk.language": "python"}
        attributes["telemetry.sdk.name"] = "opentelemetry"
        try:
            self._exporter = CountingExporter(exporter or otlp_exporter(settings))
        except Exception as exc:  # the SDK's own refusal of a setting: ours to report
            self._restore()
            raise OtelRefused(
                codes.OTEL_BAD_CONFIG,
                f"the trace exporter cannot be set up: {type(exc).__name__}: {exc}"[:300],
                hint="check the OTEL_EXPORTER_OTLP_* variables",
            ) from None
        self._processor = BatchSpanProcessor(
            self._exporter,
            max_queue_size=8192,
            schedule_delay_millis=1000,
            max_export_batch_size=512,
            export_timeout_millis=settings.timeout_s * 1000,
        )
        self._provider = TracerProvider(
            sampler=sampler(settings),
            resource=Resource(attributes),
            span_limits=SpanLimits(
                max_attributes=128, max_events=128, max_links=128, max_attribute_length=None
            ),
        )
        self._provider.add_span_processor(self._processor)
        tracer = self._provider.get_tracer("converge_dsl", __version__)
        wall = wall_clock(clock).wall().timestamp()
        self.recorder = SpanRecorder(
            tracer, clock.monotonic, wall - clock.monotonic(), content=settings.content
        )
        self._closed = False

    def describe(
        self,
        pipeline: str,
        kinds: Mapping[str, SuggestorKind],
        models: Mapping[str, ModelFacts],
        redact: Callable[[str], str],
    ) -> None:
        """What the spans say about the pipeline, its suggestors and models; the secret mask."""
        self.recorder.describe(pipeline, kinds, models, redact)

    def close(self) -> None:
        """End open spans, wait at most `flush_s` for the queue, then warn about losses."""
        if self._closed:
            return
        self._closed = True
        self.recorder.finish()
        done = threading.Event()

        def flush() -> None:
            try:
                self._processor.force_flush()
                self._processor.shutdown()  # type: ignore[no-untyped-call]
            finally:
                done.set()

        worker = threading.Thread(target=flush, name="converge-dsl-otel-flush", daemon=True)
        worker.start()
        in_time = self._wait(done)
        self._exporter.stop()
        if not in_time:
            self._exporter.shutdown()  # interrupts the exporter's retry wait
            worker.join(0.2)
        if not worker.is_alive():  # else the thread may still log: keep it quiet
            self._restore()
        self._report(in_time)

    def _restore(self) -> None:
        """Give the SDK's logger back as it was."""
        logging.getLogger(_LOGGER).removeHandler(self._problems)
        if self._quiet:
            self._quiet = False
            _QUIET.leave()

    def _wait(self, done: threading.Event) -> bool:
        """Wait for the flush: at most `flush_s`, and at most `_GRACE_S` after the exporter
        first failed (a collector that is down refuses at once; its retries would only
        hold the command). Real time, not the run's clock: this bounds a real thread."""
        deadline = time.monotonic() + self.settings.flush_s
        while not done.wait(0.02):
            now, failed = time.monotonic(), self._problems.first_at
            if now >= deadline or (failed is not None and now - failed >= _GRACE_S):
                return False
        return True

    def _report(self, in_time: bool) -> None:
        exporter = self._exporter
        where = (
            "the console"
            if self.settings.exporter == "console"
            else repr(display(self.settings.endpoint))
        )
        if self.recorder.failure is not None:
            self._warn(
                f"warning[{codes.OTEL_EXPORT_FAILED}]: OpenTelemetry: recording spans stopped "
                f"({self.recorder.failure}); the run itself is not affected"
            )
        if in_time and not exporter.lost and not exporter.error:
            return
        reasons = [r for r in (exporter.error, *self._problems.messages) if r]
        why = (
            f" ({_reason(reasons[0])})"
            if reasons
            else f" (no answer within {self.settings.flush_s:g} s)"
        )
        if not in_time:
            problem = f"spans could not be sent to {where}"
        else:
            total = exporter.sent + exporter.lost
            problem = f"{exporter.lost} of {total} span(s) could not be sent to {where}"
        self._warn(
            f"warning[{codes.OTEL_EXPORT_FAILED}]: OpenTelemetry: {problem}{why}; "
            "the run itself is not affected (is the collector running? "
            "see OTEL_EXPORTER_OTLP_ENDPOINT)"
        )
