"""Elementwise select (``where(c, x, y)``) on the CPU for large arrays.

numpy's ``np.where`` takes a slow generic path for float arrays under a
random mask: measured on the 2-core CI-like machine, 128x512 float32 with a
random bool mask, ``np.where(c, x, y)`` 490 us, these loops 103 us (two
arrays) and 18 us (an array and a scalar, which vectorises). A ReLU's
backward pass and every masked ``fnp.where`` go through here.

``select_into(out, c, x, y)`` writes ``out[i] = x[i] if c[i] else y[i]``
over flat C-contiguous arrays of one size; ``x`` or ``y`` may be a scalar of
``out``'s dtype.  The caller (select's CPU implementation in ``impls.py``)
decides when the fast path applies and falls back to ``np.where`` otherwise.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["select_into", "MIN_SIZE"]

# Below this many elements np.where's fixed cost wins (and nothing compiles).
MIN_SIZE = 4096


@numba.njit(cache=True, nogil=True)
def _select_aa(c, x, y, out):
    for i in range(out.shape[0]):
        out[i] = x[i] if c[i] else y[i]


@numba.njit(cache=True, nogil=True)
def _select_as(c, x, y, out):
    for i in range(out.shape[0]):
        out[i] = x[i] if c[i] else y


@numba.njit(cache=True, nogil=True)
def _select_sa(c, x, y, out):
    for i in range(out.shape[0]):
        out[i] = x if c[i] else y[i]


def select_into(out: np.ndarray, c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``out[...] = where(c, x, y)``; arrays flat and contiguous, a 0-d ``x`` or ``y`` is a scalar."""
    flat = out.reshape(-1)
    if x.ndim and y.ndim:
        _select_aa(c.reshape(-1), x.reshape(-1), y.reshape(-1), flat)
    elif x.ndim:
        _select_as(c.reshape(-1), x.reshape(-1), y[()], flat)
    else:
        _select_sa(c.reshape(-1), x[()], y.reshape(-1), flat)
    return out
