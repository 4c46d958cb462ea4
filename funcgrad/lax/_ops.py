"""The primitive-level operations that the rest of ``jax.lax``'s user API (``_slicing``, ``_arith``,
``_reductions``, ``_dot_conv``, gathered by ``_more``) is written with: the ``lax`` namespace of bound
primitives (``funcgrad.lax`` itself imports those modules, so they cannot use it), and the shared
argument helpers ``_ndim`` and ``_axis``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array as _ConcreteArray, _freeze
from funcgrad._dtypes import describe
from funcgrad.primitives import conv as _C, elementwise as _E, indexing as _I, random_bits as _B, reduce as _R
from funcgrad.primitives import shape as _S
from funcgrad.primitives.shape import shape_of


class _Ops:
    """The handful of primitive-level operations these modules are written with (``funcgrad.lax`` itself
    imports them, so they are bound here directly)."""

    add, sub, mul, div, neg, exp, log, sqrt = _E.add, _E.sub, _E.mul, _E.div, _E.neg, _E.exp, _E.log, _E.sqrt
    select, eq, gt, lt, convert = _E.select, _E.eq, _E.gt, _E.lt, _E.convert
    getitem, reshape, moveaxis, transpose, broadcast_to = _I.getitem, _S.reshape, _S.moveaxis, _S.transpose, \
        _S.broadcast_to
    argsort, bitwise_and, bitwise_or = _B.argsort, _B.bitwise_and, _B.bitwise_or
    shift_left, shift_right_logical, conv2d = _B.shift_left, _B.shift_right_logical, _C.conv2d

    @staticmethod
    def binary(p: Any) -> Callable:
        return lambda x, y: p.bind(x, y)

    @staticmethod
    def reduce(p: Any) -> Callable:
        return lambda x, axes: p.bind(x, axes=tuple(int(a) for a in axes))

    @staticmethod
    def full(shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return _ConcreteArray(_freeze(np.full(tuple(shape), value, _dtypes.canonicalize(dtype, requested=True))))


lax = _Ops
lax.max, lax.min, lax.rem = _Ops.binary(_E.maximum_p), _Ops.binary(_E.minimum_p), _Ops.binary(_E.mod_p)
lax.floor_divide, lax.logical_and = _Ops.binary(_E.floor_divide_p), _Ops.binary(_E.and_p)
lax.logical_xor = _Ops.binary(_E.xor_p)
lax.logical_not, lax.isnan = (lambda x: _E.logical_not_p.bind(x)), (lambda x: _E.isnan_p.bind(x))
lax.stop_gradient = lambda x: _E.stop_gradient_p.bind(x)
lax.reduce_sum, lax.reduce_prod = _Ops.reduce(_S.reduce_sum_p), _Ops.reduce(_R.reduce_prod_p)
lax.reduce_max, lax.reduce_min = _Ops.reduce(_R.reduce_max_p), _Ops.reduce(_R.reduce_min_p)
lax.pow = lambda x, y: _E.pow_p.bind(x, y)


Array = Any


def _ndim(x: Any) -> int:
    return len(shape_of(x))


def _axis(op: str, axis: int, ndim: int, x: Any) -> int:
    if not -ndim <= int(axis) < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for an operand {describe(x)}")
    return int(axis) % ndim
