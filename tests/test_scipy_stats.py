"""funcgrad.scipy.stats against scipy.stats in float64 (and float32), gradients w.r.t. x, loc, scale
and the shape parameters against finite differences, vmap vs a loop, jit vs eager."""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Sequence

import numpy as np
import pytest
import scipy.stats as ss

import funcgrad as fg
import funcgrad.numpy as fnp
import funcgrad.scipy.stats as fst
from funcgrad.testing import check_grads
from conftest import config_set


def normal(rng, shape):
    return rng.standard_normal(shape)


def pos(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def big(rng, shape):
    return rng.uniform(1.5, 4.0, shape)


def prob(rng, shape):
    return rng.uniform(0.1, 0.9, shape)


def unit(rng, shape):
    return rng.uniform(0.1, 0.9, shape)


def angle(rng, shape):
    return rng.uniform(0.2, 6.0, shape)


def counts(rng, shape):
    return rng.integers(0, 5, shape).astype(np.float64)


def above1(rng, shape):
    return rng.uniform(1.2, 4.0, shape)


@dataclasses.dataclass
class Row:
    name: str                     # "norm.logpdf"
    ref: Callable                 # scipy reference
    gens: Sequence[Callable]
    diff: Sequence[int] = (0,)
    order: int = 2
    rtol32: float = 1e-4
    shape: tuple = (2, 3)
    grad_tol: float | None = None
    rtol64: float = 1e-9

    @property
    def fn(self):
        mod, f = self.name.split("[")[0].split(".")
        return getattr(getattr(fst, mod), f)


def _ls(dist, funcs, gens, ref=None, diff=None, **kw):
    """Rows for a location-scale distribution: args (x, *shape params, loc, scale)."""
    rows = []
    for f in funcs:
        scipy_f = getattr(ref or getattr(ss, dist), f)
        d = diff if diff is not None else tuple(range(len(gens)))
        rows.append(Row(f"{dist}.{f}", scipy_f, gens, d, **kw))
    return rows


X_LS = [normal, normal, pos]            # x, loc, scale
CONT = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]

ROWS = (
    _ls("norm", CONT, X_LS)
    + _ls("norm", ["ppf", "isf"], [prob, normal, pos])
    + _ls("cauchy", CONT, X_LS)
    + _ls("cauchy", ["ppf", "isf"], [prob, normal, pos])
    + _ls("logistic", ["logpdf", "pdf", "cdf", "sf"], X_LS)
    + _ls("logistic", ["ppf", "isf"], [prob, normal, pos])
    + _ls("laplace", ["logpdf", "pdf", "cdf"], [lambda r, s: r.standard_normal(s) + 3.0 * np.sign(
        r.standard_normal(s)), normal, pos], diff=(0, 2))   # away from the kink at loc
    + _ls("uniform", ["logpdf", "pdf"], [lambda r, s: r.uniform(0.2, 0.8, s), lambda r, s: 0.0 * r.random(s),
                                         lambda r, s: 1.0 + 0.0 * r.random(s)], diff=(0, 1, 2))
    + _ls("uniform", ["cdf"], [lambda r, s: r.uniform(0.2, 0.8, s), lambda r, s: r.uniform(-0.1, 0.1, s),
                               lambda r, s: r.uniform(1.0, 1.2, s)])
    + _ls("uniform", ["ppf"], [prob, normal, pos])
    + _ls("expon", CONT, [lambda r, s: r.uniform(1.0, 3.0, s), lambda r, s: r.uniform(-0.5, 0.5, s), pos])
    + _ls("expon", ["ppf"], [prob, normal, pos])
    + [Row("t.logpdf", ss.t.logpdf, [normal, big, normal, pos], (0, 1, 2, 3)),
       Row("t.pdf", ss.t.pdf, [normal, big, normal, pos], (0, 1, 2, 3))]
    + _ls("gamma", ["logpdf", "pdf"], [lambda r, s: r.uniform(2.0, 4.0, s), big, lambda r, s: r.uniform(-.5, .5, s),
                                       pos])
    + _ls("gamma", ["cdf", "sf", "logcdf", "logsf"], [lambda r, s: r.uniform(2.0, 4.0, s), big,
                                                      lambda r, s: r.uniform(-.5, .5, s), pos], diff=(0, 2, 3))
) + [
    Row("gamma.cdf[a]", ss.gamma.cdf, [lambda r, s: r.uniform(2.0, 4.0, s), big], (1,), order=1, grad_tol=1e-6),
    Row("gamma.logsf[a]", ss.gamma.logsf, [lambda r, s: r.uniform(2.0, 4.0, s), big], (1,), order=1, grad_tol=1e-6),
] + (
    _ls("chi2", CONT, [lambda r, s: r.uniform(2.0, 4.0, s), big, lambda r, s: r.uniform(-.5, .5, s), pos],
        diff=(0, 2, 3))
    + [Row("chi2.logpdf[df]", ss.chi2.logpdf, [big, big], (1,))]
    + _ls("beta", ["logpdf", "pdf"], [lambda r, s: r.uniform(0.2, 0.8, s), big, big,
                                      lambda r, s: r.uniform(-.1, .1, s), lambda r, s: r.uniform(1.0, 1.2, s)])
    + _ls("beta", ["cdf", "sf", "logcdf", "logsf"], [lambda r, s: r.uniform(0.2, 0.8, s), big, big,
                                                     lambda r, s: r.uniform(-.1, .1, s),
                                                     lambda r, s: r.uniform(1.0, 1.2, s)], diff=(0, 3, 4))
    + _ls("pareto", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"],
          [lambda r, s: r.uniform(2.0, 4.0, s), big, lambda r, s: r.uniform(-.3, .3, s), pos])
    + _ls("pareto", ["ppf"], [prob, big, normal, pos])
    + _ls("gumbel_r", CONT, [normal, normal, pos]) + _ls("gumbel_r", ["ppf"], [prob, normal, pos])
    + _ls("gumbel_l", CONT, [normal, normal, pos]) + _ls("gumbel_l", ["ppf"], [prob, normal, pos])
    + [Row("gennorm.logpdf", ss.gennorm.logpdf, [lambda r, s: r.uniform(0.3, 2.0, s) * np.sign(r.standard_normal(s)),
                                                 big], (0, 1)),
       Row("gennorm.pdf", ss.gennorm.pdf, [lambda r, s: r.uniform(0.3, 2.0, s), big], (0, 1)),
       Row("gennorm.cdf", ss.gennorm.cdf, [lambda r, s: r.uniform(0.3, 2.0, s) * np.sign(r.standard_normal(s)),
                                           big], (0,)),
       Row("gennorm.cdf[beta]", ss.gennorm.cdf, [lambda r, s: r.uniform(0.3, 2.0, s), big], (1,), order=1,
           grad_tol=1e-6)]
    + _ls("truncnorm", CONT, [lambda r, s: r.uniform(-0.9, 1.9, s), lambda r, s: r.uniform(-2.0, -1.0, s),
                              lambda r, s: r.uniform(2.0, 3.0, s), lambda r, s: r.uniform(-.1, .1, s),
                              lambda r, s: r.uniform(1.0, 1.2, s)], rtol32=1e-3)
    + [Row("truncnorm.logpdf[tail]", ss.truncnorm.logpdf, [lambda r, s: r.uniform(6.1, 7.0, s),
                                                           lambda r, s: 6.0 + 0.0 * r.random(s),
                                                           lambda r, s: 8.0 + 0.0 * r.random(s)], (0, 1, 2),
           rtol32=1e-3)]
    + [Row("vonmises.logpdf", ss.vonmises.logpdf, [lambda r, s: r.uniform(-3.0, 3.0, s), pos], (0, 1)),
       Row("vonmises.pdf", ss.vonmises.pdf, [lambda r, s: r.uniform(-3.0, 3.0, s), pos], (0, 1)),
       Row("wrapcauchy.logpdf", ss.wrapcauchy.logpdf, [angle, unit], (0, 1)),
       Row("wrapcauchy.pdf", ss.wrapcauchy.pdf, [angle, unit], (0, 1))]
    # discrete: the counts are not differentiated; the parameters are
    + [Row("bernoulli.logpmf", ss.bernoulli.logpmf, [lambda r, s: r.integers(0, 2, s).astype(float), prob], (1,)),
       Row("bernoulli.pmf", ss.bernoulli.pmf, [lambda r, s: r.integers(0, 2, s).astype(float), prob], (1,)),
       Row("bernoulli.cdf", ss.bernoulli.cdf, [lambda r, s: r.uniform(-0.5, 1.5, s), prob], (1,)),
       Row("bernoulli.ppf", ss.bernoulli.ppf, [lambda r, s: r.uniform(0.05, 0.95, s), prob], ()),
       Row("poisson.logpmf", ss.poisson.logpmf, [counts, pos], (1,)),
       Row("poisson.pmf", ss.poisson.pmf, [counts, pos], (1,)),
       Row("poisson.cdf", ss.poisson.cdf, [counts, pos], (1,)),
       Row("poisson.entropy", ss.poisson.entropy, [lambda r, s: r.uniform(0.5, 150.0, s)], (), rtol64=1e-8),
       Row("geom.logpmf", ss.geom.logpmf, [lambda r, s: r.integers(1, 6, s).astype(float), prob], (1,)),
       Row("geom.pmf", ss.geom.pmf, [lambda r, s: r.integers(1, 6, s).astype(float), prob], (1,)),
       Row("binom.logpmf", ss.binom.logpmf, [counts, lambda r, s: 5.0 + 0.0 * r.random(s), prob], (2,)),
       Row("binom.pmf", ss.binom.pmf, [counts, lambda r, s: 5.0 + 0.0 * r.random(s), prob], (2,)),
       Row("nbinom.logpmf", ss.nbinom.logpmf, [counts, big, prob], (1, 2)),
       Row("nbinom.pmf", ss.nbinom.pmf, [counts, big, prob], (1, 2)),
       Row("betabinom.logpmf", ss.betabinom.logpmf, [counts, lambda r, s: 5.0 + 0.0 * r.random(s), big, big],
           (2, 3)),
       Row("betabinom.pmf", ss.betabinom.pmf, [counts, lambda r, s: 5.0 + 0.0 * r.random(s), big, big], (2, 3))]
)


def _args(row, rng, dtype):
    out = []
    for i, gen in enumerate(row.gens):
        # the first argument full shape; the others broadcast along the last axis
        shape = row.shape if i == 0 else row.shape[-1:]
        out.append(np.asarray(gen(rng, shape)).astype(dtype))
    return out


CASES = [pytest.param(row, id=row.name) for row in ROWS]


def test_names_follow_jax():
    expected = {
        "bernoulli": "cdf logpmf pmf ppf", "beta": "cdf logcdf logpdf logsf pdf sf", "betabinom": "logpmf pmf",
        "binom": "logpmf pmf", "cauchy": "cdf isf logcdf logpdf logsf pdf ppf sf",
        "chi2": "cdf logcdf logpdf logsf pdf sf", "dirichlet": "logpdf pdf",
        "expon": "cdf logcdf logpdf logsf pdf ppf sf", "gamma": "cdf logcdf logpdf logsf pdf sf",
        "gennorm": "cdf logpdf pdf", "geom": "logpmf pmf", "gumbel_l": "cdf logcdf logpdf logsf pdf ppf sf",
        "gumbel_r": "cdf logcdf logpdf logsf pdf ppf sf", "laplace": "cdf logpdf pdf",
        "logistic": "cdf isf logpdf pdf ppf sf", "multinomial": "logpmf pmf", "multivariate_normal": "logpdf pdf",
        "nbinom": "logpmf pmf", "norm": "cdf isf logcdf logpdf logsf pdf ppf sf",
        "pareto": "cdf logcdf logpdf logsf pdf ppf sf", "poisson": "cdf entropy logpmf pmf", "t": "logpdf pdf",
        "truncnorm": "cdf logcdf logpdf logsf pdf sf", "uniform": "cdf logpdf pdf ppf", "vonmises": "logpdf pdf",
        "wrapcauchy": "logpdf pdf",
    }
    for dist, funcs in expected.items():
        module = getattr(fst, dist)
        assert sorted(module.__all__) == funcs.split(), dist
        for f in funcs.split():
            fn = getattr(module, f)
            assert fn.__doc__, f"{dist}.{f}"
            params = list(inspect.signature(fn).parameters.values())
            if "loc" in [p.name for p in params]:
                assert [p.default for p in params if p.name == "loc"] == [0]
            if "scale" in [p.name for p in params]:
                assert [p.default for p in params if p.name == "scale"] == [1]
    assert list(inspect.signature(fst.norm.logpdf).parameters) == ["x", "loc", "scale"]
    assert list(inspect.signature(fst.multivariate_normal.logpdf).parameters) == ["x", "mean", "cov",
                                                                                   "allow_singular"]
    assert list(inspect.signature(fst.sem).parameters) == ["a", "axis", "ddof", "nan_policy", "keepdims"]


@pytest.mark.parametrize("row", CASES)
def test_forward_float64(row, rng, x64):
    args = _args(row, rng, np.float64)
    with np.errstate(all="ignore"):
        ref = row.ref(*args)
    out = row.fn(*[fnp.asarray(a) for a in args])
    assert out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), ref, rtol=row.rtol64, atol=1e-12, err_msg=row.name)


@pytest.mark.parametrize("row", CASES)
def test_forward_float32(row, rng, x32):
    args = _args(row, rng, np.float32)
    with np.errstate(all="ignore"):
        ref = row.ref(*[a.astype(np.float64) for a in args])
    out = row.fn(*[fnp.asarray(a) for a in args])
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), ref, rtol=row.rtol32, atol=row.rtol32, err_msg=row.name)


@pytest.mark.parametrize("row", [c for c in CASES if c.values[0].diff])
def test_grads(row, rng, x64):
    args = _args(row, rng, np.float64)

    def f(*vals):
        full = list(args)
        for i, v in zip(row.diff, vals):
            full[i] = v
        return row.fn(*[fnp.asarray(a) for a in full])

    check_grads(f, [fnp.asarray(args[i]) for i in row.diff], order=row.order, modes=("fwd", "rev"),
                atol=row.grad_tol, rtol=row.grad_tol)


@pytest.mark.parametrize("row", CASES)
def test_vmap_and_jit(row, rng, x32):
    per = [_args(row, rng, np.float32) for _ in range(3)]
    batched = [fnp.asarray(np.stack([p[j] for p in per])) for j in range(len(row.gens))]
    out = fg.vmap(row.fn)(*batched)
    loop = np.stack([np.asarray(row.fn(*[fnp.asarray(a) for a in p])) for p in per])
    np.testing.assert_allclose(np.asarray(out), loop, rtol=2e-6, atol=2e-6, equal_nan=True)
    with config_set("jit_fusion", False):
        jitted = fg.jit(row.fn)(*[fnp.asarray(a) for a in per[0]])
    np.testing.assert_allclose(np.asarray(jitted), loop[0], rtol=2e-6, atol=2e-6, equal_nan=True)


# ----------------------------------------------------------------------------
# Outside the support, edge cases, multivariate distributions, summary statistics
# ----------------------------------------------------------------------------


def _close(out, ref, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=rtol, atol=rtol, equal_nan=True)


def test_values_outside_the_support(x64):
    inf = np.inf
    _close(fst.uniform.logpdf(fnp.array([-1.0, 0.0, 1.0, 0.5])), [-inf, 0.0, 0.0, 0.0])
    _close(fst.uniform.ppf(fnp.array([-1.0, 0.5, 1.5])), [np.nan, 0.5, np.nan])
    _close(fst.expon.logpdf(fnp.array([-1.0, 1.0]), 0.0, 2.0), ss.expon.logpdf([-1.0, 1.0], 0.0, 2.0))
    _close(fst.expon.cdf(fnp.array([-1.0, 1.0])), ss.expon.cdf([-1.0, 1.0]))
    _close(fst.gamma.logpdf(fnp.array([-1.0, 0.5]), 2.0), ss.gamma.logpdf([-1.0, 0.5], 2.0))
    _close(fst.gamma.cdf(fnp.array([-1.0, 0.5]), 2.0), ss.gamma.cdf([-1.0, 0.5], 2.0))
    _close(fst.beta.logpdf(fnp.array([-0.5, 1.5, 0.5]), 2.0, 3.0), ss.beta.logpdf([-0.5, 1.5, 0.5], 2.0, 3.0))
    _close(fst.beta.cdf(fnp.array([-0.5, 1.5]), 2.0, 3.0), [0.0, 1.0])
    _close(fst.pareto.logpdf(fnp.array([0.5, 1.0, 2.0]), 2.0), ss.pareto.logpdf([0.5, 1.0, 2.0], 2.0))
    _close(fst.pareto.cdf(fnp.array([0.5, 2.0]), 2.0), ss.pareto.cdf([0.5, 2.0], 2.0))
    _close(fst.poisson.logpmf(fnp.array([-1.0, 1.5, 2.0]), 2.0), [-inf, -inf, ss.poisson.logpmf(2, 2.0)])
    _close(fst.poisson.cdf(fnp.array([-1.0, 1.5]), 2.0), ss.poisson.cdf([-1.0, 1.5], 2.0))
    _close(fst.geom.logpmf(fnp.array([0.0, 1.0]), 0.3), ss.geom.logpmf([0.0, 1.0], 0.3))
    _close(fst.binom.logpmf(fnp.array([-1.0, 6.0]), 5.0, 0.3), [-inf, -inf])
    _close(fst.nbinom.logpmf(fnp.array([-1.0]), 5.0, 0.3), [-inf])
    _close(fst.betabinom.logpmf(fnp.array([-1.0, 6.0]), 5.0, 2.0, 3.0), [-inf, -inf])
    _close(fst.bernoulli.logpmf(fnp.array([-1.0, 2.0]), 0.3), [-inf, -inf])
    _close(fst.bernoulli.cdf(fnp.array([-1.0, 0.0, 0.5, 1.0, 2.0]), 0.3), [0.0, 0.7, 0.7, 1.0, 1.0])
    _close(fst.bernoulli.ppf(fnp.array([0.0, 0.2, 1.0, 1.5]), 0.3), [0.0, 0.0, 1.0, np.nan])   # ppf(0) = 0: JAX
    _close(fst.truncnorm.logpdf(fnp.array([-3.0, 0.0, 3.0]), -1.0, 2.0), ss.truncnorm.logpdf([-3.0, 0.0, 3.0],
                                                                                             -1.0, 2.0))
    _close(fst.truncnorm.cdf(fnp.array([-3.0, 3.0]), -1.0, 2.0), [0.0, 1.0])
    _close(fst.wrapcauchy.logpdf(fnp.array([-1.0, 7.0]), 0.5), [-inf, -inf])
    _close(fst.vonmises.logpdf(fnp.array([1.0]), -1.0), [np.nan])


def test_invalid_parameters_and_support_tests_follow_jax(x64):
    import scipy.special as sc
    nan, inf = np.nan, np.inf
    _close(fst.bernoulli.cdf(fnp.array([0.5, 0.5]), fnp.array([-0.1, 1.5])), [nan, nan])
    _close(fst.bernoulli.ppf(fnp.array([0.5]), 1.5), [nan])
    _close(fst.beta.logpdf(fnp.array([0.5, 0.5, 0.5]), fnp.array([-1.0, 2.0, 2.0]), fnp.array([2.0, 0.0, 2.0]), 0.0,
                           fnp.array([1.0, 1.0, -1.0])), [nan, nan, nan])
    # binom: JAX's support test is loc <= k < loc + n + 1 (k need not be an integer)
    y, n, p = 1.5, 1.0, 0.3
    ref = sc.gammaln(n + 1) - sc.gammaln(y + 1) - sc.gammaln(n - y + 1) + y * np.log(p) + (n - y) * np.log1p(-p)
    _close(fst.binom.logpmf(fnp.array([y, 2.0, -0.5]), n, p), [ref, -inf, -inf])
    # geom: JAX's support test is k - loc > 0
    _close(fst.geom.logpmf(fnp.array([0.3, 0.0]), 0.4), [-0.7 * np.log1p(-0.4) + np.log(0.4), -inf])
    _close(fst.gumbel_r.ppf(fnp.array([0.0, 1.0, 0.5])), [nan, nan, -np.log(np.log(2.0))])
    _close(fst.gumbel_l.ppf(fnp.array([0.0, 1.0])), [nan, nan])
    _close(fst.gumbel_r.logpdf(fnp.array([0.5]), 0.0, -1.0), [nan])
    _close(fst.gumbel_l.cdf(fnp.array([0.5]), 0.0, 0.0), [nan])
    _close(fst.gamma.sf(fnp.array([-1.0, -1.0]), fnp.array([2.0, -2.5])), [1.0, 1.0])
    _close(fst.poisson.entropy(fnp.array([-1.0, 0.0])), [nan, 0.0])
    # a NaN point gives NaN, not -inf (scipy; JAX too for beta)
    _close(fst.beta.logpdf(fnp.array([nan, 0.5]), 0.7, 0.7), [nan, ss.beta.logpdf(0.5, 0.7, 0.7)])
    _close(fst.uniform.logpdf(fnp.array([nan, 0.5])), [nan, 0.0])
    _close(fst.uniform.pdf(fnp.array([nan, 2.0])), [nan, 0.0])


def test_infinite_points_and_invalid_scales(x64):
    # cdf / sf and their logs at -inf and +inf match scipy (no 0 * inf NaN)
    x = np.array([-np.inf, -1.0, 0.5, np.inf])
    cases = [("expon", (), ()), ("uniform", (), ()), ("gamma", (2.0,), (2.0,)), ("pareto", (2.0,), (2.0,)),
             ("chi2", (3.0,), (3.0,)), ("norm", (), ()), ("laplace", (), ())]
    for name, args, ref_args in cases:
        for fn in ("cdf", "sf", "logcdf", "logsf"):
            f = getattr(getattr(fst, name), fn, None)
            if f is None:
                continue
            with np.errstate(all="ignore"):
                ref = getattr(getattr(ss, name), fn)(x, *ref_args)
            _close(f(fnp.asarray(x), *args), ref, 1e-12)
    # scale <= 0 (and pareto's b <= 0) is invalid: NaN, as scipy (never a finite value)
    for f in (fst.expon.cdf, fst.expon.sf, fst.expon.logpdf, fst.expon.logsf, fst.expon.ppf,
              fst.uniform.cdf, fst.uniform.logpdf, fst.uniform.ppf,
              lambda v, loc, scale: fst.pareto.cdf(v + 2.0, 2.0, loc, scale),
              lambda v, loc, scale: fst.pareto.logpdf(v + 2.0, 2.0, loc, scale)):
        assert np.isnan(np.asarray(f(fnp.array([0.5, 0.5]), 0.0, fnp.array([-1.0, 0.0])))).all()
    assert np.isnan(np.asarray(fst.pareto.sf(fnp.array([2.0]), -1.0))).all()


@pytest.mark.parametrize("name,f,args", [
    ("gamma.logpdf", lambda x, a: fst.gamma.logpdf(x, a), (-1.0, 2.0)),
    ("beta.logpdf", lambda x, a: fst.beta.logpdf(x, a, 2.0), (1.5, 2.0)),
    ("pareto.logpdf", lambda x, b: fst.pareto.logpdf(x, b), (0.5, 2.0)),
    ("expon.logcdf", lambda x, s: fst.expon.logcdf(x, 0.0, s), (-1.0, 2.0)),
    ("poisson.logpmf", lambda k, mu: fst.poisson.logpmf(k, mu), (-1.0, 2.0)),
    ("binom.logpmf", lambda n, p: fst.binom.logpmf(7.0, n, p), (5.0, 0.3)),
    ("betabinom.logpmf", lambda a, b: fst.betabinom.logpmf(7.0, 5.0, a, b), (2.0, 3.0)),
    ("truncnorm.logpdf", lambda x, a: fst.truncnorm.logpdf(x, a, 2.0), (3.0, -1.0)),
    ("dirichlet.logpdf", lambda a, b: fst.dirichlet.logpdf(fnp.array([0.2, 0.3, 0.6]), fnp.stack([a, b, 1.0])),
     (1.5, 2.0)),
])
def test_gradients_outside_the_support_are_zero(name, f, args, x64):
    # The log density is -inf there and constant: its gradient is 0, never NaN (safe-where inside).
    assert float(f(*args)) == -np.inf, name
    g = fg.grad(f, argnums=(0, 1))(*args)
    assert [float(v) for v in g] == [0.0, 0.0], name


def test_far_tails_stay_finite(x64):
    _close(fst.norm.logcdf(fnp.array([-40.0])), ss.norm.logcdf([-40.0]))
    _close(fst.norm.logsf(fnp.array([40.0])), ss.norm.logsf([40.0]))
    _close(fst.truncnorm.logpdf(fnp.array([9.0]), 8.0, 10.0), ss.truncnorm.logpdf([9.0], 8.0, 10.0), 1e-9)
    _close(fst.truncnorm.logcdf(fnp.array([9.0]), 8.0, 10.0), ss.truncnorm.logcdf([9.0], 8.0, 10.0), 1e-9)


@pytest.mark.parametrize("batch", [(), (4,)])
def test_multivariate_normal(batch, rng, x64):
    n = 3
    a = rng.standard_normal((n, n))
    cov = a @ a.T + n * np.eye(n)
    mean = rng.standard_normal(n)
    x = rng.standard_normal(batch + (n,))
    out = fst.multivariate_normal.logpdf(fnp.asarray(x), fnp.asarray(mean), fnp.asarray(cov))
    _close(out, ss.multivariate_normal.logpdf(x, mean, cov), 1e-10)
    _close(fst.multivariate_normal.pdf(fnp.asarray(x), fnp.asarray(mean), fnp.asarray(cov)),
           ss.multivariate_normal.pdf(x, mean, cov), 1e-10)
    check_grads(lambda x_, m, c: fst.multivariate_normal.logpdf(x_, m, c @ c.T + 3.0 * fnp.eye(n)),
                [fnp.asarray(x), fnp.asarray(mean), fnp.asarray(a)], order=2)


def test_multivariate_normal_batched_covariances(rng, x64):
    # a stack of covariances broadcasts against the points (JAX vectorizes over both), under vmap and jit too
    a = rng.standard_normal((2, 3, 3))
    cov = a @ np.swapaxes(a, -1, -2) + 3.0 * np.eye(3)
    x = rng.standard_normal((4, 1, 3))
    mean = rng.standard_normal(3)
    ref = np.stack([np.stack([ss.multivariate_normal.logpdf(x[i, 0], mean, cov[j]) for j in range(2)])
                    for i in range(4)])
    out = fst.multivariate_normal.logpdf(fnp.asarray(x), fnp.asarray(mean), fnp.asarray(cov))
    assert out.shape == (4, 2)
    _close(out, ref, 1e-10)
    f = lambda c: fst.multivariate_normal.logpdf(fnp.asarray(x[:, 0]), fnp.asarray(mean), c)   # noqa: E731
    _close(fg.vmap(f)(fnp.asarray(cov)), ref.T, 1e-10)
    with config_set("jit_fusion", False):
        _close(fg.jit(f)(fnp.asarray(cov[1])), ref[:, 1], 1e-10)
    check_grads(lambda c: fst.multivariate_normal.logpdf(fnp.asarray(x), fnp.asarray(mean),
                                                         c @ fnp.swapaxes(c, -1, -2) + 3.0 * fnp.eye(3)),
                [fnp.asarray(a)], order=2)
    # not positive definite: NaN, as JAX (scipy raises)
    assert np.isnan(float(fst.multivariate_normal.logpdf(fnp.zeros(2), fnp.zeros(2), fnp.array([[1.0, 2.0],
                                                                                                [2.0, 1.0]]))))


def test_multivariate_normal_scalar_forms_and_errors(rng, x64):
    x = rng.standard_normal((4, 2))
    _close(fst.multivariate_normal.logpdf(fnp.asarray(x), fnp.zeros(2), 2.0),
           ss.multivariate_normal.logpdf(x, np.zeros(2), 2.0 * np.eye(2)), 1e-12)
    _close(fst.multivariate_normal.logpdf(fnp.asarray(x[:, 0]), 0.5, 2.0), ss.norm.logpdf(x[:, 0], 0.5, np.sqrt(2)))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        fst.multivariate_normal.logpdf(fnp.zeros(2), fnp.zeros(2), fnp.eye(2), allow_singular=True)
    with pytest.raises(ValueError, match="incompatible shapes"):
        fst.multivariate_normal.logpdf(fnp.zeros(2), fnp.zeros(2), fnp.eye(3))
    batched = fg.vmap(lambda m: fst.multivariate_normal.logpdf(fnp.asarray(x), m, fnp.eye(2) * 2.0))(
        fnp.asarray(rng.standard_normal((3, 2))))
    assert batched.shape == (3, 4)


def test_dirichlet(rng, x64):
    alpha = np.array([1.5, 2.0, 3.0])
    x = rng.dirichlet(alpha, size=4).T          # (K, N), scipy's layout
    _close(fst.dirichlet.logpdf(fnp.asarray(x), fnp.asarray(alpha)), ss.dirichlet.logpdf(x, alpha), 1e-10)
    _close(fst.dirichlet.pdf(fnp.asarray(x[:2]), fnp.asarray(alpha)), ss.dirichlet.pdf(x, alpha), 1e-10)
    _close(fst.dirichlet.logpdf(fnp.array([0.2, 0.3, 0.6]), fnp.asarray(alpha)), -np.inf)
    check_grads(lambda a: fst.dirichlet.logpdf(fnp.asarray(x), a), [fnp.asarray(alpha)], order=2)
    with pytest.raises(ValueError, match="one-dimensional"):
        fst.dirichlet.logpdf(fnp.asarray(x), fnp.ones((3, 1)))
    with pytest.raises(ValueError, match="one entry fewer"):
        fst.dirichlet.logpdf(fnp.ones((5, 2)) / 5, fnp.asarray(alpha))


def test_multinomial(x64):
    x = np.array([[1, 2, 0], [0, 1, 2], [1, 1, 0]])
    p = np.array([0.2, 0.5, 0.3])
    _close(fst.multinomial.logpmf(fnp.asarray(x), 3, fnp.asarray(p)),
           [ss.multinomial.logpmf(x[0], 3, p), ss.multinomial.logpmf(x[1], 3, p), -np.inf], 1e-12)
    _close(fst.multinomial.pmf(fnp.asarray(x[:2]), 3, fnp.asarray(p)), ss.multinomial.pmf(x[:2], 3, p), 1e-12)
    check_grads(lambda q: fst.multinomial.logpmf(fnp.asarray(x[:2]), 3, q), [fnp.asarray(p)], order=2)
    with pytest.raises(ValueError, match="integer type"):
        fst.multinomial.logpmf(fnp.array([1.0, 2.0]), 3, fnp.asarray(p[:2]))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_mode(axis, keepdims, rng):
    a = rng.integers(0, 3, (4, 5)).astype(np.float32)
    out = fst.mode(fnp.asarray(a), axis=axis, keepdims=keepdims)
    ref = ss.mode(a, axis=axis, keepdims=keepdims)
    np.testing.assert_array_equal(np.asarray(out.mode), ref.mode)
    np.testing.assert_array_equal(np.asarray(out.count), ref.count)
    assert isinstance(out, fst.ModeResult)
    ints = fst.mode(fnp.asarray(a.astype(np.int32)), axis=axis, keepdims=keepdims)
    np.testing.assert_array_equal(np.asarray(ints.mode), ref.mode)


def test_mode_nan_and_policies():
    out = fst.mode(fnp.array([1.0, np.nan, np.nan]))
    assert np.isnan(float(out.mode)) and int(out.count) == 2
    out = fst.mode(fnp.array([2.0, 1.0, np.nan]))
    assert float(out.mode) == 1.0 and int(out.count) == 1
    with pytest.raises(NotImplementedError, match="omit"):
        fst.mode(fnp.ones(3), nan_policy="omit")
    with pytest.raises(ValueError, match="nan_policy"):
        fst.mode(fnp.ones(3), nan_policy="skip")


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_rankdata(method, axis, rng, x32):
    a = rng.integers(0, 4, (3, 5)).astype(np.float32)
    out = fst.rankdata(fnp.asarray(a), method, axis=axis)
    np.testing.assert_array_equal(np.asarray(out), ss.rankdata(a, method, axis=axis))
    assert out.dtype == np.float32
    jitted = fg.jit(lambda v: fst.rankdata(v, method, axis=axis))(fnp.asarray(a))
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(out))


def test_rankdata_nan_gradient_and_errors():
    assert np.isnan(np.asarray(fst.rankdata(fnp.array([3.0, np.nan, 1.0])))).all()
    g = fg.grad(lambda v: fnp.sum(fst.rankdata(v) * v))(fnp.array([3.0, 1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [3.0, 1.0, 2.0])   # the ranks are constants
    with pytest.raises(ValueError, match="unknown method"):
        fst.rankdata(fnp.ones(3), "mean")
    with pytest.raises(NotImplementedError, match="raise"):
        fst.rankdata(fnp.ones(3), nan_policy="raise")


def test_mode_and_rankdata_long_slices_vmap_and_gradient(rng, x64):
    # long slices (sort-based, O(n log n)), with ties, negative zero and NaN-free data, against scipy
    a = rng.integers(-20, 20, (3, 400)).astype(np.float64)
    a[0, :5] = -0.0
    for method in ("average", "min", "max", "dense", "ordinal"):
        np.testing.assert_array_equal(np.asarray(fst.rankdata(fnp.asarray(a), method, axis=1)),
                                      ss.rankdata(a, method, axis=1), err_msg=method)
    out, ref = fst.mode(fnp.asarray(a), axis=1), ss.mode(a, axis=1)
    np.testing.assert_array_equal(np.asarray(out.mode), ref.mode)
    np.testing.assert_array_equal(np.asarray(out.count), ref.count)
    assert out.count.dtype.kind == "i"
    # vmap: per row, as a loop
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda r: fst.rankdata(r, "average"))(fnp.asarray(a))),
                                  ss.rankdata(a, "average", axis=1))
    vm = fg.vmap(lambda r: fst.mode(r))(fnp.asarray(a))
    np.testing.assert_array_equal(np.asarray(vm.mode), ref.mode)
    # the gradient of the mode flows to its first occurrence (as JAX)
    g = fg.grad(lambda v: fst.mode(v).mode)(fnp.array([2.0, 1.0, 2.0, 3.0, 1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 0, 0, 0, 0, 0])
    # integers and bools, and a slice holding a NaN among ties
    b = fst.mode(fnp.array([True, False, True]))
    assert bool(b.mode) is True and int(b.count) == 2
    out = fst.mode(fnp.array([np.nan, 2.0, np.nan, 2.0, 1.0]))
    assert float(out.mode) == 2.0 and int(out.count) == 2
    r = fst.rankdata(fnp.array([[np.nan, 1.0], [2.0, 1.0]]), axis=1)
    np.testing.assert_array_equal(np.asarray(r), [[np.nan, np.nan], [2.0, 1.0]])
    assert fst.rankdata(fnp.zeros((2, 0)), axis=1).shape == (2, 0)
    empty = fst.mode(fnp.zeros((2, 0)), axis=1)
    ref = ss.mode(np.zeros((2, 0)), axis=1)
    np.testing.assert_array_equal(np.asarray(empty.mode), ref.mode)
    np.testing.assert_array_equal(np.asarray(empty.count), ref.count)
    assert empty.count.dtype.kind == "f"


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sem(axis, keepdims, rng, x64):
    a = rng.standard_normal((3, 4))
    _close(fst.sem(fnp.asarray(a), axis=axis, keepdims=keepdims), ss.sem(a, axis=axis, keepdims=keepdims))
    _close(fst.sem(fnp.asarray(a), axis=axis, ddof=0, keepdims=keepdims),
           ss.sem(a, axis=axis, ddof=0, keepdims=keepdims))
    b = a.copy()
    b[0, 1] = np.nan
    _close(fst.sem(fnp.asarray(b), axis=axis, nan_policy="omit", keepdims=keepdims),
           ss.sem(b, axis=axis, nan_policy="omit", keepdims=keepdims))
    check_grads(lambda v: fst.sem(v, axis=axis, keepdims=keepdims), [fnp.asarray(a)], order=2)
    with pytest.raises(ValueError, match="not supported"):
        fst.sem(fnp.asarray(a), nan_policy="raise")


def test_bad_shapes_name_the_function():
    with pytest.raises(ValueError, match=r"norm.logpdf: the arguments \(f32\[3\], f32\[2\]"):
        fst.norm.logpdf(fnp.ones(3), fnp.ones(2))
    with pytest.raises(ValueError, match=r"chi2.cdf: the arguments"):
        fst.chi2.cdf(fnp.ones(3), fnp.ones(2))


@pytest.mark.parametrize("bw_method", [None, "silverman", 0.7, lambda kde: 0.5])
@pytest.mark.parametrize("weighted", [False, True])
def test_gaussian_kde(bw_method, weighted, rng, x64):
    data = rng.standard_normal((2, 7))
    w = rng.uniform(0.5, 2.0, 7) if weighted else None
    pts = rng.standard_normal((2, 4))
    kde = fst.gaussian_kde(fnp.asarray(data), bw_method, None if w is None else fnp.asarray(w))
    ref = ss.gaussian_kde(data, bw_method, w)
    _close(kde.evaluate(fnp.asarray(pts)), ref.evaluate(pts), 1e-10)
    _close(kde(fnp.asarray(pts)), ref(pts), 1e-10)
    _close(kde.pdf(fnp.asarray(pts)), ref.pdf(pts), 1e-10)
    _close(kde.logpdf(fnp.asarray(pts)), ref.logpdf(pts), 1e-10)
    _close(kde.covariance, ref.covariance, 1e-10)
    _close(kde.inv_cov, ref.inv_cov, 1e-10)
    _close(kde.neff, ref.neff, 1e-10)
    assert (kde.d, kde.n) == (2, 7)
    _close(kde.integrate_gaussian(fnp.array([0.1, -0.2]), fnp.eye(2)),
           ref.integrate_gaussian(np.array([0.1, -0.2]), np.eye(2)), 1e-10)
    other = rng.standard_normal((2, 5))
    _close(kde.integrate_kde(fst.gaussian_kde(fnp.asarray(other))), ref.integrate_kde(ss.gaussian_kde(other)), 1e-10)


def test_gaussian_kde_1d_transforms_and_errors(rng, x64):
    data = rng.standard_normal(6)
    kde, ref = fst.gaussian_kde(fnp.asarray(data)), ss.gaussian_kde(data)
    _close(kde.integrate_box_1d(-0.5, 1.0), ref.integrate_box_1d(-0.5, 1.0), 1e-10)
    _close(kde.logpdf(fnp.array([50.0])), ref.logpdf([50.0]), 1e-10)        # far from the data: logsumexp
    x = fnp.array([0.1, 2.0])
    _close(fg.jit(lambda k, v: k.evaluate(v))(kde, x), ref(np.asarray(x)), 1e-10)   # a pytree through jit
    check_grads(lambda d, v: fst.gaussian_kde(d).logpdf(v), [fnp.asarray(data), x], order=2)
    with pytest.raises(NotImplementedError, match="funcgrad.random"):
        kde.resample(None)
    with pytest.raises(NotImplementedError, match="integrate_box_1d"):
        kde.integrate_box(0.0, 1.0)
    with pytest.raises(ValueError, match="dimension"):
        fst.gaussian_kde(fnp.ones((2, 5)) + fnp.arange(5.0)).evaluate(fnp.ones((3, 2)))
    with pytest.raises(ValueError, match="multiple elements"):
        fst.gaussian_kde(fnp.array([1.0]))
    with pytest.raises(ValueError, match="bw_method"):
        fst.gaussian_kde(fnp.asarray(data), "wide")
    with pytest.raises(AttributeError, match="immutable"):
        kde.dataset = None


def test_tail_gradients_raise_no_nan_under_debug_nans(debug_nans, x32):
    # The unchosen branches of the truncated-normal mass are kept finite (in float32, 1 - ndtr(6)
    # rounds to 0 and log1p(-1) = -inf there), so no NaN appears anywhere.
    x, a, b = fnp.array([6.5, 0.3], dtype=fnp.float32), fnp.array([6.0, -1.0]), fnp.array([8.0, 2.0])
    g = fg.grad(lambda *v: fnp.sum(fst.truncnorm.logpdf(*v)), argnums=(0, 1, 2))(x, a, b)
    assert all(np.isfinite(np.asarray(v)).all() for v in g)
    g = fg.grad(lambda k, mu: fst.poisson.logpmf(k, mu), argnums=(0, 1))(3.0, 2.0)
    assert all(np.isfinite(float(v)) for v in g)


def test_gaussian_kde_under_vmap(rng, x64):
    datasets = rng.standard_normal((3, 2, 6))
    x = rng.standard_normal((2, 4))
    out = fg.vmap(lambda d: fst.gaussian_kde(d).logpdf(fnp.asarray(x)))(fnp.asarray(datasets))
    _close(out, np.stack([ss.gaussian_kde(d).logpdf(x) for d in datasets]), 1e-10)
