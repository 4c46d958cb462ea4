"""Splittable, functional pseudo-random numbers (Threefry-2x32, JAX's scheme).

A *key* names a stream of random bits.  Nothing is stateful: the same key
always gives the same numbers (on every run, machine and thread count, and
under ``jit`` and ``vmap``), and new independent streams come from
:func:`split` or :func:`fold_in`.  Never use one key twice for numbers that
should be independent; split it instead.  Code written for ``jax.random``
runs unchanged and draws the same numbers as JAX 0.10.2 from the same seed.

>>> import funcgrad as fg
>>> from funcgrad import random
>>> key = random.key(0)                          # a typed key, shape ()
>>> key, sub = random.split(key)                 # each shape ()
>>> x = random.normal(sub, (3, 4))               # f32[3,4]
>>> keys = random.split(key, 8)                  # typed keys, shape (8,)
>>> ys = fg.vmap(lambda k: random.uniform(k, (5,)))(keys)   # f32[8,5]
>>> raw = random.PRNGKey(0)                      # the raw u32[2] form works everywhere too

Keys come in two kinds, as in JAX: the raw ``uint32[2]`` array of
:func:`PRNGKey` (and ``split`` of it: ``uint32[n, 2]``), and the typed key
of :func:`key` (a :class:`PRNGKeyArray` of shape ``()``, whose words
:func:`key_data` returns).  Every function takes either kind and returns
keys of the kind it was given.  Typed keys are pytrees over their words, so
they pass through ``jit`` and ``vmap`` (``vmap`` maps the key axes, never the
word axis).

How numbers are made (the algorithms of ``jax.random`` 0.10.2, matched bit
for bit for keys, raw bits, ``uniform`` and everything built on them;
``normal`` to the last bit or so, because XLA's ``erf_inv`` is a different
polynomial from scipy's, which we use):

* the stream: by default JAX's "partitionable" Threefry scheme (JAX's
  default since 0.5): number ``i`` of a draw hashes the 64-bit counter ``i``
  under the key and XORs the two output words; ``split(key, n)`` gives key
  ``i`` = the hash of counter ``i``.  ``fg.config.update("threefry_partitionable",
  False)`` (or ``"jax_threefry_partitionable"``) switches to the classic
  scheme of JAX before 0.5, where the counters are paired first half with
  second half.  The same seed gives different numbers in the two schemes;
* ``uniform``: the top mantissa bits of a word OR-ed into the bit pattern of
  1.0 give a float in [1, 2); minus 1 gives [0, 1) with every value equally
  spaced (2**-23 apart for float32), then scaled to [minval, maxval);
* ``normal``: the inverse-erf method, ``sqrt(2) * erf_inv(u)`` with ``u``
  uniform on (-1, 1) (not Box-Muller: one uniform per normal, and no
  branch);
* ``truncated_normal``: inverse-erf on the uniform interval
  ``[erf(lower/sqrt2), erf(upper/sqrt2))``;
* ``categorical``: the Gumbel-max trick; ``permutation``: sorting by random
  bits (stable argsort), repeated enough rounds to make ties negligible;
* ``gamma`` (and ``beta``, ``dirichlet``, ``chisquare``, ``f``, ``t``,
  ``loggamma``, ``generalized_normal``, ``ball``): Marsaglia-Tsang rejection
  with one key per element, as JAX; ``poisson`` (Knuth below 10, Hormann's
  transformed rejection above) and ``binomial`` (inversion / BTRS) are JAX's
  loops too.

Differences from JAX: ``uniform`` also clamps below ``maxval`` (JAX can
round up to ``maxval`` itself in rare cases); typed keys are a funcgrad
class, not an array dtype, so ``funcgrad.numpy`` functions do not take them
(use :func:`key_data` / :func:`wrap_key_data`); sharding
(``out_sharding``) is not implemented; gamma samples have first and
second derivatives in ``a`` (third derivatives raise); ``multivariate_normal`` and ``orthogonal`` use
``funcgrad.numpy.linalg`` (``cholesky``/``eigh``/``svd``/``qr``).

None of the bit-level primitives has a derivative; the samplers are
differentiable in their float parameters where the sample is a smooth
function of them (``uniform``'s bounds, ``truncated_normal``'s bounds, the
scales and locations), and ``gamma`` (so ``beta``, ``dirichlet``, ...) in
its shape ``a`` by implicit reparameterization, as JAX.

The modules: ``_keys`` (keys, argument checks, split/fold_in, raw bits), ``_continuous`` (uniform,
normal and their transforms, bernoulli, randint), ``_sampling`` (permutation, choice, categorical),
``_gamma_family``, ``_counts`` (poisson, binomial, multinomial) and ``_multivariate``.
"""
from __future__ import annotations

from funcgrad.random import _keys
from funcgrad.random._keys import (key, PRNGKey, PRNGKeyArray, key_data, wrap_key_data, key_impl, key_dtype, clone,
                                   split, fold_in, bits)
from funcgrad.random._continuous import (uniform, normal, bernoulli, randint, gumbel, truncated_normal, exponential,
                                         laplace, logistic, cauchy, rademacher, pareto, rayleigh, maxwell,
                                         double_sided_maxwell, weibull_min, lognormal, triangular, wald, geometric)
from funcgrad.random._sampling import permutation, choice, categorical
from funcgrad.random._gamma_family import (gamma, loggamma, beta, dirichlet, chisquare, f, t, generalized_normal,
                                           ball)
from funcgrad.random._counts import poisson, binomial, multinomial
from funcgrad.random._multivariate import multivariate_normal, orthogonal

__all__ = ["key", "PRNGKey", "PRNGKeyArray", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
           "split", "fold_in", "bits", "uniform", "normal", "bernoulli", "randint", "permutation", "choice",
           "categorical", "gumbel", "truncated_normal", "exponential", "laplace", "logistic", "cauchy",
           "rademacher", "pareto", "rayleigh", "maxwell", "double_sided_maxwell", "weibull_min", "lognormal",
           "triangular", "wald", "geometric", "gamma", "loggamma", "beta", "dirichlet", "chisquare", "f", "t",
           "generalized_normal", "ball", "poisson", "binomial", "multinomial", "multivariate_normal",
           "orthogonal"]

KeyDtype = _keys.KeyDtype   # public as before, though not in __all__
