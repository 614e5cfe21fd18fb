"""Older name of orchestrator.sweep.callbacks, kept for the jobs of grids launched before the packages: submitit's
pickle of such a job (a queued job, a Slurm requeue, a PBS continuation, the resume cron's saved call) names the
sweep callbacks by this module, and loading it must find them here."""
from orchestrator.sweep.callbacks import SweepCallbacks  # noqa: F401 - the name old pickles hold
