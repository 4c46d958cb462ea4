"""Buckets of gradients: which parameters are reduced together, and flattening to 1-D and back.

Gradients are all-reduced a bucket at a time: one message per bucket of about ``bucket_mb``
megabytes instead of one per parameter (each message has a fixed cost), sent as soon as the
bucket's gradients are final. Buckets are filled from the *last* parameter backwards, because the
backward pass finishes the gradients of the last layers first.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import _dtypes
from funcgrad.core import describe


class Bucket(NamedTuple):
    """Leaves ``indices`` (positions in the flattened parameters), all of ``dtype``; ``nbytes`` in all.

    >>> plan_buckets([fnp.zeros(4), fnp.zeros(2)])      # one bucket, from the last leaf: 6 float32 entries
    [Bucket(indices=(1, 0), dtype=dtype('float32'), nbytes=24)]
    """
    indices: tuple
    dtype: np.dtype
    nbytes: int


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def plan_buckets(leaves: Sequence[Any], bucket_mb: float = 25.0, owner: str = "data_parallel") -> list[Bucket]:
    """Split ``leaves`` (arrays, or anything with ``shape`` and ``dtype``) into buckets of at most
    ``bucket_mb`` megabytes (2**20 bytes), walking from the last leaf to the first.

    A leaf larger than the limit gets a bucket of its own; a change of dtype starts a new bucket.

    >>> [b.indices for b in plan_buckets([fnp.zeros(300_000), fnp.zeros(300_000)], bucket_mb=1.5)]
    [(1,), (0,)]
    """
    if isinstance(bucket_mb, bool) or not isinstance(bucket_mb, (int, float)) or not bucket_mb > 0:
        raise ValueError(f"{owner}: bucket_mb must be a positive number of megabytes, got {bucket_mb!r}")
    limit = bucket_mb * 2 ** 20
    buckets: list[Bucket] = []
    current: list[int] = []
    current_bytes, current_dtype = 0, None
    for i in reversed(range(len(leaves))):
        x = leaves[i]
        dtype = np.dtype(x.dtype)
        if _dtypes.kind(dtype) != "f":
            raise TypeError(f"{owner}: parameter leaf {i} is {describe(x)}; gradients are all-reduced for float "
                            "parameters only (keep integer or boolean arrays out of the parameters)")
        nbytes = _size(x.shape) * dtype.itemsize
        if current and (current_bytes + nbytes > limit or dtype != current_dtype):
            buckets.append(Bucket(tuple(current), current_dtype, current_bytes))
            current, current_bytes = [], 0
        current.append(i)
        current_bytes += nbytes
        current_dtype = dtype
    if current:
        buckets.append(Bucket(tuple(current), current_dtype, current_bytes))
    return buckets


def flatten(xs: Sequence[Any]) -> Any:
    """One 1-D array: the raveled ``xs`` one after another (all of one dtype)."""
    return fnp.concatenate([fnp.ravel(x) for x in xs]) if len(xs) > 1 else fnp.ravel(xs[0])


def unflatten(flat: Any, like: Sequence[Any]) -> list:
    """The inverse of :func:`flatten`: pieces of ``flat`` shaped like ``like`` (extra entries ignored)."""
    out, offset = [], 0
    for x in like:
        n = _size(x.shape)
        out.append(fnp.reshape(flat[offset:offset + n], x.shape))
        offset += n
    return out
