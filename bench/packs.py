"""Resolve and lock a pipeline against a generated repository of 2,000 packs x 20 versions.

The repository is a folder with the sparse index (one `index/NAME.json` per
pack; archives are not needed to resolve). The pipeline asks for 5 packs whose
requirements reach 25 packs transitively. The same pipeline is also resolved
against a repository of only those 25 packs (the baseline): the index bytes
fetched must be the same, i.e. they do not grow with packs the pipeline does
not use.

It also unpacks an archive whose pax header declares 3 GiB of zeros (3 MB
compressed) and reports how fast, and within how much memory, it is refused.

Usage: .venv/bin/python bench/packs.py [--packs 2000] [--versions 20]
Last line: `resolve seconds: X  index KiB fetched: Y`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from converge_dsl.packs import FolderRepository, IndexEntry, PackIndex, resolve
from converge_dsl.packs._index import index_path
from converge_dsl.packs._lockfile import lock_from_resolution, write_lock

USED_ROOTS = 5
CHAIN = 5  # each root reaches CHAIN packs: pack-i requires pack-(i + USED_ROOTS)


def _name(i: int) -> str:
    return f"pack-{i:04d}"


def generate(root: Path, packs: int, versions: int) -> None:
    for i in range(packs):
        entries = []
        for v in range(versions):
            requires = {}
            if i < USED_ROOTS * (CHAIN - 1):
                requires = {_name(i + USED_ROOTS): SpecifierSet(f">=1.{v // 2},<2")}
            entries.append(
                IndexEntry(
                    version=Version(f"1.{v}.0"),
                    sha256=f"{i:032x}{v:032x}",
                    published="2025-01-01T00:00:00Z",
                    yanked=v == versions - 1 and i % 7 == 0,
                    requires_packs=requires,
                )
            )
        path = root / index_path(_name(i))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(PackIndex(_name(i), tuple(entries)).to_bytes())


def measure(root: Path, pipeline_dir: Path) -> tuple[float, int, int]:
    repository = FolderRepository(root, label="repo")
    roots = {_name(i): SpecifierSet(">=1.0") for i in range(USED_ROOTS)}
    start = time.perf_counter()
    resolved = resolve(roots, [repository], requester="pipeline 'bench'")
    lock = lock_from_resolution({k: str(v) for k, v in roots.items()}, [{"path": "repo"}], resolved)
    write_lock(pipeline_dir / "bench.yaml", lock)  # its section of converge.lock
    return time.perf_counter() - start, repository.index_bytes_fetched, len(resolved)


def pax_bomb(zero_mib: int) -> bytes:
    """A .tar.gz whose pax header declares `zero_mib` MiB of zeros (repeated gzip members)."""
    import gzip
    import tarfile

    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type = tarfile.XHDTYPE
    pax.size = zero_mib << 20
    one_mib = gzip.compress(bytes(1 << 20), compresslevel=9, mtime=0)
    return gzip.compress(pax.tobuf(format=tarfile.USTAR_FORMAT), mtime=0) + one_mib * zero_mib


def bomb_refusal(work: Path) -> str:
    """One line: how long and how much memory refusing the 3 GiB pax bomb took."""
    import resource

    from converge_dsl.errors import PackError
    from converge_dsl.packs import unpack

    bomb = pax_bomb(3 * 1024)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    try:
        unpack(bomb, work / "bomb")
        outcome = "UNPACKED (bug)"
    except PackError as exc:
        outcome = f"refused ({getattr(exc, 'code', '?')})"
    seconds = time.perf_counter() - started
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return (
        f"3 GiB pax bomb ({len(bomb) / 1e6:.1f} MB compressed): {outcome} in {seconds:.3f} s, "
        f"peak RSS +{grown:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packs", type=int, default=2000)
    parser.add_argument("--versions", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as raw:
        work = Path(raw)
        used = USED_ROOTS * CHAIN
        started = time.perf_counter()
        generate(work / "big", args.packs, args.versions)
        generate(work / "small", used, args.versions)
        print(
            f"generated {args.packs} packs x {args.versions} versions "
            f"in {time.perf_counter() - started:.1f} s"
        )
        small_s, small_bytes, small_n = measure(work / "small", work)
        big_s, big_bytes, big_n = measure(work / "big", work)
        print(
            f"baseline ({used} packs): {small_n} packs locked, {small_s:.4f} s, "
            f"{small_bytes / 1024:.1f} KiB of index fetched"
        )
        print(
            f"full ({args.packs} packs): {big_n} packs locked, {big_s:.4f} s, "
            f"{big_bytes / 1024:.1f} KiB of index fetched"
        )
        print(
            f"index bytes ratio full/baseline: {big_bytes / small_bytes:.3f} "
            f"(time ratio {big_s / small_s:.2f})"
        )
        print(bomb_refusal(work))
        print(f"resolve seconds: {big_s:.4f}  index KiB fetched: {big_bytes / 1024:.1f}")


if __name__ == "__main__":
    main()
