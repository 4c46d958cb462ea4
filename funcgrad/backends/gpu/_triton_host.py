"""Host-side glue between array libraries and Triton kernels (no torch).

Triton's launcher only needs, per tensor argument, an object with
``data_ptr()`` and a ``dtype`` whose ``str()`` names a Triton element type.
Two array kinds are supported:

* **numpy** (CPU only, ``TRITON_INTERPRET=1``): :class:`HostTensor` wraps the
  array and implements the handful of torch-like storage calls that
  ``triton.runtime.interpreter.GridExecutor`` makes (``untyped_storage()``,
  ``cpu()``, ``new_empty()``, ``set_()``, ``copy_()``, ``size()``,
  ``stride()``, ``storage_offset()``). The memory already lives on the host,
  so every "copy to/from host" the interpreter asks for is a no-op and the
  kernel reads and writes the numpy buffer in place.
* **CuPy** (real GPU): :class:`DevicePointer` carries the raw device
  pointer. :func:`launch` makes the array's device current and launches on
  CuPy's current stream (without torch, Triton 3.8 would otherwise launch on
  the legacy default stream 0 of whatever context is current).

bf16: arrays of dtype ``ml_dtypes.bfloat16`` (funcgrad's ``bfloat16``, which
numpy and CuPy 14 hold) are described to Triton as ``bfloat16``; so are
``uint16`` arrays, read as bf16 bit patterns (the kernels' older convention,
still taken by their direct entry points).

Nothing here imports triton or cupy at module import time.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

import numpy as np

from funcgrad._dtypes import bfloat16 as BF16

__all__ = [
    "HostTensor",
    "DevicePointer",
    "as_kernel_arg",
    "triton_dtype_name",
    "is_numpy",
    "array_module",
    "interpret_mode",
    "launch",
]

# numpy dtype -> Triton element type name (what ``mangle_type`` parses).
# uint16 arrays are read as bf16 bit patterns.
_TRITON_DTYPE_NAMES = {
    BF16: "bfloat16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float16): "float16",
    np.dtype(np.uint16): "bfloat16",
    np.dtype(np.float64): "float64",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
}


def triton_dtype_name(dtype: Any) -> str:
    """Triton element-type name for a numpy/CuPy dtype (bfloat16 and uint16 -> bfloat16)."""
    try:
        return _TRITON_DTYPE_NAMES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"unsupported dtype for Triton kernels: {dtype!r}") from None


def is_numpy(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def array_module(x: Any):
    """``numpy`` for numpy arrays, ``cupy`` for CuPy arrays (imported lazily)."""
    if is_numpy(x):
        return np
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy  # noqa: PLC0415

        return cupy
    raise TypeError(f"expected a numpy or cupy array, got {type(x).__name__}")


def interpret_mode() -> bool:
    """True when Triton was told to interpret kernels on the CPU."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


# --------------------------------------------------------------------------
# numpy arrays under TRITON_INTERPRET=1
# --------------------------------------------------------------------------


class _HostStorage:
    """The "untyped storage" of a :class:`HostTensor`: the array itself.

    The interpreter keys storages by ``data_ptr()`` and calls ``cpu()`` to get
    a host copy, later ``copy_()``-ing the host copy back. Our data is already
    on the host, so ``cpu()`` returns ``self`` and ``copy_`` of the same
    memory does nothing.
    """

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def cpu(self) -> "_HostStorage":
        return self

    def copy_(self, other: "_HostStorage") -> "_HostStorage":
        if other.data_ptr() != self.data_ptr():
            np.copyto(self.array, other.array)
        return self


class HostTensor:
    """A numpy array dressed as the tensor the Triton interpreter expects.

    Args:
        array: C-contiguous numpy array. Wrapped without copying; kernels
            write into it in place.
        dtype: Triton element type name; default from ``array.dtype``
            (``uint16`` -> ``"bfloat16"``).
    """

    __slots__ = ("_array", "dtype", "device")

    def __init__(self, array: np.ndarray | None, dtype: str | None = None):
        if array is not None and not array.flags.c_contiguous:
            raise ValueError("HostTensor needs a C-contiguous array")
        self._array = array
        # A plain str: Triton's native type mangler caches on hash(dtype), and
        # str hashes by value (a custom object would hash by id, and a
        # recycled id could return a stale element type).
        self.dtype = dtype if dtype is not None else (
            triton_dtype_name(array.dtype) if array is not None else "float32")
        self.device = "cpu"

    @property
    def array(self) -> np.ndarray:
        return self._array

    # -- what the launcher needs ------------------------------------------
    def data_ptr(self) -> int:
        return self._array.ctypes.data

    # -- storage protocol used by interpreter.GridExecutor ------------------
    def untyped_storage(self) -> _HostStorage:
        return _HostStorage(self._array)

    def cpu(self) -> "HostTensor":
        return self

    def new_empty(self, *sizes, device: str = "cpu", **_: Any) -> "HostTensor":
        # Only ever called as new_empty(0, device="cpu") right before set_().
        return HostTensor(None, self.dtype)

    def set_(self, storage: _HostStorage, offset: int = 0, size=None, stride=None) -> "HostTensor":
        if offset:
            raise ValueError("HostTensor storages are whole arrays (offset 0)")
        self._array = storage.array
        return self

    def copy_(self, other: "HostTensor") -> "HostTensor":
        if other.data_ptr() != self.data_ptr():
            np.copyto(self._array, other._array)
        return self

    def size(self, dim: int | None = None):
        return self._array.shape if dim is None else self._array.shape[dim]

    def stride(self, dim: int | None = None):
        st = tuple(s // self._array.itemsize for s in self._array.strides)
        return st if dim is None else st[dim]

    def storage_offset(self) -> int:
        return 0

    def element_size(self) -> int:
        return self._array.itemsize

    @property
    def shape(self):
        return self._array.shape

    def __repr__(self) -> str:
        return f"HostTensor(dtype={self.dtype}, shape={self.shape})"


# --------------------------------------------------------------------------
# CuPy arrays on a real GPU
# --------------------------------------------------------------------------


class DevicePointer:
    """A CuPy array seen by Triton's launcher as a typed device pointer.

    Keeps a reference to the array so the memory outlives the launch.
    """

    __slots__ = ("array", "dtype")

    def __init__(self, array: Any, dtype: str | None = None):
        if not array.flags.c_contiguous:
            raise ValueError("DevicePointer needs a C-contiguous array")
        self.array = array
        self.dtype = dtype if dtype is not None else triton_dtype_name(array.dtype)

    def data_ptr(self) -> int:
        return int(self.array.data.ptr)

    def __repr__(self) -> str:
        return f"DevicePointer(dtype={self.dtype}, shape={self.array.shape})"


def as_kernel_arg(x: Any, dtype: str | None = None):
    """Wrap a numpy or CuPy array for passing to a Triton kernel."""
    if is_numpy(x):
        return HostTensor(x, dtype)
    return DevicePointer(x, dtype)


@contextlib.contextmanager
def _cupy_device_and_stream(like: Any) -> Iterator[None]:
    """Launch context for CuPy: right device, CuPy's current stream.

    Triton 3.8 without torch asks its CUDA driver utils for the current device
    (``cuCtxGetDevice`` on the current context, retaining the primary context
    if none) and for the stream (``get_default_stream`` -> 0, the legacy
    default stream). CuPy uses the runtime API, i.e. the same primary
    context, so after ``Device(id).use()`` the device agrees; for the stream we
    temporarily point the driver's ``get_current_stream`` at CuPy's current
    stream so our kernels are ordered with surrounding CuPy work even when the
    caller uses a non-default stream.
    """
    import cupy  # noqa: PLC0415
    from triton.runtime import driver  # noqa: PLC0415

    with cupy.cuda.Device(like.device.id):
        active = driver.active
        active.set_current_device(like.device.id)
        previous = active.__dict__.get("get_current_stream", None)
        stream_ptr = int(cupy.cuda.get_current_stream().ptr)
        active.get_current_stream = lambda _device: stream_ptr
        try:
            yield
        finally:
            if previous is None:
                del active.get_current_stream
            else:
                active.get_current_stream = previous


class _StreamHook:
    """Installed once as the Triton driver's ``get_current_stream``: CuPy's current stream while one of
    our launches runs (``stream`` set, per thread), the driver's own answer otherwise."""

    def __init__(self, fallback: Any):
        self.fallback = fallback
        self.local = threading.local()

    def __call__(self, device: Any) -> Any:
        stream = getattr(self.local, "stream", None)
        return self.fallback(device) if stream is None else stream


_cupy_state: dict[str, Any] = {}   # the cupy module, the driver holder, the hook and the device each thread set


def _cupy_fast_state() -> Any:
    """(cupy, the active Triton driver, its _StreamHook) for the lean launch path, or None where the driver
    cannot take the hook (then every launch takes :func:`_cupy_device_and_stream`)."""
    if not _cupy_state:
        import cupy  # noqa: PLC0415
        from triton.runtime import driver  # noqa: PLC0415

        _cupy_state.update(cupy=cupy, driver=driver, ready=threading.local())
    active = _cupy_state["driver"].active
    hook = active.__dict__.get("get_current_stream")
    if not isinstance(hook, _StreamHook):
        fallback = getattr(active, "get_current_stream", None)
        if fallback is None:
            return None
        hook = _StreamHook(fallback)
        try:
            active.get_current_stream = hook
        except AttributeError:
            return None
    return _cupy_state["cupy"], active, hook


def _launch_cupy(kernel, grid, wrapped: list, meta: dict, like: Any) -> None:
    """Launch on CuPy's current stream. The lean path (no context manager): when CuPy's current device is
    the array's and this thread already made it Triton's current device, only the stream is set."""
    state = _cupy_fast_state()
    if state is None:
        with _cupy_device_and_stream(like):
            kernel[grid](*wrapped, **meta)
        return
    cupy, active, hook = state
    device = like.device.id
    ready = _cupy_state["ready"]
    if cupy.cuda.runtime.getDevice() != device or getattr(ready, "device", None) != device:
        with cupy.cuda.Device(device):
            active.set_current_device(device)
            hook.local.stream = int(cupy.cuda.get_current_stream().ptr)
            try:
                kernel[grid](*wrapped, **meta)
            finally:
                hook.local.stream = None
        ready.device = device if cupy.cuda.runtime.getDevice() == device else None
        return
    hook.local.stream = int(cupy.cuda.get_current_stream().ptr)
    try:
        kernel[grid](*wrapped, **meta)
    finally:
        hook.local.stream = None


def launch(kernel, grid: tuple[int, ...], args: list[Any], meta: dict[str, Any], *, like: Any) -> None:
    """Launch ``kernel[grid](*args, **meta)`` for numpy (interpreter) or CuPy.

    Args:
        kernel: a ``@triton.jit`` function.
        grid: launch grid, 1-3 ints.
        args: positional kernel arguments; numpy/CuPy arrays are wrapped with
            :func:`as_kernel_arg`, already-wrapped arrays and scalars pass
            through.
        meta: constexpr / launch options (``num_warps``, ``num_stages``, ...).
        like: any array of the call, used to pick the backend and device.
    """
    wrapped = [as_kernel_arg(a) if _is_array(a) else a for a in args]
    if is_numpy(like):
        if not interpret_mode():
            raise RuntimeError(
                "numpy arrays can only be used with Triton's interpreter: set "
                "TRITON_INTERPRET=1 before funcgrad.backends.gpu.flash_attention "
                "(and triton) are imported")
        kernel[grid](*wrapped, **meta)
        return
    _launch_cupy(kernel, grid, wrapped, meta, like)


def _is_array(x: Any) -> bool:
    return is_numpy(x) or (hasattr(x, "__cuda_array_interface__") and hasattr(x, "data"))


TRITON_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def compile_for_target(launches, signature, *, arch: int = 90, kernels=None) -> dict:
    """Compile kernels for ``cuda:sm_<arch>`` on the CPU (Triton's bundled ptxas; no GPU needed).

    ``launches``: (name, kernel, constexprs, options) tuples; ``signature(kernel)``
    gives each kernel's Triton signature. Returns {name: {"shared": bytes of
    shared memory per block, "n_regs", "spill_stores", "spill_loads" (from
    ``ptxas -v``, None if unparsed), "config"}}. Needs TRITON_INTERPRET unset.
    """
    import contextlib
    import io
    import re

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if interpret_mode():
        raise RuntimeError("compile reports need TRITON_INTERPRET unset")
    target = GPUTarget("cuda", arch, 32)
    saved = (triton.knobs.compilation.always_compile, triton.knobs.nvidia.dump_ptxas_log)
    # Force a real ptxas run (not a cache hit) and have Triton print its -v log.
    triton.knobs.compilation.always_compile = True
    triton.knobs.nvidia.dump_ptxas_log = True
    report = {}
    try:
        for name, kernel, constexprs, options in launches:
            if kernels is not None and name not in kernels:
                continue
            src = ASTSource(fn=kernel, signature=signature(kernel), constexprs=constexprs)
            log = io.StringIO()
            with contextlib.redirect_stdout(log):
                compiled = triton.compile(src, target=target, options=options)
            text = log.getvalue()
            regs = re.search(r"Used (\d+) registers", text)
            stores = re.search(r"(\d+) bytes spill stores", text)
            loads = re.search(r"(\d+) bytes spill loads", text)
            report[name] = {
                "shared": int(compiled.metadata.shared),
                "n_regs": int(regs.group(1)) if regs else None,
                "spill_stores": int(stores.group(1)) if stores else None,
                "spill_loads": int(loads.group(1)) if loads else None,
                "config": {**constexprs, **options},
            }
    finally:
        triton.knobs.compilation.always_compile, triton.knobs.nvidia.dump_ptxas_log = saved
    return report
