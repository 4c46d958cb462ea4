"""``funcgrad.scipy.special``: jax.scipy.special's functions over funcgrad's primitives.

Special functions are elementwise primitives (``funcgrad.primitives.special``,
computed by scipy.special) with derivative rules written with primitives, so
grad, vmap and jit work and derivatives can be taken again.  Integer and bool
inputs are computed in the default float dtype.  Complex inputs are taken where JAX
takes them (``wofz``, ``loggamma``, ``gamma``, ``expit``, ``logit``, ``xlogy``,
``xlog1py``, ``boxcox``, ``boxcox1p``, ``logsumexp``, ``softmax``, ``log_softmax``;
``sph_harm_y`` returns complex values); the other functions raise a TypeError.

Differences from JAX (see each docstring): the derivatives of ``gammainc``/``gammaincc``
with respect to ``a``, of ``hyp1f1``/``hyp2f1`` with respect to their parameters and
of ``zeta`` with respect to ``x`` are numerical (Richardson-extrapolated central
differences in float64, relative error about 1e-10) and first order only: taking
them again raises NotImplementedError.

The functions live by family in ``_gamma`` (gamma, beta, incomplete gamma/beta, factorial, comb),
``_erf`` (error functions, the normal distribution), ``_logistic`` (expit/logit, entropies, xlogy,
Box-Cox, logsumexp, softmax), ``_bessel`` (Bessel functions, integrals, hypergeometric, zeta) and
``_complex`` (wofz, sph_harm_y); ``_base`` converts and checks their arguments.
"""
from __future__ import annotations

from funcgrad.scipy.special._bessel import (bessel_jn, exp1, expi, expn, fresnel, hyp1f1, hyp2f1, i0, i0e, i1, i1e,
                                            sici, spence, zeta)
from funcgrad.scipy.special._complex import sph_harm_y, wofz
from funcgrad.scipy.special._erf import dawsn, erf, erfc, erfcx, erfinv, log_ndtr, ndtr, ndtri, owens_t
from funcgrad.scipy.special._gamma import (bernoulli, beta, betainc, betaln, comb, digamma, factorial, gamma, gammainc,
                                           gammaincc, gammaln, gammasgn, loggamma, multigammaln, poch, polygamma)
from funcgrad.scipy.special._logistic import (boxcox, boxcox1p, entr, expit, kl_div, log_softmax, logit, logsumexp,
                                              rel_entr, softmax, xlog1py, xlogy)

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn", "digamma", "entr",
    "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit", "expn", "factorial", "fresnel", "gamma", "gammainc",
    "gammaincc", "gammaln", "gammasgn", "hyp1f1", "hyp2f1", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr",
    "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "owens_t", "poch", "polygamma",
    "rel_entr", "sici", "softmax", "spence", "sph_harm_y", "wofz", "xlog1py", "xlogy", "zeta",
]
