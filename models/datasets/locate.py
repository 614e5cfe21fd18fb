"""Finding a dataset's files: the first search folder that holds all of them, gzip or uncompressed."""

from models.datasets.errors import MissingDatasetError


def _present(folder, file_name):
    """The path of `file_name` in `folder`, or of its uncompressed form for a .gz name; None if neither exists."""
    candidates = [folder / file_name]
    if file_name.endswith(".gz"):
        candidates.append(folder / file_name[: -len(".gz")])
    return next((path for path in candidates if path.is_file()), None)


def find_files(spec, data_dir):
    """role -> Path of every file of `spec`, all from one folder; MissingDatasetError says what was looked for where."""
    folders = spec.search_dirs(data_dir)
    for folder in folders:
        found = {role: _present(folder, name) for role, name in spec.files.items()}
        if all(found.values()):
            return found
    first = folders[0]
    missing = [name for name in spec.files.values() if _present(first, name) is None]
    alternatives = ", ".join(f"{name} or {name[:-3]}" if name.endswith(".gz") else name for name in missing)
    raise MissingDatasetError(
        f"{spec.name}: missing {alternatives} in {first}; looked in {', '.join(str(f) for f in folders)}. "
        f"Get the files with: {spec.get_command(data_dir)}"
    )
