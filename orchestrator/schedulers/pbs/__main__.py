"""The entry point of a PBS job: `python -m orchestrator.schedulers.pbs <folder>` runs submitit's job runner.

It makes sure submitit knows the PBS job environment even where the project is used from a checkout that was not
pip-installed (then the "submitit" entry points of pyproject.toml are not registered).
"""
from submitit.core import plugins
from submitit.core.submission import submitit_main

from orchestrator.schedulers.pbs.job_environment import PBSJobEnvironment
from orchestrator.schedulers.pbs.executor import PBSExecutor


def register_plugins() -> None:
    """Register the PBS executor and job environment with submitit unless its entry points already did."""
    if "pbs" in plugins.get_job_environments():
        return
    executors, environments = plugins._get_plugins()  # pylint: disable=protected-access
    executors.append(PBSExecutor)
    environments.append(PBSJobEnvironment())
    plugins.get_executors.cache_clear()
    plugins.get_job_environments.cache_clear()


if __name__ == "__main__":
    register_plugins()
    submitit_main()
