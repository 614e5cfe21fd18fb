"""`python -m orchestrator.cluster.pbs <folder>`: the PBS job's entry point under its older name.

PBS jobs queued before the PBS plugin moved to orchestrator.schedulers.pbs still run this command when they start;
it does what `python -m orchestrator.schedulers.pbs` does, so no queued cell fails for the move.
"""
from submitit.core.submission import submitit_main

from orchestrator.schedulers.pbs.__main__ import register_plugins

if __name__ == "__main__":
    register_plugins()
    submitit_main()
