"""Shared fixtures: one fake provider server on 127.0.0.1 for the whole module run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from converge_dsl.models.fakeserver import FakeProviderServer


@pytest.fixture(scope="session")
def _server_process() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
def server(_server_process: FakeProviderServer) -> FakeProviderServer:
    _server_process.reset()
    return _server_process
