"""Small ``jax.lax`` operations: ``batch_matmul``, ``broadcast_like``, ``empty``, ``tile``, ``stack``, ``unstack``,
``optimization_barrier``, ``approx_max_k``/``approx_min_k``, ``clz``, ``mulhi``, ``reduce_precision``,
``ragged_dot``, ``shape_as_value``, ``with_sharding_constraint``, ``composite``; ``rng_uniform`` /
``rng_bit_generator`` raise, pointing to ``funcgrad.random``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import bind
from funcgrad._dtypes import describe
from funcgrad.primitives import elementwise as _E, indexing as _I, shape as _S
from funcgrad.primitives.random_bits import bitwise_and, bitwise_or, shift_left, shift_right_logical
from funcgrad.primitives.linalg import einsum
from funcgrad.primitives.shape import shape_of
from funcgrad.lax import _more
from funcgrad.lax._gather_scatter import _bitcast, _ints, _range

__all__ = ["PrecisionLike", "approx_max_k", "approx_min_k", "batch_matmul", "broadcast_like", "clz", "composite",
           "empty", "mulhi", "optimization_barrier", "ragged_dot", "reduce_precision", "rng_bit_generator",
           "rng_uniform", "shape_as_value", "stack", "tile", "unstack", "with_sharding_constraint"]

Array = Any
# ------------------------------------------------------------------ matmul, shapes, small ops


def batch_matmul(lhs: Array, rhs: Array, precision: Any = None) -> Array:
    """Batched matrix product ``lhs[..., i, j] @ rhs[..., j, k]`` with equal batch dims, as
    ``jax.lax.batch_matmul``.

    >>> batch_matmul(fnp.ones((2, 3, 4)), fnp.ones((2, 4, 5))).shape
    (2, 3, 5)
    """
    ls, rs = shape_of(lhs), shape_of(rhs)
    if len(ls) < 2 or len(ls) != len(rs) or ls[:-2] != rs[:-2] or ls[-1] != rs[-2]:
        raise ValueError(f"lax.batch_matmul: needs (..., m, k) and (..., k, n) operands of equal rank and batch "
                         f"dims, got {describe(lhs)} and {describe(rhs)}")
    b = "abcdefghijklmnopqrstuvw"[:len(ls) - 2]
    return einsum(f"{b}xy,{b}yz->{b}xz", lhs, rhs)


def broadcast_like(arr: Array, like_arr: Array) -> Array:
    """``arr`` broadcast to the shape of ``like_arr`` (numpy's rules), as ``jax.lax.broadcast_like``.

    >>> broadcast_like(fnp.arange(3.), fnp.ones((2, 3))).shape
    (2, 3)
    """
    return _S.broadcast_to(arr, tuple(shape_of(like_arr)))


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Array:
    """An array of ``shape`` and ``dtype``, as ``jax.lax.empty``: its values are unspecified in JAX; funcgrad's
    are zeros.

    >>> empty((2, 3), fnp.float32).shape
    (2, 3)
    """
    if out_sharding is not None:
        raise NotImplementedError("lax.empty: out_sharding is not supported (funcgrad has no shardings)")
    return _more.lax.full(tuple(int(n) for n in shape), 0, dtype)


def tile(operand: Array, reps: Sequence[int]) -> Array:
    """``operand`` repeated ``reps[i]`` times along axis ``i``, as ``jax.lax.tile`` (``len(reps)`` must equal
    ``operand.ndim``).

    >>> tile(fnp.arange(3), (2,))
    Array([0, 1, 2, 0, 1, 2], dtype=int32)
    """
    shape = tuple(shape_of(operand))
    reps = _ints(reps)
    if len(reps) != len(shape) or any(r < 0 for r in reps):
        raise ValueError(f"lax.tile: reps={reps} must give one nonnegative count per dimension of "
                         f"{describe(operand)}")
    # (r0, n0, r1, n1, ...) by broadcasting, then merged.
    inter = tuple(x for r, n in zip(reps, shape) for x in (1, n))
    big = tuple(x for r, n in zip(reps, shape) for x in (r, n))
    y = _S.broadcast_to(_S.reshape(operand, inter), big)
    return _S.reshape(y, tuple(r * n for r, n in zip(reps, shape)))


def stack(operands: Sequence[Array], axis: int = 0) -> Array:
    """The operands (equal shapes) joined along a new axis ``axis``, as ``jax.lax.stack``.

    >>> stack([fnp.ones(2), fnp.zeros(2)], axis=1).shape
    (2, 2)
    """
    if not operands:
        raise ValueError("lax.stack: needs at least one operand")
    shape = tuple(shape_of(operands[0]))
    nd = len(shape) + 1
    if not -nd <= axis < nd:
        raise ValueError(f"lax.stack: axis {axis} is out of range for {nd}-d output")
    axis %= nd
    for x in operands:
        if tuple(shape_of(x)) != shape:
            raise ValueError(f"lax.stack: operands must have equal shapes, got {describe(operands[0])} and "
                             f"{describe(x)}")
    new = shape[:axis] + (1,) + shape[axis:]
    return bind(_I.concatenate_p, tuple(_S.reshape(x, new) for x in operands), {"axis": axis})


def unstack(x: Array, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple, as ``jax.lax.unstack``.

    >>> [a.shape for a in unstack(fnp.ones((2, 3)), axis=1)]
    [(2,), (2,), (2,)]
    """
    nd = len(shape_of(x))
    if not -nd <= axis < nd:
        raise ValueError(f"lax.unstack: axis {axis} is out of range for {describe(x)}")
    axis %= nd
    return tuple(_more.index_in_dim(x, i, axis, keepdims=False) for i in _range(shape_of(x)[axis]))


def optimization_barrier(operand: Any, /) -> Any:
    """``operand`` itself (any pytree), as ``jax.lax.optimization_barrier``: XLA uses it to stop reordering;
    funcgrad's compiler has nothing to stop, so it is the identity (derivatives pass through).

    >>> lax.optimization_barrier((fnp.ones(2), 3))     # the operand itself
    (Array([1., 1.], dtype=float32), 3)
    """
    return operand


def _approx_k(op: str, operand: Array, k: int, reduction_dimension: int, reduction_input_size_override: int,
              largest: bool) -> list:
    nd = len(shape_of(operand))
    if not -nd <= reduction_dimension < nd:
        raise ValueError(f"{op}: reduction_dimension={reduction_dimension} is out of range for {describe(operand)}")
    d = reduction_dimension % nd
    x = _S.moveaxis(operand, d, nd - 1)
    vals, idx = _more.top_k(x if largest else _E.neg(x), k)
    vals = vals if largest else _E.neg(vals)
    return [_S.moveaxis(vals, nd - 1, d), _S.moveaxis(idx, nd - 1, d)]


def approx_max_k(operand: Array, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> list:
    """The ``k`` largest values along ``reduction_dimension`` and their indices, as ``jax.lax.approx_max_k``
    (computed exactly: recall 1, which meets any ``recall_target``; returns ``[values, indices]``).

    >>> approx_max_k(fnp.array([[1., 5., 3.]]), 2)     # [values [[5, 3]], indices [[1, 2]]]
    [Array([[5., 3.]], dtype=float32), Array([[1, 2]], dtype=int32)]
    """
    if not aggregate_to_topk:
        raise NotImplementedError("lax.approx_max_k: aggregate_to_topk=False is not supported")
    return _approx_k("lax.approx_max_k", operand, k, reduction_dimension, reduction_input_size_override, True)


def approx_min_k(operand: Array, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> list:
    """The ``k`` smallest values along ``reduction_dimension`` and their indices, as ``jax.lax.approx_min_k``
    (computed exactly; returns ``[values, indices]``).

    >>> approx_min_k(fnp.array([[1., 5., 3.]]), 2)     # [values [[1, 3]], indices [[0, 2]]]
    [Array([[1., 3.]], dtype=float32), Array([[0, 2]], dtype=int32)]
    """
    if not aggregate_to_topk:
        raise NotImplementedError("lax.approx_min_k: aggregate_to_topk=False is not supported")
    return _approx_k("lax.approx_min_k", operand, k, reduction_dimension, reduction_input_size_override, False)


def _int_kind(op: str, *xs: Any) -> np.dtype:
    dt = _more.dtype(xs[0])
    for x in xs:
        if not np.issubdtype(_more.dtype(x), np.integer):
            raise TypeError(f"{op}: needs integer operands, got {describe(x)}")
    return np.dtype(dt)


def clz(x: Array) -> Array:
    """The number of leading zero bits of each integer (its dtype's width for 0), as ``jax.lax.clz``.

    >>> clz(fnp.array([0, 1, 255], fnp.int32))
    Array([32, 31, 24], dtype=int32)
    """
    dt = _int_kind("lax.clz", x)
    bits = dt.itemsize * 8
    udt = np.dtype(f"uint{bits}")
    u = _bitcast(x, udt) if dt != udt else x
    n = _more.lax.full((), 0, udt)
    shift = bits // 2
    while shift:      # binary search: if the top `shift` bits are zero, count them and shift left
        s = _more.lax.full((), shift, udt)
        zero_top = _E.eq(shift_right_logical(u, _more.lax.full((), bits - shift, udt)), _more.lax.full((), 0, udt))
        u = _E.select(zero_top, shift_left(u, s), u)
        n = _E.select(zero_top, _E.add(n, s), n)
        shift //= 2
    n = _E.select(_E.eq(u, _more.lax.full((), 0, udt)), _E.add(n, _more.lax.full((), 1, udt)), n)
    return _E.convert(n, dt)


def mulhi(x: Array, y: Array, /) -> Array:
    """The high half of the double-width product ``x * y`` of integers of one dtype, as ``jax.lax.mulhi``
    (8, 16 and 32 bits).

    >>> mulhi(fnp.uint32(3000000000), fnp.uint32(3000000000))
    Array(2095475792, dtype=uint32)
    """
    dt = _int_kind("lax.mulhi", x, y)
    if _more.dtype(y) != dt:
        raise TypeError(f"lax.mulhi: operands must have one dtype, got {describe(x)} and {describe(y)}")
    bits = dt.itemsize * 8
    full = _more.lax.full
    if bits > 32:
        raise NotImplementedError("lax.mulhi: 64-bit operands are not supported (8, 16 and 32 bits are)")
    if bits < 32:      # the exact product fits 32 bits
        wide = np.dtype(np.int32 if dt.kind == "i" else np.uint32)
        p = _E.mul(_E.convert(x, wide), _E.convert(y, wide))
        if dt.kind == "i":
            hi = _more.shift_right_arithmetic(p, full((), bits, wide))
        else:
            hi = shift_right_logical(p, full((), bits, wide))
        return _E.convert(hi, dt)
    u32 = np.dtype(np.uint32)
    ux = _bitcast(x, u32) if dt.kind == "i" else x
    uy = _bitcast(y, u32) if dt.kind == "i" else y

    def c(v: int) -> Any:
        return full((), v, u32)
    lo16 = c(0xFFFF)
    a_lo, a_hi = bitwise_and(ux, lo16), shift_right_logical(ux, c(16))
    b_lo, b_hi = bitwise_and(uy, lo16), shift_right_logical(uy, c(16))
    hi_lo = _E.mul(a_hi, b_lo)
    cross = _E.add(_E.add(shift_right_logical(_E.mul(a_lo, b_lo), c(16)), bitwise_and(hi_lo, lo16)),
                   _E.mul(a_lo, b_hi))
    hi = _E.add(_E.add(_E.mul(a_hi, b_hi), shift_right_logical(hi_lo, c(16))), shift_right_logical(cross, c(16)))
    if dt.kind == "i":      # signed: subtract the other operand for each negative one (mod 2**32)
        zero = c(0)
        hi = _E.sub(hi, _E.select(_E.lt(x, full((), 0, dt)), uy, zero))
        hi = _E.sub(hi, _E.select(_E.lt(y, full((), 0, dt)), ux, zero))
        return _bitcast(hi, dt)
    return hi


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Array:
    """``operand`` rounded to a float format with ``exponent_bits`` and ``mantissa_bits`` (round to nearest
    even; overflow to inf; results below the format's smallest normal flush to zero, as XLA), kept in its dtype; the
    derivative is the identity (straight through). ``exponent_bits=5, mantissa_bits=10`` rounds
    through float16's values.

    >>> reduce_precision(fnp.float32(1.1234567), exponent_bits=5, mantissa_bits=10)
    Array(1.1230, dtype=float32)
    """
    dt = np.dtype(_more.dtype(operand))
    if not _dtypes.is_float(dt):
        raise TypeError(f"lax.reduce_precision: needs a float operand, got {describe(operand)}")
    ebits, mbits = int(exponent_bits), int(mantissa_bits)
    finfo = _dtypes.finfo(dt)
    src_m, src_e = int(finfo.nmant), int(finfo.iexp)
    if ebits < 1 or mbits < 0:
        raise ValueError(f"lax.reduce_precision: exponent_bits={ebits} must be >= 1 and mantissa_bits={mbits} >= 0")
    if mbits >= src_m and ebits >= src_e:
        return operand
    if dt.itemsize not in (4, 8):
        raise NotImplementedError(f"lax.reduce_precision: {dt} operands are not supported (float32, float64 are)")
    udt = np.dtype(f"uint{dt.itemsize * 8}")
    full = _more.lax.full

    def u(v: int) -> Any:
        return full((), v, udt)
    x = _E.stop_gradient_p.bind(operand)
    bits = _bitcast(x, udt)
    if mbits < src_m:      # round the mantissa to nearest even (XLA's ReducePrecision)
        drop = src_m - mbits
        last = bitwise_and(shift_right_logical(bits, u(drop)), u(1))
        bias = _E.add(u((1 << (drop - 1)) - 1), last)
        bits = bitwise_and(_E.add(bits, bias), u(~((1 << drop) - 1) & ((1 << (dt.itemsize * 8)) - 1)))
    if ebits < src_e:      # clamp the exponent: overflow to inf, underflow to signed zero
        nbits = dt.itemsize * 8
        sign_mask = 1 << (nbits - 1)
        exp_mask = ((1 << src_e) - 1) << src_m
        src_bias = (1 << (src_e - 1)) - 1
        dst_bias = (1 << (ebits - 1)) - 1
        max_exp = (src_bias + dst_bias) << src_m
        min_exp = (src_bias - dst_bias) << src_m
        exp = bitwise_and(bits, u(exp_mask))
        sign = bitwise_and(bits, u(sign_mask))
        over = _E.gt(exp, u(max_exp))
        under = _E.le_p.bind(exp, u(min_exp))
        bits = _E.select(over, bitwise_or(sign, u(exp_mask)), bits)
        bits = _E.select(under, sign, bits)
    y = _bitcast(bits, dt)
    y = _E.select(_E.isnan_p.bind(x), x, y)
    # Straight-through derivative; infinities pass as values (inf - inf would be NaN).
    finite = _E.isfinite_p.bind(x)
    zero = _more.lax.full((), 0, dt)
    step = _E.stop_gradient_p.bind(_E.sub(_E.select(finite, y, zero), _E.select(finite, x, zero)))
    return _E.select(finite, _E.add(operand, step), y)


def rng_uniform(a: Any, b: Any, shape: Sequence[int]) -> Array:
    """Not supported: ``jax.lax.rng_uniform`` is XLA's stateful generator (its results depend on the
    backend). Use ``funcgrad.random.uniform(key, shape, minval=a, maxval=b)``.

    >>> lax.rng_uniform(0., 1., (2,))
    Traceback (most recent call last):
    ...
    NotImplementedError: lax.rng_uniform (XLA's stateful generator) is not supported: use funcgrad.random.uniform...
    """
    raise NotImplementedError("lax.rng_uniform (XLA's stateful generator) is not supported: use "
                              "funcgrad.random.uniform(key, shape, minval=a, maxval=b)")


def rng_bit_generator(key: Any, shape: Sequence[int], dtype: Any = np.uint32, algorithm: Any = None, *,
                      out_sharding: Any = None) -> tuple:
    """Not supported: ``jax.lax.rng_bit_generator``'s bits are XLA's (per-backend) algorithms. Use
    ``funcgrad.random.bits(key, shape, dtype)``.

    >>> lax.rng_bit_generator(random.key(0), (2,))
    Traceback (most recent call last):
    ...
    NotImplementedError: lax.rng_bit_generator (XLA's per-backend bit generators) is not supported: use funcgrad.random.bits...
    """
    raise NotImplementedError("lax.rng_bit_generator (XLA's per-backend bit generators) is not supported: use "
                              "funcgrad.random.bits(key, shape, dtype) and funcgrad.random.split")




def ragged_dot(lhs: Array, rhs: Array, group_sizes: Array, precision: Any = None, preferred_element_type: Any = None,
               group_offset: Any = None, out_sharding: Any = None) -> Array:
    """Grouped matrix product, as ``jax.lax.ragged_dot``: ``lhs`` (m, k) rows are split into consecutive
    groups of ``group_sizes`` (g,) rows; group ``i`` is multiplied by ``rhs[i]`` (g, k, n). Rows past
    ``sum(group_sizes)`` give zeros. Computed densely (g products of (m, k) @ (k, n)).

    >>> ragged_dot(fnp.ones((3, 2)), fnp.stack([fnp.eye(2), 2 * fnp.eye(2)]), fnp.array([1, 2]))  # rows 1, 2, 2
    Array([[1., 1.],
           [2., 2.],
           [2., 2.]], dtype=float32)
    """
    if group_offset is not None:
        raise NotImplementedError("lax.ragged_dot: group_offset is not supported")
    if out_sharding is not None:
        raise NotImplementedError("lax.ragged_dot: out_sharding is not supported (funcgrad has no shardings)")
    ls, rs, gs = tuple(shape_of(lhs)), tuple(shape_of(rhs)), tuple(shape_of(group_sizes))
    if len(ls) != 2 or len(rs) != 3 or ls[1] != rs[1] or gs != rs[:1]:
        raise ValueError(f"lax.ragged_dot: needs lhs (m, k), rhs (g, k, n) and group_sizes (g,), got "
                         f"{describe(lhs)}, {describe(rhs)} and {describe(group_sizes)}")
    if not np.issubdtype(np.dtype(_more.dtype(group_sizes)), np.integer):
        raise TypeError(f"lax.ragged_dot: group_sizes must be integers, got {describe(group_sizes)}")
    m, g = ls[0], rs[0]
    from funcgrad._core import Array as _Concrete, _freeze
    sizes = _E.convert(group_sizes, np.int32)
    lower = _Concrete(_freeze(np.tril(np.ones((g, g), np.int32))))       # ends[j] = sum_{i <= j} sizes[i]
    ends = einsum("ji,i->j", lower, sizes)
    starts = _E.sub(ends, sizes)
    rows = _Concrete(_freeze(np.arange(m, dtype=np.int32).reshape(m, 1)))
    member = _E.and_p.bind(_E.ge_p.bind(rows, _S.reshape(starts, (1, g))), _E.lt(rows, _S.reshape(ends, (1, g))))
    dt = np.result_type(np.dtype(_more.dtype(lhs)), np.dtype(_more.dtype(rhs)))
    onehot = _E.convert(member, dt)
    out = einsum("mg,mk,gkn->mn", onehot, lhs, rhs)
    return out if preferred_element_type is None else _E.convert(out, preferred_element_type)


def shape_as_value(shape: Sequence[int]) -> Array:
    """A shape as an int32 array, as ``jax.lax.shape_as_value`` (funcgrad's shapes are always static).

    >>> shape_as_value((2, 3))     # int32 [2, 3]
    Array([2, 3], dtype=int32)
    """
    from funcgrad._core import Array as _Concrete, _freeze
    return _Concrete(_freeze(np.asarray(_ints(shape), dtype=np.int32).reshape(len(tuple(shape)))))


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` itself (any pytree), as ``jax.lax.with_sharding_constraint`` on one device: a sharding constraint
    never changes values, and funcgrad runs each computation on one device, so there is nothing to lay out.

    >>> x = fnp.ones(2)
    >>> lax.with_sharding_constraint(x, None) is x
    True
    """
    return x


PrecisionLike = Any     # None | str | Precision | a pair of them, as JAX's alias (funcgrad computes at full precision)


def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """``decomposition`` as a named composite operation, as ``jax.lax.composite``: a composite's meaning
    is its decomposition (a compiler may recognise the name); funcgrad always runs the decomposition.

    >>> tangent = composite(lambda x: fnp.sin(x) / fnp.cos(x), name="my.tangent")
    """
    import functools
    if not callable(decomposition):
        raise TypeError(f"lax.composite: decomposition must be callable, got {type(decomposition).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"lax.composite: name must be a str, got {type(name).__name__}")

    @functools.wraps(decomposition)
    def op(*args: Any, **kwargs: Any) -> Any:
        return decomposition(*args, **kwargs)
    return op
