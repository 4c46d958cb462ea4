"""Complex-number functions of ``funcgrad.numpy``: real, imag, conj, angle and the complex tests.

Derivatives follow JAX's convention (a vjp is the transpose of the jvp, not
its adjoint): ``grad(lambda z: fnp.real(z))(z)`` is ``1``,
``grad(lambda z: fnp.imag(z))(z)`` is ``-1j``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes, lax
from funcgrad._core import Array, Tracer
from funcgrad.numpy._base import arr, promote_inexact
from funcgrad.typing import ArrayLike

__all__ = ["real", "imag", "conj", "conjugate", "angle", "iscomplex", "iscomplexobj", "isreal", "isrealobj",
           "sort_complex", "complex64", "complex128"]

complex64, complex128 = np.complex64, np.complex128


def _is_complex(x: Any) -> bool:
    return x.dtype.kind == "c"


def real(val: Any) -> Any:
    """The real part, elementwise (a real array is returned as it is).

    ``c64`` -> ``f32``, ``c128`` -> ``f64``; other dtypes keep theirs.

    >>> fnp.real(fnp.array([1 + 2j, 3 - 1j]))     # Array([1., 3.], dtype=float32)
    Array([1., 3.], dtype=float32)
    """
    val = arr(val)
    return lax.real(val) if _is_complex(val) else val


def imag(val: Any) -> Any:
    """The imaginary part, elementwise (zeros of the same dtype for a real array).

    >>> fnp.imag(fnp.array([1 + 2j, 3 - 1j]))     # Array([ 2., -1.], dtype=float32)
    Array([ 2., -1.], dtype=float32)
    """
    val = arr(val)
    if _is_complex(val):
        return lax.imag(val)
    return lax.full_like(val, 0)


def conj(x: ArrayLike) -> Array:
    """The complex conjugate, elementwise (a real array is returned as it is).

    >>> fnp.conj(fnp.array([1 + 2j]))             # Array([1.-2.j], dtype=complex64)
    Array([1.-2.j], dtype=complex64)
    """
    x = arr(x)
    return lax.conj(x) if _is_complex(x) else x


def conjugate(x: ArrayLike) -> Array:
    """Another name for :func:`conj`.

    >>> fnp.conjugate(fnp.array([1j]))            # Array([0.-1.j], dtype=complex64)
    Array([0.-1.j], dtype=complex64)
    """
    return conj(x)


def angle(z: ArrayLike, deg: bool = False) -> Array:
    """The argument (phase) of ``z``, ``arctan2(imag(z), real(z))``, in radians (degrees with ``deg=True``).

    Float result (``f32`` for ``c64`` and for integer input); a negative real number has angle pi.

    >>> fnp.angle(fnp.array([1j, -1.0]))          # Array([1.5707964, 3.1415927], dtype=float32)
    Array([1.5708, 3.1416], dtype=float32)
    """
    (z,) = promote_inexact(arr(z))
    if _is_complex(z):
        re, im = lax.real(z), lax.imag(z)
    else:
        re, im = z, lax.full_like(z, 0)
    out = lax.atan2(im, re)
    return lax.mul(out, float(180.0 / np.pi)) if deg else out


def iscomplex(x: ArrayLike) -> Array:
    """Bool array: True where the element has a nonzero imaginary part (always False for real dtypes).

    >>> fnp.iscomplex(fnp.array([1 + 0j, 2j]))    # Array([False,  True])
    Array([False,  True], dtype=bool)
    """
    i = imag(x)
    return lax.ne(i, lax.full_like(i, 0))


def isreal(x: ArrayLike) -> Array:
    """Bool array: True where the element's imaginary part is zero (always True for real dtypes).

    >>> fnp.isreal(fnp.array([1 + 0j, 2j]))       # Array([ True, False])
    Array([ True, False], dtype=bool)
    """
    i = imag(x)
    return lax.eq(i, lax.full_like(i, 0))


def _dtype_of(x: Any) -> Any:
    if x is None:
        return None
    if isinstance(x, (Array, Tracer, np.ndarray, np.generic)):
        return np.dtype(x.dtype)
    if isinstance(x, complex):
        return np.dtype(complex)
    dtype = getattr(x, "dtype", None)
    if dtype is not None:
        try:
            return np.dtype(dtype)
        except TypeError:
            return None
    try:
        return np.asarray(x).dtype
    except Exception:   # an object numpy cannot read: not complex
        return None


def iscomplexobj(x: Any) -> bool:
    """True if ``x`` has a complex dtype (or is a Python complex), whatever its values: a Python bool.

    >>> fnp.iscomplexobj(fnp.array([1 + 0j])), fnp.iscomplexobj(1.0)
    (True, False)
    """
    dtype = _dtype_of(x)
    return dtype is not None and dtype.kind == "c"


def isrealobj(x: Any) -> bool:
    """``not iscomplexobj(x)``: a Python bool.

    >>> fnp.isrealobj(fnp.ones(2))
    True
    """
    return not iscomplexobj(x)


def sort_complex(a: ArrayLike) -> Array:
    """Sort along the last axis by real part, then imaginary part; the result is complex.

    (``c64`` for float32 and integer input, ``c128`` for float64 with x64.) Differentiable:
    the gradient is un-permuted, as for ``sort``.

    >>> fnp.sort_complex(fnp.array([1 + 2j, 1 - 1j, 5j]))   # Array([0.+5.j, 1.-1.j, 1.+2.j])
    Array([0.+5.j, 1.-1.j, 1.+2.j], dtype=complex64)
    """
    a = arr(a)
    if a.ndim == 0:
        raise ValueError(f"sort_complex: expects an array of at least 1 dimension, got {_dtypes.describe(a)}")
    if not _is_complex(a):
        target = _dtypes.canonicalize(_dtypes.complex_dtype(a.dtype))
        return lax.convert_element_type(lax.sort(a, dimension=a.ndim - 1), target)
    keys = (lax.stop_gradient(lax.real(a)), lax.stop_gradient(lax.imag(a)), a)
    return lax.sort(keys, dimension=a.ndim - 1, num_keys=2)[2]
