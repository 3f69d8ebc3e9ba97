"""Suite-wide setup: a private pack cache, warmed with the example pipelines' packs.

`validate` reads packs from the cache only, and `run` says when it fetches
one, so the pinned outputs of `pipelines/` must not depend on whether the
user's cache is warm. Every test process uses its own cache
(`CONVERGE_DSL_CACHE`), filled once with the locked packs of the example
pipelines (as `converge-dsl pack fetch` would); tests that need another cache
set the variable themselves. The user's cache is never read or written.
Likewise the checkpoint key lives in a private config folder
(`CONVERGE_DSL_CONFIG_DIR`), never the user's.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Generation and examples are timed by the wall clock, which a loaded machine (a CI run beside
# other work) stretches: a law that holds is not failed for being slow.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

EXAMPLES = Path(__file__).resolve().parent.parent / "pipelines"


@pytest.fixture(autouse=True, scope="session")
def _private_pack_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from converge_dsl.packs import PackCache, load_locked_packs

    cache = tmp_path_factory.mktemp("pack-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONVERGE_DSL_CACHE", str(cache))
        for pipeline in sorted(EXAMPLES.glob("*.yaml")):
            if "\npacks:" in pipeline.read_text(encoding="utf-8"):
                load_locked_packs(pipeline, cache=PackCache(cache))
        yield


@pytest.fixture(autouse=True, scope="session")
def _private_config_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    folder = tmp_path_factory.mktemp("config")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONVERGE_DSL_CONFIG_DIR", str(folder / "converge-dsl"))
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_colour_from_the_user_shell() -> Iterator[None]:
    """Outputs do not depend on the shell's colour settings (tests set them when they test them)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("NO_COLOR", "FORCE_COLOR"):
            patch.delenv(name, raising=False)
        yield


# The programs tests start by name, as pipelines and packs name them, with the package
# each needs: run by the interpreter running the tests, whatever PATH finds first (a
# virtual environment that is not activated leaves a system python3 without `mcp`).
_PROGRAMS = {
    "python3": "",
    "mcp-server-time": "-m mcp_server_time ",
}


@pytest.fixture(autouse=True, scope="session")
def _programs_of_this_interpreter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    import shlex
    import sys

    folder = tmp_path_factory.mktemp("programs")
    for name, arguments in _PROGRAMS.items():
        program = folder / name
        program.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {arguments}"$@"\n')
        program.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
        yield


# --- a real headless browser, for the graph and report pages -------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Debian's headless Chromium driven by Selenium through `chromedriver`.

    Skipped, saying why, only where Chromium, its driver or selenium is not
    installed (`.ci/run` installs the Debian packages `chromium chromium-driver`
    as root). A module sets `BROWSER_WINDOW = (width, height)` for its size;
    console messages are kept for `browser.get_log("browser")`.
    """
    if CHROMIUM is None or CHROMEDRIVER is None or importlib.util.find_spec("selenium") is None:
        pytest.skip(
            "browser tests need the Debian packages chromium and chromium-driver "
            "(.ci/run installs them) and selenium (the dev extra)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    width, height = getattr(request.module, "BROWSER_WINDOW", (1400, 860))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where browser tests save their screenshots, to be looked at after a run:
    `$CONVERGE_DSL_TEST_ARTIFACTS`, else `build/test-artifacts/` in the checkout."""
    given = os.environ.get("CONVERGE_DSL_TEST_ARTIFACTS")
    folder = Path(given) if given else EXAMPLES.parent / "build" / "test-artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def unfrozen_collector() -> Iterator[None]:
    """The collector as a fresh process has it, for the test and after it: on, nothing frozen.

    Earlier tests of the same process may have frozen objects for good (`freeze_alive`,
    as a command-line run or a local batch does), when a run rightly leaves the collector
    be; or unfrozen them and left `_Frozen.for_good` set, when it would wrongly do the same.
    """
    import gc

    from converge_dsl import _collector

    enabled = gc.isenabled()
    gc.unfreeze()
    gc.collect()
    gc.enable()
    _collector._Frozen.for_good = False
    _collector._Frozen.runs = 0
    yield
    gc.unfreeze()
    _collector._Frozen.for_good = False
    _collector._Frozen.runs = 0
    if not enabled:
        gc.disable()


@pytest.fixture
def first_arguments(monkeypatch: pytest.MonkeyPatch) -> Callable[[ModuleType, str], list[Any]]:
    """`watch(module, name)`: the first argument of every call of `module.name` from now
    on, in order (the calls go through)."""

    def watch(module: ModuleType, name: str) -> list[Any]:
        seen: list[Any] = []
        real = getattr(module, name)

        def counted(first: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(first)
            return real(first, *args, **kwargs)

        monkeypatch.setattr(module, name, counted)
        return seen

    return watch


@pytest.fixture
def schema_safety_checks(first_arguments: Callable[[ModuleType, str], list[Any]]) -> list[Any]:
    """Every schema the sandbox checks for safety (`schema_problems`) from now on, in order."""
    from converge_dsl.sandbox import _safe_schema

    return first_arguments(_safe_schema, "schema_problems")


PoolIn = Callable[[Mapping[str, str]], Any]


@pytest.fixture
def trusts_the_environments_certificates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[PoolIn], None]]:
    """`check(pool_in)`: the connection pool `pool_in(env)` makes (a `ShardedTransport`)
    trusts the certificates `SSL_CERT_FILE` of `env` names, not the process's."""
    import certifi

    from converge_dsl.models import _transport

    bundle = Path(certifi.where()).read_text(encoding="ascii")
    end = "-----END CERTIFICATE-----\n"
    one = tmp_path / "one.pem"
    one.write_text(bundle[bundle.index("-----BEGIN") : bundle.index(end) + len(end)])
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    def trusted(pool: Any) -> int:
        return len(pool._shards[0]._pool._ssl_context.get_ca_certs())

    def check(pool_in: PoolIn) -> None:
        assert trusted(pool_in({"SSL_CERT_FILE": str(one)})) == 1
        monkeypatch.setenv("SSL_CERT_FILE", str(one))
        assert trusted(pool_in({})) > 1  # certifi's, whatever the process says
        monkeypatch.delenv("SSL_CERT_FILE")

    try:
        yield check
    finally:
        _transport.verifying_context.cache_clear()
