"""Pipeline inputs from the command line: `--input KEY=VALUE` and `--inputs FILE.json`.

`run` and `plan` take the same two options (`add_input_arguments`) and read
them the same way (`parse_inputs`): JSON values are strict (no NaN/Infinity)
and nest at most `MAX_INPUT_DEPTH` deep; bad input is a `UsageError`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._json_keys import DuplicateKey, duplicate_path, keep_duplicates, unique_keys
from converge_dsl._json_text import loads, surrogate_problem
from converge_dsl._json_types import MAX_INPUT_DEPTH, nests_deeper
from converge_dsl.errors import UsageError


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an input value (JSON if it parses, else text); repeatable",
    )
    parser.add_argument("--inputs", type=Path, metavar="FILE.json", help="a JSON object of inputs")


def pairs(values: list[str], option: str) -> dict[str, str]:
    """`NAME=VALUE` options as a mapping; `UsageError` naming `option` for a bad one."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"{option} {value!r}: expected NAME=VALUE", code=codes.INPUT_REFUSED)
        out[name.strip()] = rest
    return out


def load_input_json(text: str, what: str) -> Any:
    """Standard JSON (no NaN/Infinity, no lone surrogate) nested at most `MAX_INPUT_DEPTH` deep.

    Raises `ValueError` when `text` is not such JSON; `UsageError` naming `what`
    when it nests too deeply or gives one key twice in an object (`converge_dsl._json_keys`:
    the rule of a request body of `serve` too).
    """
    too_deep = UsageError(
        f"{what} nests deeper than {MAX_INPUT_DEPTH} levels",
        hint=f"flatten the value to at most {MAX_INPUT_DEPTH} levels of arrays and objects",
        code=codes.INPUT_REFUSED,
    )
    try:
        value = loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise too_deep from None
    except DuplicateKey as exc:
        raise _twice(text, what, exc.key) from None
    if nests_deeper(value, text, MAX_INPUT_DEPTH):
        raise too_deep
    return value


def _twice(text: str, what: str, key: str) -> UsageError:
    """The refusal of JSON `text` (read once without a problem but this) giving `key` twice;
    located at the repeat `duplicate_path` finds, which names the key when it differs (an
    outer object's repeat drops the inner object `key` was repeated in)."""
    import json

    from converge_dsl._json_pointer import pointer

    try:
        path = duplicate_path(json.loads(text, object_pairs_hook=keep_duplicates))
    except RecursionError:  # nested too deeply after the repeat: said unlocated
        path = None
    where = f" (at {pointer(path)})" if path else ""
    key = str(path[-1]) if path else key
    return UsageError(
        f"{what} gives the key {key!r} twice in one object{where}",
        hint=f"keep one entry for {key!r}",
        code=codes.INPUT_REFUSED,
    )


def json_file(path: Path, option: str) -> Any:
    """The JSON in the file an option names; `UsageError` when it cannot be read or parsed."""
    from converge_dsl._reading import read_failure, read_text

    try:
        text = read_text(path, f"{option} file")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{option} {path} is not UTF-8 text (byte {exc.start})",
            hint=f"give {option} a JSON file saved as UTF-8",
            code=codes.FILE_UNREADABLE,
        ) from None
    except OSError as exc:
        raise read_failure(exc, path, f"{option} file") from None
    try:
        return load_input_json(text, f"{option} {path}")
    except ValueError as exc:
        raise UsageError(
            f"{option} {path} is not JSON: {exc}", code=codes.FILE_UNREADABLE
        ) from None


def parse_inputs(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if args.inputs is not None:
        loaded = json_file(args.inputs, "--inputs")
        if not isinstance(loaded, dict):
            raise UsageError(
                f"--inputs {args.inputs} must hold a JSON object", code=codes.INPUT_REFUSED
            )
        values.update(loaded)
    for name, text in pairs(args.input, "--input").items():
        try:
            values[name] = load_input_json(text, f"--input {name}")
        except ValueError:
            problem = surrogate_problem(text)  # text the shell passed through undecoded
            if problem is not None:
                raise UsageError(
                    f"--input {name}: {problem}",
                    hint="give the value as UTF-8 text",
                    code=codes.INPUT_REFUSED,
                ) from None
            values[name] = text
    return values
