"""`python -m ops.torch_build`: the older name of `python -m ops.build --torch` (ops/build/torch_library.py)."""

import sys

from ops.build.torch_library import main

if __name__ == "__main__":
    sys.exit(main())
