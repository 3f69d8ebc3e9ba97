"""Which environment variables a pipeline may read as an API key.

An `api_key_env` name must look like a key's (`KEY_ENV_PATTERN`: ending in
`_API_KEY`, `_KEY` or `_TOKEN`, optionally `_` and digits after) unless the
user's environment lists it in `ALLOWED_KEY_ENVS` (comma-separated): a
pipeline cannot send any variable (a database password) to its `base_url`.
The rule has a module of its own because validate checks it, and validate's
start-up does not import the account machinery (docs/architecture.md §5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

KEY_ENV_PATTERN = re.compile(r"(?:[A-Za-z0-9_]*_)?(?:API_KEY|KEY|TOKEN)(?:_[0-9]+)?")
ALLOWED_KEY_ENVS = "CONVERGE_DSL_ALLOWED_KEY_ENVS"
KEY_ENV_RULE = (
    "an api_key_env name must end in _API_KEY, _KEY or _TOKEN (optionally followed by "
    f"_ and digits), or be listed in the environment variable {ALLOWED_KEY_ENVS} "
    "(comma-separated names)"
)


def key_env_refused(variable: str, env: Mapping[str, str]) -> bool:
    """Whether `variable` may not be read as an API key, given the user's environment `env`."""
    if KEY_ENV_PATTERN.fullmatch(variable):
        return False
    allowed = {name.strip() for name in env.get(ALLOWED_KEY_ENVS, "").split(",")}
    return variable not in allowed
