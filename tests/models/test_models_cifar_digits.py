"""CIFAR-10 loading from small batches written in the real python-pickle format, digits, and the registry."""

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.datasets import DATASETS, CorruptDatasetError, MissingDatasetError, load

BATCH = 6  # images per written batch
REPO = Path(__file__).resolve().parents[2]


def pattern_images(first, n):
    """Distinct NHWC uint8 images: a wrong planar/NHWC conversion changes them."""
    i, r, c, ch = np.meshgrid(np.arange(first, first + n), np.arange(32), np.arange(32), np.arange(3), indexing="ij")
    return ((i * 7 + r * 3 + c * 5 + ch * 11) % 256).astype(np.uint8)


def write_batch(path, images, labels, keys=(b"data", b"labels")):
    data = images.transpose(0, 3, 1, 2).reshape(len(images), -1)  # NHWC -> planar rows, as CIFAR stores them
    with open(path, "wb") as handle:
        pickle.dump({keys[0]: data, keys[1]: list(map(int, labels)), b"batch_label": b"test"}, handle)


@pytest.fixture
def cifar_dir(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for b in range(1, 6):
        write_batch(folder / f"data_batch_{b}", pattern_images(b * BATCH, BATCH), (np.arange(BATCH) + b) % 10)
    write_batch(folder / "test_batch", pattern_images(0, BATCH), np.arange(BATCH))
    return folder


def test_cifar_batches_load_in_order_as_nhwc(cifar_dir):
    data = load("cifar10", cifar_dir.parent)
    assert data.x_train.shape == (5 * BATCH, 32, 32, 3) and data.x_test.shape == (BATCH, 32, 32, 3)
    assert data.x_train.dtype == np.float32 and data.y_train.dtype == np.int64
    expected = np.concatenate([pattern_images(b * BATCH, BATCH) for b in range(1, 6)])
    np.testing.assert_array_equal(np.rint(data.x_train * 255).astype(np.uint8), expected)
    np.testing.assert_array_equal(np.rint(data.x_test * 255).astype(np.uint8), pattern_images(0, BATCH))
    assert data.y_train[:BATCH].tolist() == [1, 2, 3, 4, 5, 6]
    assert data.y_test.tolist() == list(range(BATCH))
    assert data.input_shape == (32, 32, 3)


def test_cifar_string_keys_are_accepted(cifar_dir):
    write_batch(cifar_dir / "test_batch", pattern_images(0, 2), [3, 4], keys=("data", "labels"))
    assert load("cifar10", cifar_dir.parent).y_test.tolist() == [3, 4]


def test_cifar_missing_batch_names_it(cifar_dir):
    (cifar_dir / "data_batch_3").unlink()
    with pytest.raises(MissingDatasetError) as error:
        load("cifar10", cifar_dir.parent)
    assert "missing data_batch_3 in " + str(cifar_dir) in str(error.value)
    assert "python -m models.download --dataset cifar10" in str(error.value)


def test_cifar_truncated_batch_is_reported(cifar_dir):
    data = (cifar_dir / "data_batch_2").read_bytes()
    (cifar_dir / "data_batch_2").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptDatasetError, match=r"data_batch_2: not a readable CIFAR-10 python batch"):
        load("cifar10", cifar_dir.parent)


def test_cifar_wrong_keys_are_reported(cifar_dir):
    with open(cifar_dir / "test_batch", "wb") as handle:
        pickle.dump({b"images": np.zeros((2, 3072), np.uint8)}, handle)
    with pytest.raises(CorruptDatasetError, match=r"test_batch: keys .* needs b'data' and b'labels'"):
        load("cifar10", cifar_dir.parent)


def test_cifar_wrong_shape_and_labels_are_reported(cifar_dir):
    with open(cifar_dir / "test_batch", "wb") as handle:
        pickle.dump({b"data": np.zeros((2, 1024), np.uint8), b"labels": [0, 1]}, handle)
    with pytest.raises(CorruptDatasetError, match=r"data is uint8 \(2, 1024\), expected uint8 \[n, 3072\]"):
        load("cifar10", cifar_dir.parent)
    write_batch(cifar_dir / "test_batch", pattern_images(0, 2), [0, 10])
    with pytest.raises(CorruptDatasetError, match=r"labels outside 0..9"):
        load("cifar10", cifar_dir.parent)
    write_batch(cifar_dir / "test_batch", pattern_images(0, 2), [0])
    with pytest.raises(CorruptDatasetError, match=r"1 labels for 2 images"):
        load("cifar10", cifar_dir.parent)


def test_digits_fixed_split_scaled_to_unit_range():
    data = load("digits")
    assert data.x_train.shape == (1438, 8, 8, 1) and data.x_test.shape == (359, 8, 8, 1)
    assert data.x_train.min() == 0.0 and data.x_train.max() == 1.0
    assert len(data.y_train) + len(data.y_test) == 1797 and set(data.y_test.tolist()) == set(range(10))
    again = load("digits", "/nonexistent/data/dir/is/not/needed")
    np.testing.assert_array_equal(again.x_test, data.x_test)
    np.testing.assert_array_equal(again.y_train, data.y_train)


def test_digits_are_scikit_learns_read_without_importing_it():
    from sklearn.datasets import load_digits

    from models.datasets.digits import images_and_labels

    images, labels = images_and_labels()
    bunch = load_digits()
    np.testing.assert_array_equal(images, bunch.images)
    np.testing.assert_array_equal(labels, bunch.target)
    assert images.dtype == bunch.images.dtype and labels.dtype == np.int64
    # A training process of a digits cell does not pay for scikit-learn's import (~1.4 CPU s).
    code = "import sys; from models.datasets import load; load('digits'); print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["False"], out.stdout + out.stderr


def test_registry_names_and_unknown_name():
    assert list(DATASETS) == ["digits", "mnist", "fashion_mnist", "cifar10"]
    with pytest.raises(ValueError, match=r"unknown dataset 'svhn'; valid datasets: digits, mnist, fashion_mnist, "
                                         r"cifar10"):
        load("svhn", "/tmp")


def test_file_datasets_need_a_data_dir():
    with pytest.raises(ValueError, match="pass data_dir"):
        load("mnist", None)
