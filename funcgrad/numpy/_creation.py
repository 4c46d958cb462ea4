"""Array creation (concrete constants; under jit they become program constants)."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer, _freeze, as_array, to_numpy_input
from funcgrad.numpy._base import shape_tuple
from funcgrad.primitives.elementwise import convert


def _const(value: np.ndarray, dtype: Any) -> Array:
    return Array(_freeze(np.asarray(value, dtype=_dtypes.canonicalize(dtype))))


def array(obj: Any, dtype: Any = None, copy: bool = True) -> Any:
    """A new immutable array from a list, numpy array, scalar or Array.

    Python floats become float32 (float64 with x64 enabled); numpy float64
    arrays are stored as float32 unless x64 is enabled.
    """
    if isinstance(obj, (Array, Tracer)):
        return obj if dtype is None else convert(obj, dtype)
    if isinstance(obj, (list, tuple)) and any(isinstance(o, (Array, Tracer)) for o in obj):
        from funcgrad.numpy._shape import stack
        out = stack([array(o) for o in obj])
        return out if dtype is None else convert(out, dtype)
    if dtype is not None:
        return _const(np.array(obj, dtype=_dtypes.canonicalize(dtype)), dtype)
    return as_array(obj) if isinstance(obj, (bool, int, float)) else Array(to_numpy_input(obj))


def asarray(obj: Any, dtype: Any = None) -> Any:
    return array(obj, dtype=dtype)


def zeros(shape: Any, dtype: Any = None) -> Array:
    return _const(np.zeros(shape_tuple(shape)), dtype or _dtypes.float_)


def ones(shape: Any, dtype: Any = None) -> Array:
    return _const(np.ones(shape_tuple(shape)), dtype or _dtypes.float_)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    if isinstance(fill_value, (Array, Tracer)):
        from funcgrad.primitives.shape import broadcast_to
        out = broadcast_to(fill_value, shape_tuple(shape))
        return out if dtype is None else convert(out, dtype)
    if dtype is None:
        dtype = _dtypes.result_type(fill_value) if isinstance(fill_value, (bool, int, float)) \
            else _dtypes.canonicalize(np.asarray(fill_value).dtype)
    return _const(np.full(shape_tuple(shape), fill_value), dtype)


def zeros_like(x: Any, dtype: Any = None) -> Array:
    return _on_device_of(x, _const(np.zeros(np.shape(x) if not hasattr(x, "shape") else x.shape),
                                   dtype or _dtype_of(x)))


def ones_like(x: Any, dtype: Any = None) -> Array:
    return _on_device_of(x, _const(np.ones(x.shape if hasattr(x, "shape") else np.shape(x)), dtype or _dtype_of(x)))


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    return _on_device_of(x, full(x.shape if hasattr(x, "shape") else np.shape(x), fill_value, dtype or _dtype_of(x)))


def _on_device_of(x: Any, out: Any) -> Any:
    # "Like" a device (GPU) array means on its device too: zero cotangents and
    # seeds made by the transforms must not mix devices with the values.
    if isinstance(x, Array) and type(x) is not Array:
        from funcgrad.devices import device_put
        return device_put(out, x.device)
    return out


def _dtype_of(x: Any) -> np.dtype:
    if hasattr(x, "dtype"):
        return x.dtype
    return _dtypes.result_type(x)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Array:
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if step is None and stop is None:
        values = np.arange(start)
    if dtype is None:
        dtype = _dtypes.canonicalize(values.dtype) if values.dtype.kind != "f" else _dtypes.float_
    return _const(values, dtype)


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None) -> Array:
    return _const(np.linspace(start, stop, num, endpoint=endpoint), dtype or _dtypes.float_)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Array:
    return _const(np.eye(N, M, k), dtype or _dtypes.float_)
