"""The key of a cached answer: who answers, what is asked, and the cache's format version.

`answer_key(kind, identity, request)` is the one key function of the answer
cache (docs/cache.md): the sha256 of the canonical JSON of the format version,
the `kind` of call (`model`, or `tool` for an MCP tool call), the callee's
`identity` (for a model: its wire format, base URL origin and path, model id and
the parameters that change an answer; for a tool server: what it starts or
reaches and the digest of its tool list, and for a pack's server its name and
its pack's locked version and archive digest, `tools.caching`) and the full
`request`. Nothing else goes in: no credential,
no account label, no clock.

For a model call the request is `model_request_json(req)`: every field of
`ModelRequest` that reaches the wire. `suggestor` and `turn` are routing
metadata the provider never sees (`ROUTING_FIELDS`): two suggestors sending the
same request share an answer. `confidential` only says which adapters may take
the request; an adapter that takes it answers the same request alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from converge_dsl.engine.types import canonical_json
from converge_dsl.models._common import normalise_request
from converge_dsl.models.port import ModelRequest

CACHE_FORMAT = 1
"""Bumped whenever the key or the stored value changes shape: older rows then miss."""

ROUTING_FIELDS = frozenset({"suggestor", "turn", "confidential"})
"""Fields of `ModelRequest` left out of the key: none of them reaches a provider."""


def model_request_json(req: ModelRequest) -> dict[str, Any]:
    """`req` as the JSON that goes into its key (the normalised request less routing)."""
    normal = normalise_request(req)
    return {name: value for name, value in normal.items() if name not in ROUTING_FIELDS}


def answer_key(kind: str, identity: Mapping[str, Any], request: Mapping[str, Any]) -> str:
    """The hex sha256 naming the answer of `request` sent to `identity` (see the module)."""
    document = {"format": CACHE_FORMAT, "kind": kind, "identity": identity, "request": request}
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()
