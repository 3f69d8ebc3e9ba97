"""The runtime's side of OpenTelemetry export: whether a run exports, and what its spans say.

`start_telemetry(options)` -> `Telemetry | None`: None when export is off
(`_otel_config.otel_settings` over `options.env`, `options.otel`,
`options.otel_content`; a `span_exporter` given in the options turns it on
with that exporter). Only then is the OpenTelemetry SDK imported
(`converge_dsl.runtime._otel`). When it is not installed, `--otel` is refused
(`OtelRefused`, CD980, a usage error: exit 3) before any work, and export asked
for by `OTEL_*` variables alone is a warning (`options.on_warning`).

`describe_run(telemetry, settings, models, specs)` tells the recorder what its
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

from converge_dsl import codes
from converge_dsl.errors import UsageError

from ._options import RunOptions
from ._otel_config import (
    INSTALL_HINT,
    OtelRefused,
    disabled_by_env,
    otel_settings,
)

if TYPE_CHECKING:
    from converge_dsl.compiler import CompiledPipeline, PipelineSettings
    from converge_dsl.frontend import SuggestorKind
    from converge_dsl.models.port import Model

    from ._otel import Telemetry

# Request settings of a model declaration that the GenAI conventions name.
_REQUEST_KEYS = ("max_tokens", "temperature")


def _warn(options: RunOptions, text: str) -> None:
    # A collector's answer (an HTTP reason phrase, an error body) is quoted in
    # the warning: escaped, it cannot drive the terminal.
    from converge_dsl.frontend import terminal_safe

    text = terminal_safe(text)
    if options.on_warning is not None:
        options.on_warning(text)
    else:
        sys.stderr.write(text + "\n")


def start_telemetry(options: RunOptions) -> Telemetry | None:
    """The run's telemetry, or None when export is off (see the module docstring)."""
    settings = otel_settings(options.env, flag=options.otel, content=options.otel_content)
    if settings is None and options.span_exporter is not None:
        # An exporter given in the options: on, whatever the variables say of exporters.
        settings = otel_settings(
            {k: v for k, v in options.env.items() if k != "OTEL_TRACES_EXPORTER"},
            flag=True,
            content=options.otel_content,
        )
    if settings is None:
        if disabled_by_env(options.env):
            if options.otel:
                _warn(
                    options,
                    "warning: OTEL_SDK_DISABLED=true: --otel is ignored, no span is exported",
                )
        elif options.otel_content:
            raise UsageError(
                "--otel-content records prompts and answers in exported spans, "
                "but no export is configured",
                hint="add --otel, or set OTEL_EXPORTER_OTLP_ENDPOINT",
            )
        return None
    try:
        from ._otel import Telemetry
    except ImportError:
        if options.otel:
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
        options.clock,
        lambda text: _warn(options, text),
        exporter=options.span_exporter,
    )


def model_facts(
    settings: PipelineSettings, options: RunOptions, models: Mapping[str, Model]
) -> dict[str, Any]:
    """`ModelFacts` by model name, from the declarations (and what replaced them).

    The requested model is the declaration's `model` (HTTP adapters), else the
    built model's id without its adapter prefix (`scripted:triage.script.yaml`).
    """
    from ._otel_genai import ModelFacts

    facts: dict[str, Any] = {}
    for name, declaration in settings.models.items():
        config = declaration.config
        adapter = str(config.get("adapter", ""))
        built = models.get(name)
        model_id = built.model_id() if built is not None else name
        request_model = str(config.get("model") or model_id.removeprefix(f"{adapter}:"))
        replayed = options.replay is not None or name in options.model_overrides
        address: str | None = None
        port: int | None = None
        base_url = config.get("base_url")
        if isinstance(base_url, str) and not replayed:
            parts = urlsplit(base_url)
            address = parts.hostname
            try:
                port = parts.port or (443 if parts.scheme == "https" else 80)
            except ValueError:
                port = None
        request = tuple(
            (key, config[key])
            for key in _REQUEST_KEYS
            if isinstance(config.get(key), int | float) and not isinstance(config.get(key), bool)
        )
        facts[name] = ModelFacts(
            adapter,
            request_model,
            "replay" if replayed else adapter,
            address=address,
            port=port,
            request=request,
        )
    return facts


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
    options: RunOptions,
) -> None:
    """Tell `telemetry` about the compiled pipeline and its models."""
    settings, models = compiled.settings, compiled.models
    telemetry.describe(
        settings.name,
        suggestor_kinds(compiled),
        model_facts(settings, options, models),
        secret_mask(models),
    )
