"""Text rendering of what the `pack` subcommands describe (`pack info`, `pack verify`).

The typed descriptions come from `converge_dsl.packs` (`PackInfo`,
`VerifyReport`); this module
only lays them out for a terminal.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from converge_dsl.packs import PackInfo, SuggestorInfo, VerifyReport


def info_text(info: PackInfo) -> str:
    """`pack info`: the pack, its versions, then each suggestor in full. A pack's texts
    come from a repository: `emit` writes them through `terminal_safe`."""
    out = io.StringIO()
    out.write(f"{info.name} {info.version}  ({info.repository})\n")
    if info.description:
        out.write(f"  {info.description}\n")
    needs = [f"converge-dsl {info.requires_converge}"] if info.requires_converge else []
    needs += [f"{name} {spec}" for name, spec in info.requires_packs.items()]
    if needs:
        out.write(f"  requires: {', '.join(needs)}\n")
    out.write("versions (newest first):\n")
    for entry in info.versions:
        flags = " yanked" if entry.yanked else ""
        flags += " signed" if entry.signature else ""
        mark = "*" if entry.version == info.version else " "
        out.write(f" {mark}{entry.version}  {entry.published}  sha256:{entry.sha256}{flags}\n")
        packs = ", ".join(f"{k} {v}" for k, v in sorted(entry.requires_packs.items()))
        if packs:
            out.write(f"    requires {packs}\n")
    out.write(f"suggestors (use: {info.name}/NAME, with: PARAMETERS):\n")
    for suggestor in info.suggestors:
        _render_suggestor(suggestor, out)
    if info.tools:
        out.write(
            f"tool servers (mcp:{info.name}/SERVER/TOOL; a pipeline starts one only when it "
            f"trusts it: trust: {{{info.name}: [SERVER]}}):\n"
        )
        for name, server in info.tools.items():
            out.write(f"\n  {name}  ({server['transport']})\n")
            if server["transport"] == "stdio":
                out.write(f"    runs {json.dumps(server['command'])} in {server['cwd']}\n")
                if server["env_pass"]:
                    out.write(f"    passes {', '.join(server['env_pass'])}\n")
                for variable, value in server["env_set"].items():
                    out.write(f"    sets {variable}={value}\n")
            else:
                out.write(f"    reaches {server['url']}\n")
                if server["headers"]:
                    out.write(f"    sends headers {', '.join(server['headers'])}\n")
            out.write(f"    allows {', '.join(server['allow'])}\n")
    return out.getvalue()


def _render_suggestor(suggestor: SuggestorInfo, out: TextIO) -> None:
    what = f"solver {suggestor.solver}" if suggestor.solver else suggestor.kind
    out.write(f"\n  {suggestor.name}  ({what})\n")
    if suggestor.description:
        out.write(f"    {suggestor.description}\n")
    if suggestor.complexity:
        out.write(f"    complexity: {suggestor.complexity}\n")
    if suggestor.parameters:
        out.write("    parameters (with:):\n")
        out.writelines(f"      {line}\n" for line in suggestor.parameters)
    else:
        out.write("    parameters (with:): none\n")
    if suggestor.kind == "solver":
        if suggestor.input_type is None:
            out.write("    input: the solver's own schema (the solver is not installed here)\n")
        else:
            where = f" ({suggestor.input_file})" if suggestor.input_file else ""
            out.write(f"    input (data of the input: key's first fact): {suggestor.input_type}")
            out.write(f"{where}\n")
            out.writelines(f"      {line}\n" for line in suggestor.input)
    else:
        out.write("    input: the facts of the pipeline's input: key (it waits for them)\n")
    if suggestor.prompt_files:
        files = ", ".join(f"{role} {path}" for role, path in suggestor.prompt_files)
        out.write(f"    prompts: {files}\n")
    out.write("    output:\n")
    out.writelines(f"      {line}\n" for line in suggestor.output)
    if suggestor.invariants:
        out.write("    invariants:\n")
        for invariant in suggestor.invariants:
            level = "critical" if invariant.critical else "advisory"
            out.write(f"      {invariant.name} ({level}): {invariant.check}\n")
            if invariant.message:
                out.write(f"        {invariant.message}\n")


def render_verify(report: VerifyReport, out: TextIO, err: TextIO) -> None:
    """`pack verify`: `ok  NAME VERSION` per sound pack; problems and warnings on `err`."""
    for verdict in report.verdicts:
        if verdict.ok:
            out.write(f"ok  {verdict.name} {verdict.version}\n")
        for level, findings in (("error", verdict.problems), ("warning", verdict.warnings)):
            for finding in findings:
                err.write(f"{f'{level}[{finding.code}]' if finding.code else level}: ")
                err.write(f"{finding.message}\n")
                if finding.hint:
                    err.write(f"  hint: {finding.hint}\n")
    failed = sum(1 for v in report.verdicts if not v.ok)
    if failed:
        err.write(f"{failed} of {len(report.verdicts)} pack(s) failed verification\n")
    else:
        scope = " (offline: the lock and the pack cache only)" if report.offline else ""
        out.write(f"{len(report.verdicts)} pack(s) verified{scope}\n")
