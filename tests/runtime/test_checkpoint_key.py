"""The per-user checkpoint key: where it lives, made private on first use, refused if not."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.runtime import CheckpointRefused, checkpoint_key
from converge_dsl.runtime._checkpoint_key import KEY_FILE, config_dir, key_id


def test_the_config_folder_follows_the_override_then_xdg_then_home(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    assert config_dir({"HOME": home}) == Path(home, ".config", "converge-dsl")
    assert config_dir({"HOME": home, "XDG_CONFIG_HOME": "/x"}) == Path("/x/converge-dsl")
    relative = {"HOME": home, "XDG_CONFIG_HOME": "rel"}  # ignored, as the spec says
    assert config_dir(relative) == Path(home, ".config", "converge-dsl")
    env = {"HOME": home, "XDG_CONFIG_HOME": "/x", "CONVERGE_DSL_CONFIG_DIR": "/over"}
    assert config_dir(env) == Path("/over")


def test_the_key_is_made_once_private_and_then_reused(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    key = checkpoint_key(env)
    path = tmp_path / ".config" / "converge-dsl" / KEY_FILE
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert checkpoint_key(env) == key
    assert checkpoint_key({"HOME": str(tmp_path / "other")}) != key
    assert key_id(key) != key_id(bytes(32))
    assert key.hex() not in key_id(key)


def _key_file(tmp_path: Path) -> tuple[dict[str, str], Path]:
    env = {"CONVERGE_DSL_CONFIG_DIR": str(tmp_path / "cfg")}
    checkpoint_key(env)
    return env, tmp_path / "cfg" / KEY_FILE


def test_a_key_others_can_read_is_refused(tmp_path: Path) -> None:
    env, path = _key_file(tmp_path)
    path.chmod(0o644)
    with pytest.raises(CheckpointRefused, match=r"readable by others \(mode 0644\)") as caught:
        checkpoint_key(env)
    assert caught.value.code == codes.CHECKPOINT_KEY_UNUSABLE
    assert caught.value.exit_code == 3


def test_a_key_that_is_a_link_is_refused(tmp_path: Path) -> None:
    env, path = _key_file(tmp_path)
    target = tmp_path / "elsewhere"
    path.rename(target)
    os.symlink(target, path)
    with pytest.raises(CheckpointRefused, match="cannot be read or created"):
        checkpoint_key(env)


@pytest.mark.parametrize("content", [b"", b"zz" * 32, b"ab" * 16])
def test_a_key_of_the_wrong_shape_is_refused(tmp_path: Path, content: bytes) -> None:
    env, path = _key_file(tmp_path)
    path.write_bytes(content)
    with pytest.raises(CheckpointRefused, match="does not hold 64 hex digits"):
        checkpoint_key(env)


def test_an_unwritable_config_folder_is_refused_naming_the_override(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CheckpointRefused) as caught:
        checkpoint_key({"CONVERGE_DSL_CONFIG_DIR": str(blocker / "cfg")})
    assert "CONVERGE_DSL_CONFIG_DIR" in str(caught.value)
