"""The immutable array and the conversion of user values into it.

An :class:`Array` wraps a read-only numpy buffer of a canonical dtype
(device backends subclass it). User inputs are copied, never frozen in
place, and integers that do not fit the target dtype raise instead of
wrapping around. ``funcgrad._core`` re-exports everything here.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from funcgrad import _dtypes, _host_buffers  # noqa: F401  (sets malloc's thresholds for eager buffers)
from funcgrad._config import config
from funcgrad._dtypes import ShapedArray, describe

class Array:
    """An immutable n-d array backed by a read-only numpy buffer (on the CPU).

    Create with ``funcgrad.numpy.array``; it supports numpy's operators,
    indexing and the usual methods, and ``x.at[idx].set(v)`` for functional
    updates (writing through an Array raises).

    >>> import funcgrad.numpy as fnp
    >>> x = fnp.arange(3.0)          # f32[3]
    >>> (x * 2).sum().item()
    6.0
    """

    __slots__ = ("_value",)
    __array_priority__ = 1000

    def __init__(self, value: np.ndarray):
        # Callers hand over a read-only ndarray of a canonical dtype.
        self._value = value

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self._value.shape, self._value.dtype)

    @property
    def device(self) -> str:
        return "cpu"

    def __len__(self) -> int:
        if not self._value.shape:
            raise TypeError("len() of a 0-d array")
        return self._value.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy:
            return np.array(self._value, dtype=dtype, copy=True)
        return self._value if dtype is None else self._value.astype(dtype)

    def block_until_ready(self) -> "Array":
        """This array, once computed: a host array always is (a device array waits for its device)."""
        return self

    def item(self) -> Any:
        return self._value.item()

    def tolist(self) -> Any:
        return self._value.tolist()

    def __bool__(self) -> bool:
        return bool(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def __complex__(self) -> complex:
        return complex(self._value)

    def __index__(self) -> int:
        return self._value.__index__()

    def __repr__(self) -> str:
        body = np.array2string(self._value, separator=", ", prefix="Array(")
        return f"Array({body}, dtype={self._value.dtype})"

    def __str__(self) -> str:
        return str(self._value)

    def __format__(self, format_spec: str) -> str:
        # As numpy and JAX: f"{x:.4f}" formats a 0-d array's value; an n-d array takes only
        # the empty spec (its str) and raises TypeError for any other.
        if not format_spec:
            return str(self._value)
        if self._value.ndim == 0:
            return format(self._value.item(), format_spec)
        return self._value.__format__(format_spec)

    def __hash__(self) -> int:
        raise TypeError("funcgrad arrays are unhashable")

    def __iter__(self) -> Iterator[Any]:
        if not self._value.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._value.shape[0]))

    def is_deleted(self) -> bool:
        """Whether this array was deleted (donated to a jitted function, or ``delete()``): False here.

        >>> fnp.ones(3).is_deleted()
        False
        """
        return False

    def delete(self) -> None:
        """Delete this array now (``jax.Array.delete``): its memory goes once nothing else holds it,
        and any later use raises ``RuntimeError: Array has been deleted``.

        >>> x = fnp.ones(3); x.delete(); x.is_deleted()
        True
        """
        _mark_deleted(self, f"Array has been deleted with shape={self.aval.str_short()} (x.delete() was called)")

    def __setitem__(self, index: Any, value: Any) -> None:
        _immutable_setitem(self, index, value)

    def __reduce__(self) -> Any:
        return (_array_from_numpy, (np.array(self._value),))

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """A DLPack capsule of the host buffer; a consumer can never write into funcgrad's memory.

        funcgrad buffers are read-only, and consumers do not all honour
        DLPack's READ_ONLY flag (torch ignores it and writes through it), so
        by default (``copy=None``) the consumer gets a private copy. A
        consumer that asks for no copy (``copy=False``) with a versioned
        capsule (``max_version >= (1, 0)``) gets the buffer zero-copy with
        the READ_ONLY flag set: ``np.from_dlpack(x, copy=False)`` is a
        read-only view (as is ``np.asarray(x)``). ``copy=False`` from a
        pre-1.0 consumer, which cannot be told "read-only", raises BufferError.
        (Device arrays export through their own library.)
        """
        if self._value.dtype == _dtypes.bfloat16:
            raise BufferError("bfloat16 arrays cannot be exported through DLPack on the CPU (numpy, which holds the "
                              "buffer, has no DLPack code for bfloat16). Hand over the bits instead, "
                              "np.asarray(x).view(np.uint16) (torch: .view(torch.bfloat16) on the result), or "
                              "convert first with x.astype(fnp.float32)")
        if stream is not None and stream != -1:
            # DLPack: stream is only meaningful for device arrays; -1 = "no sync needed"
            raise BufferError("stream must be None for a CPU array")
        if copy is not False:
            # A private, writable copy: whatever the consumer does, our buffer stays as it was.
            return np.array(self._value, copy=True).__dlpack__()
        if max_version is None or tuple(max_version) < (1, 0):
            raise BufferError("funcgrad arrays are read-only; this DLPack consumer asked for no copy but cannot "
                              "receive a read-only flag (it did not ask for DLPack >= 1.0): allow a copy")
        # numpy sets DLPack's READ_ONLY flag for its read-only arrays in versioned capsules.
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                    ("copy", copy)) if v is not None}
        return self._value.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._value.__dlpack_device__()

    if TYPE_CHECKING:   # for type checkers: the operators and methods funcgrad.numpy attaches at import
        def __getitem__(self, index: Any) -> Array: ...
        def __add__(self, other: Any) -> Array: ...
        def __radd__(self, other: Any) -> Array: ...
        def __sub__(self, other: Any) -> Array: ...
        def __rsub__(self, other: Any) -> Array: ...
        def __mul__(self, other: Any) -> Array: ...
        def __rmul__(self, other: Any) -> Array: ...
        def __truediv__(self, other: Any) -> Array: ...
        def __rtruediv__(self, other: Any) -> Array: ...
        def __floordiv__(self, other: Any) -> Array: ...
        def __rfloordiv__(self, other: Any) -> Array: ...
        def __mod__(self, other: Any) -> Array: ...
        def __rmod__(self, other: Any) -> Array: ...
        def __pow__(self, other: Any) -> Array: ...
        def __rpow__(self, other: Any) -> Array: ...
        def __matmul__(self, other: Any) -> Array: ...
        def __rmatmul__(self, other: Any) -> Array: ...
        def __lt__(self, other: Any) -> Array: ...
        def __le__(self, other: Any) -> Array: ...
        def __gt__(self, other: Any) -> Array: ...
        def __ge__(self, other: Any) -> Array: ...
        def __and__(self, other: Any) -> Array: ...
        def __rand__(self, other: Any) -> Array: ...
        def __or__(self, other: Any) -> Array: ...
        def __ror__(self, other: Any) -> Array: ...
        def __xor__(self, other: Any) -> Array: ...
        def __rxor__(self, other: Any) -> Array: ...
        def __lshift__(self, other: Any) -> Array: ...
        def __rlshift__(self, other: Any) -> Array: ...
        def __rshift__(self, other: Any) -> Array: ...
        def __rrshift__(self, other: Any) -> Array: ...
        def __eq__(self, other: object) -> Array: ...  # type: ignore[override]
        def __ne__(self, other: object) -> Array: ...  # type: ignore[override]
        def __neg__(self) -> Array: ...
        def __pos__(self) -> Array: ...
        def __abs__(self) -> Array: ...
        def __invert__(self) -> Array: ...
        def reshape(self, *args: Any, **kwargs: Any) -> Array: ...
        def transpose(self, *args: Any, **kwargs: Any) -> Array: ...
        def astype(self, *args: Any, **kwargs: Any) -> Array: ...
        def flatten(self, *args: Any, **kwargs: Any) -> Array: ...
        def ravel(self, *args: Any, **kwargs: Any) -> Array: ...
        def squeeze(self, *args: Any, **kwargs: Any) -> Array: ...
        def swapaxes(self, *args: Any, **kwargs: Any) -> Array: ...
        def repeat(self, *args: Any, **kwargs: Any) -> Array: ...
        def take(self, *args: Any, **kwargs: Any) -> Array: ...
        def sum(self, *args: Any, **kwargs: Any) -> Array: ...
        def mean(self, *args: Any, **kwargs: Any) -> Array: ...
        def max(self, *args: Any, **kwargs: Any) -> Array: ...
        def min(self, *args: Any, **kwargs: Any) -> Array: ...
        def prod(self, *args: Any, **kwargs: Any) -> Array: ...
        def var(self, *args: Any, **kwargs: Any) -> Array: ...
        def std(self, *args: Any, **kwargs: Any) -> Array: ...
        def argmax(self, *args: Any, **kwargs: Any) -> Array: ...
        def argmin(self, *args: Any, **kwargs: Any) -> Array: ...
        def cumsum(self, *args: Any, **kwargs: Any) -> Array: ...
        def cumprod(self, *args: Any, **kwargs: Any) -> Array: ...
        def clip(self, *args: Any, **kwargs: Any) -> Array: ...
        def dot(self, *args: Any, **kwargs: Any) -> Array: ...
        def conj(self, *args: Any, **kwargs: Any) -> Array: ...
        def conjugate(self, *args: Any, **kwargs: Any) -> Array: ...
        def all(self, *args: Any, **kwargs: Any) -> Array: ...
        def any(self, *args: Any, **kwargs: Any) -> Array: ...
        def argpartition(self, *args: Any, **kwargs: Any) -> Array: ...
        def argsort(self, *args: Any, **kwargs: Any) -> Array: ...
        def choose(self, *args: Any, **kwargs: Any) -> Array: ...
        def copy(self, *args: Any, **kwargs: Any) -> Array: ...
        def diagonal(self, *args: Any, **kwargs: Any) -> Array: ...
        def ptp(self, *args: Any, **kwargs: Any) -> Array: ...
        def round(self, *args: Any, **kwargs: Any) -> Array: ...
        def searchsorted(self, *args: Any, **kwargs: Any) -> Array: ...
        def sort(self, *args: Any, **kwargs: Any) -> Array: ...
        def trace(self, *args: Any, **kwargs: Any) -> Array: ...
        def compress(self, *args: Any, **kwargs: Any) -> Array: ...
        def nonzero(self, *args: Any, **kwargs: Any) -> tuple[Array, ...]: ...
        def tobytes(self, order: str = "C") -> bytes: ...
        @property
        def T(self) -> Array: ...
        @property
        def mT(self) -> Array: ...
        @property
        def real(self) -> Array: ...
        @property
        def imag(self) -> Array: ...
        @property
        def at(self) -> Any: ...
        @property
        def itemsize(self) -> int: ...
        @property
        def nbytes(self) -> int: ...


class _Deleted:
    """What a deleted array's ``_value`` becomes: the message its uses raise (or a function
    writing it)."""

    __slots__ = ("message",)

    def __init__(self, message: Any):
        self.message = message


class DeletedArray(Array):
    """A deleted :class:`Array` (donated to a jitted function, or ``delete()``): every use
    raises ``RuntimeError`` saying so; ``is_deleted()`` is True."""

    __slots__ = ()
    _allowed = frozenset({"is_deleted", "delete", "__class__", "__repr__", "__str__", "_message"})

    def __getattribute__(self, name: str) -> Any:
        if name in DeletedArray._allowed:
            return object.__getattribute__(self, name)
        raise RuntimeError(object.__getattribute__(self, "_message")())

    def _message(self) -> str:
        message = Array._value.__get__(self).message
        return message() if callable(message) else message

    def is_deleted(self) -> bool:
        return True

    def delete(self) -> None:
        """Deleting a deleted array does nothing (as in JAX)."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError(self._message())

    def __repr__(self) -> str:
        return f"<deleted Array: {self._message()}>"

    __str__ = __repr__


def _mark_deleted(array: Array, message: Any) -> None:
    """Delete ``array`` in place: it drops its buffer and every later use raises ``message``."""
    array._value = _Deleted(message)
    array.__class__ = DeletedArray


def _immutable_setitem(self: Any, index: Any, value: Any) -> None:
    # Shared by Array and every Tracer: x[i] = v must fail the same way inside
    # grad/jit/vmap as outside (not with an AttributeError on the tracer).
    raise TypeError(
        f"funcgrad arrays are immutable: item assignment to an array {describe(self)} is not supported. "
        "Use the functional update x = x.at[index].set(value) (or .add(value)) instead.")


def _array_from_numpy(value: np.ndarray) -> Array:
    return Array(_freeze(value))


def _freeze(value: np.ndarray) -> np.ndarray:
    value.setflags(write=False)
    return value


# Host arrays placed on the CPU explicitly (``fg.device_put(x, "cpu")``): "committed", as JAX calls it.
# Keyed by the id of the read-only buffer, with a weak reference that drops the entry with the buffer.
_committed_buffers: dict[int, Any] = {}


def commit_to_host(x: Array) -> Array:
    """Mark the host array ``x`` as placed on the CPU on purpose: mixing it with device arrays raises
    instead of uploading it (see :func:`_apply_on_device`). Returns ``x``."""
    key = id(x._value)
    _committed_buffers[key] = weakref.ref(x._value, lambda _, key=key: _committed_buffers.pop(key, None))
    return x


def is_committed(x: Array) -> bool:
    """Whether the host array ``x`` was placed on the CPU with ``device_put`` (see :func:`commit_to_host`)."""
    ref = _committed_buffers.get(id(x._value))
    return ref is not None and ref() is x._value



def host_numpy(x: Any) -> np.ndarray:
    """The numpy value of a concrete array wherever it lives: a device array (an Array subclass naming its
    ``backend``) is copied to the host. For values the host needs: data-dependent shapes, checks of
    concrete arguments.

    >>> host_numpy(fnp.arange(3))       # from a GPU array too, where a plain np.asarray refuses
    array([0, 1, 2], dtype=int32)
    """
    if isinstance(x, Array) and type(x) is not Array:
        return np.asarray(type(x).backend.host_value(x._value))
    return np.asarray(x._value if isinstance(x, Array) else x)


def to_numpy_input(x: Any) -> Any:
    """A read-only numpy value of canonical dtype for a user input.

    User numpy arrays are copied (never frozen in place: we must not change
    the user's array, and we must not alias memory the user can still write).
    Python scalars pass through unchanged so that numpy keeps them weak.
    """
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, complex):   # a Python complex: the default complex dtype (complex64 without x64), as JAX
        return _freeze(np.asarray(x, dtype=_dtypes.complex_))
    if isinstance(x, np.ndarray):
        return _freeze(_cast_checked(x, _dtypes.canonicalize(x.dtype), copy=True))
    if isinstance(x, np.generic):
        return _freeze(_cast_checked(np.asarray(x), _dtypes.canonicalize(x.dtype)))
    if isinstance(x, (list, tuple)):
        try:
            arr = np.asarray(x)
        except ValueError as e:   # ragged nesting
            raise ValueError(f"cannot convert a nested {type(x).__name__} to an array: {e}") from None
        if arr.dtype == object:
            _reject_object_items(x, arr)
        if _dtypes.kind(arr.dtype) not in "biufc":
            raise TypeError(f"cannot make a funcgrad array from {type(x).__name__} {x!r:.60}: numpy reads it as "
                            f"dtype {arr.dtype} ({_dtypes.kind_name(arr.dtype)}), but funcgrad arrays hold bool, "
                            "integer, float and complex values only. Convert the items to numbers first.")
        return _freeze(_cast_checked(arr, _default_dtype_for(arr)))
    if hasattr(x, "__array__"):
        return to_numpy_input(np.asarray(x))
    raise TypeError(f"expected an array, a numpy array or a Python scalar, got {type(x).__name__}: {x!r:.80}")


def _reject_object_items(x: Any, arr: np.ndarray) -> None:
    # numpy keeps Python ints beyond 64 bits as objects
    big = [v for v in arr.ravel() if isinstance(v, int) and not -2 ** 63 <= v < 2 ** 64]
    if big:
        raise OverflowError(_int_overflow_message(big[0], _dtypes.int_))
    raise TypeError(f"cannot convert {type(x).__name__} of mixed or nested non-numeric items to an array: "
                    f"{x!r:.60}")


def _cast_checked(arr: np.ndarray, dtype: np.dtype, copy: bool = False) -> np.ndarray:
    """``arr`` as ``dtype``; an integer that does not fit raises OverflowError instead of wrapping around.

    (Narrowing int64 to int32 without x64 would otherwise turn 2**40 into 0.)
    """
    src = arr.dtype
    if src is dtype:   # builtin dtypes are singletons: cheaper than ==
        return arr.copy() if copy else arr
    if src.kind in "iu" and dtype.kind in "iu" and arr.size:
        low, high = _int_bounds(dtype)
        # Small inputs (lists of Python ints) are checked in Python: numpy's min/max cost microseconds each.
        values = arr.ravel().tolist() if arr.size <= 64 else None
        lo, hi = (min(values), max(values)) if values is not None else (int(arr.min()), int(arr.max()))
        if lo < low or hi > high:
            raise OverflowError(_int_overflow_message(hi if hi > high else lo, dtype))
    return arr.astype(dtype)


_INT_BOUNDS: dict = {}


def _int_bounds(dtype: np.dtype) -> tuple[int, int]:
    bounds = _INT_BOUNDS.get(dtype)
    if bounds is None:
        info = np.iinfo(dtype)
        bounds = _INT_BOUNDS[dtype] = (int(info.min), int(info.max))
    return bounds


def _int_overflow_message(value: int, dtype: np.dtype) -> str:
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    fit = f" (range [{info.min}, {info.max}])" if info else ""
    hint = ("funcgrad stores integers in 32 bits unless 64-bit types are enabled: use a float, or enable x64 "
            "with fg.config.update('enable_x64', True)" if not config.enable_x64 and dtype.itemsize < 8
            else "use a float, or a smaller value")
    return f"integer {value} is too large to convert to {dtype}{fit}; {hint}"


def _default_dtype_for(arr: np.ndarray) -> np.dtype:
    # Python lists of floats become the default float (float32), as in JAX; lists of typed scalars
    # (np.float16, fnp.bfloat16) keep their dtype, as in JAX.
    if _dtypes.kind(arr.dtype) == "f":
        return _dtypes.float_ if arr.dtype == np.float64 else arr.dtype
    if arr.dtype.kind == "c":   # Python complex numbers: complex64 without x64, as JAX
        return _dtypes.complex_
    if arr.dtype.kind in "iu":
        return _dtypes.canonicalize(arr.dtype)
    return arr.dtype


def _wrap(out: Any) -> Array:
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if out.dtype.itemsize >= 8 and not config.enable_x64:   # 64-bit values (complex128: 16 bytes) are narrowed
        target = _dtypes.canonicalize(out.dtype)
        if target != out.dtype:   # complex64 is 8 bytes and stays
            out = out.astype(target)
    out.setflags(False)   # write=False: cheaper than out.flags.writeable = False (no flags object)
    array = _new_array(Array)   # skips a Python-level __init__ frame on the hottest path
    array._value = out
    return array


_new_array = object.__new__
