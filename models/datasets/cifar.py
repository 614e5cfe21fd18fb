"""CIFAR-10 in its python version: pickled batches in cifar-10-batches-py/ (data_batch_1..5, test_batch).

Each batch is a pickled dict with b"data", uint8 [n, 3072] (1024 red, 1024 green, 1024 blue values, rows of 32), and
b"labels", n ints in 0..9. Pickle runs code from the file it reads: load only files you downloaded yourself
(models.download checks the published MD5s).
"""

import pickle

import numpy as np

from models.datasets.dataset import Dataset
from models.datasets.errors import CorruptDatasetError
from models.datasets.locate import find_files

FOLDER = "cifar-10-batches-py"
_SIDE, _CHANNELS = 32, 3


def _field(batch, key):
    for candidate in (key.encode(), key):
        if candidate in batch:
            return batch[candidate]
    return None


def read_batch(path, num_classes, hint=""):
    """(images [n, 32, 32, 3] uint8, labels [n] int64) of one pickled batch, after checking its keys and shapes."""
    try:
        with open(path, "rb") as handle:
            batch = pickle.load(handle, encoding="bytes")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError,
            IndexError, KeyError) as error:
        raise CorruptDatasetError(f"{path}: not a readable CIFAR-10 python batch ({type(error).__name__}: "
                                  f"{error}); {hint}") from error
    if not isinstance(batch, dict):
        raise CorruptDatasetError(f"{path}: holds a {type(batch).__name__}, a CIFAR-10 batch is a dict; {hint}")
    data, labels = _field(batch, "data"), _field(batch, "labels")
    if data is None or labels is None:
        raise CorruptDatasetError(f"{path}: keys {sorted(map(str, batch))}, a CIFAR-10 batch needs b'data' and "
                                  f"b'labels'; {hint}")
    data, labels = np.asarray(data), np.asarray(labels)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _SIDE * _SIDE * _CHANNELS:
        raise CorruptDatasetError(f"{path}: data is {data.dtype} {data.shape}, expected uint8 [n, 3072]; {hint}")
    if labels.shape != (len(data),):
        raise CorruptDatasetError(f"{path}: {labels.size} labels for {len(data)} images; {hint}")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise CorruptDatasetError(f"{path}: labels outside 0..{num_classes - 1}; {hint}")
    images = data.reshape(-1, _CHANNELS, _SIDE, _SIDE).transpose(0, 2, 3, 1)  # planar CHW -> NHWC
    return images, labels.astype(np.int64)


def _stack(batches):
    images = np.concatenate([images for images, _ in batches]).astype(np.float32) / np.float32(255)
    return images, np.concatenate([labels for _, labels in batches])


def load(spec, data_dir):
    """Load CIFAR-10 from data_dir/cifar-10-batches-py: the five training batches in order, then the test batch."""
    paths = find_files(spec, data_dir)
    hint = f"replace it with: {spec.get_command(data_dir)}"
    train = [read_batch(path, spec.num_classes, hint) for role, path in paths.items() if role.startswith("train")]
    x_train, y_train = _stack(train)
    x_test, y_test = _stack([read_batch(paths["test"], spec.num_classes, hint)])
    return Dataset(name=spec.name, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
                   num_classes=spec.num_classes, input_shape=tuple(spec.input_shape))
