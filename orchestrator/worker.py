"""`python -m orchestrator.worker CELL_DIR`: the older name of `python -m orchestrator.cell.worker`, which a job
still running the code from before the packages starts for its cell's training process (and for each retry)."""
import sys

from orchestrator.cell.worker import main

if __name__ == "__main__":
    sys.exit(main())
