"""Account rosters: API keys named by environment variable, in priority order.

An `Account` holds its key privately; its repr shows only the label and the
variable name. `AccountPool` tracks the selected account and the accounts
disabled by an authentication failure (an expired key does not heal within
a run); failover moves the selection, so later requests stick to the account
that worked. `RosterState` is that bookkeeping as an immutable value, so the
retry policy can decide a failover without touching the pool.

An `api_key_env` name must pass `_key_env.key_env_refused`: a pipeline cannot
send any variable (a database password) to its `base_url`.

A key is used without the whitespace around it (a variable set from a file
often ends in `\n` or `\r\n`, which no header may hold and which an
error would otherwise quote); `warn` hears that it was stripped (CD940),
never the key. A key that is only whitespace is not set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from converge_dsl.codes import API_KEY_WHITESPACE
from converge_dsl.models._key_env import KEY_ENV_RULE, key_env_refused
from converge_dsl.models.port import AccountBinding, AccountRoster, ModelError, ModelErrorCode

if TYPE_CHECKING:
    from converge_dsl.frontend import AccountSpec

ANONYMOUS = "anonymous"


class Account:
    __slots__ = ("_key", "env_var", "label")

    def __init__(self, label: str, env_var: str | None, key: str | None) -> None:
        self.label = label
        self.env_var = env_var
        self._key = key

    @property
    def key(self) -> str | None:
        return self._key

    def __repr__(self) -> str:
        return f"Account(label={self.label!r}, env={self.env_var!r})"


_WARNED: set[str] = set()  # once a process: a batch builds its models for every case


def _to_stderr(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        sys.stderr.write(f"warning[{API_KEY_WHITESPACE}]: {message}\n")


def roster_problem(model_name: str, raw: object) -> ModelError | None:
    """The error of a hand-written `accounts` value that is not `[{name, api_key_env}]`."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        return _config(model_name, "`accounts` must be a non-empty list of {name, api_key_env}")
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or set(entry) != {"name", "api_key_env"}:
            return _config(model_name, f"accounts[{index}] must be {{name, api_key_env}} exactly")
    return None


def accounts_from_config(
    model_name: str,
    roster: Sequence[AccountSpec] | None,
    env: Mapping[str, str],
    warn: Callable[[str], object] = _to_stderr,
) -> list[Account]:
    """The accounts of a roster (`roster_problem` ran on a hand-written one); none means
    one keyless account.

    Each key is stripped of the whitespace around it; `warn` hears which
    variable held some (default: a CD940 warning on standard error).
    """
    if roster is None:
        return [Account(ANONYMOUS, None, None)]
    if not roster:
        raise _config(model_name, "`accounts` must be a non-empty list of {name, api_key_env}")
    accounts: list[Account] = []
    for index, entry in enumerate(roster):
        label, variable = entry.name, entry.api_key_env
        if not isinstance(label, str) or not isinstance(variable, str) or not label or not variable:
            raise _config(model_name, f"accounts[{index}] name and api_key_env must be strings")
        if any(a.label == label for a in accounts):
            raise _config(model_name, f"account name {label!r} is used twice")
        if key_env_refused(variable, env):
            raise ModelError(
                ModelErrorCode.CONFIG,
                f"model {model_name!r}: account {label!r} names the environment variable "
                f"{variable}, which does not look like an API key's; it was not read",
                hint=KEY_ENV_RULE,
            )
        key = (env.get(variable) or "").strip()
        if key and key != env[variable]:
            warn(
                f"model {model_name!r}: account {label!r}: the environment variable {variable} "
                "holds whitespace around the key (a space, tab, CR or LF); it is used without it"
            )
        if not key:
            raise ModelError(
                ModelErrorCode.CONFIG,
                f"model {model_name!r}: account {label!r} needs the environment variable "
                f"{variable}, which is not set",
                hint=f"export {variable}=<your API key> before running (never put keys in YAML)",
            )
        accounts.append(Account(label, variable, key))
    return accounts


def _config(model_name: str, problem: str) -> ModelError:
    return ModelError(
        ModelErrorCode.CONFIG,
        f"model {model_name!r}: {problem}",
        hint="accounts: [{name: main, api_key_env: OPENAI_API_KEY}]",
    )


@dataclass(frozen=True, slots=True)
class RosterState:
    """Which account of a roster is selected and which are disabled, as a value.

    `labels` are unique and in priority order; `selected` indexes them. Every method is
    pure: the changing ones return a new state.
    """

    labels: tuple[str, ...]
    selected: int = 0
    disabled: frozenset[str] = frozenset()

    def current(self) -> str:
        """The selected label, or the first usable one after it if it is disabled."""
        count = len(self.labels)
        for step in range(count):
            label = self.labels[(self.selected + step) % count]
            if label not in self.disabled:
                return label
        return self.labels[self.selected]

    def usable(self) -> bool:
        return len(self.disabled) < len(self.labels)

    def next_excluding(self, excluded: Set[str]) -> str | None:
        """The first usable label, in priority order, not in `excluded`."""
        for label in self.labels:
            if label not in self.disabled and label not in excluded:
                return label
        return None

    def select(self, label: str) -> RosterState:
        """This state with `label` selected; an unknown label changes nothing."""
        for index, known in enumerate(self.labels):
            if known == label:
                return replace(self, selected=index)
        return self

    def disable(self, label: str) -> RosterState:
        return replace(self, disabled=self.disabled | {label})


class AccountPool:
    """The accounts of one model and their mutable `RosterState` (shared by its calls)."""

    def __init__(self, provider: str, accounts: Sequence[Account]) -> None:
        self._provider = provider
        self._accounts = {a.label: a for a in accounts}
        self._state = RosterState(tuple(a.label for a in accounts))

    @property
    def state(self) -> RosterState:
        """The selection and the disabled accounts, as they are now."""
        return self._state

    @property
    def secrets(self) -> Iterable[str]:
        return (a.key for a in self._accounts.values() if a.key)

    def roster(self) -> AccountRoster:
        return AccountRoster(self.state.labels, self.state.current())

    def binding(self) -> AccountBinding:
        return AccountBinding(self._provider, self.state.current())

    def select(self, label: str) -> None:
        self._state = self._state.select(label)

    def current(self) -> Account:
        """The selected account, or the first usable one after it if it is disabled."""
        return self._accounts[self.state.current()]

    def disable(self, label: str) -> None:
        self._state = self._state.disable(label)

    def labels(self) -> list[str]:
        return list(self.state.labels)
