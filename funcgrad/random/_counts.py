"""Poisson, binomial and multinomial (JAX's rejection loops over the whole array)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import Array, Tracer, describe
from funcgrad.dtypes import default_float_dtype
from funcgrad.lax import convert_element_type as convert
from funcgrad.random._continuous import _params, uniform
from funcgrad.random._keys import _as, _shape, _split2, _split_words, _splitn, _start


# --------------------------------------------------------------------------
# Poisson, binomial, multinomial (JAX's loops over the whole array)
# --------------------------------------------------------------------------


def _any(x: Any) -> Any:
    """Whether any element of the boolean array ``x`` is True (a 0-d bool)."""
    return fnp.sum(convert(x, np.int32)) > 0


def _poisson_knuth(k: Any, lam: Any, shape: tuple[int, ...]) -> Any:
    """Knuth: count uniforms until their product drops below exp(-lam) (lam < 10)."""
    def body(carry):
        n, key_, log_prod = carry
        key_, sub = _split2(key_)
        n = fnp.where(log_prod > -lam, n + 1, n)
        return n, key_, log_prod + fnp.log(uniform(sub, shape, lam.dtype))

    def cond(carry):
        return _any(carry[2] > -lam)

    n, _, _ = lax.while_loop(cond, body, (fnp.zeros(shape, lam.dtype), k, fnp.zeros(shape, lam.dtype)))
    return n - 1


def _log_factorial(n: Any) -> Any:
    """log(n!) for integer-valued float ``n >= 0``: Stirling's series with its tabulated tail below 10."""
    return 0.5 * math.log(2 * math.pi) + (n + 0.5) * fnp.log(n + 1) - (n + 1) + _stirling_tail(n)


_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                           0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                           0.00925546218271273, 0.00833056343336287])


def _stirling_tail(n: Any) -> Any:
    """log(n!) - [(n + 1/2) log(n + 1) - (n + 1) + log(sqrt(2 pi))] (JAX's ``_stirling_approx_tail``)."""
    small = n <= 9
    n = fnp.clip(n, 0.0, None)
    kp1sq = (n + 1) * (n + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (n + 1)
    table = fnp.asarray(_STIRLING_TAIL.astype(n.dtype))
    idx = convert(fnp.floor(fnp.clip(fnp.where(n == n, n, 0.0), 0.0, 9.0)), np.int32)   # (NaN: any row)
    return fnp.where(small, fnp.take(table, idx), approx)


def _rejection_draws(key_: Any, shape: tuple[int, ...], dtype: np.dtype) -> tuple[Any, Any, Any, Any]:
    """One round of Hormann's transformed rejection (PTRS, BTRS): the next key, ``u - 1/2``, ``v`` (both
    uniform) and ``1/2 - |u - 1/2|``."""
    key_, sub0, sub1 = _splitn(key_, 3)
    u = uniform(sub0, shape, dtype) - 0.5
    return key_, u, uniform(sub1, shape, dtype), 0.5 - fnp.abs(u)


def _poisson_rejection(k: Any, lam: Any, shape: tuple[int, ...]) -> Any:
    """Hormann's transformed rejection (PTRS), lam >= 10."""
    log_lam = fnp.log(lam)
    b = 0.931 + 2.53 * fnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        k_out, accepted, key_ = carry
        key_, u, v, u_shifted = _rejection_draws(key_, shape, lam.dtype)
        kk = fnp.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = fnp.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t_ = -lam + kk * log_lam - _log_factorial(fnp.maximum(kk, 0.0))
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (kk < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t_))
        return fnp.where(accept, kk, k_out), accepted | accept, key_

    init = (fnp.full(shape, -1, lam.dtype), fnp.zeros(shape, bool), k)
    return lax.while_loop(lambda c: _any(~c[1]), body, init)[0]


def poisson(key: Any, lam: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
            out_sharding: Any = None) -> Any:
    """Poisson(``lam``) integers (Knuth below 10, transformed rejection above; computed in float32, as JAX).

    >>> n = random.poisson(random.key(0), 3.5, (4,))          # i32[4], mean 3.5
    """
    k, dtype = _start("poisson", key, dtype, out_sharding, integer=True)
    shape, (lam,) = _params("poisson", shape, np.dtype(np.float32), lam=lam)
    lam = fnp.broadcast_to(fnp.stop_gradient(lam), shape)
    use_knuth = fnp.isnan(lam) | (lam < 10)
    lam_knuth = fnp.where(use_knuth, lam, np.float32(0))
    lam_rejection = fnp.where(use_knuth | (lam == np.inf), np.float32(1e5), lam)
    result = fnp.where(use_knuth, _poisson_knuth(k, lam_knuth, shape), _poisson_rejection(k, lam_rejection, shape))
    # lam = inf gives 0, as JAX does (an integer cannot hold inf).
    return convert(fnp.where((lam == 0) | (lam == np.inf), np.float32(0), result), dtype)


def _binomial_inversion(k: Any, count: Any, prob: Any, shape: tuple[int, ...]) -> Any:
    log1mp = fnp.log1p(-prob)
    certain = log1mp == 0        # q = 0 (e.g. a last multinomial category): every geometric draw is inf
    log1mp = fnp.where(certain, np.array(-1, prob.dtype), log1mp)

    def body(carry):
        num_geom, geom_sum, key_ = carry
        sub, key_ = _split2(key_)
        num_geom = fnp.where(geom_sum <= count, num_geom + 1, num_geom)
        geom = fnp.ceil(fnp.log(uniform(sub, shape, prob.dtype)) / log1mp)
        geom = fnp.where(certain, np.array(np.inf, prob.dtype), geom)
        return num_geom, geom_sum + geom, key_

    init = (fnp.zeros(shape, prob.dtype), fnp.zeros(shape, prob.dtype), k)
    return lax.while_loop(lambda c: _any(c[1] <= count), body, init)[0] - 1


def _btrs(k: Any, count: Any, prob: Any, shape: tuple[int, ...]) -> Any:
    """Hormann's BTRS transformed rejection (count * prob > 10)."""
    stddev = fnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = fnp.floor((count + 1) * prob)

    def body(carry):
        k_out, accepted, key_ = carry
        key_, u, v, us = _rejection_draws(key_, shape, prob.dtype)
        accept1 = (us >= 0.07) & (v <= v_r)
        kk = fnp.floor((2 * a / us + b) * u + c)
        reject = (kk < 0) | (kk > count)
        kc = fnp.clip(kk, 0.0, count)   # (rejected anyway outside; keeps the logs finite)
        v = fnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * fnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * fnp.log((count - m + 1) / (count - kc + 1))
              + (kc + 0.5) * fnp.log(r * (count - kc + 1) / (kc + 1))
              + _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(kc) - _stirling_tail(count - kc))
        accept = accept1 | (~reject & (v <= ub))
        return fnp.where(accept, kk, k_out), accepted | accept, key_

    init = (fnp.full(shape, -1, prob.dtype), fnp.zeros(shape, bool), k)
    return lax.while_loop(lambda cc: _any(~cc[1]), body, init)[0]


def binomial(key: Any, n: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Binomial(``n``, ``p``) counts as floats (inversion when ``n * min(p, 1-p) <= 10``, else BTRS; JAX's rules).

    NaN or negative ``n``, or ``p`` outside [0, 1] or NaN, give NaN; ``n = inf`` gives inf.

    >>> x = random.binomial(random.key(0), 20.0, 0.3, (4,))   # f32[4], mean 6
    """
    k, dtype = _start("binomial", key, dtype)
    fdtype = p.dtype if isinstance(p, (Array, Tracer)) and _dtypes.kind(p.dtype) == "f" else default_float_dtype()
    shape, (count, prob) = _params("binomial", shape, fdtype, n=n, p=p)
    count = fnp.broadcast_to(fnp.stop_gradient(count), shape)
    prob = fnp.broadcast_to(fnp.stop_gradient(prob), shape)
    p_lt_half = prob < 0.5
    q = fnp.where(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = fnp.isnan(count) | (count < 0.0)
    count_inf = fnp.abs(count) == np.inf
    q_is_nan = fnp.isnan(q)
    q_l_0 = q < 0.0
    q = fnp.where(q_is_nan | q_l_0, np.array(0.01, fdtype), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = fnp.floor(count)
    count_inv = fnp.where(use_inversion, count, np.array(0.0, fdtype))
    count_btrs = fnp.where(use_inversion | count_inf, np.array(1e4, fdtype), count)   # (inf: set below)
    q_btrs = fnp.where(use_inversion, np.array(0.5, fdtype), q)
    samples = fnp.where(use_inversion, _binomial_inversion(k, count_inv, q, shape),
                        _btrs(k, count_btrs, q_btrs, shape))
    samples = convert(samples, dtype)
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = fnp.where(invalid, np.array(np.nan, dtype), samples)
    samples = fnp.where(count_inf & ~invalid, np.array(np.inf, dtype), samples)
    finite_count = convert(fnp.where(count_inf, np.array(0, fdtype), count), dtype)
    return fnp.where(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples, finite_count - samples)


def multinomial(key: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None, dtype: Any = None,
                unroll: int | bool = 1) -> Any:
    """Multinomial counts (as floats): ``n`` trials over the categories on ``p``'s last axis.

    Drawn category by category with binomials of the remaining count, as JAX;
    ``shape`` (ending with the number of categories) batches the draws.

    >>> c = random.multinomial(random.key(0), 10.0, fnp.array([0.2, 0.3, 0.5]))    # f32[3], sums to 10
    """
    k, dtype = _start("multinomial", key, dtype)
    fdtype = default_float_dtype()
    p = _as(p, fdtype, "multinomial", "p")
    n = _as(n, fdtype, "multinomial", "n")
    if p.ndim < 1:
        raise ValueError(f"random.multinomial: p must have at least 1 dimension (the categories), got {describe(p)}")
    shape = tuple(p.shape) if shape is None else _shape(shape, "multinomial")
    if not shape or shape[-1] != p.shape[-1]:
        raise ValueError(f"random.multinomial: shape {shape} must end with the number of categories {p.shape[-1]}")
    n = fnp.broadcast_to(fnp.stop_gradient(n), shape[:-1])
    p = fnp.moveaxis(fnp.broadcast_to(fnp.stop_gradient(p), shape), -1, 0)
    remaining = fnp.flip(fnp.cumsum(fnp.flip(p, 0), axis=0), 0)
    ratios = p / fnp.where(remaining == 0, np.array(1, fdtype), remaining)
    keys = _split_words(k, int(ratios.shape[0]))

    def step(remainder, ratio_key):
        ratio, key_ = ratio_key
        count = binomial(key_, remainder, fnp.clip(ratio, 0.0, 1.0), dtype=fdtype)
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return convert(fnp.moveaxis(counts, 0, -1), dtype)
