"""Datasets for AMDNN: one registry, loaders for the standard files, verified downloads, reproducible batches.

    DATASETS                                   name -> DatasetSpec (digits, mnist, fashion_mnist, cifar10)
    load(name, data_dir) -> Dataset            x_* float32 NHWC in [0, 1], y_* int64
    download(name, data_dir, mirrors=None)     fetch + verify MD5s + atomic write (login nodes with internet)
    batches(dataset, batch_size, seed, epoch, start_step=0, augment=False) -> iterator of (step, x, y)
    steps_per_epoch(dataset, batch_size)       full batches per epoch (the last partial batch is dropped)

Data directory layout: DIR/mnist/*-ubyte[.gz], DIR/fashion_mnist/*-ubyte[.gz], DIR/cifar-10-batches-py/*.
"""

from models.datasets.batching import batches, epoch_order, steps_per_epoch
from models.datasets.checksums import md5_of, verify_md5
from models.datasets.dataset import Dataset
from models.datasets.errors import (ChecksumError, CorruptDatasetError, DatasetError, DownloadError,
                                    MissingDatasetError)
from models.datasets.fetch import download
from models.datasets.loading import load
from models.datasets.registry import DATASETS, DatasetSpec

__all__ = [
    "DATASETS", "Dataset", "DatasetSpec", "load", "download", "batches", "steps_per_epoch", "epoch_order",
    "md5_of", "verify_md5", "DatasetError", "MissingDatasetError", "CorruptDatasetError", "ChecksumError",
    "DownloadError",
]
