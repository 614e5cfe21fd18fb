"""load(): a dataset by name, from a data directory."""

from models.datasets.registry import get_spec


def load(name, data_dir=None):
    """Dataset `name` (a key of DATASETS) read from data_dir; digits needs no data_dir.

    Raises ValueError for an unknown name, MissingDatasetError / CorruptDatasetError naming the file, the folders
    searched and the command that gets a good copy.
    """
    spec = get_spec(name)
    if spec.files and data_dir is None:
        raise ValueError(f"{name} is read from files: pass data_dir, the folder holding {spec.subdirs[0]}/")
    return spec.loader(spec, data_dir)
