"""``funcgrad.scipy.stats``: jax.scipy.stats's distributions (one module each: ``norm.logpdf``,
``gamma.cdf`` ...) and ``mode``, ``rankdata``, ``sem``, over funcgrad's primitives (grad, vmap, jit apply)."""
from __future__ import annotations

from funcgrad.scipy.stats import (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm,
                                  geom, gumbel_l, gumbel_r, laplace, logistic, multinomial, multivariate_normal,
                                  nbinom, norm, pareto, poisson, t, truncnorm, uniform, vonmises, wrapcauchy)
from funcgrad.scipy.stats._kde import gaussian_kde
from funcgrad.scipy.stats._summary import ModeResult, mode, rankdata, sem

__all__ = [
    "ModeResult", "bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma",
    "gaussian_kde", "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "mode", "multinomial",
    "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "rankdata", "sem", "t", "truncnorm", "uniform",
    "vonmises", "wrapcauchy",
]
