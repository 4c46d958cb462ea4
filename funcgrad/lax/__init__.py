"""funcgrad.lax: the primitive-level API, in the spirit of ``jax.lax``.

Each function here is a thin, typed wrapper that binds one primitive (or a
few, for the conveniences at the end): no numpy-style promotion, no
argument juggling. Arrays are positional; static settings (axes, shapes,
dtypes) are keywords or plain Python values. ``funcgrad.numpy``, ``nn``,
``random`` and ``optim`` are written on this module; write a new primitive's
user API on it too.

>>> import funcgrad.lax as lax, funcgrad.numpy as fnp
>>> x = fnp.arange(6.0).reshape(2, 3)          # f32[2,3]
>>> lax.reduce_sum(lax.mul(x, x), axes=(1,))   # f32[2]: [5, 50]
Array([ 5., 50.], dtype=float32)
>>> lax.broadcast_in_dim(fnp.ones(3), (2, 3), (1,)).shape
(2, 3)

Differences from ``jax.lax``: operands of elementwise functions broadcast
as in numpy (``jax.lax`` requires equal shapes), and Python scalars stay
weakly typed.
"""
from __future__ import annotations

import enum
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array as _CoreArray, Tracer as _Tracer, bind, get_aval
from funcgrad.primitives.elementwise_more import fmod_p
from funcgrad.primitives import elementwise as _E, indexing as _I, reduce as _R, shape as _S
from funcgrad.primitives.attention import flash_attention
from funcgrad.primitives import conv as _C
from funcgrad.primitives.conv import avg_pool2d, conv2d, conv2d_input_grad, conv2d_weight_grad, max_pool2d
from funcgrad.primitives.elementwise import (add, convert as convert_element_type, cos, cosh, div, exp, log, logistic,
                                             mul, neg, select, sign, sin, sinh, sqrt, sub, tanh)
from funcgrad.primitives.indexing import getitem, scatter_add, scatter_set as scatter, static_slice
from funcgrad.primitives.indexing import (scatter_combine, scatter_max as _scatter_max_at,  # noqa: F401
                                           scatter_min as _scatter_min_at)   # x.at[i].mul/min/max/apply (not JAX's)
from funcgrad.primitives.linalg import einsum, matmul
from funcgrad.primitives.random_bits import (argsort, bitcast_convert_type, bitwise_and, bitwise_or, erf, erf_inv,
                                             nextafter, random_gamma_grad, shift_left, shift_right_logical,
                                             threefry2x32)
from funcgrad.primitives.reduce import reduce_sum
from funcgrad.primitives.shape import broadcast_to, moveaxis, reshape, transpose
from funcgrad.primitives.softmax import log_softmax, logsumexp, softmax, softmax_cross_entropy

# The primitive objects themselves (as in jax.lax): funcgrad.numpy binds them
# directly on its hot paths, and backends register implementations against them.
from funcgrad.primitives.shape import (broadcast_to_p, reduce_sum_p, reshape_p, transpose_p)
from funcgrad.primitives.elementwise import (abs_p, add_p, and_p, arccos_p, arcsin_p, arctan2_p, arctan_p, ceil_p,
                                             convert_p, cos_p, cosh_p, div_p, eq_p, exp2_p, exp_p, expm1_p,
                                             floor_divide_p, floor_p, ge_p, gt_p, isfinite_p, isnan_p, le_p, log1p_p,
                                             log2_p, log_p, logical_not_p, logistic_p, lt_p, maximum_p, minimum_p,
                                             mod_p, mul_p, ne_p, neg_p, or_p, pow_p, round_p, select_p, sign_p, sin_p,
                                             sinh_p, sqrt_p, stop_gradient_p, sub_p, tan_p, tanh_p, xor_p)
from funcgrad.primitives.reduce import (argmax_p, argmin_p, cumsum_p, reduce_max_p, reduce_min_p, reduce_prod_p)
from funcgrad.primitives.indexing import (concatenate_p, flip_p, getitem_p, pad_p, scatter_add_p, scatter_set_p)
from funcgrad.primitives.linalg import (einsum_p, matmul_p)
from funcgrad.primitives.conv import (avg_pool2d_grad_p, avg_pool2d_p, conv2d_input_grad_p, conv2d_p,
                                      conv2d_weight_grad_p, max_pool2d_grad_p, max_pool2d_p)
from funcgrad.primitives.softmax import (log_softmax_grad_p, log_softmax_p, logsumexp_p, softmax_cross_entropy_grad_p,
                                         softmax_cross_entropy_p, softmax_grad_p, softmax_p)
from funcgrad.primitives.attention import (flash_attention_bwd_p, flash_attention_p)
from funcgrad.primitives.control_flow import cond_p, custom_call_p, scan_p, while_grad_p, while_p
from funcgrad.lax.control_flow import cond, fori_loop, map, scan, switch, while_loop  # noqa: A004
from funcgrad.primitives.random_bits import (argsort_p, bitcast_convert_type_p, bitwise_and_p, bitwise_or_p,
                                             erf_inv_p, erf_p, nextafter_p, random_gamma_grad_p, shift_left_p,
                                             shift_right_logical_p, threefry2x32_p)

# Dynamic slicing (start indices are values: a loop counter) and the parallel prefix scan.
from funcgrad.primitives.dynamic import (dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim, dynamic_slice_p,
                                         dynamic_update_index_in_dim, dynamic_update_slice,
                                         dynamic_update_slice_in_dim, dynamic_update_slice_p)
from funcgrad.lax._associative_scan import associative_scan
from funcgrad.tree_util import tree_map as _tree_map

Array = Any
_NO_PARAMS: dict = {}


def _unary(prim: Any, doc: str) -> Any:
    def fn(x: Array) -> Array:
        return bind(prim, (x,), _NO_PARAMS)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    return fn


def _binary(prim: Any, name: str, doc: str) -> Any:
    def fn(x: Array, y: Array) -> Array:
        return bind(prim, (x, y), _NO_PARAMS)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


exp2 = _unary(_E.exp2_p, "2 ** x, elementwise.")
log2 = _unary(_E.log2_p, "Base-2 logarithm, elementwise.")
log1p = _unary(_E.log1p_p, "log(1 + x), accurate near 0.")
expm1 = _unary(_E.expm1_p, "exp(x) - 1, accurate near 0.")
tan = _unary(_E.tan_p, "Tangent, elementwise.")
asin = _unary(_E.arcsin_p, "Inverse sine, elementwise.")
acos = _unary(_E.arccos_p, "Inverse cosine, elementwise.")
atan = _unary(_E.arctan_p, "Inverse tangent, elementwise.")
abs = _unary(_E.abs_p, "Absolute value; its derivative at 0 is 0 (sign(x)).")  # noqa: A001
floor = _unary(_E.floor_p, "Round down; zero gradient.")
ceil = _unary(_E.ceil_p, "Round up; zero gradient.")
round_half_even = _unary(_E.round_p, "Round half to even (numpy's rule); zero gradient.")   # not in jax.lax
is_finite = _unary(_E.isfinite_p, "True where x is neither inf nor NaN.")
isnan = _unary(_E.isnan_p, "True where x is NaN.")
logical_not = _unary(_E.logical_not_p, "Boolean not.")
max = _binary(_E.maximum_p, "max", "Elementwise maximum; ties share the gradient equally (JAX's rule).")  # noqa: A001
min = _binary(_E.minimum_p, "min", "Elementwise minimum; ties share the gradient equally (JAX's rule).")  # noqa: A001
pow = _binary(_E.pow_p, "pow", "x ** y, elementwise.")  # noqa: A001
atan2 = _binary(_E.arctan2_p, "atan2",
                "The angle of the point (y, x): arctan(x / y) in the right quadrant, as numpy's arctan2(x, y).")
mod = _binary(_E.mod_p, "mod", "x mod y with the sign of y (numpy's mod; not in jax.lax, whose rem is C's fmod).")
floor_divide = _binary(_E.floor_divide_p, "floor_divide", "floor(x / y); zero gradient.")


class RoundingMethod(enum.IntEnum):
    """How :func:`round` breaks ties: ``AWAY_FROM_ZERO`` (JAX's default) or ``TO_NEAREST_EVEN`` (numpy's).

    >>> lax.round(fnp.array([2.5]), lax.RoundingMethod.TO_NEAREST_EVEN)
    Array([2.], dtype=float32)
    """
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x: Array, rounding_method: Any = RoundingMethod.AWAY_FROM_ZERO) -> Array:  # noqa: A001
    """Round to the nearest integer; ties go away from zero by default (as ``jax.lax.round``; numpy's
    ``round`` and :func:`funcgrad.numpy.round` go to the even neighbour: pass
    ``RoundingMethod.TO_NEAREST_EVEN`` for that). Zero gradient.

    >>> lax.round(fnp.array([-0.5, 0.5, 1.5, 2.5]))
    Array([-1.,  1.,  2.,  3.], dtype=float32)
    >>> lax.round(fnp.array([0.5, 1.5, 2.5]), lax.RoundingMethod.TO_NEAREST_EVEN)
    Array([0., 2., 2.], dtype=float32)
    """
    try:
        method = RoundingMethod(rounding_method)
    except ValueError:
        raise ValueError(f"lax.round: rounding_method must be RoundingMethod.AWAY_FROM_ZERO (0) or TO_NEAREST_EVEN "
                         f"(1), got {rounding_method!r}") from None
    if method is RoundingMethod.TO_NEAREST_EVEN:
        return round_half_even(x)
    dt = get_aval(x).dtype
    if _dtypes.kind(dt) != "f":
        raise TypeError(f"lax.round: needs a floating-point operand, got {dt}; integers are already round")
    # trunc(|x|) + 1 where the dropped fraction is at least one half, with x's sign: exact (|x| - floor(|x|) is
    # exact in floating point), unlike floor(x + 0.5), which rounds 0.49999997 up.
    a = abs(x)
    t = floor(a)
    half, one = np.asarray(0.5, dt), np.asarray(1.0, dt)
    t = select(bind(_E.ge_p, (sub(a, t), half), _NO_PARAMS), add(t, one), t)
    return mul(sign(x), t)


def rem(x: Array, y: Array) -> Array:
    """C's remainder ``x - y * trunc(x / y)``: the result has the sign of ``x`` (as ``jax.lax.rem``; numpy's
    ``%``/``mod`` takes the sign of ``y``). Gradients: 1 for ``x``, ``-trunc(x / y)`` for ``y``.

    >>> lax.rem(fnp.array([7.0, -7.0]), fnp.array([3.0, 3.0]))
    Array([ 1., -1.], dtype=float32)
    """
    return bind(fmod_p, (x, y), _NO_PARAMS)
eq = _binary(_E.eq_p, "eq", "x == y, elementwise (bool).")
ne = _binary(_E.ne_p, "ne", "x != y, elementwise (bool).")
lt = _binary(_E.lt_p, "lt", "x < y, elementwise (bool).")
le = _binary(_E.le_p, "le", "x <= y, elementwise (bool).")
gt = _binary(_E.gt_p, "gt", "x > y, elementwise (bool).")
ge = _binary(_E.ge_p, "ge", "x >= y, elementwise (bool).")
logical_and = _binary(_E.and_p, "logical_and", "Boolean and.")
logical_or = _binary(_E.or_p, "logical_or", "Boolean or.")
logical_xor = _binary(_E.xor_p, "logical_xor", "Boolean exclusive or.")


# One checked example for each function above made by _unary/_binary: (call, printed result).
_EXAMPLES = (
    (abs, 'lax.abs(fnp.array([-0.5, 1.5]))',
        'Array([0.5, 1.5], dtype=float32)'),
    (acos, 'lax.acos(fnp.array([0.25, 0.5]))',
        'Array([1.3181, 1.0472], dtype=float32)'),
    (asin, 'lax.asin(fnp.array([0.25, 0.5]))',
        'Array([0.2527, 0.5236 ], dtype=float32)'),
    (atan, 'lax.atan(fnp.array([0.5, 2.0]))',
        'Array([0.4636, 1.1071], dtype=float32)'),
    (ceil, 'lax.ceil(fnp.array([-0.5, 1.5]))',
        'Array([-0., 2.], dtype=float32)'),
    (exp2, 'lax.exp2(fnp.array([0.5, 2.0]))',
        'Array([1.4142, 4. ], dtype=float32)'),
    (expm1, 'lax.expm1(fnp.array([0.5, 2.0]))',
        'Array([0.6487, 6.3891 ], dtype=float32)'),
    (floor, 'lax.floor(fnp.array([-0.5, 1.5]))',
        'Array([-1., 1.], dtype=float32)'),
    (log1p, 'lax.log1p(fnp.array([0.5, 2.0]))',
        'Array([0.4055, 1.0986], dtype=float32)'),
    (log2, 'lax.log2(fnp.array([0.5, 2.0]))',
        'Array([-1., 1.], dtype=float32)'),
    (round_half_even, 'lax.round_half_even(fnp.array([-0.5, 1.5, 2.5]))',
        'Array([-0., 2., 2.], dtype=float32)'),
    (tan, 'lax.tan(fnp.array([0.5, 2.0]))',
        'Array([ 0.5463, -2.1850], dtype=float32)'),
    (is_finite, 'lax.is_finite(fnp.array([0.5, 2.0]))',
        'Array([ True, True], dtype=bool)'),
    (isnan, 'lax.isnan(fnp.array([0.5, 2.0]))',
        'Array([False, False], dtype=bool)'),
    (atan2, 'lax.atan2(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([ 0.4636 , -0.9828], dtype=float32)'),
    (pow, 'lax.pow(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([1., 9.], dtype=float32)'),
    (mod, 'lax.mod(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([1., 1.], dtype=float32)'),
    (floor_divide, 'lax.floor_divide(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([ 0., -2.], dtype=float32)'),
    (max, 'lax.max(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([2., 2.], dtype=float32)'),
    (min, 'lax.min(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([ 1., -3.], dtype=float32)'),
    (eq, 'lax.eq(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([False, False], dtype=bool)'),
    (ne, 'lax.ne(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([ True, True], dtype=bool)'),
    (lt, 'lax.lt(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([ True, True], dtype=bool)'),
    (le, 'lax.le(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([ True, True], dtype=bool)'),
    (gt, 'lax.gt(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([False, False], dtype=bool)'),
    (ge, 'lax.ge(fnp.array([1.0, -3.0]), fnp.array([2.0, 2.0]))',
        'Array([False, False], dtype=bool)'),
    (logical_and, 'lax.logical_and(fnp.array([True, True, False]), fnp.array([True, False, False]))',
        'Array([ True, False, False], dtype=bool)'),
    (logical_or, 'lax.logical_or(fnp.array([True, True, False]), fnp.array([True, False, False]))',
        'Array([ True, True, False], dtype=bool)'),
    (logical_xor, 'lax.logical_xor(fnp.array([True, True, False]), fnp.array([True, False, False]))',
        'Array([False, True, False], dtype=bool)'),
    (logical_not, 'lax.logical_not(fnp.array([True, False]))',
        'Array([False, True], dtype=bool)'),
)
for _fn, _call, _result in _EXAMPLES:
    _fn.__doc__ += f"\n\n    >>> {_call}\n    {_result}\n"


def stop_gradient(x: Any) -> Any:
    """``x`` (an array or a pytree), as a constant for every derivative (forward and reverse).

    As in ``jax.lax``, only floating-point leaves go through ``stop_gradient_p``; integer and
    bool leaves have no derivative and come back as they are.

    >>> stop_gradient({"w": fnp.ones(2), "step": 3})    # {"w": f32[2] (a constant), "step": 3}
    {'step': 3, 'w': Array([1., 1.], dtype=float32)}
    """
    def stop(leaf: Any) -> Any:
        dtype = getattr(leaf, "dtype", None)
        if isinstance(leaf, float) or (dtype is not None and _dtypes.kind(np.dtype(dtype)) in "fc"):
            return bind(_E.stop_gradient_p, (leaf,), _NO_PARAMS)
        return leaf
    return _tree_map(stop, x)


def _axes(axes: Any) -> tuple[int, ...]:
    return (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)


def reduce_max(x: Array, axes: Sequence[int]) -> Array:
    """Maximum over ``axes`` (ties share the gradient equally).

    >>> lax.reduce_max(fnp.array([[1.0, 5.0], [3.0, 2.0]]), (1,))
    Array([5., 3.], dtype=float32)
    """
    return bind(_R.reduce_max_p, (x,), {"axes": _axes(axes)})


def reduce_min(x: Array, axes: Sequence[int]) -> Array:
    """Minimum over ``axes`` (ties share the gradient equally).

    >>> lax.reduce_min(fnp.array([[1.0, 5.0], [3.0, 2.0]]), (1,))
    Array([1., 2.], dtype=float32)
    """
    return bind(_R.reduce_min_p, (x,), {"axes": _axes(axes)})


def reduce_prod(x: Array, axes: Sequence[int]) -> Array:
    """Product over ``axes`` (gradient exact with zeros among the factors).

    >>> lax.reduce_prod(fnp.array([[1.0, 5.0], [3.0, 2.0]]), (1,))
    Array([5., 6.], dtype=float32)
    """
    return bind(_R.reduce_prod_p, (x,), {"axes": _axes(axes)})


def _index_as(out: Array, index_dtype: Any, name: str) -> Array:
    dt = np.dtype(_dtypes.canonicalize(index_dtype))
    if dt.kind not in "iu":
        raise TypeError(f"{name}: index_dtype must be an integer dtype, got {dt}; use e.g. fnp.int32")
    return convert_element_type(out, dt)


def argmax(operand: Array, axis: int, index_dtype: Any = None) -> Array:
    """Index of the first maximum along ``axis``, as ``index_dtype`` (int32, or int64 with x64).

    >>> lax.argmax(fnp.array([[1.0, 3.0, 2.0]]), 1)
    Array([1], dtype=int32)
    """
    out = bind(_R.argmax_p, (operand,), {"axis": int(axis)})
    return out if index_dtype is None else _index_as(out, index_dtype, "lax.argmax")


def argmin(operand: Array, axis: int, index_dtype: Any = None) -> Array:
    """Index of the first minimum along ``axis``, as ``index_dtype``.

    >>> lax.argmin(fnp.array([[1.0, 3.0, 0.5]]), 1)
    Array([2], dtype=int32)
    """
    out = bind(_R.argmin_p, (operand,), {"axis": int(axis)})
    return out if index_dtype is None else _index_as(out, index_dtype, "lax.argmin")


def cumsum(x: Array, axis: int = 0, reverse: bool = False) -> Array:
    """Inclusive cumulative sum along ``axis`` (from the end with ``reverse``).

    >>> lax.cumsum(fnp.array([1.0, 2.0, 3.0]))
    Array([1., 3., 6.], dtype=float32)
    """
    return bind(_R.cumsum_p, (x,), {"axis": int(axis), "reverse": bool(reverse)})


def broadcast_in_dim(x: Array, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Array:
    """``x`` broadcast to ``shape``, its axis ``i`` becoming output axis ``broadcast_dimensions[i]``.

    >>> broadcast_in_dim(fnp.ones(3), (2, 3), (1,)).shape
    (2, 3)
    """
    shape = tuple(int(s) for s in shape)
    dims = tuple(int(d) for d in broadcast_dimensions)
    x_shape = tuple(_S.shape_of(x))
    if len(dims) != len(x_shape) or any(b <= a for a, b in zip(dims, dims[1:])):
        raise ValueError(f"broadcast_in_dim: broadcast_dimensions {dims} must be increasing and name one output "
                         f"axis for each of the operand's {len(x_shape)} axes (operand shape {x_shape})")
    lifted = [1] * len(shape)
    for axis, d in zip(x_shape, dims):
        lifted[d] = axis
    return broadcast_to(reshape(x, tuple(lifted)), shape)


def expand_dims(x: Array, dimensions: Sequence[int]) -> Array:
    """``x`` with length-1 axes inserted at ``dimensions`` (of the result).

    >>> lax.expand_dims(fnp.ones((2, 3)), (0,)).shape
    (1, 2, 3)
    """
    shape = list(_S.shape_of(x))
    ndim = len(shape) + len(dimensions)
    for d in sorted(int(d) % ndim for d in dimensions):
        shape.insert(d, 1)
    return reshape(x, tuple(shape))


def squeeze(x: Array, dimensions: Sequence[int]) -> Array:
    """``x`` without the length-1 axes ``dimensions``.

    >>> lax.squeeze(fnp.ones((1, 3, 1)), (0, 2)).shape
    (3,)
    """
    shape = tuple(_S.shape_of(x))
    drop = {int(d) % len(shape) for d in dimensions} if shape else set()
    bad = [d for d in drop if shape[d] != 1]
    if bad:
        raise ValueError(f"squeeze: axis {bad[0]} of an array of shape {shape} has length {shape[bad[0]]}, not 1")
    return reshape(x, tuple(s for i, s in enumerate(shape) if i not in drop))


def rev(x: Array, dimensions: Sequence[int]) -> Array:
    """``x`` reversed along ``dimensions``.

    >>> lax.rev(fnp.array([1, 2, 3]), (0,))
    Array([3, 2, 1], dtype=int32)
    """
    return bind(_I.flip_p, (x,), {"axes": _axes(dimensions)})


def concatenate(operands: Sequence[Array], dimension: int) -> Array:
    """The operands joined along ``dimension`` (shapes equal elsewhere).

    >>> lax.concatenate([fnp.array([1, 2]), fnp.array([3])], 0)
    Array([1, 2, 3], dtype=int32)
    """
    return bind(_I.concatenate_p, tuple(operands), {"axis": int(dimension)})


def dot_general(x: Array, y: Array, dimension_numbers: Any) -> Array:
    """Contract ``x`` and ``y``: ``((x_contract, y_contract), (x_batch, y_batch))``, as ``jax.lax.dot_general``.

    Output axes: batch axes, then ``x``'s free axes, then ``y``'s.

    >>> lax.dot_general(fnp.ones((4, 2, 3)), fnp.ones((4, 3, 5)), (((2,), (1,)), ((0,), (0,)))).shape
    (4, 2, 5)
    """
    (xc, yc), (xb, yb) = dimension_numbers
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    xs = [next(letters) for _ in _S.shape_of(x)]
    ys = [next(letters) for _ in _S.shape_of(y)]
    for i, j in zip(tuple(xc) + tuple(xb), tuple(yc) + tuple(yb)):
        ys[j] = xs[i]
    batch = [xs[i] for i in xb]
    free_x = [c for i, c in enumerate(xs) if i not in xc and i not in xb]
    free_y = [c for j, c in enumerate(ys) if j not in yc and j not in yb]
    return einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(batch + free_x + free_y)}", x, y)


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Array:
    """A constant array (an ordinary value in every transform).

    >>> lax.full((2,), 7.0)
    Array([7., 7.], dtype=float32)
    """
    from funcgrad._core import Array as _Array, _freeze
    dtype = _dtypes.canonicalize(np.result_type(fill_value) if dtype is None else dtype, requested=True)
    return _Array(_freeze(np.full(tuple(shape), fill_value, dtype)))


def full_like(x: Array, fill_value: Any, dtype: Any = None) -> Array:
    """A constant array of ``x``'s shape (and dtype, unless given).

    >>> lax.full_like(fnp.ones((2,), fnp.int32), 5)
    Array([5, 5], dtype=int32)
    """
    return _on_device_of(x, full(_S.shape_of(x), fill_value, x.dtype if dtype is None else dtype))


def _on_device_of(x: Any, out: Array) -> Array:
    """``out`` on the device of ``x``, a device (GPU) array or a grad/jvp/vmap tracer standing for one."""
    while isinstance(x, _Tracer) and (hasattr(x, "primal") or hasattr(x, "value")):
        x = x.primal if hasattr(x, "primal") else x.value
    if isinstance(x, _CoreArray) and type(x) is not _CoreArray:
        return type(x).backend.to_device(out)
    return out


def zeros_like_array(x: Array) -> Array:
    """Zeros of ``x``'s shape and dtype.

    >>> lax.zeros_like_array(fnp.ones((2,), fnp.int32))
    Array([0, 0], dtype=int32)
    """
    return full_like(x, 0)


def int_pair(op: str, arg: str, value: Any, minimum: int = 1) -> tuple[int, int]:
    """A conv/pool size argument (an int or an ``(h, w)`` pair) as a pair of ints ``>= minimum``.

    The rule ``conv2d`` and the pools apply to ``stride``, ``padding``, ...;
    ``2.5`` is refused, never truncated.  Errors are headed by ``op``.

    >>> int_pair("MyPool", "stride", 2)
    (2, 2)
    """
    return _C._pair(op, arg, value, minimum)


def conv2d_shape(x_shape: Sequence[int], w_shape: Sequence[int], stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, *, name: str = "conv2d", x_what: str = "x",
                 w_what: str = "w") -> tuple[int, int, int, int]:
    """The output shape ``(N, O, OH, OW)`` of :func:`conv2d`, after checking the shapes as it does
    (as ``jax.lax.conv_shape_tuple``).  ``name``, ``x_what`` and ``w_what`` word the errors.

    >>> conv2d_shape((8, 3, 32, 32), (16, 3, 3, 3), padding=1)
    (8, 16, 32, 32)
    """
    stride, padding, dilation = (int_pair(name, arg, v, low) for arg, v, low in
                                 (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)))
    return _C._conv_geometry(name, tuple(x_shape), tuple(w_shape), stride, padding, dilation, groups, x_what,
                             w_what)


def pool2d_shape(x_shape: Sequence[int], kernel_size: Any, stride: Any = None, padding: Any = 0, *,
                 name: str = "pool2d") -> tuple[int, int, int, int]:
    """The output shape ``(N, C, OH, OW)`` of :func:`max_pool2d` / :func:`avg_pool2d` (``stride``
    defaults to the kernel size), after checking the arguments as they do.

    >>> pool2d_shape((8, 16, 32, 32), 2)
    (8, 16, 16, 16)
    """
    kernel = int_pair(name, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None else int_pair(name, "stride", stride, 1)
    return _C._pool_out_shape(name, tuple(x_shape), kernel, stride, int_pair(name, "padding", padding, 0))


__all__ = [
    "abs", "abs_p", "acos", "add", "add_p", "and_p", "arccos_p", "arcsin_p", "arctan2_p", "arctan_p", "argmax",
    "argmax_p", "argmin", "argmin_p", "argsort", "argsort_p", "asin", "associative_scan", "atan", "atan2", "avg_pool2d",
    "avg_pool2d_grad_p", "avg_pool2d_p", "bitcast_convert_type", "bitcast_convert_type_p", "bitwise_and",
    "bitwise_and_p", "bitwise_or", "bitwise_or_p", "broadcast_in_dim", "broadcast_to", "broadcast_to_p", "ceil",
    "ceil_p", "concatenate", "concatenate_p", "cond", "cond_p", "conv2d", "conv2d_input_grad", "conv2d_input_grad_p",
    "conv2d_p", "conv2d_shape", "conv2d_weight_grad", "conv2d_weight_grad_p", "convert_element_type", "convert_p",
    "cos", "cos_p", "cosh", "cosh_p", "cumsum", "cumsum_p", "custom_call_p", "div", "div_p", "dot_general",
    "dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim", "dynamic_slice_p", "dynamic_update_index_in_dim",
    "dynamic_update_slice", "dynamic_update_slice_in_dim", "dynamic_update_slice_p", "einsum", "einsum_p", "eq", "eq_p",
    "erf", "erf_inv", "erf_inv_p", "erf_p", "exp", "exp2", "exp2_p", "exp_p", "expand_dims", "expm1", "expm1_p",
    "flash_attention", "flash_attention_bwd_p", "flash_attention_p", "flip_p", "floor", "floor_divide",
    "floor_divide_p", "floor_p", "fori_loop", "full", "full_like", "ge", "ge_p", "getitem", "getitem_p", "gt", "gt_p",
    "int_pair", "is_finite", "isfinite_p", "isnan", "isnan_p", "le", "le_p", "log", "log1p", "log1p_p", "log2",
    "log2_p", "log_p", "log_softmax", "log_softmax_grad_p", "log_softmax_p", "logical_and", "logical_not",
    "logical_not_p", "logical_or", "logical_xor", "logistic", "logistic_p", "logsumexp", "logsumexp_p", "lt", "lt_p",
    "map", "matmul", "matmul_p", "max", "max_pool2d", "max_pool2d_grad_p", "max_pool2d_p", "maximum_p", "min",
    "minimum_p", "mod_p", "moveaxis", "mul", "mul_p", "ne", "ne_p", "neg", "neg_p", "nextafter", "nextafter_p", "or_p",
    "pad_p", "pool2d_shape", "pow", "pow_p", "reduce_max", "reduce_max_p", "reduce_min", "reduce_min_p", "reduce_prod",
    "random_gamma_grad", "random_gamma_grad_p", "reduce_prod_p", "reduce_sum", "reduce_sum_p", "rem", "reshape",
    "reshape_p", "rev", "round", "round_p", "RoundingMethod", "scan",
    "scan_p", "scatter", "scatter_add", "scatter_add_p", "scatter_set_p", "select", "select_p", "shift_left",
    "shift_left_p", "shift_right_logical", "shift_right_logical_p", "sign", "sign_p", "sin", "sin_p", "sinh", "sinh_p",
    "softmax", "softmax_cross_entropy", "softmax_cross_entropy_grad_p", "softmax_cross_entropy_p", "softmax_grad_p",
    "softmax_p", "sqrt", "sqrt_p", "squeeze", "static_slice", "stop_gradient", "stop_gradient_p", "sub", "sub_p",
    "switch", "tan", "tan_p", "tanh", "tanh_p", "threefry2x32", "threefry2x32_p", "transpose", "transpose_p",
    "while_grad_p", "while_loop", "while_p", "xor_p", "zeros_like_array"
]

# More of jax.lax, written over the above (slicing, padding, iotas, sorting, reduce_window, conv_general_dilated).
from funcgrad.lax import _more  # noqa: E402  (uses the names above)
from funcgrad.lax._more import *  # noqa: E402,F401,F403
__all__ = sorted(set(__all__) | set(_more.__all__))

# asinh/acosh/atanh/cbrt/population_count and the primitives of primitives/elementwise_more.py.
from funcgrad.lax import _math  # noqa: E402
from funcgrad.lax._math import *  # noqa: E402,F401,F403
__all__ = sorted(set(__all__) | set(_math.__all__))

# Complex numbers (as jax.lax): parts, conjugate, and building a complex value from two real ones.
from funcgrad.primitives.elementwise import complex_p, conj_p, imag_p, real_p  # noqa: E402
real = _unary(_E.real_p, "The real part of a complex array (float of the same precision).")
imag = _unary(_E.imag_p, "The imaginary part of a complex array (float of the same precision).")
conj = _unary(_E.conj_p, "The complex conjugate of a complex array.")
complex = _binary(_E.complex_p, "complex", "x + 1j * y, elementwise, from two float arrays.")  # noqa: A001
__all__ = sorted(set(__all__) | {"real", "real_p", "imag", "imag_p", "conj", "conj_p", "complex", "complex_p"})
_COMPLEX_EXAMPLES = (
    (complex, 'lax.complex(fnp.array([1.0]), fnp.array([2.0]))',
        'Array([1.+2.j], dtype=complex64)'),
    (conj, 'lax.conj(fnp.array([1 + 2j]))',
        'Array([1.-2.j], dtype=complex64)'),
    (real, 'lax.real(fnp.array([1 + 2j]))',
        'Array([1.], dtype=float32)'),
    (imag, 'lax.imag(fnp.array([1 + 2j]))',
        'Array([2.], dtype=float32)'),
)
for _fn, _call, _result in _COMPLEX_EXAMPLES:
    _fn.__doc__ += f"\n\n    >>> {_call}\n    {_result}\n"

# The discrete Fourier transform (as jax.lax.fft): fft_type "fft" | "ifft" | "rfft" | "irfft" on the trailing
# len(fft_lengths) axes.
from funcgrad.primitives.fft import FFT_TYPES as _FFT_TYPES, fft_p  # noqa: E402
from funcgrad.primitives import fft as _fft_prims  # noqa: E402


def fft(x: Array, fft_type: Any, fft_lengths: Sequence[int]) -> Array:
    """The DFT of the trailing ``len(fft_lengths)`` axes of ``x`` (1 to 3), as ``jax.lax.fft``.

    ``fft_type``: ``"fft"``, ``"ifft"`` (scaled by 1/N), ``"rfft"`` (real input, last axis n // 2 + 1)
    or ``"irfft"`` (its inverse, real output); JAX's ``FftType`` names are accepted too.

    >>> fft(fnp.ones(4, fnp.complex64), "fft", (4,))
    Array([4.+0.j, 0.+0.j, 0.+0.j, 0.+0.j], dtype=complex64)
    """
    name = getattr(fft_type, "name", fft_type)
    name = str(name).lower().replace("ffttype.", "")
    if name not in _FFT_TYPES:
        raise ValueError(f"fft: fft_type must be one of {_FFT_TYPES} (or jax.lax.FftType), got {fft_type!r}")
    return _fft_prims.fft(x, name, tuple(int(n) for n in fft_lengths))


__all__ = sorted(set(__all__) | {"fft", "fft_p"})

# jax.lax's special functions (lgamma, digamma, igamma, betainc, ...), over funcgrad.primitives.special.
from funcgrad.lax import _special  # noqa: E402
from funcgrad.lax._special import *  # noqa: E402,F401,F403
__all__ = sorted(set(__all__) | set(_special.__all__))

# The rest of jax.lax: gather/scatter in JAX's dimension-number form, conv_transpose and shape helpers, ...
from funcgrad.lax import _conv_helpers, _gather_scatter, _implicit, _small_ops  # noqa: E402
from funcgrad.lax._gather_scatter import *  # noqa: E402,F401,F403
from funcgrad.lax._small_ops import *  # noqa: E402,F401,F403
from funcgrad.lax._conv_helpers import *  # noqa: E402,F401,F403
from funcgrad.lax._implicit import *  # noqa: E402,F401,F403
__all__ = sorted(set(__all__) | set(_gather_scatter.__all__) | set(_small_ops.__all__) | set(_conv_helpers.__all__)
                 | set(_implicit.__all__))

# Collectives over named axes (vmap's axis_name, or the processes of funcgrad.distributed).
from funcgrad.lax import _collectives  # noqa: E402
from funcgrad.lax._collectives import *  # noqa: E402,F401,F403
__all__ = sorted(set(__all__) | set(_collectives.__all__))
