"""The native solver registry: installed entry points, never YAML import paths.

Solvers are discovered in the entry-point group `converge_dsl.solvers`
(`importlib.metadata`); a pack's `solver:` field only *names* one. Loading is
lazy and cached per name. Tests pass their own mapping to `SolverRegistry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib.metadata import entry_points

from converge_dsl.diagnostics import did_you_mean
from converge_dsl.errors import PackError
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
                raise PackError(
                    f"no installed solver is registered as {name!r}",
                    hint=f"did you mean {guess!r}?"
                    if guess
                    else f"install the distribution that provides it ({ENTRY_POINT_GROUP})",
                )
            try:
                solver = factory()
            except Exception as exc:  # a broken installed plugin must not crash the CLI
                raise PackError(f"solver {name!r} failed to load: {exc}") from None
            if not isinstance(solver, Solver):
                raise PackError(f"solver {name!r} does not implement the Solver protocol")
            self._built[name] = solver
        return self._built[name]


def _loader(entry: object) -> Callable[[], Solver]:
    def build() -> Solver:
        cls = entry.load()  # type: ignore[attr-defined]
        solver: Solver = cls()
        return solver

    return build


@lru_cache(maxsize=1)
def installed_solvers() -> SolverRegistry:
    """Every solver registered by installed distributions (discovered once per process)."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    return SolverRegistry({entry.name: _loader(entry) for entry in found})
