"""The older module names kept for jobs, pickles and scripts from before orchestrator/ became packages resolve to
the objects and commands of the new ones (a queued job's pickle names orchestrator.callbacks.SweepCallbacks and
launch_cell by their old modules; old crontabs and running jobs start the old commands)."""
import importlib
import pickle
import subprocess
import sys

import pytest

from orchestrator.sweep import callbacks, launching

OLD_NAMES = [("orchestrator.callbacks", "SweepCallbacks", callbacks.SweepCallbacks),
             ("orchestrator.launching", "launch_cell", launching.launch_cell),
             ("orchestrator.launching", "check_command_line", launching.check_command_line)]


@pytest.mark.parametrize("module, name, new", OLD_NAMES)
def test_a_pickle_naming_the_old_module_loads_the_new_object(module, name, new):
    # protocol 0 by hand: a global reference (c module\nname\n.) as an old job's pickle holds it
    assert pickle.loads(f"c{module}\n{name}\n.".encode()) is new
    assert getattr(importlib.import_module(module), name) is new


@pytest.mark.parametrize("old, new", [("orchestrator.worker", "orchestrator.cell.worker"),
                                      ("orchestrator.tracking_import", "orchestrator.tracking.importer")])
def test_old_commands_call_the_new_main(old, new):
    assert importlib.import_module(old).main is importlib.import_module(new).main


@pytest.mark.parametrize("old, new", [("orchestrator.tracking_import", "orchestrator.tracking.importer"),
                                      ("orchestrator.cluster.pbs", "orchestrator.schedulers.pbs")])
def test_old_commands_run_the_new_ones(old, new):
    """Each old command's --help is the new command's (same arguments), not an import error."""
    def helped(module):
        out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("\n", 1)[1]  # past the usage line's program name

    assert helped(old) == helped(new)


def test_the_old_cell_module_names_still_import():
    """Scripts written against orchestrator/cell.py (before the package) import run_cell from orchestrator.cell."""
    from orchestrator.cell import CellResult, request_checkpoint, run_cell
    from orchestrator.cell.run import CellResult as NewCellResult, run_cell as new_run_cell

    assert run_cell is new_run_cell and CellResult is NewCellResult and callable(request_checkpoint)
