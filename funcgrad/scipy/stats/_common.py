"""Argument handling shared by the funcgrad.scipy.stats distributions."""
from __future__ import annotations

import math
from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.special import _floats

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

    An unrolled Cholesky and forward substitution over the static dimension ``n``, written with
    array ops (so grad, vmap and jit apply); the cost is O(n) Python steps, meant for small ``n``.
    """
    n = cov.shape[-1]
    cols = []      # column j of L, shape (..., n), zero above row j
    rows = fnp.arange(n)
    for j in range(n):
        v = cov[..., :, j]
        for c in cols:
            v = v - c * c[..., j:j + 1]
        d = fnp.sqrt(v[..., j:j + 1])
        cols.append(fnp.where(rows >= j, v / d, 0.0))
    ys = []
    for j in range(n):
        acc = r[..., j]
        for k in range(j):
            acc = acc - cols[k][..., j] * ys[k]
        ys.append(acc / cols[j][..., j])
    y = fnp.stack(ys, axis=-1)
    logdet = sum(fnp.log(cols[j][..., j]) for j in range(n))
    return y, logdet
