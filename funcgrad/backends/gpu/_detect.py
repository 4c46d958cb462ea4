"""GPU detection that never raises.

CuPy installs and imports fine on machines without a GPU or driver; it only
fails on the first allocation / driver call. So "cupy imports" is not
evidence of a GPU: we actually allocate and run a tiny op, and treat *any*
exception (ImportError, CUDARuntimeError, driver version mismatch, OSError from
a missing libcuda, ...) as "no GPU".
"""

from __future__ import annotations

import functools

__all__ = ["gpu_available", "gpu_unavailable_reason"]


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    """(usable, reason it is not). Cached: the answer does not change within a
    process, and probing initialises a CUDA context, which is slow."""
    try:
        import cupy  # noqa: PLC0415 -- optional dependency, imported lazily
    except BaseException as exc:  # noqa: BLE001 -- detection must never raise
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False, f"CuPy is not installed ({type(exc).__name__}: {exc}); pip install 'funcgrad[gpu]'"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return False, "CuPy sees no CUDA device"
        x = cupy.arange(4, dtype=cupy.float32)
        ok = float((x * 2).sum().get()) == 12.0
        cupy.cuda.Device().synchronize()
        return (True, "") if ok else (False, "a test computation on the GPU gave a wrong result")
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False, f"CUDA is not usable ({type(exc).__name__}: {str(exc)[:200]})"


def gpu_available() -> bool:
    """Return True iff CuPy can allocate and compute on a CUDA device.

    Never raises; cached (see ``_probe``).
    """
    return _probe()[0]


def gpu_unavailable_reason() -> str:
    """Why :func:`gpu_available` is False ("" when a GPU is usable); never raises."""
    return _probe()[1]
