"""Bootstrap: make the project's dependencies importable, creating the repository's .venv on first use.

`python3 launch.py` and `bash tests/run.sh` must work on a fresh machine with nothing but Python 3.10-3.12, so this
module uses the standard library only. When the dependencies are missing it creates `<repo>/.venv`, installs the
project into it (`pip install -e .[extras]`), and re-executes the current command with the venv's interpreter.
A stamp holding the hash of pyproject.toml makes a changed dependency list reinstall; a file lock makes a job array
that starts at once install exactly once.

    python3 -m orchestrator.environment [--extras test]     set up (or update) the venv and exit
    python3 -m orchestrator.environment --engine torch --gpu  ... with what the engine needs on a GPU node

GPU installs: engine=tensorflow on a GPU takes the `gpu` extra (tensorflow[and-cuda]: its CUDA 12 libraries as
wheels), engine=torch the `torch` extra (PyPI's Linux torch is a CUDA build). launch.py adds them by itself for the
engines its command line names where this machine has an NVIDIA driver (a GPU node), unless they are importable
already; on a login node without GPUs, say --gpu (the jobs on GPU nodes use the same .venv).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
# Hydra loads launchers only from the `hydra_plugins` namespace package; the project's lives under orchestrator/
# (the repository's top level holds only the project's own folders) and this folder goes on sys.path.
HYDRA_PLUGIN_ROOT = REPO / "orchestrator" / "cluster" / "plugin_root"
# Imported by every part of the project; if one is missing the environment is not set up.
REQUIRED_MODULES = ("tensorflow", "keras", "hydra", "submitit", "mlflow", "sklearn", "filelock", "tqdm")
# A module each engine-chosen extra installs: where it is importable, launch.py installs nothing more.
EXTRA_MODULES = {"gpu": "nvidia.cudnn", "torch": "torch"}
ENGINE_NAMES = ("tensorflow", "torch")   # models/engines.py's ENGINES, which this standard-library module cannot import
DRIVER_FILE = "/proc/driver/nvidia/version"


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA kernel driver loaded (the only way CUDA can find a GPU)."""
    return Path(DRIVER_FILE).exists() or Path("/dev/nvidia0").exists()


def engine_extras(engines: tuple[str, ...] = ("tensorflow",), gpu: bool | None = None) -> tuple[str, ...]:
    """The extras the cells of `engines` need: torch for the torch engine; on a GPU (gpu=None: where this machine has
    an NVIDIA driver) gpu for TensorFlow, whose plain wheel lacks the CUDA libraries."""
    gpu = nvidia_driver_present() if gpu is None else gpu
    return (("gpu",) if gpu and "tensorflow" in engines else ()) + (("torch",) if "torch" in engines else ())


def launch_extras(argv: list[str]) -> tuple[str, ...]:
    """The engine extras for a launch.py command line (its engine=... overrides; tensorflow if none) on this machine,
    less those whose module is importable here already."""
    engines = tuple(name for arg in argv if arg.startswith("engine=") for name in arg[7:].split(",")) or ("tensorflow",)
    return tuple(e for e in engine_extras(engines) if not importable(EXTRA_MODULES[e]))


def importable(name: str) -> bool:
    """Whether module `name` (dotted) can be imported here, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # its parent package is missing
        return False


def _venv_python() -> Path:
    return VENV / "bin" / "python"


def _wanted_stamp(extras: tuple[str, ...]) -> str:
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    return f"{digest} {','.join(sorted(extras))}"


def _stamp_path() -> Path:
    return VENV / ".amdnn-installed"


def _installed(extras: tuple[str, ...]) -> bool:
    stamp = _stamp_path()
    if not stamp.exists():
        return False
    have = stamp.read_text().split(" ", 1)
    want = _wanted_stamp(extras).split(" ", 1)
    # The same pyproject and a superset of the wanted extras is enough.
    have_extras = set(have[1].split(",")) if len(have) > 1 and have[1] else set()
    return have[0] == want[0] and set(extras) <= have_extras


def _running_in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def _modulesimportable() -> bool:
    return all(importable(name) for name in REQUIRED_MODULES)


def _site_packages() -> str:
    return subprocess.run([str(_venv_python()), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def install(extras: tuple[str, ...] = ()) -> None:
    """Create the venv if needed and install the project into it (once, under a lock)."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    lock_path = REPO / ".venv.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed(extras):
            return
        if not _venv_python().exists():
            print(f"amdnn: creating {VENV} (first run on this machine)", file=sys.stderr, flush=True)
            venv.EnvBuilder(with_pip=True).create(VENV)
        spec = f"{REPO}[{','.join(extras)}]" if extras else str(REPO)
        print(f"amdnn: installing the project and its dependencies into {VENV} (a few minutes, once)",
              file=sys.stderr, flush=True)
        # --no-compile, then compileall on every core: pip byte-compiles the ~18,000 modules one at a time (91 CPU s),
        # and a venv without .pyc files would compile them on every import where PYTHONDONTWRITEBYTECODE is set.
        result = subprocess.run([str(_venv_python()), "-m", "pip", "install", "--quiet", "--no-compile", "-e", spec])
        if result.returncode != 0:
            raise SystemExit(
                f"amdnn: installing the dependencies into {VENV} failed (pip exit {result.returncode}); "
                "see pip's message above. Delete the .venv folder to start over.")
        # -qq and the exit status unread: as pip's own compile step, files that are not Python 3 (templates, test
        # data of some packages) are skipped without a word.
        subprocess.run([str(_venv_python()), "-m", "compileall", "-qq", "-j", "0", _site_packages()])
        _stamp_path().write_text(_wanted_stamp(extras))


def add_hydra_plugins() -> None:
    """Make the project's Hydra launchers (cluster=slurm|pbs|gadi) findable in the hydra_plugins namespace."""
    if str(HYDRA_PLUGIN_ROOT) not in sys.path:
        sys.path.append(str(HYDRA_PLUGIN_ROOT))


def ensure_environment(extras: tuple[str, ...] = ()) -> None:
    """Return if the dependencies are importable; otherwise set up the venv and re-run this command in it."""
    add_hydra_plugins()
    if _running_in_venv():
        if not _installed(extras):
            install(extras)
        return
    if _modulesimportable() and not VENV.exists():
        return  # the user manages their own environment
    install(extras)
    python = str(_venv_python())
    os.execv(python, [python, *sys.orig_argv[1:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="", help="comma-separated optional dependency groups, e.g. test")
    parser.add_argument("--engine", default="tensorflow",
                        help=f"comma-separated engines the cells will train with ({', '.join(ENGINE_NAMES)})")
    parser.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None,
                        help="install what the engines need on a GPU (default: where this machine has an NVIDIA "
                             "driver); --gpu on a login node whose jobs run on GPU nodes")
    args = parser.parse_args()
    engines = tuple(e for e in args.engine.split(",") if e)
    if unknown := [e for e in engines if e not in ENGINE_NAMES]:
        parser.error(f"--engine {','.join(unknown)}: not one of {', '.join(ENGINE_NAMES)}")
    extras = tuple(e for e in args.extras.split(",") if e)
    install(extras + tuple(e for e in engine_extras(engines, args.gpu) if e not in extras))
    print(_venv_python())


if __name__ == "__main__":
    main()
