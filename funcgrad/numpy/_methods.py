"""Operators and methods shared by Array and every Tracer."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad.numpy import _elementwise as ew
from funcgrad.numpy import _linalg as la
from funcgrad.numpy import _reductions as red
from funcgrad.numpy import _shape as sh
from funcgrad import lax


def _no_sharding(op: str, out_sharding: Any) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"{op}: out_sharding is not supported (funcgrad runs on one device); leave it None")


class _IndexUpdateRef:
    """``x.at[index]``: the methods below return a new array; ``x`` is never changed.

    Out-of-bounds indices follow JAX: ``get`` clamps them by default (``mode="fill"`` gives
    ``fill_value`` instead), the updates drop them by default (``mode="clip"`` clamps).
    ``indices_are_sorted`` and ``unique_indices`` are hints (``unique_indices=True`` also lets
    ``mul/min/max/power/apply`` run with traced index arrays).
    """

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array, self.index = array, index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({describe(self.array)}, {self.index!r:.60})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            fill_value: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[index]``; out-of-bounds indices clamp (``mode="fill"``: ``fill_value``, default NaN)."""
        _no_sharding("at[...].get", out_sharding)
        if mode == "wrap":
            raise ValueError('at[...].get: unknown gather mode "wrap"; expected clip, fill or promise_in_bounds')
        return lax.getitem(self.array, self.index, mode, fill_value, wrap_negative_indices=wrap_negative_indices,
                           op="at[...].get")

    def set(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] = values``; out-of-bounds updates are dropped (``mode="clip"``: clamped)."""
        _no_sharding("at[...].set", out_sharding)
        return lax.scatter(self.array, self.index, values, op="at[...].set", mode=mode,
                           wrap_negative_indices=wrap_negative_indices)

    def add(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] += values`` (duplicate indices accumulate)."""
        _no_sharding("at[...].add", out_sharding)
        return lax.scatter_add(self.array, self.index, values, op="at[...].add", mode=mode,
                               wrap_negative_indices=wrap_negative_indices)

    def subtract(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] -= values``."""
        _no_sharding("at[...].subtract", out_sharding)
        return lax.scatter_add(self.array, self.index, ew.negative(values), op="at[...].subtract", mode=mode,
                               wrap_negative_indices=wrap_negative_indices)

    def _combine(self, name: str, combine: Any, values: Any, unique_indices: bool, mode: Any,
                 out_sharding: Any, wrap_negative_indices: bool, multiply: bool = False) -> Any:
        _no_sharding(f"at[...].{name}", out_sharding)
        return lax.scatter_combine(self.array, self.index, values, combine, f"at[...].{name}", mode,
                                   unique_indices=unique_indices, wrap_negative_indices=wrap_negative_indices,
                                   multiply=multiply)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] *= values`` (duplicate indices multiply in turn)."""
        return self._combine("multiply", ew.multiply, values, unique_indices, mode, out_sharding,
                             wrap_negative_indices, multiply=True)

    mul = multiply

    def divide(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
               mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] /= values``."""
        return self._combine("divide", ew.multiply, ew.divide(1, values), unique_indices, mode, out_sharding,
                             wrap_negative_indices, multiply=True)

    def power(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] **= values``."""
        return self._combine("power", ew.power, values, unique_indices, mode, out_sharding, wrap_negative_indices)

    def min(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] = minimum(x[index], values)`` (every duplicate index applied)."""
        _no_sharding("at[...].min", out_sharding)
        return lax._scatter_min_at(self.array, self.index, values, "at[...].min", mode,
                                   wrap_negative_indices=wrap_negative_indices)

    def max(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] = maximum(x[index], values)`` (every duplicate index applied)."""
        _no_sharding("at[...].max", out_sharding)
        return lax._scatter_max_at(self.array, self.index, values, "at[...].max", mode,
                                   wrap_negative_indices=wrap_negative_indices)

    def apply(self, func: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """A copy with ``x[index] = func(x[index])`` (``func`` elementwise; once per occurrence of an index).

        >>> fnp.arange(3.).at[1].apply(fnp.sin)     # Array([0., 0.841..., 2.])
        Array([0.      , 0.8415, 2.      ], dtype=float32)
        """
        return self._combine("apply", lambda old, _: func(old), 0, unique_indices, mode, None,
                             wrap_negative_indices)


class IndexUpdateHelper:
    """``x.at[index].set(v)`` / ``.add(v)`` / ``.get()``: functional updates.

    >>> x = fnp.zeros(3)
    >>> x.at[1].set(5.0)     # Array([0., 5., 0.]); x is unchanged
    Array([0., 5., 0.], dtype=float32)
    """

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)


def _swap(f):
    return lambda self, other: f(other, self)


def _reshape_method(self, *shape: Any) -> Any:
    # x.reshape(2, 3) and x.reshape((2, 3)); the shape normaliser checks either form.
    return sh.reshape(self, shape[0] if len(shape) == 1 else shape)


def _transpose_method(self, *axes: Any) -> Any:
    # x.transpose(), x.transpose(1, 0) and x.transpose((1, 0)) / x.transpose(None).
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    return sh.transpose(self, axes or None)


# & | ^ ~ are numpy's bitwise ufuncs.  On bool arrays they are logical and/or/xor/not,
# which is all funcgrad implements: on floats numpy refuses them, and on integers
# they are bitwise, so treating either as logical would give silently wrong results.
_BIT_OPS = {"&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor", "~": "invert", "<<": "left_shift",
            ">>": "right_shift"}


def _is_bool_operand(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_)) or (hasattr(x, "dtype") and getattr(x.dtype, "kind", None) == "b")


def _bit_op_error(symbol: str, *operands: Any) -> TypeError:
    types = " and ".join(describe(x) for x in operands)
    if symbol in ("<<", ">>"):
        fix = "funcgrad has no bit shifts: multiply or floor-divide by a power of 2 instead"
    else:
        fix = ("funcgrad applies & | ^ ~ to bool arrays only, as logical and/or/xor/not (it has no bitwise "
               "integer operations): compare first, e.g. (x > 0) & (y > 0), or use fnp.logical_and/logical_or/"
               "logical_xor/logical_not, which take any dtype")
    return TypeError(f"operator {symbol} (numpy's ufunc '{_BIT_OPS[symbol]}') is not supported for the input "
                     f"types {types}: {fix}")


def _logical_operator(symbol: str, f, reflected: bool = False):
    def op(self, other):
        if not (_is_bool_operand(self) and _is_bool_operand(other)):
            raise _bit_op_error(symbol, *((other, self) if reflected else (self, other)))
        return f(other, self) if reflected else f(self, other)
    return op


def _shift_operator(symbol: str, reflected: bool = False):
    def op(self, other):
        raise _bit_op_error(symbol, *((other, self) if reflected else (self, other)))
    return op


def _invert(self):
    if self.dtype.kind != "b":
        raise _bit_op_error("~", self)
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
    "__and__": _logical_operator("&", ew.logical_and), "__rand__": _logical_operator("&", ew.logical_and, True),
    "__or__": _logical_operator("|", ew.logical_or), "__ror__": _logical_operator("|", ew.logical_or, True),
    "__xor__": _logical_operator("^", ew.logical_xor), "__rxor__": _logical_operator("^", ew.logical_xor, True),
    "__invert__": _invert,
    "__lshift__": _shift_operator("<<"), "__rlshift__": _shift_operator("<<", True),
    "__rshift__": _shift_operator(">>"), "__rrshift__": _shift_operator(">>", True),
    "__getitem__": lax.getitem,
    "reshape": _reshape_method, "transpose": _transpose_method,
    "astype": sh.astype, "flatten": sh.ravel, "ravel": sh.ravel, "squeeze": sh.squeeze,
    "swapaxes": sh.swapaxes, "repeat": sh.repeat, "take": sh.take,
    "sum": red.sum, "mean": red.mean, "max": red.max, "min": red.min, "prod": red.prod,
    "var": red.var, "std": red.std, "argmax": red.argmax, "argmin": red.argmin, "cumsum": red.cumsum,
    "clip": ew.clip, "dot": la.dot,
}

_PROPERTIES = {
    "T": property(lambda self: sh.transpose(self)),
    "at": property(lambda self: IndexUpdateHelper(self)),
    "real": property(lambda self: _complex().real(self)),
    "imag": property(lambda self: _complex().imag(self)),
}


def _complex():
    from funcgrad.numpy import _complex as c   # imported after this module
    return c


def _conj_method(self):
    return _complex().conj(self)


_METHODS["conj"] = _METHODS["conjugate"] = _conj_method


def _late_methods(fnp: Any) -> dict:
    """Methods whose functions live in modules imported after this one (jax.Array's method names);
    ``fnp`` is the funcgrad.numpy namespace, handed over by the package (importing it here would be a cycle)."""

    def compress(self, condition, axis=None, *, out=None, size=None, fill_value=0):
        return fnp.compress(condition, self, axis, out=out, size=size, fill_value=fill_value)

    def tobytes(self, order="C"):
        return np.asarray(self).tobytes(order)

    methods = {name: getattr(fnp, name) for name in (
        "all", "any", "argpartition", "argsort", "choose", "copy", "cumprod", "diagonal", "nonzero", "ptp",
        "round", "searchsorted", "sort", "trace")}
    methods.update(compress=compress, tobytes=tobytes)
    properties = {
        "mT": property(lambda self: fnp.matrix_transpose(self)),
        "itemsize": property(lambda self: np.dtype(self.dtype).itemsize),
        "nbytes": property(lambda self: np.dtype(self.dtype).itemsize * int(np.prod(self.shape, dtype=np.int64))),
    }
    return {**methods, **properties}


def install(fnp: Any) -> None:
    for cls in (Array, Tracer):
        for name, f in _late_methods(fnp).items():
            setattr(cls, name, f)
        for name, f in _METHODS.items():
            setattr(cls, name, f)
        for name, p in _PROPERTIES.items():
            setattr(cls, name, p)
    # Defining __eq__ would otherwise reset the (raising) __hash__.
    Array.__hash__ = Tracer.__hash__ = _unhashable


def _unhashable(self) -> int:
    raise TypeError("funcgrad arrays are unhashable; pass hashable values (or use static_argnums) instead")
