"""The environment of a stdio tool server's child process, built from nothing.

Only the variables the pipeline lists reach the child: `env.pass` copies each
named variable from the parent when it is set there, `env.set` adds literal
values. Nothing else is inherited, not even HOME or PATH (the MCP SDK's own
stdio client adds those; this project starts its children itself for that
reason, docs/tools.md). `server_secrets(spec, parent)` are the values a run
hands a server (passed variables, HTTP header values): what every result and
recorded line is redacted of.
"""

from __future__ import annotations

from collections.abc import Mapping

from converge_dsl.frontend import HttpServerSpec, StdioServerSpec, ToolServerSpec


def child_environment(spec: StdioServerSpec, parent: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of `spec`'s child, given the parent's."""
    passed = {name: parent[name] for name in spec.env_pass if name in parent}
    return {**passed, **spec.env_set}


def server_secrets(spec: ToolServerSpec, parent: Mapping[str, str]) -> list[str]:
    """The values of `parent` that `spec` hands its server (set ones only)."""
    names: tuple[str, ...] = ()
    if isinstance(spec, StdioServerSpec):
        names = spec.env_pass
    elif isinstance(spec, HttpServerSpec):
        names = tuple(spec.headers.values())
    return [parent[n] for n in names if parent.get(n)]
