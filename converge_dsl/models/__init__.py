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
the run's usage meter (its `CallMeter` protocol); `check_model_scripts`, the
pipeline check that scripts and cassettes exist and scripts load, and
`check_model_config`, the check that every `api_key_env` names an API key
variable (both `converge_dsl.frontend.Check`s, composed by `converge_dsl.validation`);
`compile_script(document)` -> `Script`, a model script's checks and compilation
from a loaded document (a test file's inline replies use it);
`ShardedTransport`, the HTTP connection pool of a model (callers that run a pipeline
many times share one per model).

Names are imported on first use (PEP 562): the model-script check must not
pay for the HTTP adapters' imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_names

if TYPE_CHECKING:
    from converge_dsl.models._config_checks import check_model_config
    from converge_dsl.models._metered import CallMeter, Metered, metered_call
    from converge_dsl.models._replay_order import ReplayOrder
    from converge_dsl.models._script import Script, compile_script
    from converge_dsl.models._script_checks import check_model_scripts
    from converge_dsl.models._transport import ShardedTransport
    from converge_dsl.models.cassette import RecordingModel, ReplayModel
    from converge_dsl.models.factory import build_model
    from converge_dsl.models.http import HttpModel, HttpSettings
    from converge_dsl.models.port import (
        AccountBinding,
        AccountRoster,
        Message,
        Model,
        ModelDefaults,
        ModelError,
        ModelErrorCode,
        ModelRequest,
        ModelReturn,
        OnEarlyToolCall,
        OnIncrement,
        Part,
        TextPart,
        ToolCallPart,
        ToolResultPart,
        ToolSpec,
        Usage,
    )
    from converge_dsl.models.scripted import ScriptedModel

_WHERE: dict[str, str] = {
    "AccountBinding": "converge_dsl.models.port",
    "AccountRoster": "converge_dsl.models.port",
    "CallMeter": "converge_dsl.models._metered",
    "Metered": "converge_dsl.models._metered",
    "ReplayOrder": "converge_dsl.models._replay_order",
    "ShardedTransport": "converge_dsl.models._transport",
    "HttpModel": "converge_dsl.models.http",
    "HttpSettings": "converge_dsl.models.http",
    "Message": "converge_dsl.models.port",
    "Model": "converge_dsl.models.port",
    "ModelDefaults": "converge_dsl.models.port",
    "ModelError": "converge_dsl.models.port",
    "ModelErrorCode": "converge_dsl.models.port",
    "ModelRequest": "converge_dsl.models.port",
    "ModelReturn": "converge_dsl.models.port",
    "OnEarlyToolCall": "converge_dsl.models.port",
    "OnIncrement": "converge_dsl.models.port",
    "Part": "converge_dsl.models.port",
    "RecordingModel": "converge_dsl.models.cassette",
    "ReplayModel": "converge_dsl.models.cassette",
    "ScriptedModel": "converge_dsl.models.scripted",
    "TextPart": "converge_dsl.models.port",
    "ToolCallPart": "converge_dsl.models.port",
    "ToolResultPart": "converge_dsl.models.port",
    "ToolSpec": "converge_dsl.models.port",
    "Usage": "converge_dsl.models.port",
    "build_model": "converge_dsl.models.factory",
    "check_model_config": "converge_dsl.models._config_checks",
    "check_model_scripts": "converge_dsl.models._script_checks",
    "metered_call": "converge_dsl.models._metered",
    "Script": "converge_dsl.models._script",
    "compile_script": "converge_dsl.models._script",
}

__all__ = [
    "AccountBinding",
    "AccountRoster",
    "CallMeter",
    "HttpModel",
    "HttpSettings",
    "Message",
    "Metered",
    "Model",
    "ModelDefaults",
    "ModelError",
    "ModelErrorCode",
    "ModelRequest",
    "ModelReturn",
    "OnEarlyToolCall",
    "OnIncrement",
    "Part",
    "RecordingModel",
    "ReplayModel",
    "ReplayOrder",
    "Script",
    "ScriptedModel",
    "ShardedTransport",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "ToolSpec",
    "Usage",
    "build_model",
    "check_model_config",
    "check_model_scripts",
    "compile_script",
    "metered_call",
]

__getattr__ = lazy_names(__name__, _WHERE)
