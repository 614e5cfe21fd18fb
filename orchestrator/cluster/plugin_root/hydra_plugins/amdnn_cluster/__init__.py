"""Hydra loads launcher plugins only from the `hydra_plugins` namespace (orchestrator.environment puts
orchestrator/cluster/plugin_root on sys.path; job scripts name it in PYTHONPATH): these names are what
conf/hydra/launcher/amdnn_{slurm,pbs,local}.yaml target. The code lives in orchestrator/cluster/launcher.py and
orchestrator/sweep/local_launcher.py."""
from orchestrator.cluster import launcher
from orchestrator.sweep import local_launcher


class SlurmLauncher(launcher.SlurmLauncher):
    """cluster=slurm: one Slurm job array per sweep, through submitit; returns once submitted."""


class PBSLauncher(launcher.PBSLauncher):
    """cluster=pbs and cluster=gadi: one PBS job per cell, through the PBS submitit plugin; returns once submitted."""


class LocalLauncher(local_launcher.LocalLauncher):
    """cluster=local: the cells side by side on this machine's GPUs, one after another without a GPU."""
