"""One bounded HTTP GET for pack repositories: a total deadline, a size cap, safe redirects.

`http_get(client, url, ...)` is the only way a pack repository talks HTTP
(docs/architecture.md §10). Its guarantees:

- one total deadline (`deadline_s`, default `DEADLINE_S`) covers the whole
  request, redirects included: connecting, every header byte, every body
  byte. A per-read timeout alone cannot do this (a server that drips one
  header byte a second never trips it), so a watchdog timer shuts the
  connection's socket down when the deadline passes; the socket is taken
  from httpcore's documented `trace` extension as the connection opens, and
  connections are never reused (`new_client`), so every request opens one;
- bodies are read raw (`Accept-Encoding: identity`; an answer that is
  content-encoded anyway is refused, so nothing is decompressed unbounded)
  and refused past `cap` bytes as chunks arrive;
- redirects (at most `MAX_REDIRECTS`) are followed by hand, each checked:
  a redirect to another host or port is refused unless the host is listed
  in the repository's `redirect_hosts`, and https never redirects to http.

Refusals are `PackRefused` (CD562 too large, CD563 too slow, CD564 redirect)
naming the URL and the repository; a server silent for the read timeout
(`READ_TIMEOUT_S`) is too slow too, and said so rather than the deadline. The
caps are module constants (tests and the repository declaration may pass
smaller ones).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from converge_dsl.codes import (
    REPOSITORY_REDIRECT_REFUSED,
    REPOSITORY_TOO_LARGE,
    REPOSITORY_TOO_SLOW,
    REPOSITORY_UNREACHABLE,
)
from converge_dsl.packs._files import PackRefused

if TYPE_CHECKING:
    import httpx

MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024  # one archive
MAX_INDEX_BYTES = 8 * 1024 * 1024  # one index file or the names file
DEADLINE_S = 60.0  # one whole request, redirects and header bytes included
READ_TIMEOUT_S = 30.0  # silence allowed between two reads (never past the deadline)
MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class _Watchdog:
    """Shuts down every socket a request opens once `seconds` have passed."""

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """The httpcore `trace` callback: remembers the socket of each new connection."""
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        found = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(found, socket.socket):
            with self._lock:
                self._sockets.append(found)
                if self.fired:
                    _shutdown(found)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for each in self._sockets:
                _shutdown(each)

    def cancel(self) -> None:
        self._timer.cancel()


def _shutdown(each: socket.socket) -> None:
    with contextlib.suppress(OSError):
        each.shutdown(socket.SHUT_RDWR)


def new_client(timeout_s: float) -> httpx.Client:
    """The client a repository uses: no keep-alive (so the watchdog sees each socket)."""
    import httpx

    return httpx.Client(
        timeout=timeout_s,
        follow_redirects=False,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def _slow(url: str, repository: str, deadline_s: float) -> PackRefused:
    return PackRefused(
        REPOSITORY_TOO_SLOW,
        f"GET {url}: no complete answer within {deadline_s:g} s, redirects included "
        f"(repository {repository})",
        hint="the repository is too slow or stalled; retry later",
    )


def _silent(url: str, repository: str, read_s: float, connecting: bool) -> PackRefused:
    """The server sent nothing for `read_s` seconds, or no connection was made in them
    (`connecting`: a host that drops the connection was said to send nothing), well
    before the whole deadline (the message named the deadline, a time that had not
    passed)."""
    if connecting:
        return PackRefused(
            REPOSITORY_TOO_SLOW,
            f"GET {url}: no connection could be made within {read_s:g} s (repository {repository})",
            hint="the host does not answer: check the repository url and the network, "
            "or retry later",
        )
    return PackRefused(
        REPOSITORY_TOO_SLOW,
        f"GET {url}: the server sent nothing for {read_s:g} s (repository {repository})",
        hint="the repository is stalled or overloaded; retry later",
    )


def _next_url(url: str, location: str, repository: str, allowed: Collection[str]) -> str:
    """Where a redirect from `url` to `location` leads; `PackRefused` when it may not."""
    import httpx

    here = httpx.URL(url)
    there = here.join(location)
    problem = None
    if there.scheme not in {"http", "https"}:
        problem = f"to a {there.scheme or 'relative'} URL"
    elif here.scheme == "https" and there.scheme == "http":
        problem = "from https to http"
    elif (there.host, there.port) != (here.host, here.port) and there.host not in allowed:
        problem = f"to another host ({there.host})"
    if problem is None:
        return str(there)
    raise PackRefused(
        REPOSITORY_REDIRECT_REFUSED,
        f"GET {url} redirects {problem}: {there}; refused (repository {repository})",
        hint=f"if you trust {there.host}, list it in the repository's redirect_hosts, e.g. "
        f"{{url: ..., redirect_hosts: [{there.host}]}}, or use its final URL as the url",
    )


def _body(response: httpx.Response, url: str, cap: int, repository: str) -> bytes:
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in {"", "identity"}:
        raise PackRefused(
            REPOSITORY_UNREACHABLE,
            f"GET {url} answered with Content-Encoding {encoding!r} though none was asked "
            f"(repository {repository})",
            hint="serve repository files as they are (no content encoding)",
        )
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():
        size += len(chunk)
        if size > cap:
            raise PackRefused(
                REPOSITORY_TOO_LARGE,
                f"GET {url}: the answer is over {cap} bytes, refused (repository {repository})",
                hint="an index is a few KB and an archive a few MB; ask the repository owner",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def http_get(
    client: httpx.Client,
    url: str,
    *,
    cap: int,
    repository: str,
    deadline_s: float = DEADLINE_S,
    read_timeout_s: float = READ_TIMEOUT_S,
    redirect_hosts: Collection[str] = (),
    monotonic: Callable[[], float] = time.monotonic,
) -> bytes | None:
    """The body of `url` (None on 404), within one total deadline and `cap` bytes."""
    give_up = monotonic() + deadline_s
    for _ in range(MAX_REDIRECTS + 1):
        remaining = give_up - monotonic()
        if remaining <= 0:
            raise _slow(url, repository, deadline_s)
        limits = (remaining, read_timeout_s, deadline_s)
        outcome = _one_request(client, url, cap, repository, limits)
        if outcome is None or isinstance(outcome, bytes):
            if monotonic() > give_up:
                raise _slow(url, repository, deadline_s)
            return outcome
        url = _next_url(url, outcome, repository, redirect_hosts)
    raise PackRefused(
        REPOSITORY_REDIRECT_REFUSED,
        f"GET {url}: more than {MAX_REDIRECTS} redirects (repository {repository})",
        hint="point the repository's url at the final location",
    )


def _status_hint(status: int) -> str:
    """What an HTTP status other than 200, 404 or a redirect asks the user to do."""
    if status in (429, 503):
        return "the repository is busy or rate-limiting requests; retry later"
    if status >= 500:
        return "the repository's server failed; retry later, or tell its owner"
    if status in (401, 403):
        return "the repository refused access; check the url (only public repositories work)"
    return "check the repository's url; it should serve the files pack publish writes"


def _one_request(
    client: httpx.Client, url: str, cap: int, repository: str, limits: tuple[float, float, float]
) -> bytes | str | None:
    """The body (bytes), a redirect's Location (str) or None (404), within `remaining` s.

    `limits` is (remaining, read timeout, the whole deadline named in messages).
    """
    import httpx

    remaining, read_s, deadline_s = limits
    watchdog = _Watchdog(remaining)
    try:
        with client.stream(
            "GET",
            url,
            headers={"Accept-Encoding": "identity"},
            timeout=httpx.Timeout(min(read_s, remaining)),
            follow_redirects=False,
            extensions={"trace": watchdog.trace},
        ) as response:
            status = response.status_code
            if status in _REDIRECTS and "location" in response.headers:
                return response.headers["location"]
            if status == 404:
                return None
            if status != 200:
                raise PackRefused(
                    REPOSITORY_UNREACHABLE,
                    f"GET {url} answered HTTP {status} (repository {repository})",
                    hint=_status_hint(status),
                )
            return _body(response, url, cap, repository)
    except httpx.TimeoutException as exc:
        if watchdog.fired or read_s >= remaining:
            raise _slow(url, repository, deadline_s) from None
        raise _silent(url, repository, read_s, isinstance(exc, httpx.ConnectTimeout)) from None
    except httpx.InvalidURL as exc:  # not an HTTPError: a bad url or a hostile Location
        raise PackRefused(
            REPOSITORY_UNREACHABLE,
            f"cannot ask for {url!r}: not a valid URL ({exc}) (repository {repository!r})",
            hint="a repository url is http(s)://HOST[:PORT]/PATH, without spaces "
            "or control characters",
        ) from None
    except httpx.HTTPError as exc:
        if watchdog.fired:
            raise _slow(url, repository, deadline_s) from None
        raise PackRefused(
            REPOSITORY_UNREACHABLE,
            f"cannot reach {url}: {exc} (repository {repository})",
            hint="a locked pipeline runs offline once its packs are in the cache",
        ) from None
    finally:
        watchdog.cancel()
