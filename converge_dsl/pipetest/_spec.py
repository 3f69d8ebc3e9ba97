"""A test file's typed form: `read_test_file(path)` -> `TestFile`, or `PipelineInvalid`.

A test file (`*.test.yaml`, `kind: PipelineTest`) goes through the strict
loader of the front end and `schemas/pipeline-test.v1.json`, like a pipeline.
What the schema cannot see is checked here, each problem located in the test
file (docs/errors.md): a file it names outside its folder and the allowed
roots, or not a regular file (CD220, CD221, as for a pipeline's files), a file
it names that is not there (CD230), a key,
input, model or invariant the pipeline lacks (CD231, with "did you mean"), a
`matches` RE2 cannot run (CD232), two cases of one name (CD233), a model that
gives none or several of `script`, `cassette`, inline `rules` (CD234).

The pipelines are loaded here, once per test file (`converge_dsl.load`); an
invalid one raises its own `PipelineInvalid`, as `validate` reports it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._files import display_name
from converge_dsl._json_types import JsonObject
from converge_dsl.diagnostics import (
    Diagnostic,
    JsonPath,
    SourceSpan,
    best_first,
    unknown_name_hint,
)
from converge_dsl.errors import PipelineInvalid, UsageError

from ._expect import SCHEMA_NAME, Expectations

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline
    from converge_dsl.frontend import LoadedDocument
    from converge_dsl.models import Script

TEST_SUFFIXES = (".test.yaml", ".test.yml")
_NOT_PIPELINES = (*TEST_SUFFIXES, ".script.yaml", ".script.yml")


class TestRefused(PipelineInvalid):
    """A test file naming as a pipeline a file of another kind of ours (an evaluation,
    a test...: CD818 at its `kind`), with the file's other problems: a usage error
    (exit 3), as `run` given that file is."""

    __test__ = False  # not a test class, for pytest
    exit_code = UsageError.exit_code


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A replacement for one of the pipeline's models: a script file, a cassette, or
    an inline script. Scripts are compiled here, once (`inline`), so their problems
    are reported before any case runs, inline ones located in the test file."""

    name: str
    script: Path | None = None
    cassette: Path | None = None
    inline: Script | None = None


@dataclass(frozen=True, slots=True)
class TestCase:
    """One case: run `pipeline` with `inputs` and `models` (and MCP tool servers answered
    from cassettes, `tools`), then check `expect`.

    `path` is where the case sits in the test file, for locating failures.
    """

    __test__ = False  # not a pytest test class, whatever its name

    index: int
    name: str
    pipeline: Path
    inputs: JsonObject
    models: Mapping[str, ModelSource]
    expect: Expectations
    path: JsonPath
    span: SourceSpan
    tools: Mapping[str, Path] = field(default_factory=dict)  # server -> its cassette


@dataclass(frozen=True, slots=True)
class TestFile:
    """A loaded, checked test file and the pipelines its cases run (loaded once each)."""

    __test__ = False  # not a pytest test class, whatever its name

    path: Path
    display: str
    document: LoadedDocument
    cases: tuple[TestCase, ...]
    pipelines: Mapping[Path, Pipeline] = field(default_factory=dict)

    def span(self, path: JsonPath) -> SourceSpan:
        return self.document.source_map.span(path)


def is_test_file(path: Path) -> bool:
    return path.name.endswith(TEST_SUFFIXES)


def read_test_file(
    path: Path,
    *,
    env: Mapping[str, str] | None = None,
    allow_roots: Sequence[str | os.PathLike[str]] = (),
    text: str | None = None,
    display: str | None = None,
    pipelines: Mapping[Path, str] | None = None,
) -> TestFile:
    """Load, validate and check the test file at `path`, and load its pipelines.

    With `text`, that is the file's text (an editor's, not yet saved); `display`
    names the file in diagnostics (default: relative to the working folder);
    `pipelines`, the texts an editor holds of files by their resolved path: a
    pipeline the test names that is among them is read from that text.
    Raises `PipelineInvalid` with every located problem of the test file (or
    of a pipeline it names; `TestRefused`, exit 3, when it names a file of another kind
    of ours as a pipeline), `UsageError` when `path` is not a file. `env` is the
    environment the files are read and the pipelines loaded in (default: the process's).
    """
    from converge_dsl.frontend import load_file, load_text, schema_diagnostics

    display = display or display_name(path)
    document = (
        load_file(path, display=display, env=env)
        if text is None
        else load_text(text.removeprefix("\ufeff"), display, env=env)
    )
    problems = [d for d in schema_diagnostics(document, SCHEMA_NAME) if d.is_error]
    if problems:
        raise PipelineInvalid(best_first(problems))
    reader = _Reader(path, document, env, allow_roots, pipelines or {})
    cases = reader.cases()
    if reader.problems:
        refused = TestRefused if reader.refused else PipelineInvalid
        raise refused(best_first(reader.problems))
    return TestFile(path, display, document, cases, reader.loaded)


class _Reader:
    """Builds the cases of one test file, collecting every problem before raising."""

    def __init__(
        self,
        path: Path,
        document: LoadedDocument,
        env: Mapping[str, str] | None,
        allow_roots: Sequence[str | os.PathLike[str]],
        texts: Mapping[Path, str],
    ) -> None:
        self.base = path.parent
        self.texts = texts
        self.document = document
        self.data: Mapping[str, Any] = document.data
        self.env = env
        self.allow_roots = allow_roots
        self.problems: list[Diagnostic] = []
        self.loaded: dict[Path, Pipeline] = {}
        self._failed: set[Path] = set()
        self.refused = False  # a file named as a pipeline is another kind of ours

    def problem(
        self, code: str, message: str, path: JsonPath, hint: str | None, *, on_key: bool = False
    ) -> None:
        source_map = self.document.source_map
        self.problems.append(source_map.diagnostic(code, message, path, hint=hint, on_key=on_key))

    def cases(self) -> tuple[TestCase, ...]:
        out: list[TestCase] = []
        seen: dict[str, int] = {}
        default_models = self.models(self.data.get("models") or {}, ("models",))
        default_tools = self.tools(self.data.get("tools") or {}, ("tools",))
        for index, raw in enumerate(self.data["cases"]):
            where: JsonPath = ("cases", index)
            name = str(raw["name"])
            if name in seen:
                first = self.document.source_map.span(("cases", seen[name], "name")).line
                self.problem(
                    codes.TEST_DUPLICATE_CASE,
                    f"two cases are named {name!r}",
                    (*where, "name"),
                    f"the first is on line {first}; give each case its own name",
                )
            seen.setdefault(name, index)
            case = self.case(index, raw, where, default_models, default_tools)
            if case is not None:
                out.append(case)
        return tuple(out)

    def case(
        self,
        index: int,
        raw: Mapping[str, Any],
        where: JsonPath,
        default_models: Mapping[str, ModelSource],
        default_tools: Mapping[str, Path],
    ) -> TestCase | None:
        own = "pipeline" in raw
        named = raw.get("pipeline", self.data.get("pipeline"))
        if named is None:
            self.problem(
                codes.TEST_FILE_MISSING,
                f"case {raw['name']!r} names no pipeline",
                where,
                "add `pipeline: FILE` to the case, or once at the top of the test file",
            )
            return None
        pipeline_path = (*where, "pipeline") if own else ("pipeline",)
        pipeline = self.pipeline(str(named), pipeline_path)
        models = {**default_models, **self.models(raw.get("models") or {}, (*where, "models"))}
        tools = {**default_tools, **self.tools(raw.get("tools") or {}, (*where, "tools"))}
        inputs = {**(self.data.get("inputs") or {}), **(raw.get("inputs") or {})}
        expect = Expectations.of(raw["expect"])
        if pipeline is not None:
            self.check_names(pipeline, raw, expect, where, models)
            own_tools = raw.get("tools") or {}
            for name in tools:
                at = (*where, "tools", name) if name in own_tools else ("tools", name)
                self.unknown(name, pipeline.tool_servers, "tool server", pipeline, at)
        self.check_regexes(expect, (*where, "expect"))
        if pipeline is None:
            return None
        return TestCase(
            index=index,
            name=str(raw["name"]),
            pipeline=pipeline.path,
            inputs=inputs,
            models=models,
            expect=expect,
            path=where,
            span=self.document.source_map.span(where),
            tools=tools,
        )

    def file(self, named: str, path: JsonPath, what: str) -> Path | None:
        from converge_dsl._files import ReferenceRefused, referenced_path, user_roots

        # The rule of the files a pipeline names: inside the test file's folder or an
        # allowed root, and a regular file, else refused before it is read.
        roots = user_roots([os.fspath(root) for root in self.allow_roots], self.env)
        try:
            referenced_path(named, self.base, roots, field=what)
        except ReferenceRefused as exc:
            hint = (
                (exc.hint or "")
                .replace("a pipeline names", "a test names")
                .replace("its folder", "the test file's folder")
            )
            self.problem(exc.code, exc.message.replace("pipeline's", "test file's"), path, hint)
            return None
        target = self.base / named
        if target.is_file():
            return target
        if target.is_dir():
            self.problem(
                codes.TEST_FILE_MISSING,
                f"{what} file {named!r} is a folder, not a file",
                path,
                f"name the {what} file itself; paths are relative to the test file",
            )
            return None
        folder = target.parent
        try:
            found = sorted(p.name for p in folder.iterdir() if p.is_file())
        except OSError:  # no folder there, or one that cannot be listed: no guess
            found = []
        choices = [n for n in found if _could_be(what, n)]
        self.problem(
            codes.TEST_FILE_MISSING,
            f"{what} file {named!r} is not there",
            path,
            unknown_name_hint(Path(named).name, choices, "paths are relative to the test file"),
        )
        return None

    def pipeline(self, named: str, path: JsonPath) -> Pipeline | None:
        from converge_dsl.batch import load

        target = self.file(named, path, "pipeline")
        if target is None:
            return None
        key = target.resolve()
        if key in self._failed:
            return None
        if key not in self.loaded:
            try:
                self.loaded[key] = load(
                    target, env=self.env, allow_roots=self.allow_roots, text=self.texts.get(key)
                )
            except PipelineInvalid as exc:
                self._failed.add(key)
                self.problems.extend(exc.diagnostics)
                self.refused |= exc.exit_code == UsageError.exit_code  # CD818
                return None
        return self.loaded[key]

    def models(self, raw: Mapping[str, Any], where: JsonPath) -> dict[str, ModelSource]:
        out: dict[str, ModelSource] = {}
        for name, spec in raw.items():
            path = (*where, name)
            given = [f for f in ("script", "cassette") if f in spec]
            inline = "rules" in spec or "default" in spec
            if len(given) + inline != 1:
                self.problem(
                    codes.TEST_BAD_MODEL,
                    f"model {name!r} must give exactly one of `script`, `cassette`, "
                    "or inline `rules`/`default`",
                    path,
                    "a script file, a cassette file, or the replies written here",
                    on_key=True,
                )
                continue
            if inline:
                script = self.inline_script(spec, path)
                if script is not None:
                    out[name] = ModelSource(name, inline=script)
                continue
            field_name = given[0]
            target = self.file(str(spec[field_name]), (*path, field_name), field_name)
            if target is None:
                continue
            if field_name == "script":
                script = self.script_file(target)
                if script is not None:
                    out[name] = ModelSource(name, script=target, inline=script)
            else:
                out[name] = ModelSource(name, cassette=target)
        return out

    def tools(self, raw: Mapping[str, Any], where: JsonPath) -> dict[str, Path]:
        """Tool server -> the cassette that answers it (the schema requires `cassette`)."""
        out: dict[str, Path] = {}
        for name, spec in raw.items():
            path = (*where, name, "cassette")
            target = self.file(str(spec["cassette"]), path, "cassette")
            if target is not None:
                out[name] = target
        return out

    def script_file(self, target: Path) -> Script | None:
        """The model script at `target`, loaded and checked once for every case."""
        from converge_dsl.frontend import load_file
        from converge_dsl.models import compile_script

        try:
            return compile_script(load_file(target, display=display_name(target), env=self.env))
        except PipelineInvalid as exc:
            self.problems.extend(exc.diagnostics)
            return None

    def inline_script(self, spec: Mapping[str, Any], path: JsonPath) -> Script | None:
        from ._inline import compile_inline

        try:
            return compile_inline(self.document, spec, path)
        except PipelineInvalid as exc:
            self.problems.extend(exc.diagnostics)
            return None

    def check_names(
        self,
        pipeline: Pipeline,
        raw: Mapping[str, Any],
        expect: Expectations,
        where: JsonPath,
        models: Mapping[str, ModelSource],
    ) -> None:
        inputs_at = (*where, "inputs") if "inputs" in raw else ("inputs",)
        for name in {**(self.data.get("inputs") or {}), **(raw.get("inputs") or {})}:
            self.unknown(name, pipeline.inputs, "input", pipeline, (*inputs_at, name))
        for name in models:
            at = (*where, "models", name) if name in (raw.get("models") or {}) else ("models", name)
            self.unknown(name, pipeline.models, "model", pipeline, at)
        base = (*where, "expect")
        for group, items in (("facts", expect.facts), ("absent", expect.absent)):
            for i, item in enumerate(items):
                self.unknown(item.key, pipeline.keys, "key", pipeline, (*base, group, i, "key"))
        for group, keyed in (("counts", expect.counts), ("snapshot", expect.snapshot)):
            for key in keyed:
                self.unknown(key, pipeline.keys, "key", pipeline, (*base, group, key))
        for i, name in enumerate(expect.invariants):
            at = (*base, "invariants", i)
            self.unknown(name, pipeline.invariants, "invariant", pipeline, at)

    def unknown(
        self,
        name: str,
        known: Sequence[str] | Mapping[str, Any],
        what: str,
        pipeline: Pipeline,
        path: JsonPath,
    ) -> None:
        if name in known:
            return
        listed = ", ".join(known) or "none"
        self.problem(
            codes.TEST_UNKNOWN_NAME,
            f"pipeline {pipeline.name!r} has no {what} {name!r}",
            path,
            unknown_name_hint(name, known, f"its {what}s: {listed}"),
            on_key=isinstance(known, Mapping) or what in {"model"} or path[-1] == name,
        )

    def check_regexes(self, expect: Expectations, base: JsonPath) -> None:
        from converge_dsl.sandbox import regex_problem

        for i, item in enumerate(expect.facts):
            pattern = item.matches
            reason = None if pattern is None else regex_problem(pattern)
            if reason is not None:
                self.problem(
                    codes.TEST_BAD_REGEX,
                    f"`matches` is not a regular expression RE2 can run: {reason}",
                    (*base, "facts", i, "matches"),
                    "use RE2 syntax: no backreferences or lookaround; escape ( [ . with \\",
                )


def _could_be(what: str, name: str) -> bool:
    """Whether a file called `name` could be the `what` (pipeline, script, cassette) meant."""
    if what == "pipeline":
        return name.endswith((".yaml", ".yml")) and not name.endswith(_NOT_PIPELINES)
    if what == "script":
        return name.endswith((".script.yaml", ".script.yml"))
    return not name.endswith((".yaml", ".yml"))
