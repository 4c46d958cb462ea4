"""permutation, categorical and choice."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import Array, Tracer, describe
from funcgrad.dtypes import default_float_dtype, default_int_dtype
from funcgrad.lax import convert_element_type as convert
from funcgrad.random._continuous import gumbel, randint, uniform
from funcgrad.random._keys import _axis, _check_key, _count, _is_int, _no_sharding, _numel, _shape, _split2, bits


def _shuffle(k: Any, x: Any, axis: int) -> Any:
    """Shuffle ``x`` along ``axis`` (each slice independently) by sorting random keys.

    With 32-bit sort keys, ties (which a stable sort leaves in order, a tiny
    bias) get likely for long axes, so JAX's rule re-sorts enough rounds to
    make the bias negligible: ceil(3 * ln(n) / ln(2**32 - 1)) rounds.
    """
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(2.0**32 - 1)))
    for _ in range(rounds):
        k, sub = _split2(k)
        order = lax.argsort(bits(sub, x.shape), axis)
        x = fnp.take_along_axis(x, order, axis)
    return x


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False, *,
                out_sharding: Any = None) -> Any:
    """A random permutation of ``range(x)`` (int ``x``) or of ``x`` along ``axis``.

    With ``independent=True`` every slice along the other axes is shuffled
    on its own; otherwise whole slices are moved together.

    >>> random.permutation(random.key(0), 5)               # i32[5], e.g. [3, 0, 4, 1, 2]
    Array([0, 1, 4, 3, 2], dtype=int32)
    >>> x2d = fnp.arange(6).reshape(3, 2)
    >>> random.permutation(random.key(0), x2d).shape == x2d.shape   # rows shuffled
    True
    """
    k = _check_key(key, "permutation")
    _no_sharding(out_sharding, "permutation")
    if isinstance(x, (int, np.integer)) or (not isinstance(x, (Array, Tracer)) and np.ndim(x) == 0):
        n = _count(x.item() if isinstance(x, np.ndarray) else x, "permutation", "n")
        return _shuffle(k, fnp.arange(n), 0)
    x = fnp.asarray(x)
    if x.ndim == 0:
        raise ValueError(f"random.permutation: x must be an int or an array of rank >= 1, got {describe(x)}")
    axis = _axis(axis, x.ndim, "permutation", describe(x))
    if independent or x.ndim == 1:
        return _shuffle(k, x, axis)
    order = _shuffle(k, fnp.arange(x.shape[axis]), 0)
    return fnp.take(x, order, axis=axis)


def categorical(key: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None, replace: bool = True,
                mode: str | None = None, *, out_sharding: Any = None) -> Any:
    """Indices drawn with probabilities ``softmax(logits, axis)`` (Gumbel-max trick).

    The result has the shape of ``logits`` without ``axis``; with ``shape``
    (which must end with that batch shape) extra leading samples are drawn.
    ``replace=False`` draws the leading samples without replacement (Gumbel
    top-k), so their number may not exceed the number of categories.

    >>> logits = fnp.log(fnp.array([0.2, 0.5, 0.3]))
    >>> random.categorical(random.key(0), logits, shape=(8,))    # i32[8] in {0, 1, 2}
    Array([1, 1, 1, 1, 2, 0, 0, 0], dtype=int32)
    """
    k = _check_key(key, "categorical")
    _no_sharding(out_sharding, "categorical")
    logits = fnp.asarray(logits)
    if _dtypes.kind(logits.dtype) != "f":
        logits = convert(logits, default_float_dtype())
    axis = _axis(axis, logits.ndim, "categorical", f"logits {describe(logits)}")
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch_shape if shape is None else _shape(shape, "categorical")
    if len(shape) < len(batch_shape) or \
            tuple(np.broadcast_shapes(shape[len(shape) - len(batch_shape):], batch_shape)) != \
            shape[len(shape) - len(batch_shape):]:
        raise ValueError(f"random.categorical: shape {shape} must end with the logits' batch shape {batch_shape}")
    prefix = shape[:len(shape) - len(batch_shape)]
    if not replace:
        n_draws = _numel(prefix)
        if n_draws > logits.shape[axis]:
            raise ValueError(f"random.categorical: the number of samples without replacement ({n_draws}) cannot "
                             f"exceed the number of categories ({logits.shape[axis]})")
        noisy = logits + gumbel(k, logits.shape, logits.dtype, mode=mode)
        _, idx = lax.top_k(fnp.moveaxis(noisy, axis, -1), n_draws)      # batch_shape + (n_draws,)
        idx = fnp.moveaxis(idx, -1, 0)                                  # (n_draws,) + batch_shape
        return fnp.reshape(idx, shape).astype(default_int_dtype())
    noise_shape = list(shape[len(prefix):])
    noise_shape.insert(axis, logits.shape[axis])
    noise = gumbel(k, prefix + tuple(noise_shape), logits.dtype, mode=mode)
    # Counting the axis from the end keeps it right after the prefix is added.
    return fnp.argmax(noise + logits, axis=axis - logits.ndim)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0,
           mode: str | None = None) -> Any:
    """Random samples from ``a`` (an array along ``axis``, or ``arange(a)`` for an int), JAX's algorithm.

    With ``replace=False`` no element is drawn twice (a permutation's
    prefix, or Gumbel top-k with ``p``); ``p`` gives the probabilities of
    the entries (1-d, length ``a.shape[axis]``; normalized by its sum).

    >>> random.choice(random.key(0), 10, (3,))                     # i32[3] in 0..9
    Array([9, 0, 2], dtype=int32)
    >>> random.choice(random.key(0), fnp.arange(5.0), (2,), replace=False, p=fnp.array([.1, .2, .3, .2, .2]))
    Array([1., 0.], dtype=float32)
    """
    k = _check_key(key, "choice")
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"random.choice: shape must be a sequence (a tuple), got {shape!r:.40}")
    shape = _shape(tuple(shape), "choice")
    if isinstance(a, (Array, Tracer)):
        arr = a
    elif _is_int(a) or (isinstance(a, np.ndarray) and a.ndim == 0):
        arr = None
    else:
        arr = fnp.asarray(a)
    if arr is not None and arr.ndim == 0:
        if isinstance(arr, Tracer):
            raise TypeError("random.choice: an int a must be concrete (a Python int), not traced: the number of "
                            "entries decides the output's values' range statically")
        a, arr = int(np.asarray(arr)), None
    if arr is None:
        n_inputs = int(a)
        out_dtype = default_int_dtype()
    else:
        axis = _axis(axis, arr.ndim, "choice", describe(arr))
        n_inputs = arr.shape[axis]
        out_dtype = arr.dtype
    n_draws = _numel(shape)
    if n_draws == 0:
        return fnp.zeros(shape if arr is None else arr.shape[:axis] + shape + arr.shape[axis + 1:], out_dtype)
    if n_inputs <= 0:
        raise ValueError("random.choice: a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"random.choice: cannot take a larger sample (size {n_draws}) than the population "
                         f"(size {n_inputs}) when replace=False")
    if p is None:
        if replace:
            ind = randint(k, shape, 0, n_inputs)
            result = ind if arr is None else fnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(k, n_inputs if arr is None else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=0 if arr is None else axis)
    else:
        p_arr = fnp.asarray(p)
        if _dtypes.kind(p_arr.dtype) != "f":
            p_arr = convert(p_arr, default_float_dtype())
        if p_arr.shape != (n_inputs,):
            raise ValueError(f"random.choice: p must be None or a 1-d vector with the same size as a.shape[axis]; "
                             f"p has shape {p_arr.shape} and a.shape[axis] is {n_inputs}")
        if replace:
            p_cuml = fnp.cumsum(p_arr)
            r = p_cuml[-1] * (1 - uniform(k, shape, dtype=p_cuml.dtype))
            # searchsorted(p_cuml, r), side="left": how many cumulative sums lie below r.
            ind = fnp.sum(fnp.reshape(p_cuml, (1,) * len(shape) + (n_inputs,)) < r[..., None], axis=-1)
            ind = convert(ind, default_int_dtype())
        else:
            g = gumbel(k, (n_inputs,), dtype=p_arr.dtype, mode=mode) + fnp.log(p_arr)
            ind = convert(lax.top_k(g, n_draws)[1], default_int_dtype())
        result = ind if arr is None else fnp.take(arr, ind, axis=axis)
    if arr is None:
        return fnp.reshape(result, shape)
    return fnp.reshape(result, arr.shape[:axis] + shape + arr.shape[axis + 1:])
