"""The connection pools the runs of one loaded pipeline share."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from converge_dsl.batch._shared import SharedTransports


def _one_certificate(folder: Path) -> Path:
    import certifi

    bundle = Path(certifi.where()).read_text(encoding="ascii")
    end = "-----END CERTIFICATE-----\n"
    one = folder / "one.pem"
    one.write_text(bundle[bundle.index("-----BEGIN") : bundle.index(end) + len(end)])
    return one


def _trusted(env: dict[str, str]) -> int:
    """How many certificates the pool lent for a model in a pipeline loaded in `env` trusts."""

    async def lent() -> int:
        transports = SharedTransports(4, env)
        pool = transports.lend("m")._inner  # type: ignore[attr-defined]
        try:
            return len(pool._shards[0]._pool._ssl_context.get_ca_certs())
        finally:
            await transports.aclose()

    return asyncio.run(lent())


def test_a_shared_pool_trusts_the_certificates_of_the_pipelines_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converge_dsl.models import _transport

    one = _one_certificate(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    try:
        assert _trusted({"SSL_CERT_FILE": str(one)}) == 1
        monkeypatch.setenv("SSL_CERT_FILE", str(one))
        assert _trusted({}) > 1  # certifi's, whatever the process says
    finally:
        _transport._tls.cache_clear()


def test_the_runs_on_one_loop_share_one_pool_per_model() -> None:
    async def pools() -> tuple[object, object, object]:
        transports = SharedTransports(4, {})
        try:
            first, again, other = (transports.lend(m) for m in ("a", "a", "b"))
            return (
                first._inner,  # type: ignore[attr-defined]
                again._inner,  # type: ignore[attr-defined]
                other._inner,  # type: ignore[attr-defined]
            )
        finally:
            await transports.aclose()

    first, again, other = asyncio.run(pools())
    assert first is again
    assert first is not other
