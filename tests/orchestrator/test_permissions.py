"""What a cell writes is readable by its user alone by default, and by the project group too with
share_with_group=true; never by everyone (orchestrator/common/permissions.py). Real launches of a tiny cell, one per
setting, run side by side once for the module."""
from __future__ import annotations

import stat
import subprocess
from functools import partial
from pathlib import Path

import pytest

from tests.orchestrator.helpers import PYTHON, REPO, TINY, env, side_by_side

SHARES = (False, True)


def _launch(tmp_path: Path, *args: str) -> None:
    # A umask of 000 around the launcher: what it writes is restricted by the launcher itself, not by the shell's.
    result = subprocess.run(["bash", "-c", 'umask 000 && exec "$@"', "-", PYTHON, str(REPO / "launch.py"),
                             *TINY, f"checkpoint_root={tmp_path / 'ck'}",
                             f"tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", *args],
                            cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> dict[bool, Path]:
    """share_with_group -> the folder of a finished launch with that setting (both launched side by side)."""
    roots = {share: tmp_path_factory.mktemp(f"share-{str(share).lower()}") for share in SHARES}
    side_by_side(*(partial(_launch, root, f"share_with_group={str(share).lower()}") for share, root in roots.items()))
    return roots


def _modes(tmp_path: Path) -> dict[Path, int]:
    paths = [p for p in tmp_path.rglob("*") if not p.is_symlink()]
    assert any(p.suffix == ".npz" for p in paths) and (tmp_path / "mlflow.db").exists()
    return {p: stat.S_IMODE(p.stat().st_mode) for p in paths}


@pytest.mark.parametrize("share, group_bits", [(False, 0), (True, stat.S_IRGRP)])
def test_a_cells_files_are_not_readable_by_everyone(launched, share, group_bits):
    """Every file and folder a launch with share_with_group=`share` wrote (checkpoints, store, queue, logs, Hydra's
    folder), under a umask of 000: none readable by everyone, none writable by the group, and every file outside
    Hydra's own folder readable by the group exactly when `share` is true."""
    tmp_path = launched[share]
    modes = _modes(tmp_path)
    everyone = [f"{p.relative_to(tmp_path)} {oct(m)}" for p, m in modes.items() if m & stat.S_IRWXO]
    assert not everyone, f"readable by everyone: {everyone[:5]}"
    writable_by_group = [str(p) for p, m in modes.items() if m & stat.S_IWGRP]
    assert not writable_by_group
    # The launcher's own Hydra folder (outputs/) is made before the config is read: its user's alone either way.
    files = {p: m for p, m in modes.items() if p.is_file() and "outputs" not in p.relative_to(tmp_path).parts}
    assert all(m & stat.S_IRGRP == group_bits for m in files.values()), \
        [(str(p.relative_to(tmp_path)), oct(m)) for p, m in files.items() if m & stat.S_IRGRP != group_bits][:8] or \
        {str(p.relative_to(tmp_path)): oct(m) for p, m in list(files.items())[:5]}
