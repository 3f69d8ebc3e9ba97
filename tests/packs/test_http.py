"""HTTP repositories against real loopback servers: drip, slow and cross-host redirects, floods.

Every request has one total deadline (redirects and header bytes included), a
byte cap, and redirects to another host only when the repository lists it.
"""

from __future__ import annotations

import contextlib
import gzip
import http.server
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.errors import PackError
from converge_dsl.packs import HttpRepository, publish
from converge_dsl.packs._files import PackRefused
from converge_dsl.packs._repository import open_repository

from .conftest import make_pack, write_pipeline

_STOP = threading.Event()


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Misbehaves according to the first path segment; `elsewhere` is where /cross sends."""

    protocol_version = "HTTP/1.1"
    elsewhere = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        kind, _, rest = self.path.lstrip("/").partition("/")
        # The client giving up (OSError) is the point; an unknown path answers nothing.
        with contextlib.suppress(OSError, AttributeError):
            getattr(self, f"_{kind.replace('-', '_')}")(rest)

    def _drip_headers(self, rest: str) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(200):  # 10 s at most; each byte comes well within the read timeout
            if _STOP.is_set():
                return
            self.wfile.write(b"a")
            self.wfile.flush()
            time.sleep(0.05)

    def _silent(self, rest: str) -> None:
        _STOP.wait(10)  # answers nothing until the test ends

    def _slow_redirect(self, rest: str) -> None:
        time.sleep(0.3)
        self._redirect(f"/slow-redirect/{rest}")

    def _cross(self, rest: str) -> None:
        self._redirect(f"{self.elsewhere}/{rest}")

    def _to_file(self, rest: str) -> None:
        self._redirect(f"file:///etc/{rest}")

    def _flood(self, rest: str) -> None:
        self.send_response(200)
        self.end_headers()  # no length: the body goes on until the client stops reading
        chunk = bytes(64 * 1024)
        for _ in range(16 * 1024):  # 1 GiB at most
            if _STOP.is_set():
                return
            self.wfile.write(chunk)

    def _gzip(self, rest: str) -> None:
        body = gzip.compress(gzip.compress(bytes(1 << 20)))
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip, gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _status(self, rest: str) -> None:
        self.send_response(int(rest.partition("/")[0]))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def hostile(http_root: tuple[Path, str]) -> Iterator[str]:
    """A misbehaving server on 127.0.0.1; /cross/ redirects to `http_root` named localhost."""
    _, good = http_root
    handler = type("_Bound", (_Hostile,), {"elsewhere": good.replace("127.0.0.1", "localhost")})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    _STOP.clear()
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        _STOP.set()
        server.shutdown()
        server.server_close()


def _refusal(repository: HttpRepository, code: str) -> tuple[PackRefused, float]:
    started = time.monotonic()
    with pytest.raises(PackRefused) as caught:
        repository.fetch_index("alpha")
    assert caught.value.code == code
    return caught.value, time.monotonic() - started


def test_header_drip_is_cut_at_the_total_deadline(hostile: str) -> None:
    refused, seconds = _refusal(
        HttpRepository(f"{hostile}/drip-headers", deadline_s=0.5), codes.REPOSITORY_TOO_SLOW
    )
    assert seconds < 2  # each byte came in time: only the total deadline stops it
    assert refused.message == (
        f"GET {hostile}/drip-headers/index/alpha.json: no complete answer within 0.5 s, "
        f"redirects included (repository {hostile}/drip-headers/)"
    )


def test_a_silent_server_is_named_silent_not_past_the_deadline(hostile: str) -> None:
    # A server that answered nothing gave up at the 30 s read timeout saying "no complete
    # answer within 60 s", a time that had not passed.
    refused, _ = _refusal(
        HttpRepository(f"{hostile}/silent", deadline_s=5, timeout_s=0.3),
        codes.REPOSITORY_TOO_SLOW,
    )
    assert refused.message == (
        f"GET {hostile}/silent/index/alpha.json: the server sent nothing for 0.3 s "
        f"(repository {hostile}/silent/)"
    )


def test_a_connection_that_times_out_is_named_as_such() -> None:
    # A host dropping the connection was said to have "sent nothing for 30 s".
    import httpx

    def drop(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)

    client = httpx.Client(transport=httpx.MockTransport(drop))
    repository = HttpRepository("http://packs.example.org/repo", client=client, timeout_s=30)
    with pytest.raises(PackError) as caught:
        repository.fetch_index("alpha")
    assert caught.value.message == (
        "GET http://packs.example.org/repo/index/alpha.json: no connection could be made "
        "within 30 s (repository http://packs.example.org/repo/)"
    )
    assert caught.value.code == codes.REPOSITORY_TOO_SLOW


def test_slow_redirects_count_against_the_same_deadline(hostile: str) -> None:
    refused, seconds = _refusal(
        HttpRepository(f"{hostile}/slow-redirect", deadline_s=0.8), codes.REPOSITORY_TOO_SLOW
    )
    assert seconds < 2.5  # truthful: the message names 0.8 s and it took about that
    assert "within 0.8 s, redirects included" in refused.message


def test_a_cross_host_redirect_is_refused_naming_the_host_and_the_fix(
    tmp_path: Path, http_root: tuple[Path, str], hostile: str
) -> None:
    served, _ = http_root
    publish(make_pack(tmp_path, "alpha", "1.0.0"), served)
    refused, _ = _refusal(HttpRepository(f"{hostile}/cross"), codes.REPOSITORY_REDIRECT_REFUSED)
    assert refused.message.startswith(
        f"GET {hostile}/cross/index/alpha.json redirects to another host (localhost): "
    )
    assert "redirect_hosts: [localhost]" in (refused.hint or "")
    allowed = open_repository(
        {"url": f"{hostile}/cross", "redirect_hosts": ["localhost"]}, tmp_path
    )
    index = allowed.fetch_index("alpha")
    assert index is not None
    assert [str(e.version) for e in index.entries] == ["1.0.0"]


def test_a_redirect_to_another_scheme_is_refused(hostile: str) -> None:
    refused, _ = _refusal(HttpRepository(f"{hostile}/to-file"), codes.REPOSITORY_REDIRECT_REFUSED)
    assert "redirects to a file URL" in refused.message


def test_a_flood_is_cut_at_the_byte_cap(hostile: str) -> None:
    repository = HttpRepository(f"{hostile}/flood", max_index_bytes=1 << 20)
    refused, seconds = _refusal(repository, codes.REPOSITORY_TOO_LARGE)
    assert "the answer is over 1048576 bytes, refused" in refused.message
    assert seconds < 3


def test_content_encoding_is_refused_not_decompressed(hostile: str) -> None:
    with pytest.raises(PackError, match="Content-Encoding 'gzip, gzip' though none was asked"):
        HttpRepository(f"{hostile}/gzip").fetch_index("alpha")


def test_lock_reports_the_refusal_with_its_code(tmp_path: Path, hostile: str) -> None:
    pipeline = write_pipeline(
        tmp_path, '{alpha: ">=1"}', f'[{{url: "{hostile}/cross", redirect_hosts: [example.org]}}]'
    )
    out, err = io.StringIO(), io.StringIO()
    code = run(["lock", str(pipeline), "--cache", str(tmp_path / "cache")], out, err)
    assert code == 1
    assert err.getvalue().startswith("error[CD564]: GET ")
    assert not (tmp_path / "converge.lock").exists()
    out, err = io.StringIO(), io.StringIO()
    run(["validate", str(pipeline)], out, err)
    assert "CD100" not in out.getvalue() + err.getvalue()  # redirect_hosts is in the schema


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (429, "the repository is busy or rate-limiting requests; retry later"),
        (503, "the repository is busy or rate-limiting requests; retry later"),
        (500, "the repository's server failed; retry later, or tell its owner"),
        (403, "the repository refused access; check the url (only public repositories work)"),
        (410, "check the repository's url; it should serve the files pack publish writes"),
    ],
)
def test_an_error_status_names_what_to_do(hostile: str, status: int, hint: str) -> None:
    with pytest.raises(PackError) as caught:
        HttpRepository(f"{hostile}/status/{status}").fetch_index("alpha")
    assert caught.value.message == (
        f"GET {hostile}/status/{status}/index/alpha.json answered HTTP {status} "
        f"(repository {hostile}/status/{status}/)"
    )
    assert caught.value.hint == hint
