"""The model-configuration check of the validate stage (docs/architecture.md §8).

`check_model_config` is a `converge_dsl.frontend.Check`, composed by
`converge_dsl.validation`: it refuses an account's `api_key_env` that does not
name an API key variable (`MODEL_KEY_ENV_REFUSED`), with the rule `run`
applies (`_key_env.key_env_refused`) against the environment of the user
running `validate`. The schema already holds the shapes and the `limits`
ranges. It imports neither the HTTP adapters nor the engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.frontend import roster_accounts
from converge_dsl.models._key_env import KEY_ENV_RULE, key_env_refused

if TYPE_CHECKING:
    from converge_dsl.frontend import PipelineFacts


def check_model_config(
    facts: PipelineFacts, env: Mapping[str, str] | None = None
) -> Iterator[Diagnostic]:
    """`MODEL_KEY_ENV_REFUSED` at each refused `api_key_env` (`env` default: `os.environ`)."""
    environment = os.environ if env is None else env
    for account in roster_accounts(facts.manifest.models.values()):
        variable = account.api_key_env
        if isinstance(variable, str) and key_env_refused(variable, environment):
            yield facts.error(
                codes.MODEL_KEY_ENV_REFUSED,
                f"api_key_env {variable} does not look like an API key variable",
                (*account.path, "api_key_env"),
                hint=KEY_ENV_RULE,
            )
