"""The model port and its adapters (docs/architecture.md §8).

Public surface:
- the port (`converge_dsl.models.port`): the `Model` protocol and its `ModelDefaults`
  mixin; `ModelRequest` of `Message`s whose `Part`s are `TextPart`, `ToolCallPart` or
  `ToolResultPart`, offering `ToolSpec`s; `ModelReturn` with its `Usage`; `ModelError`
  with its `ModelErrorCode`; the streaming callbacks `OnIncrement` and `OnEarlyToolCall`;
  `AccountBinding` and `AccountRoster`, the non-secret account identities;
- the adapters `ScriptedModel`, `RecordingModel`, `ReplayModel` (the replays of one
  cassette in a run share a `ReplayOrder`), `HttpModel` (with its `HttpSettings`), and
  `build_model`, the factory the runtime calls for each `models.<name>` entry;
`metered_call(model, request, meter)` -> `Metered`, one call under a reservation of
the run's usage meter (its `CallMeter` protocol); `CALL_NOTE`, a `CallNote` the
metered and traced calls set around one call and the answer cache marks cached;
`check_model_scripts`, the pipeline check that scripts and cassettes exist and scripts load, and
`check_model_config`, the check that every `api_key_env` names an API key
variable (both `converge_dsl.frontend.Check`s, composed by `converge_dsl.validation`);
`estimate_tokens(text)`, the tokens a text is reckoned at before a call reserves them
(a judge's call too); `compile_script(document)` -> `Script`, a model script's checks
and compilation from a loaded document (a test file's inline replies use it);
`ShardedTransport`, the HTTP connection pool of a model (callers that run a pipeline
many times share one per model), `LentTransport`, such a pool lent to one run
(closing it leaves the pool open), `certificates_in(env)`, the certificates an
environment names for such a pool, and `verifying_context(certificates)`, its TLS
context (an HTTP tool server's client uses them too); `Redactor`, which masks known
secret values in every form a text may show them (the tool servers' results use it
too), and `redact_text(text, secrets)`, its masking of secret values in any text (a
service's error answers use it).

Names are imported on first use (PEP 562): the model-script check must not
pay for the HTTP adapters' imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.models._call_note import *  # noqa: F403
    from converge_dsl.models._common import *  # noqa: F403
    from converge_dsl.models._config_checks import *  # noqa: F403
    from converge_dsl.models._metered import *  # noqa: F403
    from converge_dsl.models._redact import *  # noqa: F403
    from converge_dsl.models._replay_order import *  # noqa: F403
    from converge_dsl.models._script import *  # noqa: F403
    from converge_dsl.models._script_checks import *  # noqa: F403
    from converge_dsl.models._transport import *  # noqa: F403
    from converge_dsl.models.cassette import *  # noqa: F403
    from converge_dsl.models.factory import *  # noqa: F403
    from converge_dsl.models.http import *  # noqa: F403
    from converge_dsl.models.port import *  # noqa: F403
    from converge_dsl.models.scripted import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.models._call_note": ("CALL_NOTE", "CallNote"),
            "converge_dsl.models._common": ("estimate_tokens",),
            "converge_dsl.models._config_checks": ("check_model_config",),
            "converge_dsl.models._metered": ("CallMeter", "Metered", "metered_call"),
            "converge_dsl.models._redact": ("Redactor", "redact_text"),
            "converge_dsl.models._replay_order": ("ReplayOrder",),
            "converge_dsl.models._script": ("Script", "compile_script"),
            "converge_dsl.models._script_checks": ("check_model_scripts",),
            "converge_dsl.models._transport": (
                "LentTransport",
                "ShardedTransport",
                "certificates_in",
                "verifying_context",
            ),
            "converge_dsl.models.cassette": ("RecordingModel", "ReplayModel"),
            "converge_dsl.models.factory": ("build_model",),
            "converge_dsl.models.http": ("HttpModel", "HttpSettings"),
            "converge_dsl.models.port": (
                "AccountBinding",
                "AccountRoster",
                "Message",
                "Model",
                "ModelDefaults",
                "ModelError",
                "ModelErrorCode",
                "ModelRequest",
                "ModelReturn",
                "OnEarlyToolCall",
                "OnIncrement",
                "Part",
                "TextPart",
                "ToolCallPart",
                "ToolResultPart",
                "ToolSpec",
                "Usage",
            ),
            "converge_dsl.models.scripted": ("ScriptedModel",),
        },
    )
