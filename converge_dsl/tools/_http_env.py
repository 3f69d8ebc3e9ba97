"""The proxies and certificates of an HTTP tool server's client, read from the run's environment.

httpx reads them from the process's environment (`trust_env`): `HTTP_PROXY`,
`HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY` (either case; the lower-case name
wins, as with urllib) and `SSL_CERT_FILE` or `SSL_CERT_DIR`. A run is handed
its own environment (the command's: `cli.run(argv, stdout, stderr,
environ)`), so `client_options(env)` gives the client `trust_env=False` and
the same settings, with httpx's meaning, read from `env` instead.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from converge_dsl.models import certificates_in, verifying_context


def client_options(env: Mapping[str, str]) -> dict[str, Any]:
    """`httpx.AsyncClient` keyword arguments: no reading of the process's environment,
    and the certificates and proxies `env` names."""
    verify = verifying_context(certificates_in(env))
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else httpx.AsyncHTTPTransport(proxy=proxy, verify=verify)
        for pattern, proxy in proxy_mounts(env).items()
    }
    return {"trust_env": False, "verify": verify, "mounts": mounts}


def proxy_mounts(env: Mapping[str, str]) -> dict[str, str | None]:
    """URL pattern -> proxy URL (None: no proxy), as httpx makes them from the process's
    environment (`httpx._utils.get_environment_proxies`), from `env`."""
    found = _proxy_variables(env)
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if found.get(scheme):
            proxy = found[scheme]
            mounts[f"{scheme}://"] = proxy if "://" in proxy else f"http://{proxy}"
    for host in (h.strip() for h in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if "://" in host:
            mounts[host] = None
        elif host.lower() == "localhost" or _is_address(host, ipaddress.IPv4Address):
            mounts[f"all://{host}"] = None
        elif _is_address(host, ipaddress.IPv6Address):
            mounts[f"all://[{host}]"] = None
        elif host:
            mounts[f"all://*{host}"] = None
    return mounts


def _proxy_variables(env: Mapping[str, str]) -> dict[str, str]:
    """scheme -> value of the `*_proxy` variables of `env`, as urllib's
    `getproxies_environment` reads them (the lower-case name wins; a CGI request's
    `HTTP_PROXY` is a header, not a setting)."""
    found: dict[str, str] = {}
    for name, value in env.items():
        if value and name.lower().endswith("_proxy"):
            found[name.lower()[:-6]] = value
    if "REQUEST_METHOD" in env:
        found.pop("http", None)
    for name, value in env.items():
        if name.endswith("_proxy"):
            if value:
                found[name.lower()[:-6]] = value
            else:
                found.pop(name.lower()[:-6], None)
    return found


def _is_address(host: str, kind: Callable[[str], object]) -> bool:
    """Whether `host` (less a `/bits` suffix) is an address of `kind`."""
    try:
        kind(host.partition("/")[0])
    except ValueError:
        return False
    return True
