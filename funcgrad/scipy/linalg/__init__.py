"""``funcgrad.scipy.linalg``: ``jax.scipy.linalg`` over funcgrad's decomposition primitives.

Differentiable (any order), batched over leading dimensions where JAX is, and usable under jit/vmap.
As in JAX, nothing raises LinAlgError: singular systems give inf/NaN, a matrix that is not positive
definite gives a NaN Cholesky factor. ``overwrite_*``/``check_finite`` are accepted and ignored (they
have no meaning for immutable arrays), as in JAX.

``sqrtm``, ``funm``, ``rsf2csf`` and ``schur(output='complex')`` return complex arrays (as JAX) and
have no derivatives (as JAX: they go through the Schur decomposition); ``dft`` is a constant.
Not available: generalized eigenproblems (``eigh(a, b)``, not in JAX either).

The functions live in ``_solve`` (Cholesky, LU, triangular and general solves, det, inv, Sylvester),
``_decomp`` (eigh, svd, qr, Schur, Hessenberg, polar), ``_matfuncs`` (expm, sqrtm, funm) and
``_special_matrices`` (toeplitz, hankel, block_diag, dft, ...); ``_base`` holds their shared checks.
"""
from __future__ import annotations

from funcgrad.scipy.linalg._decomp import (eigh, eigh_tridiagonal, hessenberg, polar, qr, qr_multiply, rsf2csf, schur,
                                           svd)
from funcgrad.scipy.linalg._matfuncs import expm, expm_frechet, funm, sqrtm
from funcgrad.scipy.linalg._solve import (cho_factor, cho_solve, cholesky, det, inv, lu, lu_factor, lu_solve, solve,
                                          solve_sylvester, solve_triangular)
from funcgrad.scipy.linalg._special_matrices import (block_diag, circulant, companion, convolution_matrix, dft, fiedler,
                                                     fiedler_companion, hadamard, hankel, helmert, hilbert, invhilbert,
                                                     invpascal, leslie, pascal, toeplitz)

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
           "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion", "funm",
           "hadamard", "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu",
           "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve",
           "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]
