"""numba threading setup for funcgrad's CPU kernels.

Import this module before any parallel numba kernel runs (every
``kernels_*`` module imports it first). It does four things:

1. Picks numba's ``tbb`` threading layer, which may be entered from several
   Python threads at once. numba's ``workqueue`` layer aborts the whole
   process ("Concurrent access has been detected") when two threads launch
   parallel kernels together. Its ``omp`` layer (GNU OpenMP) is not
   fork-safe and its workers spin after each kernel, competing with BLAS
   and with PyTorch's own pool: measured on 2 cores, a jitted MLP step took
   40 ms on ``omp`` against 6 ms on ``tbb`` (7 ms on ``workqueue``), and
   ``tbb`` was also the fastest beside PyTorch (see README.md). On a single
   CPU (an affinity mask or a cgroup quota under two CPUs) it is
   ``workqueue``: there oneTBB starts no worker thread and numba's pool
   hung the process at exit. TBB comes
   from the ``tbb`` wheel, whose library pip puts in ``<prefix>/lib``,
   outside the loader's path: it is loaded here by its full path so that
   numba finds it. An explicit ``NUMBA_THREADING_LAYER`` is respected.
2. When the layer in use is ``workqueue`` (no usable TBB, or chosen in the
   environment), serialises parallel kernel launches with one process-wide
   lock (:func:`guard`), so threads wait for each other instead of aborting.
3. Honours ``FUNCGRAD_NUM_THREADS`` (default: all cores numba sees).
4. Stops numba's coloured error messages from swapping ``sys.stdout`` and
   ``sys.stderr`` (:func:`_keep_streams`): numba formats such messages during
   ordinary compiles, which funcgrad runs on a background thread.

Thread counts are numba's, which are per calling Python thread. We keep a
process-wide request and every kernel wrapper calls :func:`prepare` (a
cheap check) so that a count set with :func:`set_num_threads` applies in
whichever Python thread later runs a kernel.

Example::

    from funcgrad.backends.cpu import _threads
    _threads.set_num_threads(1)      # e.g. for reproducible timings
    assert _threads.get_num_threads() == 1
    _threads.threading_layer()       # 'tbb' where the tbb wheel is installed
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import warnings
from typing import Callable

import numba
from numba.np.ufunc import parallel as _numba_parallel

__all__ = ["set_num_threads", "get_num_threads", "max_threads",
           "threading_layer", "prepare", "guard"]

_ENV_THREADS = "FUNCGRAD_NUM_THREADS"
_ENV_LAYER = "NUMBA_THREADING_LAYER"

# numba's TBB layer needs oneTBB 2021.6 or later (its own check).
_TBB_MIN_INTERFACE = 12060
_TBB_SONAME = {"linux": "libtbb.so.12", "darwin": "libtbb.12.dylib",
               "win32": "tbb12.dll"}.get(sys.platform, "libtbb.so.12")

# What numba picks for each of its group names, first loadable wins
# (numba's THREADING_LAYER_PRIORITY order; GNU OpenMP is not fork-safe).
_GROUPS = {"default": ("tbb", "omp", "workqueue"),
           "threadsafe": ("tbb", "omp"), "safe": ("tbb",),
           "forksafe": ("tbb", "workqueue")}


def _tbb_library_paths() -> list[str]:
    """Where the ``tbb`` wheel's runtime may lie: its recorded files first,
    then ``<prefix>/lib`` (and ``Library/bin`` on Windows)."""
    paths = []
    try:
        from importlib import metadata
        for f in metadata.files("tbb") or ():
            if os.path.basename(str(f)) == _TBB_SONAME:
                paths.append(str(f.locate()))
    except Exception:   # no tbb distribution, or unreadable metadata
        pass
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        paths.append(os.path.join(prefix, "lib", _TBB_SONAME))
        paths.append(os.path.join(prefix, "Library", "bin", _TBB_SONAME))
    return [os.path.abspath(p) for p in dict.fromkeys(paths) if os.path.exists(p)]


def _load_tbb() -> bool:
    """Load a TBB runtime numba accepts; True when its layer can be used.

    Loading the library once by full path (globally) lets numba's later
    ``dlopen`` by name find it. A library that is already on the loader's
    path (conda, system packages) is found by name.
    """
    mode = getattr(ctypes, "RTLD_GLOBAL", 0)
    for name in _tbb_library_paths() + [_TBB_SONAME]:
        try:
            lib = ctypes.CDLL(name, mode=mode)
            version = lib.TBB_runtime_interface_version
        except (OSError, AttributeError):
            continue
        version.restype = ctypes.c_int
        if version() < _TBB_MIN_INTERFACE:
            return False    # numba would refuse it (and warn)
        break
    else:
        return False
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401
    except ImportError:
        return False
    return True


def _loadable(layer: str) -> bool:
    if layer == "tbb":
        return _load_tbb()
    if layer == "omp":
        try:
            from numba.np.ufunc import omppool  # noqa: F401
        except ImportError:
            return False
    return True


def _select_threading_layer() -> str:
    """Configure numba's layer; return the one its pool will use.

    numba reads ``config.THREADING_LAYER`` only when its pool first starts,
    so this must run before the first parallel kernel launches anywhere in
    the process; if other code already started the pool we keep its layer.
    """
    if getattr(_numba_parallel, "_is_initialized", False):
        layer = _numba_parallel.threading_layer()
        if layer == "omp":
            warnings.warn(
                "funcgrad: numba's thread pool was already started with the "
                "'omp' layer, which slows PyTorch in the same process; set "
                "NUMBA_THREADING_LAYER=tbb (pip install tbb) to avoid it",
                RuntimeWarning, stacklevel=3)
        return layer
    requested = os.environ.get(_ENV_LAYER, "").strip().lower()
    if requested:   # an explicit user choice wins; find what numba will pick
        for layer in _GROUPS.get(requested, (requested,)):
            if _loadable(layer):   # (loads TBB where numba may pick it)
                return layer
        return "workqueue"   # none loads: numba will raise at the first parallel kernel
    # On one CPU oneTBB starts no worker thread, and numba's pool then hangs the process at exit
    # (its shutdown waits for a task that the thread which started the pool left queued).
    layer = "tbb" if _usable_cpus() >= 2 and _load_tbb() else "workqueue"
    numba.config.THREADING_LAYER = layer
    return layer


def _usable_cpus() -> float:
    """How many CPUs this process may use: its affinity mask, capped by a cgroup CPU quota."""
    try:
        n: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # no affinity masks here (macOS, Windows)
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    return n if quota is None else min(n, quota)


def _cgroup_quota() -> float | None:
    """The cgroup's CPU quota in CPUs (``cpu.max`` of cgroup v2, or v1's ``cfs`` pair); None: no quota."""
    for quota_file, period_file in (("/sys/fs/cgroup/cpu.max", None),
                                    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")):
        try:
            with open(quota_file) as f:
                words = f.read().split()
            if period_file is not None:
                with open(period_file) as f:
                    words = words[:1] + f.read().split()[:1]
            if words[0] in ("max", "-1"):
                return None
            return int(words[0]) / int(words[1])
        except (OSError, ValueError, IndexError, ZeroDivisionError):
            continue
    return None


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
    """Use ``n`` threads (1 <= n <= max_threads()) in funcgrad's kernels.

    >>> n = fg.get_num_threads()
    >>> fg.set_num_threads(1)
    >>> fg.get_num_threads()
    1
    >>> fg.set_num_threads(n)
    """
    global _requested, _generation
    n = int(n)
    if not 1 <= n <= max_threads():
        raise ValueError(f"set_num_threads({n}): expected 1 <= n <= "
                         f"{max_threads()} (numba's NUMBA_NUM_THREADS)")
    _requested = n
    _generation += 1
    prepare()


def get_num_threads() -> int:
    """Thread count funcgrad's parallel kernels will use.

    >>> fg.get_num_threads() >= 1
    True
    """
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
    """numba's active threading layer, or the one its pool will start with
    (numba only starts it on the first parallel call)."""
    if getattr(_numba_parallel, "_is_initialized", False):
        return _numba_parallel.threading_layer()
    return _layer


def guard(kernel: Callable) -> Callable:
    """``kernel`` itself, or under ``workqueue`` a wrapper that launches it
    under one process-wide lock (that layer aborts on concurrent launches).

    Wrap the *parallel* kernels only, at the call (or when the kernel is
    made)::

        _threads.guard(_softmax_par)(x, out)
    """
    if _launch_lock is None:
        return kernel

    def locked(*args, **kwargs):
        with _launch_lock:
            return kernel(*args, **kwargs)
    locked.__wrapped__ = kernel
    return locked


def _keep_streams() -> None:
    """Let numba colour its messages without replacing the process's streams.

    With colorama installed, numba formats every message inside colorama's
    ``init()``/``deinit()``, which replace ``sys.stdout`` and ``sys.stderr``
    with wrappers and then put back the objects they saw at ``init()``.
    numba formats messages during ordinary compiles, too: typing a global
    first tries, and fails, one way. funcgrad compiles kernels on a
    background thread while the caller's thread goes on, so the swap raced
    with that thread's output: a ``print`` under ``redirect_stdout`` (or a
    doctest, or pytest's capture) could go to the wrong stream, and the
    ``deinit()`` could undo a redirect made in between. The wrapping only
    matters on old Windows consoles, so numba's ``ColorShell`` becomes a
    context that does nothing; the colour codes numba writes are unchanged.
    """
    from numba.core import errors
    if hasattr(errors, "ColorShell"):   # absent without colorama, or with highlighting disabled
        errors.ColorShell = contextlib.nullcontext


_keep_streams()
_layer = _select_threading_layer()
_launch_lock = threading.Lock() if _layer == "workqueue" else None
_env_threads = _threads_from_env()
if _env_threads is not None:
    # Record only; numba.set_num_threads would start the pool at import.
    _requested = _env_threads
    _generation += 1
