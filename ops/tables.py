"""`python -m ops.tables from-c FILE.c`: an 8x8 multiplier's tables from its C model (ops/modes/table_command.py)."""

import sys

from ops.modes.table_command import main

if __name__ == "__main__":
    sys.exit(main())
