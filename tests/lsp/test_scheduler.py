"""The scheduler: an analysis whose text is replaced does not run, or stops between its stages;
what is published is the analysis of the text the editor held then, the last text's last."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.lsp._counting_server import COMMAND
from tests.lsp.conftest import PUBLISHED, Session, large_pipeline

pytestmark = pytest.mark.asyncio

RULES = 3000
TYPO = "dependencies: [seeds]\n    when: \"count('seeds') >= {i} "


def _with_typo(text: str, rule: int) -> str:
    """`text` with `rule-<rule>` reading an unknown key (an error on its line)."""
    correct = TYPO.format(i=rule)
    return text.replace(correct, correct.replace("[seeds]", "[seedz]"), 1)


def _error_line(text: str) -> int:
    """The line (from 0) of the typo in `text`."""
    return text.count("\n", 0, text.index("[seedz]"))


async def test_replaced_texts_are_not_all_analysed_to_their_end(
    counting_client: LanguageClient, project: Path
) -> None:
    """Each text replaced while its analysis waited for its turn or ran was analysed to the
    end all the same, only to be dropped: the last text's diagnostics waited for them all."""
    session = Session(counting_client, project)
    text = large_pipeline(RULES)
    uri = session.open("large.yaml", text)
    await session.diagnostics("large.yaml", 1, timeout=120)
    texts = {1: text}
    for rule in range(100, 700, 100):  # each past the pause in typing: an analysis each
        version = session.replace("large.yaml", _with_typo(text, rule))
        texts[version] = _with_typo(text, rule)
        await asyncio.sleep(0.1)
    last = max(texts)
    (error,) = [
        d
        for d in await session.diagnostics("large.yaml", last, timeout=120)
        if d.severity == lsp.DiagnosticSeverity.Error
    ]
    assert error.range.start.line == _error_line(texts[last])
    counts = await counting_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=COMMAND)
    )
    # The analyses of one document run one at a time: every one before the last has ended.
    assert counts["ended"] < counts["began"]
    published = [p for p in PUBLISHED[id(counting_client)] if p.uri == uri]
    versions = [p.version for p in published]
    assert versions == sorted(versions)
    assert versions[-1] == last
    for params in published[1:]:  # each the analysis of the text the editor held then
        assert params.version is not None
        errors = [d for d in params.diagnostics if d.severity == lsp.DiagnosticSeverity.Error]
        assert [d.range.start.line for d in errors] == [_error_line(texts[params.version])]
