"""Network off for the Python processes of the editor test (`init`, `converge-dsl lsp`).

Put first on PYTHONPATH, Python imports it at start-up. It writes `loaded PID` to
the file named by CONVERGE_OFFLINE_LOG, then refuses, and writes down, every
connection to an address other than the loopback and every name lookup of another
host: the test checks that both processes loaded it and that nothing was refused.
Where the test can also take the network away (`unshare -n`), the kernel refuses too.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

_LOG = os.environ.get("CONVERGE_OFFLINE_LOG")
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "", None}


def _write(line: str) -> None:
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(line + "\n")


def _local(host: object) -> bool:
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(str(host).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(what: str) -> OSError:
    _write(f"refused {os.getpid()} {what}")
    return OSError(101, f"network is off in this test: {what}")


_connect, _connect_ex, _getaddrinfo = (
    socket.socket.connect,
    socket.socket.connect_ex,
    socket.getaddrinfo,
)


def _checked(sock: socket.socket, address: Any) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
        raise _refuse(f"connect {address!r}")


def connect(self: socket.socket, address: Any) -> None:
    _checked(self, address)
    _connect(self, address)


def connect_ex(self: socket.socket, address: Any) -> int:
    _checked(self, address)
    return _connect_ex(self, address)


def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _local(host if not isinstance(host, bytes) else host.decode()):
        raise _refuse(f"lookup {host!r}")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = connect  # type: ignore[method-assign]
socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = getaddrinfo
_write(f"loaded {os.getpid()}")
