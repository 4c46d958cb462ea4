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

The functions live in ``_products`` (matmul, tensordot, vecdot, cross, outer, diagonal, trace, multi_dot,
matrix_power), ``_decomp`` (cholesky, eigh, eig, svd, qr), ``_solve`` (solve, inv, det, slogdet, pinv,
lstsq, tensorinv, tensorsolve) and ``_norms`` (norm, vector_norm, matrix_norm, matrix_rank, cond);
``_base`` holds the named result types and shared helpers.
"""
from __future__ import annotations

from funcgrad.numpy.linalg._base import EighResult, EigResult, QRResult, SlogdetResult, SVDResult
from funcgrad.numpy.linalg._decomp import cholesky, eig, eigh, eigvals, eigvalsh, qr, svd, svdvals
from funcgrad.numpy.linalg._norms import cond, matrix_norm, matrix_rank, norm, vector_norm
from funcgrad.numpy.linalg._products import (cross, diagonal, matmul, matrix_power, matrix_transpose, multi_dot, outer,
                                             tensordot, trace, vecdot)
from funcgrad.numpy.linalg._solve import det, inv, lstsq, pinv, slogdet, solve, tensorinv, tensorsolve

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer",
           "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
           "vecdot", "vector_norm", "EigResult", "EighResult", "QRResult", "SlogdetResult", "SVDResult"]
