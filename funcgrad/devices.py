"""Devices, explicit transfers and DLPack exchange.

funcgrad has two devices: ``"cpu"`` (numpy buffers, always present) and
``"gpu"`` (CuPy buffers on the current CUDA device, when CuPy can compute
on one). Arrays are created on the CPU; moving them is explicit:

>>> import funcgrad as fg, funcgrad.numpy as fnp
>>> "cpu" in fg.devices()            # ['cpu'], or ['cpu', 'gpu'] with a usable GPU
True
>>> x = fnp.ones((2, 3))             # f32[2,3] on 'cpu'
>>> x.device
'cpu'
>>> g = fg.device_put(x, "gpu")      # doctest: +SKIP

(without a usable GPU that raises ``RuntimeError("no usable GPU: ...")``).
Primitives run where their array arguments live. As in JAX, host data that
nobody placed -- arrays made by funcgrad functions (``fnp.arange(3)``,
constants inside library functions), user numpy arrays, Python scalars --
is *uncommitted*: it moves to the GPU when it meets GPU arrays. Arrays
placed with ``fg.device_put(x, "cpu")`` are *committed* to the CPU: meeting
GPU arrays raises a ValueError naming the primitive and both devices
(JAX commits the results of computations on committed arrays too; funcgrad
only the arrays ``device_put`` returned). ``fg.default_device()`` is where ``device_put(x)`` without a device
sends arrays: ``FUNCGRAD_DEVICE=gpu`` in the environment or
``fg.set_default_device("gpu")``.

The devices are the registered backends (``funcgrad/backends/<name>/``,
see :mod:`funcgrad.backends`), discovered on first use; the host's is
``"cpu"``. A transfer between two devices goes through the host.

DLPack: ``np.from_dlpack(fg_array, copy=False)`` shares the buffer
read-only (a plain ``np.from_dlpack``/``torch.from_dlpack`` gets a copy:
torch ignores DLPack's read-only flag); ``fg.from_dlpack(obj)`` imports any
DLPack producer (numpy, torch, CuPy) zero-copy.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from typing import Any

import numpy as np

import funcgrad.backends as _backends_pkg
from funcgrad import _core, _dtypes
from funcgrad._core import Array, Tracer
from funcgrad.backends import Backend, get_backend, registered_backends
from funcgrad.tree_util import tree_map

__all__ = ["default_device", "device_put", "devices", "from_dlpack", "set_default_device"]

_default: list[str | None] = [None]  # set_default_device's choice; None: the environment decides
_discovered = [False]

# DLPack device types (dlpack.h, DLDeviceType) whose memory numpy reads on the host
_DL_HOST_TYPES = (1, 3)   # CPU, CUDA pinned host memory


def _backends() -> dict[str, Backend]:
    """Every backend (imported on first use from ``funcgrad/backends/<name>/``), the host's first."""
    if not _discovered[0]:
        for info in pkgutil.iter_modules(_backends_pkg.__path__):
            if info.ispkg:
                importlib.import_module(f"{_backends_pkg.__name__}.{info.name}")
        _discovered[0] = True
    found = registered_backends()
    return {name: found[name] for name in sorted(found, key=lambda n: (found[n].array_type is not Array, n))}


def _require(name: str) -> Backend:
    """The backend ``name``; a RuntimeError naming why when it cannot run on this machine."""
    backend = get_backend(name)
    if not backend.available():
        raise RuntimeError(f"no usable {name.upper()}: {backend.unavailable_reason()}")
    return backend


def devices() -> list[str]:
    """The usable devices: ``["cpu"]``, plus ``"gpu"`` when CuPy can compute on one.

    Never raises (GPU detection swallows every error and is cached).

    >>> fg.devices()[0]
    'cpu'
    """
    return [name for name, backend in _backends().items() if backend.available()]


def _check_name(device: Any) -> str:
    name = str(device).strip().lower()
    known = _backends()
    if name not in known:
        raise ValueError(f"unknown device {device!r}: expected one of {', '.join(map(repr, known))}")
    return name


def set_default_device(device: str) -> None:
    """Make ``device`` the target of ``device_put(x)`` without a device.

    Raises RuntimeError("no usable GPU: ...") for ``"gpu"`` without one.

    >>> old = fg.default_device()
    >>> fg.set_default_device("cpu")
    >>> fg.default_device()
    'cpu'
    >>> fg.set_default_device(old)
    """
    name = _check_name(device)
    _require(name)
    _default[0] = name


def default_device() -> str:
    """``set_default_device``'s choice, else ``$FUNCGRAD_DEVICE``, else ``"cpu"``.

    A ``FUNCGRAD_DEVICE=gpu`` on a machine without a usable GPU raises here
    (at first use, not at import), naming the reason.

    >>> fg.default_device() in fg.devices()
    True
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
    try:
        _require(name)
    except RuntimeError as e:
        raise RuntimeError(f"{e} (FUNCGRAD_DEVICE={name} is set)") from None
    return name


def device_put(x: Any, device: str | None = None) -> Any:
    """Copy every array leaf of the pytree ``x`` to ``device`` (default:
    :func:`default_device`). Leaves already there are returned unchanged.

    >>> g = fg.device_put({"w": fnp.ones((3, 2))}, fg.default_device())   # "gpu" with a usable GPU
    >>> device_put(g, "cpu")["w"].device
    'cpu'

    Numpy arrays, lists and Python scalars become arrays on ``device``.
    Inside ``jit``/``grad``/``vmap`` arrays are abstract and have no
    placement yet: ``device_put`` of a traced value raises a TypeError (move
    the arguments before calling the transformed function).
    """
    name = default_device() if device is None else _check_name(device)
    _require(name)
    return tree_map(lambda leaf: _put_leaf(leaf, name), x)


def _put_leaf(x: Any, device: str) -> Any:
    if isinstance(x, Tracer):
        raise TypeError(f"device_put of a traced value {_dtypes.describe(x)} inside a transform (jit/grad/vmap) "
                        "is not supported: transfers are explicit and happen outside transforms; move the "
                        "arguments with fg.device_put before calling the transformed function")
    if not isinstance(x, Array):
        owner = next((b for b in _backends().values() if b.owns_buffer(x)), None)
        x = owner.from_buffer(x, copy=True) if owner is not None else _core.as_array(x)
    if x.device != device:
        if type(x) is not Array:   # a device array: through the host
            x = type(x).backend.to_host(x)
        if x.device != device:
            x = get_backend(device).to_device(x)
    # Placed on the CPU on purpose ("committed"): mixing it with device arrays raises instead of uploading it.
    return _core.commit_to_host(x) if device == "cpu" else x


# --------------------------------------------------------------------------
# DLPack
# --------------------------------------------------------------------------


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
    if device_type not in _DL_HOST_TYPES:
        owner = next((b for b in _backends().values() if device_type in b.dlpack_device_types), None)
        if owner is None:
            raise BufferError(f"from_dlpack: DLPack device type {device_type} is not supported (CPU and CUDA are)")
        return _require(owner.name).from_dlpack(obj, copy=copy)
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
