"""The sparse index: one small JSON file per pack.

A repository holds `index/NAME.json` for each pack:

    {"name": "optimization",
     "versions": [{"version": "1.0.0", "sha256": "<hex>", "published": "2025-01-01T00:00:00Z",
                   "yanked": false, "requires": {"converge-dsl": ">=0.1", "packs": {}},
                   "signature": {"key": "ed25519:...", "signature": "ed25519:..."}}]}

and archives at `archives/NAME/NAME-VERSION.tar.gz`. A client fetches only the
index files of the packs it resolves, so the bytes fetched do not grow with
the number of packs a repository holds. `names.json` (a sorted list of pack
names) exists only for `pack list`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from converge_dsl.errors import PackError
from converge_dsl.packs._manifest import parse_specifier, parse_version

NAMES_FILE = "names.json"


def index_path(name: str) -> str:
    return f"index/{name}.json"


def archive_path(name: str, version: str) -> str:
    return f"archives/{name}/{name}-{version}.tar.gz"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One published version of a pack."""

    version: Version
    sha256: str
    published: str
    yanked: bool = False
    requires_converge: SpecifierSet | None = None
    requires_packs: Mapping[str, SpecifierSet] = field(default_factory=dict)
    signature: Mapping[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        requires: dict[str, Any] = {
            "packs": {k: str(v) for k, v in sorted(self.requires_packs.items())}
        }
        if self.requires_converge is not None:
            requires["converge-dsl"] = str(self.requires_converge)
        out: dict[str, Any] = {
            "version": str(self.version),
            "sha256": self.sha256,
            "published": self.published,
            "yanked": self.yanked,
            "requires": requires,
        }
        if self.signature:
            out["signature"] = dict(self.signature)
        return out


@dataclass(frozen=True, slots=True)
class PackIndex:
    """Every published version of one pack, oldest first."""

    name: str
    entries: tuple[IndexEntry, ...]

    def entry(self, version: Version) -> IndexEntry | None:
        return next((e for e in self.entries if e.version == version), None)

    def with_entry(self, new: IndexEntry) -> PackIndex:
        kept = [e for e in self.entries if e.version != new.version]
        return PackIndex(self.name, tuple(sorted([*kept, new], key=lambda e: e.version)))

    def with_yanked(self, version: Version, yanked: bool) -> PackIndex:
        found = self.entry(version)
        if found is None:
            raise PackError(f"{self.name} {version} is not published")
        return self.with_entry(replace(found, yanked=yanked))

    def to_bytes(self) -> bytes:
        body = {"name": self.name, "versions": [e.as_json() for e in self.entries]}
        return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _entry(raw: Any, where: str) -> IndexEntry:
    if not isinstance(raw, dict):
        raise PackError(f"{where}: each version must be an object")
    version = parse_version(str(raw.get("version", "")))
    if version is None or not isinstance(raw.get("sha256"), str):
        raise PackError(f"{where}: a version entry lacks a valid version or sha256")
    requires = raw.get("requires") or {}
    packs: dict[str, SpecifierSet] = {}
    for name, text in (requires.get("packs") or {}).items():
        spec = parse_specifier(str(text))
        if spec is None:
            raise PackError(f"{where}: {version} requires {name} {text!r}, not a specifier")
        packs[name] = spec
    converge = requires.get("converge-dsl")
    return IndexEntry(
        version=version,
        sha256=raw["sha256"],
        published=str(raw.get("published", "")),
        yanked=bool(raw.get("yanked", False)),
        requires_converge=parse_specifier(converge) if converge else None,
        requires_packs=packs,
        signature=raw.get("signature"),
    )


def parse_index(data: bytes, name: str, where: str) -> PackIndex:
    """Parse an index file; raises `PackError` naming `where` when it is malformed."""
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackError(f"{where}: index is not JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("name") != name:
        raise PackError(f"{where}: index does not describe pack {name!r}")
    versions: Sequence[Any] = body.get("versions") or []
    entries = sorted((_entry(raw, where) for raw in versions), key=lambda e: e.version)
    return PackIndex(name, tuple(entries))
