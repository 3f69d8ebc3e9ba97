"""The runtime's side of OpenTelemetry export: whether a run exports, and what its spans say.

`start_telemetry(otel, env, clock)` -> `Telemetry | None`: None when export is off
(`_otel_config.otel_settings` over `env`, `otel.flag`, `otel.content`; an
`exporter` given in the `OtelOptions` turns it on
with that exporter). Only then is the OpenTelemetry SDK imported
(`converge_dsl.runtime._otel`). When it is not installed, `--otel` is refused
(`OtelRefused`, CD980, a usage error: exit 3) before any work, and export asked
for by `OTEL_*` variables alone is a warning (`otel.on_warning`). `OtelSink`
is export as one of the run's sinks (`_sinks.RunSink`).

`describe_run(telemetry, compiled, replayed)` tells the recorder what its
spans say about the pipeline (its name, each suggestor's kind, each model's
provider, requested model and server) and gives it the secret mask of the
run's models (their `redact`, the redactor of `converge_dsl.models`), through
which every recorded prompt and answer passes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.errors import UsageError

from ._options import OtelOptions
from ._otel_config import (
    INSTALL_HINT,
    OtelRefused,
    disabled_by_env,
    otel_settings,
)
from ._sinks import RunSink

if TYPE_CHECKING:
    from converge_dsl.compiler import CompiledPipeline, PipelineSettings
    from converge_dsl.frontend import SuggestorKind
    from converge_dsl.models.port import Model

    from ._otel import Telemetry
    from ._otel_genai import ModelFacts

# Request settings of a model declaration that the GenAI conventions name.
_REQUEST_KEYS = ("max_tokens", "temperature")


def _warn(options: OtelOptions, text: str) -> None:
    # A collector's answer (an HTTP reason phrase, an error body) is quoted in
    # the warning: escaped, it cannot drive the terminal.
    from converge_dsl.frontend import terminal_safe

    text = terminal_safe(text)
    if options.on_warning is not None:
        options.on_warning(text)
    else:
        sys.stderr.write(text + "\n")


def start_telemetry(options: OtelOptions, env: Mapping[str, str], clock: Clock) -> Telemetry | None:
    """The run's telemetry, or None when export is off (see the module docstring)."""
    settings = otel_settings(env, flag=options.flag, content=options.content)
    if settings is None and options.exporter is not None:
        # An exporter given in the options: on, whatever the variables say of exporters.
        settings = otel_settings(
            {k: v for k, v in env.items() if k != "OTEL_TRACES_EXPORTER"},
            flag=True,
            content=options.content,
        )
    if settings is None:
        if disabled_by_env(env):
            if options.flag:
                _warn(
                    options,
                    "warning: OTEL_SDK_DISABLED=true: --otel is ignored, no span is exported",
                )
        elif options.content:
            raise UsageError(
                "--otel-content records prompts and answers in exported spans, "
                "but no export is configured",
                hint="add --otel, or set OTEL_EXPORTER_OTLP_ENDPOINT",
                code=codes.ARGUMENTS_REFUSED,
            )
        return None
    try:
        from ._otel import Telemetry
    except ImportError:
        if options.flag:
            raise OtelRefused(
                codes.OTEL_NOT_INSTALLED,
                "--otel needs the OpenTelemetry SDK, which is not installed",
                hint=INSTALL_HINT,
            ) from None
        _warn(
            options,
            f"warning[{codes.OTEL_NOT_INSTALLED}]: OTEL_* variables ask for trace export, "
            f"but the OpenTelemetry SDK is not installed: no span is exported ({INSTALL_HINT})",
        )
        return None
    return Telemetry(
        settings,
        clock,
        lambda text: _warn(options, text),
        exporter=options.exporter,
    )


def model_facts(
    settings: PipelineSettings, replayed: Callable[[str], bool], models: Mapping[str, Model]
) -> dict[str, ModelFacts]:
    """`ModelFacts` by model name, from the declarations (and what replaced them).

    The requested model is the declaration's `model` (HTTP adapters), else the
    built model's id without its adapter prefix (`scripted:triage.script.yaml`).
    """
    return {
        name: facts_of(name, declaration.spec, models.get(name), replayed(name))
        for name, declaration in settings.models.items()
    }


def facts_of(name: str, spec: Any, built: Model | None, replay: bool) -> ModelFacts:
    """The `ModelFacts` of one model declared as `spec` (a typed model declaration), built
    as `built`, answered from a cassette when `replay` (`model_facts`; an evaluation's
    judges, declared as a pipeline's models are, too)."""
    from converge_dsl.frontend import HttpModelSpec

    from ._otel_genai import ModelFacts

    adapter = spec.adapter
    http = spec if isinstance(spec, HttpModelSpec) else None
    model_id = built.model_id() if built is not None else name
    request_model = str(
        (http.model if http is not None else None) or model_id.removeprefix(f"{adapter}:")
    )
    address: str | None = None
    port: int | None = None
    if http is not None and isinstance(http.base_url, str) and not replay:
        parts = urlsplit(http.base_url)
        address = parts.hostname
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = None
    numbers = {} if http is None else http.numbers
    request = tuple(
        (key, value)
        for key in _REQUEST_KEYS
        if isinstance(value := numbers.get(key), int | float) and not isinstance(value, bool)
    )
    return ModelFacts(
        adapter,
        request_model,
        "replay" if replay else adapter,
        address=address,
        port=port,
        request=request,
    )


def suggestor_kinds(compiled: CompiledPipeline) -> dict[str, SuggestorKind]:
    """Each compiled suggestor's kind by name (what spans call it: `SuggestorKind.telemetry`)."""
    kinds = {s.name: compiled.kind_of(s.name) for s in compiled.suggestors}
    return {name: kind for name, kind in kinds.items() if kind is not None}


def secret_mask(models: Mapping[str, Model]) -> Callable[[str], str]:
    """Every model's own redactor (`redact`, when it has one) applied in turn."""
    masks = [
        mask
        for mask in (getattr(model, "redact", None) for model in models.values())
        if callable(mask)
    ]

    def redact(text: str) -> str:
        for mask in masks:
            text = mask(text)
        return text

    return redact


def describe_run(
    telemetry: Telemetry,
    compiled: CompiledPipeline,
    replayed: Callable[[str], bool],
) -> None:
    """Tell `telemetry` about the compiled pipeline and its models (`replayed`: the
    names of models a cassette answers)."""
    settings, models = compiled.settings, compiled.models
    telemetry.describe(
        settings.name,
        suggestor_kinds(compiled),
        model_facts(settings, replayed, models),
        secret_mask(models),
    )


class OtelSink(RunSink):
    """OpenTelemetry export as one of the run's sinks: the recorder hears every event.

    `start` is None when export is off; it refuses `--otel` without the SDK
    (`OtelRefused`) before any work. `replayed` names the models a cassette answers.
    """

    listens = True

    def __init__(self, telemetry: Telemetry, replayed: Callable[[str], bool]) -> None:
        self.telemetry = telemetry
        self._replayed = replayed
        recorder = telemetry.recorder
        self.exchange = recorder.exchange if recorder.content else None

    def on_event(self, event: BaseModel) -> None:
        self.telemetry.recorder(event)

    @classmethod
    def start(
        cls,
        options: OtelOptions,
        env: Mapping[str, str],
        clock: Clock,
        replayed: Callable[[str], bool] = lambda name: False,
    ) -> OtelSink | None:
        telemetry = start_telemetry(options, env, clock)
        return None if telemetry is None else cls(telemetry, replayed)

    def on_compiled(self, compiled: CompiledPipeline, sources: Mapping[str, str]) -> None:
        describe_run(self.telemetry, compiled, self._replayed)

    def close(self) -> None:
        self.telemetry.close()  # bounded: a collector that is down only costs a warning
