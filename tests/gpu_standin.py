"""A numpy stand-in for CuPy, so the GPU backend's logic runs on machines without a GPU.

Device buffers are ``FakeDeviceArray``, a distinct ndarray subclass, so a
host value leaking into device code (or the reverse) shows up. This checks
funcgrad's side of the GPU backend (dispatch, transfers, errors, the
Triton kernels in Triton's interpreter), not CuPy itself. bfloat16 arrays are
numpy's ``ml_dtypes.bfloat16`` arrays (CuPy 14 holds the same dtype); where
CuPy's bfloat16 support is known to be missing or unreliable (batched and
vector matmul, einsum, sorts, atomic scatters) the stand-in refuses bfloat16 too, so
funcgrad's own route around it is what the tests run.

>>> with gpu_standin(use_triton=False):
...     g = fg.device_put(fnp.ones(3), "gpu")   # a GpuArray over a FakeDeviceArray
"""
from __future__ import annotations

import contextlib
import types
from typing import Iterator

import numpy as np

import funcgrad as fg
from funcgrad import _dtypes
from funcgrad.backends.gpu import _detect
from funcgrad.backends.gpu import array as gpu_array


class FakeDeviceArray(np.ndarray):
    """A "device" buffer: a distinct type, so host values leaking in show up."""


def fake_cupy() -> types.SimpleNamespace:
    """numpy's namespace with CuPy's transfer functions, over ``FakeDeviceArray``."""
    ns = {k: getattr(np, k) for k in dir(np) if not k.startswith("_")}

    def asarray(a, dtype=None):
        if isinstance(a, FakeDeviceArray) and (dtype is None or a.dtype == dtype):
            return a
        return np.array(a, dtype=dtype, copy=True).view(FakeDeviceArray)

    def array(a, dtype=None, copy=True):
        return np.array(a, dtype=dtype, copy=True).view(FakeDeviceArray)

    def asnumpy(a):
        assert isinstance(a, FakeDeviceArray), f"asnumpy of a host value {type(a)}"
        return np.array(a).view(np.ndarray)

    def from_dlpack(obj):
        return np.from_dlpack(obj).view(FakeDeviceArray)

    ns.update(ndarray=FakeDeviceArray, asarray=asarray, array=array, asnumpy=asnumpy, from_dlpack=from_dlpack)
    ns.update(matmul=_matmul, sort=_no_bf16(np.sort, "sort"), argsort=_no_bf16(np.argsort, "argsort"),
              lexsort=_no_bf16(np.lexsort, "lexsort"))
    # cupyx.scipy.<name> (see gpu_array.scipy_module): scipy's own modules stand in.
    import scipy.linalg
    import scipy.special
    ns.update(scipy_special=scipy.special, scipy_linalg=scipy.linalg)
    ns.update(cupyx=fake_cupyx())
    return types.SimpleNamespace(**ns)


_BF16 = _dtypes.bfloat16


BF16_MATMULS = [0]   # bfloat16 matrix products the stand-in computed (CuPy's cuBLAS path)


def _matmul(a, b, *args, **kwargs):
    """``numpy.matmul``, with CuPy 14.2's bfloat16 behaviour: a product of two matrices is cuBLAS's (float32
    accumulation, one rounding to bfloat16; numpy's returns float32); batched and vector operands are refused
    (CuPy runs its integer kernel, or an elementwise product and sum, on them)."""
    if _BF16 not in (getattr(a, "dtype", None), getattr(b, "dtype", None)):
        return np.matmul(a, b, *args, **kwargs)
    if a.dtype != b.dtype or a.ndim != 2 or b.ndim != 2 or a.shape[0] * b.shape[1] <= 1 or args or kwargs:
        raise TypeError(f"matmul of bfloat16 operands {a.shape} {a.dtype} and {b.shape} {b.dtype} (stand-in for "
                        "CuPy 14, whose bfloat16 matmul is reliable only for two matrices)")
    BF16_MATMULS[0] += 1
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(_BF16).view(type(a))


def _no_bf16(fn, name):
    """``fn``, refusing bfloat16 as CuPy 14's sorts (thrust) do."""
    def run(a, *args, **kwargs):
        if _BF16 in {getattr(x, "dtype", None) for x in (a if isinstance(a, (tuple, list)) else [a])}:
            raise NotImplementedError(f"Sorting arrays with dtype 'bfloat16' is not supported ({name}, stand-in "
                                      "for CuPy 14)")
        return fn(a, *args, **kwargs)
    return run


# The value dtypes CuPy's atomic scatters take (CuPy 14); others raise TypeError there, and here.
_EXTREMAL = {np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64)}
_SCATTER_DTYPES = {"add": _EXTREMAL | {np.dtype(np.float16)}, "max": _EXTREMAL, "min": _EXTREMAL}


def fake_cupyx() -> types.SimpleNamespace:
    """``cupyx.scatter_add`` / ``scatter_max`` / ``scatter_min`` as numpy's ``ufunc.at``, in place,
    refusing the dtypes CuPy's atomics refuse."""
    def scatter(kind, ufunc):
        def run(a, slices, value):
            value = np.asarray(value, dtype=a.dtype)
            if value.dtype not in _SCATTER_DTYPES[kind]:
                raise TypeError(f"scatter_{kind} does not support {value.dtype} (stand-in for CuPy's atomics)")
            ufunc.at(a, slices, np.broadcast_to(value, np.shape(a[slices])))
        return run
    return types.SimpleNamespace(scatter_add=scatter("add", np.add), scatter_max=scatter("max", np.maximum),
                                 scatter_min=scatter("min", np.minimum))


@contextlib.contextmanager
def gpu_standin(*, use_triton: bool) -> Iterator[None]:
    """The GPU backend over :func:`fake_cupy` for the block (reported usable).

    ``use_triton``: let the Triton kernels run (in Triton's interpreter:
    ``TRITON_INTERPRET=1`` must be set before triton is imported).
    """
    fg.devices()   # discover the backends (registers the GPU implementations)
    saved = _detect.gpu_available
    _detect.gpu_available = lambda: True
    gpu_array._use_array_module(fake_cupy(), use_triton=use_triton)
    try:
        yield
    finally:
        gpu_array._use_array_module(None)
        _detect.gpu_available = saved


def to_device(x: np.ndarray) -> FakeDeviceArray:
    """A raw stand-in device buffer of ``x``."""
    return np.array(x, copy=True).view(FakeDeviceArray)
