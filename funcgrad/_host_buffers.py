"""Reuse of freed host memory on the eager path: glibc's malloc told to keep large freed blocks.

Eager work allocates a fresh numpy buffer for every primitive's output and
frees it when the last Array holding it dies; a training step allocates and
frees the same few megabytes again and again. By default glibc hands large
freed blocks back to the operating system (``munmap``, or trimming the top
of the heap), so the next step's buffers arrive as fresh pages, and the
first write to each page is a page fault: thousands per step, a large part
of an eager MLP step's time.

At import, and at every ``config.update("host_buffer_cache_bytes", n)``,
this module sets two of glibc's malloc options for the process (via
``mallopt``): blocks below ``min(n, 32 MiB)`` come from the heap rather than
their own mappings, and up to ``n`` bytes of freed memory stay in the heap
for the next allocation instead of going back to the OS (neither below
glibc's default of 128 KiB). Nothing else
changes: memory is still allocated and freed by malloc, so a buffer is only
ever reused after numpy has freed it (no Array, view or ``np.asarray``
result can still see it), and malloc's own locks make it thread-safe.

It is a process-wide setting, so it is skipped when the user tuned malloc
(``GLIBC_TUNABLES`` naming ``glibc.malloc``, or a ``MALLOC_*_`` variable), and
where the C library is not glibc. ``FUNCGRAD_HOST_BUFFER_CACHE_BYTES=0`` (or
``config.update("host_buffer_cache_bytes", 0)``) turns it off, restoring
glibc's default thresholds and returning cached memory to the OS.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any

from funcgrad._config import config, on_update

M_TRIM_THRESHOLD = -1        # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20   # the largest mmap threshold glibc accepts on 64-bit
GLIBC_DEFAULT_THRESHOLD = 128 << 10
_USER_MALLOC_VARS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")

_lock = threading.Lock()
_state: dict[str, Any] = {"active": False, "touched": False, "reason": "not applied yet"}


def _glibc() -> Any:
    """The process's C library if it is glibc with ``mallopt``, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
    except (OSError, AttributeError):
        return None
    return libc


def user_tuned_malloc() -> bool:
    """Whether the environment already sets glibc's malloc options (then funcgrad leaves them alone)."""
    return "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "") or any(v in os.environ for v in _USER_MALLOC_VARS)


def apply() -> None:
    """Set the C allocator's thresholds from ``config.host_buffer_cache_bytes`` (0: glibc's defaults)."""
    cap = config.host_buffer_cache_bytes
    with _lock:
        libc = _glibc()
        if libc is None:
            _state.update(active=False, reason="the C library is not glibc")
            return
        if user_tuned_malloc():
            _state.update(active=False, reason="malloc options set by the environment (GLIBC_TUNABLES/MALLOC_*)")
            return
        if cap == 0:
            if _state["touched"]:
                libc.mallopt(M_MMAP_THRESHOLD, GLIBC_DEFAULT_THRESHOLD)
                libc.mallopt(M_TRIM_THRESHOLD, GLIBC_DEFAULT_THRESHOLD)
                libc.malloc_trim(0)
            _state.update(active=False, reason="off (host_buffer_cache_bytes=0)")
            return
        cap = min(cap, (1 << 31) - 1)          # mallopt takes a C int
        # Never below glibc's own defaults: a small cap must not send more blocks to mmap than glibc would.
        mmap_threshold = min(max(cap, GLIBC_DEFAULT_THRESHOLD), MMAP_THRESHOLD_MAX)
        ok = (libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
              and libc.mallopt(M_TRIM_THRESHOLD, max(cap, GLIBC_DEFAULT_THRESHOLD)))
        if _state.get("cache_bytes", cap) > cap:
            libc.malloc_trim(cap)              # a lower cap returns what is now over it
        _state.update(active=bool(ok), touched=True, cache_bytes=cap,
                      reason="on" if ok else "mallopt refused the thresholds")


def info() -> dict:
    """Whether freed host buffers are being kept for reuse, the cap in bytes, and why when not.

    >>> import funcgrad._host_buffers as hb
    >>> sorted(hb.info())[:2]
    ['active', 'cache_bytes']
    """
    with _lock:
        return {"active": _state["active"], "cache_bytes": _state.get("cache_bytes", 0) if _state["active"] else 0,
                "reason": _state["reason"]}


apply()
on_update("host_buffer_cache_bytes", apply)
