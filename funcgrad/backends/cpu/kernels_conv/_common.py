"""What the convolution and pooling modules share: the numba options and small array helpers.

Geometry arguments are trusted throughout this package: the conv2d and pooling primitives in
funcgrad.primitives.conv validate them, once, before any kernel runs.
"""

from __future__ import annotations

import numpy as np

_JIT = dict(parallel=True, cache=True, nogil=True, error_model="numpy")
_SERIAL = dict(cache=True, nogil=True, error_model="numpy")


def _two(v) -> tuple[int, int]:
    """An int or an (h, w) pair as (int, int)."""
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else (int(v[0]), int(v[1]))


def _output(out, shape, dtype) -> np.ndarray:
    """``out`` when it can take the result (shape, dtype, C order), else a new array."""
    if (out is not None and out.shape == tuple(shape) and out.dtype == dtype
            and out.flags.c_contiguous and out.flags.writeable):
        return out
    return np.empty(shape, dtype)


def _ascontig(a):
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)

