"""MNIST-format (IDX) files: reading with validation, and loading MNIST and Fashion-MNIST.

An IDX file is a big-endian header (magic number 0x0000TTDD: type code TT, 0x08 for unsigned bytes, and DD
dimensions; then DD sizes) followed by the data. Images have magic 2051 (3 dimensions), labels 2049 (1 dimension).
Files may be gzip-compressed (recognised by the gzip signature, whatever their name).
"""

import gzip
import struct
import zlib

import numpy as np

from models.datasets.dataset import Dataset
from models.datasets.errors import CorruptDatasetError
from models.datasets.locate import find_files

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
_KIND = {IMAGES_MAGIC: "images", LABELS_MAGIC: "labels"}
_GZIP_SIGNATURE = b"\x1f\x8b"
_UNSIGNED_BYTE = 0x08


def _read_bytes(path, hint):
    data = path.read_bytes()
    if not data.startswith(_GZIP_SIGNATURE):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
        raise CorruptDatasetError(f"{path}: corrupt or truncated gzip file ({error}); {hint}") from error


def read_idx(path, expected_magic, hint=""):
    """The array in IDX file `path` (uint8), after checking its magic number and that its size matches its header."""
    data = _read_bytes(path, hint)
    if len(data) < 4:
        raise CorruptDatasetError(f"{path}: {len(data)} bytes, too short for an IDX header; {hint}")
    magic = int.from_bytes(data[:4], "big")
    if magic != expected_magic:
        found = f" (an IDX {_KIND[magic]} file)" if magic in _KIND else ""
        raise CorruptDatasetError(f"{path}: IDX magic number {magic}{found}, expected {expected_magic} "
                                  f"({_KIND[expected_magic]}); is it the right file? {hint}")
    ndim = data[3]
    if data[2] != _UNSIGNED_BYTE:
        raise CorruptDatasetError(f"{path}: IDX type code {data[2]:#04x}, expected 0x08 (unsigned bytes); {hint}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise CorruptDatasetError(f"{path}: truncated inside its IDX header; {hint}")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected_size = header + int(np.prod(shape, dtype=np.int64))
    if len(data) != expected_size:
        problem = "truncated" if len(data) < expected_size else "longer than its header says"
        raise CorruptDatasetError(f"{path}: {problem}: {len(data)} bytes (uncompressed), the header {shape} "
                                  f"needs {expected_size}; {hint}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _read_split(spec, paths, split, hint):
    images = read_idx(paths[f"{split}_images"], IMAGES_MAGIC, hint)
    labels = read_idx(paths[f"{split}_labels"], LABELS_MAGIC, hint)
    if images.shape[1:] != tuple(spec.input_shape[:2]):
        raise CorruptDatasetError(f"{paths[f'{split}_images']}: images of {images.shape[1:]} pixels, "
                                  f"{spec.name} has {spec.input_shape[:2]}; {hint}")
    if len(images) != len(labels):
        raise CorruptDatasetError(f"{paths[f'{split}_images']} has {len(images)} images but "
                                  f"{paths[f'{split}_labels']} has {len(labels)} labels; {hint}")
    if labels.size and labels.max() >= spec.num_classes:
        raise CorruptDatasetError(f"{paths[f'{split}_labels']}: label {labels.max()} outside "
                                  f"0..{spec.num_classes - 1}; {hint}")
    x = images[..., np.newaxis].astype(np.float32) / np.float32(255)  # [n, 28, 28, 1] in [0, 1]
    return x, labels.astype(np.int64)


def load(spec, data_dir):
    """Load an IDX dataset (MNIST, Fashion-MNIST) from the first search folder holding all four files."""
    paths = find_files(spec, data_dir)
    hint = f"replace it with: {spec.get_command(data_dir)}"
    x_train, y_train = _read_split(spec, paths, "train", hint)
    x_test, y_test = _read_split(spec, paths, "test", hint)
    return Dataset(name=spec.name, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
                   num_classes=spec.num_classes, input_shape=tuple(spec.input_shape))
