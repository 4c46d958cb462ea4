"""Special functions, complex parts, random-gamma derivatives and threefry2x32 on GPU arrays.

Each check runs the public funcgrad functions on ``fg.device_put(x, "gpu")`` arrays (values, and
gradients, whose rules bind further primitives that must run on the device too) and compares with
scipy/numpy in float64 and with finite differences of scipy. The checks run over the numpy stand-in
for CuPy (``tests/gpu_standin.py``) and, in the one GPU-marked test, over CuPy on a real GPU.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sc

import funcgrad as fg
import funcgrad.numpy as fnp
import funcgrad.scipy.special as fs
from conftest import config_set
from funcgrad import lax
from funcgrad.backends.gpu import _detect
from funcgrad.primitives import special as SP
from gpu_standin import FakeDeviceArray, gpu_standin


def dev(x, dtype=None):
    return fg.device_put(fnp.asarray(np.asarray(x, dtype=dtype)), "gpu")


def host(y):
    """``y`` (a GPU array) as a numpy array; its buffer must be a device buffer."""
    assert y.device == "gpu", y.device
    assert type(y._value).__module__.split(".")[0] == "cupy" or isinstance(y._value, FakeDeviceArray), \
        type(y._value)
    return np.asarray(fg.device_put(y, "cpu"))


R = np.random.default_rng(7)
POS = np.array([0.3, 0.9, 1.7, 3.2, 6.5])         # positive arguments
REAL = np.array([-2.3, -0.7, 0.4, 1.1, 2.9])       # arguments of either sign
UNIT = np.array([0.05, 0.3, 0.5, 0.8, 0.95])       # in (0, 1)
SMALL = np.array([-0.6, -0.25, 0.1, 0.35, 0.7])    # |x| < 1 (hypergeometric 2F1)
# hyp1f1 (a, b, x): negative x (Kummer's transformation), a >= 2 (the recurrence in a), a < 0, the series
# far out (x = 150) and the asymptotic expansion (x = 250)
HYP1F1 = (np.array([0.3, 2.5, 5.5, -1.7, 0.9, 1.3]), np.array([1.2, 0.7, 3.0, 2.5, 1.5, 2.2]),
          np.array([-2.3, 7.0, -12.0, 4.0, 150.0, 250.0]))

# (label, funcgrad function, scipy reference, operands, rtol in float64)
VALUE_CASES = [
    ("erf", lax.erf, sc.erf, (REAL,), 1e-13),
    ("erfc", fs.erfc, sc.erfc, (REAL,), 1e-13),
    ("erf_inv", lax.erf_inv, sc.erfinv, (SMALL,), 1e-13),
    ("erfcx", fs.erfcx, sc.erfcx, (REAL,), 1e-13),
    ("gammaln", fs.gammaln, sc.gammaln, (POS,), 1e-13),
    ("digamma", fs.digamma, sc.digamma, (REAL,), 1e-12),
    ("polygamma", lambda x: fs.polygamma(dev(np.array([0, 1, 2, 3, 1])), x), lambda x: sc.polygamma(
        np.array([0, 1, 2, 3, 1]), x), (POS,), 1e-12),
    ("zeta", fs.zeta, sc.zeta, (POS + 1.5, POS), 1e-12),
    ("gammasgn", fs.gammasgn, sc.gammasgn, (REAL,), 0),
    ("gammainc", fs.gammainc, sc.gammainc, (POS, POS[::-1]), 1e-12),
    ("gammaincc", fs.gammaincc, sc.gammaincc, (POS, POS[::-1]), 1e-12),
    ("betainc", fs.betainc, sc.betainc, (POS, POS[::-1], UNIT), 1e-12),
    ("betaln", fs.betaln, sc.betaln, (POS, POS[::-1]), 1e-12),
    ("i0e", fs.i0e, sc.i0e, (REAL,), 1e-13),
    ("i1e", fs.i1e, sc.i1e, (REAL,), 1e-13),
    ("ndtri", fs.ndtri, sc.ndtri, (UNIT,), 1e-13),
    ("log_ndtr", fs.log_ndtr, sc.log_ndtr, (REAL * 4,), 1e-13),
    ("xlogy", fs.xlogy, sc.xlogy, (REAL, POS), 1e-13),
    ("xlog1py", fs.xlog1py, sc.xlog1py, (REAL, UNIT), 1e-13),
    ("exp1", fs.exp1, sc.exp1, (POS,), 1e-13),
    ("expi", fs.expi, sc.expi, (REAL,), 1e-13),
    ("expn", lambda x: fs.expn(dev(np.array([0, 1, 2, 3, 5])), x),
     lambda x: sc.expn(np.array([0, 1, 2, 3, 5]), x), (POS,), 1e-13),
    ("spence", fs.spence, sc.spence, (POS,), 1e-13),
    ("sici", lambda x: fnp.stack(fs.sici(x)), lambda x: np.stack([sc.sici(x)[0], sc.sici(np.abs(x))[1]]),
     (REAL,), 1e-13),
    ("fresnel", lambda x: fnp.stack(fs.fresnel(x)), lambda x: np.stack(sc.fresnel(x)), (REAL,), 1e-13),
    ("dawsn", fs.dawsn, sc.dawsn, (REAL,), 1e-13),
    ("owens_t", fs.owens_t, sc.owens_t, (REAL, REAL[::-1]), 1e-12),
    ("hyp1f1", fs.hyp1f1, sc.hyp1f1, HYP1F1, 1e-11),
    ("hyp2f1", fs.hyp2f1, sc.hyp2f1, (POS, UNIT, POS[::-1] + 1.0, SMALL), 1e-11),
    ("bessel_jv", lambda v, z: SP.jv_p.bind(v, z), sc.jv, (np.array([0.0, 0.5, 1.0, 2.5, 4.0]), POS * 2), 1e-11),
    ("bessel_jn", lambda z: fs.bessel_jn(z, v=2), lambda z: np.stack([sc.jv(k, z) for k in range(3)]), (POS,),
     1e-11),
]


def check_values(dtype, rtol_floor):
    """Every function of VALUE_CASES on device operands of ``dtype``: result on the device, in ``dtype``, and
    equal to scipy's in float64 on the same (rounded) operands."""
    for label, f, ref, args, rtol in VALUE_CASES:
        args = [np.asarray(a, dtype) for a in args]
        out = f(*[dev(a) for a in args])
        got = host(out)
        assert got.dtype == dtype, (label, got.dtype)
        with np.errstate(all="ignore"):
            want = ref(*[a.astype(np.float64) for a in args])
            want = np.where(np.isfinite(want.astype(dtype)), want, want.astype(dtype))   # overflows in dtype
        np.testing.assert_allclose(got, want, rtol=max(rtol, rtol_floor), atol=rtol_floor * 1e-2, err_msg=label)


def check_edges():
    """NaN and inf operands, and the NaN-at-0 conventions (JAX's digamma and expi), as on the host."""
    x = np.array([0.0, -1.0, np.nan, np.inf, -np.inf, 2.0], np.float32)
    x64 = x.astype(np.float64)
    nan_at_0 = lambda f: lambda v: np.where(v == 0, np.nan, f(v))  # noqa: E731
    for label, f, ref in (("digamma", fs.digamma, nan_at_0(sc.digamma)), ("expi", fs.expi, nan_at_0(sc.expi)),
                          ("gammaln", fs.gammaln, sc.gammaln), ("erf", lax.erf, sc.erf), ("dawsn", fs.dawsn, sc.dawsn),
                          ("spence", fs.spence, sc.spence), ("i0e", fs.i0e, sc.i0e)):
        with np.errstate(all="ignore"):
            want = ref(x64)
        np.testing.assert_allclose(host(f(dev(x))), want, rtol=1e-6, err_msg=label)   # NaN and inf where want has them
    empty = host(fs.owens_t(dev(np.zeros(0, np.float32)), dev(np.zeros(0, np.float32))))
    assert empty.shape == (0,) and empty.dtype == np.float32


def _fd(f, args, i, h=1e-6):
    """Central difference of ``f`` with respect to operand ``i`` (float64)."""
    up, down = list(args), list(args)
    step = h * np.maximum(1.0, np.abs(args[i]))
    up[i], down[i] = args[i] + step, args[i] - step
    return (f(*up) - f(*down)) / (2 * step)


# (label, funcgrad function, scipy reference, operands, differentiated operands)
GRAD_CASES = [
    ("erf", lax.erf, sc.erf, (REAL,), (0,)),
    ("erf_inv", lax.erf_inv, sc.erfinv, (SMALL,), (0,)),
    ("erfc", fs.erfc, sc.erfc, (REAL,), (0,)),
    ("erfcx", fs.erfcx, sc.erfcx, (REAL,), (0,)),
    ("gammaln", fs.gammaln, sc.gammaln, (POS,), (0,)),
    ("digamma", fs.digamma, sc.digamma, (POS,), (0,)),
    ("zeta", fs.zeta, sc.zeta, (POS + 1.5, POS), (0, 1)),
    ("gammainc", fs.gammainc, sc.gammainc, (POS, POS[::-1]), (0, 1)),
    ("gammaincc", fs.gammaincc, sc.gammaincc, (POS, POS[::-1]), (0, 1)),
    ("betainc", fs.betainc, sc.betainc, (POS, POS[::-1], UNIT), (2,)),
    ("betaln", fs.betaln, sc.betaln, (POS, POS[::-1]), (0, 1)),
    ("i0e", fs.i0e, sc.i0e, (REAL,), (0,)),
    ("i1e", fs.i1e, sc.i1e, (REAL,), (0,)),
    ("ndtri", fs.ndtri, sc.ndtri, (UNIT,), (0,)),
    ("log_ndtr", fs.log_ndtr, sc.log_ndtr, (REAL,), (0,)),
    ("xlogy", fs.xlogy, sc.xlogy, (REAL, POS), (0, 1)),
    ("xlog1py", fs.xlog1py, sc.xlog1py, (REAL, UNIT), (0, 1)),
    ("exp1", fs.exp1, sc.exp1, (POS,), (0,)),
    ("expi", fs.expi, sc.expi, (REAL,), (0,)),
    ("expn", lambda x: fs.expn(dev(np.array([0, 1, 2, 3, 5])), x),
     lambda x: sc.expn(np.array([0, 1, 2, 3, 5]), x), (POS,), (0,)),
    ("spence", fs.spence, sc.spence, (POS,), (0,)),
    ("si", lambda x: fs.sici(x)[0], lambda x: sc.sici(x)[0], (REAL,), (0,)),
    ("ci", lambda x: fs.sici(x)[1], lambda x: sc.sici(x)[1], (POS,), (0,)),
    ("fresnel_s", lambda x: fs.fresnel(x)[0], lambda x: sc.fresnel(x)[0], (REAL,), (0,)),
    ("fresnel_c", lambda x: fs.fresnel(x)[1], lambda x: sc.fresnel(x)[1], (REAL,), (0,)),
    ("dawsn", fs.dawsn, sc.dawsn, (REAL,), (0,)),
    ("owens_t", fs.owens_t, sc.owens_t, (REAL, REAL[::-1]), (0, 1)),
    ("hyp1f1", fs.hyp1f1, sc.hyp1f1, tuple(v[:5] for v in HYP1F1), (0, 1, 2)),
    ("hyp2f1", fs.hyp2f1, sc.hyp2f1, (POS, UNIT, POS[::-1] + 1.0, SMALL), (0, 1, 2, 3)),
    ("bessel_jv", lambda v, z: SP.jv_p.bind(v, z), sc.jv, (np.array([0.0, 0.5, 1.0, 2.5, 4.0]), POS * 2), (1,)),
]


def check_grads():
    """Gradients on device operands (float64) against central differences of scipy."""
    with config_set("enable_x64", True):
        for label, f, ref, args, wrt in GRAD_CASES:
            args = [np.asarray(a, np.float64) for a in args]
            grads = fg.grad(lambda *xs: fnp.sum(f(*xs)), argnums=wrt)(*[dev(a) for a in args])
            for i, g in zip(wrt, grads):
                np.testing.assert_allclose(host(g), _fd(ref, args, i), rtol=2e-6, atol=1e-9,
                                           err_msg=f"{label} d/d operand {i}")


def check_complex_functions():
    """wofz and complex loggamma (values, and the holomorphic derivative through jvp) against scipy."""
    with config_set("enable_x64", True):
        z = REAL + 1j * np.array([0.5, -0.3, 1.2, 0.8, 2.0])
        for label, f, ref, rtol in (("wofz", fs.wofz, sc.wofz, 1e-13), ("loggamma", fs.loggamma, sc.loggamma, 1e-12)):
            y, t = fg.jvp(f, (dev(z),), (dev(np.ones_like(z)),))
            np.testing.assert_allclose(host(y), ref(z), rtol=rtol, err_msg=label)
            np.testing.assert_allclose(host(t), _fd(ref, [z], 0), rtol=1e-6, err_msg=label)
        got = host(fs.wofz(dev(z.astype(np.complex64))))
        assert got.dtype == np.complex64
        np.testing.assert_allclose(got, sc.wofz(z.astype(np.complex64).astype(np.complex128)), rtol=1e-6)


def check_complex_parts():
    """complex, real, imag, conj, their gradients, and the exact parts of complex(x, inf)."""
    x = np.array([1.5, -2.0, 0.0, 3.0], np.float32)
    y = np.array([0.5, np.inf, -1.0, np.nan], np.float32)
    z = host(lax.complex(dev(x), dev(y)))
    assert z.dtype == np.complex64
    np.testing.assert_array_equal(z.real, x)
    np.testing.assert_array_equal(z.imag, y)
    zc = (x + 1j * np.array([0.5, 2.0, -1.0, 4.0])).astype(np.complex64)
    np.testing.assert_array_equal(host(lax.real(dev(zc))), zc.real)
    np.testing.assert_array_equal(host(lax.imag(dev(zc))), zc.imag)
    np.testing.assert_array_equal(host(lax.conj(dev(zc))), np.conj(zc))
    broadcast = host(lax.complex(dev(x), 2.0))
    np.testing.assert_array_equal(broadcast, x + 2j)
    a, b = x, np.array([0.5, 2.0, -1.0, 4.0], np.float32)

    def power(u, v):   # |u + iv|^2 through conj, real; plus 3 imag
        w = lax.complex(u, v)
        return fnp.sum(lax.real(w * lax.conj(w)) + 3.0 * lax.imag(w))
    gu, gv = fg.grad(power, argnums=(0, 1))(dev(a), dev(b))
    np.testing.assert_allclose(host(gu), 2 * a, rtol=1e-6)
    np.testing.assert_allclose(host(gv), 2 * b + 3.0, rtol=1e-6)
    with pytest.raises(TypeError, match="real: expects a complex operand"):
        lax.real(dev(x))
    with pytest.raises(TypeError, match="conj: expects a complex operand"):
        lax.conj(dev(x))


def _threefry_reference(k0, k1, x0, x1):
    """Threefry-2x32 (20 rounds) on Python ints, one counter pair (Random123's definition)."""
    mask = 0xFFFFFFFF
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    rot = ((13, 15, 26, 6), (17, 29, 16, 24))
    x0, x1 = (x0 + ks[0]) & mask, (x1 + ks[1]) & mask
    for s in range(1, 6):
        for r in rot[(s - 1) % 2]:
            x0 = (x0 + x1) & mask
            x1 = (((x1 << r) | (x1 >> (32 - r))) & mask) ^ x0
        x0 = (x0 + ks[s % 3]) & mask
        x1 = (x1 + ks[(s + 1) % 3] + s) & mask
    return x0, x1


def check_threefry():
    """Random123's known answers, and a broadcast batch against a Python-int reference, bit for bit."""
    u32 = np.uint32
    known = [((0, 0, 0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF,) * 4, (0x1CB996FC, 0xBB002BE7)),
             ((0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for words, want in known:
        y0, y1 = lax.threefry2x32(*[dev(np.array([w], u32)) for w in words])
        assert (int(host(y0)[0]), int(host(y1)[0])) == want
    key0, key1 = np.array(0x2A, u32), np.array([7, 0xDEADBEEF], u32)[:, None]
    x0 = R.integers(0, 2 ** 32, (2, 5), dtype=np.uint64).astype(u32)
    x1 = np.arange(5, dtype=u32)
    y0, y1 = lax.threefry2x32(dev(key0), dev(key1), dev(x0), dev(x1))
    a, b = host(y0), host(y1)
    assert a.dtype == np.uint32 and a.shape == (2, 5)
    for i in range(2):
        for j in range(5):
            assert (int(a[i, j]), int(b[i, j])) == _threefry_reference(0x2A, int(key1[i, 0]), int(x0[i, j]),
                                                                       int(x1[j]))
    y0, _ = lax.threefry2x32(*[dev(np.zeros(0, u32))] * 4)
    assert host(y0).shape == (0,)
    with pytest.raises(TypeError, match="unsigned 32-bit integers"):
        lax.threefry2x32(dev(np.zeros(2, np.float32)), dev(key0), dev(x1[:2]), dev(x1[:2]))


def _gamma_grad_reference(a, x):
    """d x / d a at a fixed CDF value: -(dP/da) / pdf, dP/da by central differences of scipy (float64)."""
    dp = _fd(sc.gammainc, [a, x], 0, h=1e-5)
    return -dp / np.exp((a - 1) * np.log(x) - x - sc.gammaln(a))


def check_random_gamma_grad():
    """random_gamma_grad and its partials (through grad) on the device against scipy-based references."""
    a = np.array([0.7, 1.5, 3.0, 6.0])
    x = np.array([0.4, 2.5, 1.8, 7.5])
    with config_set("enable_x64", True):
        g = lax.random_gamma_grad(dev(a), dev(x))
        np.testing.assert_allclose(host(g), _gamma_grad_reference(a, x), rtol=1e-6)
        da, dx = fg.grad(lambda p, q: fnp.sum(lax.random_gamma_grad(p, q)), argnums=(0, 1))(dev(a), dev(x))
        np.testing.assert_allclose(host(da), _fd(_gamma_grad_reference, [a, x], 0, h=1e-4), rtol=1e-4)
        np.testing.assert_allclose(host(dx), _fd(_gamma_grad_reference, [a, x], 1, h=1e-4), rtol=1e-4)
    g32 = lax.random_gamma_grad(dev(a, np.float32), dev(x, np.float32))
    assert host(g32).dtype == np.float32


def check_complex_refused():
    """Functions defined on real numbers refuse complex device operands, as on the host."""
    z = np.array([1.0 + 1.0j], np.complex64)
    with pytest.raises(TypeError, match="digamma"):
        SP.digamma_p.bind(dev(z))


def check_float32():
    check_values(np.float32, 2e-6)
    # erf on float16: computed and returned in float32, as scipy (and so the host implementation) does
    h = np.array([0.5, -1.0], np.float16)
    assert host(lax.erf(dev(h))).dtype == np.float32
    assert host(fs.gammaln(dev(h))).dtype == np.float16


def check_float64():
    with config_set("enable_x64", True):
        check_values(np.float64, 0.0)


CHECKS = [check_float32, check_float64, check_edges, check_grads, check_complex_functions, check_complex_parts,
          check_threefry, check_random_gamma_grad, check_complex_refused]


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_on_the_cupy_standin(check):
    with gpu_standin(use_triton=False):
        check()


def test_the_value_check_can_fail():
    # The value check can fail: a reference that is off by one ulp-sized relative error is caught.
    with gpu_standin(use_triton=False):
        with pytest.raises(AssertionError):
            np.testing.assert_allclose(host(fs.gammaln(dev(POS))), sc.gammaln(POS) * (1 + 1e-5), rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_on_a_real_gpu():
    for check in CHECKS:
        check()


def test_reference_helpers():
    # The test's own references: the Python threefry against Random123's known answer, and _fd on a known
    # derivative.
    assert _threefry_reference(0, 0, 0, 0) == (0x6B200159, 0x99BA4EFE)
    np.testing.assert_allclose(_fd(np.sin, [np.array([0.3])], 0), [math.cos(0.3)], rtol=1e-9)
