"""`--input`/`--inputs` (`cli._inputs`): a key given twice in one object is refused as a
request body of `serve` refuses it (`converge_dsl._json_keys`), whatever its values."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from converge_dsl._json_keys import DuplicateKey, duplicate_path, keep_duplicates, unique_keys
from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = str(ROOT / "pipelines" / "market-entry.yaml")

# Each value gives a key twice: equal values, different ones, and values Python takes
# for equal though JSON does not (`1 == true`: the CLI kept `true`, silently).
TWICE = [
    ('{"market": "a", "market": "a"}', "market", "/market"),
    ('{"market": "a", "market": "b"}', "market", "/market"),
    ('{"market": {"n": 1, "n": true}}', "n", "/market/n"),
    ('{"market": [{"n": 1.0}, {"n": 1, "n": 1.0}]}', "n", "/market/1/n"),
    # the inner repeat is dropped with the first "market": the key named is where it points
    ('{"market": {"b": 1, "b": 2}, "market": "x"}', "market", "/market"),
]


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("text", "key", "at"), TWICE)
@pytest.mark.parametrize("command", ["run", "plan"])
def test_an_inputs_file_giving_a_key_twice_is_refused_where_it_is(
    tmp_path: Path, command: str, text: str, key: str, at: str
) -> None:
    path = tmp_path / "inputs.json"
    path.write_text(text, encoding="utf-8")
    code, _, err = _cli(command, PIPELINE, "--inputs", str(path))
    assert code == 3
    assert err == (
        f"error[CD338]: --inputs {path} gives the key {key!r} twice in one object (at {at})\n"
        f"  hint: keep one entry for {key!r}\n"
    )


@pytest.mark.parametrize(("text", "key", "at"), TWICE)
def test_an_input_value_giving_a_key_twice_is_refused_where_it_is(
    text: str, key: str, at: str
) -> None:
    code, _, err = _cli("run", PIPELINE, "--input", f"market={text}")
    assert code == 3
    assert err.startswith(f"error[CD338]: --input market gives the key {key!r} twice in one object")
    assert f"(at {at})" in err


def test_the_installed_command_refuses_a_repeated_input_key(tmp_path: Path) -> None:
    path = tmp_path / "inputs.json"
    path.write_text('{"market": {"n": 1, "n": true}}', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "converge_dsl", "run", PIPELINE, "--inputs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3
    assert "gives the key 'n' twice in one object (at /market/n)" in done.stderr


@pytest.mark.parametrize(("text", "key", "at"), TWICE)
def test_the_service_refuses_the_same_bodies_at_the_same_place(
    text: str, key: str, at: str
) -> None:
    pytest.importorskip("starlette")
    from converge_dsl.serve._bodies import parse_json
    from converge_dsl.serve._requests import Refused

    with pytest.raises(Refused) as caught:
        parse_json(f'{{"inputs": {text}}}'.encode())
    (problem,) = caught.value.problems
    assert (problem.code, problem.pointer) == ("CD983", f"/inputs{at}")
    assert "given twice" in problem.message


def test_the_rule_reads_every_object_and_locates_the_first_repeat() -> None:
    with pytest.raises(DuplicateKey) as caught:
        json.loads('{"a": {"b": 1, "b": 1}}', object_pairs_hook=unique_keys)
    assert caught.value.key == "b"
    read = json.loads(
        '[{"x": 0}, {"y": {"z": 1, "z": 2}}, {"w": 0, "w": 0}]', object_pairs_hook=keep_duplicates
    )
    assert duplicate_path(read) == (1, "y", "z")
    assert (
        duplicate_path(json.loads('{"a": [1, {"b": 2}]}', object_pairs_hook=keep_duplicates))
        is None
    )
