"""What kind of converge-dsl file a path holds, read from the text without loading it.

- `says_ours(path, kind)`: the file says it is converge-dsl's file of `kind`
  (`Pipeline`, `PipelineTest`): `validate --only-pipelines` and `test` pick
  files with it.
- `is_pipeline(path)`, `is_pack(path)`, `is_evaluation(path)`, `is_run_config(path)`,
  `says_pipeline(path)`: how a folder's YAML files are sorted into pipelines, pack
  manifests, evaluation files, run configurations and other tools' files.
"""

from __future__ import annotations

import re
from pathlib import Path

from converge_dsl._reading import ReadRefused, read_bytes

# Files in a folder that say one of these kinds at the top are not pipelines.
OTHER_KINDS = frozenset({"Evaluation", "ModelScript", "Pack", "PipelineTest", "RunConfig"})


def _top_kind(path: Path) -> object:
    """The `kind` at the top of the file (None when only `apiVersion` is there);
    `_UNREAD` when it does not load as a mapping, `_NOT_OURS` for a file that cannot
    name a kind or is a mapping with neither `apiVersion` nor `kind`."""
    from converge_dsl._pyyaml import yaml

    try:
        text = read_bytes(path, "pipeline").decode("utf-8-sig")
        if not any(word in text for word in ("ModelScript", "Pack", "apiVersion", "kind")):
            return _NOT_OURS  # cannot name a kind or an API version
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, ValueError, RecursionError, yaml.YAMLError, ReadRefused):
        return _UNREAD
    if not isinstance(data, dict):
        return _UNREAD
    if "kind" not in data and "apiVersion" not in data:
        return _NOT_OURS
    return data.get("kind")


_UNREAD, _NOT_OURS = object(), object()


def is_pack(path: Path) -> bool:
    """A pack's manifest: a `pack.yaml` that says `kind: Pack` at the top."""
    return path.name == "pack.yaml" and _top_kind(path) == "Pack"


def is_evaluation(path: Path) -> bool:
    """An evaluation file: a `*.eval.yaml` (or `.yml`) that says `kind: Evaluation` at the top."""
    return path.name.endswith((".eval.yaml", ".eval.yml")) and _top_kind(path) == "Evaluation"


def is_run_config(path: Path) -> bool:
    """A run configuration (`run --config`): a YAML file that says `kind: RunConfig` at the top."""
    return path.suffix in {".yaml", ".yml"} and _top_kind(path) == "RunConfig"


def is_pipeline(path: Path) -> bool:
    """False only for a file that loads and is another converge-dsl kind, or none at all.

    Another kind: `kind` is `Evaluation`, `ModelScript`, `Pack`, `PipelineTest` or
    `RunConfig` at the top. None at all: a mapping with neither `apiVersion` nor `kind` (a CI
    workflow, an old YAML cassette). Everything else, broken files included, is checked as a
    pipeline.
    """
    kind = _top_kind(path)
    return kind is not _NOT_OURS and kind not in OTHER_KINDS


# A line saying a file is converge-dsl's: `apiVersion: converge-dsl/...` or
# `kind: KIND`, in block or flow style, keys and values quoted or not.
_SAYS_OURS = (
    r"""(?:^|[{,])[ \t]*["']?(?:apiVersion["']?[ \t]*:[ \t]*["']?converge-dsl/"""
    r"""|kind["']?[ \t]*:[ \t]*["']?KIND\b)"""
)

# A top-level `apiVersion:` that names another API than converge-dsl's (one that
# does not even mention it: `converge-dls/v1` is a typo of ours, reported by validate).
_OTHER_API = re.compile(
    r"""^["']?apiVersion["']?[ \t]*:[ \t]*["']?(?![^\s"'#]*converge)[^\s"'#]""",
    re.M | re.I,
)


def says_ours(path: Path, kind: str) -> bool:
    """Whether the file at `path` says it is a converge-dsl file of `kind` (`Pipeline`,
    `PipelineTest`): a line `apiVersion: converge-dsl/...` or `kind: KIND`, and no
    top-level `apiVersion` of another tool (Tekton's `tekton.dev/v1` has a `kind:
    Pipeline` too). A file that cannot be read is kept, so its reader says why."""
    try:
        text = read_bytes(path, "file").decode("utf-8-sig", errors="replace")
    except (OSError, ReadRefused):
        return True
    if _OTHER_API.search(text) is not None:
        return False
    return re.search(_SAYS_OURS.replace("KIND", re.escape(kind)), text, re.M) is not None


def says_pipeline(path: Path) -> bool:
    """For `only_pipelines`: the file names converge-dsl (`_SAYS_OURS`), names no other
    API at the top (`apiVersion: tekton.dev/v1` with `kind: Pipeline`) and is a pipeline.

    Another tool's YAML (a compose file, a Helm template that is not YAML at
    all) is skipped unread by the loader; a file that cannot be read is kept, so
    `validate` reports why.
    """
    return says_ours(path, "Pipeline") and is_pipeline(path)
