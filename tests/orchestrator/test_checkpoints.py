"""Checkpoint files: atomic, checksummed, last K kept; corrupt or truncated ones skipped and reported; another
cell's refused."""
from __future__ import annotations

import json

import numpy as np
import pytest

from orchestrator.cell import checkpoints
from orchestrator.cell.checkpoints import CheckpointMismatch

EXPECT = {"identity": "abc", "model": "lenet300", "mult": "am16", "dataset": "digits"}


def _save(cell, step, keep=3, **meta):
    arrays = {"v00000": np.full((3, 4), step, np.float32), "v00001": np.array(step, np.int64)}
    return checkpoints.save(cell, step, arrays, {**EXPECT, **meta}, keep_last=keep)


def test_round_trip_and_keep_last(tmp_path):
    for step in (0, 7, 14, 21, 28):
        _save(tmp_path, step)
    folder = checkpoints.directory(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == [f"step-{s:09d}.{ext}" for s in (14, 21, 28)
                                                        for ext in ("json", "npz")]
    ckpt, skipped = checkpoints.latest(tmp_path, EXPECT)
    assert skipped == [] and ckpt.step == 28
    assert np.array_equal(ckpt.arrays["v00000"], np.full((3, 4), 28, np.float32))
    manifest = json.loads(ckpt.manifest_path.read_text())
    assert len(manifest["payload_sha256"]) == 64 and manifest["meta"]["model"] == "lenet300"


@pytest.mark.parametrize("damage", ["truncate_payload", "flip_payload", "truncate_manifest", "edit_manifest",
                                    "delete_payload"])
def test_damaged_newest_is_skipped_and_reported(tmp_path, damage):
    for step in (7, 14):
        _save(tmp_path, step)
    manifest = checkpoints.directory(tmp_path) / "step-000000014.json"
    payload = manifest.with_suffix(".npz")
    if damage == "truncate_payload":
        payload.write_bytes(payload.read_bytes()[:100])
    elif damage == "flip_payload":
        data = bytearray(payload.read_bytes())
        data[len(data) // 2] ^= 0xFF
        payload.write_bytes(bytes(data))
    elif damage == "truncate_manifest":
        manifest.write_text(manifest.read_text()[:50])
    elif damage == "edit_manifest":
        manifest.write_text(manifest.read_text().replace('"step": 14', '"step": 15'))
    else:
        payload.unlink()
    ckpt, skipped = checkpoints.latest(tmp_path, EXPECT)
    assert ckpt.step == 7
    assert len(skipped) == 1 and "step-000000014" in skipped[0]
    # Moved aside: not listed again, not counted by keep_last, kept for inspection.
    assert (checkpoints.directory(tmp_path) / "corrupt-step-000000014.json").exists()
    assert checkpoints.latest(tmp_path, EXPECT)[1] == []


def test_nothing_verifies(tmp_path):
    _save(tmp_path, 3)
    (checkpoints.directory(tmp_path) / "step-000000003.npz").write_bytes(b"")
    ckpt, skipped = checkpoints.latest(tmp_path, EXPECT)
    assert ckpt is None and "truncated" in skipped[0]


def test_another_cells_checkpoint_is_refused(tmp_path):
    _save(tmp_path, 5, model="resnet18", mult="am32")
    with pytest.raises(CheckpointMismatch, match=r"model 'resnet18' \(this cell: 'lenet300'\).*mult 'am32'"):
        checkpoints.latest(tmp_path, EXPECT)


def test_crash_between_payload_and_manifest_leaves_no_checkpoint(tmp_path):
    _save(tmp_path, 7)
    _save(tmp_path, 14)
    (checkpoints.directory(tmp_path) / "step-000000014.json").unlink()  # as if killed before the manifest rename
    assert checkpoints.latest(tmp_path, EXPECT)[0].step == 7
    _save(tmp_path, 21)  # the orphan payload is cleaned up by the next save
    assert not (checkpoints.directory(tmp_path) / "step-000000014.npz").exists()
