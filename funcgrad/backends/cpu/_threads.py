"""numba threading setup for funcgrad's CPU kernels.

Import this module before any parallel numba kernel runs (every
``kernels_*`` module imports it first). It does two things:

1. Picks numba's ``workqueue`` threading layer. numba's default would be
   ``omp`` when an OpenMP runtime is found, and that layer was measured to
   slow PyTorch down 5x in the same process (both runtimes spin their own
   pools). ``workqueue`` is numba's own tiny pool and has no such clash.
   An explicit ``NUMBA_THREADING_LAYER`` in the environment is respected.
2. Honours ``FUNCGRAD_NUM_THREADS`` (default: all cores numba sees).

Thread counts are numba's, which are per calling Python thread. We keep a
process-wide request and every kernel wrapper calls :func:`prepare` (a
cheap check) so that a count set with :func:`set_num_threads` applies in
whichever Python thread later runs a kernel.

Example::

    from funcgrad.backends.cpu import _threads
    _threads.set_num_threads(1)      # e.g. for reproducible timings
    assert _threads.get_num_threads() == 1
"""

from __future__ import annotations

import os
import threading
import warnings

import numba
from numba.np.ufunc import parallel as _numba_parallel

__all__ = ["set_num_threads", "get_num_threads", "max_threads",
           "threading_layer", "prepare"]

_ENV_THREADS = "FUNCGRAD_NUM_THREADS"


def _select_threading_layer() -> None:
    """Choose ``workqueue`` unless the user (env) chose a layer already.

    numba reads ``config.THREADING_LAYER`` only when its pool first starts,
    so this must run before the first parallel kernel launches anywhere in
    the process; if some other code already started the pool we can only
    warn.
    """
    if os.environ.get("NUMBA_THREADING_LAYER"):
        return  # an explicit user choice wins
    if getattr(_numba_parallel, "_is_initialized", False):
        layer = _numba_parallel.threading_layer()
        if layer != "workqueue":
            warnings.warn(
                f"funcgrad: numba's thread pool was already started with the "
                f"{layer!r} layer; set NUMBA_THREADING_LAYER=workqueue to "
                f"avoid slowing PyTorch in the same process", RuntimeWarning,
                stacklevel=3)
        return
    numba.config.THREADING_LAYER = "workqueue"


def _threads_from_env() -> int | None:
    """Parse ``FUNCGRAD_NUM_THREADS``; None when unset or empty."""
    raw = os.environ.get(_ENV_THREADS, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{_ENV_THREADS}={raw!r}: expected a positive "
                         f"integer") from None
    if n < 1:
        raise ValueError(f"{_ENV_THREADS}={raw!r}: expected a positive "
                         f"integer")
    return min(n, max_threads())


def max_threads() -> int:
    """Largest thread count the pool supports (numba's NUMBA_NUM_THREADS)."""
    return int(numba.config.NUMBA_NUM_THREADS)


# The process-wide request; ``_generation`` bumps on every change so that
# each Python thread re-applies it once (numba's count is thread-local).
_requested: int | None = None
_generation = 0
_applied = threading.local()


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (1 <= n <= max_threads()) in funcgrad's kernels."""
    global _requested, _generation
    n = int(n)
    if not 1 <= n <= max_threads():
        raise ValueError(f"set_num_threads({n}): expected 1 <= n <= "
                         f"{max_threads()} (numba's NUMBA_NUM_THREADS)")
    _requested = n
    _generation += 1
    prepare()


def get_num_threads() -> int:
    """Thread count funcgrad's parallel kernels will use."""
    return _requested if _requested is not None else max_threads()


def prepare() -> None:
    """Apply the requested thread count in the calling Python thread.

    Called by every kernel wrapper; after the first call in a thread it
    costs one attribute compare.
    """
    if _requested is None or getattr(_applied, "gen", -1) == _generation:
        return
    numba.set_num_threads(_requested)
    _applied.gen = _generation


def threading_layer() -> str:
    """numba's active threading layer, or the configured one before the
    pool has started (numba only starts it on the first parallel call)."""
    if getattr(_numba_parallel, "_is_initialized", False):
        return _numba_parallel.threading_layer()
    return str(numba.config.THREADING_LAYER)


_select_threading_layer()
_env_threads = _threads_from_env()
if _env_threads is not None:
    # Record only; numba.set_num_threads would start the pool at import.
    _requested = _env_threads
    _generation += 1
