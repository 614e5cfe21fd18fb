"""`python -m ops.describe MODE`: a multiplier's error statistics and error map (ops/modes/describe.py's command)."""

import sys

from ops.modes.describe import main

if __name__ == "__main__":
    sys.exit(main())
