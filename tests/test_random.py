"""Tests for funcgrad.random: keys, bits, distributions, and their behaviour under jit and vmap.

Statistical checks use n = 20000 draws and a tolerance of 5 standard errors
from the exact moments (scipy.stats), so a correct sampler fails with
probability ~1e-6 per check, and all draws are from fixed keys (so a pass is
reproducible, never flaky).
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import scipy.stats

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _threefry as T
from funcgrad import random

N = 20000
KEY = random.key(1234)


def np_key(k) -> np.ndarray:
    return np.asarray(random.key_data(k)).astype(np.uint32)


@pytest.fixture
def legacy_stream():
    """JAX's classic (pre-0.5) Threefry scheme for the duration of one test."""
    fg.config.update("threefry_partitionable", False)
    try:
        yield
    finally:
        fg.config.update("threefry_partitionable", True)


# --------------------------------------------------------------------------
# Keys and raw bits agree with the (separately tested) numpy Threefry core
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 42, 2**32 + 5, -1, 2**63 - 1])
def test_key_matches_core(seed):
    k = random.PRNGKey(seed)
    assert k.shape == (2,) and k.dtype == np.uint32
    np.testing.assert_array_equal(np_key(k), T.seed_key(seed))
    typed = random.key(seed)
    assert typed.shape == () and typed.dtype == random.key_dtype()
    np.testing.assert_array_equal(np_key(typed), T.seed_key(seed))


@pytest.mark.parametrize("seed", [0, 7, -3, 2**31 - 1])
def test_key_from_traced_seed_matches_python_seed(seed):
    traced = fg.jit(random.key)(fnp.asarray(seed, dtype=fnp.int32))
    np.testing.assert_array_equal(np_key(traced), T.seed_key(seed))
    traced = fg.jit(random.PRNGKey)(fnp.asarray(seed, dtype=fnp.int32))
    np.testing.assert_array_equal(np_key(traced), T.seed_key(seed))


@pytest.mark.parametrize("num", [1, 2, 3, 8])
def test_split_matches_core(num):
    out = random.split(random.key_data(KEY), num)
    assert out.shape == (num, 2) and out.dtype == np.uint32
    np.testing.assert_array_equal(np_key(out), T.split(np_key(KEY), num, partitionable=True))
    typed = random.split(KEY, num)
    assert typed.shape == (num,) and isinstance(typed, random.PRNGKeyArray)
    np.testing.assert_array_equal(np_key(typed), T.split(np_key(KEY), num, partitionable=True))


@pytest.mark.parametrize("num", [1, 3])
def test_legacy_split_matches_core(num, legacy_stream):
    np.testing.assert_array_equal(np_key(random.split(KEY, num)), T.split(np_key(KEY), num))


@pytest.mark.parametrize("data", [0, 1, 12345, 2**32 - 1])
def test_fold_in_matches_core(data):
    np.testing.assert_array_equal(np_key(random.fold_in(KEY, data)), T.fold_in(np_key(KEY), data))
    traced = fg.jit(random.fold_in)(KEY, fnp.asarray(data, dtype=fnp.uint32))
    np.testing.assert_array_equal(np_key(traced), T.fold_in(np_key(KEY), data))


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 4), (0,)])
def test_bits_match_core(shape):
    np.testing.assert_array_equal(np.asarray(random.bits(KEY, shape)),
                                  T.random_bits(np_key(KEY), shape, partitionable=True))


@pytest.mark.parametrize("shape", [(7,), (3, 4)])
def test_legacy_bits_match_core(shape, legacy_stream):
    np.testing.assert_array_equal(np.asarray(random.bits(KEY, shape)), T.random_bits(np_key(KEY), shape))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_narrow_bits_are_the_low_bits_of_the_words(dtype):
    # JAX's partitionable layout for 8/16-bit draws: the low bits of each number's word.
    n = 7
    words = T.random_bits(np_key(KEY), (n,), partitionable=True)
    np.testing.assert_array_equal(np.asarray(random.bits(KEY, (n,), dtype)), words.astype(dtype))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_legacy_narrow_bits_are_the_words_little_endian(dtype, legacy_stream):
    # JAX's layout for 8/16-bit draws: each word's lowest bits first.
    n = 7
    per_word = 4 // np.dtype(dtype).itemsize
    words = T.random_bits(np_key(KEY), (-(-n // per_word),))
    expected = words.astype("<u4").view(np.dtype(dtype).newbyteorder("<"))[:n]
    np.testing.assert_array_equal(np.asarray(random.bits(KEY, (n,), dtype)), expected)


def test_reference_values_from_jax(legacy_stream):
    # jax.random with the threefry2x32 PRNG, jax_threefry_partitionable=False
    # (the default before JAX 0.5): PRNGKey(0) gives uniform() = 0.41845703 and
    # normal(shape=(1,)) = [-0.20584226] (the JAX 101 tutorial).  Normals may
    # differ in the last bit: XLA's erf_inv is a polynomial, ours is scipy's.
    k = random.key(0)
    assert float(random.uniform(k)) == np.float32(0.41845703)
    np.testing.assert_allclose(np.asarray(random.normal(k, (1,))), [-0.20584226], rtol=1e-6)


def test_uniform_is_the_mantissa_bit_trick():
    # Independent recomputation from the raw words in numpy.
    shape, lo, hi = (1000,), -2.0, 3.0
    words = T.random_bits(np_key(KEY), shape, partitionable=True)
    unit = ((words >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    expected = unit * np.float32(hi - lo) + np.float32(lo)
    got = np.asarray(random.uniform(KEY, shape, minval=lo, maxval=hi))
    np.testing.assert_array_equal(got, np.minimum(expected, np.nextafter(np.float32(hi), np.float32(-np.inf))))


def test_key_errors_are_clear():
    with pytest.raises(TypeError, match=r"expected a single key .*got u32\[4,2\].*vmap"):
        random.normal(random.split(random.key_data(KEY), 4), (3,))
    with pytest.raises(TypeError, match=r"expected a single key .*typed key array of shape \(4,\).*vmap"):
        random.normal(random.split(KEY, 4), (3,))
    with pytest.raises(TypeError, match="expected a key"):
        random.uniform(fnp.zeros(2), (3,))
    with pytest.raises(TypeError, match="integer"):
        random.randint(KEY, (3,), 0, 5, dtype=fnp.float32)
    with pytest.raises(TypeError, match="float"):
        random.normal(KEY, (3,), dtype=fnp.int32)
    with pytest.raises(ValueError, match="not compatible"):
        random.uniform(KEY, (3,), minval=fnp.zeros(4))
    from funcgrad.primitives.random_bits import threefry2x32_p
    with pytest.raises(TypeError, match="threefry2x32: every operand must be a uint32 array"):
        fg.make_jaxpr(lambda x: threefry2x32_p.bind(x, x, x, x))(fnp.zeros(2, dtype=fnp.int32))


# --------------------------------------------------------------------------
# Distributions: moments and ranges (table-driven)
# --------------------------------------------------------------------------

# name -> (sampler(key, n), scipy distribution with the exact law)
DISTRIBUTIONS = {
    "uniform": (lambda k, n: random.uniform(k, (n,)), scipy.stats.uniform(0.0, 1.0)),
    "uniform[-2,3)": (lambda k, n: random.uniform(k, (n,), minval=-2.0, maxval=3.0), scipy.stats.uniform(-2.0, 5.0)),
    "normal": (lambda k, n: random.normal(k, (n,)), scipy.stats.norm()),
    "truncated_normal(-1,2)": (lambda k, n: random.truncated_normal(k, -1.0, 2.0, (n,)),
                               scipy.stats.truncnorm(-1.0, 2.0)),
    "truncated_normal(0,inf)": (lambda k, n: random.truncated_normal(k, 0.0, np.inf, (n,)),
                                scipy.stats.truncnorm(0.0, np.inf)),
    "bernoulli(0.3)": (lambda k, n: random.bernoulli(k, 0.3, (n,)), scipy.stats.bernoulli(0.3)),
    "randint[1,7)": (lambda k, n: random.randint(k, (n,), 1, 7), scipy.stats.randint(1, 7)),
    "randint[-1000,5)": (lambda k, n: random.randint(k, (n,), -1000, 5), scipy.stats.randint(-1000, 5)),
    "gumbel": (lambda k, n: random.gumbel(k, (n,)), scipy.stats.gumbel_r()),
}


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_moments(name):
    sampler, law = DISTRIBUTIONS[name]
    x = np.asarray(sampler(KEY, N)).astype(np.float64)
    mean, var, excess_kurtosis = (float(v) for v in law.stats(moments="mvk"))
    fourth_central = (excess_kurtosis + 3.0) * var**2
    se_mean = np.sqrt(var / N)
    se_var = np.sqrt((fourth_central - var**2) / N)
    assert abs(x.mean() - mean) < 5 * se_mean, (x.mean(), mean)
    assert abs(x.var() - var) < 5 * se_var, (x.var(), var)


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_distribution_shape_matches_cdf(name):
    # Kolmogorov-Smirnov distance for the continuous laws; frequencies for discrete ones.
    sampler, law = DISTRIBUTIONS[name]
    x = np.asarray(sampler(random.fold_in(KEY, 1), N)).astype(np.float64)
    if hasattr(law.dist, "pdf"):
        assert scipy.stats.kstest(x, law.cdf).statistic < 1.95 / np.sqrt(N)   # 0.1% level
    else:
        values, counts = np.unique(x, return_counts=True)
        p = law.pmf(values)
        assert np.all(p > 0), "a value outside the support was drawn"
        assert np.all(np.abs(counts / N - p) < 5 * np.sqrt(p * (1 - p) / N))


def test_ranges():
    k1, k2, k3, k4 = random.split(KEY, 4)
    u = np.asarray(random.uniform(k1, (N,), minval=-0.5, maxval=0.25))
    assert u.min() >= -0.5 and u.max() < 0.25
    # A narrow float range, where rounding in (max - min) * u + min could reach max.
    narrow = np.asarray(random.uniform(k2, (N,), minval=1.0, maxval=1.0 + 2**-20))
    assert narrow.min() >= 1.0 and narrow.max() < np.float32(1.0 + 2**-20)
    r = np.asarray(random.randint(k3, (N,), -3, 4))
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 3
    t = np.asarray(random.truncated_normal(k4, -0.3, 0.2, (N,)))
    assert t.min() > -0.3 and t.max() < 0.2


@pytest.mark.parametrize("dtype,lo,hi", [(np.uint8, 0, 256), (np.int8, -128, 128), (np.int32, -2**31, 2**31),
                                         (np.uint32, 0, 2**32), (np.int32, 2**31 - 3, 2**31 - 1),
                                         (np.int16, -5, -2)])
def test_randint_dtypes_and_extreme_bounds(dtype, lo, hi):
    r = np.asarray(random.randint(KEY, (4000,), lo, hi, dtype=dtype))
    assert r.dtype == dtype
    assert int(r.min()) >= lo and int(r.max()) <= hi - 1
    if hi - lo <= 256:   # every value is hit
        assert int(r.min()) == lo and int(r.max()) == hi - 1
    else:                # spread over the whole range (both halves)
        mid = (lo + hi) // 2
        assert (r.astype(np.int64) < mid).mean() == pytest.approx(0.5, abs=0.05)


def test_randint_with_array_bounds_and_empty_range():
    lo = fnp.array([0, 10, -5])
    hi = fnp.array([2, 11, -5])     # the last range is empty: returns minval, like JAX
    r = np.asarray(random.randint(KEY, (1000, 3), lo, hi))
    assert set(np.unique(r[:, 0])) == {0, 1}
    assert np.all(r[:, 1] == 10) and np.all(r[:, 2] == -5)


def test_bernoulli_extremes_and_array_p():
    p = fnp.array([0.0, 1.0, 0.5])
    b = np.asarray(random.bernoulli(KEY, p, (N, 3)))
    assert b.dtype == np.bool_
    assert not b[:, 0].any() and b[:, 1].all()
    assert abs(b[:, 2].mean() - 0.5) < 5 * np.sqrt(0.25 / N)


def test_float64_under_x64(x64):
    u = random.uniform(KEY, (N,), dtype=np.float64)
    z = random.normal(KEY, (N,), dtype=np.float64)
    assert u.dtype == np.float64 and z.dtype == np.float64
    u = np.asarray(u)
    assert 0.0 <= u.min() and u.max() < 1.0
    # 52 random mantissa bits: far more distinct values than float32 could hold in [0.5, 1).
    assert np.mean(u * 2**23 != np.floor(u * 2**23)) > 0.99
    assert abs(np.asarray(z).mean()) < 5 / np.sqrt(N) and abs(np.asarray(z).var() - 1) < 5 * np.sqrt(2 / N)


# --------------------------------------------------------------------------
# Independence and reproducibility
# --------------------------------------------------------------------------


def _corr(a, b) -> float:
    return float(np.corrcoef(np.asarray(a, np.float64), np.asarray(b, np.float64))[0, 1])


def test_split_keys_give_independent_streams():
    keys = random.split(KEY, 4)
    streams = [np.asarray(random.normal(keys[i], (N,))) for i in range(4)]
    streams.append(np.asarray(random.normal(KEY, (N,))))                   # the parent key
    # (Not fold_in(KEY, i) for i < 4: in JAX's partitionable scheme split(KEY, n)[i] IS fold_in(KEY, i).)
    streams.append(np.asarray(random.normal(random.fold_in(KEY, 100), (N,))))
    streams.append(np.asarray(random.normal(random.fold_in(KEY, 101), (N,))))
    bound = 5 / np.sqrt(N)
    for i in range(len(streams)):
        for j in range(i + 1, len(streams)):
            assert abs(_corr(streams[i], streams[j])) < bound, (i, j)
    # Within one stream, consecutive draws are uncorrelated too.
    assert abs(_corr(streams[0][:-1], streams[0][1:])) < bound


def test_same_key_same_numbers_and_different_keys_differ():
    a = np.asarray(random.normal(KEY, (100,)))
    b = np.asarray(random.normal(random.key(1234), (100,)))
    np.testing.assert_array_equal(a, b)
    c = np.asarray(random.normal(random.key(1235), (100,)))
    assert not np.any(a == c)
    # The key is a value: using it did not change it.
    np.testing.assert_array_equal(np_key(KEY), T.seed_key(1234))


# Every sampler with its static arguments: run eagerly, under jit, and under vmap.
SAMPLERS = {
    "bits": lambda k: random.bits(k, (5,)),
    "uniform": lambda k: random.uniform(k, (2, 3), minval=-1.0, maxval=2.0),
    "normal": lambda k: random.normal(k, (7,)),
    "truncated_normal": lambda k: random.truncated_normal(k, -1.0, 0.5, (4,)),
    "bernoulli": lambda k: random.bernoulli(k, 0.4, (6,)),
    "randint": lambda k: random.randint(k, (5,), -3, 9),
    "randint_u8": lambda k: random.randint(k, (5,), 0, 256, dtype=np.uint8),
    "permutation": lambda k: random.permutation(k, 9),
    "permutation_rows": lambda k: random.permutation(k, fnp.arange(12.0).reshape(4, 3)),
    "categorical": lambda k: random.categorical(k, fnp.array([[0.0, 1.0, 2.0], [2.0, 0.0, -1.0]])),
    "gumbel": lambda k: random.gumbel(k, (3,)),
    "split": lambda k: random.key_data(random.split(k, 3)),
    "fold_in": lambda k: random.key_data(random.fold_in(k, 99)),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_jit_gives_the_eager_numbers(name):
    f = SAMPLERS[name]
    eager = np.asarray(f(KEY))
    jitted = fg.jit(f)
    assert_same_numbers(np.asarray(jitted(KEY)), eager)
    assert_same_numbers(np.asarray(jitted(KEY)), eager)    # cached program too
    assert jitted.cache_info()["misses"] == 1


def assert_same_numbers(got, expected):
    """Bit for bit for bits and integers; floats to the last ulp or two (a fused jit kernel's log/exp may
    round differently from numpy's)."""
    if np.asarray(expected).dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=2e-7)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_vmap_matches_a_loop(name):
    f = SAMPLERS[name]
    keys = random.split(KEY, 4)
    batched = np.asarray(fg.vmap(f)(keys))
    looped = np.stack([np.asarray(f(keys[i])) for i in range(4)])
    np.testing.assert_array_equal(batched, looped)


def test_vmap_of_jit_and_jit_of_vmap():
    keys = random.split(KEY, 3)
    f = lambda k: random.normal(k, (3,))  # noqa: E731
    expected = np.stack([np.asarray(f(keys[i])) for i in range(3)])
    np.testing.assert_array_equal(np.asarray(fg.jit(fg.vmap(f))(keys)), expected)
    np.testing.assert_array_equal(np.asarray(fg.vmap(fg.jit(f))(keys)), expected)


def test_vmap_over_fold_in_data():
    steps = fnp.arange(5, dtype=fnp.uint32)
    batched = np.asarray(random.key_data(fg.vmap(lambda s: random.fold_in(KEY, s))(steps)))
    np.testing.assert_array_equal(batched, np.stack([T.fold_in(np_key(KEY), i) for i in range(5)]))


# --------------------------------------------------------------------------
# categorical and permutation
# --------------------------------------------------------------------------


def test_categorical_frequencies_match_softmax():
    logits = np.array([1.0, -0.5, 0.0, 2.0], np.float32)
    probs = scipy.special.softmax(logits.astype(np.float64))
    draws = np.asarray(random.categorical(KEY, fnp.asarray(logits), shape=(N,)))
    assert draws.shape == (N,) and draws.dtype == np.int32
    freq = np.bincount(draws, minlength=4) / N
    assert np.all(np.abs(freq - probs) < 5 * np.sqrt(probs * (1 - probs) / N)), (freq, probs)


def test_categorical_along_axis_0_with_batch():
    # Columns are the categories' logits for two independent batch entries.
    logits = np.log(np.array([[0.1, 0.7], [0.6, 0.2], [0.3, 0.1]], np.float32))
    draws = np.asarray(random.categorical(KEY, fnp.asarray(logits), axis=0, shape=(N, 2)))
    assert draws.shape == (N, 2)
    for col in range(2):
        p = np.exp(logits[:, col].astype(np.float64))
        freq = np.bincount(draws[:, col], minlength=3) / N
        assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / N)), (col, freq, p)


def test_permutation_is_a_permutation():
    for n in [1, 2, 10, 1000]:
        perm = np.asarray(random.permutation(random.fold_in(KEY, n), n))
        np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    perm = np.asarray(random.permutation(KEY, 1000))
    assert not np.array_equal(perm, np.arange(1000))


def test_permutation_of_arrays():
    x = np.arange(20.0, dtype=np.float32).reshape(5, 4)
    rows = np.asarray(random.permutation(KEY, fnp.asarray(x)))
    np.testing.assert_array_equal(np.sort(rows[:, 0]), x[:, 0])
    # Whole rows move, in the order permutation(key, n) gives.
    np.testing.assert_array_equal(rows, x[np.asarray(random.permutation(KEY, 5))])
    cols = np.asarray(random.permutation(KEY, fnp.asarray(x), axis=1))
    np.testing.assert_array_equal(cols, x[:, (cols[0] - x[0, 0]).astype(int)])   # whole columns moved
    each = np.asarray(random.permutation(KEY, fnp.asarray(x), axis=1, independent=True))
    np.testing.assert_array_equal(np.sort(each, axis=1), x)


def test_permutation_is_uniform_over_orders():
    # All 6 orders of 3 items, each with probability 1/6.
    keys = random.split(KEY, 3000)
    perms = np.asarray(fg.vmap(lambda k: random.permutation(k, 3))(keys))
    codes = perms[:, 0] * 9 + perms[:, 1] * 3 + perms[:, 2]
    _, counts = np.unique(codes, return_counts=True)
    assert len(counts) == 6
    p = 1 / 6
    assert np.all(np.abs(counts / 3000 - p) < 5 * np.sqrt(p * (1 - p) / 3000))


# --------------------------------------------------------------------------
# Derivatives: bits have none; the float parameters do
# --------------------------------------------------------------------------


def test_uniform_is_differentiable_in_its_bounds():
    unit = np.asarray(random.uniform(KEY, (50,)), np.float64)
    d_lo, d_hi = fg.grad(lambda lo, hi: random.uniform(KEY, (50,), minval=lo, maxval=hi).sum(), argnums=(0, 1))(
        fnp.asarray(-1.0), fnp.asarray(2.0))
    np.testing.assert_allclose(float(d_hi), unit.sum(), rtol=1e-5)
    np.testing.assert_allclose(float(d_lo), (1 - unit).sum(), rtol=1e-5)


def test_truncated_normal_gradient_is_finite_and_matches_differences():
    f = lambda lo: random.truncated_normal(KEY, lo, 1.5, (200,)).sum()  # noqa: E731
    g = float(fg.grad(f)(fnp.asarray(-0.5)))
    eps = 1e-2
    numeric = (float(f(fnp.asarray(-0.5 + eps))) - float(f(fnp.asarray(-0.5 - eps)))) / (2 * eps)
    assert np.isfinite(g) and g == pytest.approx(numeric, rel=2e-2)


def test_erf_primitives_against_scipy():
    from funcgrad.primitives import random_bits as rb
    x = np.linspace(-0.99, 0.99, 11).astype(np.float32)
    np.testing.assert_allclose(np.asarray(rb.erf_inv(fnp.asarray(x))), scipy.special.erfinv(x), rtol=1e-6)
    d = fg.vmap(fg.grad(lambda v: rb.erf_inv(v)))(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(d), np.sqrt(np.pi) / 2 * np.exp(scipy.special.erfinv(x) ** 2), rtol=1e-5)
    d = fg.vmap(fg.grad(lambda v: rb.erf(v)))(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(d), 2 / np.sqrt(np.pi) * np.exp(-x.astype(np.float64) ** 2), rtol=1e-5)


def test_the_ir_shows_the_random_primitives():
    text = str(fg.make_jaxpr(lambda k: random.normal(k, (3,)))(KEY))
    for name in ("threefry2x32", "shift_right_logical", "bitwise_or", "bitcast_convert_type", "erf_inv"):
        assert name in text


@pytest.mark.parametrize("name", ["erf", "erf_inv"])
def test_erf_primitives_check_grads(name, x64):
    from funcgrad.primitives import random_bits as rb
    from funcgrad.testing import check_grads
    x = fnp.asarray(np.linspace(-0.8, 0.8, 7))
    check_grads(getattr(rb, name), (x,), order=2, modes=("fwd", "rev"))
