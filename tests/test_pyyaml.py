"""PyYAML taken through `converge_dsl._pyyaml`: its patterns compile on first use."""

from __future__ import annotations

import datetime
import re
import subprocess
import sys

from converge_dsl._pyyaml import LazyPattern, _compile_lazily_for_yaml, yaml


def test_a_lazy_pattern_compiles_on_first_use_and_answers_as_the_pattern() -> None:
    pattern = LazyPattern(r"(\d+)-(\d+)", re.ASCII)
    assert pattern._pattern is None
    found = pattern.match("12-34")
    assert found is not None
    assert found.groups() == ("12", "34")
    assert pattern.flags & re.ASCII
    assert isinstance(pattern._pattern, re.Pattern)


def test_only_yaml_modules_get_lazy_patterns() -> None:
    here = _compile_lazily_for_yaml("a+")
    assert isinstance(here, re.Pattern)  # this module is not PyYAML's
    namespace: dict[str, object] = {
        "__name__": "yaml.resolver",
        "compile": _compile_lazily_for_yaml,
    }
    exec("made = compile('b+')", namespace)
    assert isinstance(namespace["made"], LazyPattern)


def test_pyyaml_reads_as_before_with_lazy_patterns() -> None:
    text = (
        "when: 2001-12-14\nint: 0x1F\nfloat: 1.5e+3\nbool: yes\nnothing: ~\nmerge: {<<: {a: 1}}\n"
    )
    data = yaml.load(text, Loader=yaml.SafeLoader)
    assert data == {
        "when": datetime.date(2001, 12, 14),
        "int": 31,
        "float": 1500.0,
        "bool": True,
        "nothing": None,
        "merge": {"a": 1},
    }
    assert yaml.safe_dump({"a": [1, "b"]}) == "a:\n- 1\n- b\n"


def test_validate_leaves_the_pure_python_readers_patterns_uncompiled() -> None:
    """The point of the module: the C loader never needs the reader's all-Unicode class."""
    script = (
        "from converge_dsl.frontend import load_text\n"
        "load_text('apiVersion: converge/v1\\nkind: Pipeline\\n', 'p.yaml')\n"
        "import yaml\n"
        "pattern = yaml.reader.Reader.NON_PRINTABLE\n"
        "print(type(pattern).__name__, pattern._pattern is None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["LazyPattern", "True"]
