"""Dtypes: canonicalisation (float32 by default), promotion, abstract values.

Promotion follows numpy 2 (NEP 50) on the array dtypes, with Python scalars
*weakly typed*: ``f32_array * 2.0`` stays float32, ``i32_array * 2.5`` becomes
the default float.  Without x64 every 64-bit result is narrowed to 32 bits
(float64 -> float32, int64 -> int32, uint64 -> uint32), as in JAX.

**bfloat16** is ``ml_dtypes.bfloat16`` (the numpy dtype JAX and CuPy use). numpy
files it under kind ``"V"`` and has no promotion rule for it, so code asks
:func:`kind` / :func:`is_float` here, never ``dtype.kind``, and bfloat16
promotes as in JAX: with integers, bools and Python scalars it stays bfloat16;
with float16 it becomes float32; with wider floats or complex, theirs.
"""
from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

import ml_dtypes

from funcgrad._config import config, on_update

bfloat16 = np.dtype(ml_dtypes.bfloat16)
_BFLOAT16_TYPE = type(bfloat16)   # numpy 2 gives each dtype class its own type

_NARROW = {
    np.dtype("float64"): np.dtype("float32"),
    np.dtype("int64"): np.dtype("int32"),
    np.dtype("uint64"): np.dtype("uint32"),
    np.dtype("complex128"): np.dtype("complex64"),
}
_SUPPORTED_KINDS = "biufc"

float_ = np.dtype("float32")
int_ = np.dtype("int32")
complex_ = np.dtype("complex64")


def _refresh_defaults() -> None:
    global float_, int_, complex_
    float_ = np.dtype("float64") if config.enable_x64 else np.dtype("float32")
    int_ = np.dtype("int64") if config.enable_x64 else np.dtype("int32")
    complex_ = np.dtype("complex128") if config.enable_x64 else np.dtype("complex64")


_refresh_defaults()
on_update("enable_x64", _refresh_defaults)


def canonicalize(dtype: Any, *, requested: bool = False) -> np.dtype:
    """The dtype funcgrad stores for ``dtype`` under the current x64 setting.

    ``requested=True`` where ``dtype`` is a public function's ``dtype=`` argument: narrowing a 64-bit dtype
    the user asked for then warns (once per line of user code, as JAX does), see ``_warn_truncated``.
    """
    dt = np.dtype(dtype)
    if dt.kind not in _SUPPORTED_KINDS and dt != bfloat16:
        raise TypeError(f"funcgrad does not support dtype {dt} ({kind_name(dt)}): funcgrad arrays hold bool, "
                        "integer, bfloat16, float16/32/64 and complex64/128 values only; convert the data to one "
                        "of those first")
    if not config.enable_x64:
        narrow = _NARROW.get(dt, dt)
        if requested and narrow is not dt:
            _warn_truncated(dt, narrow)
        return narrow
    return dt


def _in_funcgrad(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "funcgrad" or name.startswith("funcgrad.")


def _warn_truncated(dt: np.dtype, narrow: np.dtype) -> None:
    """Warn that the 64-bit ``dt`` the user asked for becomes ``narrow`` (x64 is off).

    The public function the user called is the outermost funcgrad frame; it warns only when that function's
    ``dtype`` (or ``new_dtype``) argument is ``dt`` -- a 64-bit dtype that funcgrad itself chose inside it
    narrows silently, and so do Python's ``int``/``float``/``complex`` (the default types, as in JAX) --
    and the warning points at the user's line.
    """
    frame, level = sys._getframe(2), 3   # the caller of canonicalize is level 2 of warnings.warn
    while frame.f_back is not None and _in_funcgrad(frame.f_back):
        frame, level = frame.f_back, level + 1
    if not _in_funcgrad(frame):
        return
    given = [frame.f_locals.get(name) for name in ("dtype", "new_dtype")]
    # Python's own int/float/complex mean "the default" here, as in JAX: they do not warn.
    if not any(g is not None and g not in (int, float, complex) and _same_dtype(g, dt) for g in given):
        return
    warnings.warn(f"Explicitly requested dtype {dt} requested in {frame.f_code.co_name} is not available, and "
                  f"will be truncated to dtype {narrow}. To enable more dtypes, call fg.config.update('enable_x64', "
                  "True), or set FUNCGRAD_ENABLE_X64=1 in the environment before importing funcgrad.",
                  UserWarning, stacklevel=level + 1)


def _same_dtype(given: Any, dt: np.dtype) -> bool:
    try:
        return np.dtype(given) == dt
    except TypeError:
        return False


_KIND_NAMES = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "float", "c": "complex",
               "U": "strings", "S": "bytes", "O": "Python objects", "M": "datetimes", "m": "timedeltas",
               "V": "raw or structured records"}


def kind(dtype: Any) -> str:
    """numpy's kind letter of ``dtype``, with bfloat16 a float (``"f"``; ml_dtypes registers it as ``"V"``)."""
    t = type(dtype)
    if t is _BFLOAT16_TYPE:
        return "f"
    if isinstance(dtype, np.dtype):
        return dtype.kind
    return kind(np.dtype(dtype))


def kind_name(dtype: np.dtype) -> str:
    """What kind of values a dtype holds, in words (``<U3`` -> ``strings``)."""
    return _KIND_NAMES.get(kind(dtype), np.dtype(dtype).kind)


def is_float(dtype: Any) -> bool:
    """float16/32/64 or bfloat16."""
    return kind(dtype) == "f"


def is_inexact(dtype: Any) -> bool:
    """Float or complex: the dtypes that have derivatives."""
    return kind(dtype) in "fc"


def finfo(dtype: Any) -> Any:
    """Machine limits of a float (or complex: its real part's) dtype, bfloat16 included (``ml_dtypes.finfo``)."""
    dt = np.dtype(dtype)
    return ml_dtypes.finfo(dt) if dt == bfloat16 else np.finfo(dt)


def is_complex(dtype: np.dtype) -> bool:
    return dtype.kind == "c"


def real_dtype(dtype: np.dtype) -> np.dtype:
    """complex64 -> float32, complex128 -> float64; other dtypes unchanged."""
    dtype = np.dtype(dtype)
    return np.dtype(f"f{dtype.itemsize // 2}") if dtype.kind == "c" else dtype


def complex_dtype(dtype: np.dtype) -> np.dtype:
    """The complex dtype of ``dtype``'s precision, as JAX's ``to_complex_dtype``: float16/32 and integers or
    bools of up to 32 bits -> complex64; float64 and 64-bit integers -> complex128 (not canonicalised)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    return np.dtype("complex128") if dtype.itemsize >= 8 else np.dtype("complex64")


def short_name(dtype: np.dtype) -> str:
    """``float32`` -> ``f32``, ``int32`` -> ``i32``, ``bool`` -> ``bool``, ``bfloat16`` -> ``bf16``."""
    if dtype.kind == "b":
        return "bool"
    if dtype == bfloat16:
        return "bf16"
    return f"{dtype.kind}{dtype.itemsize * 8}"


def result_type(*args: Any) -> np.dtype:
    """Promoted dtype of arrays, avals and (weakly typed) Python scalars."""
    items = [a if isinstance(a, (bool, int, float, complex)) else a.dtype for a in args]
    if any(i is bfloat16 for i in items):   # numpy keeps one bfloat16 dtype object
        return canonicalize(_promote_bfloat16(items))
    return canonicalize(np.result_type(*items))


def _promote_bfloat16(items: list[Any]) -> np.dtype:
    """JAX's rule for bfloat16 (numpy has none): integers, bools and Python scalars keep bfloat16 (a Python
    complex makes complex64); another float or complex array dtype meets it as float32 would (so float16 and
    bfloat16 make float32)."""
    others = [i for i in items if isinstance(i, np.dtype) and i != bfloat16]
    if any(o.kind in "fc" for o in others):
        return np.result_type(*(np.dtype(np.float32) if isinstance(i, np.dtype) and i == bfloat16 else i
                                for i in items))
    if any(isinstance(i, complex) for i in items):
        return np.dtype(np.complex64)
    return bfloat16


def inexact(dtype: np.dtype) -> np.dtype:
    """The float (or complex) dtype an op like ``sin`` or ``/`` computes in for ``dtype``."""
    return dtype if is_inexact(dtype) else float_


class ShapedArray:
    """An abstract value: what a traced program knows about an array."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapedArray) and self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def str_short(self) -> str:
        return f"{short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    __repr__ = str_short


def describe(x: Any) -> str:
    """Short ``f32[3,4]`` description of an array, tracer, aval or scalar."""
    if isinstance(x, (bool, int, float, complex)):
        return f"{type(x).__name__} scalar"
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return type(x).__name__
    return ShapedArray(shape, dtype).str_short()
