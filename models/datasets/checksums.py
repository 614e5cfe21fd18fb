"""MD5 of files, as published for the standard dataset files, and its verification."""

import hashlib

from models.datasets.errors import ChecksumError

_CHUNK = 1 << 20


def md5_of(path):
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_md5(path, expected, hint=""):
    """Raise ChecksumError unless the file at `path` has MD5 `expected`."""
    actual = md5_of(path)
    if actual != expected.lower():
        raise ChecksumError(path, expected.lower(), actual, hint)
