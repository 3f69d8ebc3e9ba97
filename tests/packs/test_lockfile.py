"""One converge.lock per folder, a section per pipeline; unreadable locks are replaced."""

from __future__ import annotations

import io
import json
import multiprocessing
import time
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.errors import PackError
from converge_dsl.packs import PackCache, lock_path, lock_pipeline, publish, read_lock
from converge_dsl.packs._lockfile import exclusive, lock_problems

from .conftest import make_pack, write_pipeline


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    publish(make_pack(tmp_path, "alpha", "1.0.0"), tmp_path / "repo")
    return write_pipeline(tmp_path, '{alpha: ">=1"}')


def test_two_pipelines_share_one_lock_and_each_lock_replaces_only_its_section(
    tmp_path: Path, pipeline: Path
) -> None:
    second = tmp_path / "second.yaml"
    second.write_text(pipeline.read_text().replace("name: demo", "name: two"))
    cache = PackCache(tmp_path / "cache")
    lock_pipeline(pipeline, cache=cache)
    lock_pipeline(second, cache=cache)
    assert lock_path(pipeline) == lock_path(second) == tmp_path / "converge.lock"
    body = json.loads(lock_path(pipeline).read_text())
    assert body["lock-version"] == 1
    assert sorted(body["pipelines"]) == ["pipeline.yaml", "second.yaml"]
    before = json.dumps(body["pipelines"]["second.yaml"])
    pipeline.write_text(pipeline.read_text().replace('">=1"', '">=1.0"'))
    lock_pipeline(pipeline, cache=cache)
    after = json.loads(lock_path(pipeline).read_text())["pipelines"]
    assert json.dumps(after["second.yaml"]) == before
    assert after["pipeline.yaml"]["pipeline"]["packs"] == {"alpha": ">=1.0"}
    assert lock_problems(second, {"alpha": ">=1"}, ({"path": "repo"},)) == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not JSON"),
        (b"garbage {", "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (b"<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> branch\n", "merge-conflict markers"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"lock-version": 7}', "not a lock-version 1 lock file (its lock-version is 7)"),
        # true and 1.0 equal 1 in Python; they were read as version 1
        (b'{"lock-version": true, "pipelines": {}}', "(its lock-version is true)"),
        (b'{"lock-version": 1.0, "pipelines": {}}', "(its lock-version is 1.0)"),
        (b'{"lock-version": "1", "pipelines": {}}', '(its lock-version is "1")'),
        (b'{"pipelines": {}}', "not a lock-version 1 lock file"),
        (b'{"lock-version": [1], "pipelines": {}}', "(its lock-version is a list)"),
        (b'{"lock-version": 1, "pipelines": []}', "no 'pipelines' object"),
    ],
)
def test_an_unreadable_lock_is_reported_then_replaced_by_lock(
    tmp_path: Path, pipeline: Path, content: bytes, reason: str
) -> None:
    lock_path(pipeline).write_bytes(content)
    ((code, message),) = lock_problems(pipeline, {"alpha": ">=1"}, ({"path": "repo"},))
    assert code == codes.LOCK_STALE
    assert reason in message
    assert message.endswith("converge-dsl lock replaces it")
    warnings: list[str] = []
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "c"), warn=warnings.append)
    (warning,) = warnings
    assert warning.startswith("converge.lock is unreadable")
    assert "it is replaced" in warning
    assert read_lock(pipeline) is not None


def test_a_folder_where_the_lock_goes_is_named_and_kept(tmp_path: Path, pipeline: Path) -> None:
    # Before, validate said `lock` replaces it, and `lock` warned so, then failed with
    # a bare "cannot write converge.lock: Is a directory".
    lock_path(pipeline).mkdir()
    (lock_path(pipeline) / "kept.txt").write_text("mine")
    ((code, message),) = lock_problems(pipeline, {"alpha": ">=1"}, ({"path": "repo"},))
    assert (code, message) == (
        codes.LOCK_STALE,
        "converge.lock is a folder, not a lock file; move it away, then run converge-dsl lock",
    )
    status, _, err = _cli("lock", str(pipeline), "--cache", str(tmp_path / "c"))
    assert (status, err) == (
        1,
        "error[CD501]: converge.lock is a folder, not a lock file\n"
        "  hint: move it away, then run converge-dsl lock again\n",
    )
    assert (lock_path(pipeline) / "kept.txt").read_text() == "mine"


def test_lock_and_pack_add_cli_replace_a_corrupt_lock_with_a_warning(
    tmp_path: Path, pipeline: Path
) -> None:
    lock_path(pipeline).write_text("")
    code, _, err = _cli("lock", str(pipeline), "--cache", str(tmp_path / "c"))
    assert code == 0, err
    assert err.startswith("warning: converge.lock is unreadable")
    publish(make_pack(tmp_path, "beta", "1.0.0"), tmp_path / "repo")
    lock_path(pipeline).write_text("<<<<<<< HEAD\n")
    code, _out, err = _cli(
        "pack", "add", "beta", ">=1", str(pipeline), "--cache", str(tmp_path / "c")
    )
    assert code == 0, err
    assert "merge-conflict markers; it is replaced" in err
    lock = read_lock(pipeline)
    assert lock is not None
    assert sorted(lock.packs) == ["alpha", "beta"]


def test_leftover_temporary_files_and_folders_do_not_block_lock(
    tmp_path: Path, pipeline: Path
) -> None:
    (tmp_path / "converge.lock.tmp").mkdir()
    (tmp_path / "pipeline.lock.tmp").mkdir()
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "c"))
    assert read_lock(pipeline) is not None
    assert sorted(p.name for p in tmp_path.glob("*.tmp")) == [
        "converge.lock.tmp",
        "pipeline.lock.tmp",
    ]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("signature", "ed25519:zzz", "'signature' is not an object"),
        ("sha256", 5, "'sha256' is not a sha256 digest"),
        ("version", ["1"], "'version' is not a version"),
        ("requires", "x", "'requires' is not an object"),
        ("requested-by", "me", "'requested-by' is not a list"),
    ],
)
def test_a_malformed_lock_entry_is_a_pack_error_not_a_traceback(
    tmp_path: Path, pipeline: Path, field: str, value: object, problem: str
) -> None:
    lock_pipeline(pipeline, cache=PackCache(tmp_path / "c"))
    body = json.loads(lock_path(pipeline).read_text())
    body["pipelines"]["pipeline.yaml"]["packs"]["alpha"][field] = value
    lock_path(pipeline).write_text(json.dumps(body))
    with pytest.raises(PackError, match="entry of pack 'alpha' is malformed") as caught:
        read_lock(pipeline)
    assert problem in caught.value.message
    ((code, _),) = lock_problems(pipeline, {"alpha": ">=1"}, ({"path": "repo"},))
    assert code == codes.LOCK_STALE


def _lock_many(folder: str, names: list[str], rounds: int) -> None:
    from converge_dsl.packs import PackCache, lock_pipeline

    for _ in range(rounds):
        for name in names:
            lock_pipeline(Path(folder) / name, cache=PackCache(Path(folder) / "cache"))


def test_concurrent_lock_runs_in_one_folder_keep_every_section(
    tmp_path: Path, pipeline: Path
) -> None:
    names = [f"p{i}.yaml" for i in range(8)]
    for name in names:
        (tmp_path / name).write_text(pipeline.read_text(), encoding="utf-8")
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_lock_many, args=(str(tmp_path), names[i::4], 3)) for i in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    body = json.loads((tmp_path / "converge.lock").read_text())
    assert sorted(body["pipelines"]) == names
    assert not list(tmp_path.glob(".converge.lock.*.tmp"))


def test_a_held_lock_file_makes_a_second_writer_give_up_clearly(tmp_path: Path) -> None:
    target = tmp_path / "converge.lock"
    with exclusive(target):
        started = time.monotonic()
        with pytest.raises(PackError) as caught, exclusive(target, wait_s=0.3):
            pass
        assert time.monotonic() - started >= 0.3
    assert caught.value.message == (
        "converge.lock is being written by another converge-dsl process; gave up after 0.3 s"
    )
    with exclusive(target, wait_s=0):  # released on exit
        pass


@pytest.mark.parametrize(
    ("name", "text", "first", "exit"),
    [
        ("result.json", '{"stop_reason": "converged", "facts": {}}\n', "error[CD101]", 2),
        ("notes.yaml", "a: 1\n", "error[CD100]", 2),
        # another kind of ours: one usage error naming what takes it, as `run` says
        (
            "case.test.yaml",
            "apiVersion: converge-dsl/v1\nkind: PipelineTest\ncases: []\n",
            "error[CD818]",
            3,
        ),
    ],
)
def test_lock_of_a_file_that_is_no_pipeline_is_refused_and_writes_no_lock(
    tmp_path: Path, name: str, text: str, first: str, exit: int
) -> None:
    (tmp_path / name).write_text(text)
    code, out, err = _cli("lock", str(tmp_path / name))
    assert (code, out) == (exit, "")
    assert err.startswith(first)
    assert "kind" in err  # it names what makes a pipeline
    assert not (tmp_path / "converge.lock").exists()
