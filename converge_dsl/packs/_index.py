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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from converge_dsl import codes
from converge_dsl.packs._files import SHA256, PackRefused, parse_json
from converge_dsl.packs._manifest import parse_specifier, parse_version

NAMES_FILE = "names.json"
# What a pipeline's `packs:` admits (schemas/pipeline.v1.json): no '/', no leading '.'.
SAFE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")


def check_name(name: object, where: str = "") -> str:
    """`name` when it can name a pack: a repository path is only ever built from such a name.

    Names come from hostile places too (`names.json`, an index's `requires.packs`,
    a lock file), so a name with '/', '..' or control characters is refused here
    rather than read as a path or a URL.
    """
    if isinstance(name, str) and SAFE_NAME.match(name):
        return name
    raise PackRefused(
        codes.PACK_UNKNOWN,
        f"{where + ': ' if where else ''}{name!r} is not a pack name",
        hint="a pack name is lowercase letters, digits, '-', '_' and '.', "
        "starting with a letter or digit",
    )


def index_path(name: str) -> str:
    return f"index/{check_name(name)}.json"


def archive_path(name: str, version: str) -> str:
    return f"archives/{check_name(name)}/{name}-{version}.tar.gz"


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
            raise PackRefused(codes.PACK_VERSION_UNKNOWN, f"{self.name} {version} is not published")
        return self.with_entry(replace(found, yanked=yanked))

    def to_bytes(self) -> bytes:
        body = {"name": self.name, "versions": [e.as_json() for e in self.entries]}
        return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _or_empty(value: Any) -> Any:
    return {} if value is None else value


def _problem(raw: Any) -> str | None:
    """What is wrong with the shape of one version entry (None when it is well formed)."""
    if not isinstance(raw, dict):
        return "it is not an object"
    if not isinstance(raw.get("version"), str) or parse_version(raw["version"]) is None:
        return "field 'version' is not a version"
    if not isinstance(raw.get("sha256"), str) or not SHA256.match(raw["sha256"]):
        return "field 'sha256' is not a sha256 digest (64 lowercase hex digits)"
    if not isinstance(raw.get("published", ""), str):
        return "field 'published' is not text"
    if not isinstance(raw.get("yanked", False), bool):
        return "field 'yanked' is not true or false"
    requires = _or_empty(raw.get("requires"))
    if not isinstance(requires, dict):
        return "field 'requires' is not an object"
    packs = _or_empty(requires.get("packs"))
    if not isinstance(packs, dict) or not all(isinstance(v, str) for v in packs.values()):
        return "field 'requires.packs' is not an object of specifiers"
    for name, text in packs.items():
        if not SAFE_NAME.match(name):
            return f"field 'requires.packs' names {name!r}, which is not a pack name"
        if parse_specifier(text) is None:
            return f"field 'requires.packs.{name}' ({text!r}) is not a specifier"
    converge = requires.get("converge-dsl")
    if converge is not None and (
        not isinstance(converge, str) or parse_specifier(converge) is None
    ):
        return "field 'requires.converge-dsl' is not a specifier"
    signature = raw.get("signature")
    if signature is not None and not (
        isinstance(signature, dict)
        and all(isinstance(signature.get(k), str) for k in ("key", "signature"))
    ):
        return "field 'signature' is not an object {key, signature} of text"
    return None


def _entry(raw: Any, where: str, name: str, position: int) -> IndexEntry:
    problem = _problem(raw)
    if problem is not None:
        label = raw.get("version") if isinstance(raw, dict) else None
        which = f"version {label}" if isinstance(label, str) else f"versions[{position}]"
        raise PackRefused(codes.REPOSITORY_UNREADABLE, f"{where}: pack {name!r} {which}: {problem}")
    requires = raw.get("requires") or {}
    converge = requires.get("converge-dsl")
    return IndexEntry(
        version=Version(raw["version"]),
        sha256=raw["sha256"],
        published=raw.get("published", ""),
        yanked=raw.get("yanked", False),
        requires_converge=parse_specifier(converge) if converge else None,
        requires_packs={k: SpecifierSet(v) for k, v in (requires.get("packs") or {}).items()},
        signature=raw.get("signature"),
    )


def parse_index(data: bytes, name: str, where: str) -> PackIndex:
    """Parse an index file; raises `PackError` naming `where`, the pack and the field."""
    body = parse_json(data, where)
    if not isinstance(body, dict) or body.get("name") != name:
        raise PackRefused(
            codes.REPOSITORY_UNREADABLE, f"{where}: index does not describe pack {name!r}"
        )
    versions = body.get("versions") or []
    if not isinstance(versions, list):
        raise PackRefused(
            codes.REPOSITORY_UNREADABLE, f"{where}: pack {name!r}: field 'versions' is not a list"
        )
    entries = [_entry(raw, where, name, i) for i, raw in enumerate(versions)]
    return PackIndex(name, tuple(sorted(entries, key=lambda e: e.version)))
