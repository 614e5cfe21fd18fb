"""MNIST and Fashion-MNIST loading from IDX files: the real MNIST files, then damaged copies of them."""

import dataclasses
import os
import gzip
import shutil

import numpy as np
import pytest

from models.datasets import DATASETS, CorruptDatasetError, MissingDatasetError, load
from models.datasets.idx import IMAGES_MAGIC, read_idx

MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
         "t10k-labels-idx1-ubyte.gz"]


def test_real_mnist_shapes_labels_and_pixels(mnist):
    assert mnist.x_train.shape == (60000, 28, 28, 1) and mnist.x_test.shape == (10000, 28, 28, 1)
    assert mnist.x_train.dtype == np.float32 and mnist.y_train.dtype == np.int64
    assert mnist.input_shape == (28, 28, 1) and mnist.num_classes == 10
    assert np.bincount(mnist.y_train).tolist() == MNIST_TRAIN_COUNTS
    assert np.bincount(mnist.y_test).tolist() == MNIST_TEST_COUNTS
    assert mnist.y_train[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert mnist.y_test[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert mnist.x_train.min() == 0.0 and mnist.x_train.max() == 1.0
    assert mnist.x_train[0, 14, 14, 0] == np.float32(240) / np.float32(255)
    assert mnist.x_train[0, 0, 0, 0] == 0.0


@pytest.fixture
def mnist_copy(tmp_path, mnist_dir):
    """data_dir/mnist with links to the real files; a test replaces the one it damages."""
    folder = tmp_path / "mnist"
    folder.mkdir()
    for name in FILES:
        (folder / name).symlink_to(mnist_dir / name)
    return folder


def _replace(folder, name, data):
    (folder / name).unlink()
    (folder / name).write_bytes(data)


def test_uncompressed_files_load_the_same(mnist_copy, mnist_dir):
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (mnist_copy / name).unlink()
        (mnist_copy / name[:-3]).write_bytes(gzip.decompress((mnist_dir / name).read_bytes()))
    data = load("mnist", mnist_copy.parent)
    assert np.bincount(data.y_test).tolist() == MNIST_TEST_COUNTS
    assert data.x_test.shape == (10000, 28, 28, 1)


def test_missing_file_names_file_folder_and_command(tmp_path, mnist_copy):
    (mnist_copy / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(MissingDatasetError) as error:
        load("mnist", tmp_path)
    message = str(error.value)
    assert "t10k-labels-idx1-ubyte.gz" in message and str(mnist_copy) in message
    assert f"python -m models.download --dataset mnist --data-dir {tmp_path}" in message
    assert "train-images" not in message  # only the missing file is named


def test_truncated_gzip_is_reported(mnist_copy, mnist_dir):
    data = (mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes()
    _replace(mnist_copy, "t10k-labels-idx1-ubyte.gz", data[: len(data) // 2])
    with pytest.raises(CorruptDatasetError, match=r"t10k-labels-idx1-ubyte.gz: corrupt or truncated gzip"):
        load("mnist", mnist_copy.parent)


def test_gzip_crc_damage_is_reported(mnist_copy, mnist_dir):
    data = bytearray((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes())
    data[-6] ^= 0xFF  # inside the CRC32 trailer: the data inflates but does not check
    _replace(mnist_copy, "t10k-labels-idx1-ubyte.gz", bytes(data))
    with pytest.raises(CorruptDatasetError, match="corrupt or truncated gzip"):
        load("mnist", mnist_copy.parent)


def test_truncated_raw_file_is_reported(mnist_copy, mnist_dir):
    raw = gzip.decompress((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes())
    (mnist_copy / "t10k-labels-idx1-ubyte.gz").unlink()
    (mnist_copy / "t10k-labels-idx1-ubyte").write_bytes(raw[:-100])
    with pytest.raises(CorruptDatasetError, match=r"t10k-labels-idx1-ubyte: truncated: 9908 bytes .* needs 10008"):
        load("mnist", mnist_copy.parent)


def test_labels_file_in_place_of_images_is_reported(mnist_copy, mnist_dir):
    _replace(mnist_copy, "t10k-images-idx3-ubyte.gz", (mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes())
    with pytest.raises(CorruptDatasetError, match=r"magic number 2049 \(an IDX labels file\), expected 2051"):
        load("mnist", mnist_copy.parent)


def test_label_out_of_range_is_reported(mnist_copy, mnist_dir):
    raw = bytearray(gzip.decompress((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes()))
    raw[8 + 17] = 10
    _replace(mnist_copy, "t10k-labels-idx1-ubyte.gz", gzip.compress(bytes(raw)))
    with pytest.raises(CorruptDatasetError, match=r"label 10 outside 0..9"):
        load("mnist", mnist_copy.parent)


def test_train_and_test_counts_must_match(mnist_copy, mnist_dir):
    _replace(mnist_copy, "t10k-labels-idx1-ubyte.gz", (mnist_dir / "train-labels-idx1-ubyte.gz").read_bytes())
    with pytest.raises(CorruptDatasetError, match="has 10000 images but .* has 60000 labels"):
        load("mnist", mnist_copy.parent)


def test_read_idx_rejects_a_short_file(tmp_path):
    path = tmp_path / "tiny"
    path.write_bytes(b"\x00\x00")
    with pytest.raises(CorruptDatasetError, match="too short for an IDX header"):
        read_idx(path, IMAGES_MAGIC)


def test_fashion_mnist_searches_the_system_folder(tmp_path, monkeypatch, mnist_dir):
    system = tmp_path / "usr-share-datasets-fashion-mnist"
    system.mkdir()
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(mnist_dir / name, system / name)
    # Test files standing in for the training files keep the copy small.
    shutil.copy(mnist_dir / "t10k-images-idx3-ubyte.gz", system / "train-images-idx3-ubyte.gz")
    shutil.copy(mnist_dir / "t10k-labels-idx1-ubyte.gz", system / "train-labels-idx1-ubyte.gz")
    spec = dataclasses.replace(DATASETS["fashion_mnist"], system_dirs=(str(system),))
    monkeypatch.setitem(DATASETS, "fashion_mnist", spec)
    data_dir = tmp_path / "data"
    data = load("fashion_mnist", data_dir)
    assert data.name == "fashion_mnist" and len(data.x_train) == 10000

    for name in ("train-images-idx3-ubyte.gz",):
        (system / name).unlink()
    with pytest.raises(MissingDatasetError) as error:
        load("fashion_mnist", data_dir)
    message = str(error.value)
    assert str(data_dir / "fashion_mnist") in message and str(system) in message
    assert "apt-get install dataset-fashion-mnist" in message


def test_fashion_mnist_from_the_debian_package_when_installed(tmp_path):
    system = DATASETS["fashion_mnist"].system_dirs[0]
    if not os.path.isdir(system):
        pytest.skip(f"dataset-fashion-mnist is not installed ({system} missing)")
    data = load("fashion_mnist", tmp_path)
    assert data.x_train.shape == (60000, 28, 28, 1) and data.x_test.shape == (10000, 28, 28, 1)
    assert np.bincount(data.y_train).tolist() == [6000] * 10
    assert np.bincount(data.y_test).tolist() == [1000] * 10
