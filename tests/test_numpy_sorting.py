"""funcgrad.numpy's sorting, searching, statistics, cumulative, polynomial and histogram functions: what the
op table (tests/op_rows_sorting.py) cannot express -- keywords, errors, value-dependent shapes, NaN and
zero special cases, and JAX's conventions where numpy differs.

References are numpy/float64 and finite differences; no expected value comes from funcgrad itself.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad._core import ConcretizationError
from funcgrad.testing import check_grads


def _np(x):
    return np.asarray(x)


# ------------------------------------------------------------------ sorting


def test_sort_rejects_kind_and_order_as_jax():
    x = fnp.array([2.0, 1.0])
    with pytest.raises(TypeError, match="kind"):
        fnp.sort(x, kind="quicksort")
    with pytest.raises(TypeError, match="order"):
        fnp.argsort(x, order="f")


def test_sort_of_a_0d_array_needs_axis_none():
    with pytest.raises(ValueError, match="axis=None"):
        fnp.sort(fnp.array(1.0))
    assert fnp.sort(fnp.array(1.0), axis=None).shape == (1,)
    assert fnp.argsort(fnp.array(1.0), axis=None).shape == (1,)


def test_sort_nans_last_and_first_when_descending():
    x = np.array([3.0, np.nan, 1.0, 2.0])
    np.testing.assert_array_equal(_np(fnp.sort(x)), np.sort(x))
    np.testing.assert_array_equal(_np(fnp.sort(x, descending=True)), np.sort(x)[::-1])
    np.testing.assert_array_equal(_np(fnp.argsort(x)), np.argsort(x, kind="stable"))


def test_argsort_descending_is_stable_and_takes_dtype():
    x = np.array([1.0, 2.0, 1.0, 2.0, 0.0])
    out = fnp.argsort(x, descending=True)
    np.testing.assert_array_equal(_np(out), np.argsort(-x, kind="stable"))   # ties keep index order
    assert fnp.argsort(x, dtype=np.int32).dtype == np.int32
    assert fnp.argsort(x).dtype == np.dtype(fg.config.enable_x64 and "int64" or "int32")


def test_sort_gradient_unpermutes(x64):
    x = fnp.array([0.3, -1.2, 2.5, 0.7])
    g = fg.grad(lambda x: fnp.sum(fnp.sort(x) * fnp.arange(4.0)))(x)
    np.testing.assert_allclose(_np(g), np.argsort(np.argsort(_np(x))).astype(float))
    check_grads(lambda x: fnp.partition(x, 2) ** 2, [x], order=2)


def test_partition_and_lexsort_errors():
    with pytest.raises(ValueError, match="kth"):
        fnp.partition(fnp.ones(3), 3)
    with pytest.raises(ValueError, match="0-d"):
        fnp.partition(fnp.array(1.0), 0)
    with pytest.raises(TypeError, match="len > 0"):
        fnp.lexsort([])
    with pytest.raises(ValueError, match="same shape"):
        fnp.lexsort([fnp.ones(3), fnp.ones(2)])


def test_partition_kth_element_matches_numpy():
    x = np.random.default_rng(0).standard_normal((4, 7))
    for k in (0, 3, -1):
        got = _np(fnp.partition(x, k, axis=1))
        want = np.partition(x, k, axis=1)
        np.testing.assert_allclose(got[:, k], want[:, k], rtol=1e-6)
        np.testing.assert_allclose(np.sort(got, 1), np.sort(x, 1), rtol=1e-6)
        idx = _np(fnp.argpartition(x, k, axis=1))
        np.testing.assert_allclose(np.take_along_axis(x, idx, 1)[:, k], want[:, k], rtol=1e-6)


# ------------------------------------------------------------------ searching


def test_searchsorted_methods_sorter_and_nan():
    a = np.array([1.0, 2.0, 2.0, 3.0, np.nan])
    v = np.array([[2.0, 0.0], [np.nan, 3.5]])
    for side in ("left", "right"):
        want = np.searchsorted(a, v, side=side)
        for method in ("scan", "scan_unrolled", "sort", "compare_all"):
            np.testing.assert_array_equal(_np(fnp.searchsorted(a, v, side=side, method=method)), want)
    unsorted = np.array([3.0, 1.0, 2.0])
    sorter = np.argsort(unsorted)
    np.testing.assert_array_equal(_np(fnp.searchsorted(unsorted, [2.5, 0.0], sorter=sorter)),
                                  np.searchsorted(unsorted, [2.5, 0.0], sorter=sorter))
    with pytest.raises(ValueError, match="side"):
        fnp.searchsorted(a, 1.0, side="middle")
    with pytest.raises(ValueError, match="method"):
        fnp.searchsorted(a, 1.0, method="bisect")
    with pytest.raises(ValueError, match="1-d"):
        fnp.searchsorted(fnp.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="sorter"):
        fnp.searchsorted(unsorted, 1.0, sorter=np.array([0, 1]))


@pytest.mark.parametrize("n", [9, 16, 17, 40])
def test_searchsorted_binary_search_matches_numpy(n):
    rng = np.random.default_rng(n)
    a = np.sort(rng.integers(-5, 5, n).astype(float))
    a[-2:] = np.nan
    v = np.concatenate([rng.integers(-6, 6, 30).astype(float), [np.nan, np.inf, -np.inf]])
    for side in ("left", "right"):
        np.testing.assert_array_equal(_np(fnp.searchsorted(a, v, side=side)), np.searchsorted(a, v, side=side))


def test_searchsorted_under_jit_and_digitize_ints():
    a = fnp.array([1, 3, 5, 7])
    out = fg.jit(lambda a, v: fnp.searchsorted(a, v))(a, fnp.array([0, 3, 8]))
    np.testing.assert_array_equal(_np(out), np.searchsorted([1, 3, 5, 7], [0, 3, 8]))
    np.testing.assert_array_equal(_np(fnp.digitize(fnp.array([0, 3, 8]), a, right=True)),
                                  np.digitize([0, 3, 8], [1, 3, 5, 7], right=True))
    assert _np(fnp.digitize(fnp.array([1.0, 2.0]), fnp.zeros(0))).tolist() == [0, 0]


# ------------------------------------------------------------------ counting and histograms


def test_bincount_needs_length_under_jit():
    x = fnp.array([0, 1, 1, 4])
    np.testing.assert_array_equal(_np(fnp.bincount(x)), np.bincount([0, 1, 1, 4]))
    np.testing.assert_array_equal(_np(fnp.bincount(x, minlength=7)), np.bincount([0, 1, 1, 4], minlength=7))
    with pytest.raises(ConcretizationError, match="length="):
        fg.jit(fnp.bincount)(x)
    out = fg.jit(lambda x: fnp.bincount(x, length=3))(x)     # values past length are dropped, as JAX
    np.testing.assert_array_equal(_np(out), [1, 2, 0])


def test_bincount_clips_negative_values_to_bin_zero_as_jax():
    np.testing.assert_array_equal(_np(fnp.bincount(fnp.array([-2, 0, 2]), length=3)), [2, 0, 1])


def test_bincount_errors_and_weights_gradient(x64):
    with pytest.raises(TypeError, match="integer"):
        fnp.bincount(fnp.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="1-d"):
        fnp.bincount(fnp.zeros((2, 2), dtype=np.int32))
    with pytest.raises(ValueError, match="weights"):
        fnp.bincount(fnp.array([0, 1]), fnp.ones(3))
    idx = fnp.array([0, 2, 2])
    g = fg.grad(lambda w: fnp.sum(fnp.bincount(idx, w, length=3) * fnp.array([1.0, 2.0, 3.0])))(fnp.ones(3))
    np.testing.assert_allclose(_np(g), [1.0, 3.0, 3.0])


def test_histogram_bins_as_edges_under_jit_and_degenerate_range():
    a = np.array([0.1, 0.5, 0.5, 0.9, 1.0, 2.0])
    edges = np.array([0.0, 0.5, 1.0])
    got = fg.jit(lambda a, e: fnp.histogram(a, e))(a, edges)
    want = np.histogram(a, edges)
    np.testing.assert_allclose(_np(got[0]), want[0])
    np.testing.assert_allclose(_np(got[1]), want[1])
    counts, e = fnp.histogram(fnp.full((3,), 2.0), bins=2)    # min == max: widened by 0.5 each way
    np.testing.assert_allclose(_np(e), np.histogram(np.full(3, 2.0), bins=2)[1])
    np.testing.assert_allclose(_np(counts), np.histogram(np.full(3, 2.0), bins=2)[0])
    with pytest.raises(NotImplementedError, match="string"):
        fnp.histogram(a, bins="auto")


def test_histogram2d_with_edge_arrays_and_histogramdd_errors():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(10), rng.standard_normal(10)
    ex, ey = np.array([-2.0, 0.0, 2.0]), np.array([-1.0, 0.0, 0.5, 1.0])
    got = fnp.histogram2d(x, y, bins=[ex, ey])
    want = np.histogram2d(x, y, bins=[ex, ey])
    for g, w in zip(got, want):
        np.testing.assert_allclose(_np(g), w, rtol=1e-6)
    with pytest.raises(ValueError, match="2-d"):
        fnp.histogramdd(fnp.ones(3))
    with pytest.raises(ValueError, match="dimensions"):
        fnp.histogramdd(fnp.ones((3, 2)), bins=[2, 2, 2])


# ------------------------------------------------------------------ quantiles


def test_quantile_errors():
    x = fnp.arange(5.0)
    with pytest.raises(ValueError, match="range"):
        fnp.quantile(x, 1.5)
    with pytest.raises(ValueError, match="range"):
        fnp.percentile(x, -1.0)
    with pytest.raises(ValueError, match="method"):
        fnp.quantile(x, 0.5, method="hazen")
    with pytest.raises(NotImplementedError, match="inverted_cdf"):
        fnp.quantile(x, 0.5, weights=fnp.ones(5))
    with pytest.raises(ValueError, match="weights"):
        fnp.quantile(fnp.ones((2, 3)), 0.5, axis=1, method="inverted_cdf", weights=fnp.ones(2))
    with pytest.raises(ValueError, match="rank"):
        fnp.quantile(x, fnp.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="out"):
        fnp.median(x, out=np.zeros(()))
    with pytest.raises(ValueError, match="overwrite_input"):
        fnp.nanpercentile(x, 50, overwrite_input=True)


def test_quantile_nearest_takes_the_lower_neighbour_at_halves_as_jax():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    # position 1.5 is a tie: JAX takes the lower value, numpy rounds to the even index
    assert float(fnp.quantile(x, 0.5, method="nearest")) == 2.0
    assert float(fnp.quantile(x, 0.6, method="nearest")) == np.quantile(x, 0.6, method="nearest")


def test_quantile_nan_slices():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(np.isnan(_np(fnp.median(x, axis=1))), [True, True, False])
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanquantile(x, [0.25, 0.5], axis=1)
    np.testing.assert_allclose(_np(fnp.nanquantile(x, np.array([0.25, 0.5]), axis=1)), want, rtol=1e-6)
    assert np.isnan(_np(fnp.quantile(fnp.zeros((0,)), 0.5)))          # an empty slice: NaN, as numpy


def test_quantile_gradient_in_q_is_finite_beside_nan_slices(x64):
    a = fnp.asarray(np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [4.0, 0.5, 6.0]]))

    def total(f, q):   # the NaN results dropped
        out = f(a, q, axis=1)
        return fnp.sum(fnp.where(fnp.isnan(out), 0.0, out))
    # quantile: only row 3 is complete (sorted [0.5, 4, 6], position 2q): d/dq = 2 * (4 - 0.5)
    np.testing.assert_allclose(float(fg.grad(lambda q: total(fnp.quantile, q))(0.3)), 7.0, rtol=1e-12)
    # nanquantile: row 1 too (sorted [1, 3], position q): d/dq = 7 + (3 - 1)
    np.testing.assert_allclose(float(fg.grad(lambda q: total(fnp.nanquantile, q))(0.3)), 9.0, rtol=1e-12)


def test_quantile_gradients_in_a_and_q(x64):
    rng = np.random.default_rng(2)
    a = fnp.asarray(rng.standard_normal((3, 5)))
    q = fnp.asarray(np.array([0.13, 0.62]))
    check_grads(lambda a, q: fnp.quantile(a, q, axis=1), [a, q], order=2)
    check_grads(lambda a: fnp.quantile(a, 0.3, axis=1, method="midpoint"), [a], order=2)


# ------------------------------------------------------------------ NaN-ignoring reductions


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
                                  "nanmedian", "nancumsum", "nancumprod"])
def test_nan_entries_get_a_zero_gradient(name, x64):
    x = np.array([[0.5, np.nan, 1.5, -0.7], [np.nan, 2.0, -1.0, 0.3]])
    f = getattr(fnp, name)
    g = _np(fg.grad(lambda x: fnp.sum(f(x, axis=1)))(fnp.asarray(x)))
    assert np.all(np.isfinite(g))
    assert g[0, 1] == 0.0 and g[1, 0] == 0.0
    # the other entries: finite differences of numpy's function (float64)
    eps = 1e-6
    for i, j in [(0, 0), (0, 2), (1, 1), (1, 3)]:
        xp, xm = x.copy(), x.copy()
        xp[i, j] += eps
        xm[i, j] -= eps
        fd = (np.sum(getattr(np, name)(xp, axis=1)) - np.sum(getattr(np, name)(xm, axis=1))) / (2 * eps)
        np.testing.assert_allclose(g[i, j], fd, rtol=1e-5, atol=1e-7)


def test_nan_reductions_all_nan_slices_and_keywords():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    np.testing.assert_array_equal(_np(fnp.nanargmax(x, axis=1)), [-1, 0])     # JAX: -1 (numpy raises)
    np.testing.assert_array_equal(_np(fnp.nanargmin(x, axis=1, keepdims=True)), [[-1], [0]])
    assert np.isnan(_np(fnp.nanmax(x, axis=1))[0]) and np.isnan(_np(fnp.nanmean(x, axis=1))[0])
    assert _np(fnp.nansum(x, axis=1)).tolist() == [0.0, 1.0]
    np.testing.assert_allclose(_np(fnp.nanmax(x, axis=1, initial=5.0)), [5.0, 5.0])
    w = np.array([[True, True], [False, True]])
    np.testing.assert_allclose(_np(fnp.nansum(np.array([[1.0, 2.0], [3.0, np.nan]]), axis=1, where=w,
                                              initial=1.0)),
                               np.nansum(np.array([[1.0, 2.0], [3.0, np.nan]]), axis=1, where=w, initial=1.0))
    np.testing.assert_allclose(_np(fnp.nanmean(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=1, where=w)),
                               np.nanmean(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=1, where=w))
    xm = np.array([[1.0, 2.0, np.nan], [3.0, 4.0, 6.0]])
    mean = np.nanmean(xm, axis=1, keepdims=True)
    np.testing.assert_allclose(_np(fnp.nanvar(xm, axis=1, mean=mean)), np.nanvar(xm, axis=1), rtol=1e-6)
    xd = np.array([[1.5, np.nan], [2.5, 4.0]])
    for f in ("nansum", "nanprod", "nancumsum", "nancumprod"):              # NaNs dropped before the cast
        np.testing.assert_array_equal(_np(getattr(fnp, f)(xd, axis=1, dtype=np.int32)),
                                      getattr(np, f)(xd, axis=1, dtype=np.int32), err_msg=f)
    np.testing.assert_array_equal(_np(fnp.nanmean(xd, axis=1, dtype=np.int32)),
                                  np.nanmean(xd, axis=1).astype(np.int32))
    ints = np.array([[1, 5], [7, 2]], np.int32)
    assert fnp.nansum(ints).dtype.kind == "i" and int(fnp.nanmax(ints)) == 7
    assert int(fnp.nanargmax(ints)) == 2
    with pytest.raises(NotImplementedError, match="out"):
        fnp.nansum(x, out=np.zeros(2))


# ------------------------------------------------------------------ cumulative


def test_cumprod_gradient_with_zeros_order_2(x64):
    for values in ([0.0, 1.5, -2.0, 0.7], [1.2, 0.0, 0.0, 2.0], [0.5, -1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 1.0]):
        x = fnp.asarray(np.array(values))
        check_grads(fnp.cumprod, [x], order=2, modes=("fwd", "rev"))
        g = _np(fg.grad(lambda x: fnp.sum(fnp.cumprod(x)))(x))
        v = np.array(values)
        want = [sum(np.prod(np.delete(v[:k + 1], i)) for k in range(i, 4)) for i in range(4)]
        np.testing.assert_allclose(g, want, atol=1e-12)
    x2 = fnp.asarray(np.array([[0.0, 2.0, 3.0], [1.0, 0.0, -1.0]]))
    check_grads(lambda x: fnp.cumprod(x, axis=0), [x2], order=2)


def test_cumulative_dtypes_and_errors():
    assert fnp.cumprod(fnp.array([True, False])).dtype == fnp.cumsum(fnp.array([True])).dtype
    np.testing.assert_array_equal(_np(fnp.cumprod(fnp.array([1, 2, 3]), dtype=np.float32)), [1.0, 2.0, 6.0])
    np.testing.assert_array_equal(_np(fnp.cumulative_prod(fnp.array([2, 3]), include_initial=True)), [1, 2, 6])
    x = np.array([1.0, 0.0, 2.0, np.nan])
    for f in (fnp.cumprod, fnp.nancumsum, fnp.nancumprod):                 # dtype=bool: running all / any
        assert f(x[:3], dtype=bool).dtype == np.bool_
    np.testing.assert_array_equal(_np(fnp.cumprod(x[:3], dtype=bool)), np.cumprod(x[:3], dtype=bool))
    np.testing.assert_array_equal(_np(fnp.nancumsum(x, dtype=bool)), np.cumsum(np.nan_to_num(x) != 0) != 0)
    np.testing.assert_array_equal(_np(fnp.cumulative_sum(np.array([0, 0, 3]), dtype=bool)), [False, False, True])
    with pytest.raises(ValueError, match="non-scalar"):
        fnp.cumulative_sum(fnp.array(1.0))
    with pytest.raises(ValueError, match="axis"):
        fnp.cumulative_sum(fnp.ones((2, 2)))
    with pytest.raises(ValueError, match="axis"):
        fnp.cumprod(fnp.ones((2, 2)), axis=2)


# ------------------------------------------------------------------ differences, integrals, interpolation


def test_diff_keywords_and_errors():
    x = fnp.array([1.0, 4.0, 9.0])
    assert fnp.diff(x, n=0) is x or np.array_equal(_np(fnp.diff(x, n=0)), _np(x))
    np.testing.assert_array_equal(_np(fnp.diff(x, n=5)), np.diff([1.0, 4.0, 9.0], n=5))   # empty
    with pytest.raises(ValueError, match="non-negative"):
        fnp.diff(x, n=-1)
    with pytest.raises(ValueError, match="one dimensional"):
        fnp.diff(fnp.array(1.0))
    with pytest.raises(TypeError, match="n must be an int"):
        fnp.diff(x, n=1.5)


def test_gradient_errors():
    with pytest.raises(NotImplementedError, match="edge_order"):
        fnp.gradient(fnp.ones(4), edge_order=2)
    with pytest.raises(ValueError, match="too small"):
        fnp.gradient(fnp.ones(1))
    with pytest.raises(TypeError, match="spacings"):
        fnp.gradient(fnp.ones((3, 3)), 1.0, 2.0, 3.0)
    out = fnp.gradient(fnp.ones((3, 4)), 2.0, 0.5)
    assert isinstance(out, list) and len(out) == 2


def test_interp_extrapolate_and_errors(x64):
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0])
    x = np.array([-1.0, 0.5, 4.0])
    got = _np(fnp.interp(x, xp, fp, left="extrapolate", right="extrapolate"))
    np.testing.assert_allclose(got, [-2.0, 1.0, 3.5])          # the end segments extended
    with pytest.raises(ValueError, match="extrapolate"):
        fnp.interp(x, xp, fp, left="linear")
    with pytest.raises(ValueError, match="same length"):
        fnp.interp(x, xp, fp[:2])
    # a repeated xp gives a finite gradient (no 0/0)
    g = fg.grad(lambda f: fnp.sum(fnp.interp(fnp.array([1.0, 2.0]), fnp.array([0.0, 1.0, 1.0, 3.0]), f)))(
        fnp.asarray(np.array([0.0, 1.0, 2.0, 3.0])))
    assert np.all(np.isfinite(_np(g)))


def test_average_errors_and_returned_without_weights():
    x = fnp.ones((2, 3))
    avg, n = fnp.average(x, axis=1, returned=True)
    np.testing.assert_allclose(_np(n), [3.0, 3.0])
    with pytest.raises(ValueError, match="axis"):
        fnp.average(x, weights=fnp.ones(3))
    with pytest.raises(ValueError, match="length"):
        fnp.average(x, axis=1, weights=fnp.ones(2))


def test_cov_single_variable_and_corrcoef_constant():
    x = np.array([1.0, 2.0, 4.0])
    assert fnp.cov(x).shape == ()
    np.testing.assert_allclose(float(fnp.cov(x, ddof=0)), np.cov(x, ddof=0))
    fw = np.array([1, 2, 3])
    np.testing.assert_allclose(float(fnp.cov(x, fweights=fw)), np.cov(x, fweights=fw))
    with np.errstate(all="ignore"):
        assert np.isnan(float(fnp.corrcoef(np.ones(3))))
    with pytest.raises(ValueError, match="fweights"):
        fnp.cov(x, fweights=np.ones(2, int))
    with pytest.raises(TypeError, match="integer"):
        fnp.cov(x, fweights=np.ones(3))


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "nanmax", "nanargmax", "ptp", "count_nonzero"])
def test_bad_axis_is_reported_under_the_function_name(name):
    with pytest.raises(ValueError, match=f"^{name}: axis 5"):
        getattr(fnp, name)(fnp.ones((2, 3)), axis=5)


# ------------------------------------------------------------------ convolution and polynomials


def test_convolve_errors_and_int_inputs():
    with pytest.raises(ValueError, match="1-d"):
        fnp.convolve(fnp.ones((2, 2)), fnp.ones(2))
    with pytest.raises(ValueError, match="empty"):
        fnp.correlate(fnp.ones(2), fnp.zeros(0))
    with pytest.raises(ValueError, match="mode"):
        fnp.convolve(fnp.ones(3), fnp.ones(2), mode="circular")
    out = fnp.convolve(fnp.array([1, 2, 3]), fnp.array([0, 1]))
    assert out.dtype.kind == "f"
    np.testing.assert_allclose(_np(out), np.convolve([1, 2, 3], [0, 1]))


def test_polynomial_trim_and_static_shapes():
    a, b = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0])
    assert fnp.polymul(a, b).shape == (4,)                                # leading zero kept, as JAX
    np.testing.assert_allclose(_np(fnp.polymul(a, b, trim_leading_zeros=True)), np.polymul(a, b))
    q, r = fnp.polydiv(np.array([1.0, 3.0, 2.0]), b, trim_leading_zeros=True)
    nq, nr = np.polydiv([1.0, 3.0, 2.0], b)
    np.testing.assert_allclose(_np(q), nq)
    assert _np(r).size == 0 or np.allclose(_np(r), nr)
    with pytest.raises(NotImplementedError, match="concrete"):
        fg.jit(lambda a: fnp.polymul(a, a, trim_leading_zeros=True))(fnp.asarray(a))
    np.testing.assert_allclose(_np(fnp.polyint(a, 2, 3.0)), np.polyint(a, 2, 3.0))
    assert fnp.poly(fnp.zeros(0)).shape == () and float(fnp.poly(fnp.zeros(0))) == np.poly(np.zeros(0))
    assert fnp.polyder(a, 3).shape == (0,) and fnp.polyder(a, 0) is not None
    with pytest.raises(ValueError, match="non-negative"):
        fnp.polyder(a, -1)
    with pytest.raises(ValueError, match="k must be"):
        fnp.polyint(a, 2, fnp.ones(3))


def test_polyfit_keywords(x64):
    x = np.linspace(-1.0, 1.0, 7)
    y = 1.0 + 2.0 * x - 0.5 * x ** 3
    np.testing.assert_allclose(_np(fnp.polyfit(x, y, 3)), np.polyfit(x, y, 3), atol=1e-10)
    with pytest.raises(NotImplementedError, match="full"):
        fnp.polyfit(x, y, 2, full=True)
    with pytest.raises(NotImplementedError, match="rcond"):
        fnp.polyfit(x, y, 2, rcond=1e-10)
    rng = np.random.default_rng(4)
    noisy, w = y + 0.1 * rng.standard_normal(7), rng.uniform(0.5, 2.0, 7)
    for cov in (True, "unscaled"):
        for yy in (noisy, np.stack([noisy, y], 1)):
            got = fnp.polyfit(x, yy, 2, w=w, cov=cov)
            want = np.polyfit(x, yy, 2, w=w, cov=cov)
            for g, e in zip(got, want):
                np.testing.assert_allclose(_np(g), e, rtol=1e-8, atol=1e-12)
    check_grads(lambda y: fnp.polyfit(fnp.asarray(x), y, 1, cov=True)[1], [fnp.asarray(noisy)], order=1)
    with pytest.raises(ValueError, match="exceed order"):
        fnp.polyfit(x[:3], y[:3], 2, cov=True)
    with pytest.raises(ValueError, match="points"):
        fnp.polyfit(x[:2], y[:2], 2)
    check_grads(lambda y: fnp.polyfit(fnp.asarray(x), y, 2), [fnp.asarray(y)], order=2)


def test_polyval_and_vander_with_ints():
    p = np.array([1, 2, 3])
    assert fnp.polyval(p, fnp.array([2, 3])).dtype.kind == "i"
    np.testing.assert_array_equal(_np(fnp.polyval(p, np.array([2, 3]))), np.polyval(p, [2, 3]))
    np.testing.assert_array_equal(_np(fnp.vander(np.array([1, 2, 3]))), np.vander([1, 2, 3]))
    assert fnp.vander(fnp.ones(3), 0).shape == (3, 0)


def test_numpy_functions_dispatch_to_funcgrad():
    x = fnp.array([3.0, 1.0, 2.0])
    out = np.median(x)
    assert isinstance(out, fg.Array) and float(out) == 2.0
    g = fg.grad(lambda x: np.sum(np.sort(x) * fnp.array([1.0, 2.0, 3.0])))(x)
    np.testing.assert_allclose(_np(g), [3.0, 1.0, 2.0])


def test_inverted_cdf_weights_per_axis_and_bad_weights():
    rng = np.random.default_rng(3)
    a, w = rng.standard_normal((3, 6)), rng.uniform(0.1, 2.0, 6)
    q = np.array([0.1, 0.5, 0.93])
    got = fnp.quantile(a, q, axis=1, method="inverted_cdf", weights=w)          # weights for the reduced axis
    want = np.quantile(a, q, axis=1, method="inverted_cdf", weights=np.broadcast_to(w, a.shape))
    np.testing.assert_allclose(_np(got), want, rtol=1e-6)
    bad = np.broadcast_to(w, a.shape).copy()
    bad[1, 2] = -1.0                                                                # a negative weight: NaN
    assert np.isnan(_np(fnp.quantile(a, 0.5, axis=1, method="inverted_cdf", weights=bad))).tolist() == \
        [False, True, False]
    out = fg.jit(lambda a, w: fnp.quantile(a, q, axis=1, method="inverted_cdf", weights=w))(a, w)
    np.testing.assert_allclose(_np(out), want, rtol=1e-6)


def test_roots_gradients_follow_vietas_formulas(x64):
    # sum(roots) = -p1/p0 and prod(roots) = p2/p0 for a quadratic: the gradients of both, through eigvals.
    p = np.array([1.5, -4.0, 2.0])
    g_sum = fg.grad(lambda q: fnp.real(fnp.sum(fnp.roots(q))))(p)
    np.testing.assert_allclose(np.asarray(g_sum), [p[1] / p[0] ** 2, -1 / p[0], 0.0], atol=1e-10)
    g_prod = fg.grad(lambda q: fnp.real(fnp.prod(fnp.roots(q, strip_zeros=False))))(p)
    np.testing.assert_allclose(np.asarray(g_prod), [-p[2] / p[0] ** 2, 0.0, 1 / p[0]], atol=1e-10)


def test_roots_under_jit_need_strip_zeros_false():
    p = fnp.array([0.0, 1.0, -3.0, 2.0])
    with pytest.raises(TypeError, match="strip_zeros=False"):
        fg.jit(fnp.roots)(p)
    got = np.asarray(fg.jit(lambda q: fnp.roots(q, strip_zeros=False))(p))
    assert np.isnan(got[-1]) and np.allclose(np.sort_complex(got[:-1]), [1.0, 2.0])
