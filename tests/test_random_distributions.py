"""Tests for funcgrad.random's distributions, typed keys and the two Threefry streams.

References are peers, never our own outputs: values printed once by JAX 0.10.2 (written below as literals),
scipy.stats laws (moments with tolerances from the sample size, Kolmogorov-Smirnov distances, frequencies),
and finite differences for the gradients.  All draws come from fixed keys, so every pass is reproducible.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import scipy.stats

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import random

P5 = fnp.array([.1, .2, .3, .2, .2])
CASES = {
    "uniform": lambda k: random.uniform(k, (4,), minval=-2., maxval=3.),
    "normal": lambda k: random.normal(k, (4,)),
    "truncated_normal": lambda k: random.truncated_normal(k, -1., 2., (4,)),
    "bernoulli": lambda k: random.bernoulli(k, 0.6, (8,)),
    "bernoulli_high": lambda k: random.bernoulli(k, 0.6, (8,), mode="high"),
    "randint": lambda k: random.randint(k, (6,), -5, 100),
    "randint_u8": lambda k: random.randint(k, (6,), 0, 256, np.uint8),
    "bits": lambda k: random.bits(k, (3,), np.uint32),
    "permutation": lambda k: random.permutation(k, 8),
    "permutation_rows": lambda k: random.permutation(k, fnp.arange(12.).reshape(4, 3)),
    "permutation_indep": lambda k: random.permutation(k, fnp.arange(12.).reshape(3, 4), axis=1, independent=True),
    "choice": lambda k: random.choice(k, 10, (4,)),
    "choice_noreplace": lambda k: random.choice(k, 10, (4,), replace=False),
    "choice_p": lambda k: random.choice(k, 5, (4,), p=P5),
    "choice_p_noreplace": lambda k: random.choice(k, 5, (3,), replace=False, p=P5),
    "choice_axis1": lambda k: random.choice(k, fnp.arange(12.).reshape(3, 4), (2,), axis=1),
    "categorical": lambda k: random.categorical(k, fnp.log(fnp.array([0.2, 0.5, 0.3])), shape=(6,)),
    "categorical_noreplace": lambda k: random.categorical(
        k, fnp.log(fnp.array([[0.2, 0.5, 0.3], [.1, .1, .8]])), shape=(2, 2), replace=False),
    "gumbel": lambda k: random.gumbel(k, (4,)),
    "gumbel_high": lambda k: random.gumbel(k, (4,), mode="high"),
    "gumbel_highest": lambda k: random.gumbel(k, (4,), mode="highest"),
    "exponential": lambda k: random.exponential(k, (4,)),
    "laplace": lambda k: random.laplace(k, (4,)),
    "logistic": lambda k: random.logistic(k, (4,)),
    "cauchy": lambda k: random.cauchy(k, (4,)),
    "rademacher": lambda k: random.rademacher(k, (8,)),
    "pareto": lambda k: random.pareto(k, 3., (4,)),
    "rayleigh": lambda k: random.rayleigh(k, 2., (4,)),
    "maxwell": lambda k: random.maxwell(k, (4,)),
    "double_sided_maxwell": lambda k: random.double_sided_maxwell(k, 1., 2., (4,)),
    "weibull_min": lambda k: random.weibull_min(k, 1.5, 2., (4,)),
    "lognormal": lambda k: random.lognormal(k, 0.5, (4,)),
    "triangular": lambda k: random.triangular(k, 0., .3, 1., (4,)),
    "wald": lambda k: random.wald(k, 2., (4,)),
    "geometric": lambda k: random.geometric(k, .25, (6,)),
    "gamma": lambda k: random.gamma(k, 2.5, (4,)),
    "gamma_small": lambda k: random.gamma(k, 0.3, (4,)),
    "loggamma": lambda k: random.loggamma(k, 0.01, (4,)),
    "beta": lambda k: random.beta(k, 2., 5., (4,)),
    "dirichlet": lambda k: random.dirichlet(k, fnp.array([1., 2., 3.]), (2,)),
    "chisquare": lambda k: random.chisquare(k, 3., (4,)),
    "f": lambda k: random.f(k, 5., 10., (4,)),
    "t": lambda k: random.t(k, 4., (4,)),
    "generalized_normal": lambda k: random.generalized_normal(k, 1.5, (4,)),
    "ball": lambda k: random.ball(k, 3, shape=(2,)),
    "poisson": lambda k: random.poisson(k, 3.5, (6,)),
    "poisson_large": lambda k: random.poisson(k, 30., (6,)),
    "binomial": lambda k: random.binomial(k, 20., 0.3, (6,)),
    "binomial_large": lambda k: random.binomial(k, 200., 0.6, (6,)),
    "multinomial": lambda k: random.multinomial(k, 10., fnp.array([.2, .3, .5]), shape=(2, 3)),
}

# Outputs of jax.random 0.10.2 (CPU, x64 off) for jax.random.PRNGKey(7), printed once by running the same calls
# in JAX: the default (partitionable) Threefry stream.  Floats agree to a few ulps (XLA's erf_inv, log, tan
# are different polynomials from numpy/scipy's); integers and booleans exactly.
JAX_VALUES = {
    'uniform': [1.3704495429992676, 2.873084545135498, -0.4857821464538574, 0.21979260444641113],
    'normal': [0.4512351453304291, 1.9534509181976318, -0.5162394642829895, -0.14094029366970062],
    'truncated_normal': [0.5547337532043457, 1.711128830909729, -0.23639945685863495, 0.055367838591337204],
    'bernoulli': [False, False, True, True, False, False, True, True],
    'bernoulli_high': [False, False, True, True, False, False, True, True],
    'randint': [44, 12, 85, 17, 52, 36],
    'randint_u8': [31, 102, 124, 237, 222, 102],
    'bits': [2895194379, 4185947648, 1300703658],
    'permutation': [4, 2, 3, 5, 0, 7, 6, 1],
    'permutation_rows': [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0], [0.0, 1.0, 2.0], [3.0, 4.0, 5.0]],
    'permutation_indep': [[2.0, 3.0, 0.0, 1.0], [4.0, 5.0, 7.0, 6.0], [10.0, 9.0, 11.0, 8.0]],
    'choice': [9, 2, 0, 7],
    'choice_noreplace': [9, 4, 2, 3],
    'choice_p': [2, 0, 3, 2],
    'choice_p_noreplace': [1, 4, 0],
    'choice_axis1': [[3.0, 2.0], [7.0, 6.0], [11.0, 10.0]],
    'categorical': [1, 1, 1, 2, 2, 2],
    'categorical_noreplace': [[1, 2], [0, 1]],
    'gumbel': [0.9304105043411255, 3.6608431339263916, -0.17776018381118774, 0.20822525024414062],
    'gumbel_high': [-0.11434049904346466, -1.3011914491653442, 1.0195823907852173, 0.5328795313835144],
    'gumbel_highest': [-0.11434070765972137, -1.3011914491653442, 1.0195822715759277, 0.5328795313835144],
    'exponential': [1.121133804321289, 3.673671007156372, 0.36074545979499817, 0.5869123935699463],
    'laplace': [-0.42798662185668945, -2.980525016784668, 0.501391589641571, 0.11887689679861069],
    'logistic': [0.7267420291900635, 3.6479601860046387, -0.8337934017181396, -0.225111722946167],
    'cauchy': [0.6088750958442688, 12.513639450073242, -0.7129808664321899, -0.1779012531042099],
    'rademacher': [-1, -1, 1, 1, -1, -1, 1, 1],
    'pareto': [1.4531176090240479, 3.402658462524414, 1.127777099609375, 1.2160859107971191],
    'rayleigh': [1.776269793510437, 0.4535268545150757, 3.0913283824920654, 2.5487630367279053],
    'maxwell': [2.070286750793457, 0.7144703269004822, 1.4999796152114868, 1.7056729793548584],
    'double_sided_maxwell': [-1.4771909713745117, -4.170105457305908, 3.7603445053100586, 5.872409343719482],
    'weibull_min': [1.5882542133331299, 2.875023365020752, 0.9009312987327576, 1.1491531133651733],
    'lognormal': [1.253096342086792, 2.655745506286621, 0.7725027203559875, 0.9319555759429932],
    'triangular': [0.5223630666732788, 0.866702675819397, 0.30142325162887573, 0.3761177659034729],
    'wald': [0.4709510803222656, 2.442716360092163, 0.9705779552459717, 1.0940815210342407],
    'geometric': [2, 1, 5, 3, 2, 2],
    'gamma': [2.6251301765441895, 1.2272989749908447, 1.315557837486267, 4.322723865509033],
    'gamma_small': [5.715880888601532e-07, 0.15852943062782288, 7.046175596769899e-05, 1.8172049522399902],
    'loggamma': [-438.7729797363281, -28.83196258544922, -263.697265625, -9.793898582458496],
    'beta': [0.2365058958530426, 0.23457829654216766, 0.1805489957332611, 0.21399518847465515],
    'dirichlet': [[0.2665558457374573, 0.24637803435325623, 0.4870661497116089], [0.4385974109172821, 0.16207508742809296, 0.39932748675346375]],
    'chisquare': [3.022066593170166, 1.0437909364700317, 1.1556823253631592, 5.77679967880249],
    'f': [0.5939523577690125, 1.0799014568328857, 1.4313676357269287, 0.7247201800346375],
    't': [1.9892710447311401, 0.14646531641483307, -0.49617937207221985, -0.6886728405952454],
    'generalized_normal': [-0.11314882338047028, -0.786064863204956, 0.05867381393909454, 0.3168768882751465],
    'ball': [[-0.3638841509819031, 0.39458540081977844, 0.11975819617509842], [-0.48726168274879456, 0.13322879374027252, -0.14461813867092133]],
    'poisson': [4, 1, 1, 3, 2, 8],
    'poisson_large': [33, 36, 28, 29, 25, 30],
    'binomial': [8.0, 10.0, 6.0, 7.0, 5.0, 2.0],
    'binomial_large': [116.0, 112.0, 136.0, 107.0, 121.0, 120.0],
    'multinomial': [[2.0, 4.0, 4.0], [3.0, 3.0, 4.0]],
}

# The same calls under JAX's classic stream (jax.threefry_partitionable(False)), also JAX 0.10.2's outputs
# ("split" is jax.random.split(PRNGKey(7), 3)).
LEGACY = {
    'split': [[276534068, 861967409], [1905761346, 1641862660], [2900896126, 1402713516]],
    'uniform': [-0.8750773668289185, -0.8483154773712158, 0.2680467367172241, -0.7676888704299927],
    'normal': [-0.7554664611816406, -0.7377376556396484, -0.1165473535656929, -0.6856648325920105],
    'randint': [27, 80, 26, 8, -5, 23],
    'permutation': [5, 0, 2, 4, 7, 1, 6, 3],
    'gamma': [2.6148200035095215, 0.6804071664810181, 4.196759223937988, 5.965933799743652],
    'poisson': [2, 4, 5, 2, 3, 1],
}

KEY7 = random.PRNGKey(7)


def _close(got, expected):
    got = np.asarray(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax(name):
    _close(CASES[name](KEY7), JAX_VALUES[name])


@pytest.mark.parametrize("name", list(CASES))
def test_typed_key_gives_the_raw_keys_numbers(name):
    _close(CASES[name](random.key(7)), JAX_VALUES[name])


@pytest.fixture
def legacy_stream():
    fg.config.update("jax_threefry_partitionable", False)    # the jax_ spelling is accepted too
    try:
        yield
    finally:
        fg.config.update("threefry_partitionable", True)


@pytest.mark.parametrize("name", list(LEGACY))
def test_legacy_stream_matches_jax(name, legacy_stream):
    got = random.split(KEY7, 3) if name == "split" else CASES[name](KEY7)
    _close(got, LEGACY[name])


def test_config_switch_retraces_jit():
    f = fg.jit(lambda k: random.uniform(k, (4,), minval=-2., maxval=3.))
    _close(f(KEY7), JAX_VALUES["uniform"])
    fg.config.update("threefry_partitionable", False)
    try:
        _close(f(KEY7), LEGACY["uniform"])
    finally:
        fg.config.update("threefry_partitionable", True)
    _close(f(KEY7), JAX_VALUES["uniform"])
    assert f.cache_info()["misses"] == 2


def test_split_is_fold_in_in_the_partitionable_stream():
    # A JAX property of the default stream (checked in JAX 0.10.2): split(k, n)[i] == fold_in(k, i).
    keys = np.asarray(random.split(KEY7, 5))
    for i in range(5):
        np.testing.assert_array_equal(keys[i], np.asarray(random.fold_in(KEY7, i)))


# --------------------------------------------------------------------------
# Typed keys
# --------------------------------------------------------------------------


def test_typed_key_api():
    k = random.key(42)
    assert isinstance(k, random.PRNGKeyArray) and k.shape == () and k.ndim == 0
    assert k.dtype == random.key_dtype() and str(k.dtype) == "key<fry>"
    np.testing.assert_array_equal(np.asarray(random.key_data(k)), [0, 42])
    assert random.key_impl(k) == "threefry2x32" and random.key_impl(random.PRNGKey(0)) == "threefry2x32"
    keys = random.split(k, (2, 3))
    assert isinstance(keys, random.PRNGKeyArray) and keys.shape == (2, 3) and len(keys) == 2
    assert random.key_data(keys).shape == (2, 3, 2)
    np.testing.assert_array_equal(np.asarray(random.key_data(keys[1, 2])),
                                  np.asarray(random.split(random.PRNGKey(42), 6))[5])
    assert keys[..., 0].shape == (2,) and keys.reshape(6).shape == (6,) and keys.ravel().shape == (6,)
    np.testing.assert_array_equal(np.asarray(random.key_data(keys.flatten()[4])),
                                  np.asarray(random.key_data(keys[1, 1])))
    a, b = random.split(k)
    assert a.shape == () and not bool(a == b)
    wrapped = random.wrap_key_data(random.key_data(keys))
    assert wrapped.shape == (2, 3) and np.asarray(wrapped == keys).all()
    assert random.clone(k) is k
    assert isinstance(random.fold_in(k, 3), random.PRNGKeyArray)
    raw = random.split(random.PRNGKey(42))
    assert not isinstance(raw, random.PRNGKeyArray) and raw.shape == (2, 2)


def test_typed_keys_under_jit_vmap_scan():
    keys = random.split(random.key(1), 4)
    loop = np.stack([np.asarray(random.normal(keys[i], (3,))) for i in range(4)])
    np.testing.assert_array_equal(np.asarray(fg.vmap(lambda k: random.normal(k, (3,)))(keys)), loop)
    np.testing.assert_allclose(np.asarray(fg.jit(fg.vmap(lambda k: random.normal(k, (3,))))(keys)), loop,
                               rtol=1e-6, atol=2e-7)
    # A typed key comes back out of jit and vmap as a typed key.
    out = fg.jit(lambda k: random.split(k, 3))(random.key(1))
    assert isinstance(out, random.PRNGKeyArray) and out.shape == (3,)
    np.testing.assert_array_equal(np.asarray(random.key_data(out)),
                                  np.asarray(random.key_data(random.split(random.key(1), 3))))
    sub = fg.vmap(lambda k: random.split(k)[0])(keys)
    assert isinstance(sub, random.PRNGKeyArray) and sub.shape == (4,)
    _, ys = lax.scan(lambda c, k: (c, random.uniform(k)), 0.0, keys)
    np.testing.assert_array_equal(np.asarray(ys), [float(random.uniform(keys[i])) for i in range(4)])


def test_key_errors():
    with pytest.raises(NotImplementedError, match="impl"):
        random.key(0, impl="rbg")
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(random.key(0))
    with pytest.raises(TypeError, match="uint32 words|expected a key"):
        random.wrap_key_data(fnp.zeros((3,), dtype=fnp.int32))
    with pytest.raises(TypeError, match="typed key array of shape \\(3,\\)"):
        random.uniform(random.split(random.key(0), 3))
    with pytest.raises(TypeError, match="seed must be an integer"):
        random.key(1.5)
    with pytest.raises(NotImplementedError, match="out_sharding"):
        random.normal(random.key(0), (2,), out_sharding="x")
    with pytest.raises(ValueError, match="mode"):
        random.bernoulli(random.key(0), 0.5, mode="medium")
    with pytest.raises(ValueError, match="mode"):
        random.gumbel(random.key(0), mode="higher")
    with pytest.raises(ValueError, match="larger sample"):
        random.choice(random.key(0), 3, (4,), replace=False)
    with pytest.raises(ValueError, match="p must be None or a 1-d vector"):
        random.choice(random.key(0), 3, (2,), p=fnp.ones(4) / 4)
    with pytest.raises(TypeError, match="shape must be a sequence"):
        random.choice(random.key(0), 3, 2)
    with pytest.raises(ValueError, match="cannot exceed the number of categories"):
        random.categorical(random.key(0), fnp.zeros(3), shape=(4,), replace=False)
    with pytest.raises(ValueError, match="alpha must have at least 1 dimension"):
        random.dirichlet(random.key(0), 1.0)
    with pytest.raises(ValueError, match="must end with the number of categories"):
        random.multinomial(random.key(0), 5.0, fnp.ones(3) / 3, shape=(2, 4))
    with pytest.raises(ValueError, match="integer type"):
        random.poisson(random.key(0), 2.0, dtype=fnp.float32)
    with pytest.raises(ValueError, match="not compatible"):
        random.gamma(random.key(0), fnp.ones(3), shape=(2,))
    with pytest.raises(ValueError, match="method"):
        random.multivariate_normal(random.key(0), fnp.zeros(2), fnp.eye(2), method="qr")


# --------------------------------------------------------------------------
# The laws: moments (5 standard errors) and Kolmogorov-Smirnov / frequencies against scipy.stats
# --------------------------------------------------------------------------

N = 10000
KEY = random.key(2024)

# name -> (sampler(key, n) returning draws of the law, scipy law); transformed draws where the law has no scipy twin.
LAWS = {
    "exponential": (lambda k, n: random.exponential(k, (n,)), scipy.stats.expon()),
    "laplace": (lambda k, n: random.laplace(k, (n,)), scipy.stats.laplace()),
    "logistic": (lambda k, n: random.logistic(k, (n,)), scipy.stats.logistic()),
    "cauchy": (lambda k, n: random.cauchy(k, (n,)), scipy.stats.cauchy()),
    "pareto(3)": (lambda k, n: random.pareto(k, 5.0, (n,)), scipy.stats.pareto(5.0)),
    "rayleigh(2)": (lambda k, n: random.rayleigh(k, 2.0, (n,)), scipy.stats.rayleigh(scale=2.0)),
    "maxwell": (lambda k, n: random.maxwell(k, (n,)), scipy.stats.maxwell()),
    "|double_sided_maxwell(1,2) - 1| / 2": (
        lambda k, n: fnp.abs(random.double_sided_maxwell(k, 1.0, 2.0, (n,)) - 1.0) / 2.0, scipy.stats.maxwell()),
    "weibull_min(1.5,2)": (lambda k, n: random.weibull_min(k, 1.5, 2.0, (n,)),
                           scipy.stats.weibull_min(2.0, scale=1.5)),
    "lognormal(0.5)": (lambda k, n: random.lognormal(k, 0.5, (n,)), scipy.stats.lognorm(0.5)),
    "triangular(0,.3,1)": (lambda k, n: random.triangular(k, 0.0, 0.3, 1.0, (n,)),
                           scipy.stats.triang(0.3, loc=0.0, scale=1.0)),
    "wald(2)": (lambda k, n: random.wald(k, 2.0, (n,)), scipy.stats.invgauss(2.0)),
    "gamma(0.5)": (lambda k, n: random.gamma(k, 0.5, (n,)), scipy.stats.gamma(0.5)),
    "gamma(2.5)": (lambda k, n: random.gamma(k, 2.5, (n,)), scipy.stats.gamma(2.5)),
    "exp(loggamma(0.7))": (lambda k, n: fnp.exp(random.loggamma(k, 0.7, (n,))), scipy.stats.gamma(0.7)),
    "beta(2,5)": (lambda k, n: random.beta(k, 2.0, 5.0, (n,)), scipy.stats.beta(2.0, 5.0)),
    "dirichlet([1,2,3])[1]": (lambda k, n: random.dirichlet(k, fnp.array([1.0, 2.0, 3.0]), (n,))[:, 1],
                              scipy.stats.beta(2.0, 4.0)),
    "chisquare(3)": (lambda k, n: random.chisquare(k, 3.0, (n,)), scipy.stats.chi2(3.0)),
    "f(5,10)": (lambda k, n: random.f(k, 5.0, 10.0, (n,)), scipy.stats.f(5.0, 10.0)),
    "t(5)": (lambda k, n: random.t(k, 5.0, (n,)), scipy.stats.t(5.0)),
    "generalized_normal(1.5)": (lambda k, n: random.generalized_normal(k, 1.5, (n,)), scipy.stats.gennorm(1.5)),
    "|ball(3)|**3": (lambda k, n: fnp.sum(random.ball(k, 3, shape=(n,)) ** 2, axis=-1) ** 1.5,
                     scipy.stats.uniform()),
    "geometric(.25)": (lambda k, n: random.geometric(k, 0.25, (n,)), scipy.stats.geom(0.25)),
    "poisson(3.5)": (lambda k, n: random.poisson(k, 3.5, (n,)), scipy.stats.poisson(3.5)),
    "poisson(30)": (lambda k, n: random.poisson(k, 30.0, (n,)), scipy.stats.poisson(30.0)),
    "binomial(20,.3)": (lambda k, n: random.binomial(k, 20.0, 0.3, (n,)), scipy.stats.binom(20, 0.3)),
    "binomial(200,.6)": (lambda k, n: random.binomial(k, 200.0, 0.6, (n,)), scipy.stats.binom(200, 0.6)),
    "multinomial(10,[.2,.3,.5])[2]": (
        lambda k, n: random.multinomial(k, 10.0, fnp.array([0.2, 0.3, 0.5]), shape=(n, 3))[:, 2],
        scipy.stats.binom(10, 0.5)),
    "(rademacher + 1) / 2": (lambda k, n: (random.rademacher(k, (n,)) + 1) // 2, scipy.stats.bernoulli(0.5)),
    "choice(p)": (lambda k, n: random.choice(k, 5, (n,), p=P5),
                  scipy.stats.rv_discrete(values=(np.arange(5), np.asarray(P5, np.float64)))),
}


@pytest.fixture(scope="module")
def draws():
    cache = {}

    def get(name):
        if name not in cache:
            sampler, _ = LAWS[name]
            cache[name] = np.asarray(sampler(random.fold_in(KEY, len(cache)), N)).astype(np.float64)
        return cache[name]
    return get


@pytest.mark.parametrize("name", list(LAWS))
def test_law(name, draws):
    x = draws(name)
    law = LAWS[name][1]
    assert x.shape == (N,) and np.all(np.isfinite(x))
    mean, var, skew, excess_kurtosis = (float(v) for v in law.stats(moments="mvsk"))
    if np.isfinite(excess_kurtosis):   # (cauchy has no moments)
        fourth_central = (excess_kurtosis + 3.0) * var**2
        assert abs(x.mean() - mean) < 5 * np.sqrt(var / N), (x.mean(), mean)
        # (+ the second-order term, which is all there is for a fair coin, whose fourth moment is var**2)
        assert abs(x.var() - var) < 5 * np.sqrt((fourth_central - var**2) / N) + 25 * var / N, (x.var(), var)
    if hasattr(law, "pdf"):
        assert scipy.stats.kstest(x, law.cdf).statistic < 1.95 / np.sqrt(N)   # 0.1% level
    else:
        values, counts = np.unique(x, return_counts=True)
        p = law.pmf(values)
        assert np.all(p > 0), "a value outside the support was drawn"
        assert np.all(np.abs(counts / N - p) < 5 * np.sqrt(p * (1 - p) / N) + 1 / N)


def test_supports_and_shapes():
    k = random.key(3)
    assert random.beta(k, 0.5, 0.5, (100,)).shape == (100,)
    x = np.asarray(random.dirichlet(k, fnp.array([[0.5, 1.0, 2.0], [3.0, 3.0, 3.0]])))
    assert x.shape == (2, 3) and np.allclose(x.sum(-1), 1.0, atol=1e-6) and np.all(x >= 0)
    b = np.asarray(random.ball(k, 4, p=1.0, shape=(500,)))
    assert b.shape == (500, 4) and np.all(np.abs(b).sum(-1) < 1)
    m = np.asarray(random.multinomial(k, fnp.array([5.0, 7.0]), fnp.array([0.1, 0.0, 0.9]), shape=(2, 3)))
    np.testing.assert_array_equal(m.sum(-1), [5.0, 7.0])
    assert np.all(m[:, 1] == 0)
    assert random.double_sided_maxwell(k, fnp.zeros(2), 1.0).shape == (2, 2)     # JAX: shape + params' shape
    assert random.double_sided_maxwell(k, fnp.zeros(2), 1.0, (3,)).shape == (3, 2)
    ints = np.asarray(random.poisson(k, fnp.array([0.0, 1e-3, 12.0]), (200, 3)))
    assert ints.dtype == np.int32 and np.all(ints[:, 0] == 0) and ints.min() >= 0
    bn = np.asarray(random.binomial(k, fnp.array([np.nan, -1.0, np.inf, 5.0, 5.0]),
                                    fnp.array([0.5, 0.5, 0.5, np.nan, 1.0])))
    assert np.isnan(bn[:2]).all() and bn[2] == np.inf and np.isnan(bn[3]) and bn[4] == 5.0
    assert np.asarray(random.choice(k, fnp.arange(6.0), (3,), replace=False)).tolist() != []
    no = np.asarray(random.categorical(k, fnp.zeros((4, 6)), axis=-1, shape=(6, 4), replace=False))
    assert no.shape == (6, 4) and all(sorted(no[:, j]) == list(range(6)) for j in range(4))
    assert random.choice(k, 5, (0,)).shape == (0,)
    tiny = np.asarray(random.loggamma(k, 1e-4, (20,)))
    assert np.all(np.isfinite(tiny)) and tiny.max() < -10     # gamma itself would underflow to 0


# --------------------------------------------------------------------------
# Transforms: jit gives the eager numbers, vmap over keys matches a loop
# --------------------------------------------------------------------------

SAMPLERS = {
    "gamma": lambda k: random.gamma(k, fnp.array([0.4, 2.0, 7.0])),
    "beta": lambda k: random.beta(k, 2.0, 3.0, (3,)),
    "poisson": lambda k: random.poisson(k, fnp.array([2.0, 40.0])),
    "binomial": lambda k: random.binomial(k, fnp.array([5.0, 300.0]), 0.4),
    "multinomial": lambda k: random.multinomial(k, 6.0, fnp.array([0.2, 0.8])),
    "choice": lambda k: random.choice(k, 7, (3,), replace=False),
    "choice_p": lambda k: random.choice(k, 4, (3,), p=fnp.array([0.1, 0.2, 0.3, 0.4])),
    "exponential": lambda k: random.exponential(k, (3,)),
    "t": lambda k: random.t(k, 3.0, (2,)),
    "dirichlet": lambda k: random.dirichlet(k, fnp.array([1.0, 2.0])),
    "geometric": lambda k: random.geometric(k, 0.3, (3,)),
    "split_typed": lambda k: random.key_data(random.split(k, 2)),
}


def _same(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, expected)


# jit compiles the rejection loops' bodies into kernels (seconds each): one of them is enough here.
JIT_SAMPLERS = ("gamma", "choice", "choice_p", "exponential", "geometric", "split_typed")


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_jit_and_vmap(name):
    f = SAMPLERS[name]
    keys = random.split(random.key(11), 3)
    looped = np.stack([np.asarray(f(keys[i])) for i in range(3)])
    _same(fg.vmap(f)(keys), looped)
    _same(fg.vmap(f)(random.key_data(keys)), looped)      # raw keys too
    if name in JIT_SAMPLERS:
        _same(fg.jit(f)(keys[1]), looped[1])


# --------------------------------------------------------------------------
# Derivatives
# --------------------------------------------------------------------------


def test_random_gamma_grad_against_scipy_quantile(x64):
    # d/da of the sample at a fixed CDF value q: d/da gamma.ppf(q, a), by central differences on scipy.
    a = np.array([0.3, 1.0, 2.5, 8.0, 30.0])
    x = np.array([0.05, 0.7, 4.0, 6.5, 33.0])
    q = scipy.special.gammainc(a, x)
    h = 1e-6 * a
    expected = (scipy.stats.gamma.ppf(q, a + h) - scipy.stats.gamma.ppf(q, a - h)) / (2 * h)
    got = np.asarray(lax.random_gamma_grad(fnp.asarray(a), fnp.asarray(x)))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def _implicit_gamma_grad(a, x):
    """d/da of gamma.ppf(q, a) at q = cdf(x, a), by central differences on scipy (the implicit gradient)."""
    q = scipy.special.gammainc(a, x)
    h = 1e-6 * a
    return (scipy.stats.gamma.ppf(q, a + h) - scipy.stats.gamma.ppf(q, a - h)) / (2 * h)


def test_gamma_gradient_is_the_implicit_reparameterization(x64):
    # As JAX: the derivative of the sample at its fixed CDF value (not the derivative of the rejection sampler's
    # path, which differs), so the reference is scipy's quantile function differentiated in a.
    k = random.key(5)
    a0 = np.array([0.3, 0.9, 1.7, 4.0, 12.0])
    samples, tangent = fg.jvp(lambda a: random.gamma(k, a), (fnp.asarray(a0),), (fnp.ones(5),))
    expected = _implicit_gamma_grad(a0, np.asarray(samples))
    np.testing.assert_allclose(np.asarray(tangent), expected, rtol=1e-5)
    g = fg.grad(lambda a: random.gamma(k, a).sum())(fnp.asarray(a0))
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-5)
    # loggamma: d log x = dx / x
    lg = fg.grad(lambda a: random.loggamma(k, a).sum())(fnp.asarray(a0))
    xs = np.exp(np.asarray(random.loggamma(k, fnp.asarray(a0))))
    np.testing.assert_allclose(np.asarray(lg), _implicit_gamma_grad(a0, xs) / xs, rtol=1e-5)


def _mean_within(samples, expected):
    samples = np.asarray(samples, np.float64)
    assert abs(samples.mean() - expected) < 5 * samples.std() / np.sqrt(samples.size), (samples.mean(), expected)


def test_reparameterization_gradients_are_unbiased():
    # E[dx/da] = dE[x]/da: gamma's mean is a; beta's a / (a + b); a Dirichlet coordinate's a_i / sum(a).
    n = 4000
    keys = random.split(random.key(12), n)
    _mean_within(fg.vmap(lambda kk: fg.grad(lambda a: random.gamma(kk, a))(fnp.asarray(1.7)))(keys), 1.0)
    a, b = 2.0, 3.0
    grads = fg.vmap(lambda kk: fg.grad(lambda a_: random.beta(kk, a_, b))(fnp.asarray(a)))(keys)
    _mean_within(grads, b / (a + b) ** 2)
    alpha = np.array([1.5, 2.0, 0.7])
    grads = np.asarray(fg.vmap(lambda kk: fg.grad(lambda al: random.dirichlet(kk, al)[0])(fnp.asarray(alpha)))(keys))
    total = alpha.sum()
    _mean_within(grads[:, 0], (total - alpha[0]) / total**2)
    _mean_within(grads[:, 1], -alpha[0] / total**2)


def test_gamma_second_derivative_follows_the_implicit_path(x64):
    # z(a) moves along dz/da = g(a, z) (g = random_gamma_grad, checked against scipy above), so
    # d2z/da2 = d/dt g(a + t, z + t g(a, z)) at t = 0: a directional difference of g.
    k = random.key(5)
    d1 = fg.grad(lambda a: random.gamma(k, a))
    d2 = fg.grad(d1)
    g = lambda a, z: float(lax.random_gamma_grad(fnp.asarray(a), fnp.asarray(z)))  # noqa: E731
    for a in (0.6, 2.5, 9.0):
        z = float(random.gamma(k, fnp.asarray(a)))
        g0 = g(a, z)
        assert float(d1(fnp.asarray(a))) == pytest.approx(g0, rel=1e-12)
        h = 1e-5 * a
        fd = (g(a + h, z + h * g0) - g(a - h, z - h * g0)) / (2 * h)
        assert float(d2(fnp.asarray(a))) == pytest.approx(fd, rel=1e-5)
    with pytest.raises(NotImplementedError, match="third derivatives"):
        fg.grad(d2)(fnp.asarray(2.0))


def test_random_gamma_grad_partials_match_differences(x64):
    a = np.array([0.3, 1.0, 2.5, 8.0, 30.0])
    x = np.array([0.05, 0.7, 4.0, 6.5, 33.0])
    f = lambda aa, xx: np.asarray(lax.random_gamma_grad(fnp.asarray(aa), fnp.asarray(xx)))  # noqa: E731
    h = 1e-5
    got_a = fg.vmap(fg.grad(lax.random_gamma_grad))(fnp.asarray(a), fnp.asarray(x))
    got_x = fg.vmap(fg.grad(lax.random_gamma_grad, argnums=1))(fnp.asarray(a), fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got_a), (f(a * (1 + h), x) - f(a * (1 - h), x)) / (2 * h * a), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_x), (f(a, x * (1 + h)) - f(a, x * (1 - h))) / (2 * h * x), rtol=1e-5)


@pytest.mark.parametrize("name,fn,args", [
    ("rayleigh", lambda s: random.rayleigh(random.key(1), s, (3,)), (1.5,)),
    ("lognormal", lambda s: random.lognormal(random.key(1), s, (3,)), (0.7,)),
    ("pareto", lambda b: random.pareto(random.key(1), b, (3,)), (2.5,)),
    ("weibull_min", lambda s, c: random.weibull_min(random.key(1), s, c, (3,)), (1.5, 2.0)),
    ("wald", lambda m: random.wald(random.key(1), m, (3,)), (1.3,)),
    ("triangular", lambda lo, m, hi: random.triangular(random.key(1), lo, m, hi, (3,)), (-1.0, 0.2, 2.0)),
    ("double_sided_maxwell", lambda loc, s: random.double_sided_maxwell(random.key(1), loc, s, (3,)), (0.5, 2.0)),
])
def test_smooth_parameters_check_grads(name, fn, args, x64):
    from funcgrad.testing import check_grads
    check_grads(fn, tuple(fnp.asarray(a) for a in args), order=2, modes=("fwd", "rev"))


# --------------------------------------------------------------------------
# multivariate_normal and orthogonal (on funcgrad.numpy.linalg; numpy's factorizations stand in where this
# build lacks them, so the sampling logic is checked either way)
# --------------------------------------------------------------------------


@pytest.fixture
def linalg(monkeypatch):
    stand_ins = {
        "cholesky": lambda c: fnp.asarray(np.linalg.cholesky(np.asarray(c))),
        "eigh": lambda c: tuple(fnp.asarray(v) for v in np.linalg.eigh(np.asarray(c))),
        "svd": lambda c: tuple(fnp.asarray(v) for v in np.linalg.svd(np.asarray(c))),
        "qr": lambda z: tuple(fnp.asarray(v) for v in np.linalg.qr(np.asarray(z))),
    }
    for name, fn in stand_ins.items():
        if not hasattr(fnp.linalg, name):
            monkeypatch.setattr(fnp.linalg, name, fn, raising=False)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_covariance(method, linalg):
    mean = np.array([1.0, -2.0, 0.5])
    a = np.array([[1.0, 0.3, 0.0], [0.2, 1.0, 0.4], [0.0, -0.3, 0.8]])
    cov = a @ a.T
    x = np.asarray(random.multivariate_normal(random.key(8), fnp.asarray(mean), fnp.asarray(cov), (N,),
                                              method=method), np.float64)
    assert x.shape == (N, 3)
    se = np.sqrt(np.outer(np.diag(cov), np.diag(cov)) / N)   # roughly the standard error of each entry
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(np.diag(cov) / N))
    assert np.all(np.abs(np.cov(x.T) - cov) < 5 * np.sqrt(2) * se)


def test_multivariate_normal_cholesky_is_mean_plus_factor_times_normals(linalg):
    mean, cov = np.array([0.5, -1.0]), np.array([[2.0, 0.6], [0.6, 1.0]])
    k = random.key(9)
    got = np.asarray(random.multivariate_normal(k, fnp.asarray(mean), fnp.asarray(cov), (4,)))
    z = np.asarray(random.normal(k, (4, 2)), np.float64)
    np.testing.assert_allclose(got, mean + z @ np.linalg.cholesky(cov).T, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n,m", [(3, 3), (4, 2), (2, 4)])
def test_orthogonal(n, m, linalg):
    q = np.asarray(random.orthogonal(random.key(10), n, (5,), m=m), np.float64)
    assert q.shape == (5, n, m)
    small = min(n, m)
    gram = np.swapaxes(q, -1, -2) @ q if n >= m else q @ np.swapaxes(q, -1, -2)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(small), (5, small, small)), atol=1e-5)




def test_degenerate_parameters_as_jax():
    # jax.random 0.10.2 gives, for PRNGKey(0): gamma([-1, 0, nan, inf]) = [nan, 0, nan, inf];
    # poisson([-1, nan]) = [-1, -1]; poisson([inf, 3, 30]) = [0, 0, 23]; binomial(5, [-0.1, 1.5]) = [nan, nan].
    k = random.PRNGKey(0)
    with np.errstate(all="ignore"):
        g = np.asarray(random.gamma(k, fnp.array([-1.0, 0.0, np.nan, np.inf])))
        assert np.isnan(g[0]) and g[1] == 0 and np.isnan(g[2]) and g[3] == np.inf
        np.testing.assert_array_equal(np.asarray(random.poisson(k, fnp.array([-1.0, np.nan]))), [-1, -1])
        np.testing.assert_array_equal(np.asarray(random.poisson(k, fnp.array([np.inf, 3.0, 30.0]))), [0, 0, 23])
        assert np.isnan(np.asarray(random.binomial(k, 5.0, fnp.array([-0.1, 1.5])))).all()


DTYPED = {
    "uniform": lambda k, dt: random.uniform(k, (3,), dt),
    "normal": lambda k, dt: random.normal(k, (3,), dt),
    "truncated_normal": lambda k, dt: random.truncated_normal(k, -1., 1., (3,), dt),
    "gumbel[high]": lambda k, dt: random.gumbel(k, (3,), dt, mode="high"),
    "exponential": lambda k, dt: random.exponential(k, (3,), dt),
    "laplace": lambda k, dt: random.laplace(k, (3,), dt),
    "logistic": lambda k, dt: random.logistic(k, (3,), dt),
    "cauchy": lambda k, dt: random.cauchy(k, (3,), dt),
    "pareto": lambda k, dt: random.pareto(k, 2., (3,), dt),
    "rayleigh": lambda k, dt: random.rayleigh(k, 2., (3,), dt),
    "maxwell": lambda k, dt: random.maxwell(k, (3,), dt),
    "double_sided_maxwell": lambda k, dt: random.double_sided_maxwell(k, 0., 1., (3,), dt),
    "weibull_min": lambda k, dt: random.weibull_min(k, 1., 2., (3,), dt),
    "lognormal": lambda k, dt: random.lognormal(k, .5, (3,), dt),
    "triangular": lambda k, dt: random.triangular(k, 0., .5, 1., (3,), dt),
    "wald": lambda k, dt: random.wald(k, 1., (3,), dt),
    "gamma": lambda k, dt: random.gamma(k, 2., (3,), dt),
    "loggamma": lambda k, dt: random.loggamma(k, .5, (3,), dt),
    "beta": lambda k, dt: random.beta(k, 2., 3., (3,), dt),
    "dirichlet": lambda k, dt: random.dirichlet(k, fnp.ones(3), (2,), dt),
    "chisquare": lambda k, dt: random.chisquare(k, 3., (3,), dt),
    "f": lambda k, dt: random.f(k, 3., 4., (3,), dt),
    "t": lambda k, dt: random.t(k, 3., (3,), dt),
    "generalized_normal": lambda k, dt: random.generalized_normal(k, 1.5, (3,), dt),
    "ball": lambda k, dt: random.ball(k, 2, 2, (3,), dt),
    "binomial": lambda k, dt: random.binomial(k, 10., .3, (3,), dt),
    "multinomial": lambda k, dt: random.multinomial(k, 10., fnp.ones(3) / 3, dtype=dt),
}


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_float_dtypes(dtype):
    for name, fn in DTYPED.items():
        x = fn(random.key(1), dtype)
        assert x.dtype == dtype and np.all(np.isfinite(np.asarray(x, np.float64))), name


def test_float64_under_x64(x64):
    for name, fn in DTYPED.items():
        x = fn(random.key(1), np.float64)
        assert x.dtype == np.float64 and np.all(np.isfinite(np.asarray(x))), name


def test_64_bit_draws_match_jax(x64):
    # JAX 0.10.2 with jax_enable_x64=True, PRNGKey(7): bits(u64), uniform/normal/gamma(f64), randint(i64).
    k = random.PRNGKey(7)
    np.testing.assert_array_equal(np.asarray(random.bits(k, (3,), np.uint64)),
                                  np.array([15571024786774969728, 837714335556982463, 4150233810675416579],
                                           np.uint64))
    np.testing.assert_array_equal(np.asarray(random.uniform(k, (3,), np.float64)),
                                  [0.8441069450823528, 0.04541258512665647, 0.22498462569285382])
    np.testing.assert_allclose(np.asarray(random.normal(k, (3,), np.float64)),
                               [1.0114813355590866, -1.6910609087906374, -0.7554662899926428], rtol=1e-14)
    np.testing.assert_array_equal(np.asarray(random.randint(k, (3,), -10**12, 10**12, np.int64)),
                                  [565873535173, 705619275709, -91019902590])
    np.testing.assert_allclose(np.asarray(random.gamma(k, 2.5, (3,), np.float64)),
                               [4.744620073981052, 1.0719926335346703, 1.3004060859615834], rtol=1e-13)
