"""funcgrad.dtypes: the dtypes funcgrad stores, in the spirit of ``jax.dtypes``.

funcgrad holds bool, integer, bfloat16, float16/32/64 and complex values.  Without x64
(``fg.config.update("enable_x64", True)``) every 64-bit dtype is stored as
its 32-bit one, and the defaults for Python floats and ints are float32 and
int32; with x64 they are float64 and int64.

>>> import funcgrad.numpy as fnp
>>> from funcgrad import dtypes
>>> dtypes.canonicalize_dtype("float64")        # without x64
dtype('float32')
>>> dtypes.default_float_dtype()
dtype('float32')
>>> dtypes.result_type(fnp.ones(2, "float16"), 2.0)   # Python scalars are weakly typed
dtype('float16')
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import ShapedArray, bfloat16, finfo, is_float, is_inexact, kind

__all__ = ["bfloat16", "canonicalize_dtype", "default_float_dtype", "default_int_dtype", "finfo", "is_float",
           "is_inexact", "issubdtype", "kind", "result_type"]


_WEAK = {bool: False, int: 0, float: 0.0, complex: 0j}


def result_type(*args: Any) -> np.dtype:
    """The promoted dtype of arrays, dtypes and Python scalars (weakly typed, as are the types ``int``,
    ``float``, ``complex``), canonicalised; bfloat16 promotes as in JAX.

    >>> from funcgrad import dtypes
    >>> dtypes.result_type(dtypes.bfloat16, np.float16)    # float32
    dtype('float32')
    """
    if not args:
        raise ValueError("result_type: at least one array, dtype or scalar is required")
    return _dtypes.result_type(*[_operand(a) for a in args])


def _operand(a: Any) -> Any:
    if isinstance(a, (bool, int, float, complex)) or (hasattr(a, "dtype") and not isinstance(a, type)):
        return a
    if a in _WEAK:
        return _WEAK[a]
    return ShapedArray((), np.dtype(a))


def issubdtype(dtype: Any, category: Any) -> bool:
    """numpy's ``issubdtype`` with bfloat16 a floating type, as ``jax.dtypes.issubdtype``.

    >>> from funcgrad import dtypes
    >>> dtypes.issubdtype(dtypes.bfloat16, np.floating), np.issubdtype(dtypes.bfloat16, np.floating)
    (True, False)
    """
    if np.dtype(dtype) == bfloat16 and category in (np.floating, np.inexact, np.number, np.generic):
        return True
    return bool(np.issubdtype(dtype, category))


def canonicalize_dtype(dtype: Any) -> np.dtype:
    """The dtype funcgrad stores for ``dtype`` under the current x64 setting.

    Raises TypeError for dtypes funcgrad arrays cannot hold (strings, objects, datetimes).
    """
    return _dtypes.canonicalize(dtype)


def default_float_dtype() -> np.dtype:
    """The dtype of Python floats and float results of integer inputs: float32 (float64 with x64).

    >>> from funcgrad import testing
    >>> testing.default_float_dtype()      # float64 with x64 enabled
    dtype('float32')
    """
    return _dtypes.float_


def default_int_dtype() -> np.dtype:
    """The dtype of Python ints: int32 (int64 with x64)."""
    return _dtypes.int_
