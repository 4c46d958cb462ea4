"""What the functions of ``funcgrad.scipy.linalg`` share: argument checks (a square matrix, a matrix, a
right-hand side as a column), the batched transpose ``_mT`` and triangle masks, and the complex dtype that
goes with a real one. The functions are in ``_solve`` (factorizations and solves), ``_decomp``
(eigen/singular/QR/Schur/Hessenberg/polar decompositions), ``_matfuncs`` (matrix functions) and
``_special_matrices``.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, promote_inexact
from funcgrad.numpy._elementwise import multiply
from funcgrad.numpy._shape import reshape
from funcgrad import lax


_max, _min = builtins.max, builtins.min


def _mT(x: Any) -> Any:
    nd = x.ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _square(name: str, a: Any) -> Any:
    (a,) = promote_inexact(arr(a))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"scipy.linalg.{name}: expected a square matrix (shape (..., n, n)), got {describe(a)}")
    return a


def _as_matrix_rhs(name: str, a: Any, b: Any) -> tuple[Any, bool]:
    """b (n,) -> (n, 1) (and a flag to undo it); b (..., n, k) as is."""
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"scipy.linalg.{name}: the right-hand side {describe(b)} must have length {n} to match "
                             f"{describe(a)}")
        return reshape(b, (n, 1)), True
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"scipy.linalg.{name}: the right-hand side {describe(b)} must have shape (n,) or (..., n, k) "
                         f"with n = {n} to match {describe(a)}")
    return b, False

def _matrix(name: str, a: Any) -> Any:
    (a,) = promote_inexact(arr(a))
    if a.ndim < 2:
        raise ValueError(f"scipy.linalg.{name}: expected a matrix (shape (..., m, n)), got {describe(a)}")
    return a


def _nl_tril(x: Any, k: int = 0) -> Any:
    m, n = x.shape[-2:]
    return multiply(x, lax.convert_element_type(np.tri(m, n, k), x.dtype))


def _nl_triu(x: Any, k: int = 0) -> Any:
    m, n = x.shape[-2:]
    return multiply(x, lax.convert_element_type(1.0 - np.tri(m, n, k - 1), x.dtype))


def _complex_dtype_of(a: Any) -> Any:
    """complex64 for float32/float16/complex64, complex128 for float64/complex128."""
    return np.dtype(np.complex128) if a.dtype in (np.float64, np.complex128) else np.dtype(np.complex64)
