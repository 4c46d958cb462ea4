"""Argument handling shared by the funcgrad.scipy.stats distributions."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import funcgrad.numpy as fnp
from funcgrad.scipy.linalg import solve_triangular
from funcgrad.scipy.special._base import _floats

LOG_2PI = math.log(2.0 * math.pi)
NAN, INF = float("nan"), float("inf")


def promote(*xs: Any, broadcast: bool = True) -> list:
    """The operands as arrays of their common float dtype (ints and bools: the default float).

    With ``broadcast`` (elementwise distributions) operands that do not broadcast together raise a
    ValueError naming the distribution function."""
    return _floats(*xs, check=broadcast)


def cholesky_solve_logdet(cov, r):
    """``(y, sum(log diag L))`` with ``cov = L L^T`` and ``L y = r`` (both batched over leading axes,
    which broadcast: one ``(n, n)`` matrix serves every right-hand side).

    ``funcgrad.numpy.linalg.cholesky`` (which symmetrizes ``cov``, as JAX's lax.linalg.cholesky) and
    ``funcgrad.scipy.linalg.solve_triangular``: differentiable to any order, under vmap and jit. A
    matrix that is not positive definite gives NaN (as JAX).
    """
    n = cov.shape[-1]
    L = fnp.linalg.cholesky(cov)
    if cov.ndim == 2:
        # one matrix: every right-hand side as a column of one (n, k) system
        lead = r.shape[:-1]
        cols = fnp.transpose(fnp.reshape(r, (-1, n)))
        y = fnp.reshape(fnp.transpose(solve_triangular(L, cols, lower=True)), lead + (n,))
    else:
        lead = np.broadcast_shapes(cov.shape[:-2], r.shape[:-1])
        L_b = fnp.broadcast_to(L, lead + (n, n))
        r_b = fnp.broadcast_to(r, lead + (n,))
        y = solve_triangular(L_b, r_b[..., None], lower=True)[..., 0]
    logdet = fnp.sum(fnp.log(fnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)
    return y, logdet
