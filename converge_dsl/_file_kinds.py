"""What kind of converge-dsl file a path holds, read from the text without loading it.

- `says_ours(path, kind)`: the file says it is converge-dsl's file of `kind`
  (`Pipeline`, `PipelineTest`): `validate --only-pipelines` and `test` pick
  files with it.
- `file_kind(path)`: how `validate`, `serve` and a folder walk sort YAML files into
  pipelines, pack manifests, evaluation files, run configurations and other tools' files
  (`is_evaluation(path)`, `says_pipeline(path)` read it).
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


PIPELINE, PACK, EVALUATION, RUN_CONFIG = "Pipeline", "Pack", "Evaluation", "RunConfig"


def file_kind(path: Path) -> str | None:
    """What `validate` checks the YAML file at `path` as: `PACK` (a `pack.yaml` that says
    `kind: Pack`), `EVALUATION` (a `*.eval.yaml`/`.yml` that says `kind: Evaluation`),
    `RUN_CONFIG` (a `*.yaml`/`.yml` that says `kind: RunConfig`), `PIPELINE`, or None.

    None only for a file that loads and is another converge-dsl kind (`kind` is one of
    `OTHER_KINDS` at the top), or none at all: a mapping with neither `apiVersion` nor
    `kind` (a CI workflow, an old YAML cassette). Everything else, broken files included,
    is a pipeline. A folder's file of kind None is skipped; one named directly is checked
    as a pipeline.
    """
    kind = _top_kind(path)
    if kind == PACK and path.name == "pack.yaml":
        return PACK
    if kind == EVALUATION and path.name.endswith((".eval.yaml", ".eval.yml")):
        return EVALUATION
    if kind == RUN_CONFIG and path.suffix in {".yaml", ".yml"}:
        return RUN_CONFIG
    other = kind is _NOT_OURS or (isinstance(kind, str) and kind in OTHER_KINDS)
    return None if other else PIPELINE


def is_evaluation(path: Path) -> bool:
    """An evaluation file: a `*.eval.yaml` (or `.yml`) that says `kind: Evaluation` at the top."""
    return file_kind(path) == EVALUATION


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
    return says_ours(path, "Pipeline") and file_kind(path) == PIPELINE
