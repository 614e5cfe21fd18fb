"""Who may read what a grid writes: its user, and the project group where the user asks for it; never everyone.

Checkpoints, MLflow stores, tracking queues, logs and reports are created under the process's umask. The launcher
and every cell process set it from `share_with_group` (conf/config.yaml) before they create anything: 077 (the
user alone) by default, 027 (the group may read, not write) with share_with_group=true. A cluster job sets it again
at its start, since a scheduler may run the job under the site's umask (PBS Pro's default is 077, Slurm passes the
submitting shell's, often 022: readable by every user of the cluster). The launcher's own Hydra folder (outputs/,
multirun/) is made before the config is read, under 077, whatever share_with_group says.
"""
from __future__ import annotations

import os

USER_ONLY, GROUP_READS = 0o077, 0o027


def umask_for(share_with_group: bool) -> int:
    return GROUP_READS if share_with_group else USER_ONLY


def restrict(share_with_group: bool) -> None:
    """Set this process's umask for everything it (and its children) creates from now on."""
    os.umask(umask_for(bool(share_with_group)))
