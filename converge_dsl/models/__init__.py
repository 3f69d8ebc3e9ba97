"""The model port and its adapters (DESIGN §1.3).

Public surface: the port types (`converge_dsl.models.port`), the adapters
(`ScriptedModel`, `RecordingModel`, `ReplayModel`, `HttpModel`) and
`build_model`, the factory the compiler calls for each `models.<name>` entry.
"""

from __future__ import annotations

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

__all__ = [
    "AccountBinding",
    "AccountRoster",
    "HttpModel",
    "HttpSettings",
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
    "RecordingModel",
    "ReplayModel",
    "ScriptedModel",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "ToolSpec",
    "Usage",
    "build_model",
]
