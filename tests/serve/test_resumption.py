"""A run a stopping server leaves continues at the next start with no event given twice.

On SIGTERM a run on the service's loops stops at its next checkpoint record
(`StopAtCheckpoint`): every event it gave is stored, none past that record was given, so
the attempt that continues it gives no event a client already had, under another
number or the same one.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from pathlib import Path

import httpx

from converge_dsl.serve._store import STATE_FILE

from .conftest import Server, until

STEPS = 40  # cycles of one model call each: longer than a stop took before (5 s and more)


def _chain(folder: Path) -> Path:
    """A pipeline of `STEPS` cycles, each one scripted model call of 0.25 s."""
    (folder / "chain.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules: []\n"
        'default: {reply: "step", delay_s: 0.25}\n'
    )
    steps = "".join(
        f"  - name: s{n}\n    kind: llm\n    model: default\n"
        f"    dependencies: [{'seeds' if n == 1 else f'k{n - 1}'}]\n    target: k{n}\n"
        f'    prompt: {{user: "step {n}"}}\n    output: {{format: text, id: f{n}}}\n'
        for n in range(1, STEPS + 1)
    )
    keys = "".join(f"  - name: k{n}\n" for n in range(1, STEPS + 1))
    path = folder / "chain.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: chain\n"
        "description: A chain of cycles.\n"
        "models:\n  default: {adapter: scripted, script: chain.script.yaml}\n"
        f"budget: {{max_cycles: {STEPS + 5}, max_model_calls: {STEPS + 5}}}\n"
        f"keys:\n{keys}seeds:\n  - {{id: start, content: go}}\nsuggestors:\n{steps}"
    )
    return path


def _stream(
    url: str, run: str, last: int | None, seen: list[tuple[int, dict[str, object]]], enough: int
) -> None:
    """Read the run's events after `last` into `seen` until the stream ends, or until
    `enough` `cycle_finished` events were read."""
    headers = {} if last is None else {"Last-Event-ID": str(last)}
    cycles = 0
    with (
        contextlib.suppress(httpx.RemoteProtocolError, httpx.ReadError),
        httpx.stream("GET", f"{url}/v1/runs/{run}/events", headers=headers, timeout=30) as answer,
    ):
        assert answer.status_code == 200
        number = None
        for line in answer.iter_lines():
            if line.startswith("id: "):
                number = int(line[4:])
            elif line.startswith("data: ") and number is not None:
                event = json.loads(line[6:])
                seen.append((number, event))
                number = None
                cycles += event.get("type") == "cycle_finished"
                if cycles >= enough:
                    return


def test_a_sigterm_mid_cycle_gives_no_event_twice(tmp_path: Path, servers: list[Server]) -> None:
    """A client streams the run; the server is stopped (SIGTERM) in its second cycle and
    started again on the same state; the client resumes from the last event it had. Its
    events are numbered 0, 1, 2... with no gap, each cycle's events once (one
    `run_started` per attempt, the second resumed), and no `recoveries` row marks numbers
    as lost. Before, the stop cancelled the run mid-cycle and the continued run gave that
    cycle's events again, under new numbers."""
    paths, state = [_chain(tmp_path)], tmp_path / "state"
    server = Server(paths, state)
    servers.append(server)
    url = server.ready()
    run = httpx.post(f"{url}/v1/pipelines/chain/runs").json()["id"]
    seen: list[tuple[int, dict[str, object]]] = []
    reader = threading.Thread(target=_stream, args=(url, run, None, seen, STEPS + 1))
    reader.start()
    until(lambda: any(e.get("cycle") == 2 for _, e in seen), 30)
    server.stop()
    reader.join(30)
    server = Server(paths, state)
    servers.append(server)
    url = server.ready()
    _stream(url, run, seen[-1][0], seen, 2)  # the next attempt's first two cycles
    numbers = [number for number, _ in seen]
    assert numbers == list(range(len(seen)))
    said = [
        (e["type"], e.get("cycle"), e.get("suggestor"))
        for _, e in seen
        if e["type"] not in ("run_started", "model_call_started", "model_call_finished")
    ]
    assert len(said) == len(set(said)), [s for s in said if said.count(s) > 1]
    starts = [e for _, e in seen if e["type"] == "run_started"]
    assert len(starts) == 2
    assert isinstance(starts[1]["resumed_from_cycle"], int)
    calls = [e["suggestor"] for _, e in seen if e["type"] == "model_call_started"]
    assert len(calls) == len(set(calls))
    with sqlite3.connect(state / STATE_FILE) as db:
        assert db.execute("SELECT COUNT(*) FROM recoveries").fetchone() == (0,)


def test_a_stopping_service_starts_no_run_and_queues_a_handed_one_again(tmp_path: Path) -> None:
    """A run added while the service stops (a waiting worker would take it at once, so it is
    added running) is not started: the stop leaves it queued, so the next start continues
    it with no recovery noted (a recovery would have every Last-Event-ID of it answered
    from its first event). Before, the worker started it as the service stopped."""
    import asyncio

    from converge_dsl.serve import RunStore
    from converge_dsl.serve._requests import RunRequest

    from .test_service import _one_worker_service

    store = RunStore(tmp_path / "state")
    service = _one_worker_service(tmp_path, store, redact=str)

    async def main() -> str:
        await service.start()
        await asyncio.sleep(0.05)  # its worker waits for a run
        service.stopping()
        run = service.submit("steady", RunRequest.of({"inputs": {"number": 1}}))
        assert store.get(run).status == "running"  # added for the waiting worker
        await asyncio.sleep(0.3)
        await service.stop()
        return run

    try:
        run = asyncio.run(main())
        row = store.get(run)
        assert row is not None
        assert (row.status, row.attempts) == ("queued", 1)
        assert list(store.events(run)) == []  # not started: no event of it
        assert [r.id for r in store.recover(0.0)] == [run]
        assert store.first_unstored(run) is None
    finally:
        store.close()
