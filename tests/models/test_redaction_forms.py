"""A key is masked in every form it may take: with whitespace around it, escaped, or cut.

An API key read from a variable that ends in CR, LF or spaces is used without
them (CD940 warns, never quoting it); the redactor masks the key as given,
stripped, escaped as `repr` and JSON write it, and any prefix of `MIN_CUT`
(4) characters or more at the start of a word, where a server's echo cut it.
The sweep drives every broken-answer path of `test_redaction_sweep` with such
keys and cut echoes, in process (the error, its chain and traceback, stdout
and stderr) and through `converge-dsl run --trace --format json` (stdout,
stderr, the trace and the JSON result).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl._urls import display_url
from converge_dsl.cli import run
from converge_dsl.frontend import AccountSpec
from converge_dsl.models import ModelError
from converge_dsl.models._accounts import accounts_from_config
from converge_dsl.models._redact import MASK, Redactor

from ._hostile import HostileServer, whole
from .test_limits import KEY
from .test_redaction_sweep import PIPELINE, SWEEP, Answer, broken_call, echoing

# How a key may reach us: with a CR, a LF, CRLF, spaces or a tab around it.
VARIANTS = [KEY + "\r", KEY + "\n", f"  {KEY}\r\n", f"\t{KEY} "]

CUT: dict[str, Answer] = {
    "401 echo cut after 6": lambda k: whole(f"invalid key {k[:6]}...".encode(), status=401),
    "403 echo cut after 4": lambda k: whole(f'{{"error": "key {k[:4]}\u2026"}}'.encode(), 403),
    "500 echo cut in the middle": lambda k: whole(f"bad: {k[: len(k) // 2]}".encode(), 500),
    "429 echo cut at the end of the body": lambda k: whole(k[:-3].encode(), status=429),
    "200 JSON echo cut": lambda k: whole(json.dumps({"error": k[:9]}).encode()),
}


def leaks(text: str, key: str = KEY) -> list[str]:
    """The prefixes of `key` of 4 characters or more that `text` shows."""
    return [key[:n] for n in range(4, len(key) + 1) if key[:n] in text]


SWEEP_FORMS = [
    pytest.param(*param.values, VARIANTS[index % len(VARIANTS)], id=f"{param.id}-{index % 4}")
    for index, param in enumerate(SWEEP)
] + [
    pytest.param(wire, stream, name, answer, variant, id=f"{wire}-{stream}-{name}-{n}")
    for wire in ("openai", "anthropic")
    for stream in (False, True)
    for name, answer in CUT.items()
    for n, variant in enumerate(VARIANTS)
]


@pytest.mark.parametrize(("wire", "stream", "name", "answer", "key"), SWEEP_FORMS)
def test_no_form_of_the_key_is_in_any_error(  # noqa: PLR0917 - the sweep's parameters
    wire: str,
    stream: bool,
    name: str,
    answer: Answer,
    key: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    seen = broken_call(wire, stream, answer, capfd, key)
    assert leaks(seen) == [], seen


CLI = [
    ("openai", False, "401 echo cut after 6"),
    ("openai", True, "500 echo cut in the middle"),
    ("anthropic", False, "403 echo cut after 4"),
    ("anthropic", True, "429 echo cut at the end of the body"),
]


@pytest.mark.parametrize("key", VARIANTS, ids=["cr", "lf", "spaces-crlf", "tab-space"])
@pytest.mark.parametrize("case", CLI, ids=[f"{w}-{s}-{n}" for w, s, n in CLI])
def test_no_form_of_the_key_is_in_stdout_stderr_the_trace_or_the_json_result(
    case: tuple[str, bool, str],
    key: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    wire, stream, name = case
    monkeypatch.setenv("ECHO_API_KEY", key)
    monkeypatch.chdir(tmp_path)
    with HostileServer(echoing(CUT[name])) as server:
        url = server.url + ("/v1" if wire == "openai" else "")
        Path("p.yaml").write_text(
            PIPELINE.format(wire=wire, url=url, stream=str(stream).lower()), encoding="utf-8"
        )
        out, err = io.StringIO(), io.StringIO()
        code = run(["run", "p.yaml", "--trace", "trace.jsonl", "--format", "json"], out, err)
        assert server.requests
    trace = Path("trace.jsonl").read_text(encoding="utf-8")
    result = json.loads(out.getvalue())
    seen = out.getvalue() + err.getvalue() + trace + "".join(capfd.readouterr())
    assert code != 0
    assert result["stop_reason"] == "error"
    assert leaks(seen) == [], seen
    assert leaks(json.dumps(result, ensure_ascii=False)) == []


def _roster(name: str, variable: str) -> list[AccountSpec]:
    return [AccountSpec(name, variable, ("models", "fast", "accounts", 0))]


def test_whitespace_around_a_key_is_stripped_with_a_warning_that_never_quotes_it() -> None:
    heard: list[str] = []
    (account,) = accounts_from_config(
        "fast", _roster("main", "MAIN_KEY"), {"MAIN_KEY": f" {KEY}\r\n"},
        heard.append,
    )  # fmt: skip
    assert account.key == KEY
    (message,) = heard
    assert "MAIN_KEY holds whitespace around the key" in message
    assert leaks(message) == []
    quiet: list[str] = []
    accounts_from_config("fast", _roster("main", "MAIN_KEY"), {"MAIN_KEY": KEY}, quiet.append)
    assert quiet == []
    with pytest.raises(ModelError, match="MAIN_KEY, which is not set"):
        accounts_from_config("fast", _roster("m", "MAIN_KEY"), {"MAIN_KEY": " \r\n"}, heard.append)


def test_the_warning_reaches_stderr_with_its_code(capsys: pytest.CaptureFixture[str]) -> None:
    accounts_from_config("warned-once", _roster("main", "W_KEY"), {"W_KEY": KEY + "\n"})
    accounts_from_config("warned-once", _roster("main", "W_KEY"), {"W_KEY": KEY + "\n"})
    err = capsys.readouterr().err
    assert err.count("warning[CD940]: model 'warned-once'") == 1
    assert leaks(err) == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"Illegal header b'Bearer {KEY}\\r\\n'", "Illegal header b'Bearer [REDACTED]'"),
        (f"Illegal header b'Bearer {KEY}\\r'", "Illegal header b'Bearer [REDACTED]\\r'"),
        (f'{{"k": "{KEY}\\r\\n"}}', '{"k": "[REDACTED]"}'),
        (f"echo {KEY}\r\n!", f"echo {MASK}!"),
        (f"cut {KEY[:4]}", f"cut {MASK}"),
        (f"cut {KEY[:11]}\u2026 twice {KEY[:7]}", f"cut {MASK}\u2026 twice {MASK}"),
        (f"({KEY[:8]})", f"({MASK})"),
        (f"inside a word: x{KEY[:8]}", f"inside a word: x{KEY[:8]}"),
        (f"too short: {KEY[:3]}", f"too short: {KEY[:3]}"),
        ("Bearer upstream-not-secret", "Bearer upstream-not-secret"),
    ],
)
def test_the_redactor_masks_every_form(text: str, shown: str) -> None:
    assert Redactor([KEY + "\r\n"])(text) == shown
    stripped = Redactor([KEY])(text)
    assert leaks(stripped) == [] if MASK in shown else stripped == shown


@pytest.mark.parametrize(
    "text",
    [
        "sk-hostage taken",  # starts like the key (`sk-host`), then another word
        "an sk-hosting plan",
        f"one character off: {KEY[:10]}X{KEY[11:]}",
        f"all but the last: {KEY[:-1]}X",
        f"{KEY[:6]}_other",
        f"the key then more: {KEY[:12]}zzz",
    ],
)
def test_a_word_that_only_starts_like_a_secret_is_shown_as_it_is(text: str) -> None:
    """Near misses: only the secret, its encodings and its cut echoes are masked."""
    assert Redactor([KEY])(text) == text
    assert Redactor([KEY + "\r\n"])(text) == text


@pytest.mark.parametrize(
    ("secret", "text", "shown"),
    [
        ("token-number-one-aaaa", "a valid bearer token is needed", None),
        ("token-number-one-aaaa", "Token expired; token-num...", f"Token expired; {MASK}..."),
        ("testkey0123456789", "the test failed: testkey0…", f"the test failed: {MASK}…"),
        ("correcthorsebattery", "correct, cut: correcthorse…", f"correct, cut: {MASK}…"),
    ],
)
def test_a_cut_of_letters_alone_is_masked_only_when_it_is_no_mere_word(
    secret: str, text: str, shown: str | None
) -> None:
    """A secret starting with a word masked that word in every message ('a valid bearer
    [REDACTED] is needed'); a cut of letters alone is masked from 8 of them."""
    assert Redactor([secret])(text) == (text if shown is None else shown)


def test_a_cut_echo_beside_a_near_miss_is_masked_alone() -> None:
    text = f"sk-hostage, then {KEY[:9]}... and {KEY[:9]}more"
    assert Redactor([KEY])(text) == f"sk-hostage, then {MASK}... and {KEY[:9]}more"


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pa/ss@collector:4318/v1/traces",
        "http://user:pa#ss@collector:4318/v1/traces",
        "http://user:pa?ss@collector:4318/v1/traces",
        "http://user:p@ss/w#o?rd@collector:4318/v1/traces",
        "https://us/er@collector:4318/v1/traces?token=t#frag",
    ],
)
def test_a_url_is_shown_without_its_user_info_whatever_it_holds(url: str) -> None:
    shown = display_url(url)
    assert shown.endswith("collector:4318/v1/traces")
    assert not any(word in shown for word in ("pa", "ss", "user", "rd", "er@", "token"))


@pytest.mark.parametrize("password", ["pa/ss", "pa#ss", "pa?ss", "p@ss/w?d"])
def test_an_otel_endpoint_refused_never_shows_its_password(
    password: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://user:{password}@collector:4318")
    out, err = io.StringIO(), io.StringIO()
    run(["run", str(Path(__file__).parents[2] / "pipelines" / "support-triage.yaml")], out, err)
    seen = out.getvalue() + err.getvalue()
    assert password not in seen
    assert "user:" not in seen
