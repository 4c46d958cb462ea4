"""funcgrad.numpy: predicates (isclose, allclose, array_equal, ...) and dtype utilities (result_type,
promote_types, can_cast, isdtype, issubdtype, finfo, iinfo).
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer
from funcgrad import lax
from funcgrad.numpy import _elementwise as _E
from funcgrad.numpy._base import arr, promote, promote_inexact
from funcgrad.numpy._reductions import all
from funcgrad.numpy._math import _is_value
from funcgrad.typing import ArrayLike, DTypeLike

__all__ = [
    "allclose", "isclose", "array_equal", "array_equiv", "isscalar", "iterable", "can_cast", "isdtype",
    "issubdtype", "promote_types", "result_type", "finfo", "iinfo",
]


# ------------------------------------------------------------------ predicates


def isclose(a: ArrayLike, b: ArrayLike, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Array:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (infinities equal only to themselves; NaNs
    equal with ``equal_nan``), computed in ``a`` and ``b``'s float dtype.

    >>> fnp.isclose(fnp.array([1.0, 2.0]), fnp.array([1.0 + 1e-9, 2.1]))   # [True, False]
    Array([ True, False], dtype=bool)
    """
    a, b = promote(a, b)
    a, b = promote_inexact(a, b)
    a, b = arr(a), arr(b)
    dtype = _dtypes.result_type(a, b)
    rtol = lax.convert_element_type(arr(rtol) if _is_value(rtol) else arr(np.asarray(rtol)), dtype)
    atol = lax.convert_element_type(arr(atol) if _is_value(atol) else arr(np.asarray(atol)), dtype)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = _E.logical_or(lax.eq(a, b), _E.logical_and(lax.is_finite(b), in_range))
    if equal_nan:
        out = _E.logical_or(out, _E.logical_and(lax.isnan(a), lax.isnan(b)))
    return out


def allclose(a: ArrayLike, b: ArrayLike, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Array:
    """True (a 0-d bool array) where :func:`isclose` holds everywhere.

    >>> fnp.allclose(fnp.array([1.0, 2.0]), fnp.array([1.0, 2.0 + 1e-7]))   # True
    Array(True, dtype=bool)
    """
    return all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Array:
    """True (a 0-d bool array) where the arrays have the same shape and elements (NaNs equal
    with ``equal_nan``); False for different shapes.

    >>> fnp.array_equal(fnp.array([1, 2]), fnp.array([1, 2]))      # True
    Array(True, dtype=bool)
    """
    a1, a2 = arr(a1), arr(a2)
    if a1.shape != a2.shape:
        return arr(np.asarray(False))
    eq = _E.equal(a1, a2)
    if equal_nan and _dtypes.kind(_dtypes.result_type(a1, a2)) == "f":
        eq = _E.logical_or(eq, _E.logical_and(_E.isnan(a1), _E.isnan(a2)))
    return all(eq)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Array:
    """True (a 0-d bool array) where the arrays are equal after broadcasting; False where their
    shapes do not broadcast.

    >>> fnp.array_equiv(fnp.array([1, 2]), fnp.array([[1, 2], [1, 2]]))   # True
    Array(True, dtype=bool)
    """
    a1, a2 = arr(a1), arr(a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return arr(np.asarray(False))
    return all(_E.equal(a1, a2))


def isscalar(element: Any) -> bool:
    """True for Python/numpy scalars and for 0-d arrays (unlike numpy, as JAX: a 0-d funcgrad array
    is a scalar); False for lists, None and arrays with axes.

    >>> fnp.isscalar(1.0), fnp.isscalar(fnp.array(1.0)), fnp.isscalar([1])   # True, True, False
    (True, True, False)
    """
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, Array, Tracer)):
        return element.ndim == 0
    return False


def iterable(y: Any) -> bool:
    """True where ``iter(y)`` works (numpy's ``iterable``; a 0-d array is not iterable).

    >>> fnp.iterable([1, 2]), fnp.iterable(3.0)    # True, False
    (True, False)
    """
    if isinstance(y, (Array, Tracer)):
        return y.ndim > 0
    return bool(np.iterable(y))


# ------------------------------------------------------------------ dtype utilities


def _as_dtype(name: str, x: Any) -> Any:
    """A dtype, Python scalar (weakly typed) or array's dtype for the promotion functions."""
    if isinstance(x, (bool, int, float)):
        return x
    if x is bool or x is int or x is float:
        return {bool: False, int: 0, float: 0.0}[x]
    return _dtype_arg(name, x, "a dtype, array or scalar")


def result_type(*args: Any) -> np.dtype:
    """The dtype funcgrad's arithmetic gives these arrays, dtypes and scalars (Python scalars and the
    types ``int``/``float`` are weakly typed; the result is canonical: 32-bit without x64).

    funcgrad promotes as numpy 2 (NEP 50) on array dtypes: ``int32`` with ``float16`` is
    ``float32`` here (``float64`` narrowed), ``float16`` in JAX.

    >>> fnp.result_type(fnp.ones(2, fnp.int8), 1.0)     # float32
    dtype('float32')
    """
    if not args:
        raise ValueError("result_type: at least one array or dtype is required")
    items = [_as_dtype("result_type", a) for a in args]
    if builtins.all(isinstance(i, (bool, int, float)) for i in items):
        return _dtypes.result_type(*items)
    return _dtypes.canonicalize(_promote(items))


def _promote(items: list) -> np.dtype:
    """numpy's promotion of dtypes and weak Python scalars, with JAX's rule for bfloat16 (numpy has none)."""
    if builtins.any(isinstance(i, np.dtype) and i == _dtypes.bfloat16 for i in items):
        return _dtypes._promote_bfloat16(items)
    return np.result_type(*items)


def promote_types(a: Any, b: Any) -> np.dtype:
    """The dtype two dtypes promote to (numpy's lattice, not narrowed to 32 bits: as
    ``jnp.promote_types``, this does not canonicalise).

    >>> fnp.promote_types(fnp.int8, fnp.float32)      # float32
    dtype('float32')
    """
    return _promote([_dtype_arg("promote_types", a), _dtype_arg("promote_types", b)])


def _dtype_arg(name: str, x: Any, what: str = "a dtype") -> np.dtype:
    """The dtype of ``x`` (a dtype, or an array's dtype); else a TypeError saying ``x`` is not ``what``."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and not isinstance(x, type):
        return np.dtype(dtype)
    try:
        return np.dtype(x)
    except TypeError:
        raise TypeError(f"{name}: {x!r} is not {what}") from None


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """Whether ``from_`` (a dtype or an array's dtype) casts to ``to`` under numpy's ``casting`` rule.

    >>> fnp.can_cast(fnp.int8, fnp.int32), fnp.can_cast(fnp.float32, fnp.int32)   # True, False
    (True, False)
    """
    return bool(np.can_cast(_dtype_arg("can_cast", from_), _dtype_arg("can_cast", to), casting))


def isdtype(dtype: DTypeLike, kind: Any) -> bool:
    """Whether ``dtype`` is of ``kind`` (the array API's ``isdtype``): a dtype, or one of ``"bool"``,
    ``"signed integer"``, ``"unsigned integer"``, ``"integral"``, ``"real floating"``,
    ``"complex floating"``, ``"numeric"``, or a tuple of these.

    >>> fnp.isdtype(fnp.float32, "real floating")     # True
    True
    """
    kinds = kind if isinstance(kind, tuple) else (kind,)
    kinds = tuple(k if isinstance(k, str) else _dtype_arg("isdtype", k) for k in kinds)
    dtype = _dtype_arg("isdtype", dtype)
    if dtype == _dtypes.bfloat16:   # a real floating dtype (numpy's isdtype refuses it): float32's kinds
        return builtins.any(k == dtype if isinstance(k, np.dtype) else np.isdtype(np.dtype(np.float32), k)
                            for k in kinds)
    return bool(np.isdtype(dtype, kinds))


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """numpy's ``issubdtype``: whether ``arg1`` is ``arg2`` or below it in the type hierarchy
    (``fnp.floating``-style abstract types from numpy work).

    >>> fnp.issubdtype(fnp.float32, np.floating)      # True
    True
    """
    if _is_bfloat16(arg1):   # below floating in JAX's hierarchy (numpy files it under generic)
        return _is_bfloat16(arg2) or (isinstance(arg2, type) and issubclass(np.floating, arg2))
    return bool(np.issubdtype(arg1, arg2))


def _is_bfloat16(x: Any) -> bool:
    if x is _dtypes.bfloat16.type:
        return True
    if isinstance(x, type):
        return False
    try:
        return np.dtype(getattr(x, "dtype", x)) == _dtypes.bfloat16
    except TypeError:
        return False


def finfo(dtype: DTypeLike) -> np.finfo:
    """Machine limits of a float dtype (numpy's ``finfo``; an array stands for its dtype).

    >>> fnp.finfo(fnp.float32).eps
    np.float32(1.1920929e-07)
    """
    return _dtypes.finfo(_dtype_arg("finfo", dtype))


def iinfo(int_type: Any) -> np.iinfo:
    """Machine limits of an integer dtype (numpy's ``iinfo``; an array stands for its dtype).

    >>> fnp.iinfo(fnp.int8).max
    127
    """
    return np.iinfo(_dtype_arg("iinfo", int_type))
