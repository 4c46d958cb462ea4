"""Operators and methods shared by Array and every Tracer."""
from __future__ import annotations

from typing import Any

from funcgrad._core import Array, Tracer
from funcgrad.numpy import _elementwise as ew
from funcgrad.numpy import _linalg as la
from funcgrad.numpy import _reductions as red
from funcgrad.numpy import _shape as sh
from funcgrad.primitives import indexing as I


def _swap(f):
    return lambda self, other: f(other, self)


def _reshape_method(self, *shape: Any) -> Any:
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    return sh.reshape(self, shape)


def _transpose_method(self, *axes: Any) -> Any:
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = tuple(axes[0])
    return sh.transpose(self, axes or None)


def _invert(self):
    if self.dtype.kind != "b":
        raise TypeError(f"~ is only supported on bool arrays here (got {self.dtype}); bitwise ops are not "
                        "primitives of funcgrad")
    return ew.logical_not(self)


_METHODS = {
    "__add__": ew.add, "__radd__": _swap(ew.add),
    "__sub__": ew.subtract, "__rsub__": _swap(ew.subtract),
    "__mul__": ew.multiply, "__rmul__": _swap(ew.multiply),
    "__truediv__": ew.divide, "__rtruediv__": _swap(ew.divide),
    "__floordiv__": ew.floor_divide, "__rfloordiv__": _swap(ew.floor_divide),
    "__mod__": ew.mod, "__rmod__": _swap(ew.mod),
    "__pow__": ew.power, "__rpow__": _swap(ew.power),
    "__matmul__": la.matmul, "__rmatmul__": _swap(la.matmul),
    "__neg__": ew.negative, "__pos__": ew.positive, "__abs__": ew.abs,
    "__lt__": ew.less, "__le__": ew.less_equal, "__gt__": ew.greater, "__ge__": ew.greater_equal,
    "__eq__": ew.equal, "__ne__": ew.not_equal,
    "__and__": ew.logical_and, "__rand__": _swap(ew.logical_and),
    "__or__": ew.logical_or, "__ror__": _swap(ew.logical_or),
    "__xor__": ew.logical_xor, "__invert__": _invert,
    "__getitem__": I.getitem,
    "reshape": _reshape_method, "transpose": _transpose_method,
    "astype": sh.astype, "flatten": sh.ravel, "ravel": sh.ravel, "squeeze": sh.squeeze,
    "swapaxes": sh.swapaxes, "repeat": sh.repeat, "take": sh.take,
    "sum": red.sum, "mean": red.mean, "max": red.max, "min": red.min, "prod": red.prod,
    "var": red.var, "std": red.std, "argmax": red.argmax, "argmin": red.argmin, "cumsum": red.cumsum,
    "clip": ew.clip, "dot": la.dot,
}

_PROPERTIES = {
    "T": property(lambda self: sh.transpose(self)),
    "at": property(lambda self: I.IndexUpdateHelper(self)),
    "real": property(lambda self: self),
}


def install() -> None:
    for cls in (Array, Tracer):
        for name, f in _METHODS.items():
            setattr(cls, name, f)
        for name, p in _PROPERTIES.items():
            setattr(cls, name, p)
    # Defining __eq__ would otherwise reset the (raising) __hash__.
    Array.__hash__ = Tracer.__hash__ = _unhashable


def _unhashable(self) -> int:
    raise TypeError("funcgrad arrays are unhashable; pass hashable values (or use static_argnums) instead")
