"""The native solver registry: installed entry points, never YAML import paths.

Solvers are discovered in the entry-point group `converge_dsl.solvers`; a
pack's `solver:` field only *names* one. Discovery reads the `entry_points.txt`
of each distribution on `sys.path` directly (what `importlib.metadata` reads,
without importing it or parsing every distribution's metadata: `validate`
only needs the names); loading goes through `importlib.metadata.EntryPoint`,
lazily and cached per name. Tests pass their own mapping to `SolverRegistry`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache

from converge_dsl import codes
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.packs._files import PackRefused
from converge_dsl.solvers import ENTRY_POINT_GROUP, Solver


class SolverRegistry:
    """Name -> solver factory. `get(name)` builds (once) and returns the solver."""

    def __init__(self, factories: Mapping[str, Callable[[], Solver]]) -> None:
        self._factories = dict(factories)
        self._built: dict[str, Solver] = {}

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def get(self, name: str) -> Solver:
        if name not in self._built:
            factory = self._factories.get(name)
            if factory is None:
                guess = did_you_mean(name, self._factories)
                raise PackRefused(
                    codes.SOLVER_NOT_INSTALLED,
                    f"no installed solver is registered as {name!r}",
                    hint=suggestion(guess)
                    if guess
                    else f"install the distribution that provides it ({ENTRY_POINT_GROUP})",
                )
            try:
                solver = factory()
            except Exception as exc:  # a broken installed plugin must not crash the CLI
                raise PackRefused(
                    codes.SOLVER_NOT_LOADED, f"solver {name!r} failed to load: {exc}"
                ) from None
            if not isinstance(solver, Solver):
                raise PackRefused(
                    codes.SOLVER_NOT_LOADED,
                    f"solver {name!r} does not implement the Solver protocol",
                )
            self._built[name] = solver
        return self._built[name]


def _loader(name: str, value: str) -> Callable[[], Solver]:
    def build() -> Solver:
        from importlib.metadata import EntryPoint

        cls = EntryPoint(name, value, ENTRY_POINT_GROUP).load()
        solver: Solver = cls()
        return solver

    return build


_DISTRIBUTION = re.compile(r"(.+?)(?:-[^-]*)?\.(?:dist|egg)-info\Z")


def _section(text: str, group: str) -> Iterator[tuple[str, str]]:
    """The `name = value` lines of section `[group]` of an `entry_points.txt`."""
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            inside = line == f"[{group}]"
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            yield name.strip(), value.strip()


def declared_entry_points(group: str, path: list[str] | None = None) -> dict[str, str]:
    """name -> `module:attr` of `group` over the distributions on `path` (default `sys.path`).

    Like `importlib.metadata.entry_points`: a distribution counts once (the
    first on the path), and a later name replaces an earlier one.
    """
    found: dict[str, str] = {}
    seen: set[str] = set()
    for entry in sys.path if path is None else path:
        folder = entry or "."
        try:
            names = sorted(os.listdir(folder))
        except OSError:  # not a folder (a zip file, a missing entry)
            continue
        for name in names:
            match = _DISTRIBUTION.match(name)
            if match is None:
                continue
            distribution = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            if distribution in seen:
                continue
            seen.add(distribution)
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            found.update(_section(text, group))
    return found


@lru_cache(maxsize=1)
def installed_solvers() -> SolverRegistry:
    """Every solver registered by installed distributions (discovered once per process)."""
    declared = declared_entry_points(ENTRY_POINT_GROUP)
    return SolverRegistry({name: _loader(name, value) for name, value in declared.items()})
