"""A PEP 517 backend that builds the one-module wheel of this test distribution.

Only what `pip install` asks of a backend: `build_wheel` (and no extra
requirements). The metadata and entry points are written from constants
mirroring pyproject.toml, which this backend does not parse.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

NAME, VERSION = "converge_dsl_counter_kind", "0.1.0"
MODULE = "counter_kind.py"
HERE = Path(__file__).resolve().parent.parent
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
FILES = {
    "METADATA": f"Metadata-Version: 2.1\nName: converge-dsl-counter-kind\nVersion: {VERSION}\n",
    "WHEEL": (
        "Wheel-Version: 1.0\nGenerator: wheel_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ),
    "entry_points.txt": (
        "[converge_dsl.kinds]\ncounter = counter_kind:COUNTER\nbroken = counter_kind:NO_SUCH_KIND\n"
    ),
}


def get_requires_for_build_wheel(config_settings: object = None) -> list[str]:
    return []


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(
    wheel_directory: str, config_settings: object = None, metadata_directory: object = None
) -> str:
    wheel = f"{NAME}-{VERSION}-py3-none-any.whl"
    entries = {MODULE: (HERE / MODULE).read_bytes()}
    entries |= {f"{DIST_INFO}/{name}": text.encode() for name, text in FILES.items()}
    record = [_record_line(name, data) for name, data in entries.items()]
    record.append(f"{DIST_INFO}/RECORD,,")
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        archive.writestr(f"{DIST_INFO}/RECORD", "\n".join(record) + "\n")
    return wheel
