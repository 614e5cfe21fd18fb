"""scikit-learn's bundled 8x8 digits (1797 images, 10 classes): the dataset that needs no files and no download.

The split is fixed: the first 80 % of the images (1438) train, the last 20 % (359) test, in scikit-learn's order.
Pixels (0..16) are scaled to [0, 1].
"""

import numpy as np

from models.datasets.dataset import Dataset

TEST_FRACTION = 0.2
_MAX_PIXEL = 16


def load(spec, data_dir=None):
    from sklearn.datasets import load_digits  # scikit-learn is imported only when digits are used

    bunch = load_digits()
    x = (bunch.images.astype(np.float32) / np.float32(_MAX_PIXEL))[..., np.newaxis]  # [1797, 8, 8, 1]
    y = bunch.target.astype(np.int64)
    n_train = len(x) - int(round(TEST_FRACTION * len(x)))
    return Dataset(name=spec.name, x_train=x[:n_train], y_train=y[:n_train], x_test=x[n_train:],
                   y_test=y[n_train:], num_classes=spec.num_classes, input_shape=tuple(spec.input_shape))
