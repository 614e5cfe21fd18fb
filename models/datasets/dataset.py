"""Dataset: one loaded dataset, as the models and the training loop see it."""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    name: str  # a key of DATASETS
    x_train: np.ndarray  # [n_train, h, w, c] float32 in [0, 1]
    y_train: np.ndarray  # [n_train] int64 in [0, num_classes)
    x_test: np.ndarray  # [n_test, h, w, c] float32 in [0, 1]
    y_test: np.ndarray  # [n_test] int64
    num_classes: int
    input_shape: tuple  # (h, w, c): one example, without the batch axis

    def __post_init__(self):
        for split in ("train", "test"):
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if x.dtype != np.float32 or y.dtype != np.int64:
                raise ValueError(f"{self.name} {split}: expected float32 images and int64 labels, "
                                 f"got {x.dtype} and {y.dtype}")
            if x.shape[1:] != tuple(self.input_shape) or len(x) != len(y):
                raise ValueError(f"{self.name} {split}: images {x.shape} and labels {y.shape} do not match "
                                 f"input_shape {tuple(self.input_shape)}")
