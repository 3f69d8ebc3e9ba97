"""A Ray batch and batch processes on one answer cache, at the scale of 2,000 Ray cases.

Runs `tests/batch/test_shared_cache.py` with `CONVERGE_DSL_SHARED_CACHE_CASES=CASES`
(default 2,000, as the suite does): 2,000 cases on Ray (2 actors) while a `process` batch and a
`local` batch of 1,000 cases each run at the same time over the same cache folder, all
asking a loopback `fakellm` server about 100 topics. The test's checks hold (each answer
its own request's, one verified entry per key, no warning) and it prints how many requests
reached the server beyond one per key (the race, docs/cache.md) and when each batch ran.

    python bench/cache_share.py [CASES]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    cases = sys.argv[1] if len(sys.argv) > 1 else "2000"
    env = {**os.environ, "CONVERGE_DSL_SHARED_CACHE_CASES": cases}
    test = "tests/batch/test_shared_cache.py"
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:randomly", test]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    figures = [line for line in done.stdout.splitlines() if "requests reached the server" in line]
    print("\n".join(figures) if figures else done.stdout[-4000:] + done.stderr[-4000:])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
