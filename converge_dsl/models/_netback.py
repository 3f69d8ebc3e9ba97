"""`AsyncioBackend`: httpcore's network layer on plain asyncio streams.

httpcore's default backend goes through anyio: every read and write of every
request enters a cancel scope and a `fail_after`, and each idle-connection
check builds anyio's attribute table. That was the largest single share of a
model call's CPU. This backend gives httpcore the same contract on asyncio's
own streams (`asyncio.open_connection`, `StreamWriter.start_tls`):

- failures raise httpcore's exceptions, as its backends must: a timeout is
  `ConnectTimeout`/`ReadTimeout`/`WriteTimeout`, any `OSError` (and a TLS
  failure while connecting) `ConnectError`/`ReadError`/`WriteError`, so the
  httpx transport above maps them as it always did;
- a read returns at most `max_bytes` (the stream reader pauses the socket past
  its own buffer limit, so a fast server cannot fill memory), `b""` at the end;
- `is_readable` (httpcore's check of an idle keep-alive connection) is true
  once the server closed it or sent anything unasked; no system call.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

_LIMIT = 256 * 1024
"""Bytes the stream reader buffers before it stops reading the socket."""


def _timeout(seconds: float | None) -> asyncio.Timeout:
    return asyncio.timeout(seconds)


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One TCP (or TLS) connection, as httpcore's network stream."""

    __slots__ = ("_reader", "_writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with _timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ReadError(exc) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        writer = self._writer
        try:
            if writer.is_closing():
                raise ConnectionResetError("the connection is closed")
            writer.write(buffer)
            async with _timeout(timeout):
                await writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.WriteError(exc) from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with _timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(exc) from exc
        except OSError as exc:  # ssl.SSLError is one
            await self.aclose()
            raise httpcore.ConnectError(exc) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        writer = self._writer
        if info == "is_readable":
            reader = self._reader
            # Buffered bytes nobody asked for (the reader's buffer has no public size).
            unasked = bool(getattr(reader, "_buffer", b""))
            return reader.at_eof() or writer.is_closing() or unasked
        if info == "ssl_object":
            return writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return writer.get_extra_info("sockname")
        if info == "server_addr":
            return writer.get_extra_info("peername")
        if info == "socket":
            return writer.get_extra_info("socket")
        return None


def _apply(writer: asyncio.StreamWriter, options: Iterable[Any] | None) -> None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    for option in options or ():
        if sock is not None:
            sock.setsockopt(*option)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens `AsyncioStream`s (asyncio sets TCP_NODELAY on TCP sockets itself)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = None if local_address is None else (local_address, 0)
        try:
            async with _timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=local, limit=_LIMIT
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ConnectError(exc) from exc
        _apply(writer, socket_options)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with _timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path, limit=_LIMIT)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ConnectError(exc) from exc
        _apply(writer, socket_options)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
