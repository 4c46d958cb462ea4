"""More of ``jax.lax``'s user API, written over the primitives: slicing and padding, iotas, clamping,
cumulative reductions, sorting and ``top_k``, ``reduce``/``reduce_window``, ``conv_general_dilated``, and
integer bit operations.

They are written by topic in ``_slicing`` (slicing, padding, iotas, shapes), ``_arith`` (elementwise
extras and bit operations), ``_reductions`` (reduce, cumulative scans, reduce_window, sorting) and
``_dot_conv`` (dot, convolutions), over the bound primitives of ``_ops``; this module gathers them for
``funcgrad.lax``.

Derivatives come from the primitives these are written with; where JAX
fixes a derivative at a tie it is matched (``clamp`` passes no gradient to
anything at the bounds).

>>> import funcgrad.lax as lax, funcgrad.numpy as fnp
>>> lax.slice(fnp.arange(10.0), (2,), (8,), (3,))
Array([2., 5.], dtype=float32)
>>> lax.pad(fnp.ones(2), 0.0, [(1, 0, 1)])
Array([0., 1., 0., 1.], dtype=float32)
>>> lax.top_k(fnp.array([3.0, 1.0, 4.0, 1.5]), 2)
(Array([4., 3.], dtype=float32), Array([2, 0], dtype=int32))
"""
from __future__ import annotations

from funcgrad.lax._arith import (bitwise_not, bitwise_xor, clamp, integer_pow, reciprocal, rsqrt, select_n,
                                 shift_right_arithmetic, square)
from funcgrad.lax._dot_conv import _conv_dims, conv, conv_general_dilated, dot  # noqa: F401 (_conv_dims: _conv_helpers)
from funcgrad.lax._ops import lax  # noqa: F401 (the bound primitives, for lax._small_ops)
from funcgrad.lax._reductions import (cumlogsumexp, cummax, cummin, cumprod, reduce, reduce_and, reduce_or,
                                      reduce_window, reduce_xor, sort, sort_key_val, top_k)
from funcgrad.lax._slicing import (broadcast, broadcast_shapes, broadcast_to_rank, broadcasted_iota, collapse, dtype,
                                   index_in_dim, iota, pad, slice, slice_in_dim, split)  # noqa: A004

__all__ = ["bitwise_not", "bitwise_xor", "broadcast", "broadcast_shapes", "broadcast_to_rank", "broadcasted_iota",
           "clamp", "collapse", "conv", "conv_general_dilated", "cummax", "cumlogsumexp", "cummin", "cumprod", "dot",
           "dtype", "index_in_dim", "integer_pow", "iota", "pad", "reciprocal", "reduce", "reduce_and", "reduce_or",
           "reduce_window", "reduce_xor", "rsqrt", "select_n", "shift_right_arithmetic", "slice", "slice_in_dim",
           "sort", "sort_key_val", "split", "square", "top_k"]
