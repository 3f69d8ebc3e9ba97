"""Bearer tokens: kept hashed, compared in constant time, a bad file refused (CD992)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from converge_dsl.serve._errors import ServeRefused
from converge_dsl.serve._tokens import read_tokens

TOKEN = "a-token-of-enough-length"


def test_tokens_are_kept_as_digests(tmp_path: Path) -> None:
    other = "another-token-1234567"
    path = tmp_path / "tokens"
    path.write_text(f"# comment\n\n{TOKEN}\nsha256:{hashlib.sha256(other.encode()).hexdigest()}\n")
    tokens, plain = read_tokens(path)
    assert TOKEN not in repr(tokens)
    assert plain == (TOKEN,)
    assert tokens.allows(f"Bearer {TOKEN}")
    assert tokens.allows(f"bearer {other}")
    assert not tokens.allows(f"Bearer {TOKEN}x")
    assert not tokens.allows(TOKEN)
    assert not tokens.allows(None)
    assert not tokens.allows("Basic abc")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "it holds no token"),
        ("# only a comment\n", "it holds no token"),
        ("short\n", "line 1 is not a token of 16 or more characters"),
        ("sha256:abc\n", "line 1 is not sha256: and 64 hex digits"),
    ],
)
def test_a_bad_token_file_is_refused(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(ServeRefused) as caught:
        read_tokens(path)
    assert str(caught.value).startswith(f"[CD992] serve: --token-file {str(path)!r}: {reason}")


def test_a_missing_token_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServeRefused, match=r"CD992.*cannot be read"):
        read_tokens(tmp_path / "none")
