"""The errors of dataset loading and downloading: each says which file, where, and how to get a good copy."""


class DatasetError(Exception):
    """A dataset could not be loaded or downloaded."""


class MissingDatasetError(DatasetError, FileNotFoundError):
    """A dataset file is not where the loader looked."""


class CorruptDatasetError(DatasetError, ValueError):
    """A dataset file exists but is truncated, corrupt, or not the file its name says."""


class ChecksumError(CorruptDatasetError):
    """A file's MD5 differs from the published one."""

    def __init__(self, path, expected, actual, hint=""):
        self.path, self.expected, self.actual = path, expected, actual
        super().__init__(f"{path}: MD5 {actual}, expected {expected}: the file is corrupt or not the published "
                         f"one{'; ' + hint if hint else ''}")


class DownloadError(DatasetError):
    """No mirror gave a file with the published checksum."""
