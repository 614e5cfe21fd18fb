"""Batches: an epoch's order depends only on (seed, epoch), resuming mid-epoch gives the same tail, augmentation
is reproducible from (seed, epoch, step)."""

import numpy as np
import pytest

from models.datasets import Dataset, batches, load, steps_per_epoch
from models.datasets.augment import PAD

from tests.models.helpers import indexed_dataset, indices_of

N = 103


def epoch_indices(dataset, batch_size, seed, epoch, start_step=0):
    return [(step, indices_of(x, N).tolist(), y.tolist())
            for step, x, y in batches(dataset, batch_size, seed, epoch, start_step)]


def test_epoch_is_a_permutation_with_the_last_partial_batch_dropped():
    dataset = indexed_dataset(N)
    assert steps_per_epoch(dataset, 10) == 10
    epoch = epoch_indices(dataset, 10, seed=3, epoch=0)
    assert [step for step, _, _ in epoch] == list(range(10))
    seen = np.concatenate([indices for _, indices, _ in epoch])
    assert len(seen) == 100 and len(set(seen.tolist())) == 100 and seen.max() < N
    for _, indices, labels in epoch:
        assert labels == [i % 10 for i in indices]  # images and labels stay paired


def test_order_depends_only_on_seed_and_epoch():
    dataset = indexed_dataset(N)
    first = epoch_indices(dataset, 10, seed=3, epoch=2)
    assert epoch_indices(dataset, 10, seed=3, epoch=2) == first
    assert epoch_indices(dataset, 10, seed=3, epoch=3) != first
    assert epoch_indices(dataset, 10, seed=4, epoch=2) != first
    expected = np.random.default_rng([3, 2]).permutation(N)[:10].tolist()
    assert first[0][1] == expected


def test_resumed_epoch_is_the_tail_of_a_full_epoch():
    dataset = indexed_dataset(N)
    full = epoch_indices(dataset, 7, seed=11, epoch=5)
    for start in (0, 1, 6, len(full) - 1, len(full)):
        assert epoch_indices(dataset, 7, seed=11, epoch=5, start_step=start) == full[start:]


def test_invalid_arguments_are_refused():
    dataset = indexed_dataset(N)
    with pytest.raises(ValueError, match="batch_size must be between 1 and the 103"):
        batches(dataset, 104, 0, 0)
    with pytest.raises(ValueError, match="start_step 16 is past the 14 steps"):
        batches(dataset, 7, 0, 0, start_step=16)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        batches(dataset, 7, -1, 0)
    with pytest.raises(ValueError, match=r"digits has no usual augmentation; datasets with one: cifar10"):
        batches(load("digits"), 7, 0, 0, augment=True)


def _cifar_like(n=20, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 32, 32, 3), dtype=np.float32) + np.float32(0.01)  # no zeros: padding is recognisable
    y = rng.integers(0, 10, n).astype(np.int64)
    return Dataset(name="cifar10", x_train=x, y_train=y, x_test=x[:2], y_test=y[:2], num_classes=10,
                   input_shape=(32, 32, 3))


def _augmented(dataset, start_step=0, epoch=1):
    return [(step, x.copy(), y.copy()) for step, x, y in batches(dataset, 4, 9, epoch, start_step, augment=True)]


def test_augmentation_is_reproducible_from_seed_epoch_step():
    dataset = _cifar_like()
    full = _augmented(dataset)
    again = _augmented(dataset)
    resumed = _augmented(dataset, start_step=3)
    for (s1, x1, y1), (s2, x2, y2) in zip(full, again):
        np.testing.assert_array_equal(x1, x2)
    for (s1, x1, y1), (s2, x2, y2) in zip(full[3:], resumed):
        assert s1 == s2
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)
    other_epoch = _augmented(dataset, epoch=2)
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(full, other_epoch))


def test_augmentation_is_a_padded_crop_with_optional_flip():
    dataset = _cifar_like()
    plain = {step: x for step, x, _ in batches(dataset, 4, 9, 1)}
    flips, shifted = 0, 0
    for step, x, _ in _augmented(dataset):
        for original, augmented in zip(plain[step], x):
            padded = np.pad(original, ((PAD, PAD), (PAD, PAD), (0, 0)))
            matches = [(top, left, flip)
                       for top in range(2 * PAD + 1) for left in range(2 * PAD + 1) for flip in (False, True)
                       if np.array_equal(augmented, (padded[:, ::-1] if flip else padded)[top:top + 32,
                                                                                            left:left + 32])]
            assert matches, "an augmented image is not a crop of the padded image, mirrored or not"
            flips += matches[0][2]
            shifted += matches[0][:2] != (PAD, PAD)
    assert 0 < flips < 20 and shifted > 10
