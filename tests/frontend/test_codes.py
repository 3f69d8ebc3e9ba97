"""The one registry of diagnostic codes: complete, unique, documented."""

from __future__ import annotations

import re
from pathlib import Path

from converge_dsl import codes

ROOT = Path(__file__).resolve().parent.parent.parent
CODE = re.compile(r"\bCD\d{3}\b")


def _registry() -> dict[str, str]:
    return {name: value for name, value in vars(codes).items() if name.isupper()}


def test_no_two_constants_share_a_code_and_all_are_well_formed() -> None:
    values = list(_registry().values())
    assert len(values) == len(set(values)), sorted(v for v in values if values.count(v) > 1)
    assert all(re.fullmatch(r"CD\d{3}", v) for v in values)


def test_every_code_string_in_the_package_is_defined_in_codes() -> None:
    defined = set(_registry().values())
    used: dict[str, list[str]] = {}
    for path in sorted((ROOT / "converge_dsl").rglob("*.py")):
        for code in CODE.findall(path.read_text(encoding="utf-8")):
            used.setdefault(code, []).append(path.relative_to(ROOT).as_posix())
    undefined = {code: where for code, where in used.items() if code not in defined}
    assert undefined == {}


def test_every_code_is_documented_with_an_example() -> None:
    docs = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## (CD\d{3})\n(.*?)(?=^## |\Z)", docs, re.S | re.M))
    for name, code in _registry().items():
        assert code in sections, code
        assert f"(`{name}`)" in sections[code], code
        example = f"[{code}]: " in sections[code] or f'"code": "{code}"' in sections[code]
        assert example, f"{code} has no example"
