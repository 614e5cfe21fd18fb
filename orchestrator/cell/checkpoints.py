"""Atomic, checksummed checkpoints of one cell; the newest that verifies is the one to resume from.

Layout, in CELL_DIR/checkpoints/:
    step-000001200.npz    payload: every array (model variables incl. RNG/BN state, optimizer variables), by index
    step-000001200.json   manifest: format, step, payload size and sha256, metadata (identity, model, mult,
                          epoch, data position, variable paths, ...) and a sha256 of the manifest itself

A checkpoint exists once its manifest is renamed into place; the payload is written, fsynced and renamed first, so
a crash at any moment leaves either the old set or the old set plus a complete new one. Plain numpy and JSON (no
pickle): a checkpoint can be read and checked without this code and without trusting its author.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ops.atomic import write_bytes

FORMAT = "amdnn-checkpoint/1"
SUBDIR = "checkpoints"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used."""


class CheckpointMismatch(CheckpointError):
    """A checkpoint of another cell (model, multiplier or config): never loaded."""


@dataclass
class Checkpoint:
    step: int
    manifest_path: Path
    meta: dict
    arrays: dict[str, np.ndarray]


def _manifest_digest(manifest: Mapping[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def directory(cell_dir: Path) -> Path:
    return Path(cell_dir) / SUBDIR


def save(cell_dir: Path, step: int, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any],
         keep_last: int) -> Path:
    """Write checkpoint `step` atomically, then delete all but the newest `keep_last`. Returns the manifest path."""
    folder = directory(cell_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"step-{step:09d}"
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    payload = buffer.getvalue()
    write_bytes(folder / f"{stem}.npz", payload)
    manifest = {"format": FORMAT, "step": int(step), "payload": f"{stem}.npz", "payload_bytes": len(payload),
                "payload_sha256": hashlib.sha256(payload).hexdigest(), "meta": dict(meta)}
    manifest["manifest_sha256"] = _manifest_digest(manifest)
    path = folder / f"{stem}.json"
    write_bytes(path, json.dumps(manifest, indent=1, sort_keys=True).encode())
    _prune(folder, keep_last)
    return path


def _manifests(folder: Path) -> list[Path]:
    """Manifest files, newest step first."""
    return sorted(folder.glob("step-*.json"), reverse=True) if folder.is_dir() else []


def _prune(folder: Path, keep_last: int) -> None:
    for manifest in _manifests(folder)[max(keep_last, 1):]:
        manifest.unlink(missing_ok=True)  # the manifest first: without it the payload is not a checkpoint
        manifest.with_suffix(".npz").unlink(missing_ok=True)
    # Payloads whose manifest never landed (a crash between the two renames), and stale temp files.
    live = {m.with_suffix(".npz").name for m in _manifests(folder)}
    for payload in folder.glob("step-*.npz"):
        if payload.name not in live:
            payload.unlink(missing_ok=True)


def read(manifest_path: Path) -> Checkpoint:
    """Load and verify one checkpoint; raise CheckpointError saying what is wrong with it."""
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{manifest_path.name}: unreadable manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{manifest_path.name}: not an {FORMAT} manifest")
    if manifest.get("manifest_sha256") != _manifest_digest(manifest):
        raise CheckpointError(f"{manifest_path.name}: manifest checksum mismatch")
    payload_path = manifest_path.parent / manifest["payload"]
    try:
        payload = payload_path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{payload_path.name}: unreadable payload ({e})") from None
    if len(payload) != manifest["payload_bytes"]:
        raise CheckpointError(f"{payload_path.name}: truncated payload ({len(payload)} of "
                              f"{manifest['payload_bytes']} bytes)")
    if hashlib.sha256(payload).hexdigest() != manifest["payload_sha256"]:
        raise CheckpointError(f"{payload_path.name}: payload checksum mismatch (corrupt)")
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    return Checkpoint(step=int(manifest["step"]), manifest_path=manifest_path, meta=manifest["meta"], arrays=arrays)


def check_belongs(ckpt: Checkpoint, expect: Mapping[str, Any]) -> None:
    """Refuse a checkpoint of another cell: compares identity, model, mult and dataset."""
    wrong = [f"{key} {ckpt.meta.get(key)!r} (this cell: {value!r})" for key, value in expect.items()
             if ckpt.meta.get(key) != value]
    if wrong:
        raise CheckpointMismatch(
            f"refusing checkpoint {ckpt.manifest_path}: it belongs to another cell: " + "; ".join(wrong)
            + f". Move {ckpt.manifest_path.parent} away, or point checkpoint_root elsewhere.")


def _quarantine(manifest: Path) -> str:
    """Rename a bad checkpoint to corrupt-step-*: kept for inspection, never listed, pruned or loaded again."""
    for path in (manifest, manifest.with_suffix(".npz")):
        if path.exists():
            os.replace(path, path.with_name("corrupt-" + path.name))
    return "corrupt-" + manifest.stem + ".{json,npz}"


def latest(cell_dir: Path, expect: Mapping[str, Any]) -> tuple[Checkpoint | None, list[str]]:
    """The newest checkpoint that verifies, and a line for every newer one skipped as corrupt or truncated.

    A verified checkpoint of another cell raises CheckpointMismatch: silently rolling back past it would hide that
    two cells share a folder.
    """
    skipped: list[str] = []
    for manifest in _manifests(directory(cell_dir)):
        try:
            ckpt = read(manifest)
        except CheckpointError as e:
            skipped.append(f"{e}; moved aside as {_quarantine(manifest)}")
            continue
        check_belongs(ckpt, expect)
        return ckpt, skipped
    return None, skipped
