"""`python -m orchestrator.tracking_import`: the older name of `python -m orchestrator.tracking.importer` (import the
cells' pending tracking records into the MLflow store), for scripts and crontabs written before the packages."""
import sys

from orchestrator.tracking.importer import main

if __name__ == "__main__":
    sys.exit(main())
