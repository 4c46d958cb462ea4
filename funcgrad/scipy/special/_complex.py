"""The complex-valued functions of ``funcgrad.scipy.special``: the Faddeeva function ``wofz`` and the
spherical harmonics ``sph_harm_y``. Shared argument handling is in ``_base``; the real-valued families in
``_gamma``, ``_erf``, ``_logistic`` and ``_bessel``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from funcgrad import _dtypes, lax
from funcgrad._core import Array, ConcretizationError, Tracer
import funcgrad.numpy as fnp
from funcgrad.numpy._base import arr
from funcgrad.lax import _special as _p
from funcgrad.scipy.special._base import _floats, _static_int
from funcgrad.typing import ArrayLike


def _as_complex(name: str, z: Any) -> Any:
    """``z`` as a complex array (floats: complex64 for float32 and below, complex128 for float64)."""
    (z,) = _floats(z, complex_ok=True)
    if z.dtype.kind != "c":
        z = lax.convert_element_type(z, _dtypes.complex_dtype(z.dtype))
    return z


def wofz(z: ArrayLike) -> Array:
    """The Faddeeva function ``w(z) = exp(-z**2) erfc(-iz)``, elementwise; always complex
    (real input gives complex64 / complex128 as its precision, as JAX).

    Holomorphic, differentiable to any order: ``w'(z) = -2 z w(z) + 2i / sqrt(pi)``
    (``grad`` of a real part, ``jacfwd(..., holomorphic=True)`` ... as for any complex function).

    >>> wofz(fnp.array([1.0 + 1.0j, 0.5]))
    Array([0.3047+0.2082j, 0.7788+0.4789j], dtype=complex64)
    """
    return _p.wofz_p.bind(_as_complex("wofz", z))


def _int_operand(name: str, what: str, v: Any) -> Any:
    v = arr(v)
    if v.dtype.kind not in "iub":
        raise TypeError(f"{name}: `{what}` must be an integer array, got {_dtypes.describe(v)}; "
                        "convert with .astype(int)")
    return lax.convert_element_type(v, _dtypes.int_)


def _legendre_table(x: Any, s: Any, n_max: int) -> list:
    """The normalised associated Legendre functions with Condon-Shortley phase,
    ``sqrt((2l+1)/(4 pi) (l-k)!/(l+k)!) P_l^k(x)`` for ``0 <= k <= l <= n_max`` (``x = cos theta``,
    ``s = sin theta``), as ``table[k][l]`` (None for ``k > l``), by the stable three-term recurrence
    in ``l`` from the diagonal ``k = l``: only array ops, so differentiable to any order in theta."""
    table = [[None] * (n_max + 1) for _ in range(n_max + 1)]
    diag = lax.add(lax.mul(x, 0.0), 1.0 / math.sqrt(4.0 * math.pi))
    for k in range(n_max + 1):
        if k > 0:
            diag = lax.mul(lax.mul(diag, s), -math.sqrt((2.0 * k + 1.0) / (2.0 * k)))
        table[k][k] = diag
        if k + 1 <= n_max:
            table[k][k + 1] = lax.mul(lax.mul(x, diag), math.sqrt(2.0 * k + 3.0))
        for n in range(k + 2, n_max + 1):
            a = math.sqrt((4.0 * n * n - 1.0) / (n * n - k * k))
            b = math.sqrt(((n - 1.0) ** 2 - k * k) / (4.0 * (n - 1.0) ** 2 - 1.0))
            table[k][n] = lax.mul(lax.sub(lax.mul(x, table[k][n - 1]), lax.mul(table[k][n - 2], b)), a)
    return table


def sph_harm_y(n: Any, m: ArrayLike, theta: Any, phi: Any, diff_n: int | None = None, n_max: int | None = None) -> Any:
    """The spherical harmonics ``Y_n^m(theta, phi)`` (scipy's convention: ``theta`` the polar angle in
    [0, pi], ``phi`` the azimuth; Condon-Shortley phase included), complex.

    ``n`` (degree >= 0) and ``m`` (order) are integer arrays; ``n``, ``m``, ``theta``, ``phi``
    broadcast together (JAX requires 1-d arrays of one length; those work the same here), and
    scalars give shape ``(1,)`` as JAX. ``n_max`` is the largest degree, a static int (default
    ``max(n)``, which needs a concrete ``n``: pass ``n_max`` under jit/vmap); degrees above it are
    clipped to ``n_max`` as JAX. ``|m| > n`` gives 0. ``diff_n`` raises NotImplementedError (as JAX).
    Differentiable in ``theta`` and ``phi`` to any order (no gradient in ``n``, ``m``).
    Cost: O(n_max**2) array ops (the whole Legendre table up to ``n_max``).

    >>> sph_harm_y(fnp.array([2]), fnp.array([1]), fnp.array([0.5]), fnp.array([0.3]))
    Array([-0.3105-0.0961j], dtype=complex64)
    """
    if diff_n is not None:
        raise NotImplementedError("sph_harm_y: the 'diff_n' argument is not supported (as in JAX)")
    n = _int_operand("sph_harm_y", "n", n)
    m = _int_operand("sph_harm_y", "m", m)
    if n_max is None:
        if isinstance(n, Tracer):
            raise ConcretizationError("sph_harm_y: `n_max` must be given as a static int when `n` is traced "
                                      "(under jit, vmap or grad), e.g. sph_harm_y(n, m, theta, phi, n_max=4)")
        n_max = int(np.max(np.asarray(n))) if n.size else 0
    n_max = _static_int("sph_harm_y", "n_max", n_max)
    if n_max < 0:
        raise ValueError(f"sph_harm_y: n_max must be >= 0, got {n_max}")
    theta, phi = _floats(theta, phi, name="sph_harm_y")
    try:
        shape = np.broadcast_shapes(n.shape, m.shape, theta.shape, phi.shape)
    except ValueError:
        raise ValueError(f"sph_harm_y: n {_dtypes.describe(n)}, m {_dtypes.describe(m)}, theta "
                         f"{_dtypes.describe(theta)} and phi {_dtypes.describe(phi)} cannot be broadcast "
                         "together") from None
    shape = shape or (1,)
    n, m, theta, phi = (fnp.broadcast_to(v, shape) for v in (n, m, theta, phi))
    table = _legendre_table(lax.cos(theta), lax.sin(theta), n_max)
    zero = lax.mul(theta, 0.0)
    flat = [table[k][l] if k <= l else zero for k in range(n_max + 1) for l in range(n_max + 1)]  # noqa: E741
    am = lax.abs(m)
    index = lax.add(lax.mul(fnp.clip(am, 0, n_max), n_max + 1), fnp.clip(n, 0, n_max))
    legendre = fnp.take_along_axis(fnp.stack(flat), index[None], axis=0, mode="clip")[0]
    legendre = fnp.where(am > n_max, 0.0, legendre)     # |m| > n_max >= n: 0, as scipy
    angle = lax.mul(lax.convert_element_type(am, phi.dtype), phi)
    y = lax.complex(lax.mul(legendre, lax.cos(angle)), lax.mul(legendre, lax.sin(angle)))
    odd = lax.eq(lax.mod(am, 2), 1)
    negative = fnp.where(odd, lax.neg(lax.conj(y)), lax.conj(y))
    return fnp.where(m < 0, negative, y)
