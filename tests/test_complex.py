"""Complex numbers through funcgrad: dtypes, JAX's autodiff conventions (the autodiff cookbook's
"Complex numbers and differentiation"), grad/jvp/vjp/jacobians/vmap/jit on complex inputs checked
against finite differences in the real and the imaginary direction, and funcgrad.numpy.fft's
keywords and errors. (The op table covers the functions themselves: tests/op_rows_complex.py,
tests/op_rows_fft.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.testing import check_grads
from conftest import config_set

EPS = 1e-6


def _partials(f, z):
    """(df/dx, df/dy) of a real-valued f at complex scalar z = x + iy, central differences in float64."""
    f_ = lambda v: float(np.asarray(f(fnp.asarray(np.complex128(v)))))  # noqa: E731
    dx = (f_(z + EPS) - f_(z - EPS)) / (2 * EPS)
    dy = (f_(z + 1j * EPS) - f_(z - 1j * EPS)) / (2 * EPS)
    return dx, dy


def _cval(f, z):
    return complex(np.asarray(f(fnp.asarray(np.complex128(z)))))


# ---------------------------------------------------------------------------- dtypes


def test_complex_arrays_and_promotion_x32(x32):
    assert fnp.array([1j, 2]).dtype == np.complex64
    assert fnp.asarray(np.array([1j], np.complex128)).dtype == np.complex64    # narrowed, as JAX
    assert fnp.asarray(1j).dtype == np.complex64
    assert (fnp.ones(2) * 1j).dtype == np.complex64
    assert (fnp.arange(3) + 1j).dtype == np.complex64
    assert (fnp.ones(2) + fnp.array([1j, 2j])).dtype == np.complex64
    assert fnp.abs(fnp.array([3 + 4j])).dtype == np.float32
    assert fnp.real(fnp.array([3 + 4j])).dtype == np.float32
    np.testing.assert_allclose(np.asarray(fnp.abs(fnp.array([3 + 4j]))), [5.0])
    assert repr(fnp.array([1j])).startswith("Array([0.+1.j]")


def test_complex_arrays_and_promotion_x64(x64):
    assert fnp.array([1j]).dtype == np.complex128
    assert fnp.asarray(np.ones(2, np.complex64)).dtype == np.complex64
    # a Python complex is weakly typed: it takes the precision of the array beside it (JAX's rule)
    assert (fnp.ones(2, np.float32) * 1j).dtype == np.complex64
    assert (fnp.ones(2, np.complex64) + 2j).dtype == np.complex64
    assert (fnp.ones(2) * 1j).dtype == np.complex128
    assert fnp.fft.fft(fnp.ones(4, np.float32)).dtype == np.complex64
    assert fnp.fft.fft(fnp.ones(4)).dtype == np.complex128


def test_array_methods_and_properties():
    z = fnp.array([1 + 2j, 3 - 1j])
    np.testing.assert_allclose(np.asarray(z.real), [1, 3])
    np.testing.assert_allclose(np.asarray(z.imag), [2, -1])
    np.testing.assert_allclose(np.asarray(z.conj()), [1 - 2j, 3 + 1j])
    np.testing.assert_allclose(np.asarray(z.conjugate()), [1 - 2j, 3 + 1j])
    x = fnp.array([1.0, 2.0])
    assert x.real is x and np.all(np.asarray(x.imag) == 0)


def test_ops_without_an_order_raise():
    z = fnp.array([1 + 2j])
    for f in (fnp.floor, fnp.ceil):
        with pytest.raises(TypeError):
            f(z)
    with pytest.raises(TypeError):
        fnp.arctan2(z, z)
    # as numpy and JAX: comparisons and maximum order complex numbers lexicographically
    assert bool(fnp.less(fnp.array(1 + 5j), fnp.array(2 + 0j)))
    np.testing.assert_allclose(np.asarray(fnp.maximum(fnp.array([1 + 5j]), fnp.array([1 + 6j]))), [1 + 6j])


def test_lax_complex_parts():
    x, y = fnp.array([1.0, 2.0]), fnp.array([3.0, -4.0])
    z = lax.complex(x, y)
    np.testing.assert_allclose(np.asarray(z), [1 + 3j, 2 - 4j])
    np.testing.assert_allclose(np.asarray(lax.real(z)), [1, 2])
    np.testing.assert_allclose(np.asarray(lax.imag(z)), [3, -4])
    np.testing.assert_allclose(np.asarray(lax.conj(z)), [1 - 3j, 2 + 4j])
    with pytest.raises(TypeError, match="complex"):
        lax.real(x)
    with pytest.raises(TypeError, match="float"):
        lax.complex(z, z)


# ---------------------------------------------------------------------------- the cookbook's conventions


def test_cookbook_grad_of_squared_norm_is_twice_the_conjugate(x32):
    # JAX's cookbook: grad(f)(3+4j) for f(z) = |z|^2 is 6-8j (the conjugate of df/dx + i df/dy)
    g = fg.grad(lambda z: fnp.abs(z) ** 2)(fnp.array(3 + 4j))
    assert g.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(g), 6 - 8j, rtol=1e-6)

    def f(z):
        x, y = fnp.real(z), fnp.imag(z)
        return x ** 2 + y ** 2
    np.testing.assert_allclose(np.asarray(fg.grad(f)(fnp.array(3 + 4j))), 6 - 8j, rtol=1e-6)


REAL_VALUED = {
    "abs": lambda z: fnp.abs(z),
    "angle": lambda z: fnp.angle(z),
    "real(exp)": lambda z: fnp.real(fnp.exp(z)),
    "imag(sin) * abs": lambda z: fnp.imag(fnp.sin(z)) * fnp.abs(z),
    "abs(conj(z) * z**2)": lambda z: fnp.abs(fnp.conj(z) * z ** 2),
    "real(log) + imag(sqrt)": lambda z: fnp.real(fnp.log(z)) + fnp.imag(fnp.sqrt(z)),
    "angle(deg) of 1/z": lambda z: fnp.angle(1.0 / z, deg=True),
}


@pytest.mark.parametrize("name", list(REAL_VALUED))
@pytest.mark.parametrize("z", [0.7 + 1.3j, -1.1 - 0.4j])
def test_grad_of_real_valued_function_is_conjugate_of_partials(name, z, x64):
    f = REAL_VALUED[name]
    dx, dy = _partials(f, z)
    g = complex(np.asarray(fg.grad(f)(fnp.asarray(np.complex128(z)))))
    np.testing.assert_allclose(g, np.conj(dx + 1j * dy), rtol=1e-6, atol=1e-6)


HOLOMORPHIC = {
    "sin": (fnp.sin, np.cos),
    "exp * z": (lambda z: fnp.exp(z) * z, lambda z: np.exp(z) * (1 + z)),
    "log": (fnp.log, lambda z: 1 / z),
    "z**3 / (1 + z)": (lambda z: z ** 3 / (1 + z), lambda z: (3 * z ** 2 * (1 + z) - z ** 3) / (1 + z) ** 2),
    "sqrt(tanh)": (lambda z: fnp.sqrt(fnp.tanh(z)), lambda z: (1 - np.tanh(z) ** 2) / (2 * np.sqrt(np.tanh(z)))),
}


@pytest.mark.parametrize("name", list(HOLOMORPHIC))
def test_holomorphic_grad_is_the_complex_derivative(name, x64):
    f, df = HOLOMORPHIC[name]
    z = 0.6 + 0.8j
    g = complex(np.asarray(fg.grad(f, holomorphic=True)(fnp.asarray(z))))
    np.testing.assert_allclose(g, df(z), rtol=1e-10)
    # the derivative of a holomorphic function is the same along the real and the imaginary direction
    along_x = (_cval(f, z + EPS) - _cval(f, z - EPS)) / (2 * EPS)
    along_y = (_cval(f, z + 1j * EPS) - _cval(f, z - 1j * EPS)) / (2j * EPS)
    np.testing.assert_allclose(g, along_x, rtol=1e-6)
    np.testing.assert_allclose(g, along_y, rtol=1e-6)


def test_grad_dtype_and_holomorphic_errors(x32):
    z = fnp.array(3 + 4j)
    with pytest.raises(TypeError, match="holomorphic=True"):
        fg.grad(lambda a: a * a)(z)                         # complex output, not holomorphic
    with pytest.raises(TypeError, match="requires inputs with complex dtype"):
        fg.grad(lambda a: a * a, holomorphic=True)(fnp.array(3.0))
    with pytest.raises(TypeError, match="requires outputs with complex dtype"):
        fg.grad(lambda a: fnp.abs(a), holomorphic=True)(z)
    with pytest.raises(TypeError, match="float"):
        fg.grad(lambda a: a * 1.0)(fnp.array(3))
    # value_and_grad takes holomorphic= too
    v, g = fg.value_and_grad(lambda a: a * a, holomorphic=True)(z)
    np.testing.assert_allclose(np.asarray(v), (3 + 4j) ** 2, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g), 6 + 8j, rtol=1e-6)


def test_real_to_complex_and_back_gradients(x32):
    # a real input through complex intermediates: a real gradient
    g = fg.grad(lambda x: fnp.abs(x * (1 + 2j)))(fnp.array(2.0))
    assert g.dtype == np.float32
    np.testing.assert_allclose(np.asarray(g), np.sqrt(5.0), rtol=1e-6)
    g = fg.grad(lambda x: fnp.real(x * (1 + 2j)) + fnp.imag(x * (3 - 1j)))(fnp.array(2.0))
    np.testing.assert_allclose(np.asarray(g), 0.0, atol=1e-6)
    gx, gy = fg.grad(lambda x, y: fnp.abs(lax.complex(x, y)), argnums=(0, 1))(fnp.array(3.0), fnp.array(4.0))
    np.testing.assert_allclose([float(gx), float(gy)], [0.6, 0.8], rtol=1e-6)


def test_part_and_abs_rules_as_jax(x32):
    z = fnp.array(3 + 4j)
    np.testing.assert_allclose(np.asarray(fg.grad(fnp.real)(z)), 1 + 0j)
    np.testing.assert_allclose(np.asarray(fg.grad(fnp.imag)(z)), -1j)     # imag's transpose: complex(0, -ct)
    np.testing.assert_allclose(np.asarray(fg.vjp(fnp.conj, z)[1](fnp.array(1 + 2j))[0]), 1 - 2j)
    np.testing.assert_allclose(np.asarray(fg.vjp(fnp.abs, z)[1](fnp.array(1.0))[0]), 0.6 - 0.8j, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.grad(fnp.abs)(fnp.array(0j))), 0)      # 0 at 0, as JAX
    _, t = fg.jvp(fnp.abs, (fnp.array(0j),), (fnp.array(1 + 1j),))
    assert float(t) == 0.0


# ---------------------------------------------------------------------------- jvp / vjp against differences


def _f_complex_out(z, w):
    return fnp.sin(z) * fnp.conj(w) + fnp.abs(z) * 1j + fnp.exp(w) / (z + 3.0)


def test_jvp_matches_differences_in_both_directions(x64):
    rng = np.random.default_rng(0)
    z = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    for direction in (1.0, 1j, 0.3 - 0.7j):
        tz, tw = direction * np.ones(3, complex), direction * np.arange(1.0, 4.0, dtype=complex)
        _, t = fg.jvp(_f_complex_out, (fnp.asarray(z), fnp.asarray(w)), (fnp.asarray(tz), fnp.asarray(tw)))
        fd = (np.asarray(_f_complex_out(fnp.asarray(z + EPS * tz), fnp.asarray(w + EPS * tw)))
              - np.asarray(_f_complex_out(fnp.asarray(z - EPS * tz), fnp.asarray(w - EPS * tw)))) / (2 * EPS)
        np.testing.assert_allclose(np.asarray(t), fd, rtol=1e-6, atol=1e-8)


def test_vjp_is_the_transpose_not_the_adjoint(x64):
    c = 0.5 - 2j
    _, pullback = fg.vjp(lambda z: z * c, fnp.asarray(np.array([1 + 1j])))
    np.testing.assert_allclose(np.asarray(pullback(fnp.asarray(np.array([1.0 + 0j])))[0]), [c])   # not conj(c)
    check_grads(_f_complex_out, (fnp.asarray(np.array([0.3 + 1j, -1 + 0.2j])),
                                 fnp.asarray(np.array([0.5 - 0.5j, 2j]))), order=2, modes=("fwd", "rev"))


def test_check_grads_catches_an_adjoint_rule(x64):
    # A vjp written as the adjoint (conjugated) instead of the transpose fails the check: the check can fail.
    @fg.custom_vjp
    def scale(z):
        return z * (1 + 2j)

    scale.defvjp(lambda z: (scale(z), None), lambda res, ct: (fnp.conj(ct * (1 + 2j)),))
    with pytest.raises(AssertionError):
        check_grads(scale, (fnp.asarray(np.array([0.3 + 1j])),), order=1, modes=("rev",))
    scale.defvjp(lambda z: (scale(z), None), lambda res, ct: (ct * (1 + 2j),))
    check_grads(scale, (fnp.asarray(np.array([0.3 + 1j])),), order=1, modes=("rev",))


# ---------------------------------------------------------------------------- jacobians, vmap, jit, control flow


def test_jacobians_holomorphic(x64):
    z = fnp.asarray(np.array([1 + 1j, 2j, -0.5 + 0.1j]))
    expected = np.diag(2 * np.asarray(z))
    np.testing.assert_allclose(np.asarray(fg.jacfwd(lambda a: a * a, holomorphic=True)(z)), expected)
    np.testing.assert_allclose(np.asarray(fg.jacrev(lambda a: a * a, holomorphic=True)(z)), expected)
    h = fg.hessian(lambda a: fnp.sum(a ** 3), holomorphic=True)(z)
    np.testing.assert_allclose(np.asarray(h), np.diag(6 * np.asarray(z)), rtol=1e-12)
    with pytest.raises(TypeError, match="holomorphic"):
        fg.jacfwd(fnp.abs)(z)                     # complex input without holomorphic=True, as JAX
    with pytest.raises(TypeError, match="holomorphic"):
        fg.jacrev(lambda x: x * 1j)(fnp.ones(2))   # complex output without holomorphic=True
    # jacrev of a real-valued function of complex inputs: rows are the grads
    j = fg.jacrev(fnp.abs)(z)
    np.testing.assert_allclose(np.asarray(j), np.diag(np.conj(np.asarray(z)) / np.abs(np.asarray(z))))
    # jacfwd of a complex-valued function of real inputs is fine
    np.testing.assert_allclose(np.asarray(fg.jacfwd(lambda x: x * 1j)(fnp.ones(2))), np.eye(2) * 1j)


def test_vmap_and_jit_of_grad_on_complex(x32):
    z = fnp.array([1 + 2j, 3 - 1j, -0.5j])
    per_example = fg.vmap(fg.grad(lambda a: fnp.abs(a) ** 2))(z)
    np.testing.assert_allclose(np.asarray(per_example), 2 * np.conj(np.asarray(z)), rtol=1e-6)
    loss = lambda a: fnp.sum(fnp.abs(fnp.exp(a) * a))  # noqa: E731
    np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(loss))(z)), np.asarray(fg.grad(loss)(z)), rtol=1e-6)
    hol = fg.jit(fg.grad(lambda a: fnp.sum(fnp.sin(a)), holomorphic=True))
    np.testing.assert_allclose(np.asarray(hol(z)), np.cos(np.asarray(z)), rtol=1e-5)


@pytest.mark.parametrize("fusion", [True, False])
def test_jit_on_complex_matches_eager_large(fusion, x32):
    # large enough for the numba-backed paths (fused kernels, select, scatter, reductions)
    n = 40_000
    x = fnp.asarray(np.linspace(-2, 2, n, dtype=np.float32))
    z = lax.complex(x, fnp.flip(x, 0))

    def f(z, x):
        y = fnp.where(x > 0, fnp.exp(z) * z + 1.0, fnp.conj(z) * 2j)
        y = y.at[fnp.arange(0, n, 7)].add(1j)
        return fnp.sum(y), fnp.abs(y) + fnp.real(y) * x, fnp.mean(y * y)

    with config_set("jit_fusion", fusion):
        out = fg.jit(f)(z, x)
    eager = f(z, x)
    zn, xn = np.asarray(z).astype(np.complex128), np.asarray(x).astype(np.float64)
    yn = np.where(xn > 0, np.exp(zn) * zn + 1.0, np.conj(zn) * 2j)
    yn[np.arange(0, n, 7)] += 1j
    for a, e in zip(out, eager):
        assert a.dtype == e.dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(np.asarray(eager[0]), yn.sum(), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(eager[1]), np.abs(yn) + yn.real * xn, rtol=1e-5, atol=1e-5)


def test_scan_and_cond_with_complex_carry(x64):
    def f(z):
        def body(c, _):
            return c * z + 1j, fnp.abs(c)
        c, ys = lax.scan(body, fnp.asarray(np.complex128(1.0)), None, length=4)
        out = lax.cond(fnp.real(c) > 0, lambda v: fnp.abs(v), lambda v: fnp.real(v * v), c)
        return out + fnp.sum(ys)

    z = 0.3 + 0.4j
    dx, dy = _partials(f, z)
    g = complex(np.asarray(fg.grad(f)(fnp.asarray(np.complex128(z)))))
    np.testing.assert_allclose(g, np.conj(dx + 1j * dy), rtol=1e-6)
    np.testing.assert_allclose(complex(np.asarray(fg.jit(fg.grad(f))(fnp.asarray(np.complex128(z))))), g,
                               rtol=1e-10)


# ---------------------------------------------------------------------------- funcgrad.numpy.fft


def test_fft_keywords_and_dtypes(x32):
    x = np.arange(6.0).reshape(2, 3)
    assert fnp.fft.fft(fnp.arange(4)).dtype == np.complex64               # integers: complex64
    assert fnp.fft.irfft(fnp.ones(3)).dtype == np.float32
    assert fnp.fft.fftfreq(4, dtype=np.float32).dtype == np.float32
    with config_set("enable_x64", True):
        assert fnp.fft.fftfreq(4).dtype == np.float64
    np.testing.assert_allclose(np.asarray(fnp.fft.fftn(x, s=(2, 2))), np.fft.fftn(x, s=(2, 2), axes=(0, 1)), atol=1e-5)
    np.testing.assert_allclose(np.asarray(fnp.fft.fft(x, n=5, axis=0)), np.fft.fft(x, n=5, axis=0), atol=1e-5)
    np.testing.assert_allclose(np.asarray(lax.fft(fnp.asarray(x).astype(np.complex64), "fft", (2, 3))),
                               np.fft.fft2(x), atol=1e-5)


def test_fft_errors():
    x = fnp.ones((3, 4))
    with pytest.raises(ValueError, match="norm"):
        fnp.fft.fft(x, norm="bad")
    with pytest.raises(ValueError, match="at least 1"):
        fnp.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="repeated"):
        fnp.fft.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError):
        fnp.fft.fft(fnp.ones(()))
    with pytest.raises(ValueError, match="out of range"):
        fnp.fft.fft(x, axis=2)
    with pytest.raises(TypeError, match="real input"):
        fnp.fft.rfft(fnp.array([1j, 2]))
    with pytest.raises(ValueError, match="same length"):
        fnp.fft.fftn(x, s=(2,), axes=(0, 1))
    with pytest.raises(ValueError, match="at least 1"):
        fnp.fft.irfft(fnp.ones(1))                  # 2 * (1 - 1) = 0 output points
    with pytest.raises(NotImplementedError, match="device"):
        fnp.fft.fftfreq(4, device="gpu")
    with pytest.raises(ValueError, match="fft_type"):
        lax.fft(x.astype(np.complex64), "dct", (4,))
    with pytest.raises(ValueError, match="trailing axes"):
        lax.fft(x.astype(np.complex64), "irfft", (4,))     # expects 4 // 2 + 1 = 3 entries
    with pytest.raises(TypeError, match="complex operand"):
        lax.fft(x, "irfft", (6,))


def test_fft_gradients_of_real_losses(x64):
    # A real loss through rfft/irfft: the gradient equals central differences (the Hermitian weighting).
    rng = np.random.default_rng(1)
    x = rng.standard_normal(7)
    z = rng.standard_normal(4) + 1j * rng.standard_normal(4)

    def loss_r(v):
        return fnp.sum(fnp.abs(fnp.fft.rfft(v, norm="ortho")) ** 3)

    def loss_i(v):
        return fnp.sum(fnp.fft.irfft(v, n=6) ** 2 * fnp.arange(6.0))

    g = np.asarray(fg.grad(loss_r)(fnp.asarray(x)))
    fd = np.array([(float(loss_r(fnp.asarray(x + EPS * e))) - float(loss_r(fnp.asarray(x - EPS * e)))) / (2 * EPS)
                   for e in np.eye(7)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    g = np.asarray(fg.grad(loss_i)(fnp.asarray(z)))
    for k in range(4):
        dx, dy = _partials(lambda v, k=k: loss_i(fnp.asarray(z) + (v - z[k]) * fnp.asarray(np.eye(4)[k])), z[k])
        np.testing.assert_allclose(g[k], np.conj(dx + 1j * dy), rtol=1e-6, atol=1e-8)


def test_fft_under_vmap_and_jit(x32):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 2, 5)).astype(np.float32)
    f = lambda v: fnp.fft.irfft2(fnp.fft.rfft2(v) * 2.0, s=v.shape)  # noqa: E731
    out = fg.jit(fg.vmap(f, in_axes=1))(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(out), np.moveaxis(2 * x, 1, 0), rtol=1e-5, atol=1e-5)
    g = fg.jit(fg.grad(lambda v: fnp.sum(fnp.abs(fnp.fft.fftshift(fnp.fft.fft(v))))))(fnp.asarray(x[0]))
    assert g.shape == (2, 5) and g.dtype == np.float32


def test_python_scalar_tangents_and_debug_nans_on_complex(x32):
    _, t = fg.jvp(lambda z: z * z, (fnp.array(1 + 1j),), (1.0,))       # a Python number takes the primal's dtype
    assert t.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(t), 2 + 2j)
    (ct,) = fg.vjp(lambda z: z * z, fnp.array(1 + 1j))[1](1j)
    np.testing.assert_allclose(np.asarray(ct), 1j * (2 + 2j))
    with config_set("debug_nans", True):
        with pytest.raises(FloatingPointError):
            with np.errstate(all="ignore"):
                fnp.log(fnp.array([0j])) * 0


def test_creation_and_numpy_dispatch_on_complex(x32):
    np.testing.assert_allclose(np.asarray(fnp.linspace(0, 1j, 3)), [0, 0.5j, 1j])
    assert fnp.zeros(2, dtype=fnp.complex64).dtype == np.complex64
    assert fnp.full(2, 1j).dtype == np.complex64
    z = fnp.array([1 + 2j, 3 - 1j])
    assert complex(z[0]) == 1 + 2j
    np.testing.assert_allclose(np.asarray(np.real(z)), [1, 3])             # numpy's functions dispatch
    np.testing.assert_allclose(np.asarray(np.angle(z)), np.angle(np.asarray(z)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(np.conj(z)), [1 - 2j, 3 + 1j])


def test_numpy_fft_functions_dispatch_to_funcgrad(x32):
    x = fnp.array([1.0, 2.0, 3.0, 4.0])
    out = np.fft.fft(x)
    assert isinstance(out, fg.Array) and out.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(out), np.fft.fft(np.asarray(x)), atol=1e-5)
    jitted = fg.jit(lambda v: np.fft.rfft(v, norm="ortho"))(x)      # a tracer: only a funcgrad route works
    np.testing.assert_allclose(np.asarray(jitted), np.fft.rfft(np.asarray(x), norm="ortho"), atol=1e-5)


def test_real_input_meeting_complex_in_lax_gets_a_real_gradient(x32):
    # lax ops take mixed dtypes; a real input's cotangent is the real part of what flows back
    z = fnp.array(1 + 2j)
    g = fg.grad(lambda x: fnp.real(lax.mul(fnp.sin(x), z)))(fnp.array(2.0))
    assert g.dtype == np.float32
    np.testing.assert_allclose(float(g), np.cos(2.0), rtol=1e-6)
    h = fg.hessian(lambda x: fnp.real(lax.mul(fnp.sin(x), z)))(fnp.array(2.0))
    np.testing.assert_allclose(float(h), -np.sin(2.0), rtol=1e-6)


def test_complex_result_dtypes_follow_input_precision(x64):
    # JAX's to_complex_dtype: up to 32-bit inputs -> complex64, 64-bit -> complex128 (with x64)
    for dtype, want in ((np.int64, np.complex128), (np.int32, np.complex64), (np.bool_, np.complex64),
                        (np.uint8, np.complex64), (np.float16, np.complex64), (np.float64, np.complex128)):
        a = fnp.array([1, 0], dtype=dtype)
        assert fnp.sort_complex(a).dtype == want, dtype
        assert fnp.fft.fft(a).dtype == want, dtype
    assert fnp.angle(fnp.array([1, -1])).dtype == np.float64
    assert fnp.angle(fnp.array([1, -1], dtype=np.float16)).dtype == np.float16


def test_hessian_takes_has_aux_as_jax():
    h, aux = fg.hessian(lambda x: (fnp.sum(x ** 3), x * 2), has_aux=True)(fnp.ones(2))
    np.testing.assert_allclose(np.asarray(h), 6 * np.eye(2))
    np.testing.assert_allclose(np.asarray(aux), [2, 2])


def test_astype_from_complex():
    z = fnp.array([1j, 0, 2 - 3j])
    np.testing.assert_array_equal(np.asarray(z.astype(bool)), [True, False, True])   # any nonzero part
    np.testing.assert_allclose(np.asarray(z.astype(np.float32)), [0, 0, 2])         # the real part, as JAX
    g = fg.grad(lambda v: fnp.sum(v.astype(np.float32) * 3.0))(z)                   # transpose: complex(ct, 0)
    np.testing.assert_allclose(np.asarray(g), [3, 3, 3])
    assert g.dtype == np.complex64
