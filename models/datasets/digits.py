"""scikit-learn's bundled 8x8 digits (1797 images, 10 classes): the dataset that needs no files and no download.

The split is fixed: the first 80 % of the images (1438) train, the last 20 % (359) test, in scikit-learn's order.
Pixels (0..16) are scaled to [0, 1].

The images are read from the file scikit-learn ships (sklearn/datasets/data/digits.csv.gz: 64 pixels and the label
a row) without importing scikit-learn, whose import costs a training process ~0.9-1.4 CPU s (SciPy's statistics); the
test compares the arrays with sklearn.datasets.load_digits().
"""
import importlib.util
from pathlib import Path

import numpy as np

from models.datasets.dataset import Dataset
from models.datasets.errors import DatasetError

TEST_FRACTION = 0.2
_MAX_PIXEL = 16
_SIDE = 8


def digits_file() -> Path:
    """scikit-learn's digits file, found without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError("dataset=digits reads the images scikit-learn ships, and scikit-learn is not installed: "
                           "pip install scikit-learn (a dependency of this project: pip install -e .)")
    path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / "digits.csv.gz"
    if not path.is_file():
        raise DatasetError(f"dataset=digits: {path} is missing from the scikit-learn installed; reinstall it "
                           "(pip install --force-reinstall scikit-learn)")
    return path


def images_and_labels() -> tuple[np.ndarray, np.ndarray]:
    """All 1797 images [n, 8, 8] (pixels 0..16, float64) and labels [n] (int64), in the file's order."""
    rows = np.loadtxt(digits_file(), delimiter=",")
    return rows[:, :-1].reshape(-1, _SIDE, _SIDE), rows[:, -1].astype(np.int64)


def load(spec, data_dir=None):
    images, labels = images_and_labels()
    x = (images.astype(np.float32) / np.float32(_MAX_PIXEL))[..., np.newaxis]  # [1797, 8, 8, 1]
    n_train = len(x) - int(round(TEST_FRACTION * len(x)))
    return Dataset(name=spec.name, x_train=x[:n_train], y_train=labels[:n_train], x_test=x[n_train:],
                   y_test=labels[n_train:], num_classes=spec.num_classes, input_shape=tuple(spec.input_shape))
