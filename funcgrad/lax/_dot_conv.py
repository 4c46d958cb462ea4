"""Dot products and convolutions of ``funcgrad.lax``: ``dot``, ``conv_general_dilated`` (with its
dimension numbers, ``_conv_dims``) and ``conv``. Written with the operations of ``_ops``; the other parts of
the API gathered in ``_more`` are in ``_slicing``, ``_arith`` and ``_reductions``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.lax._ops import Array, _ndim, lax
from funcgrad.lax._reductions import _padding_pairs
from funcgrad.lax._slicing import pad
from funcgrad.primitives.linalg import einsum
from funcgrad.primitives.shape import shape_of


# ------------------------------------------------------------------ dot and convolution


def dot(lhs: Array, rhs: Array, precision: Any = None, preferred_element_type: Any = None) -> Array:
    """Vector-vector, matrix-vector or matrix-matrix product (``jax.lax.dot``); ``precision`` is accepted and
    ignored (the CPU computes in the operands' dtype).

    >>> lax.dot(fnp.ones((2, 3)), fnp.ones(3))
    Array([3., 3.], dtype=float32)
    """
    a, b = _ndim(lhs), _ndim(rhs)
    if a not in (1, 2) or b not in (1, 2) or shape_of(lhs)[-1] != shape_of(rhs)[0]:
        raise ValueError(f"dot: expected 1-d or 2-d operands whose inner sizes match, got {describe(lhs)} and "
                         f"{describe(rhs)}")
    out = einsum({(1, 1): "i,i->", (1, 2): "i,ij->j", (2, 1): "ij,j->i", (2, 2): "ij,jk->ik"}[a, b], lhs, rhs)
    return out if preferred_element_type is None else lax.convert(out, preferred_element_type)


def conv_general_dilated(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision: Any = None, preferred_element_type: Any = None) -> Array:
    """N-d convolution as ``jax.lax.conv_general_dilated`` for one or two spatial axes, on funcgrad's conv2d
    kernels: any ``dimension_numbers`` (strings such as ``("NHWC", "HWIO", "NHWC")`` or index triples),
    strides, "SAME"/"VALID"/explicit padding, ``rhs_dilation`` and ``feature_group_count``.
    ``lhs_dilation`` (transposed convolution) and ``batch_group_count`` other than 1 raise
    NotImplementedError.

    >>> lax.conv_general_dilated(fnp.ones((1, 1, 5)), fnp.ones((1, 1, 3)), (1,), "SAME")
    Array([[[2., 3., 3., 3., 2.]]], dtype=float32)
    """
    nd = _ndim(lhs)
    spatial = nd - 2
    if spatial not in (1, 2) or _ndim(rhs) != nd:
        raise NotImplementedError(f"conv_general_dilated: funcgrad convolves over 1 or 2 spatial axes; got operands "
                                  f"{describe(lhs)} and {describe(rhs)}")
    if (lhs_dilation is not None and any(int(d) != 1 for d in lhs_dilation)) or batch_group_count != 1:
        raise NotImplementedError("conv_general_dilated: lhs_dilation and batch_group_count other than 1 are not "
                                  "supported; for a transposed convolution use the gradient of conv2d")
    lhs_spec, rhs_spec, out_spec = _conv_dims(dimension_numbers, nd)
    x = lax.transpose(lhs, lhs_spec)             # N, C, spatial...
    w = lax.transpose(rhs, rhs_spec)             # O, I, spatial...
    strides = tuple(int(s) for s in window_strides)
    dilation = (1,) * spatial if rhs_dilation is None else tuple(int(d) for d in rhs_dilation)
    if spatial == 1:                             # a 1-d convolution is a 2-d one over a unit axis
        x = lax.reshape(x, shape_of(x)[:2] + (1,) + shape_of(x)[2:])
        w = lax.reshape(w, shape_of(w)[:2] + (1,) + shape_of(w)[2:])
        strides, dilation = (1,) + strides, (1,) + dilation
        padding = padding if isinstance(padding, str) else [(0, 0)] + list(padding)
    window = [(k - 1) * d + 1 for k, d in zip(shape_of(w)[2:], dilation)]
    pads = _padding_pairs("conv_general_dilated", padding, shape_of(x)[2:], window, strides)
    symmetric = all(lo == hi for lo, hi in pads)
    if not symmetric:
        x = pad(x, 0, [(0, 0, 0), (0, 0, 0)] + [(lo, hi, 0) for lo, hi in pads])
    out = lax.conv2d(x, w, stride=strides, padding=tuple(lo for lo, _ in pads) if symmetric else 0,
                     dilation=dilation, groups=int(feature_group_count))
    if spatial == 1:
        out = lax.reshape(out, shape_of(out)[:2] + shape_of(out)[3:])
    out = lax.transpose(out, tuple(int(i) for i in np.argsort(out_spec)))
    return out if preferred_element_type is None else lax.convert(out, preferred_element_type)


def _conv_dims(dimension_numbers: Any, nd: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Permutations taking lhs to (N, C, spatial...), rhs to (O, I, spatial...), and out's (N, C, spatial...)
    positions, from JAX's string or index forms (None: NCHW, OIHW, NCHW)."""
    if dimension_numbers is None:
        default = tuple(range(nd))
        return default, default, default
    specs = tuple(dimension_numbers)
    if all(isinstance(s, str) for s in specs):
        lhs_s, rhs_s, out_s = specs
        for spec, first, second in ((lhs_s, "N", "C"), (rhs_s, "O", "I"), (out_s, "N", "C")):
            if len(spec) != nd or spec.count(first) != 1 or spec.count(second) != 1:
                raise ValueError(f"conv_general_dilated: dimension spec {spec!r} must have {nd} letters with one "
                                 f"{first!r} and one {second!r}")
        rhs_spatial = [i for i, c in enumerate(rhs_s) if c not in "OI"]
        order = [rhs_s[i] for i in rhs_spatial]      # spatial axes pair up by letter, in the kernel's order

        def perm(spec: str, first: str, second: str) -> tuple[int, ...]:
            if sorted(c for c in spec if c not in (first, second)) != sorted(order):
                raise ValueError(f"conv_general_dilated: spatial letters of {spec!r} and {rhs_s!r} differ")
            return (spec.index(first), spec.index(second), *[spec.index(c) for c in order])
        return perm(lhs_s, "N", "C"), (rhs_s.index("O"), rhs_s.index("I"), *rhs_spatial), perm(out_s, "N", "C")
    # ConvDimensionNumbers-like: (lhs_spec, rhs_spec, out_spec) as index tuples (batch/out, feature/in, spatial...)
    return tuple(tuple(int(i) for i in s) for s in specs)


def conv(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any, precision: Any = None,
         preferred_element_type: Any = None) -> Array:
    """``conv_general_dilated`` with NCHW / OIHW layouts and no dilation.

    >>> lax.conv(fnp.ones((1, 1, 4, 4)), fnp.ones((2, 1, 3, 3)), (1, 1), "VALID")[0, :, 0, 0]
    Array([9., 9.], dtype=float32)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)
