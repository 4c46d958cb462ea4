"""funcgrad.numpy: packbits and unpackbits."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy._base import arr, index_arg, normalize_axis
from funcgrad.numpy._shape import moveaxis, ravel
from funcgrad.numpy._arrays import _const, _py_max, _truth
from funcgrad.typing import ArrayLike

__all__ = [
    "packbits", "unpackbits",
]


# ---------------------------------------------------------------------------------------------- bits


def _bitorder(name: str, bitorder: str) -> np.ndarray:
    if bitorder not in ("big", "little"):
        raise ValueError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    w = 2 ** np.arange(8, dtype=np.int32)
    return w[::-1].copy() if bitorder == "big" else w


def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> Any:
    """Groups of 8 truth values of an integer or bool array packed into uint8 bytes along ``axis``
    (None: flattened); the last group is padded with zeros.

    >>> packbits(fnp.array([1, 0, 1]))
    Array([160], dtype=uint8)
    """
    x = arr(a)
    if x.dtype.kind not in "biu":
        raise TypeError(f"packbits: expected an integer or bool array, got {describe(x)}")
    weights = _bitorder("packbits", bitorder)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("packbits", axis, x.ndim, x)
    bits = lax.convert_element_type(_truth(x), np.int32)
    n = x.shape[axis]
    groups = -(-n // 8)
    if groups * 8 != n:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, groups * 8 - n)
        bits = lax.pad_p.bind(bits, widths=tuple(pad), value=0)
    bits = moveaxis(bits, axis, -1)
    bits = lax.reshape(bits, bits.shape[:-1] + (groups, 8))
    packed = lax.reduce_sum(lax.mul(bits, _const(weights)), (bits.ndim - 1,))
    return moveaxis(lax.convert_element_type(packed, np.uint8), -1, axis)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """The bits of a uint8 array along ``axis`` (None: flattened), 8 per byte, as uint8 0/1; ``count`` keeps
    that many (negative: drops that many from the end; more than there are: pads with zeros).

    >>> unpackbits(fnp.array([160], dtype=fnp.uint8))
    Array([1, 0, 1, 0, 0, 0, 0, 0], dtype=uint8)
    """
    x = arr(a)
    if x.dtype != np.uint8:
        raise TypeError(f"unpackbits: expected a uint8 array, got {describe(x)}")
    weights = _bitorder("unpackbits", bitorder)
    if axis is None:
        x, axis = ravel(x), 0
    axis = normalize_axis("unpackbits", axis, x.ndim, x)
    v = lax.convert_element_type(moveaxis(x, axis, -1), np.int32)
    v = lax.reshape(v, v.shape + (1,))
    bits = lax.mod(lax.floor_divide(v, _const(weights)), lax.full((), 2, np.int32))
    bits = lax.reshape(bits, bits.shape[:-2] + (bits.shape[-2] * 8,))
    total = bits.shape[-1]
    if count is not None:
        count = index_arg("unpackbits", "count", count)
        keep = total + count if count < 0 else count
        keep = _py_max(keep, 0)
        if keep <= total:
            bits = lax.static_slice(bits, bits.ndim - 1, 0, keep)
        else:
            bits = lax.pad_p.bind(bits, widths=((0, 0),) * (bits.ndim - 1) + ((0, keep - total),), value=0)
    return moveaxis(lax.convert_element_type(bits, np.uint8), -1, axis)
