"""The proxies and certificates of an HTTP tool server's client, read as httpx reads them,
from the environment given."""

from __future__ import annotations

import os
from unittest import mock

import httpx
import pytest

from converge_dsl.tools._http_env import client_options, proxy_mounts


@pytest.mark.parametrize(
    "env",
    [
        {"HTTP_PROXY": "p:1", "no_proxy": "localhost,.x.com,10.0.0.0/8,::1,http://a.b"},
        {"https_proxy": "http://q:2", "HTTPS_PROXY": "http://r:3", "ALL_PROXY": "s:4"},
        {"HTTP_PROXY": "p:1", "REQUEST_METHOD": "GET"},
        {"http_proxy": "p", "NO_PROXY": "*"},
        {"HTTP_PROXY": "", "http_proxy": "z:9"},
    ],
)
def test_the_proxies_mean_what_they_mean_to_httpx(env: dict[str, str]) -> None:
    from httpx._utils import get_environment_proxies

    with mock.patch.dict(os.environ, env, clear=True):
        expected = get_environment_proxies()
    assert proxy_mounts(env) == expected


def test_the_client_reads_nothing_of_the_process_environment() -> None:
    options = client_options({})
    assert options["trust_env"] is False
    assert options["mounts"] == {}
    client = httpx.AsyncClient(**options)
    assert client._mounts == {}
