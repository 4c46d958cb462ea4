"""Tracers (the stand-ins for arrays while a transform runs), the errors they raise, and abstract values.

:class:`Tracer` raises :class:`ConcretizationError` where Python needs a
concrete value it does not have, and :class:`TracerArrayConversionError`
where numpy would turn it into a constant; :class:`PrimalTracer` carries the
value it stands for (jvp and vjp). ``get_aval``, ``full_like`` and
``zeros_like`` work on every kind of value (arrays, tracers, numpy, scalars).
"""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._array import Array, _freeze, _immutable_setitem, _int_overflow_message, to_numpy_input
from funcgrad._dtypes import ShapedArray, describe

# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class TracerLeakError(RuntimeError):
    """A tracer was used after the transform that created it returned.

    >>> leaked = []
    >>> _ = fg.jit(lambda x: leaked.append(x) or x)(fnp.ones(2))
    >>> try:
    ...     leaked[0] + 1
    ... except fg.TracerLeakError as e:
    ...     print(type(e).__name__)
    TracerLeakError
    """


class ConcretizationError(TypeError):
    """Python needed a concrete value (``if``, ``bool()``, ``int()``) from a traced one.

    >>> try:
    ...     fg.jit(lambda x: 1.0 if x > 0 else 0.0)(fnp.ones(()))
    ... except fg.ConcretizationError as e:
    ...     print(type(e).__name__)
    ConcretizationError
    """


class TracerArrayConversionError(TypeError):
    """A traced value was about to become a numpy array (``np.asarray(x)``, a numpy function
    that funcgrad.numpy lacks); numpy would treat it as a constant the transform cannot follow.

    >>> try:
    ...     fg.jit(lambda x: np.asarray(x))(fnp.ones(2))
    ... except fg.TracerArrayConversionError as e:
    ...     print(type(e).__name__)
    TracerArrayConversionError
    """


# The user-facing name of the transform behind each trace type.
_TRANSFORM_NAMES = {"VJPTrace": "grad", "JVPTrace": "jvp", "BatchTrace": "vmap", "JaxprTrace": "jit"}


def transform_name(tracer: "Tracer") -> str:
    """``grad``, ``jvp``, ``vmap`` or ``jit``: the transform that owns ``tracer``."""
    name = type(tracer._trace).__name__
    return _TRANSFORM_NAMES.get(name, name)


def tracer_conversion_error(tracer: "Tracer", what: str = "np.asarray() (numpy's __array__ conversion)",
                            detail: str = "") -> TracerArrayConversionError:
    """The error for ``what`` turning ``tracer`` into a numpy array (``detail``: why no funcgrad route)."""
    name = transform_name(tracer)
    return TracerArrayConversionError(
        f"{what} would turn the traced array {describe(tracer)} inside {name} into a numpy array, at "
        f"{user_source_line()}{detail}. numpy would treat the value as a constant that {name} cannot "
        "follow, so the result would be silently wrong. Use funcgrad.numpy on traced values (fnp.sin(x), "
        "not np.sin(np.asarray(x)); numpy ufuncs and functions that funcgrad.numpy also has, such as "
        "np.sin or np.sum, dispatch there by themselves); write fnp.stop_gradient(x) for a value meant "
        "as a constant; and convert to numpy only outside the transform, on its results.")


def user_source_line() -> str:
    """``file:line (function)`` of the innermost frame outside funcgrad."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# The tests live outside the package, so they count as user code.

# --------------------------------------------------------------------------
# Tracers
# --------------------------------------------------------------------------


def _leak_error(tracer: "Tracer") -> TracerLeakError:
    return TracerLeakError(
        f"a {type(tracer).__name__} ({describe(tracer)}) was used after the transform that created it "
        "returned (a leaked tracer). Values computed inside grad/vmap/jit must be returned from the "
        "function, not stored in globals, closures or attributes.")


class Tracer:
    """A stand-in for an array while a transform runs; has the array API."""

    __slots__ = ("_trace",)
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def size(self) -> int:
        return self.aval.size

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def concrete_value(self) -> Any:
        """The value behind the tracer, if this transform knows it (eager jvp/grad)."""
        raise ConcretizationError(self._concretization_message())

    def _concretization_message(self) -> str:
        return (f"a concrete value was needed from a traced array {describe(self)} "
                f"inside {type(self._trace).__name__}")

    def __bool__(self) -> bool:
        return bool(self.concrete_value())

    def __int__(self) -> int:
        return int(self.concrete_value())

    def __float__(self) -> float:
        return float(self.concrete_value())

    def __index__(self) -> int:
        return int(self.concrete_value())

    def item(self) -> Any:
        return self.concrete_value().item()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Never a silent constant, even where the value is known (grad/jvp): numpy
        # would drop the derivative. bool()/float()/.item() stay concrete on purpose.
        raise tracer_conversion_error(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}<{describe(self)}>"

    def __hash__(self) -> int:
        raise TypeError("funcgrad arrays and tracers are unhashable")


Tracer.__setitem__ = _immutable_setitem  # type: ignore[method-assign]


def as_array(x: Any) -> Any:
    """``x`` as an Array (or tracer); Python scalars become 0-d arrays of default dtype."""
    if isinstance(x, (Array, Tracer)):
        return x
    if isinstance(x, bool):
        return Array(_freeze(np.asarray(x)))
    if isinstance(x, int):
        try:
            return Array(_freeze(np.asarray(x, dtype=_dtypes.int_)))
        except OverflowError:
            raise OverflowError(_int_overflow_message(x, _dtypes.int_)) from None
    if isinstance(x, float):
        return Array(_freeze(np.asarray(x, dtype=_dtypes.float_)))
    return Array(to_numpy_input(x))


class PrimalTracer(Tracer):
    """A tracer that carries the real value it stands for (``primal``): jvp and vjp.

    Shape and dtype are read straight from the primal (they are on every hot
    path), and Python control flow works on the concrete value.
    """

    __slots__ = ("primal",)

    @property
    def aval(self) -> ShapedArray:
        return get_aval(self.primal)

    @property
    def shape(self) -> tuple[int, ...]:
        p = self.primal
        return p._value.shape if type(p) is Array else shape_of_value(p)

    @property
    def dtype(self) -> np.dtype:
        p = self.primal
        return p._value.dtype if type(p) is Array else dtype_of_value(p)

    @property
    def ndim(self) -> int:
        p = self.primal
        return p._value.ndim if type(p) is Array else len(shape_of_value(p))

    def concrete_value(self) -> Any:
        p = self.primal
        return p.concrete_value() if isinstance(p, Tracer) else p


# --------------------------------------------------------------------------
# Abstract values and constants like a value
# --------------------------------------------------------------------------


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Array:
    """A concrete array of ``x``'s shape (and dtype, unless given) holding ``fill_value``, on ``x``'s device.

    Transforms make their zero tangents, zero cotangents and seeds here: a
    constant in every transform, and "like" a device array means on its
    device too (values of two devices never meet).
    """
    aval = get_aval(x)
    dtype = aval.dtype if dtype is None else _dtypes.canonicalize(dtype)
    value = np.zeros(aval.shape, dtype) if fill_value == 0 else np.full(aval.shape, fill_value, dtype)
    out = Array(_freeze(value))
    if isinstance(x, Array) and type(x) is not Array:
        out = type(x).backend.to_device(out)
    return out


def zeros_like(x: Any, dtype: Any = None) -> Array:
    """Concrete zeros of ``x``'s shape and dtype on its device (see :func:`full_like`)."""
    return full_like(x, 0, dtype)


def shape_of_value(x: Any) -> tuple[int, ...]:
    return () if isinstance(x, (bool, int, float)) else x.shape


def dtype_of_value(x: Any) -> np.dtype:
    return _dtypes.result_type(x) if isinstance(x, (bool, int, float)) else x.dtype


def get_aval(x: Any) -> ShapedArray:
    """The abstract value of an array, tracer, numpy array or scalar."""
    if isinstance(x, (Array, Tracer)):
        return x.aval
    if isinstance(x, (bool, int, float)):
        return ShapedArray((), _dtypes.result_type(x))
    arr = np.asarray(x)
    return ShapedArray(arr.shape, _dtypes.canonicalize(arr.dtype))
