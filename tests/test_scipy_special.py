"""funcgrad.scipy.special against scipy.special (float64 and float32), finite differences
(check_grads, order 1-2), vmap vs a loop and jit vs eager: one table row per function."""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Sequence

import numpy as np
import pytest
import scipy.special as sc

import funcgrad as fg
import funcgrad.numpy as fnp
import funcgrad.scipy.special as fs
from funcgrad.testing import check_grads
from conftest import config_set


def normal(rng, shape):
    return rng.standard_normal(shape)


def positive(rng, shape):
    return rng.uniform(0.5, 3.0, shape)


def small_pos(rng, shape):
    return rng.uniform(0.1, 0.9, shape)


def unit(rng, shape):
    return rng.uniform(-0.9, 0.9, shape)


def prob(rng, shape):
    return rng.uniform(0.05, 0.95, shape)


def order(rng, shape):        # integer orders, as integer arrays
    return rng.integers(0, 4, shape).astype(np.int32)


def order_f(rng, shape):      # integer-valued float orders
    return rng.integers(0, 4, shape).astype(np.float64)


def big(rng, shape):
    return rng.uniform(2.0, 4.0, shape)


def lmbda(rng, shape):
    return rng.uniform(-1.0, 1.0, shape)


@dataclasses.dataclass
class Row:
    name: str
    fn: Callable
    ref: Callable
    gens: Sequence[Callable]
    diff: Sequence[int] = (0,)    # argument indices differentiated
    order: int = 2
    rtol32: float = 2e-5
    rtol64: float = 1e-10
    shapes: Sequence[tuple] = ((3, 4),)
    grad_tol: float | None = None


S = [(2, 3)]
B2 = [(2, 3), (3,)]   # broadcasting



ROWS = [
    Row("gammaln", fs.gammaln, sc.gammaln, [positive]),
    Row("gammaln[negative]", fs.gammaln, sc.gammaln, [lambda r, s: -r.uniform(0.1, 0.9, s) - 1.0]),
    Row("loggamma", fs.loggamma, lambda x: sc.gammaln(x), [positive]),
    Row("gamma", fs.gamma, sc.gamma, [positive]),
    Row("gamma[negative]", fs.gamma, sc.gamma, [lambda r, s: -r.uniform(0.1, 0.9, s) - 1.0]),
    Row("gammasgn", fs.gammasgn, sc.gammasgn, [normal], diff=()),
    Row("digamma", fs.digamma, sc.digamma, [positive]),
    Row("polygamma", fs.polygamma, sc.polygamma, [order, positive], diff=(1,), shapes=B2, rtol32=1e-4),
    Row("multigammaln", lambda a: fs.multigammaln(a, 3), lambda a: sc.multigammaln(a, 3), [big]),
    Row("betaln", fs.betaln, sc.betaln, [positive, positive], diff=(0, 1), shapes=B2),
    Row("beta", fs.beta, sc.beta, [positive, positive], diff=(0, 1), shapes=B2),
    Row("betainc", fs.betainc, sc.betainc, [positive, positive, small_pos], diff=(2,), rtol32=1e-4),
    Row("gammainc", fs.gammainc, sc.gammainc, [positive, positive], diff=(1,), shapes=B2),
    Row("gammainc[a]", fs.gammainc, sc.gammainc, [positive, positive], diff=(0,), order=1, shapes=B2,
        grad_tol=1e-6),
    Row("gammaincc", fs.gammaincc, sc.gammaincc, [positive, positive], diff=(0, 1), order=1, shapes=B2,
        grad_tol=1e-6),
    Row("gammaincc[x]", fs.gammaincc, sc.gammaincc, [positive, positive], diff=(1,), shapes=B2),
    Row("factorial", fs.factorial, sc.factorial, [positive]),
    Row("poch", fs.poch, sc.poch, [positive, normal], diff=(0, 1), shapes=B2, rtol32=1e-4),
    Row("comb", fs.comb, sc.comb, [lambda r, s: r.integers(0, 8, s).astype(float),
                                   lambda r, s: r.integers(-1, 9, s).astype(float)], diff=(), rtol32=1e-4),
    Row("comb[real]", fs.comb, sc.comb, [big, small_pos], diff=(0, 1), rtol32=1e-4),
    Row("erf", fs.erf, sc.erf, [normal]),
    Row("erfc", fs.erfc, sc.erfc, [normal]),
    Row("erfcx", fs.erfcx, sc.erfcx, [normal]),
    Row("erfinv", fs.erfinv, sc.erfinv, [unit], rtol32=1e-4),
    Row("ndtr", fs.ndtr, sc.ndtr, [lambda r, s: 3 * r.standard_normal(s)]),
    Row("ndtri", fs.ndtri, sc.ndtri, [prob], rtol32=1e-4),
    Row("log_ndtr", fs.log_ndtr, sc.log_ndtr, [lambda r, s: 4 * r.standard_normal(s)], rtol32=1e-4),
    Row("dawsn", fs.dawsn, sc.dawsn, [normal]),
    Row("owens_t", fs.owens_t, sc.owens_t, [normal, normal], diff=(0, 1), shapes=B2, rtol32=1e-4),
    Row("expit", fs.expit, sc.expit, [normal]),
    Row("logit", fs.logit, sc.logit, [prob]),
    Row("xlogy", fs.xlogy, sc.xlogy, [normal, positive], diff=(0, 1), shapes=B2),
    Row("xlog1py", fs.xlog1py, sc.xlog1py, [normal, positive], diff=(0, 1), shapes=B2),
    Row("entr", fs.entr, sc.entr, [positive]),
    Row("rel_entr", fs.rel_entr, sc.rel_entr, [positive, positive], diff=(0, 1), shapes=B2),
    Row("kl_div", fs.kl_div, sc.kl_div, [positive, positive], diff=(0, 1), shapes=B2),
    Row("boxcox", fs.boxcox, sc.boxcox, [positive, lmbda], diff=(0, 1), shapes=B2, rtol32=1e-4),
    Row("boxcox1p", fs.boxcox1p, sc.boxcox1p, [positive, lmbda], diff=(0, 1), shapes=B2, rtol32=1e-4),
    Row("i0", fs.i0, sc.i0, [normal]),
    Row("i0e", fs.i0e, sc.i0e, [normal]),
    Row("i1", fs.i1, sc.i1, [normal]),
    Row("i1e", fs.i1e, sc.i1e, [normal]),
    Row("bessel_jn", lambda z: fs.bessel_jn(z, v=3), lambda z: np.stack([sc.jv(k, z) for k in range(4)]),
        [lambda r, s: 3 * r.standard_normal(s)], rtol32=1e-4),
    Row("exp1", fs.exp1, sc.exp1, [positive]),
    Row("expi", fs.expi, sc.expi, [nonzero := (lambda r, s: r.uniform(0.5, 2.0, s) * r.choice([-1.0, 1.0], s))]),
    Row("expn", fs.expn, sc.expn, [order, positive], diff=(1,), shapes=B2, rtol32=1e-4),
    Row("fresnel", fs.fresnel, sc.fresnel, [normal]),
    Row("sici", fs.sici, lambda x: (sc.sici(x)[0], sc.sici(np.abs(x))[1]), [nonzero]),
    Row("spence", fs.spence, sc.spence, [positive]),
    Row("hyp1f1", fs.hyp1f1, sc.hyp1f1, [positive, positive, normal], diff=(2,), rtol32=1e-4),
    Row("hyp1f1[params]", fs.hyp1f1, sc.hyp1f1, [positive, positive, normal], diff=(0, 1), order=1,
        grad_tol=1e-6),
    Row("hyp2f1", fs.hyp2f1, sc.hyp2f1, [positive, positive, big, unit], diff=(3,), rtol32=1e-4),
    Row("hyp2f1[params]", fs.hyp2f1, sc.hyp2f1, [positive, positive, big, unit], diff=(0, 1, 2), order=1,
        grad_tol=1e-6),
    Row("zeta", fs.zeta, sc.zeta, [big, positive], diff=(1,), shapes=B2, rtol32=1e-4),
    Row("zeta[x]", fs.zeta, sc.zeta, [big, positive], diff=(0,), order=1, grad_tol=1e-6),
]


def _args(row, shapes, rng, dtype):
    out = []
    for gen, shape in zip(row.gens, shapes):
        a = np.asarray(gen(rng, shape))
        out.append(a.astype(dtype) if a.dtype.kind == "f" else a)
    return out


def _nargs(row):
    return len(row.gens)


def _cases():
    out = []
    for row in ROWS:
        n = _nargs(row)
        for shape in row.shapes:
            shapes = (shape,) * n if isinstance(shape[0], int) or shape == () else shape
            if shape == (3,) and n > 1:   # broadcasting case: the last operand is 1-d
                shapes = ((2, 3),) * (n - 1) + ((3,),)
            out.append(pytest.param(row, shapes, id=f"{row.name}-{'x'.join(map(str, shapes[-1]))}"))
    return out


CASES = _cases()


def _leaves(x):
    return list(x) if isinstance(x, tuple) else [x]


def _compare(out, ref, rtol, what):
    outs, refs = _leaves(out), _leaves(ref)
    assert len(outs) == len(refs), what
    for o, r in zip(outs, refs):
        assert isinstance(o, fg.Array), f"{what}: returned {type(o).__name__}"
        r = np.asarray(r, dtype=np.float64)
        assert o.shape == r.shape, f"{what}: shape {o.shape} vs {r.shape}"
        np.testing.assert_allclose(np.asarray(o, np.float64), r, rtol=rtol, atol=rtol, equal_nan=True, err_msg=what)


def test_names_and_signatures_follow_jax():
    # jax.scipy.special's 53 names.
    names = ("bernoulli bessel_jn beta betainc betaln boxcox boxcox1p comb dawsn digamma entr erf erfc erfcx erfinv "
             "exp1 expi expit expn factorial fresnel gamma gammainc gammaincc gammaln gammasgn hyp1f1 hyp2f1 i0 i0e "
             "i1 i1e kl_div log_ndtr log_softmax loggamma logit logsumexp multigammaln ndtr ndtri owens_t poch "
             "polygamma rel_entr sici softmax spence sph_harm_y wofz xlog1py xlogy zeta").split()
    assert sorted(fs.__all__) == sorted(names)
    for n in names:
        assert getattr(fs, n).__doc__, n
    params = lambda f: [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]  # noqa: E731
    assert params(fs.logsumexp) == [("a", 1, inspect._empty), ("axis", 1, None), ("b", 1, None),
                                    ("keepdims", 1, False), ("return_sign", 1, False), ("where", 1, None)]
    assert params(fs.bessel_jn) == [("z", 1, inspect._empty), ("v", 3, inspect._empty), ("n_iter", 3, 50)]
    assert params(fs.softmax) == [("x", 0, inspect._empty), ("axis", 3, None)]
    assert params(fs.comb) == [("N", 1, inspect._empty), ("k", 1, inspect._empty), ("repetition", 3, False)]
    assert params(fs.wofz) == [("z", 1, inspect._empty)]
    assert params(fs.sph_harm_y) == [("n", 1, inspect._empty), ("m", 1, inspect._empty), ("theta", 1, inspect._empty),
                                     ("phi", 1, inspect._empty), ("diff_n", 1, None), ("n_max", 1, None)]


@pytest.mark.parametrize("row,shapes", CASES)
def test_forward_float64(row, shapes, rng, x64):
    args = _args(row, shapes, rng, np.float64)
    with np.errstate(all="ignore"):
        ref = row.ref(*args)
    out = row.fn(*[fnp.asarray(a) for a in args])
    _compare(out, ref, row.rtol64, row.name)
    for o in _leaves(out):
        assert o.dtype == np.float64


@pytest.mark.parametrize("row,shapes", CASES)
def test_forward_float32(row, shapes, rng, x32):
    args = _args(row, shapes, rng, np.float32)
    with np.errstate(all="ignore"):
        ref = row.ref(*[a.astype(np.float64) if a.dtype.kind == "f" else a for a in args])
    out = row.fn(*[fnp.asarray(a) for a in args])
    _compare(out, ref, row.rtol32, row.name)
    for o in _leaves(out):
        assert o.dtype == np.float32


@pytest.mark.parametrize("row,shapes", [c for c in CASES if c.values[0].diff])
def test_grads(row, shapes, rng, x64):
    args = _args(row, shapes, rng, np.float64)

    def f(*diff_vals):
        full = list(args)
        for i, v in zip(row.diff, diff_vals):
            full[i] = v
        return row.fn(*[fnp.asarray(a) for a in full])

    check_grads(f, [fnp.asarray(args[i]) for i in row.diff], order=row.order, modes=("fwd", "rev"),
                atol=row.grad_tol, rtol=row.grad_tol)


def _first(cases):
    seen, out = set(), []
    for c in cases:
        if c.values[0].name not in seen:
            seen.add(c.values[0].name)
            out.append(c)
    return out


@pytest.mark.parametrize("row,shapes", _first(CASES))
def test_vmap_matches_loop(row, shapes, rng, x32):
    per = [_args(row, shapes, rng, np.float32) for _ in range(3)]
    batched = [fnp.asarray(np.stack([p[j] for p in per])) for j in range(_nargs(row))]
    out = fg.vmap(row.fn)(*batched)
    loop = [row.fn(*[fnp.asarray(a) for a in p]) for p in per]
    for k, o in enumerate(_leaves(out)):
        expected = np.stack([np.asarray(_leaves(lo)[k]) for lo in loop])
        np.testing.assert_allclose(np.asarray(o), expected, rtol=2e-6, atol=2e-6, equal_nan=True)


@pytest.mark.parametrize("row,shapes", _first(CASES))
def test_jit_matches_eager(row, shapes, rng, x64):
    args = [fnp.asarray(a) for a in _args(row, shapes, rng, np.float64)]
    eager = row.fn(*args)
    with config_set("jit_fusion", False):
        out = fg.jit(row.fn)(*args)
    for o, e in zip(_leaves(out), _leaves(eager)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(e), rtol=1e-12, atol=1e-12, equal_nan=True)
        assert o.dtype == e.dtype


@pytest.mark.parametrize("row,shapes", _first([c for c in CASES if c.values[0].diff]))
def test_jit_of_grad(row, shapes, rng, x32):
    args = [fnp.asarray(a) for a in _args(row, shapes, rng, np.float32)]

    def loss(*diff_vals):
        full = list(args)
        for i, v in zip(row.diff, diff_vals):
            full[i] = v
        return sum(fnp.sum(o) for o in _leaves(row.fn(*full)))

    argnums = tuple(range(len(row.diff)))
    xs = [args[i] for i in row.diff]
    eager = fg.grad(loss, argnums=argnums)(*xs)
    with config_set("jit_fusion", False):
        jitted = fg.jit(fg.grad(loss, argnums=argnums))(*xs)
    for a, b in zip(jitted, eager):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------
# Things the table cannot express
# ----------------------------------------------------------------------------


def test_special_values_follow_jax(x64):
    nan, inf = np.nan, np.inf
    _compare(fs.xlogy(fnp.array([0.0, 0.0, 1.0]), fnp.array([0.0, -1.0, 0.0])), [0.0, 0.0, -inf], 0, "xlogy")
    _compare(fs.xlog1py(fnp.array([0.0, 1.0]), fnp.array([-1.0, -1.0])), [0.0, -inf], 0, "xlog1py")
    _compare(fs.entr(fnp.array([-1.0, 0.0])), [-inf, 0.0], 0, "entr")
    _compare(fs.kl_div(fnp.array([0.0, 1.0, -1.0, 0.0]), fnp.array([0.0, 0.0, 1.0, 2.0])), [0.0, inf, inf, 2.0], 0,
             "kl_div")
    _compare(fs.rel_entr(fnp.array([0.0, 1.0, -1.0, 0.0]), fnp.array([0.0, 0.0, 1.0, -1.0])), [0.0, inf, inf, inf],
             0, "rel_entr")
    _compare(fs.factorial(fnp.array([-1.0, 0.0, 3.0])), [0.0, 1.0, 6.0], 1e-12, "factorial")
    _compare(fs.comb(fnp.array([5.0, 0.0]), fnp.array([2.0, 1.0]), repetition=True), [15.0, 0.0], 1e-12, "comb rep")
    _compare(fs.gammasgn(fnp.array([-1.5, -2.5, 0.5])), sc.gammasgn([-1.5, -2.5, 0.5]), 0, "gammasgn")
    _compare(fs.loggamma(fnp.array([-1.5, 0.0])), [nan, nan], 0, "loggamma")
    _compare(fs.ndtri(fnp.array([0.0, 1.0, 1.5])), [-inf, inf, nan], 0, "ndtri")
    _compare(fs.poch(fnp.array([2.5]), fnp.array([0.0])), [1.0], 0, "poch")
    _compare(fs.digamma(fnp.array([0.0, -1.0])), [nan, nan], 0, "digamma at poles (scipy: -inf at 0)")
    _compare(fs.expi(fnp.array([0.0])), [nan], 0, "expi(0) (scipy: -inf)")
    _compare(fs.gamma(fnp.array([0.0, -1.0])), [inf, nan], 0, "gamma at poles")
    _compare(fs.bernoulli(4), sc.bernoulli(4), 1e-7, "bernoulli")
    _compare(fs.bessel_jn(fnp.array([0.0]), v=1), [[1.0], [0.0]], 1e-12, "bessel_jn at 0")


def test_xlogy_gradients_at_zero(x64):
    # As JAX: d/dx x log y = log(y) (-inf at y = 0); d/dy is 0 where x = 0 (JAX: NaN at (0, 0)).
    gx = fg.grad(fs.xlogy, argnums=0)(0.0, 2.0)
    gy = fg.grad(fs.xlogy, argnums=1)(0.0, 0.0)
    assert np.isclose(float(gx), np.log(2.0)) and float(gy) == 0.0
    assert float(fg.grad(fs.xlogy, argnums=0)(0.0, 0.0)) == -np.inf
    assert float(fg.grad(fs.xlogy, argnums=1)(0.0, 2.0)) == 0.0


def test_gradients_at_edges_follow_jax(x64):
    assert float(fg.grad(fs.entr)(0.0)) == np.inf                     # -(log 0 + 1)
    assert [float(g) for g in fg.grad(fs.kl_div, argnums=(0, 1))(0.0, 2.0)] == [-1.0, 1.0]
    assert [float(g) for g in fg.grad(fs.rel_entr, argnums=(0, 1))(0.0, 2.0)] == [0.0, 0.0]
    assert [float(g) for g in fg.grad(fs.comb, argnums=(0, 1))(3.0, 5.0)] == [0.0, 0.0]   # 0 outside, not NaN
    assert [float(g) for g in fg.grad(fs.poch, argnums=(0, 1))(2.0, 0.0)] == [0.0, 0.0]   # poch = 1 at m = 0


def test_integer_inputs_compute_in_the_default_float(x32):
    out = fs.gammaln(fnp.array([1, 2, 5]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), sc.gammaln([1, 2, 5]), rtol=1e-6)
    out = fs.polygamma(fnp.array([1, 2]), fnp.array([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(out), sc.polygamma([1, 2], [1.0, 2.0]), rtol=1e-5)


def test_integer_orders_get_no_gradient(x64):
    # The polygamma / expn / Bessel order is not differentiated; the float argument is.
    g = fg.grad(lambda x: fnp.sum(fs.polygamma(fnp.array([1, 2]), x)))(fnp.array([1.5, 2.5]))
    np.testing.assert_allclose(np.asarray(g), sc.polygamma([2, 3], [1.5, 2.5]), rtol=1e-10)
    g = fg.grad(lambda x: fs.expn(0, x))(1.5)
    np.testing.assert_allclose(float(g), -np.exp(-1.5) / 1.5 * (1 + 1 / 1.5), rtol=1e-10)


def test_unsupported_derivatives_raise():
    with pytest.raises(NotImplementedError, match="betainc with respect to a"):
        fg.grad(lambda a: fs.betainc(a, 2.0, 0.5))(1.5)
    with pytest.raises(NotImplementedError, match="betainc with respect to b"):
        fg.jvp(lambda b: fs.betainc(1.0, b, 0.5), (2.5,), (1.0,))
    with pytest.raises(NotImplementedError, match="second derivative of hyp1f1 with respect to b"):
        fg.grad(fg.grad(lambda b: fs.hyp1f1(1.0, b, 0.5)))(1.5)
    with pytest.raises(NotImplementedError, match="second derivative of zeta with respect to x"):
        fg.jvp(fg.grad(lambda x: fs.zeta(x, 1.0)), (2.5,), (1.0,))
    with pytest.raises(NotImplementedError, match="second derivative of gammainc"):
        fg.grad(fg.grad(lambda a: fs.gammainc(a, 1.0)))(1.5)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(NotImplementedError, match="exact=True"):
        fs.factorial(3.0, exact=True)
    with pytest.raises(NotImplementedError, match="q=1"):
        fs.zeta(fnp.array([2.0]))
    with pytest.raises(ValueError, match="series_order must be <= 30"):
        fs.log_ndtr(fnp.array([1.0]), series_order=31)
    with pytest.raises(ValueError, match="integer"):
        fs.polygamma(fnp.array([1.0]), fnp.array([1.0]))
    with pytest.raises(TypeError, match="static Python int"):
        fs.multigammaln(fnp.array([3.0]), 2.5)
    with pytest.raises(ValueError, match="v must be >= 0"):
        fs.bessel_jn(fnp.array([1.0]), v=-1)
    with pytest.raises(ValueError, match="broadcast"):
        fs.betaln(fnp.ones(3), fnp.ones(4))


def test_riemann_zeta_and_hyp2f1_special_values(x64):
    _compare(fs.zeta(fnp.array([2.0, 4.0]), 1.0), [np.pi ** 2 / 6, np.pi ** 4 / 90], 1e-12, "zeta")
    _compare(fs.hyp2f1(1.0, 1.0, 2.0, fnp.array([0.5])), [2 * np.log(2.0)], 1e-12, "hyp2f1")


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_b_and_return_sign(axis, keepdims, rng, x64):
    a = rng.standard_normal((2, 3))
    b = rng.standard_normal((2, 3))
    out, sign = fs.logsumexp(fnp.asarray(a), axis=axis, b=fnp.asarray(b), keepdims=keepdims, return_sign=True)
    ref, ref_sign = sc.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(sign), ref_sign)
    plain = fs.logsumexp(fnp.asarray(a), axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(np.asarray(plain), sc.logsumexp(a, axis=axis, keepdims=keepdims), rtol=1e-12)
    check_grads(lambda x, w: fs.logsumexp(x, axis=axis, b=w * w + 0.1, keepdims=keepdims), [fnp.asarray(a),
                fnp.asarray(b)], order=2)


def test_logsumexp_where_and_negative_sum(x64):
    a = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    where = np.array([[True, False, True], [False, False, True]])
    out = fs.logsumexp(fnp.asarray(a), axis=1, where=fnp.asarray(where))
    np.testing.assert_allclose(np.asarray(out), sc.logsumexp(np.where(where, a, -np.inf), axis=1), rtol=1e-12)
    assert np.isnan(float(fs.logsumexp(fnp.array([1.0, 2.0]), b=fnp.array([1.0, -2.0]))))
    assert float(fs.logsumexp(fnp.array([-np.inf, -np.inf]))) == -np.inf


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_softmax_and_log_softmax(axis, rng, x64):
    x = rng.standard_normal((2, 3))
    np.testing.assert_allclose(np.asarray(fs.softmax(fnp.asarray(x), axis=axis)), sc.softmax(x, axis=axis),
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fs.log_softmax(fnp.asarray(x), axis=axis)), sc.log_softmax(x, axis=axis),
                               rtol=1e-12, atol=1e-14)
    check_grads(lambda v: fs.log_softmax(v, axis=axis) * fs.softmax(v, axis=axis), [fnp.asarray(x)], order=2)


def test_lax_special_functions(x64):
    from funcgrad import lax
    a, x = np.array([1.5, 0.3, 5.0]), np.array([0.7, 0.01, 6.0])
    h = 1e-6
    reparam = -(sc.gammainc(a + h, x) - sc.gammainc(a - h, x)) / (2 * h) / np.exp(
        (a - 1) * np.log(x) - x - sc.gammaln(a))
    _compare(lax.random_gamma_grad(fnp.asarray(a), fnp.asarray(x)), reparam, 1e-7, "random_gamma_grad")
    _compare(lax.lgamma(fnp.asarray(a)), sc.gammaln(a), 1e-12, "lax.lgamma")
    _compare(lax.igammac(fnp.asarray(a), fnp.asarray(x)), sc.gammaincc(a, x), 1e-12, "lax.igammac")
    _compare(lax.betainc(fnp.asarray(a), fnp.asarray(a), fnp.array([0.2, 0.5, 0.9])),
             sc.betainc(a, a, [0.2, 0.5, 0.9]), 1e-12, "lax.betainc")
    _compare(lax.bessel_i1e(fnp.asarray(x)), sc.i1e(x), 1e-12, "lax.bessel_i1e")


def test_logsumexp_softmax_under_vmap_and_jit(rng, x32):
    a = fnp.asarray(rng.standard_normal((3, 2, 4)).astype(np.float32))
    b = fnp.asarray(rng.uniform(0.5, 1.5, (3, 2, 4)).astype(np.float32))

    def f(x, w):
        out, sign = fs.logsumexp(x, axis=-1, b=w, return_sign=True)
        return out * sign + fnp.sum(fs.softmax(x, axis=0) * fs.log_softmax(x, axis=(0, 1)))

    batched = fg.vmap(f)(a, b)
    loop = np.stack([np.asarray(f(a[i], b[i])) for i in range(3)])
    np.testing.assert_allclose(np.asarray(batched), loop, rtol=2e-6, atol=2e-6)
    with config_set("jit_fusion", False):
        np.testing.assert_allclose(np.asarray(fg.jit(f)(a[0], b[0])), loop[0], rtol=2e-6, atol=2e-6)


# ----------------------------------------------------------------------------
# Complex-valued: wofz, sph_harm_y
# ----------------------------------------------------------------------------

Z = np.array([[1 + 1j, 0.5 - 2j, -0.3 + 0.1j], [2.0 + 0.0j, -1.5 - 0.7j, 0.2j]])


def _dwofz(z):
    return -2 * z * sc.wofz(z) + 2j / np.sqrt(np.pi)


@pytest.mark.parametrize("dtype,rtol", [(np.complex128, 1e-12), (np.complex64, 2e-6)])
def test_wofz_forward(dtype, rtol, request):
    request.getfixturevalue("x64" if dtype == np.complex128 else "x32")
    out = fs.wofz(fnp.asarray(Z.astype(dtype)))
    assert out.dtype == dtype and out.shape == Z.shape
    np.testing.assert_allclose(np.asarray(out), sc.wofz(Z), rtol=rtol)
    real = np.array([-1.0, 0.0, 0.5, 3.0])
    out = fs.wofz(fnp.asarray(real.astype(np.float64 if dtype == np.complex128 else np.float32)))
    assert out.dtype == dtype                     # real input: complex of its precision, as JAX
    np.testing.assert_allclose(np.asarray(out), sc.wofz(real.astype(complex)), rtol=rtol)
    assert fs.wofz(fnp.array([1, 2])).dtype == dtype    # integers: the default complex


def test_wofz_derivatives_match_finite_differences(x64):
    z = fnp.asarray(Z)
    h = 1e-6
    # holomorphic: the jvp along a real step and along an imaginary step are both w'(z) times the step
    for step in (1.0, 1j):
        _, t = fg.jvp(fs.wofz, (z,), (fnp.asarray(np.full(Z.shape, step, dtype=complex)),))
        fd = (sc.wofz(Z + h * step) - sc.wofz(Z - h * step)) / (2 * h)
        np.testing.assert_allclose(np.asarray(t), fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(fg.jvp(fs.wofz, (z,), (fnp.ones_like(z),))[1]), _dwofz(Z), rtol=1e-12)
    check_grads(fs.wofz, [z], order=2, modes=("fwd", "rev"))
    # grad of a real-valued function of a real input stays real (the real part of the complex cotangent)
    x = 0.7
    g = fg.grad(lambda v: fnp.imag(fs.wofz(v)))(x)
    np.testing.assert_allclose(float(g), ((sc.wofz(x + h) - sc.wofz(x - h)) / (2 * h)).imag, rtol=1e-8)
    # second derivative: w'' = -2 w - 2 z w'
    d2 = fg.jvp(lambda v: fg.jvp(fs.wofz, (v,), (fnp.ones_like(v),))[1], (z,), (fnp.ones_like(z),))[1]
    np.testing.assert_allclose(np.asarray(d2), -2 * sc.wofz(Z) - 2 * Z * _dwofz(Z), rtol=1e-10)


def test_wofz_under_vmap_and_jit(x32):
    z = fnp.asarray(Z.astype(np.complex64))
    np.testing.assert_allclose(np.asarray(fg.vmap(fs.wofz)(z)), np.asarray(fs.wofz(z)), rtol=1e-6)
    with config_set("jit_fusion", False):
        np.testing.assert_allclose(np.asarray(fg.jit(fs.wofz)(z)), np.asarray(fs.wofz(z)), rtol=1e-6)
        g = fg.jit(fg.grad(lambda v: fnp.sum(fnp.real(fs.wofz(v)))))(z)
    np.testing.assert_allclose(np.asarray(g), _dwofz(Z), rtol=1e-4)   # JAX: grad of Re f(z) is f'(z) (holomorphic f)


N_SH = np.array([0, 1, 1, 2, 2, 3, 3, 4, 4, 5])
M_SH = np.array([0, -1, 1, 2, -2, -3, 1, 0, -4, 3])


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_sph_harm_y_forward(dtype, rtol, rng, request):
    request.getfixturevalue("x64" if dtype == np.float64 else "x32")
    theta = np.concatenate([[0.0, np.pi], rng.uniform(0, np.pi, 8)])
    phi = rng.uniform(0, 2 * np.pi, 10)
    out = fs.sph_harm_y(fnp.asarray(N_SH), fnp.asarray(M_SH), fnp.asarray(theta.astype(dtype)),
                        fnp.asarray(phi.astype(dtype)))
    assert out.dtype == (np.complex128 if dtype == np.float64 else np.complex64) and out.shape == (10,)
    np.testing.assert_allclose(np.asarray(out), sc.sph_harm_y(N_SH, M_SH, theta, phi), rtol=rtol, atol=rtol)
    # broadcasting: a (3, 1) grid of angles against 10 (n, m) pairs; a scalar angle gives shape (1,) as JAX
    t = theta[2:5, None]
    out = fs.sph_harm_y(N_SH, M_SH, fnp.asarray(t), 0.3)
    np.testing.assert_allclose(np.asarray(out), sc.sph_harm_y(N_SH, M_SH, t, 0.3), rtol=rtol, atol=rtol)
    assert fs.sph_harm_y(2, 1, 0.5, 0.3).shape == (1,)


def test_sph_harm_y_n_max_and_edges(x64):
    # |m| > n gives 0 (scipy too); degrees above n_max are clipped to n_max (JAX's documented behaviour)
    out = fs.sph_harm_y(fnp.array([1, 2, 5]), fnp.array([2, -3, 1]), fnp.array([0.5, 0.5, 0.5]), 0.3, n_max=3)
    np.testing.assert_allclose(np.asarray(out), [0, 0, sc.sph_harm_y(3, 1, 0.5, 0.3)], atol=1e-14, rtol=1e-12)
    with pytest.raises(NotImplementedError, match="diff_n"):
        fs.sph_harm_y(fnp.array([1]), fnp.array([0]), 0.5, 0.3, diff_n=1)
    with pytest.raises(TypeError, match="integer"):
        fs.sph_harm_y(fnp.array([1.0]), fnp.array([0]), 0.5, 0.3)
    with pytest.raises(TypeError, match="n_max"):
        fg.jit(lambda n: fs.sph_harm_y(n, fnp.array([0]), 0.5, 0.3))(fnp.array([2]))
    with pytest.raises(ValueError, match="broadcast"):
        fs.sph_harm_y(fnp.array([1, 2]), fnp.array([0, 1, 1]), 0.5, 0.3)


def test_sph_harm_y_derivatives(rng, x64):
    theta = rng.uniform(0.2, 2.9, 10)
    phi = rng.uniform(0, 2 * np.pi, 10)
    n, m = fnp.asarray(N_SH), fnp.asarray(M_SH)
    f = lambda t, p: fs.sph_harm_y(n, m, t, p, n_max=5)   # noqa: E731
    check_grads(f, [fnp.asarray(theta), fnp.asarray(phi)], order=2, modes=("fwd", "rev"))
    h = 1e-6
    gt = fg.jvp(lambda t: f(t, fnp.asarray(phi)), (fnp.asarray(theta),), (fnp.ones(10),))[1]
    fd = (sc.sph_harm_y(N_SH, M_SH, theta + h, phi) - sc.sph_harm_y(N_SH, M_SH, theta - h, phi)) / (2 * h)
    np.testing.assert_allclose(np.asarray(gt), fd, rtol=1e-6, atol=1e-8)
    # d/dphi Y = i m Y; at the poles the derivative in theta stays finite
    gp = fg.jvp(lambda p: f(fnp.asarray(theta), p), (fnp.asarray(phi),), (fnp.ones(10),))[1]
    np.testing.assert_allclose(np.asarray(gp), 1j * M_SH * sc.sph_harm_y(N_SH, M_SH, theta, phi), rtol=1e-10,
                               atol=1e-12)
    g0 = fg.jvp(lambda t: f(t, fnp.asarray(phi)), (fnp.zeros(10),), (fnp.ones(10),))[1]
    assert np.all(np.isfinite(np.asarray(g0)))


def test_sph_harm_y_under_vmap_and_jit(rng, x32):
    theta = rng.uniform(0, np.pi, (3, 10)).astype(np.float32)
    f = lambda t: fs.sph_harm_y(N_SH, M_SH, t, 0.5, n_max=5)   # noqa: E731
    out = fg.vmap(f)(fnp.asarray(theta))
    np.testing.assert_allclose(np.asarray(out), sc.sph_harm_y(N_SH, M_SH, theta.astype(np.float64), 0.5),
                               rtol=2e-5, atol=2e-5)
    with config_set("jit_fusion", False):
        jitted = fg.jit(lambda n, m, t: fs.sph_harm_y(n, m, t, 0.5, n_max=5))(fnp.asarray(N_SH), fnp.asarray(M_SH),
                                                                              fnp.asarray(theta[0]))
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(out[0]), rtol=1e-6, atol=1e-6)


def test_complex_arguments_follow_jax(x64):
    # JAX defines these on complex numbers: the same formulas, differentiable (holomorphic)
    z, w = np.array([1 + 1j, -0.5 + 0.3j]), np.array([0.7 - 0.2j, 2 + 1j])
    Zc, Wc = fnp.asarray(z), fnp.asarray(w)
    refs = {
        "expit": (fs.expit(Zc), 1 / (1 + np.exp(-z))),
        "logit": (fs.logit(Zc), np.log(z / (1 - z))),
        "xlogy": (fs.xlogy(Zc, Wc), z * np.log(w)),
        "xlog1py": (fs.xlog1py(Zc, Wc), z * np.log1p(w)),
        "boxcox": (fs.boxcox(Zc, 0.5), (z ** 0.5 - 1) / 0.5),
        "boxcox1p": (fs.boxcox1p(Zc, 0.5), ((1 + z) ** 0.5 - 1) / 0.5),
        "logsumexp": (fs.logsumexp(Zc), np.log(np.sum(np.exp(z)))),
        "softmax": (fs.softmax(Zc), np.exp(z) / np.sum(np.exp(z))),
        "log_softmax": (fs.log_softmax(Zc), z - np.log(np.sum(np.exp(z)))),
    }
    for name, (out, ref) in refs.items():
        assert out.dtype == np.complex128, name
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-12, err_msg=name)
    check_grads(fs.xlogy, [Zc, Wc], order=2)
    check_grads(lambda v: fs.logsumexp(v), [Zc], order=2)
    # the others raise a TypeError naming the function (JAX raises too); never a silent real part
    for f, name in [(lambda: fs.erf(Zc), "erf"), (lambda: fs.gammaln(1j), "gammaln"),
                    (lambda: fs.betaln(Zc, 1.0), "betaln"), (lambda: fs.sph_harm_y(1, 0, Zc, 0.1), "sph_harm_y")]:
        with pytest.raises(TypeError, match=f"{name}: complex arguments"):
            f()
    # the lax-level primitives too, eagerly and under jit
    from funcgrad import lax
    for run in (lax.lgamma, fg.jit(lax.lgamma)):
        with pytest.raises(TypeError, match="lgamma: not defined for complex operands"):
            run(Zc)


@pytest.mark.parametrize("dtype,rtol", [(np.complex128, 1e-12), (np.complex64, 2e-5)])
def test_complex_loggamma_and_gamma(dtype, rtol, request):
    request.getfixturevalue("x64" if dtype == np.complex128 else "x32")
    z = np.array([1 + 1j, -2.5 + 0.5j, 3 - 2j, 0.3 + 0.01j, -7.2 - 3j, -2.5 + 0j, 12 + 5j])
    out = fs.loggamma(fnp.asarray(z.astype(dtype)))
    assert out.dtype == dtype
    np.testing.assert_allclose(np.asarray(out), sc.loggamma(z), rtol=rtol, atol=rtol)    # scipy's branch cut
    out = fs.gamma(fnp.asarray(z.astype(dtype)))
    np.testing.assert_allclose(np.asarray(out), sc.gamma(z), rtol=10 * rtol, atol=1e-12)
    poles = fnp.asarray(np.array([0j, -1 + 0j, -3 + 0j], dtype))
    assert np.isnan(np.asarray(fs.loggamma(poles))).all() and np.isnan(np.asarray(fs.gamma(poles))).all()


def test_complex_loggamma_derivatives(x64):
    z = np.array([1 + 1j, -2.5 + 0.5j, 3 - 2j, 0.3 + 0.01j, -7.2 - 3j])
    Zc = fnp.asarray(z)
    h = 1e-6
    for step in (1.0, 1j):     # holomorphic: both directions give digamma(z) times the step
        t = fg.jvp(fs.loggamma, (Zc,), (fnp.asarray(np.full(z.shape, step, dtype=complex)),))[1]
        fd = (sc.loggamma(z + h * step) - sc.loggamma(z - h * step)) / (2 * h)
        np.testing.assert_allclose(np.asarray(t), fd, rtol=1e-7)
    t = fg.jvp(fs.loggamma, (Zc,), (fnp.ones_like(Zc),))[1]
    np.testing.assert_allclose(np.asarray(t), sc.psi(z), rtol=1e-12)
    check_grads(fs.loggamma, [Zc], order=2)
    check_grads(fs.gamma, [Zc], order=2)
    # third derivative: polygamma(2, z) (finite differences of scipy's digamma, which takes complex z)
    d = lambda f: (lambda v: fg.jvp(f, (v,), (fnp.ones_like(v),))[1])   # noqa: E731
    np.testing.assert_allclose(np.asarray(d(d(d(fs.loggamma)))(Zc)),
                               (sc.psi(z + 1e-3) - 2 * sc.psi(z) + sc.psi(z - 1e-3)) / 1e-6, rtol=1e-4)
