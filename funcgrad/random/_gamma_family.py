"""Gamma and the laws built on it (beta, dirichlet, chisquare, f, t, ...)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import funcgrad.lax as lax
from funcgrad import dtypes as _dtypes
from funcgrad.api import custom_jvp as _fg_custom_jvp, vmap as _fg_vmap
import funcgrad.numpy as fnp
from funcgrad.core import describe
from funcgrad.lax import convert_element_type as convert
from funcgrad.random._continuous import _params, exponential, normal, rademacher, uniform
from funcgrad.random._keys import (_as, _check_broadcast, _check_key, _count, _float_dtype, _no_sharding, _numel,
                                   _shape, _split2, _split_words, _splitn, _start)


# --------------------------------------------------------------------------
# Gamma and the laws built on it
# --------------------------------------------------------------------------


def _gamma_one(k: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha) sample (or its log) from the key words ``k``: Marsaglia-Tsang, JAX's ``_gamma_one``.

    ``alpha < 1`` is boosted to ``alpha + 1`` and multiplied by ``u ** (1/alpha)`` (added in log space).
    """
    dtype = alpha.dtype
    zero, one = np.array(0, dtype), np.array(1, dtype)
    boost_mask = alpha >= one
    alpha_orig = alpha
    alpha = fnp.where(boost_mask, alpha, alpha + one)
    d = alpha - 1.0 / 3.0
    c = (1.0 / 3.0) / fnp.sqrt(d)

    def cond_fn(state):
        _, X, V, U = state
        return fnp.logical_and(U >= 1 - 0.0331 * (X * X), fnp.log(U) >= X * 0.5 + d * (1 - V + fnp.log(V)))

    def body_fn(state):
        def next_kxv(kxv):
            key_, _, _ = kxv
            key_, sub = _split2(key_)
            x = normal(sub, (), dtype)
            return key_, x, 1 + x * c

        key_ = state[0]
        key_, x_key, u_key = _splitn(key_, 3)
        _, x, v = lax.while_loop(lambda kxv: kxv[2] <= zero, next_kxv, (x_key, zero, -one))
        return key_, x * x, v * v * v, uniform(u_key, (), dtype)

    k, sub = _split2(k)
    _, _, V, _ = lax.while_loop(cond_fn, body_fn, (k, zero, one, np.array(2, dtype)))
    if log_space:
        log_samples = -exponential(sub, (), dtype)
        log_boost = fnp.where(fnp.logical_or(boost_mask, log_samples == 0), zero, log_samples * (one / alpha_orig))
        return convert(fnp.log(d) + fnp.log(V) + log_boost, dtype)   # (float16 math may widen)
    samples = 1 - uniform(sub, (), dtype)
    boost = fnp.where(boost_mask, one, fnp.power(samples, one / alpha_orig))
    return convert(d * V * boost, dtype)


def _gamma_samples(k: Any, a: Any, log_space: bool) -> Any:
    """Gamma(a) samples of ``a``'s shape: element ``i`` from key ``split(k, a.size)[i]``, as JAX."""
    n = _numel(tuple(a.shape))
    if n == 0:
        return fnp.zeros(a.shape, a.dtype)
    keys = _split_words(k, n)
    samples = _fg_vmap(lambda kk, aa: _gamma_one(kk, aa, log_space))(keys, fnp.reshape(a, (n,)))
    return fnp.reshape(samples, a.shape)


def _gamma_sample_rule(log_space: bool):
    """``a -> sample`` with JAX's implicit reparameterization derivative: ``dx/da = random_gamma_grad(a, x)``."""
    def sample(k, a):
        return _gamma_samples(k, a, log_space)

    sample = _fg_custom_jvp(sample, nondiff_argnums=(0,))

    @sample.defjvp
    def _(k, primals, tangents):
        (a,), (da,) = primals, tangents
        out = sample(k, a)
        if log_space:
            # d log(x) = dx / x; x = exp(log x) may round to 0: use the smallest normal float then.
            x = fnp.exp(out)
            x = fnp.where(x == 0, np.array(_dtypes.finfo(a.dtype).tiny, a.dtype), x)
            g = lax.random_gamma_grad(a, x) / x
        else:
            g = lax.random_gamma_grad(a, out)
        return out, da * g

    return sample


def _gamma(name: str, key: Any, a: Any, shape: Any, dtype: Any, log_space: bool) -> Any:
    k = _check_key(key, name)
    dtype = _float_dtype(dtype, name)
    shape, (a,) = _params(name, shape, dtype, a=a)
    a = fnp.broadcast_to(a, shape)
    return _GAMMA_RULES[log_space](k, a)


def gamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Gamma(``a``, scale 1) floats (Marsaglia-Tsang rejection, one key per element, as JAX).

    Differentiable in ``a`` (implicit reparameterization, as JAX): the
    derivative of the sample at a fixed uniform; first and second derivatives
    (third derivatives raise ``NotImplementedError``).  Very small ``a`` underflows to 0; use :func:`loggamma`.

    >>> x = random.gamma(random.key(0), 2.5, (4,))              # f32[4], mean 2.5
    """
    _no_sharding(out_sharding, "gamma")
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
             out_sharding: Any = None) -> Any:
    """``log`` of Gamma(``a``) samples, computed in log space (accurate for tiny ``a``, where gamma underflows).

    >>> x = random.loggamma(random.key(0), 0.01, (4,))          # f32[4], large negative numbers
    """
    _no_sharding(out_sharding, "loggamma")
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key: Any, a: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
         out_sharding: Any = None) -> Any:
    """Beta(``a``, ``b``) floats on [0, 1]: ``Ga / (Ga + Gb)`` from two log-gamma draws.

    >>> x = random.beta(random.key(0), 2.0, 5.0, (4,))          # f32[4], mean 2/7
    """
    k, dtype = _start("beta", key, dtype, out_sharding)
    shape, (a, b) = _params("beta", shape, dtype, a=a, b=b)
    key_a, key_b = _split2(k)
    log_a = loggamma(key_a, fnp.broadcast_to(a, shape), shape, dtype)
    log_b = loggamma(key_b, fnp.broadcast_to(b, shape), shape, dtype)
    log_max = fnp.maximum(log_a, log_b)
    ga, gb = fnp.exp(log_a - log_max), fnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key: Any, alpha: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Dirichlet(``alpha``) vectors (last axis of ``alpha``): normalized log-gamma draws.

    ``shape`` is the batch shape; the result has shape ``shape + alpha.shape[-1:]``.

    >>> x = random.dirichlet(random.key(0), fnp.array([1.0, 2.0, 3.0]), (5,))    # f32[5,3], rows sum to 1
    """
    k, dtype = _start("dirichlet", key, dtype, out_sharding)
    alpha = _as(alpha, dtype, "dirichlet", "alpha")
    if alpha.ndim < 1:
        raise ValueError(f"random.dirichlet: alpha must have at least 1 dimension (the categories), got "
                         f"{describe(alpha)}")
    if shape is None:
        shape = tuple(alpha.shape[:-1])
    else:
        shape = _shape(shape, "dirichlet")
        _check_broadcast("dirichlet", shape, alpha[..., 0])
    log_g = loggamma(k, fnp.broadcast_to(alpha, shape + tuple(alpha.shape[-1:])), shape + tuple(alpha.shape[-1:]),
                     dtype)
    log_g = log_g - fnp.max(fnp.stop_gradient(log_g), axis=-1, keepdims=True)
    e = fnp.exp(log_g)
    return e / fnp.sum(e, axis=-1, keepdims=True)


def chisquare(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Chi-square floats with ``df`` degrees of freedom: ``2 * Gamma(df / 2)``.

    >>> x = random.chisquare(random.key(0), 3.0, (4,))          # f32[4], mean 3
    """
    k, dtype = _start("chisquare", key, dtype, out_sharding)
    shape, (df,) = _params("chisquare", shape, dtype, df=df)
    return fnp.exp(loggamma(k, df / 2, shape, dtype)) * 2


def f(key: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
      out_sharding: Any = None) -> Any:
    """F-distributed floats: ``(chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)``.

    >>> x = random.f(random.key(0), 5.0, 10.0, (4,))
    """
    k, dtype = _start("f", key, dtype, out_sharding)
    shape, (dfnum, dfden) = _params("f", shape, dtype, dfnum=dfnum, dfden=dfden)
    key_dfd, key_dfn = _split2(k)
    num = chisquare(key_dfn, dfnum, shape, dtype) / dfnum
    den = chisquare(key_dfd, dfden, shape, dtype) / dfden
    return num / den


def t(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Student's t floats with ``df`` degrees of freedom: ``z * sqrt((df/2) / Gamma(df/2))``.

    >>> x = random.t(random.key(0), 4.0, (4,))
    """
    k, dtype = _start("t", key, dtype, out_sharding)
    shape, (df,) = _params("t", shape, dtype, df=df)
    key_n, key_g = _split2(k)
    n = normal(key_n, shape, dtype)
    half_df = df / 2
    g = gamma(key_g, fnp.broadcast_to(half_df, shape), shape, dtype)
    return n * fnp.sqrt(half_df / g)


def generalized_normal(key: Any, p: float, shape: Sequence[int] | int = (), dtype: Any = None, *,
                       out_sharding: Any = None) -> Any:
    """Generalized normal floats (density ``∝ exp(-|x|**p)``): a random sign times ``Gamma(1/p) ** (1/p)``.

    >>> x = random.generalized_normal(random.key(0), 1.5, (4,))
    """
    k, dtype = _start("generalized_normal", key, dtype, out_sharding)
    shape = _shape(shape, "generalized_normal")
    k1, k2 = _split2(k)
    g = gamma(k1, fnp.full(shape, 1 / _as(p, dtype, "generalized_normal", "p"), dtype), shape, dtype)
    r = rademacher(k2, shape, dtype)
    return r * g ** (1 / p)


def ball(key: Any, d: int, p: float = 2, shape: Sequence[int] | int = (), dtype: Any = None, *,
         out_sharding: Any = None) -> Any:
    """Points uniform in the ``d``-dimensional unit ``p``-norm ball, shape ``shape + (d,)``.

    >>> x = random.ball(random.key(0), 3, shape=(5,))          # f32[5,3], every row's 2-norm below 1
    """
    k = _check_key(key, "ball")
    _no_sharding(out_sharding, "ball")
    d = _count(d, "ball", "d")
    dtype = _float_dtype(dtype, "ball")
    shape = _shape(shape, "ball")
    k1, k2 = _split2(k)
    g = generalized_normal(k1, p, shape + (d,), dtype)
    e = exponential(k2, shape, dtype)
    return g / ((fnp.sum(fnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]



_GAMMA_RULES = {False: _gamma_sample_rule(False), True: _gamma_sample_rule(True)}
