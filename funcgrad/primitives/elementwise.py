"""Elementwise primitives (numpy broadcasting), each declared with all its rules.

A unary primitive is declared with its derivative ``d(x, y)`` written with
primitives (``y`` is the output); both the jvp rule (``t * d``) and the vjp
rule (``ct * d``) come from it.  A binary primitive gives both partial
derivatives.  Gradient conventions follow JAX:

* ``maximum``/``minimum`` at ties give each side half the cotangent;
* ``abs`` has derivative ``sign(x)``, except 1 at 0 (and -0), as JAX's ``grad(abs)(0.) == 1.``;
* ``sqrt``/``log`` at 0 give inf; ``pow`` w.r.t. the exponent at base 0 is 0;
* ``floor``, ``ceil``, ``round``, ``sign`` have zero gradient;
* ``where(c, x, y)`` sends the cotangent to the chosen side only, so a NaN
  or inf derivative of the *other* side still shows up as ``0 * inf = NaN``
  (use the double-where pattern; see the README).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive, add_traits, bind, zeros_like
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.shape import (broadcast_tangent, moveaxis, reshape, shape_of, sum_to_like,  # noqa: F401
                                       unbroadcast)


_NO_PARAMS: dict = {}  # shared: bind never mutates params


# --------------------------------------------------------------------------
# Abstract evaluation and batching shared by every elementwise primitive
# --------------------------------------------------------------------------


def broadcast_shapes(name: str, *args: Any) -> tuple[int, ...]:
    shapes = [shape_of(a) for a in args]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(
            f"{name}: operands {', '.join(describe(a) for a in args)} cannot be broadcast together "
            "(numpy broadcasting: aligned from the right, each dimension must match or be 1)") from None


def _elementwise_aval(out_dtype: Callable[..., np.dtype]) -> Callable[..., ShapedArray]:
    def rule(*args: Any, _name: str = "") -> ShapedArray:
        dtype = out_dtype(*args)
        if dtype.kind in "iu":
            check_int_scalars(_name, args, dtype)
        return ShapedArray(broadcast_shapes(_name, *args), dtype)
    return rule


def check_int_scalars(name: str, args: Any, dtype: np.dtype) -> None:
    """Python ints are weakly typed: they take the array's integer dtype, so they must fit in it.

    numpy raises OverflowError eagerly; a compiled kernel would wrap around silently.
    """
    info = np.iinfo(dtype)
    for a in args:
        if type(a) is int and not info.min <= a <= info.max:
            arrays = ", ".join(describe(b) for b in args if type(b) is not int)
            raise OverflowError(f"{name}: the Python int {a} does not fit in {dtype} (range [{info.min}, "
                                f"{info.max}]), the dtype of the other operand ({arrays}). Use a float, convert "
                                "the array to a wider dtype, or enable 64-bit types with "
                                "fg.config.update('enable_x64', True)")


def _same_dtype(*args: Any) -> np.dtype:
    return _dtypes.result_type(*args)


def _no_bool(name: str, fix: str) -> Callable[..., np.dtype]:
    """A dtype rule for ops numpy refuses on bools (eagerly, numpy raises; compiled kernels would not)."""
    def rule(*args: Any) -> np.dtype:
        dtype = _dtypes.result_type(*args)
        if dtype.kind == "b":
            raise TypeError(f"{name}: not supported for the input types ({', '.join(describe(a) for a in args)}): "
                            f"numpy has no {name} for bool; {fix}, or convert with .astype(fnp.int32)")
        return dtype
    return rule


def _no_complex(name: str, base: Callable[..., np.dtype] | None = None) -> Callable[..., np.dtype]:
    """A dtype rule for ops that are not defined on complex numbers (as in JAX: no order, no rounding)."""
    def rule(*args: Any) -> np.dtype:
        if _dtypes.result_type(*args).kind == "c":
            raise TypeError(f"{name}: not defined for complex operands ({', '.join(describe(a) for a in args)}); "
                            "apply it to fnp.real(z) / fnp.imag(z) or fnp.abs(z) instead")
        return (base or _dtypes.result_type)(*args)
    return rule


def _bool_dtype(*args: Any) -> np.dtype:
    return np.dtype(bool)


def batch_elementwise(prim: Primitive) -> Callable:
    """vmap rule for any elementwise primitive: align mapped axes at the front."""
    def rule(values, dims, size, **params):
        rank = max(len(shape_of(v)) - (d is not None) for v, d in zip(values, dims))
        args = []
        for v, d in zip(values, dims):
            if d is None:
                args.append(v)
                continue
            v = moveaxis(v, d, 0)
            inner = shape_of(v)[1:]
            if len(inner) < rank:  # pad with 1s so the batch axis lines up under broadcasting
                v = reshape(v, (size,) + (1,) * (rank - len(inner)) + inner)
            args.append(v)
        return prim.bind(*args, **params), 0
    return rule


def _declare(name: str, impl: Callable, out_dtype: Callable[..., np.dtype]) -> Primitive:
    p = Primitive(name)
    p.impl = impl
    aval_rule = _elementwise_aval(out_dtype)
    p.abstract_eval = lambda *a, **kw: aval_rule(*a, _name=name)
    p.batch = batch_elementwise(p)
    add_traits(p, "elementwise")
    return p


# --------------------------------------------------------------------------
# Rule builders
# --------------------------------------------------------------------------


def unary(name: str, impl: Callable, deriv: Callable | None, out_dtype: Callable = _same_dtype) -> Primitive:
    """Declare ``y = f(x)`` with derivative ``deriv(x, y)`` (``None``: zero gradient)."""
    p = _declare(name, impl, out_dtype)
    if deriv is None:
        return p

    def jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        y = bind(p, (x,), _NO_PARAMS)
        return y, mul(t, deriv(x, y))

    def vjp(ct, primals, y, needs):
        return (bind(mul_p, (ct, deriv(primals[0], y)), _NO_PARAMS),)

    p.jvp, p.vjp = jvp, vjp
    return p


def binary(name: str, impl: Callable, d_x: Callable | None, d_y: Callable | None,
           out_dtype: Callable = _same_dtype) -> Primitive:
    """Declare ``z = f(x, y)`` with partials ``d_x(x, y, z)``, ``d_y(x, y, z)``."""
    p = _declare(name, impl, out_dtype)
    if d_x is None and d_y is None:
        return p

    def jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        z = p.bind(x, y)
        out = None
        if tx is not None:
            out = mul(tx, d_x(x, y, z))
        if ty is not None:
            term = mul(ty, d_y(x, y, z))
            out = term if out is None else add(out, term)
        return z, broadcast_tangent(out, shape_of(z))

    def vjp(ct, primals, z, needs):
        x, y = primals
        cx = sum_to_like(bind(mul_p, (ct, d_x(x, y, z)), _NO_PARAMS), x) if needs[0] else None
        cy = sum_to_like(bind(mul_p, (ct, d_y(x, y, z)), _NO_PARAMS), y) if needs[1] else None
        return cx, cy

    p.jvp, p.vjp = jvp, vjp
    return p


# --------------------------------------------------------------------------
# Arithmetic (hand-written rules: these are on every hot path)
# --------------------------------------------------------------------------

add_p = _declare("add", np.add, _same_dtype)
sub_p = _declare("sub", np.subtract, _no_bool("sub", "use fnp.logical_xor"))
mul_p = _declare("mul", np.multiply, _same_dtype)
div_p = _declare("div", np.true_divide, _same_dtype)
neg_p = _declare("neg", np.negative, _no_bool("neg", "use fnp.logical_not"))


def add(x: Any, y: Any) -> Any:
    """Elementwise ``x + y`` (same dtypes; scalars broadcast).

    >>> lax.add(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))
    Array([ 3., -1.], dtype=float32)
    """
    return bind(add_p, (x, y), _NO_PARAMS)


def sub(x: Any, y: Any) -> Any:
    """Elementwise ``x - y`` (same dtypes; scalars broadcast).

    >>> lax.sub(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))
    Array([-1., -5.], dtype=float32)
    """
    return bind(sub_p, (x, y), _NO_PARAMS)


def mul(x: Any, y: Any) -> Any:
    """Elementwise ``x * y`` (same dtypes; scalars broadcast).

    >>> lax.mul(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))
    Array([ 2., -6.], dtype=float32)
    """
    return bind(mul_p, (x, y), _NO_PARAMS)


def div(x: Any, y: Any) -> Any:
    """Elementwise ``x / y``; integers divide rounding towards zero (as C).

    >>> lax.div(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))
    Array([ 0.5, -1.5], dtype=float32)
    """
    return bind(div_p, (x, y), _NO_PARAMS)


def neg(x: Any) -> Any:
    """Elementwise ``-x``.

    >>> lax.neg(fnp.array([1.0, -3.0]))
    Array([-1.,  3.], dtype=float32)
    """
    return bind(neg_p, (x,), _NO_PARAMS)


def _linear_jvp(p: Primitive, combine: Callable) -> Callable:
    def jvp(primals, tangents):
        z = p.bind(*primals)
        return z, broadcast_tangent(combine(*tangents), shape_of(z))
    return jvp


def _add_tangents(tx, ty):
    if tx is None:
        return ty
    return tx if ty is None else add(tx, ty)


def _sub_tangents(tx, ty):
    if ty is None:
        return tx
    return neg(ty) if tx is None else sub(tx, ty)


add_p.jvp = _linear_jvp(add_p, _add_tangents)
add_p.vjp = lambda ct, primals, z, needs: (
    sum_to_like(ct, primals[0]) if needs[0] else None,
    sum_to_like(ct, primals[1]) if needs[1] else None)
sub_p.jvp = _linear_jvp(sub_p, _sub_tangents)
sub_p.vjp = lambda ct, primals, z, needs: (
    sum_to_like(ct, primals[0]) if needs[0] else None,
    sum_to_like(neg(ct), primals[1]) if needs[1] else None)
neg_p.jvp = lambda primals, tangents: (neg(primals[0]), neg(tangents[0]))
neg_p.vjp = lambda ct, primals, z, needs: (neg(ct),)


def _mul_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    z = mul(x, y)
    out = None if tx is None else mul(tx, y)
    if ty is not None:
        out = mul(x, ty) if out is None else add(out, mul(x, ty))
    return z, broadcast_tangent(out, shape_of(z))


mul_p.jvp = _mul_jvp
mul_p.vjp = lambda ct, primals, z, needs: (
    sum_to_like(bind(mul_p, (ct, primals[1]), _NO_PARAMS), primals[0]) if needs[0] else None,
    sum_to_like(bind(mul_p, (primals[0], ct), _NO_PARAMS), primals[1]) if needs[1] else None)


def _div_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    z = div(x, y)
    out = None if tx is None else div(tx, y)
    if ty is not None:
        term = neg(mul(ty, div(z, y)))
        out = term if out is None else add(out, term)
    return z, broadcast_tangent(out, shape_of(z))


div_p.jvp = _div_jvp
div_p.vjp = lambda ct, primals, z, needs: (
    sum_to_like(div(ct, primals[1]), primals[0]) if needs[0] else None,
    sum_to_like(neg(mul(ct, div(z, primals[1]))), primals[1]) if needs[1] else None)

# --------------------------------------------------------------------------
# Transcendental and other unary functions
# --------------------------------------------------------------------------

_LN2 = float(np.log(2.0))

exp_p = unary("exp", np.exp, lambda x, y: y)
exp2_p = unary("exp2", np.exp2, lambda x, y: mul(y, _LN2))
log_p = unary("log", np.log, lambda x, y: div(1.0, x))
log2_p = unary("log2", np.log2, lambda x, y: div(1.0 / _LN2, x))
log1p_p = unary("log1p", np.log1p, lambda x, y: div(1.0, add(x, 1.0)))
expm1_p = unary("expm1", np.expm1, lambda x, y: add(y, 1.0))
sqrt_p = unary("sqrt", np.sqrt, lambda x, y: div(0.5, y))
sin_p = unary("sin", np.sin, lambda x, y: cos(x))
cos_p = unary("cos", np.cos, lambda x, y: neg(sin(x)))
tan_p = unary("tan", np.tan, lambda x, y: add(1.0, mul(y, y)))
tanh_p = unary("tanh", np.tanh, lambda x, y: sub(1.0, mul(y, y)))
arcsin_p = unary("arcsin", np.arcsin, lambda x, y: div(1.0, sqrt(sub(1.0, mul(x, x)))))
arccos_p = unary("arccos", np.arccos, lambda x, y: neg(div(1.0, sqrt(sub(1.0, mul(x, x))))))
arctan_p = unary("arctan", np.arctan, lambda x, y: div(1.0, add(1.0, mul(x, x))))
sinh_p = unary("sinh", np.sinh, lambda x, y: cosh(x))
cosh_p = unary("cosh", np.cosh, lambda x, y: sinh(x))
def _abs_deriv(x, y):
    # JAX's rule: select(x >= 0, 1, -1), so 1 at 0 (sign(0) + 1); NaN stays NaN.
    return add(sign(x), convert(eq_p.bind(x, 0.0), _dtypes.result_type(x, 0.0)))


abs_p = unary("abs", np.abs, _abs_deriv, lambda x: _dtypes.real_dtype(_dtypes.result_type(x)))
# logistic(x) = 1 / (1 + exp(-x)), computed through tanh so it never overflows.
logistic_p = unary("logistic", lambda x: np.tanh(x * 0.5) * 0.5 + 0.5, lambda x, y: mul(y, sub(1.0, y)))

sign_p = unary("sign", np.sign, None, _no_bool("sign", "a bool is its own sign"))
floor_p = unary("floor", np.floor, None, _no_complex("floor"))
ceil_p = unary("ceil", np.ceil, None, _no_complex("ceil"))
round_p = unary("round", np.round, None)
isfinite_p = unary("isfinite", np.isfinite, None, _bool_dtype)
isnan_p = unary("isnan", np.isnan, None, _bool_dtype)
logical_not_p = unary("logical_not", np.logical_not, None, _bool_dtype)


def exp(x): return bind(exp_p, (x,), _NO_PARAMS)
def log(x): return bind(log_p, (x,), _NO_PARAMS)
def sqrt(x): return bind(sqrt_p, (x,), _NO_PARAMS)
def sin(x): return bind(sin_p, (x,), _NO_PARAMS)
def cos(x): return bind(cos_p, (x,), _NO_PARAMS)
def sinh(x): return bind(sinh_p, (x,), _NO_PARAMS)
def cosh(x): return bind(cosh_p, (x,), _NO_PARAMS)
def sign(x): return bind(sign_p, (x,), _NO_PARAMS)
def tanh(x): return bind(tanh_p, (x,), _NO_PARAMS)
def logistic(x): return bind(logistic_p, (x,), _NO_PARAMS)


# --------------------------------------------------------------------------
# Complex numbers: real, imag, conj, complex, and abs of a complex value
#
# Conventions as JAX: a jvp is the R-linear map of tangents, a vjp its
# transpose (not its adjoint): the vjp of ``mul`` multiplies by the other
# operand, not by its conjugate; ``real``'s transpose makes ``complex(ct, 0)``,
# ``imag``'s ``complex(0, -ct)``, ``conj``'s ``conj(ct)``.
# --------------------------------------------------------------------------


def _part_impl(name: str, part: Any) -> Callable:
    def impl(x):
        _real_out(name)(x)   # the eager path runs the impl only: the dtype check too
        return part(x).copy()
    return impl


def _complex_impl(x, y):
    x, y = np.asarray(x), np.asarray(y)
    dtype = _dtypes.complex_dtype(np.result_type(x, y))
    out = np.empty(np.broadcast_shapes(x.shape, y.shape), dtype)
    out.real, out.imag = x, y
    return out


def _real_out(name: str) -> Callable[..., np.dtype]:
    def rule(x: Any) -> np.dtype:
        dtype = _dtypes.result_type(x)
        if dtype.kind != "c":
            raise TypeError(f"{name}: expects a complex operand, got {describe(x)} (funcgrad.numpy.{name} takes "
                            "real values too)")
        return _dtypes.real_dtype(dtype)
    return rule


def _complex_out(x: Any, y: Any) -> np.dtype:
    dtype = _dtypes.result_type(x, y)
    if _dtypes.kind(dtype) != "f":
        raise TypeError(f"complex: expects two float operands (real and imaginary parts), got {describe(x)} and "
                        f"{describe(y)}")
    return _dtypes.canonicalize(_dtypes.complex_dtype(dtype))


def _conj_out(x: Any) -> np.dtype:
    dtype = _dtypes.result_type(x)
    if dtype.kind != "c":
        raise TypeError(f"conj: expects a complex operand, got {describe(x)} (funcgrad.numpy.conj takes real "
                        "values too)")
    return dtype


def _conj_impl(x):
    _conj_out(x)   # the eager path runs the impl only: the dtype check too
    return np.conjugate(x)


def _checked_complex_impl(x, y):
    _complex_out(x, y)
    return _complex_impl(x, y)


real_p = _declare("real", _part_impl("real", np.real), _real_out("real"))
imag_p = _declare("imag", _part_impl("imag", np.imag), _real_out("imag"))
conj_p = _declare("conj", _conj_impl, _conj_out)
complex_p = _declare("complex", _checked_complex_impl, _complex_out)


def real(x): return bind(real_p, (x,), _NO_PARAMS)
def imag(x): return bind(imag_p, (x,), _NO_PARAMS)
def conj(x): return bind(conj_p, (x,), _NO_PARAMS)
def complex_(x, y): return bind(complex_p, (x, y), _NO_PARAMS)


def _to_complex(ct: Any, like: Any) -> Any:
    """A real cotangent as a complex one of ``like``'s dtype (imaginary part 0)."""
    return convert_p.bind(ct, dtype=np.dtype(like.dtype))


real_p.jvp = lambda primals, tangents: (real(primals[0]), real(tangents[0]))
real_p.vjp = lambda ct, primals, y, needs: (_to_complex(ct, primals[0]),)
imag_p.jvp = lambda primals, tangents: (imag(primals[0]), imag(tangents[0]))
imag_p.vjp = lambda ct, primals, y, needs: (complex_(zeros_like(ct), neg(ct)),)
conj_p.jvp = lambda primals, tangents: (conj(primals[0]), conj(tangents[0]))
conj_p.vjp = lambda ct, primals, y, needs: (conj(ct),)


def _complex_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    z = complex_(x, y)
    tx = zeros_like(x, dtype=_dtypes.result_type(x, 0.0)) if tx is None else tx
    ty = zeros_like(y, dtype=_dtypes.result_type(y, 0.0)) if ty is None else ty
    return z, broadcast_tangent(complex_(tx, ty), shape_of(z))


complex_p.jvp = _complex_jvp
complex_p.vjp = lambda ct, primals, z, needs: (
    sum_to_like(real(ct), primals[0]) if needs[0] else None,
    sum_to_like(neg(imag(ct)), primals[1]) if needs[1] else None)


def _abs_unit(x, y):
    """conj(x) / |x| as a complex value, 0 where x == 0 (JAX's convention: |x| replaced by 1 there)."""
    safe = select(eq(y, 0.0), add(mul(y, 0.0), 1.0), y)
    return div(conj(x), convert_p.bind(safe, dtype=np.dtype(x.dtype)))


def _abs_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = bind(abs_p, (x,), _NO_PARAMS)
    if x.dtype.kind != "c":
        return y, mul(t, _abs_deriv(x, y))
    return y, real(mul(t, _abs_unit(x, y)))


def _abs_vjp(ct, primals, y, needs):
    x = primals[0]
    if x.dtype.kind != "c":
        return (bind(mul_p, (ct, _abs_deriv(x, y)), _NO_PARAMS),)
    return (mul(_to_complex(ct, x), _abs_unit(x, y)),)


abs_p.jvp, abs_p.vjp = _abs_jvp, _abs_vjp


# --------------------------------------------------------------------------
# Binary functions
# --------------------------------------------------------------------------


def _balanced(x, y, z, on: Any):
    """1 where x is the chosen side, 1/2 at ties (JAX's convention), else 0."""
    dtype = _dtypes.result_type(x, y)
    return mul(add(convert(eq(x, z), dtype), convert(on(x, y), dtype)), 0.5)


def _pow_dx(x, y, z):
    # y * x**(y-1), with 0 where y == 0 (so d/dx of x**0 is 0 even at x = 0).
    if isinstance(y, (bool, int, float)):
        # A Python exponent stays a weakly typed scalar: binding y - 1 or
        # y * 0.0 on their own would make 32-bit arrays and promote a
        # float16 gradient to float32.
        return mul(x, 0.0) if y == 0 else mul(y, pow_(x, y - 1))
    return select(eq(y, 0), mul(y, 0.0), mul(y, pow_(x, sub(y, 1))))


def _pow_dy(x, y, z):
    # log(x) * x**y, with 0 at x == 0 (JAX's convention).
    safe = select(eq(x, 0), add(mul(x, 0.0), 1.0), x)
    return mul(log(safe), z)


maximum_p = binary("maximum", np.maximum,
                   lambda x, y, z: _balanced(x, y, z, gt), lambda x, y, z: _balanced(y, x, z, gt))
minimum_p = binary("minimum", np.minimum,
                   lambda x, y, z: _balanced(x, y, z, lt), lambda x, y, z: _balanced(y, x, z, lt))

pow_p = binary("pow", np.power, _pow_dx, _pow_dy)
arctan2_p = binary("arctan2", np.arctan2,
                   lambda x, y, z: div(y, add(mul(x, x), mul(y, y))),
                   lambda x, y, z: neg(div(x, add(mul(x, x), mul(y, y)))), _no_complex("arctan2"))
# x mod y = x - floor(x / y) * y: d/dx = 1, d/dy = -floor(x / y) (JAX's convention).
mod_p = binary("mod", np.mod, lambda x, y, z: add(mul(x, 0.0), 1.0),
               lambda x, y, z: neg(floor_p.bind(div(x, y))), _no_complex("mod"))
floor_divide_p = binary("floor_divide", np.floor_divide, None, None, _no_complex("floor_divide"))

eq_p = binary("eq", np.equal, None, None, _bool_dtype)
ne_p = binary("ne", np.not_equal, None, None, _bool_dtype)
lt_p = binary("lt", np.less, None, None, _bool_dtype)
le_p = binary("le", np.less_equal, None, None, _bool_dtype)
gt_p = binary("gt", np.greater, None, None, _bool_dtype)
ge_p = binary("ge", np.greater_equal, None, None, _bool_dtype)
and_p = binary("logical_and", np.logical_and, None, None, _bool_dtype)
or_p = binary("logical_or", np.logical_or, None, None, _bool_dtype)
xor_p = binary("logical_xor", np.logical_xor, None, None, _bool_dtype)


def pow_(x, y): return pow_p.bind(x, y)
def eq(x, y): return eq_p.bind(x, y)
def gt(x, y): return gt_p.bind(x, y)
def lt(x, y): return lt_p.bind(x, y)


# --------------------------------------------------------------------------
# select (where)
# --------------------------------------------------------------------------


def _select_impl(c, x, y):
    # The reference; the CPU backend runs large contiguous selects through numba loops.
    c = np.asarray(c)
    if c.dtype != np.bool_:
        raise TypeError(f"the condition must be a bool array, got {describe(c)}")
    return np.where(c, x, y)


select_p = _declare("select", _select_impl, lambda c, x, y: _dtypes.result_type(x, y))


def select(c, x, y):
    return select_p.bind(c, x, y)


def _zero_tangent(x):
    # Not mul(x, 0.0): a constant branch is often infinite (where(mask, s, -inf)
    # in attention), and inf * 0 would put NaN into the tangent.
    if isinstance(x, (bool, int, float)):
        return 0.0
    return zeros_like(x, dtype=_dtypes.result_type(x, 0.0))


def _select_jvp(primals, tangents):
    c, x, y = primals
    _, tx, ty = tangents
    z = select(c, x, y)
    tx = _zero_tangent(x) if tx is None else tx
    ty = _zero_tangent(y) if ty is None else ty
    return z, broadcast_tangent(select(c, tx, ty), shape_of(z))


def _select_vjp(ct, primals, z, needs):
    c, x, y = primals
    # A scalar zero broadcasts: no zeros array is materialised (one pass, not two).
    cx = unbroadcast(select(c, ct, 0.0), shape_of(x)) if needs[1] else None
    cy = unbroadcast(select(c, 0.0, ct), shape_of(y)) if needs[2] else None
    return None, cx, cy


select_p.jvp, select_p.vjp = _select_jvp, _select_vjp


# --------------------------------------------------------------------------
# dtype conversion and stop_gradient
# --------------------------------------------------------------------------

convert_p = Primitive("convert_element_type")
def _convert_impl(x, dtype):
    x = np.asarray(x)
    if x.dtype.kind == "c" and dtype.kind != "c":
        if dtype.kind == "b":   # nonzero real or imaginary part
            return x != 0
        x = np.real(x)   # complex -> real keeps the real part (as JAX), without numpy's ComplexWarning
    return x.astype(dtype)


convert_p.impl = _convert_impl
convert_p.abstract_eval = lambda x, dtype: ShapedArray(shape_of(x), dtype)
convert_p.batch = lambda values, dims, size, dtype: (convert_p.bind(values[0], dtype=dtype), dims[0])
add_traits(convert_p, "elementwise")


def convert(x: Any, dtype: Any) -> Any:
    """``x`` as ``dtype`` (canonicalised); a no-op when it already is.

    >>> lax.convert_element_type(fnp.array([1.7, -1.7]), fnp.int32)
    Array([ 1, -1], dtype=int32)
    """
    dtype = _dtypes.canonicalize(dtype, requested=True)
    if not isinstance(x, (bool, int, float)) and x.dtype == dtype:
        return x
    return convert_p.bind(x, dtype=dtype)


def _convert_jvp(primals, tangents, dtype):
    out = convert_p.bind(primals[0], dtype=dtype)
    t = tangents[0]
    return out, (convert_p.bind(t, dtype=dtype) if _dtypes.kind(dtype) in "fc" else None)


def _convert_vjp(ct, primals, out, needs, dtype):
    x = primals[0]
    return (convert(ct, x.dtype) if _dtypes.kind(x.dtype) in "fc" else None,)


convert_p.jvp, convert_p.vjp = _convert_jvp, _convert_vjp

# Identity whose derivative is zero: both rules are absent, so transforms
# treat its output as a constant.
stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.impl = lambda x: x
stop_gradient_p.abstract_eval = lambda x: ShapedArray(shape_of(x), x.dtype)
stop_gradient_p.batch = lambda values, dims, size: (stop_gradient_p.bind(values[0]), dims[0])
add_traits(stop_gradient_p, "elementwise")

# An identity that names its value for checkpoint policies (``checkpoint_name``): derivatives pass through.
name_p = Primitive("name")
name_p.impl = lambda x, name: x
name_p.abstract_eval = lambda x, name: ShapedArray(shape_of(x), x.dtype)
name_p.batch = lambda values, dims, size, name: (name_p.bind(values[0], name=name), dims[0])
name_p.jvp = lambda primals, tangents, name: (name_p.bind(primals[0], name=name), tangents[0])
name_p.vjp = lambda ct, primals, out, needs, name: (ct,)
add_traits(name_p, "elementwise")


# Docstrings of the one-line wrappers above: (summary, checked example, printed result).
_WRAPPER_DOCS = (
    (cos, 'Cosine, elementwise.',
        'lax.cos(fnp.array([0.0, 1.0]))', 'Array([1. , 0.5403], dtype=float32)'),
    (cosh, 'Hyperbolic cosine, elementwise.',
        'lax.cosh(fnp.array([0.0, 1.0]))', 'Array([1. , 1.5431], dtype=float32)'),
    (exp, '``e ** x``, elementwise.',
        'lax.exp(fnp.array([0.0, 1.0]))', 'Array([1. , 2.7183], dtype=float32)'),
    (log, 'Natural logarithm, elementwise (NaN below 0, -inf at 0).',
        'lax.log(fnp.array([1.0, 2.0]))', 'Array([0. , 0.6931], dtype=float32)'),
    (logistic, 'The logistic sigmoid ``1 / (1 + exp(-x))``, elementwise.',
        'lax.logistic(fnp.array([0.0, 2.0]))', 'Array([0.5 , 0.8808], dtype=float32)'),
    (sign, "-1, 0 or 1 by the sign of ``x`` (in ``x``'s dtype); zero gradient.",
        'lax.sign(fnp.array([-2.0, 0.0, 3.0]))', 'Array([-1., 0., 1.], dtype=float32)'),
    (sin, 'Sine, elementwise.',
        'lax.sin(fnp.array([0.0, 1.0]))', 'Array([0. , 0.8415], dtype=float32)'),
    (sinh, 'Hyperbolic sine, elementwise.',
        'lax.sinh(fnp.array([0.0, 1.0]))', 'Array([0. , 1.1752], dtype=float32)'),
    (sqrt, 'Square root, elementwise (NaN below 0).',
        'lax.sqrt(fnp.array([4.0, 2.0]))', 'Array([2. , 1.4142], dtype=float32)'),
    (tanh, 'Hyperbolic tangent, elementwise.',
        'lax.tanh(fnp.array([0.0, 1.0]))', 'Array([0. , 0.7616], dtype=float32)'),
    (select, '``x`` where ``c`` is True, else ``y`` (elementwise, same shapes).',
        'lax.select(fnp.array([True, False]), fnp.array([1.0, 2.0]), fnp.array([10.0, 20.0]))', 'Array([ 1., 20.], dtype=float32)'),
)
for _fn, _summary, _call, _result in _WRAPPER_DOCS:
    _fn.__doc__ = f"{_summary}\n\n    >>> {_call}\n    {_result}\n"
