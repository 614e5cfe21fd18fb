"""What every test folder shares: real MNIST found through the project's own download command, and test IDs that
name table files without the machine's paths.

Real MNIST (tests/data/README.md says the same for users): the repository's default data directory `data/` (what
`data_dir: null` means) is filled by `models.datasets.download`, which keeps files already there with their published
MD5s and otherwise fetches them, MD5-checked, from $AMDNN_DATA_MIRROR when it is set (a folder or URL laid out like a
data directory: MIRROR/mnist/*.gz; .ci/run points it at the team's copy) or else from the public mirrors. When
neither works the MNIST tests fail (never skip) with the command that gets the files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ops  # noqa: F401 - before any test imports Keras: ops/lean_keras.py

MIRROR_VARIABLE = "AMDNN_DATA_MIRROR"


def _mirror_base(mirror: str, subdir: str) -> str:
    """The base URL of `subdir` in a mirror given as a folder or a URL (download() appends the file names)."""
    if "://" in mirror:
        return f"{mirror.rstrip('/')}/{subdir}/"
    return (Path(mirror).expanduser().resolve() / subdir).as_uri() + "/"


@pytest.fixture(scope="session")
def mnist_data_dir() -> Path:
    """The data directory whose mnist/ holds the four published MNIST files, MD5-verified."""
    from models.datasets import DatasetError, download
    from models.datasets.registry import get_spec
    from orchestrator.common import paths

    data_dir = paths.data_dir(None)
    spec = get_spec("mnist")
    mirror = os.environ.get(MIRROR_VARIABLE)
    mirrors = [_mirror_base(mirror, spec.subdirs[0])] if mirror else None
    try:
        download("mnist", data_dir, mirrors=mirrors)
        return data_dir
    except DatasetError as error:
        failure = str(error)
    folder = data_dir / spec.subdirs[0]
    source = f"{MIRROR_VARIABLE}={mirror}" if mirror else f"the public mirrors ({MIRROR_VARIABLE} is not set)"
    pytest.fail(f"real MNIST is not in {folder} and could not be had from {source}:\n{failure}\nGet it by one of:\n"
                f"  {spec.get_command(data_dir)}\n"
                f"  copying {', '.join(spec.downloads)} into {folder}\n"
                f"  setting {MIRROR_VARIABLE} to a folder that holds {spec.subdirs[0]}/ with those files",
                pytrace=False)


@pytest.fixture(scope="session")
def mnist_dir(mnist_data_dir: Path) -> Path:
    """The folder of the four MNIST files."""
    return mnist_data_dir / "mnist"


# Folders whose tests share one session-scoped thing that must exist once: the private Slurm (its configuration and
# state under one path, tests/cluster/slurm_cluster.py) and the dashboard's finished grid.
ONE_WORKER_FOLDERS = ("cluster", "dashboard")


def work_unit(nodeid: str) -> str:
    """What one pytest-xdist worker takes whole (tests/run.sh runs two): a folder of ONE_WORKER_FOLDERS, else a test
    file (its module-scoped fixtures, such as test_gpu_build.py's CUDA library, built once; the tests of a file that
    share a store or the repository's default paths run in their order)."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 and parts[1] in ONE_WORKER_FOLDERS else path


def pytest_xdist_make_scheduler(config, log):
    """Units of work_unit(), one at a time as a worker runs dry, in the order the workers collected them
    (pytest_collection_modifyitems): xdist's file scheduler with a wider unit. (Its `--dist loadgroup` marks would
    say the same, but pytest-xdist 3.8 writes a group into `item._nodeid`, which pytest 9.2 no longer reads: the marks
    are silently ignored.)"""
    from xdist.scheduler import LoadScopeScheduling

    class FolderOrFileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # the collection's order is already the one wanted
    return FolderOrFileScheduling(config, log)


def pytest_collection_modifyitems(config, items):  # noqa: ARG001 - pytest's hook signature
    """On xdist's workers: the units that hold a test marked slow first, then the others, each group by its number of
    tests, most first; a unit's tests keep their order. The longest units start first so that the two workers end
    together: ordered by test count alone, LeNet-5's 2-minute MNIST test (one test) ran last, with one core idle for
    most of the run's last 4 minutes."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(work_unit(item.nodeid), []).append(item)
    slow = lambda unit: any(item.get_closest_marker("slow") for item in unit)  # noqa: E731
    items[:] = [item for unit in sorted(units.values(), key=lambda unit: (not slow(unit), -len(unit)))
                for item in unit]


def pytest_make_parametrize_id(config, val, argname):  # noqa: ARG001 - pytest's hook signature
    """A table mode "lut:/some/path/MBM_7.bin" is named "lut:MBM_7.bin" in test IDs: IDs must not depend on where
    the repository lies (they name tests in reports, `-k` selections and caches across machines)."""
    from ops.modes.multipliers import LUT_PREFIX

    if isinstance(val, str) and val.startswith(LUT_PREFIX) and os.sep in val:
        return LUT_PREFIX + Path(val[len(LUT_PREFIX):]).name
    return None
