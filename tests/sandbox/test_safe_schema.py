"""Safe schemas: RE2 regexes (linear time) and references that never leave the document."""

from __future__ import annotations

import http.server
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run
from converge_dsl.clock import FakeClock
from converge_dsl.errors import RunError
from converge_dsl.sandbox._governor import run_deadline
from converge_dsl.sandbox._safe_schema import (
    UnsafeSchema,
    fast_validator,
    python_validator,
    regex_problem,
    schema_problems,
)

LONG = "a" * 30_000 + "!"
CATASTROPHIC = ["^(a+)+$", "(a|aa)+$", "a*a*a*a*a*a*a*b", "(a{1,10}){1,10}$", ".*.*.*.*.*.*="]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_match_in_linear_time(pattern: str) -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": pattern}},
        "patternProperties": {pattern: {"type": "integer"}},
        "additionalProperties": False,
    }
    start = time.monotonic()
    python = python_validator(schema)
    errors = list(python.iter_errors({"s": LONG, LONG: 1, "b" * 30_000: 2}))
    assert errors  # the long text does not match
    assert fast_validator(schema).is_valid({"s": LONG}) is False
    assert time.monotonic() - start < 5


def test_pattern_keywords_keep_their_meaning_and_wording() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"pattern": "^t[0-9]+$"}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": False,
    }
    validator = python_validator(schema)
    assert validator.is_valid({"id": "t12", "x-a": "b"})
    messages = sorted(e.message for e in validator.iter_errors({"id": "u", "x-a": 1, "z": 0}))
    assert messages == [
        "'u' does not match '^t[0-9]+$'",
        "'z' does not match any of the regexes: '^x-'",
        "1 is not of type 'string'",
    ]
    plain = python_validator({"properties": {"a": {}}, "additionalProperties": False})
    assert [e.message for e in plain.iter_errors({"b": 1})] == [
        "Additional properties are not allowed ('b' was unexpected)"
    ]


@pytest.mark.parametrize("pattern", [r"(a*)\1*b", "(?=a)a", "(?<!x)y", "a(?!b)"])
def test_patterns_re2_cannot_run_are_refused_with_the_reason(pattern: str) -> None:
    problem = regex_problem(pattern)
    assert problem is not None
    assert "cannot run in linear time" in problem
    with pytest.raises(UnsafeSchema):
        python_validator({"pattern": pattern})
    with pytest.raises(UnsafeSchema):
        fast_validator({"patternProperties": {pattern: {}}})


def test_unevaluated_properties_with_regexes_is_refused() -> None:
    schema = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert [kind for _, kind, _ in schema_problems(schema)] == ["regex"]


def test_a_reference_and_its_guess_are_quoted_as_every_message_quotes_a_name() -> None:
    """The guess was Python's repr (`"#/$defs/it's"`), not `diagnostics.suggestion`."""
    schema = {
        "$defs": {"it's": {}},
        "properties": {
            "a": {"$ref": "#/$defs/its'"},
            "b": {"$ref": "other\tfile.json"},
            "c": {"$ref": "#/properties"},
        },
    }
    assert [message for _, _, message in schema_problems(schema)] == [
        "$ref 'other\\x09file.json' points outside the schema; references resolve only "
        "within the schema",
        "$ref '#/$defs/its\\x27' points to nothing in the schema "
        "(did you mean '#/$defs/it\\x27s'?)",
        "$ref '#/properties' points at a value that is not a schema (no schema keyword holds "
        "it), so no check of the schema reads it; put the schema under $defs and point there",
    ]


def test_validation_observes_the_run_deadline() -> None:
    clock = FakeClock()
    validator = python_validator({"type": "array", "items": {"type": "integer"}})
    with run_deadline(clock, 1.0):
        from converge_dsl.sandbox._governor import governed

        clock.advance(2)
        with governed(10**6, 10**7, "validation"), pytest.raises(RunError, match="deadline"):
            list(validator.iter_errors(list(range(1000))))


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []  # noqa: RUF012  # shared by the test's one server

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"type": "string"}')

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Recorder.hits = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/schema.json"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def marker(tmp_path: Path) -> str:
    secret = tmp_path / "secret.json"
    secret.write_text('{"description": "MARKER-7f3a", "type": "string"}')
    return secret.as_uri()


def test_references_are_never_retrieved(server: str, marker: str) -> None:
    for ref in (server, marker, "other.json#/x"):
        schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
        with pytest.raises(UnsafeSchema) as caught:
            python_validator(schema)
        assert "points outside the schema" in caught.value.message
        with pytest.raises(UnsafeSchema):
            fast_validator(schema)
    local = {"properties": {"a": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}}
    assert not python_validator(local).is_valid({"a": 1})
    assert not fast_validator(local).is_valid({"a": 1})
    assert _Recorder.hits == []


PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: refs
keys:
  - name: tickets
    schema: {{type: object, properties: {{c: {{$ref: "{key_ref}"}}}}}}
models: {{default: {{adapter: scripted, script: s.yaml}}}}
seeds: [{{id: t1, key: tickets, content: a ticket, data: {{c: x}}}}]
suggestors:
  - name: triage
    kind: llm
    model: default
    dependencies: [tickets]
    target: strategies
    prompt: {{user: "{{{{ facts.tickets[0].content }}}}"}}
    output:
      format: json
      id: "s-{{{{ index }}}}"
      schema: {{type: array, items: {{$ref: "{output_ref}"}}}}
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_validate_and_run_refuse_remote_references_without_a_request(
    tmp_path: Path, server: str, marker: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "s.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: '[\"x\"]'}\n"
    )
    (tmp_path / "p.yaml").write_text(PIPELINE.format(key_ref=marker, output_ref=server))
    monkeypatch.chdir(tmp_path)
    for fmt in ("human", "json"):
        out, err = io.StringIO(), io.StringIO()
        code = run([command, "p.yaml", "--format", fmt], out, err)
        text = out.getvalue() + err.getvalue()
        assert code == 2, text
        assert text.count("CD110") == 2, text
        assert "MARKER-7f3a" not in text
    assert _Recorder.hits == []


def test_a_validator_is_built_once_per_schema_text() -> None:
    from converge_dsl.engine.types import freeze_json
    from converge_dsl.sandbox._safe_schema import python_validator

    schema = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}
    first = python_validator(schema)
    # The same schema given again, frozen, or with its keys in another order: the same
    # python-jsonschema validator inside the governed wrapper each caller gets.
    assert python_validator(dict(reversed(list(schema.items())))).validator is first.validator
    assert python_validator(freeze_json(schema)).validator is first.validator
    assert python_validator({**schema, "required": ["other"]}).validator is not first.validator
    assert not first.is_valid({"id": 1})
    assert first.is_valid({"id": "a"})


DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"items": [{"type": "string"}], "unevaluatedItems": False}, ["s", 1]),
        ({"items": [{"type": "string"}], "unevaluatedItems": False}, ["s"]),
        (
            {"items": [{}], "additionalItems": {"type": "integer"}, "unevaluatedItems": False},
            ["s", 1],
        ),
        ({"allOf": [{"items": [{}]}], "unevaluatedItems": {"type": "string"}}, [1, 2]),
        ({"properties": {"a": {}}, "unevaluatedProperties": False}, {"a": 1, "b": 2}),
        (
            {
                "$ref": "#/$defs/a",
                "unevaluatedProperties": False,
                "$defs": {"a": {"properties": {"a": {}}}},
            },
            {"a": 1},
        ),
    ],
)
def test_unevaluated_keywords_of_a_2019_09_schema_read_it_as_2019_09(
    schema: dict[str, Any], instance: Any
) -> None:
    import jsonschema

    schema = {"$schema": DRAFT_2019, **schema}
    expected = jsonschema.Draft201909Validator(schema).is_valid(instance)
    assert python_validator(schema).is_valid(instance) is expected


@pytest.mark.parametrize(
    ("pattern", "fits"),
    [("^a.b$", True), ("^a\\x{FFFD}b$", True), ("^a[a-z]b$", False), ("^ab$", False)],
)
def test_a_lone_surrogate_meets_a_pattern_as_one_replacement_character(
    pattern: str, fits: bool
) -> None:
    from converge_dsl.sandbox._safe_schema import python_validator

    validator = python_validator({"type": "string", "pattern": pattern})
    error = validator.best_error("a\ud800b")
    assert (error is None) is fits


@pytest.mark.parametrize(
    ("schema", "value", "ends"),
    [
        ({"type": "integer"}, "x" * 9000, "xxx' is not of type 'integer'"),
        ({"enum": ["a", "b"]}, ["y" * 9000], "yyy'] is not one of ['a', 'b']"),
        ({"maxLength": 3}, "z" * 9000, "zzz' is too long"),
    ],
)
def test_an_error_quotes_a_long_value_cut_in_the_middle(
    schema: dict[str, Any], value: Any, ends: str
) -> None:
    # python-jsonschema quoted the value whole: a model's 9,000-character answer made a
    # 9,000-character error (on the terminal, in the diagnostic fact, in the agent's
    # error result).
    error = python_validator(schema).best_error(value)
    assert len(error.message) < 560
    assert " characters cut] \u2026" in error.message
    assert error.message.endswith(ends)
