"""Devices, explicit transfers and DLPack exchange.

funcgrad has two devices: ``"cpu"`` (numpy buffers, always present) and
``"gpu"`` (CuPy buffers on the current CUDA device, when CuPy can compute
on one). Arrays are created on the CPU; moving them is explicit:

>>> import funcgrad as fg, funcgrad.numpy as fnp
>>> fg.devices()                     # ['cpu'] here; ['cpu', 'gpu'] with a usable GPU
>>> x = fnp.ones((2, 3))             # f32[2,3] on 'cpu'
>>> x.device
'cpu'
>>> g = fg.device_put(x, "gpu")      # RuntimeError("no usable GPU: ...") without one

Primitives run where their array arguments live; arrays of two devices in
one primitive raise a ValueError naming the primitive and both devices.
Python scalars and 0-d host arrays travel along (gradient seeds are such
values); user numpy arrays are host data and need a ``device_put``. ``fg.default_device()`` is where ``device_put(x)`` without a device
sends arrays: ``FUNCGRAD_DEVICE=gpu`` in the environment or
``fg.set_default_device("gpu")``.

DLPack: ``np.from_dlpack(fg_array, copy=False)`` shares the buffer
read-only (a plain ``np.from_dlpack``/``torch.from_dlpack`` gets a copy:
torch ignores DLPack's read-only flag); ``fg.from_dlpack(obj)`` imports any
DLPack producer (numpy, torch, CuPy) zero-copy.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._core import Array, Tracer
from funcgrad.tree_util import tree_map

__all__ = ["default_device", "device_put", "devices", "from_dlpack", "set_default_device"]

_DEVICES = ("cpu", "gpu")
_default: list[str | None] = [None]  # set_default_device's choice; None: the environment decides

# DLPack device types (dlpack.h, DLDeviceType)
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


def _gpu_check() -> None:
    """Raise a RuntimeError naming why there is no usable GPU."""
    from funcgrad.backends.gpu import _detect
    if not _detect.gpu_available():
        raise RuntimeError(f"no usable GPU: {_detect.gpu_unavailable_reason()}")


def _gpu_present() -> bool:
    from funcgrad.backends.gpu import _detect
    return _detect.gpu_available()


def devices() -> list[str]:
    """The usable devices: ``["cpu"]``, plus ``"gpu"`` when CuPy can compute on one.

    Never raises (GPU detection swallows every error and is cached).
    """
    return ["cpu", "gpu"] if _gpu_present() else ["cpu"]


def _check_name(device: Any) -> str:
    name = str(device).strip().lower()
    if name not in _DEVICES:
        raise ValueError(f"unknown device {device!r}: expected one of {', '.join(map(repr, _DEVICES))}")
    return name


def set_default_device(device: str) -> None:
    """Make ``device`` the target of ``device_put(x)`` without a device.

    Raises RuntimeError("no usable GPU: ...") for ``"gpu"`` without one.
    """
    name = _check_name(device)
    if name == "gpu":
        _gpu_check()
    _default[0] = name


def default_device() -> str:
    """``set_default_device``'s choice, else ``$FUNCGRAD_DEVICE``, else ``"cpu"``.

    A ``FUNCGRAD_DEVICE=gpu`` on a machine without a usable GPU raises here
    (at first use, not at import), naming the reason.
    """
    if _default[0] is not None:
        return _default[0]
    env = os.environ.get("FUNCGRAD_DEVICE", "").strip()
    if not env:
        return "cpu"
    try:
        name = _check_name(env)
    except ValueError as e:
        raise ValueError(f"FUNCGRAD_DEVICE: {e}") from None
    if name == "gpu":
        try:
            _gpu_check()
        except RuntimeError as e:
            raise RuntimeError(f"{e} (FUNCGRAD_DEVICE=gpu is set)") from None
    return name


def device_put(x: Any, device: str | None = None) -> Any:
    """Copy every array leaf of the pytree ``x`` to ``device`` (default:
    :func:`default_device`). Leaves already there are returned unchanged.

    >>> g = device_put({"w": fnp.ones((3, 2))}, "gpu")   # {"w": f32[3,2] on 'gpu'}
    >>> device_put(g, "cpu")["w"].device
    'cpu'

    Numpy arrays, lists and Python scalars become arrays on ``device``.
    Inside ``jit``/``grad``/``vmap`` arrays are abstract and have no
    placement yet: ``device_put`` of a traced value raises a TypeError (move
    the arguments before calling the transformed function).
    """
    name = default_device() if device is None else _check_name(device)
    if name == "gpu":
        _gpu_check()
    return tree_map(lambda leaf: _put_leaf(leaf, name), x)


def _put_leaf(x: Any, device: str) -> Any:
    if isinstance(x, Tracer):
        raise TypeError(f"device_put of a traced value {_dtypes.describe(x)} inside a transform (jit/grad/vmap) "
                        "is not supported: transfers are explicit and happen outside transforms; move the "
                        "arguments with fg.device_put before calling the transformed function")
    if not isinstance(x, Array):
        if _is_cupy(x):
            from funcgrad.backends.gpu import array as gpu_array
            x = gpu_array.from_device_buffer(x, copy=True)
        else:
            x = _core.as_array(x)
    if x.device == device:
        return x
    from funcgrad.backends.gpu import array as gpu_array
    return gpu_array.to_gpu(x) if device == "gpu" else gpu_array.to_host(x)


def _is_cupy(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


# --------------------------------------------------------------------------
# DLPack
# --------------------------------------------------------------------------


def export_dlpack(x: Array, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                  copy: Any = None) -> Any:
    """``Array.__dlpack__``: a DLPack capsule of ``x``'s buffer.

    CPU arrays: funcgrad buffers are read-only, and consumers do not all
    honour DLPack's READ_ONLY flag (torch 2.13 ignores it and writes through
    it), so by default (``copy=None``) the consumer gets a private copy.
    A consumer that asks for no copy (``copy=False``) with a versioned
    capsule (``max_version >= (1, 0)``) gets the buffer zero-copy with the
    READ_ONLY flag set: ``np.from_dlpack(x, copy=False)`` returns a read-only
    view of funcgrad's memory (as does ``np.asarray(x)``). ``copy=False``
    from a pre-1.0 consumer, which cannot be told "read-only", raises
    BufferError.

    GPU arrays: exported zero-copy through CuPy (CuPy cannot flag read-only;
    the consumer must not write).
    """
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                ("copy", copy)) if v is not None}
    value = x._value
    if not isinstance(value, np.ndarray):  # a device buffer: its library exports it
        return value.__dlpack__(**kwargs)
    if stream is not None and stream != -1:
        # DLPack: stream is only meaningful for device arrays; -1 = "no sync needed"
        raise BufferError("stream must be None for a CPU array")
    if copy is not False:
        # A private, writable copy: whatever the consumer does, our buffer stays as it was.
        return np.array(value, copy=True).__dlpack__()
    if max_version is None or tuple(max_version) < (1, 0):
        raise BufferError("funcgrad arrays are read-only; this DLPack consumer asked for no copy but cannot "
                          "receive a read-only flag (it did not ask for DLPack >= 1.0): allow a copy")
    # numpy sets DLPack's READ_ONLY flag for its read-only arrays in versioned capsules.
    return value.__dlpack__(**kwargs)


def from_dlpack(obj: Any, *, copy: bool | None = None) -> Array:
    """An Array from any DLPack producer (numpy, torch, CuPy, JAX, ...).

    CPU buffers become CPU arrays, CUDA buffers GPU arrays (needs a usable
    GPU). With ``copy=None`` (default, as in the Array API standard) the
    buffer is shared when its dtype is already canonical: zero-copy, and
    funcgrad treats it as immutable, so **the producer must not write to it
    afterwards** (pass ``copy=True`` to take a private copy). float64/int64
    data without x64 is narrowed, which copies.

    >>> t = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> x = fg.from_dlpack(t)           # f32[2,3], shares t's memory, read-only view
    """
    if not hasattr(obj, "__dlpack_device__"):
        raise TypeError(f"from_dlpack: {type(obj).__name__} does not implement the DLPack protocol "
                        "(__dlpack__ and __dlpack_device__)")
    device_type = int(obj.__dlpack_device__()[0])
    if device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
        _gpu_check()
        from funcgrad.backends.gpu import array as gpu_array
        value = gpu_array._array_module().from_dlpack(obj)
        return gpu_array.from_device_buffer(value, copy=bool(copy))
    if device_type not in (_DL_CPU, _DL_CUDA_HOST):
        raise BufferError(f"from_dlpack: DLPack device type {device_type} is not supported (CPU and CUDA are)")
    if copy is False:
        value = np.from_dlpack(obj, copy=False)
    else:
        value = np.from_dlpack(obj)
    dtype = _dtypes.canonicalize(value.dtype)
    if copy or dtype != value.dtype:
        if copy is False:
            raise BufferError(f"from_dlpack: {value.dtype} data is stored as {dtype} (x64 is disabled), "
                              "which needs a copy, but copy=False")
        value = np.array(value, dtype=dtype, copy=True)
    else:
        value = value.view()  # our own view object: freezing it leaves the producer's flags alone
    return Array(_core._freeze(value))
