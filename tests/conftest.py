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

from collections.abc import Iterator
from pathlib import Path

import pytest

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
