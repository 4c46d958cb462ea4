"""The GPU array type: an immutable funcgrad Array whose buffer is a CuPy array.

Not yet run on a GPU. The logic is exercised on the CPU
by ``tests/test_devices.py`` with a numpy-backed stand-in for CuPy (see
``_array_module``), which checks dispatch, transfers and errors, not CuPy.

How it plugs in (no GPU code in the core): :class:`GpuArray` subclasses
``funcgrad.Array``. ``eval_primitive`` sees an Array subclass among the
arguments and calls its ``_eval_primitive``, which runs the primitive's
CuPy implementation from ``cupy_impls`` or, when there is none, the numpy
reference on host copies (a one-time warning names the primitive).

Immutability: CuPy arrays have no read-only flag, so the buffer is kept
private (``_value``) and never handed out writable by funcgrad; a DLPack
export of a GPU array is zero-copy and its consumer must not write to it.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._config import config
from funcgrad._core import Array, Primitive

__all__ = ["GpuArray", "to_gpu", "to_host"]

_state: dict[str, Any] = {"xp": None, "impls": None, "triton": None}  # triton None: use it if importable
_warned: set[str] = set()


def _array_module() -> Any:
    """CuPy (imported on first use). Tests may install a stand-in here."""
    if _state["xp"] is None:
        import cupy  # noqa: PLC0415 -- optional dependency

        _state["xp"] = cupy
    return _state["xp"]


def _impls() -> dict[str, Any]:
    if _state["impls"] is None:
        from funcgrad.backends.gpu.cupy_impls import make_impls

        xp = _array_module()
        use_triton = _triton_usable() if _state["triton"] is None else _state["triton"]
        _state["impls"] = make_impls(xp, use_triton=use_triton)
    return _state["impls"]


def _triton_usable() -> bool:
    try:
        import triton  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _use_array_module(xp: Any, *, use_triton: bool | None = None) -> None:
    """Swap the device array module (tests: a numpy stand-in for CuPy)."""
    _state.update(xp=xp, impls=None, triton=use_triton)
    _warned.clear()


class GpuArray(Array):
    """An Array on the GPU (``x.device == "gpu"``); make one with ``fg.device_put``.

    >>> x = fg.device_put(fnp.arange(4.0), "gpu")   # f32[4] on the GPU
    >>> y = fnp.sin(x) * 2                           # runs with CuPy, stays there
    >>> fg.device_put(y, "cpu")                      # explicit transfer back

    Implicit transfers are refused: ``np.asarray(x)`` raises (as CuPy does);
    ``item()``, ``float()`` and ``bool()`` of a 0-d array copy one value.
    """

    __slots__ = ()

    @property
    def device(self) -> str:
        return "gpu"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"implicit transfer of a GPU array {_dtypes.describe(self)} to the host is not allowed: "
                        "use fg.device_put(x, 'cpu') (then np.asarray)")

    def item(self) -> Any:
        return to_host(self)._value.item()

    def tolist(self) -> Any:
        return to_host(self)._value.tolist()

    def __bool__(self) -> bool:
        return bool(to_host(self)._value)

    def __int__(self) -> int:
        return int(to_host(self)._value)

    def __float__(self) -> float:
        return float(to_host(self)._value)

    def __index__(self) -> int:
        return to_host(self)._value.__index__()

    def __repr__(self) -> str:
        host = _array_module().asnumpy(self._value)
        body = np.array2string(host, separator=", ", prefix="Array(")
        return f"Array({body}, dtype={host.dtype}, device='gpu')"

    def __str__(self) -> str:
        return str(_array_module().asnumpy(self._value))

    def __reduce__(self) -> Any:
        return (_gpu_array_from_numpy, (_array_module().asnumpy(self._value),))

    def _eval_primitive(self, prim: Primitive, args: Sequence[Any], params: dict) -> Any:
        """Called by ``funcgrad._core.eval_primitive`` (devices already checked)."""
        xp = _array_module()
        values = [_device_value(xp, a) for a in args]
        impl = _impls().get(prim.name)
        if impl is None:
            return _host_fallback(xp, prim, values, params)
        try:
            out = impl(*values, **params)
        except (ValueError, TypeError, IndexError) as e:
            raise _core.impl_error(prim, values, params, e) from e
        outs = [_wrap(xp, o) for o in out] if prim.multiple_results else [_wrap(xp, out)]
        if config.debug_nans:
            _core.check_nans(prim, [_host_copy(xp, v) for v in values], [to_host(o) for o in outs])
        return outs if prim.multiple_results else outs[0]


def _device_value(xp: Any, a: Any) -> Any:
    """The CuPy value of one argument: device arrays as they are; Python
    scalars stay weak; 0-d host arrays and numpy constants are uploaded."""
    if isinstance(a, GpuArray):
        return a._value
    if isinstance(a, (bool, int, float)):
        return a
    if isinstance(a, Array):
        return xp.asarray(a._value)
    return xp.asarray(_core.to_numpy_input(a))


def _host_copy(xp: Any, v: Any) -> Any:
    return v if isinstance(v, (bool, int, float)) else xp.asnumpy(v)


def _wrap(xp: Any, out: Any) -> GpuArray:
    out = xp.asarray(out)
    if out.dtype.itemsize == 8 and not config.enable_x64:
        out = out.astype(_dtypes.canonicalize(out.dtype))
    return GpuArray(out)


def _host_fallback(xp: Any, prim: Primitive, values: list, params: dict) -> Any:
    """No GPU implementation: run the numpy reference on host copies."""
    if prim.name not in _warned:
        _warned.add(prim.name)
        warnings.warn(f"funcgrad: primitive '{prim.name}' has no GPU implementation; it runs on the CPU "
                      "(numpy reference) with a copy each way", RuntimeWarning, stacklevel=4)
    host_args = [_core.Array(_core._freeze(_host_copy(xp, v))) if not isinstance(v, (bool, int, float)) else v
                 for v in values]
    out = _core.eval_primitive(prim, host_args, params)
    return [to_gpu(o) for o in out] if prim.multiple_results else to_gpu(out)


# --------------------------------------------------------------------------
# transfers
# --------------------------------------------------------------------------


def to_gpu(x: Array) -> GpuArray:
    """Copy a host Array to the GPU (a GPU array is returned as is)."""
    if isinstance(x, GpuArray):
        return x
    return GpuArray(_array_module().asarray(x._value))


def to_host(x: Array) -> Array:
    """Copy a GPU array to a read-only host Array (a host Array is returned as is)."""
    if not isinstance(x, GpuArray):
        return x
    # (not np.ascontiguousarray: it turns 0-d arrays into 1-d ones)
    return Array(_core._freeze(np.asarray(_array_module().asnumpy(x._value))))


def from_device_buffer(value: Any, copy: bool = True) -> GpuArray:
    """A GpuArray from a CuPy array (copied by default: the caller keeps a
    writable handle to its own buffer)."""
    xp = _array_module()
    dtype = _dtypes.canonicalize(value.dtype)
    if copy or dtype != value.dtype:
        value = xp.array(value, dtype=dtype, copy=True)
    return GpuArray(value)


def _gpu_array_from_numpy(value: np.ndarray) -> GpuArray:
    return GpuArray(_array_module().asarray(value))
