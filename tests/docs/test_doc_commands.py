"""Every shell command the README and the docs show runs as written, in the order shown.

Each page runs in a fresh folder holding a copy of `pipelines/` (what a
reader has in a clone), with its own home and pack cache, the installed
`converge-dsl` first on PATH, and no network. A command must exit as its line
says (`# exit N`, else 0); a `text` block marked `output-of` must be exactly
what its command prints (timings aside). A block that cannot run here says
why (`skip=`), and the reason is listed. `_doc_commands.py` reads the pages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import _doc_commands
from _doc_commands import SHELL, Block, blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
_TIMING = re.compile(r"(?<=\()\d+(\.\d+)?s(?=\))|(?<= in )\d+(\.\d+)?s$")

# What the session ran, listed at the end of the test session (tests/docs/conftest.py).
RAN: list[str] = _doc_commands.RAN


def _environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CONVERGE_DSL_"))}
    env.update(
        HOME=str(tmp / "home"),
        # The installed converge-dsl first; stand-ins (tests/data/docs) last.
        PATH=os.pathsep.join(
            [str(Path(sys.executable).parent), env.get("PATH", ""), str(tmp / "home" / "bin")]
        ),
        CONVERGE_DSL_CACHE=str(tmp / "cache"),
        XDG_CONFIG_HOME=str(tmp / "home" / ".config"),
        NO_COLOR="1",
        COLUMNS="100",
        PYTHONPATH=str(ROOT),
    )
    (tmp / "home").mkdir(exist_ok=True)
    return env


def _shell(command: str, cwd: Path, env: dict[str, str], cwd_file: Path) -> tuple[int, str, Path]:
    script = f'set -o pipefail\n{command}\nstatus=$?\npwd > "{cwd_file}"\nexit $status\n'
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    new_cwd = Path(cwd_file.read_text().strip()) if cwd_file.exists() else cwd
    return done.returncode, done.stdout, new_cwd


def _normal(text: str) -> str:
    return "\n".join(_TIMING.sub("Ns", line.rstrip()) for line in text.strip("\n").splitlines())


def _check_output(block: Block, cwd: Path, env: dict[str, str], tmp: Path) -> None:
    assert block.output_of is not None
    copy = tmp / f"output-{block.line}"
    shutil.copytree(cwd, copy, symlinks=True)
    for name, old, new in block.edits:
        target = copy / name
        text = target.read_text(encoding="utf-8")
        assert old in text, f"{block.where}: edit of {name}: {old!r} is not in the file"
        target.write_text(text.replace(old, new, 1), encoding="utf-8")
    _, printed, _ = _shell(block.output_of, copy, env, tmp / "cwd")
    RAN.append(f"{block.where}: {block.output_of}  (output compared)")
    assert _normal(printed) == _normal(block.body), (
        f"{block.where}: `{block.output_of}` prints something else than the page shows:\n{printed}"
    )


@pytest.mark.parametrize("page", PAGES)
def test_the_commands_of_the_page_run_as_written(page: str, tmp_path: Path) -> None:
    env = _environment(tmp_path)
    cwd = tmp_path / "reader"
    shutil.copytree(ROOT / "pipelines", cwd / "pipelines")
    shown = blocks(ROOT / page, page)
    ran = 0
    for block in shown:
        if block.skip is not None:
            if block.language in SHELL:
                RAN.append(f"{block.where}: skipped ({block.skip})")
            continue
        for setup in block.setup:
            command = setup.replace("$ROOT", str(ROOT))
            status, printed, cwd = _shell(command, cwd, env, tmp_path / "cwd")
            assert status == 0, f"{block.where}: setup `{setup}` failed:\n{printed}"
        if block.output_of is not None:
            _check_output(block, cwd, env, tmp_path)
            ran += 1
            continue
        if block.language not in SHELL:
            continue
        for command in block.commands():
            status, printed, cwd = _shell(command.text, cwd, env, tmp_path / "cwd")
            RAN.append(f"{block.where}: {command.text}  -> exit {status}")
            assert status == command.expect_exit, (
                f"{block.where}: `{command.text}` exited {status}, "
                f"the page says {command.expect_exit}:\n{printed}"
            )
            ran += 1
    if not any(b.language in SHELL for b in shown):
        pytest.skip(f"{page} shows no shell command")
    assert ran or all(b.skip for b in shown if b.language in SHELL)


def test_a_directive_reaches_the_block_after_it(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- docs-test: skip=needs a server -->\n```sh\nserve\n```\n\n"
        "Prose between.\n\n```sh\nconverge-dsl run x.yaml   # exit 4\nlong \\\n  line\n```\n",
        encoding="utf-8",
    )
    first, second = blocks(page, "page.md")
    assert first.skip == "needs a server"
    assert second.skip is None
    assert [(c.text, c.expect_exit) for c in second.commands()] == [
        ("converge-dsl run x.yaml   # exit 4", 4),
        ("long line", 0),
    ]


def test_the_pack_the_docs_publish_is_the_one_they_show() -> None:
    shown = [b.body for b in blocks(ROOT / "docs" / "packs.md", "") if "kind: Pack" in b.body]
    fixture = (ROOT / "tests" / "data" / "docs" / "my-pack" / "pack.yaml").read_text("utf-8")
    assert shown == [fixture.rstrip("\n")]
