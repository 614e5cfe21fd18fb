"""Command line: download a dataset into a data directory and verify it (run on a login node with internet).

    python -m models.download --dataset mnist --data-dir DIR [--mirror URL ...]
"""

import argparse
import sys

from models.datasets import DATASETS, DatasetError, download


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m models.download", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, choices=list(DATASETS), help="which dataset")
    parser.add_argument("--data-dir", required=True, help="the data directory that training reads (data_dir)")
    parser.add_argument("--mirror", action="append", default=None, metavar="URL",
                        help="base URL to fetch the files from instead of the public mirrors (repeatable)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        download(args.dataset, args.data_dir, mirrors=args.mirror)
    except DatasetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
