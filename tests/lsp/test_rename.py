"""Rename over stdio: a key, a suggestor, an input and an invariant across the pipeline, its
expressions, its model script and its test file; the files still validate and test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from tests.lsp.conftest import apply

if TYPE_CHECKING:
    from tests.lsp.conftest import Session

pytestmark = pytest.mark.asyncio
FILES = ("typed.yaml", "typed.script.yaml", "typed.test.yaml")


async def _rename(session: Session, name: str, needle: str, offset: int, new: str) -> set[str]:
    """Rename at `needle` and apply the edits to the files on disk; the files edited."""
    position = session.position(name, needle, offset)
    identifier = lsp.TextDocumentIdentifier(session.uri(name))
    prepared = await session.client.text_document_prepare_rename_async(
        lsp.PrepareRenameParams(identifier, position)
    )
    assert prepared is not None
    edit = await session.client.text_document_rename_async(
        lsp.RenameParams(text_document=identifier, position=position, new_name=new)
    )
    assert edit is not None
    assert edit.changes is not None
    edited = set()
    for uri, edits in edit.changes.items():
        path = Path(uri.removeprefix("file://"))
        text = apply(path.read_text(encoding="utf-8"), list(edits))
        path.write_text(text, encoding="utf-8")
        edited.add(path.name)
        if path.name in session.versions_by_name():
            session.replace(path.name, text)
    return edited


# An anchored key declaration and its alias, and a comment on the line: the rename
# writes the name after the anchor and leaves the alias and the comment as they were.
ANCHORED = (
    ("  - name: tickets", "  - name: &ticket-key tickets  # anchored: tickets keep it"),
    ("dependencies: [tickets]", "dependencies: [*ticket-key]"),
)


async def test_renames_across_files_keep_everything_else(session: Session, project: Path) -> None:
    pipeline = (project / "typed.yaml").read_text(encoding="utf-8")
    for old, new in ANCHORED:
        pipeline = pipeline.replace(old, new)
    (project / "typed.yaml").write_text(pipeline, encoding="utf-8")
    tests_before = (project / "typed.test.yaml").read_text(encoding="utf-8")
    for name in FILES:
        session.open(name)
    assert await _rename(session, "typed.yaml", "facts.tickets", 6, "requests") == {
        "typed.yaml",
        "typed.test.yaml",
    }
    assert await _rename(session, "typed.yaml", "name: summarise", 7, "summarize") == set(FILES)
    assert await _rename(session, "typed.yaml", "  queue:", 3, "inbox") == {
        "typed.yaml",
        "typed.test.yaml",
    }
    assert await _rename(session, "typed.yaml", "name: has-strategy", 7, "any-strategy") == {
        "typed.yaml",
        "typed.test.yaml",
    }
    # From the test file: its model replacement names the pipeline's model.
    assert await _rename(session, "typed.test.yaml", "  default:", 6, "primary") == {
        "typed.yaml",
        "typed.test.yaml",
    }
    after = (project / "typed.yaml").read_text(encoding="utf-8")
    expected = (
        pipeline.replace("&ticket-key tickets  #", "&ticket-key requests  #")
        .replace("key: tickets", "key: requests")
        .replace("count('tickets')", "count('requests')")
        .replace("facts.tickets", "facts.requests")
        .replace("summarise", "summarize")
        .replace("  queue:", "  inbox:")
        .replace("inputs.queue", "inputs.inbox")
        .replace("has-strategy", "any-strategy")
        .replace("  default: {adapter", "  primary: {adapter")
        .replace("model: default", "model: primary")
    )
    assert after == expected  # comments, the alias, descriptions ("Incoming tickets") untouched
    assert "[*ticket-key]" in after
    assert "suggestor: summarize" in (project / "typed.script.yaml").read_text(encoding="utf-8")
    tests_after = (project / "typed.test.yaml").read_text(encoding="utf-8")
    assert tests_after == (
        tests_before.replace("key: tickets", "key: requests")
        .replace("{tickets: 1,", "{requests: 1,")
        .replace("suggestor: summarise", "suggestor: summarize")
        .replace("{queue:", "{inbox:")
        .replace("has-strategy", "any-strategy")
        .replace("      default:\n", "      primary:\n")
    )
    assert "counts: *counts" in tests_after  # the alias stays an alias
    validate = [sys.executable, "-m", "converge_dsl", "validate", "typed.yaml"]
    assert subprocess.run(validate, cwd=project, check=False).returncode == 0
    test = [sys.executable, "-m", "converge_dsl", "test", "typed.test.yaml"]
    done = subprocess.run(test, cwd=project, check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_a_built_in_key_and_a_bad_name_are_refused(session: Session) -> None:
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))
    position = session.position("typed.yaml", "[strategies]", 1)
    prepared = await session.client.text_document_prepare_rename_async(
        lsp.PrepareRenameParams(identifier, position)
    )
    assert prepared is None
    position = session.position("typed.yaml", "[tickets]", 1)
    with pytest.raises(JsonRpcException, match="not a valid key name"):
        await session.client.text_document_rename_async(
            lsp.RenameParams(text_document=identifier, position=position, new_name="Bad Key")
        )


@pytest.mark.parametrize(
    ("needle", "offset", "why"),
    [
        ("# A valid pipeline", 4, "nothing to rename here: the cursor is not on a name"),
        ("kind: Pipeline", 8, "nothing to rename here: the cursor is not on a name"),
        ("apiVersion:", 0, "nothing to rename here: the cursor is not on a name"),
        ("[strategies]", 1, "'strategies' is a built-in key: it keeps its name"),
    ],
)
async def test_a_rename_where_there_is_no_name_to_rename_says_why(
    session: Session, needle: str, offset: int, why: str
) -> None:
    """A rename at a comment said "a built-in key keeps its name", as at a built-in key."""
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))
    position = session.position("typed.yaml", needle, offset)
    with pytest.raises(JsonRpcException) as refused:
        await session.client.text_document_rename_async(
            lsp.RenameParams(text_document=identifier, position=position, new_name="other")
        )
    assert refused.value.message.startswith(why), refused.value.message


async def test_a_new_name_is_one_validate_accepts_for_its_kind(session: Session) -> None:
    """A suggestor or invariant renamed with a capital (which only a model's name may have)
    and a key renamed with a final line break were written: `validate` then refused them."""
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))

    async def rename(needle: str, offset: int, new: str) -> str:
        position = session.position("typed.yaml", needle, offset)
        try:
            edit = await session.client.text_document_rename_async(
                lsp.RenameParams(text_document=identifier, position=position, new_name=new)
            )
        except JsonRpcException as refused:
            return str(refused)
        assert edit is not None
        return "renamed"

    refused = "is not a valid {} name"
    assert refused.format("suggestor") in await rename("name: summarise", 7, "Summarise")
    assert refused.format("invariant") in await rename("name: has-strategy", 7, "Has-Strategy")
    assert refused.format("key") in await rename("[tickets]", 1, "requests\n")
    assert refused.format("input") in await rename("  queue:", 3, "in-box")
    assert await rename("  default:", 3, "Primary") == "renamed"  # a model may have capitals
    assert await rename("  queue:", 3, "Inbox_2") == "renamed"
    assert await rename("name: summarise", 7, "sum.marise-2") == "renamed"


# New names the schema's pattern accepts and YAML does not read back as that text: each was
# written plain, and `validate` then refused the files (CD108, CD102, CD007, CD008, CD012).
NOT_TEXT = (
    ("name: summarise", 7, ("123", "1.5", "true", "null", "on", "yes", "0x1f", "1_000", "0o17")),
    ("name: summarise", 7, ("1e3", "1.", "0b11", "2001-12-14", "~", ".inf", "08", "019")),
    ("  default:", 3, ("True", "NULL", "Off", "1.5", "007", "0x1F", "2001-12-14", "1e3", "0_9")),
    ("  queue:", 3, ("null", "True", "on", "Yes")),
    ("[tickets]", 1, ("on", "off", "yes", "no", "null", "true")),
    ("name: has-strategy", 7, ("1", "1.1", "no")),
)


async def test_a_new_name_yaml_reads_as_another_type_is_refused(session: Session) -> None:
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))
    for needle, offset, names in NOT_TEXT:
        position = session.position("typed.yaml", needle, offset)
        for new in names:
            with pytest.raises(JsonRpcException, match=r"is not a valid \w+ name: ") as refused:
                await session.client.text_document_rename_async(
                    lsp.RenameParams(text_document=identifier, position=position, new_name=new)
                )
            assert repr(new) in str(refused.value)
    position = session.position("typed.yaml", "name: summarise", 7)
    for new in ("summarise_2", "v1.5-b", "2001-12-14x", "x1e3"):  # text in YAML 1.1 and 1.2 alike
        assert await session.client.text_document_rename_async(
            lsp.RenameParams(text_document=identifier, position=position, new_name=new)
        )


# Each class of name YAML reads as another value than its text, and why the rename says
# it refuses it: `validate` refused the files it wrote, or read the name as another type.
WHY = {
    "2001-12-14": "YAML 1.1 (PyYAML, and the tools that read the file with it) reads it as a "
    "date, not as text",
    "true": "YAML reads it as a boolean, not as text",
    "null": "YAML reads it as null, not as text",
    "~": "YAML reads it as null, not as text",
    "1e3": "'1e3' is a number (1000.0) in YAML 1.2 and text in YAML 1.1 (CD008)",
    "0x1F": "'0x1F' is a hexadecimal number (31); numbers are written in decimal (CD008)",
    ".inf": "'.inf' is not a number JSON can hold (CD008)",
    "08": "'08' is a number (8) in YAML 1.2 and text in YAML 1.1 (CD008)",  # ruamel's reading
    "yes": "'yes' is a boolean in YAML 1.1 and text in YAML 1.2 (CD007)",
}


async def test_each_class_of_name_yaml_reads_as_another_value_is_refused_saying_why(
    session: Session,
) -> None:
    """A model may be named with digits, dots and capitals: each class is refused with its
    reason (`~` and `.inf` were refused only as 'not a valid model name', and a date was
    written plain, which PyYAML reads as a date)."""
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))
    position = session.position("typed.yaml", "  default:", 3)
    for new, why in WHY.items():
        with pytest.raises(JsonRpcException) as refused:
            await session.client.text_document_rename_async(
                lsp.RenameParams(text_document=identifier, position=position, new_name=new)
            )
        assert f"{new!r} is not a valid model name: {why}" in str(refused.value)


async def test_a_name_the_pattern_refuses_is_given_no_yaml_reading_it_does_not_have(
    session: Session,
) -> None:
    """Names were loaded as YAML before the pattern was checked: `x: y` was refused as
    "'y' is a boolean in YAML 1.1", `#x` as read as null, `a #b` as the text 'a', `=` as
    read as tag:yaml.org,2002:value. The pattern's refusal now stands alone."""
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))
    position = session.position("typed.yaml", "  default:", 3)
    for new in ("x: y", "#x", "a #b", "=", "x\n- y"):
        with pytest.raises(JsonRpcException) as refused:
            await session.client.text_document_rename_async(
                lsp.RenameParams(text_document=identifier, position=position, new_name=new)
            )
        assert str(refused.value).endswith(f"{new!r} is not a valid model name"), refused.value


async def test_a_name_already_taken_is_refused(session: Session, project: Path) -> None:
    """A suggestor renamed to another's name was written: the two were one, and `validate`
    refused the pipeline (CD200, defined twice); a key renamed to another merged the two."""
    pipeline = (project / "typed.yaml").read_text(encoding="utf-8")
    pipeline = pipeline.replace("keys:\n", "keys:\n  - name: requests\n")
    pipeline = pipeline.replace("inputs:\n", "inputs:\n  inbox: {default: x}\n")
    pipeline += "  - {name: any-strategy, class: acceptance, check: \"count('strategies') > 0\"}\n"
    (project / "typed.yaml").write_text(pipeline, encoding="utf-8")
    session.open("typed.yaml")
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))

    async def rename(needle: str, offset: int, new: str) -> lsp.WorkspaceEdit | None:
        position = session.position("typed.yaml", needle, offset)
        return await session.client.text_document_rename_async(
            lsp.RenameParams(text_document=identifier, position=position, new_name=new)
        )

    with pytest.raises(JsonRpcException, match="'summarise' already names a suggestor here"):
        await rename("name: escalate", 7, "summarise")
    with pytest.raises(JsonRpcException, match="'requests' already names a key here"):
        await rename("[tickets]", 1, "requests")
    # "an", not "a", before a vowel: "already names a input" read wrong.
    with pytest.raises(JsonRpcException, match="'inbox' already names an input here"):
        await rename("  queue:", 3, "inbox")
    with pytest.raises(JsonRpcException, match="'any-strategy' already names an invariant here"):
        await rename("name: has-strategy", 7, "any-strategy")
    assert await rename("name: escalate", 7, "escalate") is not None  # its own name: no change


# A template naming `tickets` three times: with a `\x` escape, with a `\u` escape, as written.
_ESCAPED = '"{{ facts.t\\x69ckets | length }} {{ facts.\\u0074ickets }} {{ facts.tickets }}"'


async def test_a_name_written_with_escapes_is_found_and_renamed_whole(
    session: Session, project: Path
) -> None:
    """`facts.t\\x69ckets` in a double-quoted template names `tickets`, as `validate` reads
    it: references and definition missed it and a rename left it naming the old key. Each
    mention is the escaped text of the name in the file, and a rename writes the new name
    over all of it."""
    pipeline = (project / "typed.yaml").read_text(encoding="utf-8")
    template = "\"Escalate {{ facts.tickets | selectattr('data.category', 'eq', 'billing') "
    template += '| list | length }} tickets"'
    pipeline = pipeline.replace(template, _ESCAPED)
    (project / "typed.yaml").write_text(pipeline, encoding="utf-8")
    session.open("typed.yaml")
    assert await session.diagnostics("typed.yaml", 1) == []
    identifier = lsp.TextDocumentIdentifier(session.uri("typed.yaml"))
    found = await session.client.text_document_references_async(
        lsp.ReferenceParams(
            context=lsp.ReferenceContext(include_declaration=True),
            text_document=identifier,
            position=session.position("typed.yaml", "name: tickets", 6),
        )
    )
    assert found is not None
    lines = pipeline.split("\n")
    written = sorted(
        lines[r.range.start.line][r.range.start.character : r.range.end.character]
        for r in found
        if r.uri == identifier.uri
    )
    assert written == sorted(["tickets"] * 5 + ["t\\x69ckets", "\\u0074ickets"])
    for needle, offset in (("t\\x69ckets", 2), ("\\u0074ickets", 9)):
        position = session.position("typed.yaml", needle, offset)
        defined = await session.client.text_document_definition_async(
            lsp.DefinitionParams(identifier, position)
        )
        assert isinstance(defined, list)
        assert session.position("typed.yaml", "name: tickets", 6).line in [
            d.range.start.line for d in defined
        ]
    await _rename(session, "typed.yaml", "t\\x69ckets", 3, "requests")
    after = (project / "typed.yaml").read_text(encoding="utf-8")
    assert '"{{ facts.requests | length }} {{ facts.requests }} {{ facts.requests }}"' in after
    assert "tickets" not in after.replace("Incoming tickets", "")
    validate = [sys.executable, "-m", "converge_dsl", "validate", "typed.yaml"]
    assert subprocess.run(validate, cwd=project, check=False).returncode == 0
