"""GPU implementations of the special functions, the complex parts, the random-gamma derivatives and threefry2x32.

Every implementation here runs on the device; none copies to the host. Three kinds:

* ``cupyx.scipy.special`` where it has the function with scipy's semantics: erf, erfc, erf_inv,
  erfcx, lgamma, digamma, polygamma, zeta, gammasgn, igamma, igammac, betainc, betaln,
  bessel_i0e, bessel_i1e, ndtri, log_ndtr, xlogy, xlog1py, exp1, expi, expn, sici_si, sici_ci,
  loggamma_complex.
* CuPy ``ElementwiseKernel``s over the xsf headers CuPy ships (``cupy/xsf``, the C++ library
  scipy.special is built from) for what cupyx lacks: spence, fresnel_s, fresnel_c, dawsn, wofz
  (Faddeeva), owens_t, hyp2f1 (the same code as scipy's: compiled for the host, these operation
  strings give scipy's values bit for bit) and bessel_jv (cephes ``jv``: scipy's real ``jv`` runs
  AMOS first, whose header does not compile under NVRTC; they agree to about 1e-12 relative for
  orders v >= 0 and 1e-10 for v < 0). An array module without ``ElementwiseKernel`` (the numpy
  stand-in for CuPy in the tests) runs its ``scipy_special`` module's function of the same name.
* Array expressions: the complex parts, threefry2x32 (uint32 wrap-around arithmetic, bit-identical
  to the host), hyp1f1 (specfun's ``chgm``, whose header does not compile under NVRTC; scipy's
  own is Boost's, see :func:`_hyp1f1`), and the partial derivatives that the host computes by
  Richardson-extrapolated central differences (igamma_grad_a, zeta_grad_x, hyp1f1_grad_a/b,
  hyp2f1_grad_a/b/c, random_gamma_grad and its partials), ported from the host implementations.

The operands are cast to the primitive's float dtype (as on the host) and computed in float64
(complex128), then rounded to that dtype: scipy computes its float32 loops in double too.
erf and erf_inv keep float32 in float32 (CUDA's erff/erfinvf, within 2 ulp), as they sit on hot
paths (GELU, normal sampling).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad.backends.gpu import array as gpu_array
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import random_bits as RB
from funcgrad.primitives import special as SP
from funcgrad.primitives.elementwise import _complex_out, _conj_out, _no_complex, _real_out

__all__ = ["MAKERS"]

Maker = Callable[[gpu_array.Binding], Callable[..., Any]]

# (primitive, make(binding) -> implementation), registered by funcgrad.backends.gpu.impls (which
# imports this module: registering here would be an import circle).
MAKERS: list[tuple[Any, Maker]] = []


def _register(prim: Any, make: Maker) -> None:
    MAKERS.append((prim, make))


def _simple(prim: Any) -> Callable[[Callable[[Any], Callable[..., Any]]], Callable[[Any], Callable[..., Any]]]:
    """Decorator: register ``fn(xp) -> impl`` (the implementation needs only the array module)."""
    def decorate(fn: Callable[[Any], Callable[..., Any]]) -> Callable[[Any], Callable[..., Any]]:
        _register(prim, lambda b: fn(b.xp))
        return fn
    return decorate


_F64, _C128 = np.dtype(np.float64), np.dtype(np.complex128)

# --------------------------------------------------------------------------
# the common wrapper: dtype rule, casts, the float64 computation
# --------------------------------------------------------------------------


def _float_dtype(*args: Any) -> np.dtype:
    return _dtypes.inexact(_dtypes.result_type(*args))


def _work_dtype(dtype: np.dtype) -> np.dtype:
    return _C128 if dtype.kind == "c" else _F64


def _special(prim: Any, compute: Callable[[gpu_array.Binding], Callable[..., Any]],
             complex_ok: bool = False) -> None:
    """Register ``prim`` (declared by ``primitives.special.nary``) as ``compute(binding)(*xs)``.

    As on the host: the operands are cast to their common float dtype (complex operands
    refused unless ``complex_ok``), the result is in that dtype; the computation runs in
    float64 (complex128).
    """
    rule = _float_dtype if complex_ok else _no_complex(prim.name, _float_dtype)

    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        xp, f = b.xp, compute(b)

        def impl(*args):
            dtype = rule(*args)
            work = _work_dtype(dtype)
            xs = [xp.asarray(a, dtype=dtype).astype(work, copy=False) for a in args]
            with np.errstate(all="ignore"):   # (numpy stand-in; CuPy never warns)
                out = f(*xs)
            return xp.asarray(out).astype(dtype, copy=False)
        return impl
    _register(prim, make)


def _cupyx(name: str, pick: Callable[[Any], Any] | None = None) -> Callable[[gpu_array.Binding], Callable]:
    """``cupyx.scipy.special.<name>`` (``pick(module)`` when given)."""
    def compute(b: gpu_array.Binding) -> Callable:
        sp = gpu_array.scipy_module(b, "special")
        return getattr(sp, name) if pick is None else pick(sp)
    return compute


# --------------------------------------------------------------------------
# cupyx.scipy.special
# --------------------------------------------------------------------------


def _nan_at_zero(name: str) -> Callable[[gpu_array.Binding], Callable]:
    """``name`` with NaN at 0 (JAX's digamma and expi; scipy gives -inf)."""
    def compute(b: gpu_array.Binding) -> Callable:
        f, xp = getattr(gpu_array.scipy_module(b, "special"), name), b.xp
        return lambda x: xp.where(x == 0, xp.nan, f(x))
    return compute


for _prim, _name in ((SP.lgamma_p, "gammaln"), (SP.polygamma_p, "polygamma"), (SP.gammasgn_p, "gammasgn"),
                     (SP.igamma_p, "gammainc"), (SP.igammac_p, "gammaincc"), (SP.betainc_p, "betainc"),
                     (SP.betaln_p, "betaln"), (SP.i0e_p, "i0e"), (SP.i1e_p, "i1e"), (SP.ndtri_p, "ndtri"),
                     (SP.log_ndtr_p, "log_ndtr"), (SP.exp1_p, "exp1"), (SP.expn_p, "expn"),
                     (SP.erfc_p, "erfc"), (SP.erfcx_p, "erfcx"), (SP.zeta_p, "zeta")):
    _special(_prim, _cupyx(_name))
_special(SP.digamma_p, _nan_at_zero("digamma"))
_special(SP.expi_p, _nan_at_zero("expi"))
_special(SP.si_p, _cupyx("sici", lambda sp: lambda x: sp.sici(x)[0]))


def _ci(b: gpu_array.Binding) -> Callable:
    """The cosine integral of |x| (the host's convention: Ci is even there)."""
    sp, xp = gpu_array.scipy_module(b, "special"), b.xp
    return lambda x: sp.sici(xp.abs(x))[1]


_special(SP.ci_p, _ci)
_special(SP.xlogy_p, _cupyx("xlogy"), complex_ok=True)
_special(SP.xlog1py_p, _cupyx("xlog1py"), complex_ok=True)
_special(SP.loggamma_complex_p, _cupyx("loggamma"), complex_ok=True)


def _erf_like(prim: Any, name: str) -> None:
    """erf / erf_inv as on the host: float operands keep their dtype (float16 computes and
    returns float32, as scipy does), integers compute in the default float dtype."""
    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        f, xp = getattr(gpu_array.scipy_module(b, "special"), name), b.xp

        def impl(x):
            x = xp.asarray(x)
            if _dtypes.kind(x.dtype) != "f":
                x = x.astype(_dtypes.float_)
            elif x.dtype == np.float16:
                x = x.astype(np.float32)
            elif x.dtype == _dtypes.bfloat16:
                with np.errstate(all="ignore"):
                    return xp.asarray(f(x.astype(np.float32))).astype(x.dtype)
            with np.errstate(all="ignore"):
                return f(x)
        return impl
    _register(prim, make)


_erf_like(RB.erf_p, "erf")
_erf_like(RB.erf_inv_p, "erfinv")

# --------------------------------------------------------------------------
# xsf kernels (what cupyx lacks)
# --------------------------------------------------------------------------


def _xsf(name: str, header: str, call: str, n_in: int, standin: Callable[[Any], Callable],
         complex_io: bool = False) -> Callable[[gpu_array.Binding], Callable]:
    """An ElementwiseKernel ``y = <call>`` over float64 operands ``x0, x1, ...`` (complex128 with
    ``complex_io``), ``#include <cupy/xsf/<header>>``; without ElementwiseKernel (the numpy stand-in
    for CuPy), ``standin(scipy_special)``: scipy's function, which runs the same xsf code."""
    def compute(b: gpu_array.Binding) -> Callable:
        kernel_type = getattr(b.xp, "ElementwiseKernel", None)
        if kernel_type is None:
            return standin(gpu_array.scipy_module(b, "special"))
        t = "complex128" if complex_io else "float64"
        params = ", ".join(f"{t} x{i}" for i in range(n_in))
        return kernel_type(params, f"{t} y", call, f"funcgrad_{name}", preamble=f"#include <cupy/xsf/{header}>")
    return compute


_special(SP.spence_p, _xsf("spence", "spence.h", "y = xsf::spence(x0)", 1, lambda sp: sp.spence))
_special(SP.fresnel_s_p, _xsf("fresnel_s", "cephes/fresnl.h",
                              "double s, c; xsf::cephes::fresnl(x0, &s, &c); y = s", 1,
                              lambda sp: lambda x: sp.fresnel(x)[0]))
_special(SP.fresnel_c_p, _xsf("fresnel_c", "cephes/fresnl.h",
                              "double s, c; xsf::cephes::fresnl(x0, &s, &c); y = c", 1,
                              lambda sp: lambda x: sp.fresnel(x)[1]))
_special(SP.dawsn_p, _xsf("dawsn", "erf.h", "y = xsf::dawsn(x0)", 1, lambda sp: sp.dawsn))
_special(SP.wofz_p, _xsf("wofz", "erf.h", "y = xsf::wofz(x0)", 1, lambda sp: sp.wofz, complex_io=True),
         complex_ok=True)
_special(SP.owens_t_p, _xsf("owens_t", "cephes/owens_t.h", "y = xsf::cephes::owens_t(x0, x1)", 2,
                            lambda sp: sp.owens_t))
_special(SP.jv_p, _xsf("jv", "cephes/jv.h", "y = xsf::cephes::jv(x0, x1)", 2, lambda sp: sp.jv))

_hyp2f1 = _xsf("hyp2f1", "cephes/hyp2f1.h", "y = xsf::cephes::hyp2f1(x0, x1, x2, x3)", 4, lambda sp: sp.hyp2f1)

# --------------------------------------------------------------------------
# hyp1f1: specfun's chgm as array expressions (its header does not compile under NVRTC, so
# cupyx has no hyp1f1)
# --------------------------------------------------------------------------

_SERIES_TERMS, _SERIES_CHECK = 500, 25   # at most 500 terms; all-converged read back every 25
# chgm sums the series up to x = 30 + |b|, where its 8-term asymptotic expansion is good to only
# about 1e-6; the series (500 terms reach x = 200) keeps 1e-12 up to here.
_SERIES_UP_TO = 200.0


def _gamma_ratio(sp: Any, xp: Any, p: Any, q: Any) -> Any:
    """Gamma(p) / Gamma(q) through log-gamma (0 where q is a pole of Gamma)."""
    pole = (q <= 0) & (q == xp.floor(q))
    safe_q = xp.where(pole, 0.5, q)
    ratio = sp.gammasgn(p) * sp.gammasgn(safe_q) * xp.exp(sp.gammaln(p) - sp.gammaln(safe_q))
    return xp.where(pole, 0.0, ratio)


def _kummer_series(xp: Any, a: Any, b: Any, x: Any) -> Any:
    """sum_j (a)_j / (b)_j x^j / j!, each element stopped once a term is below 1e-15 of the sum."""
    hg, rg = xp.ones_like(x), xp.ones_like(x)
    done = xp.zeros(x.shape, dtype=bool)
    for j in range(1, _SERIES_TERMS + 1):
        rg = rg * (a + (j - 1.0)) / (j * (b + (j - 1.0))) * x
        new = hg + rg
        hg = xp.where(done, hg, new)
        done = done | ((new != 0) & (xp.abs(rg / new) < 1e-15))
        if j % _SERIES_CHECK == 0 and bool(xp.all(done)):   # one host read per 25 terms
            break
    return hg


def _kummer_asymptotic(sp: Any, xp: Any, a: Any, b: Any, x: Any, x0: Any) -> Any:
    """DLMF 13.7.2 with 8 terms, as chgm (used for x > max(30 + |b|, 200))."""
    sum1, sum2, r1, r2 = (xp.ones_like(x) for _ in range(4))
    for i in range(1, 9):
        r1 = -r1 * (a + i - 1.0) * (a - b + i) / (x * i)
        r2 = -r2 * (b - a + i - 1.0) * (a - i) / (x * i)
        sum1, sum2 = sum1 + r1, sum2 + r2
    neg = x0 < 0
    hg1 = _gamma_ratio(sp, xp, b, b - a) * xp.where(neg, xp.exp(x0), 1.0) * x ** -a * xp.cos(np.pi * a) * sum1
    hg2 = _gamma_ratio(sp, xp, b, a) * xp.where(neg, 1.0, xp.exp(x)) * x ** (a - b) * sum2
    return hg1 + hg2


def _kummer_m(sp: Any, xp: Any, a: Any, b: Any, x: Any, x0: Any) -> Any:
    """M(a, b, x) for x >= 0 (times e^x0 when the caller's x0 < 0: Kummer's transformation)."""
    series_part = (x <= xp.maximum(30.0 + xp.abs(b), _SERIES_UP_TO)) | (a < 0)
    series = _kummer_series(xp, xp.where(series_part, a, 0.0), b, xp.where(series_part, x, 0.0))
    series = xp.where(x0 < 0, series * xp.exp(x0), series)
    if bool(xp.all(series_part)):
        return series
    big_x = xp.where(series_part, _SERIES_UP_TO + 1.0 + xp.abs(b), x)   # (finite in both branches)
    return xp.where(series_part, series, _kummer_asymptotic(sp, xp, xp.where(series_part, 0.0, a), b, big_x, x0))


def _hyp1f1(b: gpu_array.Binding) -> Callable:
    """The confluent hypergeometric function M(a, b, x) as specfun's ``chgm`` computes it: Kummer's
    transformation for x < 0, the power series (x <= max(30 + |b|, 200) or a < 0; chgm stops the
    series at 30 + |b|) or the asymptotic expansion,
    and for a >= 2 the values at frac(a), frac(a) + 1 carried up by the three-term recurrence in a
    (DLMF 13.3.1; the recurrence takes max(floor(a)) steps). scipy's own real hyp1f1 is Boost's: the
    two agree to about 1e-12 relative where the series or the expansion converges well."""
    sp, xp = gpu_array.scipy_module(b, "special"), b.xp

    def impl(a, bb, x):
        a, bb, x = xp.broadcast_arrays(a, bb, x)
        x0 = x
        a = xp.where(x0 < 0, bb - a, a)   # DLMF 13.2.39
        x = xp.abs(x0)
        big = a >= 2.0
        la = xp.where(big, xp.floor(a), 0.0)
        af = a - la                      # frac(a) where a >= 2, else a itself
        y0 = _kummer_m(sp, xp, af, bb, x, x0)
        if not bool(xp.any(big)):
            return xp.where(xp.isnan(a) | xp.isnan(bb) | xp.isnan(x), xp.nan, y0)
        y1 = _kummer_m(sp, xp, af + 1.0, bb, x, x0)
        acur = af + 1.0
        for i in range(1, int(la.max())):   # a host read: the number of recurrence steps
            step = big & (i < la)
            hg = ((2.0 * acur - bb + x) * y1 + (bb - acur) * y0) / acur
            y0, y1 = xp.where(step, y1, y0), xp.where(step, hg, y1)
            acur = xp.where(step, acur + 1.0, acur)
        out = xp.where(big, y1, y0)
        return xp.where(xp.isnan(a) | xp.isnan(bb) | xp.isnan(x), xp.nan, out)
    return impl


_special(SP.hyp1f1_p, _hyp1f1)
_special(SP.hyp2f1_p, _hyp2f1)

# --------------------------------------------------------------------------
# Richardson-extrapolated partial derivatives (ports of the host implementations)
# --------------------------------------------------------------------------


def _richardson(f_of: Callable[[gpu_array.Binding], Callable], i: int) -> Callable[[gpu_array.Binding], Callable]:
    """d f / d (operand ``i``) as ``primitives.special._richardson`` computes it, on the device."""
    return lambda b: SP._richardson(f_of(b), i, xp=b.xp)


for _prim, _f, _i in ((SP.hyp1f1_grad_a_p, _hyp1f1, 0), (SP.hyp1f1_grad_b_p, _hyp1f1, 1),
                      (SP.hyp2f1_grad_a_p, _hyp2f1, 0), (SP.hyp2f1_grad_b_p, _hyp2f1, 1),
                      (SP.hyp2f1_grad_c_p, _hyp2f1, 2), (SP.zeta_grad_x_p, _cupyx("zeta"), 0)):
    _special(_prim, _richardson(_f, _i))


def _igamma_grad_a(b: gpu_array.Binding) -> Callable:
    """``primitives.special._igamma_grad_a_impl`` on the device."""
    sp, xp = gpu_array.scipy_module(b, "special"), b.xp

    def impl(a, x):
        h = 2e-3 * xp.maximum(a, 1e-300)

        def central(step):
            return (sp.gammainc(a + step, x) - sp.gammainc(a - step, x)) / (2.0 * step)
        return (4.0 * central(h / 2.0) - central(h)) / 3.0
    return impl


_special(SP.igamma_grad_a_p, _igamma_grad_a)

# --------------------------------------------------------------------------
# random_gamma_grad and its partials (ports of primitives.random_bits)
# --------------------------------------------------------------------------


def _gamma_dtype(a: Any, x: Any) -> np.dtype:
    return _dtypes.inexact(_dtypes.result_type(a, x))


def _gamma_grad(sp: Any, xp: Any, a64: Any, x64: Any) -> Any:
    """-(d/da P(a, x)) / pdf(x; a) in float64 (``random_bits._gamma_grad_impl``)."""
    lower = x64 < a64
    h = 1e-3 * a64

    def dp(step):
        plus = xp.where(lower, sp.gammainc(a64 + step, x64), -sp.gammaincc(a64 + step, x64))
        minus = xp.where(lower, sp.gammainc(a64 - step, x64), -sp.gammaincc(a64 - step, x64))
        return (plus - minus) / (2 * step)

    d_a = (4 * dp(h / 2) - dp(h)) / 3
    log_pdf = (a64 - 1) * xp.log(x64) - x64 - sp.gammaln(a64)
    out = xp.where(x64 > 0, -d_a / xp.exp(log_pdf), 0.0)
    return xp.where(xp.isfinite(out), out, 0.0)


def _gamma_grad_dx(sp: Any, xp: Any, a64: Any, x64: Any) -> Any:
    """``random_bits._gamma_grad_dx_impl`` in float64."""
    g = _gamma_grad(sp, xp, a64, x64)
    out = -(xp.log(x64) - sp.digamma(a64)) - g * ((a64 - 1) / x64 - 1)
    return xp.where(xp.isfinite(out) & (x64 > 0), out, 0.0)


def _gamma_grad_da(sp: Any, xp: Any, a64: Any, x64: Any) -> Any:
    """``random_bits._gamma_grad_da_impl`` in float64."""
    g = _gamma_grad(sp, xp, a64, x64)
    log_pdf = (a64 - 1) * xp.log(x64) - x64 - sp.gammaln(a64)
    lower = x64 < a64

    def cdf(aa):
        return xp.where(lower, sp.gammainc(aa, x64), -sp.gammaincc(aa, x64))

    def d2(step):
        return (cdf(a64 + step) - 2 * cdf(a64) + cdf(a64 - step)) / (step * step)

    h = 1e-2 * a64
    p_aa = (4 * d2(h / 2) - d2(h)) / 3
    out = -p_aa / xp.exp(log_pdf) - g * (xp.log(x64) - sp.digamma(a64))
    return xp.where(xp.isfinite(out) & (x64 > 0), out, 0.0)


def _gamma_prim(prim: Any, body: Callable[..., Any]) -> None:
    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        sp, xp = gpu_array.scipy_module(b, "special"), b.xp

        def impl(a, x):
            dtype = _gamma_dtype(a, x)
            a64, x64 = xp.broadcast_arrays(xp.asarray(a, dtype=_F64), xp.asarray(x, dtype=_F64))
            with np.errstate(all="ignore"):
                out = body(sp, xp, a64, x64)
            return out.astype(dtype)
        return impl
    _register(prim, make)


_gamma_prim(RB.random_gamma_grad_p, _gamma_grad)
_gamma_prim(RB.random_gamma_grad_dx_p, _gamma_grad_dx)
_gamma_prim(RB.random_gamma_grad_da_p, _gamma_grad_da)

# --------------------------------------------------------------------------
# complex parts
# --------------------------------------------------------------------------


def _part(name: str, attr: str) -> Callable[[Any], Callable]:
    check = _real_out(name)

    def make(xp: Any) -> Callable:
        def impl(x):
            check(x)
            return getattr(xp, attr)(x).copy()
        return impl
    return make


_simple(E.real_p)(_part("real", "real"))
_simple(E.imag_p)(_part("imag", "imag"))


@_simple(E.conj_p)
def _conj(xp: Any) -> Callable:
    def impl(x):
        _conj_out(x)
        return xp.conjugate(x)
    return impl


@_simple(E.complex_p)
def _complex(xp: Any) -> Callable:
    def impl(x, y):
        dtype = _complex_out(x, y)
        part = _dtypes.real_dtype(dtype)
        x, y = xp.broadcast_arrays(xp.asarray(x, dtype=part), xp.asarray(y, dtype=part))
        out = xp.empty(x.shape, dtype)
        # Set the parts (not x + 1j * y, which turns an infinite imaginary part into a NaN real part).
        out.real[...] = x
        out.imag[...] = y
        return out
    return impl

# --------------------------------------------------------------------------
# threefry2x32: uint32 wrap-around arithmetic, as funcgrad._threefry
# --------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF


def _as_u32(xp: Any, v: Any) -> Any:
    """A uint32 device array of ``v`` (as ``_threefry._as_u32``: integers must fit, other dtypes raise)."""
    if isinstance(v, bool) or not isinstance(v, int):
        v = xp.asarray(v)
        if v.dtype == np.uint32:
            return v
        if v.dtype.kind not in "iub":
            raise TypeError(f"threefry needs unsigned 32-bit integers, got dtype {v.dtype}")
        if v.size and (int(v.min()) < 0 or int(v.max()) > _MASK32):   # a host read: non-uint32 input only
            raise ValueError("threefry inputs must lie in [0, 2**32)")
        return v.astype(np.uint32)
    if not 0 <= v <= _MASK32:
        raise ValueError("threefry inputs must lie in [0, 2**32)")
    return xp.asarray(v, dtype=np.uint32)


@_simple(RB.threefry2x32_p)
def _threefry2x32(xp: Any) -> Callable:
    from funcgrad import _threefry as T  # noqa: PLC0415 -- the constants

    u32 = np.uint32

    def rotl(x, r):
        return (x << u32(r)) | (x >> u32(32 - r))

    def impl(k0, k1, x0, x1):
        k0, k1, x0, x1 = xp.broadcast_arrays(*(_as_u32(xp, v) for v in (k0, k1, x0, x1)))
        shape = x0.shape
        # 1-d, as on the host (numpy's 0-d arithmetic gives scalars, which warn on wrap-around).
        k0, k1, x0, x1 = (v.reshape(-1) for v in (k0, k1, x0, x1))
        ks = (k0, k1, k0 ^ k1 ^ u32(T._KS_PARITY))
        x0 = x0 + ks[0]
        x1 = x1 + ks[1]
        for s in range(1, 6):
            for r in T._ROTATIONS[(s - 1) % 2]:
                x0 = x0 + x1
                x1 = rotl(x1, r) ^ x0
            x0 = x0 + ks[s % 3]
            x1 = x1 + ks[(s + 1) % 3] + u32(s)
        return [x0.reshape(shape), x1.reshape(shape)]
    return impl
