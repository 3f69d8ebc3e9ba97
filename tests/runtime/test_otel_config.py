"""Whether a run exports OpenTelemetry traces, read from the environment mapping it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.errors import UsageError
from converge_dsl.runtime._otel_config import OtelRefused, otel_settings


def test_off_unless_configured() -> None:
    assert otel_settings({}) is None
    assert otel_settings({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_EXPORTER": "none"}) is None
    assert otel_settings({"OTEL_TRACES_EXPORTER": "none"}, flag=True) is None


def test_the_flag_alone_exports_to_the_default_collector() -> None:
    settings = otel_settings({}, flag=True)
    assert settings is not None
    assert settings.exporter == "otlp"
    assert settings.endpoint == "http://localhost:4318/v1/traces"
    assert settings.service_name == "converge-dsl"
    assert not settings.content


@pytest.mark.parametrize(
    ("env", "endpoint"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
            "http://127.0.0.1:4318/v1/traces",
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/base/"}, "http://c:4318/base/v1/traces"),
        # The signal-specific variable is the full URL, used as given, and wins.
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:2/custom",
            },
            "https://b:2/custom",
        ),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "http://localhost:4318/v1/traces"),
    ],
)
def test_a_standard_variable_turns_export_on(env: dict[str, str], endpoint: str) -> None:
    settings = otel_settings(env)
    assert settings is not None
    assert settings.endpoint == endpoint


def test_sdk_disabled_wins_over_everything() -> None:
    env = {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
    assert otel_settings(env, flag=True) is None
    assert otel_settings({**env, "OTEL_SDK_DISABLED": "false"}) is not None


def test_headers_timeout_compression_and_resource_are_read_from_the_mapping() -> None:
    settings = otel_settings(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-team=ml",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500",
            "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=triage,deployment.environment=dev",
        }
    )
    assert settings is not None
    assert settings.headers == (("api-key", "a b"), ("x-team", "ml"))
    assert settings.timeout_s == 2.5
    assert settings.flush_s == 2.5
    assert settings.compression == "gzip"
    assert settings.service_name == "triage"
    assert ("deployment.environment", "dev") in settings.resource
    assert otel_settings({"OTEL_SERVICE_NAME": "svc"}, flag=True).service_name == "svc"  # type: ignore[union-attr]


def test_the_end_of_a_run_waits_five_seconds_at_most() -> None:
    settings = otel_settings({"OTEL_EXPORTER_OTLP_TIMEOUT": "60000"}, flag=True)
    assert settings is not None
    assert settings.timeout_s == 60.0
    assert settings.flush_s == 5.0


def test_content_is_opt_in() -> None:
    on = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "TRUE"}
    assert otel_settings(on, flag=True).content  # type: ignore[union-attr]
    assert otel_settings({}, flag=True, content=True).content  # type: ignore[union-attr]
    off = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "yes please"}
    assert not otel_settings(off, flag=True).content  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, ["OTEL_TRACES_EXPORTER='zipkin'", "otlp, console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ["only one trace exporter"]),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ["OTEL_EXPORTER_OTLP_PROTOCOL='grpc'", "4318"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, ["TRACES_PROTOCOL"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, ["not an http(s) URL"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:99999"}, ["port"]),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, ["OTEL_EXPORTER_OTLP_TIMEOUT='soon'"]),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "-1"}, ["positive number of milliseconds"]),
        ({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, ["gzip or none"]),
    ],
)
def test_unusable_settings_are_refused_with_a_code(env: dict[str, str], words: list[str]) -> None:
    with pytest.raises(OtelRefused) as caught:
        otel_settings(env, flag=True)
    error = caught.value
    assert isinstance(error, UsageError)
    assert error.exit_code == 3
    assert error.code == codes.OTEL_BAD_CONFIG
    assert str(error).startswith(f"[{codes.OTEL_BAD_CONFIG}] OpenTelemetry: ")
    for word in words:
        assert word in str(error)


def test_a_malformed_header_is_refused_without_showing_its_value() -> None:
    with pytest.raises(OtelRefused) as caught:
        otel_settings({"OTEL_EXPORTER_OTLP_HEADERS": "Bearer sk-live-123"}, flag=True)
    assert "OTEL_EXPORTER_OTLP_HEADERS" in str(caught.value)
    assert "sk-live-123" not in str(caught.value)


@pytest.mark.parametrize(
    ("env", "sampler", "ratio"),
    [
        ({}, "parentbased_always_on", 1.0),
        ({"OTEL_TRACES_SAMPLER": "always_off"}, "always_off", 1.0),
        (
            {"OTEL_TRACES_SAMPLER": "TraceIdRatio", "OTEL_TRACES_SAMPLER_ARG": "0.25"},
            "traceidratio",
            0.25,
        ),
        # The argument belongs to the ratio samplers only.
        ({"OTEL_TRACES_SAMPLER": "always_on", "OTEL_TRACES_SAMPLER_ARG": "x"}, "always_on", 1.0),
    ],
)
def test_the_sampler_is_read_from_the_mapping(
    env: dict[str, str], sampler: str, ratio: float
) -> None:
    settings = otel_settings(env, flag=True)
    assert settings is not None
    assert (settings.sampler, settings.sampler_arg) == (sampler, ratio)


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_SAMPLER": "jaeger_remote"},
        {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
        {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"},
    ],
)
def test_an_unusable_sampler_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(OtelRefused, match=r"^\[CD981\] OpenTelemetry: OTEL_TRACES_SAMPLER"):
        otel_settings(env, flag=True)


def test_messages_show_an_endpoint_without_its_credentials() -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (the otel extra)")
    from converge_dsl.runtime._otel import display

    shown = display("https://user:pa55@collector.example:4318/v1/traces?token=abc")
    assert shown == "https://collector.example:4318/v1/traces"
    assert display("http://[::1]:4318/v1/traces") == "http://[::1]:4318/v1/traces"


def test_a_missing_certificate_file_is_refused_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(OtelRefused, match=r"OTEL_EXPORTER_OTLP_CERTIFICATE='.*nope.pem': no such"):
        otel_settings({"OTEL_EXPORTER_OTLP_CERTIFICATE": str(tmp_path / "nope.pem")}, flag=True)
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    settings = otel_settings({"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": str(pem)}, flag=True)
    assert settings is not None
    assert settings.certificate == str(pem)


@pytest.mark.parametrize(
    ("endpoint", "shown"),
    [
        ("ftp://user:pa55@collector", "'ftp://collector': not an http(s) URL"),
        ("http://user:pa55@h:99999/x?k=pa55", "'http://h:99999/x': the port is not a number"),
        ("http://:pa55@/v1", "'http:///v1': not an http(s) URL"),
        ("http://user:pa55@[::1", "'http://[::1': not a URL"),
        ("user:pa55@host:4318", "'host:4318': not an http(s) URL"),
    ],
)
def test_a_refused_endpoint_is_shown_without_its_credentials(endpoint: str, shown: str) -> None:
    with pytest.raises(OtelRefused) as caught:
        otel_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, flag=True)
    message = str(caught.value)
    assert "pa55" not in message
    assert f"OTEL_EXPORTER_OTLP_ENDPOINT={shown}" in message
    assert "hint: e.g. OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318" in message


@pytest.mark.parametrize(
    ("headers", "what"),
    [
        ("api-key=ok,authorization=Bearer%20pa55%0A", "header 2 has a value of 'authorization'"),
        ("a=pa55%0D%0Ax-evil: 1", "header 1 has a value of 'a'"),
        ("x=%20pa55", "header 1 has a value of 'x'"),
        ("x=pa55%E2%82%AC", "header 1 has a value of 'x'"),
        ("b%20c=pa55", "header 1 has a name"),
        ("k%FF=pa55", "header 1 has a name"),
    ],
)
def test_a_header_http_cannot_send_is_refused_without_its_value(headers: str, what: str) -> None:
    with pytest.raises(OtelRefused) as caught:
        otel_settings({"OTEL_EXPORTER_OTLP_HEADERS": headers}, flag=True)
    message = str(caught.value)
    assert f"OTEL_EXPORTER_OTLP_HEADERS: {what} HTTP cannot send" in message
    assert "pa55" not in message


def test_a_header_value_may_hold_latin_1_and_tabs() -> None:
    settings = otel_settings({"OTEL_EXPORTER_OTLP_HEADERS": "x=caf%C3%A9%09ok,y="}, flag=True)
    assert settings is not None
    assert settings.headers == (("x", "café\tok"), ("y", ""))
