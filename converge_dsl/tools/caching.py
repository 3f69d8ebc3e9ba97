"""The answer cache over the tools port: `CachedToolServer` around any `ToolServer`.

MCP tool calls share the run's `models.caching.AnswerCache` (one store, one
mode, one record of hits and misses, docs/cache.md) with the model calls.
The key (`AnswerCache.key`, kind `tool`) is the cache's format version, the
server's identity (`transport_identity`: what is started or reached; a pack's
server adds its name `PACK/SERVER`, as two packs may run the same command in
their own folders, and its pack's pin in the lock, version and archive digest,
as an upgraded pack may run another script behind the same command and tool
list) with the digest of its tool list, and the request: the
tool's name and its arguments as canonical JSON. The value is stored redacted
as the run's results are (the values the run hands its servers). The digest is
the lock's when the server is locked (the inner server is then a
`LockedToolServer`, whose `start` starts nothing), else the live
`tools/list`'s (the server is started for it). The value is the result exactly
as the server gave it (text, structured content, error flag, cut and size); a
hit returns it marked `cached` (it counts toward no budget).

With `--offline`, a server the lock does not pin is `ToolServerUnlocked`
(CD271, located at its declaration, naming `converge-dsl lock`) before anything
is started: its tool list could only be read live. A miss is `ToolCacheMiss`
(CD973), naming the suggestor or agent (the engine's `SPENDER`) and showing
how the call differs from the nearest cached call of that suggestor; no server
is started when every call hits. A row that fails its check is a miss and a
warning (CD974), as for a model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl.engine.budget import SPENDER
from converge_dsl.engine.types import canonical_json
from converge_dsl.errors import RunError
from converge_dsl.frontend import ToolServerSpec, pack_server
from converge_dsl.models.answer_store import CacheRow
from converge_dsl.models.caching import AnswerCache, CallRecord
from converge_dsl.tools._cassette import is_replay
from converge_dsl.tools._locked import LockedToolServer, declared_at, transport_identity
from converge_dsl.tools._port import ServerInfo, ToolResult, ToolServer
from converge_dsl.tools._run import ServerWrapper, tool_name

TOOL_KIND = "tool"


class ToolServerUnlocked(RunError):
    """`--offline` and a server the lock does not pin: its tools cannot be known without
    starting it, and an offline run starts nothing (CD271)."""

    diagnostic_code = codes.TOOL_OFFLINE_UNLOCKED


class ToolCacheMiss(RunError):
    """`--offline` and no cached result for a tool call (CD973, like a model call's)."""

    diagnostic_code = codes.CACHE_OFFLINE_MISS


def result_to_json(result: ToolResult) -> dict[str, Any]:
    return {
        "text": result.text,
        "structured": result.structured,
        "is_error": result.is_error,
        "cut": result.cut,
        "size": result.size,
    }


def result_from_json(value: Any) -> ToolResult:
    """The stored result; `ValueError` when `value` is not one."""
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        raise ValueError("the stored value is not a tool result")
    return ToolResult(
        value["text"],
        value.get("structured"),
        bool(value.get("is_error")),
        bool(value.get("cut")),
        int(value.get("size") or 0),
        cached=True,
    )


class CachedToolServer:
    """`inner` behind `cache` (see the module docstring)."""

    def __init__(
        self,
        inner: ToolServer,
        spec: ToolServerSpec,
        cache: AnswerCache,
        redact: Callable[[str], str] = str,
        relock: str = "run: converge-dsl lock PIPELINE",
        *,
        pin: Mapping[str, str] | None = None,
    ) -> None:
        self._inner = inner
        self._spec = spec
        self._cache = cache
        self._redact = redact
        self._relock = relock
        self._pin = dict(pin or {})
        self._identity: dict[str, Any] | None = None
        self._identity_json = ""

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def inner(self) -> ToolServer:
        return self._inner

    def start(self) -> ServerInfo:
        inner = self._inner
        if self._cache.offline and not isinstance(inner, LockedToolServer) and not is_replay(inner):
            raise ToolServerUnlocked(
                f"--offline: tool server {self._spec.name!r} is not in the lock, so its "
                "tools could only be read by starting it; nothing was started",
                hint=f"{self._relock} (once, online), then run with --offline again",
                span=declared_at(self._spec),
            )
        info = self._inner.start()
        self._identity = {**self._server_identity(), "tools": info.digest()}
        self._identity_json = canonical_json(self._identity)
        return info

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        cache, identity = self._cache, self._identity
        if identity is None:  # the run's tools start a server before its first call
            identity = {**self._server_identity(), "tools": None}
        request = {"name": tool, "arguments": dict(arguments)}
        key = cache.key(TOOL_KIND, identity, request)
        suggestor = SPENDER.get()
        called = tool_name(self._spec.name, tool)
        row = cache.lookup(key)
        if row is not None:
            try:
                result = result_from_json(json.loads(row.value))
            except (ValueError, TypeError) as exc:
                cache.warn(f"cached tool result {key[:16]} is not used: {exc}")
            else:
                cache.record(CallRecord(suggestor, called, key, "hit", kind=TOOL_KIND))
                return result
        why = (
            cache.nearest(self._identity_json, request, suggestor, kind=TOOL_KIND)
            if cache.offline or cache.explain
            else None
        )
        cache.record(CallRecord(suggestor, called, key, "miss", why, kind=TOOL_KIND))
        if cache.offline:
            raise ToolCacheMiss(
                f"--offline: no cached result for tool {called} of suggestor {suggestor!r} "
                f"(key {key[:16]}): {why}",
                hint="run once without --offline (with --cache) to fill the cache",
                suggestor=suggestor,
            )
        started = cache.clock.monotonic()
        result = await self._inner.call(tool, arguments)
        duration = cache.clock.monotonic() - started
        now = cache.wall_now()
        cache.save(
            CacheRow(
                key=key,
                kind=TOOL_KIND,
                identity=self._identity_json,
                suggestor=suggestor,
                request=canonical_json(request),
                value=self._redact(canonical_json(result_to_json(result))),
                created=now,
                duration_s=duration,
                last_used=now,
            )
        )
        return result

    def close(self) -> None:
        self._inner.close()

    def _server_identity(self) -> dict[str, Any]:
        """What is started or reached; for a pack's server (`PACK/SERVER`) also its name,
        as two packs may start the same command in their own folders, and its pack's pin,
        as two versions of a pack may start different scripts with the same command."""
        identity: dict[str, Any] = {"server": transport_identity(self._spec)}
        if pack_server(self._spec.name) is not None:
            identity["name"] = self._spec.name
            if self._pin:
                identity["pack"] = self._pin
        return identity


def caching_tools(
    cache: AnswerCache,
    relock: str = "run: converge-dsl lock PIPELINE",
    pins: Mapping[str, Mapping[str, str]] | None = None,
) -> ServerWrapper | None:
    """The run's wrapper putting each tool server behind `cache` (None when it is off);
    `relock` is the command that locks the pipeline (an offline run's unlocked server);
    `pins` the pack pin of each pack server, by `PACK/SERVER` (see the module)."""
    if cache.mode == "off":
        return None
    pinned = dict(pins or {})
    return lambda server, spec, redact: CachedToolServer(
        server, spec, cache, redact, relock, pin=pinned.get(spec.name)
    )
