"""``funcgrad.numpy.linalg``: ``jax.numpy.linalg`` over funcgrad's decomposition primitives.

Every function works on stacks of matrices (leading dimensions batch), differentiates to any order
(the decompositions' rules are written with primitives), and composes with vmap and jit.

Semantics follow JAX where it differs from numpy:

* no LinAlgError: a singular matrix gives inf/NaN from ``solve``/``inv``, a matrix that is not
  positive definite gives NaN from ``cholesky``;
* ``eigh``/``cholesky`` symmetrize their input (``(a + a.T) / 2``) by default, so gradients are symmetric;
* the gradient of the 2-norm at exactly zero is NaN (``0/0``), and gradients through ``eigh``/``svd``
  at repeated eigenvalues/singular values are undefined (inf/NaN), as in JAX;
* ``eig``/``eigvals`` always return complex arrays (complex64 for float32 input, complex128 with x64),
  also when every eigenvalue is real (numpy returns a real array then); eigenvector derivatives of
  ``eig`` raise NotImplementedError (as JAX; ``lax.linalg.eig(..., enable_eigvec_derivs=True)`` opts in).
"""
from __future__ import annotations

import builtins
import collections
import string
from typing import Any, Sequence

import numpy as np

from funcgrad._core import Tracer
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, normalize_axes, promote_inexact
from funcgrad.numpy._elementwise import abs, divide, isnan, log, multiply, power, sign, sqrt, where
from funcgrad.numpy._reductions import max, min, prod, sum
from funcgrad.numpy._shape import broadcast_to, ravel, reshape
from funcgrad.numpy import _linalg
from funcgrad.numpy._linalg import cross as _cross, outer as _outer, tensordot as _tensordot, vecdot as _vecdot
from funcgrad import lax
from funcgrad.lax import linalg as _L
from funcgrad.typing import Array, ArrayLike, DTypeLike

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer",
           "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
           "vecdot", "vector_norm", "EigResult", "EighResult", "QRResult", "SlogdetResult", "SVDResult"]

EigResult = collections.namedtuple("EigResult", ["eigenvalues", "eigenvectors"])
EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])
SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])
EigResult.__doc__ = """``eig``'s result: ``(eigenvalues, eigenvectors)`` (complex).

    >>> fnp.linalg.eig(fnp.diag(fnp.array([1.0, 2.0]))).eigenvalues
    Array([1.+0.j, 2.+0.j], dtype=complex64)
    """
EighResult.__doc__ = """``eigh``'s result: ``(eigenvalues, eigenvectors)``, eigenvalues ascending.

    >>> fnp.linalg.eigh(fnp.diag(fnp.array([2.0, 1.0]))).eigenvalues
    Array([1., 2.], dtype=float32)
    """
QRResult.__doc__ = """``qr``'s result: ``(Q, R)``.

    >>> fnp.linalg.qr(fnp.eye(2)).R.shape
    (2, 2)
    """
SlogdetResult.__doc__ = """``slogdet``'s result: ``(sign, logabsdet)`` with ``det = sign * exp(logabsdet)``.

    >>> fnp.linalg.slogdet(fnp.diag(fnp.array([-2.0, 3.0])))
    SlogdetResult(sign=Array(-1., dtype=float32), logabsdet=Array(1.7918, dtype=float32))
    """
SVDResult.__doc__ = """``svd``'s result: ``(U, S, Vh)`` with ``a = U @ diag(S) @ Vh``, S descending.

    >>> fnp.linalg.svd(fnp.diag(fnp.array([3.0, 2.0]))).S
    Array([3., 2.], dtype=float32)
    """

# ------------------------------------------------------------------ helpers


def _matrix(name: str, a: Any, square: bool = False) -> Any:
    (a,) = promote_inexact(arr(a))
    if a.ndim < 2:
        raise ValueError(f"linalg.{name}: expected a matrix or a stack of matrices (at least 2-d), got "
                         f"{describe(a)}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"linalg.{name}: expected square matrices (shape (..., n, n)), got {describe(a)}")
    return a


def _mT(x: Any) -> Any:
    nd = x.ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _diag(x: Any, offset: int = 0) -> Any:
    m, n = x.shape[-2:]
    k = max_(0, min_(m + min_(offset, 0), n - max_(offset, 0)))
    rows = np.arange(k) - min_(offset, 0)
    cols = np.arange(k) + max_(offset, 0)
    return x[..., rows, cols]


max_, min_ = builtins.max, builtins.min


def _eye_like(a: Any) -> Any:
    n = a.shape[-1]
    return broadcast_to(lax.convert_element_type(np.eye(n), a.dtype), a.shape)


def _concrete(x: Any) -> bool:
    return not isinstance(x, Tracer)

# ------------------------------------------------------------------ products and shapes


def matmul(x1: ArrayLike, x2: ArrayLike, /, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Matrix product (numpy ``@``), see :func:`funcgrad.numpy.matmul`.

    >>> matmul(fnp.ones((2, 3)), fnp.ones(3)).shape
    (2,)
    """
    out = _linalg.matmul(x1, x2)
    return out if preferred_element_type is None else lax.convert_element_type(out, preferred_element_type)


def tensordot(x1: ArrayLike, x2: ArrayLike, /, *, axes: Any = 2, precision: Any = None,
              preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """Tensor contraction over ``axes`` (an int or two sequences), see :func:`funcgrad.numpy.tensordot`.

    >>> tensordot(fnp.ones((2, 3)), fnp.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    out = _tensordot(x1, x2, axes)
    return out if preferred_element_type is None else lax.convert_element_type(out, preferred_element_type)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """Dot product of vectors along ``axis`` (broadcasting the other axes).

    >>> vecdot(fnp.ones((2, 3)), fnp.arange(3.0))
    Array([3., 3.], dtype=float32)
    """
    return _vecdot(x1, x2, axis=axis, precision=precision, preferred_element_type=preferred_element_type)


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Any:
    """Cross product of 3-vectors along ``axis`` (other axes broadcast).

    >>> cross(fnp.array([1.0, 0.0, 0.0]), fnp.array([0.0, 1.0, 0.0]))
    Array([0., 0., 1.], dtype=float32)
    """
    x1, x2 = arr(x1), arr(x2)
    if x1.ndim == 0 or x2.ndim == 0 or x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"linalg.cross: both inputs must have size 3 along axis {axis}, got {describe(x1)} and "
                         f"{describe(x2)}")
    return _cross(x1, x2, axis=axis)


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """Outer product of two 1-d arrays: (m,), (n,) -> (m, n).

    >>> outer(fnp.arange(2.0), fnp.arange(3.0)).shape
    (2, 3)
    """
    x1, x2 = arr(x1), arr(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer: expected two 1-d arrays, got {describe(x1)} and {describe(x2)}")
    return _outer(x1, x2)


def matrix_transpose(x: ArrayLike, /) -> Any:
    """Swap the last two axes: (..., m, n) -> (..., n, m).

    >>> matrix_transpose(fnp.ones((2, 3, 4))).shape
    (2, 4, 3)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.matrix_transpose: expected an array of at least 2 dimensions, got {describe(x)}")
    return _mT(x)


def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Any:
    """Diagonals of a stack of matrices: (..., m, n) -> (..., k).

    >>> diagonal(fnp.eye(3))
    Array([1., 1., 1.], dtype=float32)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.diagonal: expected an array of at least 2 dimensions, got {describe(x)}")
    return _diag(x, int(offset))


def trace(x: ArrayLike, /, *, offset: int = 0, dtype: DTypeLike | None = None) -> Any:
    """Sum of the diagonal of each matrix: (..., m, n) -> (...).

    >>> trace(fnp.eye(3))
    Array(3., dtype=float32)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.trace: expected an array of at least 2 dimensions, got {describe(x)}")
    out = sum(_diag(x, int(offset)), axis=-1)
    return out if dtype is None else lax.convert_element_type(out, dtype)


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """Product of a chain of matrices in the cheapest order (first/last may be 1-d).

    >>> multi_dot([fnp.ones((2, 3)), fnp.ones((3, 4)), fnp.ones(4)]).shape
    (2,)
    """
    arrays = [arr(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least two arrays, got {len(arrays)}")
    for i, a in enumerate(arrays):
        allowed = (1, 2) if i in (0, len(arrays) - 1) else (2,)
        if a.ndim not in allowed:
            raise ValueError(f"linalg.multi_dot: array {i} is {describe(a)}; the first and last must be 1-d or "
                             "2-d, the others 2-d")
    letters = iter(string.ascii_letters)
    subs, prev = [], next(letters)
    first = prev
    for i, a in enumerate(arrays):
        if a.ndim == 1 and i == 0:
            nxt = prev
            subs.append(prev)
            continue
        if a.ndim == 1:
            subs.append(prev)
            nxt = None
            continue
        nxt = next(letters)
        subs.append(prev + nxt)
        prev = nxt
    out = ("" if arrays[0].ndim == 1 else first) + ("" if arrays[-1].ndim == 1 else prev)
    return _linalg.einsum(",".join(subs) + "->" + out, *arrays, optimize="optimal")


def matrix_power(a: ArrayLike, n: int) -> Any:
    """``a`` (..., m, m) to the integer power ``n`` (negative: powers of the inverse) by repeated squaring.

    >>> matrix_power(fnp.array([[1.0, 1.0], [0.0, 1.0]]), 3)
    Array([[1., 3.],
           [0., 1.]], dtype=float32)
    """
    a = arr(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"linalg.matrix_power: expected square matrices (shape (..., n, n)), got {describe(a)}")
    try:
        n = int(n.__index__())
    except (AttributeError, TypeError):
        raise TypeError(f"linalg.matrix_power: the exponent must be an integer, got {n!r}") from None
    if n == 0:
        return broadcast_to(lax.convert_element_type(np.eye(a.shape[-1]), a.dtype), a.shape)
    if n < 0:
        a = inv(a)
        n = -n
    result, power_ = None, a
    while n:
        if n & 1:
            result = power_ if result is None else _linalg.matmul(result, power_)
        n >>= 1
        if n:
            power_ = _linalg.matmul(power_, power_)
    return result

# ------------------------------------------------------------------ decompositions


def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
    """Cholesky factor of symmetric positive definite matrices: lower ``L`` with ``a = L @ L.T``
    (``upper``: ``U = L.T``). NaN where ``a`` is not positive definite (numpy raises).

    >>> cholesky(fnp.array([[4.0, 2.0], [2.0, 3.0]]))
    Array([[2.       , 0.       ],
           [1.       , 1.4142]], dtype=float32)
    """
    a = _matrix("cholesky", a, square=True)
    L = _L.cholesky(a, symmetrize_input=symmetrize_input)
    return _mT(L) if upper else L


def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices: ``EighResult(w, v)``.

    >>> w, v = eigh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))   # w = [1., 3.]
    """
    a = _matrix("eigh", a, square=True)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = _L.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eig(a: ArrayLike) -> EigResult:
    """Eigenvalues and right eigenvectors of general square matrices: ``EigResult(w, v)`` with
    ``a @ v[..., :, j] = w[..., j] * v[..., :, j]``; (..., n, n) -> (..., n), (..., n, n), complex
    (unit-norm columns, as LAPACK geev; eigenvalues in LAPACK's order, unsorted). Eigenvalues are
    differentiable through ``eigvals``; differentiating this function raises (as in JAX).

    >>> w, v = eig(fnp.array([[2.0, 0.0], [0.0, 3.0]]))   # w = [2+0j, 3+0j]
    """
    a = _matrix("eig", a, square=True)
    w, v = _L.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: ArrayLike) -> Array:
    """Eigenvalues of general square matrices, complex: (..., n, n) -> (..., n) (LAPACK's order, unsorted).
    Differentiable (forward and reverse; distinct eigenvalues), as JAX.

    >>> eigvals(fnp.array([[0.0, 1.0], [-1.0, 0.0]]))
    Array([0.+1.j, 0.-1.j], dtype=complex64)
    """
    a = _matrix("eigvals", a, square=True)
    (w,) = _L.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    return w


def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Array:
    """Eigenvalues (ascending) of symmetric matrices: (..., n, n) -> (..., n).

    >>> eigvalsh(fnp.array([[2.0, 1.0], [1.0, 2.0]]))
    Array([1., 3.], dtype=float32)
    """
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: Any = None) -> Any:
    """Singular value decomposition ``SVDResult(U, S, Vh)`` with ``a = U @ diag(S) @ Vh`` (S descending);
    ``compute_uv=False``: ``S`` only. Gradients need ``full_matrices=False`` (or square matrices).

    >>> U, S, Vh = svd(fnp.ones((3, 2)), full_matrices=False)
    """
    a = _matrix("svd", a)
    # hermitian=True: the general SVD is also an SVD of a symmetric matrix (computed without the shortcut).
    out = _L.svd(a, full_matrices=full_matrices, compute_uv=compute_uv, subset_by_index=subset_by_index)
    if not compute_uv:
        return out
    return SVDResult(*out)


def svdvals(x: ArrayLike, /) -> Any:
    """Singular values, descending: (..., m, n) -> (..., min(m, n)).

    >>> svdvals(fnp.array([[3.0, 0.0], [0.0, 4.0]]))
    Array([4., 3.], dtype=float32)
    """
    return svd(x, full_matrices=False, compute_uv=False)


def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """QR decomposition ``QRResult(Q, R)``; ``mode`` 'reduced' (k = min(m, n)), 'complete' (Q is m x m) or
    'r' (R only). Gradients need m >= n with 'reduced', or square matrices.

    >>> Q, R = qr(fnp.ones((3, 2)))
    """
    a = _matrix("qr", a)
    if mode == "raw":
        raise NotImplementedError("linalg.qr: mode='raw' (LAPACK's Householder form) is not supported")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    q, r = _L.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)

# ------------------------------------------------------------------ solves, inverses, determinants


def _lu_solve(lu: Any, perm: Any, b: Any) -> Any:
    """x with a x = b from a[perm] = L U; b is (..., n, k)."""
    P = _L.permutation_matrix(perm, lu.dtype)
    y = _L.triangular_solve(lu, _linalg.matmul(P, b), left_side=True, lower=True, unit_diagonal=True)
    return _L.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """Solve ``a @ x = b``: a (..., n, n); b (n,) (a vector) or (..., n, k) (batch dims broadcast).
    A singular ``a`` gives inf/NaN (numpy raises LinAlgError).

    >>> solve(fnp.array([[2.0, 0.0], [0.0, 4.0]]), fnp.array([2.0, 2.0]))
    Array([1. , 0.5], dtype=float32)
    """
    a, b = promote_inexact(arr(a), arr(b))
    a = _matrix("solve", a, square=True)
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"linalg.solve: the right-hand side {describe(b)} must have length {n} to match "
                             f"{describe(a)}")
        lu, _, perm = _L.lu(a)
        return reshape(_lu_solve(lu, perm, reshape(b, (n, 1))), a.shape[:-2] + (n,))
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"linalg.solve: the right-hand side {describe(b)} must have shape (n,) or (..., n, k) "
                         f"with n = {n} to match {describe(a)}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"linalg.solve: batch dimensions of {describe(a)} and {describe(b)} cannot be "
                         "broadcast") from None
    lu, _, perm = _L.lu(a)
    return _lu_solve(lu, perm, b)


def inv(a: ArrayLike) -> Array:
    """Inverse of square matrices (..., n, n); inf/NaN for a singular matrix (numpy raises).

    >>> inv(fnp.array([[2.0, 0.0], [0.0, 4.0]]))
    Array([[0.5 , 0.  ],
           [0.  , 0.25]], dtype=float32)
    """
    a = _matrix("inv", a, square=True)
    lu, _, perm = _L.lu(a)
    return _lu_solve(lu, perm, _eye_like(a))


def _lu_sign_diag(a: Any) -> tuple[Any, Any]:
    lu, piv, _ = _L.lu(a)
    n = a.shape[-1]
    swaps = sum(lax.convert_element_type(lax.ne_p.bind(piv, np.arange(n, dtype=np.int32)), np.int32), axis=-1)
    parity = lax.convert_element_type(1 - 2 * (swaps % 2), a.dtype)
    return parity, _diag(lu)


def _det_lu(a: Any) -> Any:
    parity, d = _lu_sign_diag(a)
    return multiply(parity, prod(d, axis=-1))


def _cofactor_solve(a: Any, b: Any) -> tuple[Any, Any]:
    """``(det(a), adj(a) @ b)`` for square a (..., n, n), n >= 2, finite where a has rank n - 1 too (JAX's
    cofactor solve: the LU factors with the last pivot replaced, so a singular a needs no division by 0)."""
    n = a.shape[-1]
    lu, piv, perm = _L.lu(a)
    diag = _diag(lu)
    swaps = sum(lax.convert_element_type(lax.ne_p.bind(piv, np.arange(n, dtype=np.int32)), np.int32), axis=-1)
    sign_ = lax.convert_element_type(1 - 2 * (swaps % 2), a.dtype)
    det_all = multiply(sign_, prod(diag, axis=-1))
    det_head = multiply(sign_, prod(diag[..., :-1], axis=-1))            # det(U) / u_nn, with the sign
    corner = np.zeros((n, n))
    corner[-1, -1] = 1.0
    corner = lax.convert_element_type(corner, a.dtype)
    lu = lu * (1.0 - corner) + corner * reshape(divide(1.0, det_head), det_head.shape + (1, 1))
    # matrices of rank < n - 1 have a zero adjugate: find them by a solve that overflows
    probe = _L.triangular_solve(lu, broadcast_to(lax.convert_element_type(np.ones((1, n)), a.dtype),
                                                  lu.shape[:-2] + (1, n)), left_side=False, lower=False)
    bad = lax.convert_element_type(lax.ne_p.bind(sum(lax.convert_element_type(
        lax.ne_p.bind(lax.isfinite_p.bind(probe), True), a.dtype), axis=(-2, -1)), 0), np.bool_)
    bad = reshape(bad, bad.shape + (1, 1))
    x = where(bad, 0.0, b)
    x = _linalg.matmul(_L.permutation_matrix(perm, a.dtype), x)
    x = _L.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    scale = broadcast_to(reshape(det_all, det_all.shape + (1, 1)), det_all.shape + (n - 1, 1))
    ones = broadcast_to(lax.convert_element_type(np.ones((1, 1)), a.dtype), det_all.shape + (1, 1))
    from funcgrad.numpy._shape import concatenate
    x = x * concatenate([scale, ones], axis=-2)
    x = _L.triangular_solve(lu, x, left_side=True, lower=False)
    return det_all, where(bad, 0.0, x)


def _det_custom(a: Any) -> Any:
    return _det_lu(a)


def _det_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    (a,), (g,) = primals, tangents
    with np.errstate(all="ignore"):     # the inf/NaN of a rank < n - 1 matrix are filtered out
        y, z = _cofactor_solve(a, g)
    return y, sum(_diag(z), axis=-1)


def _make_det() -> Any:
    from funcgrad._custom_rules import custom_jvp
    f = custom_jvp(_det_custom)
    f.defjvp(_det_jvp)
    return f


_det_with_rule = _make_det()


def det(a: ArrayLike) -> Array:
    """Determinant of square matrices: (..., n, n) -> (...), through the LU decomposition. Its derivative
    is ``trace(adj(a) @ da)`` (as JAX: finite at singular matrices of rank n - 1 too).

    >>> det(fnp.array([[1.0, 2.0], [3.0, 4.0]]))
    Array(-2.0000, dtype=float32)
    """
    a = _matrix("det", a, square=True)
    if a.shape[-1] < 2:
        return _det_lu(a)
    return _det_with_rule(a)


def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """Sign and log of the absolute determinant: ``SlogdetResult(sign, logabsdet)``, each (...).
    A singular matrix gives sign 0 and logabsdet -inf.

    >>> slogdet(fnp.array([[1.0, 2.0], [3.0, 4.0]]))   # sign -1, logabsdet log(2)
    SlogdetResult(sign=Array(-1., dtype=float32), logabsdet=Array(0.6931, dtype=float32))
    """
    if method not in (None, "lu"):
        raise NotImplementedError(f"linalg.slogdet: method={method!r} is not supported; use method='lu' "
                                  "(the default)")
    a = _matrix("slogdet", a, square=True)
    parity, d = _lu_sign_diag(a)
    s = multiply(parity, prod(sign(d), axis=-1))
    return SlogdetResult(s, sum(log(abs(d)), axis=-1))


def pinv(a: ArrayLike, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Array:
    """Moore-Penrose pseudo-inverse through the SVD: (..., m, n) -> (..., n, m). Singular values at or
    below ``rtol * largest`` (default ``10 * max(m, n) * eps``) count as zero. Its derivative is the
    pseudo-inverse's own (as JAX), finite for rank-deficient matrices too.

    >>> pinv(fnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).shape
    (2, 3)
    """
    if rcond is not None:
        if rtol is not None:
            raise ValueError("linalg.pinv: only one of rtol and rcond may be specified")
        rtol = rcond
    a = _matrix("pinv", a)
    if rtol is None:
        rtol = 10.0 * max_(a.shape[-2:]) * float(np.finfo(a.dtype).eps)
    rtol = arr(rtol) if not isinstance(rtol, (int, float)) else float(rtol)
    return _pinv_with_rule(a, rtol)


def _pinv_plain(a: Any, rtol: Any) -> Any:
    u, s, vh = _L.svd(a, full_matrices=False)
    if not isinstance(rtol, float):
        rtol = reshape(rtol, rtol.shape + (1,))
    cutoff = multiply(rtol, s[..., 0:1])
    s = where(lax.gt_p.bind(s, cutoff), s, np.inf)
    s = lax.convert_element_type(s, a.dtype)
    return _linalg.matmul(_mT(vh), divide(_mT(u), reshape(s, s.shape + (1,))))


def _pinv_jvp(rtol: Any, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    # Golub & Pereyra's derivative of the pseudo-inverse (as JAX): finite for rank-deficient a too.
    (a,), (da,) = primals, tangents
    p = _pinv_plain(a, rtol)
    mm = _linalg.matmul
    eye_m = lax.convert_element_type(np.eye(a.shape[-2]), a.dtype)
    eye_n = lax.convert_element_type(np.eye(a.shape[-1]), a.dtype)
    da_t = _mT(da)
    dp = (-mm(mm(p, da), p)
          + mm(mm(mm(p, _mT(p)), da_t), eye_m - mm(a, p))
          + mm(mm(mm(eye_n - mm(p, a), da_t), _mT(p)), p))
    return p, dp


def _make_pinv() -> Any:
    from funcgrad._custom_rules import custom_jvp
    f = custom_jvp(_pinv_plain, nondiff_argnums=(1,))
    f.defjvp(_pinv_jvp)
    return f


_pinv_with_rule = _make_pinv()


def lstsq(a: ArrayLike, b: ArrayLike, rcond: Any = None, *, numpy_resid: bool = False) -> tuple[Any, Any, Any, Any]:
    """Least-squares solution of ``a @ x = b`` through the SVD: ``(x, residuals, rank, s)``.
    a (m, n); b (m,) or (m, k). Residuals are always computed (``numpy_resid=True``: empty when
    ``rank < n`` or ``m <= n``, as numpy; needs concrete values).

    >>> x, resid, rank, s = lstsq(fnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), fnp.array([1.0, 1.0, 2.0]))
    """
    a, b = promote_inexact(arr(a), arr(b))
    if a.ndim != 2:
        raise ValueError(f"linalg.lstsq: a must be a 2-d matrix, got {describe(a)}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"linalg.lstsq: b must be (m,) or (m, k) with m = {a.shape[0]} rows of a {describe(a)}, "
                         f"got {describe(b)}")
    b_ndim = b.ndim
    if b_ndim == 1:
        b = reshape(b, (b.shape[0], 1))
    m, n = a.shape
    dtype = a.dtype
    eps = float(np.finfo(dtype).eps)
    u, s, vt = _L.svd(a, full_matrices=False)
    if rcond is None:
        rcond = eps * max_(n, m)
    elif _concrete(rcond) and not isinstance(rcond, (int, float)):
        rcond = float(np.asarray(rcond))
    if isinstance(rcond, (int, float)) and rcond < 0:
        rcond = eps
    if min_(m, n) == 0:
        mask = s > 0.0
    else:
        mask = s >= multiply(rcond, s[0])
    rank = sum(mask)
    safe_s = where(mask, s, 1.0)
    s_inv = reshape(where(mask, divide(1.0, safe_s), 0.0), (s.shape[0], 1))
    x = _linalg.matmul(_mT(vt), multiply(s_inv, _linalg.matmul(_mT(u), b)))
    if numpy_resid:
        if not _concrete(rank):
            raise NotImplementedError("linalg.lstsq: numpy_resid=True needs a concrete rank (not under jit/vmap)")
        rank_value = int(np.asarray(rank))
        use_empty = rank_value < n or m <= n
    else:
        use_empty = False
    if use_empty:
        resid = lax.convert_element_type(np.zeros((0,)), dtype)
    else:
        r = b - _linalg.matmul(a, x)
        resid = sum(multiply(r, r), axis=0)
    if b_ndim == 1:
        x = ravel(x)
    return x, resid, rank, s


def tensorinv(a: ArrayLike, ind: int = 2) -> Any:
    """Inverse of a tensor seen as a matrix: shape ``a.shape[ind:] + a.shape[:ind]``.

    >>> tensorinv(fnp.eye(4).reshape(4, 2, 2), ind=1).shape
    (2, 2, 4)
    """
    a = arr(a)
    ind = int(ind)
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be a positive integer, got {ind}")
    rows, cols = a.shape[:ind], a.shape[ind:]
    r, c = int(np.prod(rows)), int(np.prod(cols))
    if r != c:
        raise ValueError(f"linalg.tensorinv: prod(a.shape[:ind]) = {r} must equal prod(a.shape[ind:]) = {c} "
                         f"for {describe(a)} with ind={ind}")
    return reshape(inv(reshape(a, (r, c))), cols + rows)


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: Any = None) -> Any:
    """Solve ``tensordot(a, x, x.ndim) = b`` for x (shape ``a.shape[b.ndim:]``).

    >>> tensorsolve(fnp.eye(6).reshape(6, 2, 3), fnp.ones(6)).shape
    (2, 3)
    """
    a, b = promote_inexact(arr(a), arr(b))
    if axes is not None:
        axes = [ax % a.ndim for ax in ((axes,) if isinstance(axes, int) else axes)]
        rest = [i for i in range(a.ndim) if i not in axes]
        a = lax.transpose(a, tuple(rest + axes))
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape:
        raise ValueError(f"linalg.tensorsolve: the leading axes of {describe(a)} must match b {describe(b)}")
    r, c = int(np.prod(b.shape)), int(np.prod(out_shape))
    if r != c:
        raise ValueError(f"linalg.tensorsolve: a {describe(a)} is not square as a ({r}, {c}) matrix")
    return reshape(solve(reshape(a, (r, c)), ravel(b)), out_shape)

# ------------------------------------------------------------------ norms, rank, condition number


def norm(x: ArrayLike, ord: Any = None, axis: int | Sequence[int] | None = None,  # noqa: A002
         keepdims: bool = False) -> Array:
    """Vector norms (``ord`` None/2, 1, inf, -inf, 0, any p) and matrix norms (``'fro'``, ``'nuc'``,
    1, -1, 2, -2, inf, -inf) over ``axis`` (int, 2-tuple or None: all axes of a 1-d/2-d array).

    >>> norm(fnp.array([3.0, 4.0]))
    Array(5., dtype=float32)
    """
    (x,) = promote_inexact(arr(x))
    if axis is None and ord is None:
        out = sqrt(sum(_abs2(x), None))
        return reshape(out, (1,) * x.ndim) if keepdims else out
    if axis is None and x.ndim > 2:
        raise ValueError(f"norm: with ord={ord!r}, axis must be given for an array of more than 2 dimensions "
                         f"({describe(x)})")
    axes = normalize_axes("norm", axis if axis is not None else tuple(range(x.ndim)), x.ndim, x, keep_order=True)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(f"norm: axis must name 1 or 2 axes for an array {describe(x)}, got {axis}")


def _abs2(x):
    """|x|^2 elementwise (real for complex x)."""
    if x.dtype.kind == "c":
        re, im = lax.real(x), lax.imag(x)
        return lax.add_p.bind(lax.mul_p.bind(re, re), lax.mul_p.bind(im, im))
    return lax.mul_p.bind(x, x)


def _vector_norm(x, ord, axes, keepdims):
    if isinstance(ord, str):
        raise ValueError(f"norm: ord={ord!r} is a matrix norm; a vector norm takes a number")
    if ord is None or ord == 2:
        return sqrt(sum(_abs2(x), axes, keepdims=keepdims))
    if ord == np.inf:
        return max(abs(x), axes, keepdims=keepdims)
    if ord == -np.inf:
        return min(abs(x), axes, keepdims=keepdims)
    if ord == 0:
        return sum(lax.convert_element_type(lax.ne_p.bind(x, 0), x.dtype), axes, keepdims=keepdims)
    if ord == 1:
        return sum(abs(x), axes, keepdims=keepdims)
    return power(sum(power(abs(x), float(ord)), axes, keepdims=keepdims), 1.0 / float(ord))


def _matrix_norm(x, ord, axes, keepdims):
    row, col = axes
    if ord is None or ord == "fro":
        return sqrt(sum(_abs2(x), tuple(sorted(axes)), keepdims=keepdims))
    if ord in (1, -1):
        sums = sum(abs(x), row, keepdims=True)
        out = (max if ord == 1 else min)(sums, col, keepdims=True)
    elif ord in (np.inf, -np.inf):
        sums = sum(abs(x), col, keepdims=True)
        out = (max if ord == np.inf else min)(sums, row, keepdims=True)
    elif ord in (2, -2, "nuc"):
        s = svdvals(_to_end(x, row, col))
        if ord == 2:
            out = s[..., 0]
        elif ord == -2:
            out = s[..., -1]
        else:
            out = sum(s, axis=-1)
        if keepdims:
            shape = list(x.shape)
            shape[row] = shape[col] = 1
            out = reshape(out, tuple(shape))
        return out
    else:
        raise ValueError(f"norm: invalid matrix norm ord={ord!r}; use 'fro', 'nuc', 1, -1, 2, -2, inf or -inf")
    return out if keepdims else reshape(out, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def _to_end(x, row, col):
    rest = [i for i in range(x.ndim) if i not in (row, col)]
    return lax.transpose(x, tuple(rest) + (row, col))


def vector_norm(x: ArrayLike, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                ord: Any = 2) -> Any:
    """Vector norm over ``axis`` (None: all elements, as one flat vector).

    >>> vector_norm(fnp.ones((2, 2)))
    Array(2., dtype=float32)
    """
    (x,) = promote_inexact(arr(x))
    if axis is None:
        out = _vector_norm(ravel(x), ord, (0,), False)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    axes = normalize_axes("vector_norm", axis, x.ndim, x)
    return _vector_norm(x, ord, axes, keepdims)


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """Matrix norm of the last two axes (``ord`` as :func:`norm`).

    >>> matrix_norm(fnp.eye(2))   # sqrt(2)
    Array(1.4142, dtype=float32)
    """
    x = arr(x)
    if x.ndim < 2:
        raise ValueError(f"linalg.matrix_norm: expected an array of at least 2 dimensions, got {describe(x)}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def matrix_rank(M: Any, rtol: Any = None, *, hermitian: bool = False, tol: Any = None) -> Array:
    """Number of singular values above ``rtol`` (default ``max(s) * max(m, n) * eps``); int32 (...).
    Its gradient is zero.

    >>> matrix_rank(fnp.array([[1.0, 0.0], [0.0, 0.0]]))
    Array(1, dtype=int32)
    """
    if tol is not None:
        if rtol is not None:
            raise ValueError("linalg.matrix_rank: only one of tol or rtol may be specified")
        rtol = tol
    (M,) = promote_inexact(arr(M))
    if M.ndim < 2:
        return lax.convert_element_type(max(lax.convert_element_type(lax.ne_p.bind(M, 0), np.int32)), np.int32)
    s = svdvals(lax.stop_gradient_p.bind(M))
    if rtol is None:
        rtol = multiply(max(s, axis=-1), float(max_(M.shape[-2:])) * float(np.finfo(s.dtype).eps))
    rtol = arr(rtol) if not isinstance(rtol, (int, float)) else float(rtol)
    if not isinstance(rtol, float):
        rtol = reshape(rtol, rtol.shape + (1,))
    return sum(lax.convert_element_type(lax.gt_p.bind(s, rtol), np.int32), axis=-1)


def cond(x: Any, p: Any = None) -> Array:
    """Condition number: ``p`` None/2 (largest over smallest singular value), -2, or any matrix-norm ``ord``
    (square matrices: ``norm(x, p) * norm(inv(x), p)``). A singular matrix gives inf.

    >>> cond(fnp.array([[1.0, 0.0], [0.0, 2.0]]))
    Array(2., dtype=float32)
    """
    x = _matrix("cond", x)
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"linalg.cond: input array must not be empty; got {describe(x)}")
    if p is None or p == 2:
        s = svdvals(x)
        return divide(s[..., 0], s[..., -1])
    if p == -2:
        s = svdvals(x)
        r = divide(s[..., -1], s[..., 0])
    else:
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"linalg.cond: for p={p!r}, the matrix must be square; got {describe(x)}")
        r = multiply(norm(x, ord=p, axis=(-2, -1)), norm(inv(x), ord=p, axis=(-2, -1)))
    bad = max(lax.convert_element_type(isnan(x), np.int32), axis=(-2, -1))
    return where(lax.convert_element_type(isnan(r), np.int32) > bad, np.inf, r)

