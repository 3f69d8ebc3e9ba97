"""HTTP repositories: every request is bounded by a total deadline and a size cap."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_dsl.errors import PackError
from converge_dsl.packs import HttpRepository, publish

from .conftest import make_pack


class _Drip(http.server.BaseHTTPRequestHandler):
    """Answers 200 with a long body, then writes one byte every 50 ms (for 10 s at most)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        try:
            for _ in range(200):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass  # the client gave up: that is the point

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def drip_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Drip)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/drip"
    finally:
        server.shutdown()
        server.server_close()


def test_a_dripping_server_is_cut_off_at_the_total_deadline(drip_url: str) -> None:
    repository = HttpRepository(drip_url, deadline_s=0.5)
    started = time.monotonic()
    with pytest.raises(PackError) as caught:
        repository.fetch_index("evil")
    assert time.monotonic() - started < 3  # each read came in time; only the total is late
    assert caught.value.message == (
        f"GET {drip_url}/index/evil.json: no complete answer within 0.5 s, redirects included "
        f"(repository {drip_url}/)"
    )


def test_an_oversized_index_or_archive_is_refused_naming_the_limit(
    tmp_path: Path, http_root: tuple[Path, str]
) -> None:
    served, url = http_root
    publish(make_pack(tmp_path, "alpha", "1.0.0"), served)
    index_size = len((served / "index" / "alpha.json").read_bytes())
    small = HttpRepository(url, max_index_bytes=index_size - 1)
    with pytest.raises(PackError) as caught:
        small.fetch_index("alpha")
    assert caught.value.message == (
        f"GET {url}/index/alpha.json: the answer is over {index_size - 1} bytes, refused "
        f"(repository {url}/)"
    )
    enough = HttpRepository(url, max_index_bytes=index_size, max_archive_bytes=10)
    assert enough.fetch_index("alpha") is not None
    with pytest.raises(PackError, match="over 10 bytes, refused"):
        enough.fetch_archive("alpha", "1.0.0")
