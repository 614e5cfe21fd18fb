"""Training batches whose order depends only on (seed, epoch), so a resumed run sees exactly the same batches.

An epoch visits the training set in the permutation drawn by numpy.random.default_rng([seed, epoch]); step k takes
the k-th run of batch_size indices. The last partial batch is dropped: every step has the same batch shape (one
traced graph, comparable step times), and because every epoch draws a new permutation no example is left out for
more than an epoch at a time. A batch's augmentation is drawn from default_rng([seed, epoch, step]), so it does not
depend on which steps ran before it in this process.
"""

import numpy as np

from models.datasets.registry import DATASETS


def _check_non_negative_int(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return int(value)


def steps_per_epoch(dataset, batch_size):
    """Full batches in one epoch of dataset's training set (the last partial batch is dropped)."""
    batch_size = _check_non_negative_int(batch_size, "batch_size")
    n = len(dataset.x_train)
    if not 0 < batch_size <= n:
        raise ValueError(f"batch_size must be between 1 and the {n} training examples of {dataset.name}, "
                         f"got {batch_size}")
    return n // batch_size


def epoch_order(num_examples, seed, epoch):
    """The permutation of training example indices for `epoch` of a run seeded with `seed`."""
    rng = np.random.default_rng([_check_non_negative_int(seed, "seed"), _check_non_negative_int(epoch, "epoch")])
    return rng.permutation(num_examples)


def batches(dataset, batch_size, seed, epoch, start_step=0, augment=False):
    """Iterator of (step, x [batch_size, h, w, c] float32, y [batch_size] int64) for steps start_step.. of `epoch`.

    augment=True applies the dataset's usual augmentation (cifar10: pad-4 random crop and horizontal flip).
    """
    steps = steps_per_epoch(dataset, batch_size)
    start_step = _check_non_negative_int(start_step, "start_step")
    if start_step > steps:
        raise ValueError(f"start_step {start_step} is past the {steps} steps of an epoch of {dataset.name} "
                         f"with batch_size {batch_size}")
    augmentation = None
    if augment:
        spec = DATASETS.get(dataset.name)
        augmentation = spec.augmentation if spec else None
        if augmentation is None:
            usual = [name for name, s in DATASETS.items() if s.augmentation is not None]
            raise ValueError(f"augment=True but {dataset.name} has no usual augmentation; datasets with one: "
                             f"{', '.join(usual)}")
    order = epoch_order(len(dataset.x_train), seed, epoch)
    return _iterate(dataset, batch_size, seed, epoch, start_step, steps, order, augmentation)


def _iterate(dataset, batch_size, seed, epoch, start_step, steps, order, augmentation):
    for step in range(start_step, steps):
        indices = order[step * batch_size:(step + 1) * batch_size]
        x, y = dataset.x_train[indices], dataset.y_train[indices]
        if augmentation is not None:
            x = augmentation(x, np.random.default_rng([int(seed), int(epoch), step]))
        yield step, x, y
