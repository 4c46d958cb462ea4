"""The special matrices of ``funcgrad.scipy.linalg``: ``block_diag``, ``toeplitz``, ``hankel``,
``circulant``, ``companion``, ``fiedler``, ``fiedler_companion``, ``hilbert``/``invhilbert``,
``pascal``/``invpascal``, ``hadamard``, ``helmert``, ``leslie``, ``convolution_matrix`` and the DFT
matrix ``dft``. The decompositions and solves are in the sibling modules ``_solve``, ``_decomp`` and
``_matfuncs``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote, promote_inexact
from funcgrad.numpy._elementwise import abs, divide, multiply, subtract
from funcgrad.numpy._shape import broadcast_to, concatenate, reshape
from funcgrad import lax
import funcgrad.numpy as _fnp
from funcgrad.scipy.linalg._base import _max, _min
from funcgrad.typing import ArrayLike, DTypeLike


def dft(n: int, scale: str | None = None, *, dtype: DTypeLike | None = None) -> Any:
    """The n x n discrete Fourier transform matrix ``W[j, k] = exp(-2 pi i j k / n)`` (``dft(n) @ x ==
    fft(x)``); ``scale``: None, ``'sqrtn'`` (unitary) or ``'n'``. Complex (the default complex dtype:
    complex64, complex128 with x64, or ``dtype``).

    >>> dft(2)
    Array([[ 1.+0.0000000e+00j,  1.+0.0000000e+00j],
           [ 1.+0.0000000e+00j, -1.-1.2246469e-16j]], dtype=complex64)
    """
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scipy.linalg.dft: scale must be None, 'sqrtn' or 'n', got {scale!r}")
    n = _operator_index("dft", n)
    if n < 0:
        raise ValueError(f"scipy.linalg.dft: n must be non-negative, got {n}")
    from funcgrad import _dtypes
    dt = _dtypes.complex_ if dtype is None else np.dtype(dtype)
    if dt.kind != "c":
        raise ValueError(f"scipy.linalg.dft: dtype must be a complex floating-point type, got {dt}")
    dt = _dtypes.canonicalize(dt)
    k = np.arange(n)
    w = np.exp(-2j * np.pi * np.outer(k, k) / max(n, 1))
    if scale == "sqrtn":
        w = w / np.sqrt(n)
    elif scale == "n":
        w = w / n
    return _fnp.asarray(w.astype(dt))


def _operator_index(name: str, n: Any) -> int:
    import operator
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"scipy.linalg.{name}: n must be an integer, got {type(n).__name__} {n!r}") from None


def block_diag(*arrs: Any) -> Any:
    """Block diagonal matrix of the arguments (0-d and 1-d arguments count as 1 x 1 and 1 x n blocks).

    >>> block_diag(fnp.ones((2, 2)), fnp.array([[3.0]])).shape
    (3, 3)
    """
    if not arrs:
        return lax.convert_element_type(np.zeros((1, 0)), np.float32)
    xs = promote(*[arr(a) for a in arrs])
    mats = []
    for x in xs:
        if x.ndim > 2:
            raise ValueError(f"scipy.linalg.block_diag: arguments must have at most 2 dimensions, got {describe(x)}")
        mats.append(reshape(x, (1,) * (2 - x.ndim) + x.shape))
    total = sum(m.shape[1] for m in mats)
    rows, col = [], 0
    from funcgrad.numpy._shape import pad
    for m in mats:
        rows.append(pad(m, ((0, 0), (col, total - col - m.shape[1]))))
        col += m.shape[1]
    return concatenate(rows, axis=0)


def _vec_last(name: str, x: Any) -> Any:
    x = arr(x)
    return x if x.ndim else reshape(x, (1,))


def toeplitz(c: Any, r: Any = None) -> Any:
    """Toeplitz matrix with first column ``c`` and first row ``r`` (default ``c``); batched over leading dims
    (as JAX: c (..., m), r (..., n) -> (..., m, n)).

    >>> toeplitz(fnp.array([1.0, 2.0, 3.0]))
    Array([[1., 2., 3.],
           [2., 1., 2.],
           [3., 2., 1.]], dtype=float32)
    """
    c = _vec_last("toeplitz", c)
    r = c if r is None else _vec_last("toeplitz", r)
    c, r = promote(c, r)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = broadcast_to(c, batch + (m,)), broadcast_to(r, batch + (n,))
    vals = concatenate([c[..., ::-1], r[..., 1:]], axis=-1)
    idx = (m - 1) - np.arange(m)[:, None] + np.arange(n)[None, :]
    return vals[..., idx]


def hankel(c: Any, r: Any = None) -> Any:
    """Hankel matrix with first column ``c`` and last row ``r`` (default zeros); batched as :func:`toeplitz`.

    >>> hankel(fnp.array([1.0, 2.0, 3.0]), fnp.array([3.0, 4.0, 5.0, 6.0]))
    Array([[1., 2., 3., 4.],
           [2., 3., 4., 5.],
           [3., 4., 5., 6.]], dtype=float32)
    """
    c = _vec_last("hankel", c)
    r = multiply(c, 0) if r is None else _vec_last("hankel", r)
    c, r = promote(c, r)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = broadcast_to(c, batch + (m,)), broadcast_to(r, batch + (n,))
    vals = concatenate([c, r[..., 1:]], axis=-1)
    idx = np.arange(m)[:, None] + np.arange(n)[None, :]
    return vals[..., idx]


def circulant(c: Any) -> Any:
    """Circulant matrix with first column ``c`` (..., n) -> (..., n, n).

    >>> circulant(fnp.array([1.0, 2.0, 3.0]))
    Array([[1., 3., 2.],
           [2., 1., 3.],
           [3., 2., 1.]], dtype=float32)
    """
    c = _vec_last("circulant", c)
    n = c.shape[-1]
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    return c[..., idx]


def companion(a: ArrayLike) -> Any:
    """Companion matrix of the polynomial with coefficients ``a`` (n,), highest degree first: (n-1, n-1).

    >>> companion(fnp.array([1.0, 2.0, 3.0]))
    Array([[-2., -3.],
           [ 1.,  0.]], dtype=float32)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1 or a.shape[0] < 2:
        raise ValueError(f"scipy.linalg.companion: expected a 1-d array of at least 2 coefficients, got {describe(a)}")
    n = a.shape[0]
    first = reshape(divide(-a[1:], a[0]), (1, n - 1))
    below = lax.convert_element_type(np.eye(n - 2, n - 1), a.dtype)
    return concatenate([first, below], axis=0)


def fiedler(a: ArrayLike) -> Any:
    """Fiedler matrix ``|a[i] - a[j]|`` of a 1-d array.

    >>> fiedler(fnp.array([1.0, 3.0, 7.0]))
    Array([[0., 2., 6.],
           [2., 0., 4.],
           [6., 4., 0.]], dtype=float32)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1:
        raise ValueError(f"scipy.linalg.fiedler: expected a 1-d array, got {describe(a)}")
    return abs(subtract(reshape(a, (-1, 1)), reshape(a, (1, -1))))


def fiedler_companion(a: ArrayLike) -> Any:
    """Fiedler companion matrix of the polynomial coefficients ``a`` (n,) (``a[0]`` normalised to 1).

    >>> fiedler_companion(fnp.array([1.0, 2.0, 3.0, 4.0])).shape
    (3, 3)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1 or a.shape[0] < 2:
        raise ValueError(f"scipy.linalg.fiedler_companion: expected a 1-d array of at least 2 coefficients, got "
                         f"{describe(a)}")
    n = a.shape[0]
    a = divide(a, a[0])
    if n == 2:
        return reshape(-a[1], (1, 1))
    # Every entry is a constant or -a[k]: the matrix is affine in a[1:], so build it from scipy's
    # matrices for unit coefficients (exact, differentiable).
    import scipy.linalg as _sl
    unit = np.eye(n)
    base = _sl.fiedler_companion(unit[0])
    total = lax.convert_element_type(base, a.dtype)
    for k in range(1, n):
        coeff = lax.convert_element_type(_sl.fiedler_companion(unit[0] + unit[k]) - base, a.dtype)
        total = total + multiply(coeff, a[k])
    return total


def hilbert(n: int) -> Any:
    """Hilbert matrix ``1 / (i + j + 1)``, (n, n), default float dtype.

    >>> hilbert(3)
    Array([[1.        , 0.5       , 0.3333],
           [0.5       , 0.3333, 0.25      ],
           [0.3333, 0.25      , 0.2       ]], dtype=float32)
    """
    i = np.arange(int(n))
    return _float_const(1.0 / (i[:, None] + i[None, :] + 1))


def _float_const(x: np.ndarray) -> Any:
    from funcgrad import _dtypes
    return lax.convert_element_type(np.asarray(x, np.float64), _dtypes.float_)


def invhilbert(n: int) -> Any:
    """Inverse of the (n, n) Hilbert matrix (exact formula, default float dtype).

    >>> invhilbert(2)
    Array([[ 4., -6.],
           [-6., 12.]], dtype=float32)
    """
    import scipy.linalg as _sl
    return _float_const(_sl.invhilbert(int(n)).astype(np.float64))


def pascal(n: int, kind: str | None = None) -> Any:
    """Pascal matrix (n, n): ``kind`` 'symmetric' (default), 'lower' or 'upper'; default float dtype.

    >>> pascal(3, "lower")
    Array([[1., 0., 0.],
           [1., 1., 0.],
           [1., 2., 1.]], dtype=float32)
    """
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"scipy.linalg.pascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    import scipy.linalg as _sl
    return _float_const(_sl.pascal(int(n), kind=kind, exact=False))


def invpascal(n: int, kind: str | None = None) -> Any:
    """Inverse of the Pascal matrix (see :func:`pascal`); default float dtype.

    >>> invpascal(3)
    Array([[ 3., -3.,  1.],
           [-3.,  5., -2.],
           [ 1., -2.,  1.]], dtype=float32)
    """
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"scipy.linalg.invpascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    import scipy.linalg as _sl
    return _float_const(_sl.invpascal(int(n), kind=kind, exact=False))


def hadamard(n: int, dtype: DTypeLike = int) -> Any:
    """Sylvester's Hadamard matrix (n, n), n a power of 2.

    >>> hadamard(2)
    Array([[ 1,  1],
           [ 1, -1]], dtype=int32)
    """
    n = int(n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"scipy.linalg.hadamard: n must be a positive power of 2, got {n}")
    import scipy.linalg as _sl
    return lax.convert_element_type(_sl.hadamard(n, dtype=np.int64), dtype)


def helmert(n: int, full: bool = False) -> Any:
    """Helmert matrix: (n-1, n), or (n, n) with ``full``; default float dtype.

    >>> helmert(3).shape
    (2, 3)
    """
    import scipy.linalg as _sl
    return _float_const(_sl.helmert(int(n), full=bool(full)))


def leslie(f: Any, s: Any) -> Any:
    """Leslie matrix from fecundities ``f`` (n,) and survival rates ``s`` (n-1,): (n, n).

    >>> leslie(fnp.array([1.0, 2.0, 3.0]), fnp.array([0.5, 0.6]))
    Array([[1. , 2. , 3. ],
           [0.5, 0. , 0. ],
           [0. , 0.6, 0. ]], dtype=float32)
    """
    f, s = promote_inexact(arr(f), arr(s))
    if f.ndim != 1 or s.ndim != 1 or s.shape[0] != f.shape[0] - 1 or f.shape[0] < 1:
        raise ValueError(f"scipy.linalg.leslie: expected f (n,) and s (n-1,), got {describe(f)} and {describe(s)}")
    n = f.shape[0]
    below = multiply(reshape(s, (n - 1, 1)), lax.convert_element_type(np.eye(n - 1, n), f.dtype))
    return concatenate([reshape(f, (1, n)), below], axis=0)


def convolution_matrix(a: ArrayLike, n: int, mode: str = "full") -> Any:
    """Matrix ``M`` with ``M @ v == convolve(a, v, mode)`` for v of length ``n``.

    >>> convolution_matrix(fnp.array([1.0, 2.0, 3.0]), 4, "same").shape
    (4, 4)
    """
    (a,) = promote_inexact(arr(a))
    if a.ndim != 1 or a.shape[0] == 0:
        raise ValueError(f"scipy.linalg.convolution_matrix: expected a non-empty 1-d array, got {describe(a)}")
    n = int(n)
    if n <= 0:
        raise ValueError(f"scipy.linalg.convolution_matrix: n must be positive, got {n}")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"scipy.linalg.convolution_matrix: mode must be 'full', 'valid' or 'same', got {mode!r}")
    m = a.shape[0]
    rows = m + n - 1
    i = np.arange(rows)[:, None] - np.arange(n)[None, :]
    valid = (i >= 0) & (i < m)
    padded = concatenate([a, lax.convert_element_type(np.zeros(1), a.dtype)])
    full = padded[np.where(valid, i, m)]
    if mode == "full":
        return full
    if mode == "valid":
        lo, hi = _min(m, n) - 1, rows - (_min(m, n) - 1)
    else:
        lo = (rows - _max(m, n)) // 2
        hi = lo + _max(m, n)
    return full[lo:hi]
