"""Human decisions kept for a paused run, sealed so that nobody else can supply them.

A run paused for a human goes on only with decisions the user gave: on the
command line (`--approve`, `--reject`, `--decisions FILE`) or through the
Python API. When they do not yet cover every pending proposal, those given so
far are kept in `DIR/decisions.json` until the next resume, as one record in
the journal's line format (`_journal.seal`), MAC'd with the user's checkpoint
key over a canonical body that binds it:

- to the pause: `run` is the MAC of the journal's last record, which chains
  over every record and the snapshot's random nonce, so a record of another
  run, or of an earlier pause of this one, does not fit;
- to each proposal: every decision carries the pending proposal's id and the
  SHA-256 of its canonical content (key, id, content, data, suggestor, cycle,
  reason), so a decision cannot be moved to other content under the same id;
- to who gave it (`by`: `cli`, `file:NAME`, `api`), which the resumed run's
  `proposal_decided` events repeat.

Anything else in the file's place (a planted or edited file, a record of
another run or key, a decision for other content) is refused with CD932,
naming the file; nothing runs and the checkpoint is unchanged, so the run
stays paused (docs/architecture.md §12).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._reading import read_bytes
from converge_dsl.engine.state import PendingProposal, pending_to_data
from converge_dsl.engine.types import canonical_json

from ._checkpoint_key import CheckpointRefused
from ._journal import atomic_write, seal

DECISIONS_FILE = "decisions.json"
FORMAT = "converge-dsl/decisions/v1"
# The chain value a decisions record is sealed after: no journal record starts a chain with it.
_DOMAIN = "decisions"
_CAP = 16 << 20

# A decision: approve (True) or reject, and who gave it.
Decision = tuple[bool, str]


def _utf8(text: str) -> bytes:
    """`text` in UTF-8, a lone surrogate (which JSON text may hold, a model's answer say)
    kept as its three bytes: valid text encodes as it always did, so seals still verify."""
    return text.encode("utf-8", "surrogatepass")


def proposal_digest(item: PendingProposal) -> str:
    """SHA-256 of a pending proposal's canonical content: what a decision is bound to."""
    return hashlib.sha256(_utf8(canonical_json(pending_to_data(item)))).hexdigest()


def save_decisions(
    folder: Path,
    key: bytes,
    run: str,
    decisions: Mapping[str, Decision],
    pending: Sequence[PendingProposal],
) -> None:
    """Seal `decisions` (id -> (approve, by)) for the pause `run` of `pending`, atomically."""
    atomic_write(folder, DECISIONS_FILE, decisions_line(key, run, decisions, pending))


def decisions_line(
    key: bytes,
    run: str,
    decisions: Mapping[str, Decision],
    pending: Sequence[PendingProposal],
) -> bytes:
    """The sealed record of `decisions` for the pause `run` of `pending`."""
    digests = {item.id: proposal_digest(item) for item in pending}
    body = {
        "kind": "decisions",
        "format": FORMAT,
        "run": run,
        "decisions": [
            {"id": item, "approve": approve, "by": by, "digest": digests[item]}
            for item, (approve, by) in sorted(decisions.items())
        ],
    }
    return seal(key, _DOMAIN, _utf8(canonical_json(body)))[1]


def clear_decisions(folder: Path) -> None:
    """Remove the kept decisions (the run went on with all of them)."""
    (folder / DECISIONS_FILE).unlink(missing_ok=True)


def decisions_refused(where: str, reason: str) -> CheckpointRefused:
    return CheckpointRefused(
        codes.DECISIONS_REFUSED,
        f"{where!r}: {reason}; no decision in it is applied and the run stays paused",
        hint="delete the file, then give the decisions yourself with --resume DIR "
        "--approve ID... --reject ID... (or --decisions FILE)",
    )


def _verified_body(where: str, key: bytes, raw: bytes) -> dict[str, Any]:
    """The body of the sealed record `raw`, or CD932 when it is not one this key sealed."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = None
    if (
        not isinstance(data, dict)
        or set(data) != {"mac", "record"}
        or not isinstance(data["mac"], str)
        or not isinstance(data["record"], dict)
    ):
        raise decisions_refused(where, "it is not a decisions record sealed by converge-dsl")
    expected, line = seal(key, _DOMAIN, _utf8(canonical_json(data["record"])))
    if line != raw or not hmac.compare_digest(expected, data["mac"]):
        raise decisions_refused(
            where, "its seal does not verify with your checkpoint key (it was forged or edited)"
        )
    return data["record"]


def load_decisions(
    folder: Path, key: bytes, run: str, pending: Sequence[PendingProposal]
) -> dict[str, Decision]:
    """The decisions kept for the pause `run` of `pending` (empty if none), or CD932.

    See the module docstring for what is refused.
    """
    path = folder / DECISIONS_FILE
    try:
        raw = read_bytes(path, "decisions file", cap=_CAP)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise decisions_refused(str(path), f"it cannot be read ({exc.strerror or exc})") from None
    return verify_decisions(str(path), key, raw, run, pending)


def verify_decisions(
    where: str, key: bytes, raw: bytes, run: str, pending: Sequence[PendingProposal]
) -> dict[str, Decision]:
    """The decisions of the sealed record `raw` (kept at `where`), or CD932 (see the module)."""
    body = _verified_body(where, key, raw)
    if body.get("kind") != "decisions" or body.get("format") != FORMAT:
        raise decisions_refused(where, "it is not a decisions record")
    if body.get("run") != run:
        raise decisions_refused(where, "it was sealed for another run or an earlier pause")
    digests = {item.id: proposal_digest(item) for item in pending}
    out: dict[str, Decision] = {}
    for entry in body.get("decisions") or ():
        ident = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(ident, str) or digests.get(ident) != entry.get("digest"):
            raise decisions_refused(
                where, f"its decision on {ident!r} was given for other content than is pending"
            )
        out[ident] = (bool(entry.get("approve")), str(entry.get("by")))
    return out
