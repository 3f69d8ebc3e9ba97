"""Whether and how a run exports OpenTelemetry traces, read from the environment it is given.

`otel_settings(env, flag=..., content=...)` -> `OtelSettings | None`: None
when export is off. It is on when `--otel` is given (`flag`) or a standard
variable of `env` configures a trace exporter: `OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER` set to
anything but `none`. `OTEL_SDK_DISABLED=true` turns it off whatever else says
(`disabled_by_env` tells the caller so it can say `--otel` was ignored).

Only the variables of `env` are read, never the process's environment: the
OpenTelemetry SDK is handed every value it needs (endpoint, headers, timeout,
compression, certificate, service name, resource attributes, sampler). Supported:
`OTEL_TRACES_EXPORTER` `otlp` (the default) or `console` (spans as JSON on
standard error); the OTLP protocol `http/protobuf` only. Anything else, or a
malformed value, is an `OtelRefused` (a `UsageError`, code CD981) before the
run starts.

Prompts and answers are recorded only when the user opts in: `--otel-content`
(`content`) or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, the
variable of the OpenTelemetry GenAI conventions.

This module imports nothing from OpenTelemetry: it decides whether the SDK
is needed at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

from converge_dsl import codes
from converge_dsl._record import Record
from converge_dsl._urls import display_url
from converge_dsl.errors import UsageError

INSTALL_HINT = "pip install 'converge-dsl[otel]'"
DEFAULT_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "/v1/traces"
DEFAULT_TIMEOUT_S = 10.0
# Longest the end of a run waits for spans still queued (a collector that is down
# or slow never holds the command longer than this).
MAX_FLUSH_S = 5.0
DEFAULT_SERVICE = "converge-dsl"
EXPORTERS = ("otlp", "console")
PROTOCOLS = ("http/protobuf",)
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class OtelRefused(UsageError):
    """The OpenTelemetry configuration cannot be used; `code` is its CD98x code."""

    code: str

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"OpenTelemetry: {message}", hint=hint, code=code)


class OtelSettings(Record):
    """How spans are exported: `exporter` `otlp` (to `endpoint`, the full traces URL)
    or `console`; `content` records prompts and answers (redacted)."""

    _fields = (
        "exporter",
        "endpoint",
        "headers",
        "timeout_s",
        "compression",
        "certificate",
        "service_name",
        "resource",
        "content",
        "sampler",
        "sampler_arg",
    )
    __slots__ = _fields

    def __init__(
        self,
        exporter: str,
        endpoint: str,
        *,
        headers: tuple[tuple[str, str], ...] = (),
        timeout_s: float = DEFAULT_TIMEOUT_S,
        compression: str | None = None,
        certificate: str | None = None,
        service_name: str = DEFAULT_SERVICE,
        resource: tuple[tuple[str, str], ...] = (),
        content: bool = False,
        sampler: str = "parentbased_always_on",
        sampler_arg: float = 1.0,
    ) -> None:
        self.exporter = exporter
        self.endpoint = endpoint
        self.headers = headers
        self.timeout_s = timeout_s
        self.compression = compression
        self.certificate = certificate
        self.service_name = service_name
        self.resource = resource
        self.content = content
        self.sampler = sampler
        self.sampler_arg = sampler_arg

    @property
    def flush_s(self) -> float:
        """How long the end of a run waits for queued spans at most."""
        return min(self.timeout_s, MAX_FLUSH_S)


def _get(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()


def _traces_variable(env: Mapping[str, str], setting: str) -> str:
    """`OTEL_EXPORTER_OTLP_TRACES_<SETTING>` when it is set, else `OTEL_EXPORTER_OTLP_<SETTING>`
    (the specification's rule: the per-signal variable wins)."""
    specific = f"OTEL_EXPORTER_OTLP_TRACES_{setting}"
    return specific if _get(env, specific) else f"OTEL_EXPORTER_OTLP_{setting}"


def _true(env: Mapping[str, str], name: str) -> bool:
    return _get(env, name).lower() == "true"


def disabled_by_env(env: Mapping[str, str]) -> bool:
    """`OTEL_SDK_DISABLED=true`: no telemetry, whatever else is configured."""
    return _true(env, "OTEL_SDK_DISABLED")


def configured_by_env(env: Mapping[str, str]) -> bool:
    """True when a standard variable configures a trace exporter (see the module docstring)."""
    if _get(env, "OTEL_EXPORTER_OTLP_ENDPOINT") or _get(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return True
    exporter = _get(env, "OTEL_TRACES_EXPORTER").lower()
    return bool(exporter) and exporter != "none"


def content_opted_in(env: Mapping[str, str], flag: bool) -> bool:
    """Whether prompts and answers may be recorded (`--otel-content` or the GenAI variable)."""
    return flag or _true(env, CONTENT_VARIABLE)


def otel_settings(
    env: Mapping[str, str], *, flag: bool = False, content: bool = False
) -> OtelSettings | None:
    """The export settings `env` and the flags ask for; None when export is off."""
    if disabled_by_env(env) or not (flag or configured_by_env(env)):
        return None
    exporter = _exporter(env)
    if exporter == "none":  # only `--otel` turned it on; the variable says no exporter
        return None
    _protocol(env)
    return OtelSettings(
        exporter,
        _endpoint(env),
        headers=_headers(env),
        timeout_s=_timeout(env),
        compression=_compression(env),
        certificate=_certificate(env),
        service_name=_get(env, "OTEL_SERVICE_NAME") or _service(env),
        resource=_pairs(env, "OTEL_RESOURCE_ATTRIBUTES"),
        content=content_opted_in(env, content),
        sampler=_sampler(env),
        sampler_arg=_sampler_arg(env),
    )


def _first(env: Mapping[str, str], *names: str) -> str:
    """The first of `names` set in `env`: the traces-specific variable before the general one."""
    for name in names:
        value = _get(env, name)
        if value:
            return value
    return ""


def _refuse(variable: str, value: str, why: str, hint: str) -> OtelRefused:
    return OtelRefused(codes.OTEL_BAD_CONFIG, f"{variable}={value!r}: {why}", hint=hint)


def _exporter(env: Mapping[str, str]) -> str:
    raw = _get(env, "OTEL_TRACES_EXPORTER")
    names = [part.strip().lower() for part in raw.split(",") if part.strip()] or ["otlp"]
    if len(names) > 1:
        raise _refuse(
            "OTEL_TRACES_EXPORTER", raw, "only one trace exporter is supported", "e.g. otlp"
        )
    name = names[0]
    if name not in (*EXPORTERS, "none"):
        raise _refuse(
            "OTEL_TRACES_EXPORTER",
            raw,
            "this trace exporter is not supported",
            f"use one of: {', '.join(EXPORTERS)}, none",
        )
    return name


def _protocol(env: Mapping[str, str]) -> None:
    variable = _traces_variable(env, "PROTOCOL")
    value = _get(env, variable)
    if value and value not in PROTOCOLS:
        raise _refuse(
            variable,
            value,
            "only OTLP over HTTP with protobuf is supported",
            "set it to http/protobuf (a collector's port 4318), or unset it",
        )


def _endpoint(env: Mapping[str, str]) -> str:
    """The full traces URL: the traces variable as given, else the base one + `/v1/traces`."""
    variable = _traces_variable(env, "ENDPOINT")
    specific = _get(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = specific or _get(env, "OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
    shown = display_url(base)
    try:
        parts = urlsplit(base)
        parts.port  # noqa: B018 - a port out of range raises
    except ValueError as exc:
        why = "the port is not a number from 1 to 65535" if "ort" in str(exc) else "not a URL"
        raise _refuse(variable, shown, why, f"e.g. {variable}=http://127.0.0.1:4318") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse(
            variable, shown, "not an http(s) URL", f"e.g. {variable}=http://127.0.0.1:4318"
        )
    return base if specific else base.rstrip("/") + TRACES_PATH


def _pairs(env: Mapping[str, str], *names: str) -> tuple[tuple[str, str], ...]:
    """`key1=value1,key2=value2` (values URL-encoded, as the specification says)."""
    raw = _first(env, *names)
    variable = next((n for n in names if _get(env, n)), names[0])
    pairs: list[tuple[str, str]] = []
    for item in raw.split(","):
        if not item.strip():
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            # The value may hold a credential: name the variable, never echo it.
            raise OtelRefused(
                codes.OTEL_BAD_CONFIG,
                f"{variable} is not a comma-separated list of key=value",
                hint="e.g. key1=value1,key2=value2 (values URL-encoded)",
            )
        pairs.append((unquote(key.strip()), unquote(value.strip())))
    return tuple(pairs)


# An HTTP field name (RFC 9110 token) and a value HTTP can carry (no line break or
# other control character, Latin-1, no leading blank).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"(?:[^\x00-\x20\x7f-\x9f][^\x00-\x08\x0a-\x1f\x7f-\x9f]*)?")


def _headers(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The OTLP headers, each one HTTP can send: refused now, and by position, never
    by value (a value is often a credential, and the SDK's own error quotes it)."""
    names = ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
    variable = next((n for n in names if _get(env, n)), names[1])
    pairs = _pairs(env, *names)
    for number, (key, value) in enumerate(pairs, start=1):
        latin = all(ord(c) < 0x100 for c in value)
        if not _HEADER_NAME.fullmatch(key) or not latin or not _HEADER_VALUE.fullmatch(value):
            what = "name" if not _HEADER_NAME.fullmatch(key) else f"value of {key!r}"
            raise OtelRefused(
                codes.OTEL_BAD_CONFIG,
                f"{variable}: header {number} has a {what} HTTP cannot send "
                "(a line break, a control or non-Latin-1 character, or a leading blank)",
                hint="URL-encode the header as key=value; its value is not shown here",
            )
    return pairs


def _timeout(env: Mapping[str, str]) -> float:
    variable = _traces_variable(env, "TIMEOUT")
    raw = _get(env, variable)
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        millis = float(raw)
    except ValueError:
        millis = -1.0
    if not millis > 0 or millis == float("inf"):
        raise _refuse(variable, raw, "not a positive number of milliseconds", "e.g. 10000")
    return millis / 1000.0


def _compression(env: Mapping[str, str]) -> str | None:
    variable = _traces_variable(env, "COMPRESSION")
    raw = _get(env, variable).lower()
    if raw in ("", "none"):
        return None
    if raw != "gzip":
        raise _refuse(variable, raw, "not a supported compression", "use gzip or none")
    return raw


def _service(env: Mapping[str, str]) -> str:
    """`service.name` from `OTEL_RESOURCE_ATTRIBUTES`, else converge-dsl."""
    for key, value in _pairs(env, "OTEL_RESOURCE_ATTRIBUTES"):
        if key == "service.name" and value:
            return value
    return DEFAULT_SERVICE


def _sampler(env: Mapping[str, str]) -> str:
    """`OTEL_TRACES_SAMPLER` (default `parentbased_always_on`, as the specification says)."""
    raw = _get(env, "OTEL_TRACES_SAMPLER")
    name = raw.lower() or "parentbased_always_on"
    if name not in SAMPLERS:
        raise _refuse(
            "OTEL_TRACES_SAMPLER",
            raw,
            "not a supported sampler",
            f"use one of: {', '.join(SAMPLERS)}",
        )
    return name


def _sampler_arg(env: Mapping[str, str]) -> float:
    """`OTEL_TRACES_SAMPLER_ARG`: the ratio of the `traceidratio` samplers, 0 to 1."""
    raw = _get(env, "OTEL_TRACES_SAMPLER_ARG")
    if not raw or "traceidratio" not in _get(env, "OTEL_TRACES_SAMPLER").lower():
        return 1.0
    try:
        ratio = float(raw)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise _refuse("OTEL_TRACES_SAMPLER_ARG", raw, "not a ratio from 0 to 1", "e.g. 0.25")
    return ratio


def _certificate(env: Mapping[str, str]) -> str | None:
    """The CA certificate file for TLS, which must exist (checked now, not at the first export)."""
    names = ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE")
    path = _first(env, *names)
    if path and not Path(path).is_file():
        variable = next(n for n in names if _get(env, n))
        raise _refuse(variable, path, "no such file", "name a PEM file of CA certificates")
    return path or None
