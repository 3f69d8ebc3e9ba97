"""Optional ed25519 signatures of published pack versions.

A signature covers the statement `converge-dsl-pack-v1\\nNAME\\nVERSION\\nSHA256`,
so it cannot be moved to another pack, version or archive. Keys are written
`ed25519:<base64 of the 32 raw bytes>`; a repository entry in a pipeline lists
the public keys it trusts (`trusted_keys`). When a repository has trusted
keys, every pack from it must carry a valid signature by one of them.
cryptography is imported only when a key is read, made or checked.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.packs._files import PackRefused

if TYPE_CHECKING:  # cryptography is imported only when a key is actually used
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

_PREFIX = "ed25519:"


def statement(name: str, version: str, sha256: str) -> bytes:
    return f"converge-dsl-pack-v1\n{name}\n{version}\n{sha256}".encode()


def _decode(
    text: str, what: str, code: str = codes.SIGNING_KEY_MALFORMED, hint: str | None = None
) -> bytes:
    if not text.startswith(_PREFIX):
        raise PackRefused(code, f"{what} must start with {_PREFIX!r}", hint=hint)
    try:
        raw = base64.b64decode(text[len(_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise PackRefused(code, f"{what} is not valid base64", hint=hint) from None
    return raw


def public_key_text(key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _PREFIX + base64.b64encode(raw).decode()


def private_key_text(key: Ed25519PrivateKey) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return _PREFIX + base64.b64encode(raw).decode()


def load_private_key(text: str) -> Ed25519PrivateKey:
    raw = _decode(text.strip(), "signing key")
    if len(raw) != 32:
        raise PackRefused(codes.SIGNING_KEY_MALFORMED, "signing key must hold 32 raw bytes")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(raw)


def load_public_key(text: str) -> Ed25519PublicKey:
    raw = _decode(text.strip(), "trusted key")
    if len(raw) != 32:
        raise PackRefused(codes.SIGNING_KEY_MALFORMED, "trusted key must hold 32 raw bytes")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    return Ed25519PublicKey.from_public_bytes(raw)


def generate_key() -> tuple[str, str]:
    """A new key pair as (private text, public text)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    return private_key_text(private), public_key_text(private.public_key())


def sign(private_key: str, name: str, version: str, sha256: str) -> dict[str, str]:
    """The signature record stored in the index: `{key, signature}`."""
    key = load_private_key(private_key)
    signature = key.sign(statement(name, version, sha256))
    return {
        "key": public_key_text(key.public_key()),
        "signature": _PREFIX + base64.b64encode(signature).decode(),
    }


def verify(
    record: dict[str, str] | None,
    trusted: Sequence[str],
    name: str,
    version: str,
    sha256: str,
) -> None:
    """Raise `PackError` unless `record` is a valid signature by a trusted key.

    With no trusted keys, nothing is required.
    """
    if not trusted:
        return
    where = f"{name} {version}"
    if not record:
        raise PackRefused(
            codes.PACK_NOT_INSTALLABLE,
            f"{where} is not signed, but its repository requires a signature",
            hint="publish it with --sign-key, or remove trusted_keys from the repository",
        )
    signer = record.get("key", "")
    if signer not in {t.strip() for t in trusted}:
        raise PackRefused(
            codes.PACK_NOT_INSTALLABLE, f"{where} is signed by an untrusted key {signer}"
        )
    from cryptography.exceptions import InvalidSignature

    # A malformed or wrong signature named neither the pack nor what to do.
    altered = "ask the repository owner to publish it again; install nothing from it meanwhile"
    try:
        load_public_key(signer).verify(
            _decode(
                record.get("signature", ""),
                f"the signature of {where}",
                codes.PACK_NOT_INSTALLABLE,
                altered,
            ),
            statement(name, version, sha256),
        )
    except InvalidSignature:
        raise PackRefused(
            codes.PACK_NOT_INSTALLABLE,
            f"bad signature on {where}: the archive or its index entry was altered",
            hint=altered,
        ) from None
