"""Array creation (concrete constants; under jit they become program constants)."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer, _freeze, as_array, to_numpy_input
from funcgrad.numpy._base import index_arg, shape_tuple
from funcgrad.lax import convert_element_type as convert


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


def _filled(op: str, shape: Any, fill_value: Any, dtype: Any) -> Array:
    """A new constant of ``shape`` holding ``fill_value``, built in its final
    dtype: no float64 temporary, so memory peaks at the result's size."""
    shape = shape_tuple(shape, op)
    dtype = _dtypes.canonicalize(dtype)
    if op in ("zeros", "zeros_like", "ones", "ones_like"):
        value = (np.zeros if op.startswith("zeros") else np.ones)(shape, dtype)   # zeros: calloc's lazy pages
    else:
        try:
            value = np.full(shape, fill_value, dtype=dtype)
        except OverflowError:
            raise OverflowError(f"{op}: fill value {fill_value!r} does not fit in {dtype} (range "
                                f"{np.iinfo(dtype).min}..{np.iinfo(dtype).max}); pass a wider dtype (and enable x64 "
                                "for 64-bit ones)") from None
    return Array(_freeze(value))


def zeros(shape: Any, dtype: Any = None) -> Array:
    return _filled("zeros", shape, 0, dtype or _dtypes.float_)


def ones(shape: Any, dtype: Any = None) -> Array:
    return _filled("ones", shape, 1, dtype or _dtypes.float_)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    if isinstance(fill_value, (Array, Tracer)):
        from funcgrad.lax import broadcast_to
        out = broadcast_to(fill_value, shape_tuple(shape, "full"))
        return out if dtype is None else convert(out, dtype)
    if dtype is None:
        dtype = _dtypes.result_type(fill_value) if isinstance(fill_value, (bool, int, float)) \
            else _dtypes.canonicalize(np.asarray(fill_value).dtype)
    return _filled("full", shape, fill_value, dtype)


def zeros_like(x: Any, dtype: Any = None) -> Array:
    return _on_device_of(x, _filled("zeros_like", _shape_of(x), 0, dtype or _dtype_of(x)))


def ones_like(x: Any, dtype: Any = None) -> Array:
    return _on_device_of(x, _filled("ones_like", _shape_of(x), 1, dtype or _dtype_of(x)))


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    return _on_device_of(x, full(_shape_of(x), fill_value, dtype or _dtype_of(x)))


def _shape_of(x: Any) -> tuple:
    return x.shape if hasattr(x, "shape") else np.shape(x)


def _on_device_of(x: Any, out: Any) -> Any:
    # "Like" a device (GPU) array means on its device too: zero cotangents and
    # seeds made by the transforms must not mix devices with the values. A tracer of
    # grad/jvp (its primal) or vmap (its value) is looked through to the array it stands for.
    while isinstance(x, Tracer) and (hasattr(x, "primal") or hasattr(x, "value")):
        x = x.primal if hasattr(x, "primal") else x.value
    if isinstance(x, Array) and type(x) is not Array:
        from funcgrad.devices import device_put
        return device_put(out, x.device)
    return out


def _dtype_of(x: Any) -> np.dtype:
    if hasattr(x, "dtype"):
        return x.dtype
    return _dtypes.result_type(x)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Array:
    direct = _int_range_dtype(start, stop, step, dtype)
    if direct is not None:   # exact in the final integer dtype: no int64 temporary
        return Array(_freeze(np.arange(start, stop, step, dtype=direct)))
    values = np.arange(start, stop, step)
    if dtype is None:
        dtype = _dtypes.canonicalize(values.dtype) if values.dtype.kind != "f" else _dtypes.float_
    return _const(values, dtype)


def _int_range_dtype(start: Any, stop: Any, step: Any, dtype: Any) -> np.dtype | None:
    """The integer dtype to build ``arange(start, stop, step)`` in directly, given integer
    bounds and an integer result dtype (else None: computed by numpy, then cast).
    Raises OverflowError when the values do not fit in it."""
    bounds = [b for b in (start, stop, step) if b is not None]
    if not all(isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_)) for b in bounds):
        return None
    target = _dtypes.canonicalize(np.dtype(dtype) if dtype is not None else np.dtype(np.int64))
    if target.kind not in "iu":
        return None
    lo, hi, by = (0, int(start), 1) if stop is None else (int(start), int(stop), 1)
    by = int(step) if step is not None else by
    if by == 0:
        return None   # numpy's error
    r = range(lo, hi, by)
    info = np.iinfo(target)
    if r and not (info.min <= min(r[0], r[-1]) and max(r[0], r[-1]) <= info.max):
        raise OverflowError(f"arange({start}, {stop}, {step}): values up to {max(r[0], r[-1])} do not fit in {target} "
                            f"(range {info.min}..{info.max}); pass a wider dtype (and enable x64 for 64-bit ones)")
    return target


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None) -> Array:
    num = index_arg("linspace", "num", num)
    if num < 0:
        raise ValueError(f"linspace: num must be >= 0, got {num}")
    values = np.linspace(start, stop, num, endpoint=endpoint)
    return _const(values, dtype or (_dtypes.complex_ if values.dtype.kind == "c" else _dtypes.float_))


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Array:
    N, M = shape_tuple((N, N if M is None else M), "eye", "(N, M)")
    k = index_arg("eye", "k", k)
    return Array(_freeze(np.eye(N, M, k, dtype=_dtypes.canonicalize(dtype or _dtypes.float_))))
