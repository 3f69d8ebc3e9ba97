"""Bearer tokens: kept hashed, compared in constant time, a bad file refused (CD992); the
file read again when it changes, a file gone bad letting no request in (CD461)."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

import httpx
import pytest

from converge_dsl.serve import _tokens
from converge_dsl.serve._errors import ServeRefused
from converge_dsl.serve._requests import Refused
from converge_dsl.serve._tokens import RACY_NS, TokenFile, read_tokens

from .conftest import DATA, Server, serve_with_token

TOKEN = "a-token-of-enough-length"


def test_tokens_are_kept_as_digests(tmp_path: Path) -> None:
    other = "another-token-1234567"
    path = tmp_path / "tokens"
    path.write_text(f"# comment\n\n{TOKEN}\nsha256:{hashlib.sha256(other.encode()).hexdigest()}\n")
    tokens, plain = read_tokens(path)
    assert TOKEN not in repr(tokens)
    assert plain == (TOKEN,)
    assert tokens.allows(f"Bearer {TOKEN}")
    assert tokens.allows(f"bearer {other}")
    assert not tokens.allows(f"Bearer {TOKEN}x")
    assert not tokens.allows(TOKEN)
    assert not tokens.allows(None)
    assert not tokens.allows("Basic abc")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "it holds no token"),
        ("# only a comment\n", "it holds no token"),
        ("short\n", "line 1 is not a token of 16 or more characters"),
        ("sha256:abc\n", "line 1 is not sha256: and 64 hex digits"),
    ],
)
def test_a_bad_token_file_is_refused(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(ServeRefused) as caught:
        read_tokens(path)
    assert str(caught.value).startswith(f"[CD992] serve: --token-file {str(path)!r}: {reason}")


def test_a_missing_token_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServeRefused, match=r"CD992.*cannot be read"):
        read_tokens(tmp_path / "none")


OLD_NS = 1_000_000_000_000_000_000  # a file timestamp long past (2001)


def _settled(path: Path, text: str) -> None:
    """`path` holding `text`, its mtime far in the past (no racy read)."""
    path.write_text(text)
    os.utime(path, ns=(OLD_NS, OLD_NS))


def _later() -> int:
    """A clock far past any file's ctime (which a test cannot set back): no racy read."""
    return time.time_ns() + 10 * RACY_NS


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths the token module reads from now on."""
    reads: list[Path] = []
    real = _tokens.read_text

    def read_text(path: Path, what: str, *, cap: int) -> str:
        reads.append(path)
        return real(path, what, cap=cap)

    monkeypatch.setattr(_tokens, "read_text", read_text)
    return reads


def _refusal(tokens: TokenFile, header: str) -> tuple[int, str]:
    with pytest.raises(Refused) as caught:
        tokens.allows(header)
    return caught.value.status, caught.value.problems[0].code


def test_a_changed_token_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    other = "another-token-1234567"
    _settled(path, f"{TOKEN}\n{other}\n")
    tokens = TokenFile(path)
    assert tokens.allows(f"Bearer {other}")
    _settled(path, f"{TOKEN}\n")  # revoked: the size, ctime (and mtime) changed
    assert not tokens.allows(f"Bearer {other}")
    assert tokens.allows(f"Bearer {TOKEN}")
    assert tokens.plain == (TOKEN, other)  # a revoked token stays a secret to redact


def test_an_unchanged_token_file_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tokens"
    _settled(path, f"{TOKEN}\n")
    tokens = TokenFile(path, now=_later)
    reads = _counted_reads(monkeypatch)
    for _ in range(5):
        assert tokens.allows(f"Bearer {TOKEN}")
    assert reads == []


def test_a_token_file_written_in_its_timestamp_tick_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file read within RACY_NS of its mtime or its ctime is read again at the next
    check: a write in the same tick would not change its identity. Here its mtime is set
    back (as `_settled` and a writer may): its ctime is the recent one; the mtime alone
    trusted such a file at once."""
    path = tmp_path / "tokens"
    _settled(path, f"{TOKEN}\n")
    changed = path.stat().st_ctime_ns
    clock = [changed + RACY_NS // 2]
    tokens = TokenFile(path, now=lambda: clock[0])
    reads = _counted_reads(monkeypatch)
    assert tokens.allows(f"Bearer {TOKEN}")
    assert len(reads) == 1
    clock[0] = changed + RACY_NS  # read once more, then trusted
    assert tokens.allows(f"Bearer {TOKEN}")
    assert tokens.allows(f"Bearer {TOKEN}")
    assert len(reads) == 2


def test_a_token_cut_short_by_a_write_in_progress_is_not_let_in(tmp_path: Path) -> None:
    """A file written in place (truncated, then written): read while its last line has no
    newline yet, that line was a token of its own, a prefix of 16 or more characters of
    the new one let in. While the file is that recent the line is left out; once it is
    whole, or the file has settled, it is let in. A revocation applies at once."""
    path = tmp_path / "tokens"
    other = "b0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
    _settled(path, f"{TOKEN}\n")
    clock = [time.time_ns() + 10 * RACY_NS]
    tokens = TokenFile(path, now=lambda: clock[0])
    path.write_text(f"{TOKEN}\n{other[:20]}")  # in progress, written now
    clock[0] = path.stat().st_mtime_ns
    assert not tokens.allows(f"Bearer {other[:20]}")
    assert tokens.allows(f"Bearer {TOKEN}")
    path.write_text(f"{other}\n")  # whole, TOKEN revoked
    assert tokens.allows(f"Bearer {other}")
    assert not tokens.allows(f"Bearer {TOKEN}")
    path.write_text(f"{TOKEN}\n{other}")  # no newline at the end: in once settled
    assert not tokens.allows(f"Bearer {other}")
    clock[0] += 10 * RACY_NS
    assert tokens.allows(f"Bearer {other}")


def test_a_one_token_file_without_a_final_newline_keeps_the_service_open(
    tmp_path: Path,
) -> None:
    """A secret written with no final newline (`printf %s`, most secret stores): read while
    recent, its one line was left out, so the file held no token and every request, and
    /healthz, was 503 CD461 for some 2 s after each rotation. The tokens held before stay
    until the file settles; the new one is let in then."""
    path = tmp_path / "tokens"
    other = "b0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
    _settled(path, TOKEN)
    clock = [time.time_ns() + 10 * RACY_NS]
    tokens = TokenFile(path, now=lambda: clock[0])
    assert tokens.allows(f"Bearer {TOKEN}")
    path.write_text(other)  # rotated, written now
    clock[0] = path.stat().st_mtime_ns
    assert tokens.allows(f"Bearer {TOKEN}")  # no 503 while the file settles
    assert not tokens.allows(f"Bearer {other}")
    clock[0] += 10 * RACY_NS
    assert tokens.allows(f"Bearer {other}")
    assert not tokens.allows(f"Bearer {TOKEN}")


def test_a_token_file_gone_bad_lets_no_request_in(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Missing, then invalid: 503 CD461 for every request, each problem logged once; a
    file holding tokens again lets them in."""
    path = tmp_path / "tokens"
    _settled(path, f"{TOKEN}\n")
    tokens = TokenFile(path)
    path.unlink()
    with caplog.at_level(logging.WARNING, logger="uvicorn.error"):
        assert _refusal(tokens, f"Bearer {TOKEN}") == (503, "CD461")
        assert _refusal(tokens, "Bearer another-token-1234567") == (503, "CD461")
        _settled(path, "short\n")
        assert _refusal(tokens, f"Bearer {TOKEN}") == (503, "CD461")
        assert _refusal(tokens, f"Bearer {TOKEN}") == (503, "CD461")
        _settled(path, f"{TOKEN}\n")
        assert tokens.allows(f"Bearer {TOKEN}")
        assert tokens.allows(f"Bearer {TOKEN}")
    said = [record.getMessage() for record in caplog.records]
    shown = repr(str(path))
    assert said == [
        f"--token-file {shown} cannot be used: it is missing; every request that needs a "
        "token is refused (503, CD461) until it holds tokens again",
        f"--token-file {shown} cannot be used: line 1 is not a token of 16 or more "
        "characters; every request that needs a token is refused (503, CD461) until it "
        "holds tokens again",
        f"--token-file {shown} read again: 1 token(s) let in from now",
    ]


def test_a_served_token_file_is_seen_as_it_changes(tmp_path: Path, servers: list[Server]) -> None:
    """Over HTTP: a token revoked in the file is refused at once, a file gone missing
    lets no request in (503 CD461, said once in the server's log), one holding tokens
    again lets them in; no restart."""
    other = "b0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
    server = serve_with_token(tmp_path, servers, [DATA / "echo.yaml"], TOKEN)
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN}\n{other}\n")
    with httpx.Client(base_url=server.ready(), timeout=10) as http:

        def status(token: str) -> int:
            headers = {"Authorization": f"Bearer {token}"}
            return http.get("/v1/pipelines", headers=headers).status_code

        assert status(other) == 200
        path.write_text(f"{TOKEN}\n")
        assert (status(other), status(TOKEN)) == (401, 200)
        path.unlink()
        gone = [http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}) for _ in "ab"]
        assert [answer.status_code for answer in gone] == [503, 503]
        assert gone[0].json()["errors"][0]["code"] == "CD461"
        assert gone[0].headers["retry-after"] == "5"
        health = http.get("/healthz")  # no token needed; it was 200, never drained
        assert (health.status_code, health.json()["errors"][0]["code"]) == (503, "CD461")
        assert health.headers["retry-after"] == "5"
        path.write_text(f"{other}\n")
        assert (status(other), status(TOKEN)) == (200, 401)
        assert http.get("/healthz").status_code == 200
    server.stop()
    logged = "".join(server.stderr)
    assert logged.count("cannot be used: it is missing") == 1, logged


_LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
_MCP_ACCEPT = ("Accept", "application/json, text/event-stream")


def _both_edges(http: httpx.Client, *authorization: str) -> list[httpx.Response]:
    """The answers of the HTTP API (`GET /v1/pipelines`) and of `/mcp` (a tools/list) to a
    request with each of `authorization` as an Authorization header."""
    given = [("Authorization", value) for value in authorization]
    return [
        http.get("/v1/pipelines", headers=given),
        http.post("/mcp", json=_LIST_TOOLS, headers=[_MCP_ACCEPT, *given]),
    ]


def _statuses(answers: list[httpx.Response]) -> list[int]:
    return [answer.status_code for answer in answers]


def _refused(answers: list[httpx.Response]) -> list[tuple[int, str, str | None]]:
    return [
        (a.status_code, a.json()["errors"][0]["code"], a.headers.get("www-authenticate"))
        for a in answers
    ]


def test_the_api_and_the_mcp_endpoint_check_tokens_alike(
    tmp_path: Path, servers: list[Server]
) -> None:
    """Over HTTP, one token check for both edges: no token, a wrong one and a malformed
    header are 401 (CD987, `WWW-Authenticate: Bearer`), two Authorization headers that
    differ 400 (CD309), and a token file changed while serving is seen by both."""
    other = "b0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
    server = serve_with_token(tmp_path, servers, [DATA / "echo.yaml"], TOKEN, "--mcp")
    with httpx.Client(base_url=server.ready(), timeout=30) as http:
        unauthorized = [(401, "CD987", "Bearer")] * 2
        assert _refused(_both_edges(http)) == unauthorized
        assert _refused(_both_edges(http, f"Bearer {other}")) == unauthorized
        for malformed in (
            "Bearer",
            f"Basic {TOKEN}",
            f"Bearer{TOKEN}",
            f"{TOKEN}",
            f"Bearer {TOKEN} x",
        ):
            assert _refused(_both_edges(http, malformed)) == unauthorized, malformed
        twice = _both_edges(http, f"Bearer {TOKEN}", f"Bearer {other}")
        assert _refused(twice) == [(400, "CD309", None)] * 2
        assert "Authorization header 2 times" in twice[1].json()["errors"][0]["message"]
        assert _statuses(_both_edges(http, f"Bearer {TOKEN}")) == [200, 200]
        # the same token twice, the scheme's case aside, is one
        assert _statuses(_both_edges(http, f"bearer {TOKEN}", f"Bearer {TOKEN}")) == [200, 200]
        (tmp_path / "tokens").write_text(f"{other}\n")
        assert _refused(_both_edges(http, f"Bearer {TOKEN}")) == unauthorized
        assert _statuses(_both_edges(http, f"Bearer {other}")) == [200, 200]


def test_without_a_token_file_neither_edge_reads_authorization(tmp_path: Path) -> None:
    """Without `--token-file` no Authorization header is read (docs/serve.md): two that
    differ are let in at the HTTP API and at `/mcp` alike."""
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    with (
        in_process(tmp_path / "state", HttpLimits(), mcp=True) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        answers = _both_edges(http, "Bearer one-token-0123456789", "Basic another")
    assert _statuses(answers) == [200, 200]
