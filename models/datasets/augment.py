"""The usual CIFAR augmentation: zero-pad 4 pixels, crop back at a random offset, flip horizontally with p = 0.5.

Every random choice comes from the generator passed in, so a batch's augmentation is reproducible from the
(seed, epoch, step) that seeded it.
"""

import numpy as np

PAD = 4


def pad_crop_flip(x, rng, pad=PAD):
    """x [n, h, w, c] -> [n, h, w, c]: each image randomly cropped from its zero-padded copy, half of them mirrored."""
    n, height, width, _ = x.shape
    padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))  # [n, h + 2 pad, w + 2 pad, c]
    top = rng.integers(0, 2 * pad + 1, size=n)
    left = rng.integers(0, 2 * pad + 1, size=n)
    flip = rng.random(n) < 0.5
    rows = top[:, None] + np.arange(height)  # [n, h]
    cols = left[:, None] + np.arange(width)  # [n, w]
    cols = np.where(flip[:, None], cols[:, ::-1], cols)  # a mirrored image reads its columns backwards
    return padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
