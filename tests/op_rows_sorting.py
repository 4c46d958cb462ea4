"""Op-table rows for funcgrad.numpy's sorting, searching, statistics, cumulative, difference, convolution,
polynomial and histogram functions (loaded by op_table.py; see its Op record).

References are numpy in float64.  Where JAX's documented result differs from numpy's (partition's
layout, polydiv's unpadded remainder, polymul's kept leading zeros) the reference is numpy arranged
as JAX defines it.
"""
from __future__ import annotations

import numpy as np

import funcgrad.numpy as fnp
from op_table import Op, UNARY, normal, positive, small_ints_as_float


def with_nans(rng, shape):
    x = rng.standard_normal(shape)
    flat = x.reshape(-1)
    if flat.size >= 3:
        flat[rng.choice(flat.size, 2, replace=False)] = np.nan
    return x


def sorted_normal(rng, shape):
    return np.sort(rng.standard_normal(shape), axis=-1)


def spread_sorted(rng, shape):   # strictly increasing, gaps >= 0.3
    return np.cumsum(rng.uniform(0.3, 1.0, shape), axis=-1) - 1.0


def counts(rng, shape):
    return rng.integers(0, 5, shape).astype(np.int32)


def unit_interval(rng, shape):
    return rng.uniform(0.05, 0.95, shape)


def percents(rng, shape):
    return rng.uniform(5.0, 95.0, shape)


def with_zeros(rng, shape):
    x = rng.standard_normal(shape)
    flat = x.reshape(-1)
    flat[:: 3] = 0.0
    return x


def phases(rng, shape):
    return rng.uniform(-6.0, 6.0, shape)


def _partition_ref(k, axis=-1):
    def ref(x):
        s = np.sort(x, axis=axis)
        n = s.shape[axis]
        bottom = np.take(s, np.arange(k + 1), axis=axis)
        top = np.flip(np.take(s, np.arange(k + 1, n), axis=axis), axis=axis)
        return np.concatenate([bottom, top], axis=axis)
    return ref


def _argpartition_ref(k, axis=-1):
    def ref(x):
        idx = np.argsort(x, axis=axis, kind="stable")
        n = idx.shape[axis]
        bottom = np.take(idx, np.arange(k + 1), axis=axis)
        top = np.sort(np.take(idx, np.arange(k + 1, n), axis=axis), axis=axis)
        return np.concatenate([bottom, top], axis=axis)
    return ref


def _polydiv_ref(u, v):
    q, r = np.polydiv(u, v)
    return q, np.concatenate([np.zeros(len(u) - len(r)), r])


def _cum_initial(f, initial, axis):
    def ref(x):
        shape = list(x.shape)
        shape[axis] = 1
        return np.concatenate([np.full(shape, initial), f(x, axis=axis)], axis=axis)
    return ref


def _sorting():
    return [
        Op("sort", fnp.sort, np.sort, [((3, 4),), ((5,),)]),
        Op("sort[axis=0]", lambda x: fnp.sort(x, axis=0), lambda x: np.sort(x, axis=0), [((3, 4),)]),
        Op("sort[axis=None]", lambda x: fnp.sort(x, axis=None), lambda x: np.sort(x, axis=None), [((3, 4),)]),
        Op("sort[descending]", lambda x: fnp.sort(x, descending=True), lambda x: np.sort(x)[..., ::-1],
           [((3, 4),)]),
        Op("sort[ties]", fnp.sort, np.sort, [((3, 4),)], small_ints_as_float, diff=False),
        Op("argsort", fnp.argsort, lambda x: np.argsort(x, kind="stable"), [((3, 4),)], small_ints_as_float,
           diff=False, out="int"),
        Op("argsort[axis=0]", lambda x: fnp.argsort(x, axis=0), lambda x: np.argsort(x, axis=0, kind="stable"),
           [((3, 4),)], small_ints_as_float, diff=False, out="int"),
        Op("argsort[descending]", lambda x: fnp.argsort(x, descending=True),
           lambda x: np.argsort(-x, kind="stable"), [((3, 4),)], small_ints_as_float, diff=False, out="int"),
        Op("lexsort", lambda a, b: fnp.lexsort([a, b]), lambda a, b: np.lexsort([a, b]), [((6,), (6,))],
           small_ints_as_float, diff=False, out="int"),
        Op("lexsort[axis=0]", lambda a, b: fnp.lexsort([a, b], axis=0), lambda a, b: np.lexsort([a, b], axis=0),
           [((4, 3), (4, 3))], small_ints_as_float, diff=False, out="int"),
        Op("partition", lambda x: fnp.partition(x, 1), _partition_ref(1), [((3, 4),), ((5,),)]),
        Op("partition[axis=0]", lambda x: fnp.partition(x, 2, axis=0), _partition_ref(2, 0), [((3, 4),)]),
        Op("argpartition", lambda x: fnp.argpartition(x, 1), _argpartition_ref(1), [((3, 4),)], diff=False,
           out="int"),
        Op("searchsorted", fnp.searchsorted, np.searchsorted, [((5,), (3, 2)), ((4,), ())],
           (sorted_normal, normal), diff=False, out="int"),
        Op("searchsorted[binary search]", lambda a, v: fnp.searchsorted(a, v, side="right"),
           lambda a, v: np.searchsorted(a, v, side="right"), [((12,), (3, 2))],
           (lambda r, s: np.sort(small_ints_as_float(r, s)), small_ints_as_float), diff=False, out="int"),
        Op("searchsorted[right,ties]", lambda a, v: fnp.searchsorted(a, v, side="right"),
           lambda a, v: np.searchsorted(a, v, side="right"), [((6,), (4,))],
           (lambda r, s: np.sort(small_ints_as_float(r, s)), small_ints_as_float), diff=False, out="int"),
        Op("digitize", fnp.digitize, np.digitize, [((3, 2), (4,))], (normal, sorted_normal), diff=False,
           out="int"),
        Op("digitize[right,decreasing]", lambda x, b: fnp.digitize(x, b[::-1], right=True),
           lambda x, b: np.digitize(x, b[::-1], right=True), [((5,), (4,))],
           (small_ints_as_float, lambda r, s: np.arange(-2.0, 2.0)), diff=False, out="int"),
        Op("bincount", lambda x: fnp.bincount(x, length=6), lambda x: np.bincount(x, minlength=6)[:6], [((7,),)],
           counts, diff=False, out="int"),
        Op("bincount[weights]", lambda x, w: fnp.bincount(x, w, length=5),
           lambda x, w: np.bincount(x, w, minlength=5)[:5], [((7,), (7,))], (counts, normal)),
        Op("histogram", lambda a: fnp.histogram(a, bins=4), lambda a: np.histogram(a, bins=4), [((3, 4),)],
           diff=False),
        Op("histogram[range,weights,density]",
           lambda a, w: fnp.histogram(a, bins=3, range=(-1.0, 1.5), weights=w, density=True),
           lambda a, w: np.histogram(a, bins=3, range=(-1.0, 1.5), weights=w, density=True), [((8,), (8,))],
           (normal, positive)),
        Op("histogram_bin_edges", lambda a: fnp.histogram_bin_edges(a, bins=5),
           lambda a: np.histogram_bin_edges(a, bins=5), [((6,),)]),
        Op("histogram2d", lambda x, y: fnp.histogram2d(x, y, bins=(2, 3)),
           lambda x, y: np.histogram2d(x, y, bins=(2, 3)), [((9,), (9,))], diff=False, out="none"),
        Op("histogramdd", lambda s: fnp.histogramdd(s, bins=2), lambda s: np.histogramdd(s, bins=2), [((8, 3),)],
           diff=False, out="none"),
        Op("histogramdd[weights,density]", lambda s, w: fnp.histogramdd(s, bins=2, weights=w, density=True),
           lambda s, w: np.histogramdd(s, bins=2, weights=w, density=True), [((8, 2), (8,))], (normal, positive)),
    ]


def _statistics():
    rows = [
        Op("median", fnp.median, np.median, [((3, 4),), ((5,),)]),
        Op("median[axis=0,keepdims]", lambda x: fnp.median(x, axis=0, keepdims=True),
           lambda x: np.median(x, axis=0, keepdims=True), [((3, 4),)]),
        Op("quantile", lambda x, q: fnp.quantile(x, q, axis=1), lambda x, q: np.quantile(x, q, axis=1),
           [((3, 4), ()), ((3, 5), (2,))], (normal, unit_interval)),
        Op("quantile[axis=(0,2)]", lambda x: fnp.quantile(x, 0.3, axis=(0, 2)),
           lambda x: np.quantile(x, 0.3, axis=(0, 2)), [((2, 3, 2),)]),
        Op("quantile[inverted_cdf,weights]",
           lambda x, q, w: fnp.quantile(x, q, axis=1, method="inverted_cdf", weights=w),
           lambda x, q, w: np.quantile(x, q, axis=1, method="inverted_cdf", weights=w),
           [((3, 5), (2,), (3, 5))], (normal, unit_interval, positive)),
        Op("nanquantile[inverted_cdf]", lambda x: fnp.nanquantile(x, 0.4, axis=0, method="inverted_cdf"),
           lambda x: np.nanquantile(x, 0.4, axis=0, method="inverted_cdf"), [((5, 3),)], with_nans),
        Op("percentile", lambda x, q: fnp.percentile(x, q, axis=0), lambda x, q: np.percentile(x, q, axis=0),
           [((4, 3), (2,))], (normal, percents)),
        Op("nanmedian", lambda x: fnp.nanmedian(x, axis=1), lambda x: np.nanmedian(x, axis=1), [((3, 5),)],
           with_nans),
        Op("nanquantile", lambda x, q: fnp.nanquantile(x, q, axis=1), lambda x, q: np.nanquantile(x, q, axis=1),
           [((3, 5), (2,))], (with_nans, unit_interval)),
        Op("nanpercentile", lambda x: fnp.nanpercentile(x, 40.0), lambda x: np.nanpercentile(x, 40.0),
           [((3, 4),)], with_nans),
    ]
    for m in ["lower", "higher", "midpoint"]:
        rows.append(Op(f"quantile[method={m}]", (lambda m: lambda x: fnp.quantile(x, 0.3, axis=1, method=m))(m),
                       (lambda m: lambda x: np.quantile(x, 0.3, axis=1, method=m))(m), [((3, 4),)]))
    for name in ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin"]:
        rows.append(Op(name, (lambda f: lambda x: f(x, axis=1))(getattr(fnp, name)),
                       (lambda f: lambda x: f(x, axis=1))(getattr(np, name)), [((3, 4),)], with_nans))
        rows.append(Op(f"{name}[axis=None]", getattr(fnp, name), getattr(np, name), [((3, 4),)], with_nans))
    rows += [
        Op("nanvar[ddof=1,keepdims]", lambda x: fnp.nanvar(x, axis=0, ddof=1, keepdims=True),
           lambda x: np.nanvar(x, axis=0, ddof=1, keepdims=True), [((4, 3),)], with_nans),
        Op("nanargmax", lambda x: fnp.nanargmax(x, axis=1), lambda x: np.nanargmax(x, axis=1), [((3, 4),)],
           with_nans, diff=False, out="int"),
        Op("nanargmin", fnp.nanargmin, np.nanargmin, [((3, 4),)], with_nans, diff=False, out="int"),
        Op("nancumsum", lambda x: fnp.nancumsum(x, axis=1), lambda x: np.nancumsum(x, axis=1), [((3, 4),)],
           with_nans),
        Op("nancumprod", fnp.nancumprod, np.nancumprod, [((3, 4),)], with_nans),
        Op("average", fnp.average, np.average, UNARY[:2]),
        Op("average[weights,axis=1]", lambda x, w: fnp.average(x, axis=1, weights=w),
           lambda x, w: np.average(x, axis=1, weights=w), [((3, 4), (4,)), ((3, 4), (3, 4))], (normal, positive)),
        Op("average[returned]", lambda x, w: fnp.average(x, axis=0, weights=w, returned=True),
           lambda x, w: np.average(x, axis=0, weights=w, returned=True), [((3, 4), (3, 4))], (normal, positive)),
        Op("ptp", lambda x: fnp.ptp(x, axis=1), lambda x: np.ptp(x, axis=1), [((3, 4),)]),
        Op("count_nonzero", lambda x: fnp.count_nonzero(x, axis=0), lambda x: np.count_nonzero(x, axis=0),
           [((3, 4),)], small_ints_as_float, diff=False, out="int"),
        Op("cov", fnp.cov, np.cov, [((3, 4),), ((5,),)]),
        Op("cov[y,rowvar=False,bias]", lambda x, y: fnp.cov(x, y, rowvar=False, bias=True),
           lambda x, y: np.cov(x, y, rowvar=False, bias=True), [((5, 2), (5, 1))]),
        Op("cov[aweights]", lambda x, w: fnp.cov(x, aweights=w), lambda x, w: np.cov(x, aweights=w),
           [((2, 5), (5,))], (normal, positive)),
        Op("corrcoef", fnp.corrcoef, np.corrcoef, [((3, 5),)], atol=2e-5),
        Op("corrcoef[y]", fnp.corrcoef, np.corrcoef, [((5,), (5,))], atol=2e-5),
        Op("cumprod", lambda x: fnp.cumprod(x, axis=1), lambda x: np.cumprod(x, axis=1), [((3, 4),)]),
        Op("cumprod[zeros,axis=None]", fnp.cumprod, np.cumprod, [((3, 4),)], with_zeros),
        Op("cumulative_sum", lambda x: fnp.cumulative_sum(x, axis=1, include_initial=True),
           _cum_initial(np.cumsum, 0.0, 1), [((3, 4),)]),
        Op("cumulative_prod", lambda x: fnp.cumulative_prod(x, axis=0, include_initial=True),
           _cum_initial(np.cumprod, 1.0, 0), [((3, 4),)]),
        Op("diff", fnp.diff, np.diff, [((3, 4),), ((5,),)]),
        Op("diff[n=2,axis=0]", lambda x: fnp.diff(x, n=2, axis=0), lambda x: np.diff(x, n=2, axis=0), [((4, 3),)]),
        Op("diff[prepend,append]", lambda x, a: fnp.diff(x, prepend=0.5, append=a),
           lambda x, a: np.diff(x, prepend=0.5, append=a), [((3, 4), (3, 2))]),
        Op("ediff1d", lambda x, b: fnp.ediff1d(x, to_begin=b, to_end=2.0),
           lambda x, b: np.ediff1d(x, to_begin=b, to_end=2.0), [((3, 4), (2,))]),
        Op("gradient", fnp.gradient, np.gradient, [((3, 4),), ((5,),)]),
        Op("gradient[coordinates]", lambda f, x: fnp.gradient(f, x, axis=1),
           lambda f, x: np.gradient(f, x, axis=1), [((3, 4), (4,))], (normal, spread_sorted)),
        Op("trapezoid", fnp.trapezoid, np.trapezoid, [((3, 4),), ((5,),)]),
        Op("trapezoid[x,axis=0]", lambda y, x: fnp.trapezoid(y, x, axis=0), lambda y, x: np.trapezoid(y, x, axis=0),
           [((4, 3), (4,))]),
        Op("interp", fnp.interp, np.interp, [((6,), (4,), (4,)), ((2, 3), (5,), (5,))],
           (lambda r, s: r.uniform(-1.5, 3.5, s), spread_sorted, normal)),
        Op("interp[left,right]", lambda x, xp, fp: fnp.interp(x, xp, fp, left=-3.0, right=4.0),
           lambda x, xp, fp: np.interp(x, xp, fp, left=-3.0, right=4.0), [((6,), (4,), (4,))],
           (lambda r, s: r.uniform(-1.5, 3.5, s), spread_sorted, normal)),
        Op("interp[period]", lambda x, xp, fp: fnp.interp(x, xp, fp, period=3.0),
           lambda x, xp, fp: np.interp(x, xp, fp, period=3.0), [((6,), (4,), (4,))],
           (lambda r, s: r.uniform(-4.0, 4.0, s), lambda r, s: np.sort(r.uniform(0.1, 2.9, s)), normal)),
        Op("unwrap", fnp.unwrap, np.unwrap, [((3, 4),), ((6,),)], phases),
        Op("unwrap[period,axis=0]", lambda p: fnp.unwrap(p, axis=0, period=4.0),
           lambda p: np.unwrap(p, axis=0, period=4.0), [((4, 3),)], phases),
    ]
    return rows


def _polynomials():
    rows = []
    for mode in ["full", "same", "valid"]:
        for name in ["convolve", "correlate"]:
            rows.append(Op(f"{name}[{mode}]", (lambda f, m: lambda a, v: f(a, v, mode=m))(getattr(fnp, name), mode),
                           (lambda f, m: lambda a, v: f(a, v, mode=m))(getattr(np, name), mode),
                           [((5,), (3,)), ((2,), (3,))]))
    rows += [
        Op("vander", fnp.vander, np.vander, [((4,),)]),
        Op("vander[N,increasing]", lambda x: fnp.vander(x, 3, increasing=True),
           lambda x: np.vander(x, 3, increasing=True), [((4,),)]),
        Op("polyval", fnp.polyval, np.polyval, [((4,), (3, 2)), ((1,), ())]),
        Op("polyval[scan]", lambda p, x: fnp.polyval(p, x, unroll=2), np.polyval, [((5,), (3,))],
           (lambda r, s: 0.5 * r.standard_normal(s), normal)),
        Op("polyadd", fnp.polyadd, np.polyadd, [((3,), (2,)), ((2,), (4,))]),
        Op("polysub", fnp.polysub, np.polysub, [((3,), (2,)), ((2,), (4,))]),
        Op("polymul", fnp.polymul, np.polymul, [((3,), (2,))]),
        Op("polydiv", fnp.polydiv, _polydiv_ref, [((4,), (2,)), ((3,), (3,))], (normal, lambda r, s: positive(r, s))),
        Op("polyder", lambda p: fnp.polyder(p, 2), lambda p: np.polyder(p, 2), [((5,),)]),
        Op("polyint", lambda p, k: fnp.polyint(p, 2, k), lambda p, k: np.polyint(p, 2, k), [((3,), (2,))]),
        Op("poly", fnp.poly, np.poly, [((3,),)]),
        Op("poly[matrix]", fnp.poly, lambda a: np.real(np.poly(a)), [((3, 3),)], atol=1e-4, rtol=1e-4,
           atol64=1e-10),
        Op("polyfit", lambda x, y: fnp.polyfit(x, y, 2), lambda x, y: np.polyfit(x, y, 2), [((6,), (6,))],
           (spread_sorted, normal), atol=1e-4, rtol=1e-4, atol64=1e-10),
        Op("polyfit[w,2-d y]", lambda x, y, w: fnp.polyfit(x, y, 1, w=w), lambda x, y, w: np.polyfit(x, y, 1, w=w),
           [((5,), (5, 2), (5,))], (spread_sorted, normal, positive), atol=1e-4, rtol=1e-4, atol64=1e-10),
    ]
    return rows


def _roots():
    # Roots come in LAPACK's order: compare them sorted (real part, then imaginary part).
    return [
        Op("roots", lambda p: fnp.sort_complex(fnp.roots(p, strip_zeros=False)),
           lambda p: np.sort_complex(np.roots(p)), [((4,),)], diff=False, out="complex", rtol=2e-4, atol=2e-4),
        Op("roots[leading zeros stripped]", lambda p: fnp.sort_complex(fnp.roots(fnp.concatenate([fnp.zeros(2), p]))),
           lambda p: np.sort_complex(np.roots(np.concatenate([np.zeros(2), p]))), [((3,),)], diff=False,
           out="complex", rtol=2e-4, atol=2e-4, transforms=False),
    ]


OPS: list = _sorting() + _statistics() + _polynomials() + _roots()
PUBLIC: list[str] = sorted({op.name.split("[")[0] for op in OPS})
