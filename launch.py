"""AMDNN launcher: `python launch.py` trains one grid cell; `python launch.py -m model=...,... mult=...,...` a grid.

    python launch.py                                        LeNet-300-100 under am16 on digits, here, in about a minute
    python launch.py -m model=lenet300,lenet5 mult=native,am16       a local 2x2 sweep, then its results table
    python launch.py -m model=resnet18,resnet34 mult=am32,am16 dataset=cifar10 train=cifar cluster=gadi

Re-running any of these finishes what did not finish and trains nothing that did; Ctrl-C or SIGTERM stops the cells
at a checkpoint and prints where each stopped and that command (a second Ctrl-C kills them at once). Configuration:
conf/config.yaml. A cluster preset without -m submits its one cell as a sweep of one; nothing trains on the login
node. An invalid config is refused before anything runs, in one message, with exit status 2.
"""
import sys

from orchestrator.environment import ensure_environment, launch_extras

# Before any third-party import: a fresh machine gets its .venv here, a GPU node or engine=torch what it needs.
ensure_environment(launch_extras(sys.argv[1:]))

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from orchestrator.common import permissions  # noqa: E402
from orchestrator.common.interrupts import StoppedBySignal  # noqa: E402
from orchestrator.sweep.launching import check_command_line, launch_cell, resume_hint  # noqa: E402


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    return launch_cell(cfg)


if __name__ == "__main__":
    check_command_line(sys.argv[1:])  # an override of an unknown key is refused with the closest key, before composing
    permissions.restrict(share_with_group=False)  # before Hydra's folders; a sweep or a cell relaxes it if asked
    try:
        main()
    except StoppedBySignal:  # Ctrl-C or SIGTERM: each cell has said where it stopped; say how to go on
        print(resume_hint(), flush=True)
        raise
