"""The GPU array type and the GPU backend object: CuPy buffers behind funcgrad Arrays.

How it plugs in (no GPU code in the core): :class:`GpuArray` subclasses
``funcgrad.Array`` and names its backend in the class attribute
``backend`` (a :class:`GpuBackend`). ``funcgrad._core.apply_primitive``
sees a device array among the arguments and runs the primitive's ``"gpu"``
implementation (``prim.impls["gpu"]``, registered in
:mod:`funcgrad.backends.gpu.impls`) on the buffers the backend hands it. A
primitive without one is an error naming it, unless the user allowed host
fallback (``fg.config.update("gpu_host_fallback", True)``): then it runs
on host copies, with one warning per primitive.

CuPy is imported on first use (:func:`binding`). The tests install a
numpy-backed stand-in for it with :func:`_use_array_module`, which checks
dispatch, transfers and errors on machines without a GPU, not CuPy.

Deferred checks: a check whose answer lives on the device (labels in range,
say) must not make the host wait for the GPU inside a step. The kernel (or a
small reduction) writes a device flag instead, registered with
:func:`defer_check`; every point where the host waits for the GPU anyway
(``block_until_ready``, transfers to the host, ``item``/``float``/``bool``/
``repr`` of a GPU array) reads all pending flags with one transfer and raises
the first failure's error, as CUDA reports device-side errors at the next
synchronisation. The queue is also checked when it grows past
``_MAX_PENDING`` entries, so its memory stays bounded.

Immutability: CuPy arrays have no read-only flag, so the buffer is kept
private (``_value``) and never handed out writable by funcgrad; a DLPack
export of a GPU array is zero-copy and its consumer must not write to it.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, NamedTuple

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._config import config
from funcgrad._core import Array, Primitive
from funcgrad.backends import Backend
from funcgrad.backends.gpu import _deferred, _detect

__all__ = ["GpuArray", "GpuBackend", "backend", "binding", "check_deferred", "defer_check", "pending_check",
           "scipy_module", "to_gpu", "to_host"]

# DLPack device types (dlpack.h, DLDeviceType) of CUDA memory.
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13


class Binding(NamedTuple):
    """What the GPU implementations are built against: the array module
    (CuPy, or a test stand-in) and whether the Triton kernels may run."""

    xp: Any
    use_triton: bool


_state: dict[str, Binding | None] = {"binding": None}
_warned: set[Primitive] = set()   # primitives whose host fallback has warned


def binding() -> Binding:
    """The current :class:`Binding` (imports CuPy, and checks for Triton, on first use)."""
    current = _state["binding"]
    if current is None:
        import cupy  # noqa: PLC0415 -- optional dependency

        current = _state["binding"] = Binding(cupy, _triton_importable())
    return current


def scipy_module(b: Binding, name: str) -> Any:
    """``cupyx.scipy.<name>`` (``"special"``, ``"linalg"``, ...) for the binding's array module.

    A test stand-in for CuPy provides its own as the attribute ``scipy_<name>``
    (scipy's module of that name, over host arrays).
    """
    own = getattr(b.xp, f"scipy_{name}", None)
    if own is not None:
        return own
    import importlib  # noqa: PLC0415

    return importlib.import_module(f"cupyx.scipy.{name}")


def _array_module() -> Any:
    return binding().xp


def _triton_importable() -> bool:
    try:
        import triton  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _use_array_module(xp: Any, *, use_triton: bool | None = None) -> None:
    """Swap the device array module (tests: a numpy stand-in for CuPy); ``None``: back to CuPy.

    ``use_triton=None`` lets the Triton kernels run when Triton imports.
    """
    if xp is None:
        _state["binding"] = None
    else:
        _state["binding"] = Binding(xp, _triton_importable() if use_triton is None else bool(use_triton))
    _warned.clear()
    _pending.clear()


# --------------------------------------------------------------------------
# deferred device-side checks
# --------------------------------------------------------------------------

_MAX_PENDING = 64
# key -> (flag, make_error): ``flag`` a device array, nonzero somewhere when the check failed;
# ``make_error()`` builds the exception (it may read device values: it runs after the wait).
_pending: dict[Any, tuple[Any, Callable[[], Exception]]] = _deferred.pending


def defer_check(flag: Any, make_error: Callable[[], Exception], key: Any = None) -> None:
    """Register a device-side check: ``flag`` (a device array, any nonzero element meaning failure) is read
    at the next point the host waits for the GPU, and ``make_error()`` is raised if it failed.

    ``key`` names the check, so that a second check of the same thing (see :func:`pending_check`) can reuse
    the first one's flag; ``make_error`` should keep the checked buffers alive while it is pending. While a
    CUDA graph is captured the check is collected for the graph instead (see :mod:`._deferred`).

    >>> flag = xp.any(labels >= n_classes, keepdims=True)                 # no host read
    >>> defer_check(flag, lambda: ValueError("labels out of range"))      # raised at the next wait
    """
    if _deferred.capture_scopes:
        _deferred.capture_scopes[-1].append((flag, make_error))
        return
    _pending[object() if key is None else key] = (flag, make_error)
    if len(_pending) > _MAX_PENDING:
        check_deferred()


_deferred.defer_check = defer_check


def pending_check(key: Any) -> Any:
    """The flag of the pending check registered under ``key``, or None.

    >>> pending_check(("labels in range", id(labels), 10))   # the forward's flag, for the backward to reuse
    """
    entry = _pending.get(key)
    return None if entry is None else entry[0]


def check_deferred() -> None:
    """Read every pending check's flag (one transfer for all) and raise the first failure's error.

    The queue is empty afterwards, whether or not an error is raised. Called wherever the host waits
    for the GPU (``block_until_ready``, transfers to the host, ``float(x)``, ``repr(x)``, ...).

    >>> check_deferred()   # ValueError: softmax_cross_entropy: labels must be in [0, 10), got values in [0, 12]
    """
    if not _pending:
        return
    items = list(_pending.items())
    for key, _ in items:   # (only these: a check another thread adds meanwhile stays queued)
        _pending.pop(key, None)
    entries = [entry for _, entry in items]
    xp = _array_module()
    flags = [xp.asarray(flag).reshape(-1).astype(xp.int32) for flag, _ in entries]
    sizes = [int(f.size) for f in flags]   # (shapes: host metadata, no transfer)
    host = np.asarray(xp.asnumpy(xp.asarray(xp.concatenate(flags)) if len(flags) > 1 else flags[0]))
    start = 0
    for (_, make_error), size in zip(entries, sizes):
        if host[start:start + size].any():
            raise make_error()
        start += size


class GpuArray(Array):
    """An Array on the GPU (``x.device == "gpu"``); make one with ``fg.device_put``.

    >>> x = fg.device_put(fnp.arange(4.0), "gpu")   # f32[4] on the GPU
    >>> y = fnp.sin(x) * 2                           # runs with CuPy, stays there
    >>> fg.device_put(y, "cpu")                      # explicit transfer back

    Implicit transfers are refused: ``np.asarray(x)`` raises (as CuPy does);
    ``item()``, ``float()`` and ``bool()`` of a 0-d array copy one value.
    """

    __slots__ = ()
    backend: "GpuBackend"   # set below: the class attribute funcgrad._core dispatches on

    @property
    def device(self) -> str:
        return "gpu"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(f"implicit transfer of a GPU array {_dtypes.describe(self)} to the host is not allowed: "
                        "use fg.device_put(x, 'cpu') (then np.asarray)")

    def block_until_ready(self) -> "GpuArray":
        """Wait for the GPU work that computes this array (kernels run asynchronously)."""
        cuda = getattr(_array_module(), "cuda", None)   # (the tests' numpy stand-in has none)
        if cuda is not None:
            cuda.get_current_stream().synchronize()
        check_deferred()
        return self

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
        check_deferred()
        host = _array_module().asnumpy(self._value)
        body = np.array2string(host, separator=", ", prefix="Array(")
        return f"Array({body}, dtype={host.dtype}, device='gpu')"

    def __str__(self) -> str:
        check_deferred()
        return str(_array_module().asnumpy(self._value))

    def __reduce__(self) -> Any:
        check_deferred()
        return (_gpu_array_from_numpy, (_array_module().asnumpy(self._value),))

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """Zero-copy export through CuPy (which cannot flag read-only: the consumer must not write)."""
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                    ("copy", copy)) if v is not None}
        return self._value.__dlpack__(**kwargs)


class GpuBackend(Backend):
    """The ``"gpu"`` backend: CuPy buffers, CuPy/Triton implementations (see the module docstring)."""

    name = "gpu"
    array_type = GpuArray
    dlpack_device_types = (_DL_CUDA, _DL_CUDA_MANAGED)

    def available(self) -> bool:
        return _detect.gpu_available()

    def unavailable_reason(self) -> str:
        return _detect.gpu_unavailable_reason()

    # ---- evaluation
    def device_value(self, arg: Any) -> Any:
        """Device arrays as they are; Python scalars stay weak; 0-d host arrays and numpy constants are uploaded."""
        if isinstance(arg, GpuArray):
            return arg._value
        if isinstance(arg, (bool, int, float)):
            return arg
        xp = _array_module()
        if isinstance(arg, Array):
            return xp.asarray(arg._value)
        return xp.asarray(_core.to_numpy_input(arg))

    def wrap(self, out: Any) -> GpuArray:
        out = _array_module().asarray(out)
        if out.dtype.itemsize == 8 and not config.enable_x64:
            out = out.astype(_dtypes.canonicalize(out.dtype))
        return GpuArray(out)

    def host_value(self, value: Any) -> Any:
        check_deferred()
        return value if isinstance(value, (bool, int, float)) else _array_module().asnumpy(value)

    def missing_impl(self, prim: Primitive, reason: str = "") -> Callable[..., Any]:
        """What runs ``prim`` without a GPU implementation: host fallback if the user allowed it, else an error.

        ``reason`` says why the GPU implementation cannot run (e.g. a dtype
        its kernels do not take); it goes into the error message.
        """
        if config.gpu_host_fallback:
            return _host_fallback(prim, reason)
        return _missing_error(prim, reason)

    # ---- transfers
    def to_device(self, x: Array) -> GpuArray:
        return to_gpu(x)

    def to_host(self, x: Array) -> Array:
        return to_host(x)

    # ---- foreign buffers
    def owns_buffer(self, value: Any) -> bool:
        return type(value).__module__.split(".")[0] == "cupy"

    def from_buffer(self, value: Any, copy: bool = True) -> GpuArray:
        """A GpuArray from a CuPy array (copied by default: the caller keeps a writable handle)."""
        xp = _array_module()
        dtype = _dtypes.canonicalize(value.dtype)
        if copy or dtype != value.dtype:
            value = xp.array(value, dtype=dtype, copy=True)
        return GpuArray(value)

    def from_dlpack(self, obj: Any, copy: bool | None = None) -> GpuArray:
        return self.from_buffer(_array_module().from_dlpack(obj), copy=bool(copy))

    # ---- compilation
    def compile(self, jaxpr: Any) -> Any:
        """``jit``'s program for GPU arrays: fused elementwise chains as generated Triton kernels,
        the rest through the GPU implementations (:mod:`funcgrad.backends.gpu.compile`)."""
        from funcgrad.backends.gpu.compile import compile_jaxpr  # noqa: PLC0415 -- imports the compiler on use
        return compile_jaxpr(jaxpr, self, binding())


backend = GpuBackend()
GpuArray.backend = backend


def _describe_call(values: Any, params: dict) -> str:
    shown = {k: v for k, v in params.items() if not callable(v)}
    return f"({', '.join(_dtypes.describe(v) for v in values)})" + (f" with {shown}" if shown else "")


def _missing_error(prim: Primitive, reason: str) -> Callable[..., Any]:
    def raise_missing(*values: Any, **params: Any) -> Any:
        why = f" ({reason})" if reason else ""
        raise NotImplementedError(
            f"{prim.name}: no GPU implementation for {_describe_call(values, params)}{why}. Move the computation "
            "to the CPU with fg.device_put(x, 'cpu'), or let primitives without one run on host copies (two "
            "transfers each) with fg.config.update('gpu_host_fallback', True) or FUNCGRAD_GPU_HOST_FALLBACK=1")
    return raise_missing


def _host_fallback(prim: Primitive, reason: str) -> Callable[..., Any]:
    """``prim``'s host implementation on host copies of the device values, results uploaded."""
    def run_on_host(*values: Any, **params: Any) -> Any:
        if prim not in _warned:
            _warned.add(prim)
            why = f" ({reason})" if reason else ""
            warnings.warn(f"funcgrad: primitive '{prim.name}' has no GPU implementation{why}; it runs on the "
                          "CPU with a copy each way (gpu_host_fallback is on)", RuntimeWarning, stacklevel=2)
        host_args = [v if isinstance(v, (bool, int, float)) else Array(_core._freeze(np.asarray(backend.host_value(v))))
                     for v in values]
        out = _core.apply_primitive(prim, host_args, params)
        xp = _array_module()
        return [xp.asarray(o._value) for o in out] if prim.multiple_results else xp.asarray(out._value)
    return run_on_host


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
    check_deferred()
    # (not np.ascontiguousarray: it turns 0-d arrays into 1-d ones)
    return Array(_core._freeze(np.asarray(_array_module().asnumpy(x._value))))


def _gpu_array_from_numpy(value: np.ndarray) -> GpuArray:
    return GpuArray(_array_module().asarray(value))
