"""Where the ops tests find ApproxTrain's published tables (provenance and checksums in tests/data/README.md)."""

from __future__ import annotations

from pathlib import Path


def lut_dir() -> Path:
    """tests/data/approxtrain-luts: MBM_7.bin, MIT_7.bin, ACC_7.bin."""
    return Path(__file__).resolve().parents[1] / "data" / "approxtrain-luts"
