"""A stdio child's environment holds only what the pipeline lists."""

from __future__ import annotations

from converge_dsl.frontend import StdioServerSpec
from converge_dsl.tools import child_environment


def test_only_passed_and_set_variables_reach_the_child() -> None:
    spec = StdioServerSpec(
        name="s",
        command=("x",),
        env_pass=("TZ", "NOT_SET"),
        env_set={"LANG": "C.UTF-8"},
        allow=("t",),
    )
    parent = {"TZ": "UTC", "HOME": "/root", "PATH": "/bin", "SECRET": "s"}
    assert child_environment(spec, parent) == {"TZ": "UTC", "LANG": "C.UTF-8"}
