"""Account rosters: API keys named by environment variable, in priority order.

An `Account` holds its key privately; its repr shows only the label and the
variable name. `AccountPool` tracks the selected account and the accounts
disabled by an authentication failure (an expired key does not heal within
a run); failover moves the selection, so later requests stick to the account
that worked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from converge_dsl.models.port import AccountBinding, AccountRoster, ModelError, ModelErrorCode

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


def accounts_from_config(model_name: str, raw: object, env: Mapping[str, str]) -> list[Account]:
    """Read `accounts: [{name, api_key_env}]`; no accounts means one keyless account."""
    if raw is None:
        return [Account(ANONYMOUS, None, None)]
    if not isinstance(raw, list) or not raw:
        raise _config(model_name, "`accounts` must be a non-empty list of {name, api_key_env}")
    accounts: list[Account] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or set(entry) != {"name", "api_key_env"}:
            raise _config(model_name, f"accounts[{index}] must be {{name, api_key_env}} exactly")
        label, variable = entry["name"], entry["api_key_env"]
        if not isinstance(label, str) or not isinstance(variable, str) or not label or not variable:
            raise _config(model_name, f"accounts[{index}] name and api_key_env must be strings")
        if any(a.label == label for a in accounts):
            raise _config(model_name, f"account name {label!r} is used twice")
        key = env.get(variable)
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


class AccountPool:
    def __init__(self, provider: str, accounts: Sequence[Account]) -> None:
        self._provider = provider
        self._accounts = tuple(accounts)
        self._selected = 0
        self._disabled: set[str] = set()

    @property
    def secrets(self) -> Iterable[str]:
        return (a.key for a in self._accounts if a.key)

    def roster(self) -> AccountRoster:
        return AccountRoster(tuple(a.label for a in self._accounts), self.current().label)

    def binding(self) -> AccountBinding:
        return AccountBinding(self._provider, self.current().label)

    def select(self, label: str) -> None:
        for index, account in enumerate(self._accounts):
            if account.label == label:
                self._selected = index

    def current(self) -> Account:
        """The selected account, or the first usable one after it if it is disabled."""
        count = len(self._accounts)
        for step in range(count):
            account = self._accounts[(self._selected + step) % count]
            if account.label not in self._disabled:
                return account
        return self._accounts[self._selected]

    def usable(self) -> bool:
        return len(self._disabled) < len(self._accounts)

    def disable(self, label: str) -> None:
        self._disabled.add(label)

    def next_excluding(self, excluded: set[str]) -> Account | None:
        """The first usable account, in priority order, not in `excluded`."""
        for account in self._accounts:
            if account.label not in self._disabled and account.label not in excluded:
                return account
        return None

    def labels(self) -> list[str]:
        return [a.label for a in self._accounts]
