"""Registers each editor feature's handlers on the server (one module a feature)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from converge_dsl.lsp._server import PipelineServer


def register(server: PipelineServer) -> None:
    """Every feature beyond diagnostics, each from its own module."""
