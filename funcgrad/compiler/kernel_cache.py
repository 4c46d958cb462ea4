"""The on-disk cache of generated kernels: where it is, how it heals, how big it grows.

One entry per generated kernel: ``fg_<digest>.py`` in the cache directory
(the kernel's source, named by the hash of that source) and the machine code
numba's ``cache=True`` stores for it in ``__pycache__/fg_<digest>.*.nbi/.nbc``.

* Damage never breaks a kernel.  A source file is compared with the source it
  must hold: a truncated, empty or garbage one is rewritten.  numba index and
  data files that fail to load are deleted and the kernel compiled again --
  for funcgrad's hand-written kernels (``funcgrad/backends/cpu``) too.  Each
  discarded entry is reported once, with a :class:`funcgrad.CacheWarning`.
* An unusable directory (read-only, not a directory, someone else's) is
  replaced, for the rest of the process, by a private temporary directory
  (removed at exit), with one ``CacheWarning``; without a writable temporary
  directory either, kernels compile in memory.
* Size: when a process writes a new entry and the directory holds more than
  ``config.cache_max_bytes``, the least recently used entries (a source and
  its numba files together) are deleted until it holds 80% of the cap.  An
  entry's use time is its source's access time, set on each process's first
  use of it.  Deletion races harmlessly with other processes: one that finds
  a file missing writes or compiles it again.

* Loading: numba refreshes its whole target context before it loads a cached
  function (every lowering registry imported and installed: about 0.2 s of
  CPU once per process, which only compiling needs).  funcgrad's kernels
  load with numba's runtime started alone (:func:`start_runtime`, ~30 ms);
  the first compile in the process refreshes as usual.

New files get the user's umask, so a directory shared by a group works.

Where kernels go now (None: in memory):

>>> from funcgrad.compiler import kernel_cache
>>> kernel_cache.cache_dir()          # doctest: +SKIP
'/home/me/.cache/funcgrad/kernels'
"""
from __future__ import annotations

import atexit
import glob
import os
import shutil
import sys
import tempfile
import threading
import time
import types
import uuid
import warnings
from typing import Any, Callable

from funcgrad._config import config
from funcgrad._warnings import CacheWarning

# Eviction goes below the cap (to this fraction), so that it does not run on every write.
_EVICT_TO = 0.8

_lock = threading.Lock()
_fallback: dict[str, str | None] = {}   # unusable directory -> the one used instead (None: memory)
_private: list[str | None] = []         # this process's temporary directory, once made
_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, CacheWarning, stacklevel=2)


def cache_dir() -> str | None:
    """The directory kernels are cached in now: ``config.cache_dir``, or this
    process's fallback when that is unusable (``None``: compiled in memory)."""
    directory: str | None = config.cache_dir
    while directory is not None and directory in _fallback:
        directory = _fallback[directory]
    return directory


def _private_dir() -> str | None:
    """This process's private temporary directory (made once, removed at exit); None if none can be made."""
    with _lock:
        if not _private:
            try:
                made: str | None = tempfile.mkdtemp(prefix="funcgrad-kernels-")
                atexit.register(shutil.rmtree, made, True)
            except OSError:
                made = None
            _private.append(made)
        return _private[0]


def _fall_back(failed: str, err: BaseException) -> None:
    private = _private_dir()
    with _lock:
        if failed in _fallback:
            return
        _fallback[failed] = None if failed == private else private
        instead = _fallback[failed]
    where = (f"a private temporary directory ({instead}) for this process" if instead
             else "memory (no writable temporary directory either)")
    _warn_once("dir:" + failed,
               f"funcgrad: the kernel cache directory {failed!r} is not usable ({type(err).__name__}: {err}); "
               f"compiled kernels go to {where} and are not kept for later processes. Point FUNCGRAD_CACHE_DIR "
               "(or fg.config.update('cache_dir', path)) at a directory you can write.")


# ---------------------------------------------------------------- entries


def load_kernel(digest: str, source: str) -> Callable:
    """The ``kernel`` function defined by ``source`` (whose hash is ``digest``),
    cached on disk where possible, healing a damaged entry on the way."""
    for _ in range(4):
        directory = cache_dir()
        if directory is None:
            break
        path = os.path.join(directory, f"fg_{digest}.py")
        try:
            written = _ensure_source(path, source)
        except OSError as err:
            _fall_back(directory, err)
            continue
        try:
            kernel = _exec(digest, source, path)
        except (OSError, RuntimeError) as err:
            # The file vanished (another process evicted it): write it again.  Still
            # there: numba found no writable place for its files beside it.
            if os.path.exists(path):
                _fall_back(directory, err)
            continue
        if written:
            evict(directory, keep=digest)
        else:
            _touch(path)
        return kernel
    return _exec(digest, source, None)


def _ensure_source(path: str, source: str) -> bool:
    """Make ``path`` hold ``source``; True when this call wrote it.  Raises OSError
    when the directory cannot be written."""
    data = source.encode()
    try:
        with open(path, "rb") as f:
            existing: bytes | None = f.read()
    except FileNotFoundError:
        existing = None
    if existing == data:
        return False
    if existing is not None:
        _warn_once(path, f"funcgrad: discarded a damaged kernel cache file {path} ({len(existing)} bytes that are "
                         "not the source it is named for); it is written and compiled again.")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # A unique temporary name, opened with "x": the file gets the user's umask
    # (mkstemp's 0600 would lock a shared cache to its first writer).
    tmp: str | None = f"{path}.{uuid.uuid4().hex[:16]}.tmp"
    with open(tmp, "xb") as f:
        f.write(data)
    try:
        if existing is None:
            try:
                os.link(tmp, path)       # atomic create-if-absent: a concurrent writer's copy wins
            except FileExistsError:
                return False
            except OSError:
                os.replace(tmp, path)    # a file system without hard links
                tmp = None
        else:
            os.replace(tmp, path)        # atomic: readers see the old or the new file, never half
            tmp = None
    finally:
        if tmp is not None:
            _unlink(tmp)
    return True


def module_name(digest: str) -> str:
    return f"funcgrad_kernels.fg_{digest}"


def _exec(digest: str, source: str, path: str | None) -> Callable:
    """Run the kernel module's source (no ``.pyc``: nothing more to damage).

    The module is registered in ``sys.modules``: numba finds a cached
    kernel's globals through it."""
    name = module_name(digest)
    module = types.ModuleType(name)
    if path is None:   # in memory: nowhere for numba to cache either
        source, path = source.replace("cache=True", "cache=False"), f"<funcgrad kernel {digest}>"
    module.__file__ = path
    sys.modules[name] = module
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module.kernel


def _touch(path: str) -> None:
    # Access time marks use (least-recently-used eviction); the modification
    # time stays, and numba keys its files on the content anyway.
    try:
        os.utime(path, ns=(time.time_ns(), os.stat(path).st_mtime_ns))
    except OSError:
        pass


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ---------------------------------------------------------------- size cap


def entries(directory: str) -> dict[str, list]:
    """``digest -> [last use, bytes, paths]`` for the entries in ``directory``."""
    found: dict[str, list] = {}
    for folder in (directory, os.path.join(directory, "__pycache__")):
        try:
            listing = list(os.scandir(folder))
        except OSError:
            continue
        for item in listing:
            if not item.name.startswith("fg_"):
                continue
            try:
                st = item.stat()
            except OSError:
                continue   # deleted meanwhile
            digest = item.name[3:].split(".", 1)[0]
            used = max(st.st_atime, st.st_mtime) if item.name == f"fg_{digest}.py" else st.st_mtime
            entry = found.setdefault(digest, [0.0, 0, []])
            entry[0] = max(entry[0], used)
            entry[1] += st.st_size
            entry[2].append(item.path)
    return found


def evict(directory: str, keep: str = "") -> int:
    """Delete least recently used entries while ``directory`` holds more than
    ``config.cache_max_bytes`` (0: no cap); never ``keep``.  Returns bytes freed."""
    cap = config.cache_max_bytes
    if cap <= 0:
        return 0
    found = entries(directory)
    total = sum(size for _, size, _ in found.values())
    if total <= cap:
        return 0
    freed = 0
    for digest, (_, size, paths) in sorted(found.items(), key=lambda kv: kv[1][0]):
        if total - freed <= cap * _EVICT_TO:
            break
        if digest == keep:
            continue
        for path in paths:
            _unlink(path)
        freed += size
    return freed


# ------------------------------------------------------- numba's own files


def _ours(cache: Any) -> bool:
    return _our_function(getattr(cache, "_py_func", None))


def _our_function(py_func: Any) -> bool:
    module = getattr(py_func, "__module__", None) or ""
    return module.split(".", 1)[0] in ("funcgrad", "funcgrad_kernels")


def _discard_numba_entry(cache: Any, err: BaseException) -> None:
    directory = getattr(cache, "_cache_path", None)
    base = getattr(getattr(cache, "_impl", None), "filename_base", None)
    if directory and base:
        _unlink(os.path.join(directory, base + ".nbi"))
        for path in glob.glob(os.path.join(glob.escape(directory), glob.escape(base) + ".*.nbc")):
            _unlink(path)
    _warn_once(f"numba:{directory}/{base}",
               f"funcgrad: discarded damaged compiled-kernel files {base}.nbi/.nbc in {directory} "
               f"({type(err).__name__}: {err}); the kernel is compiled again.")


# Load funcgrad's cached kernels without refreshing numba's target context (see
# :func:`_load_unrefreshed`); False: as numba does (for measurements).
LIGHT_LOAD = True
light_loads = 0   # kernels loaded so (a count for tests)


def _can_load_unrefreshed(cls: Any) -> bool:
    try:
        from numba.core.runtime import rtsys
    except ImportError:   # pragma: no cover - another numba layout
        return False
    return all(hasattr(x, name) for x, name in ((cls, "_load_overload"), (rtsys, "initialize"),
                                                 (cls, "_guard_against_spurious_io_errors")))


def _load_unrefreshed(cache: Any, sig: Any, target_context: Any) -> Any:
    """numba's ``load_overload`` without its ``target_context.refresh()``.

    That refresh imports and installs every lowering registry numba has (about 0.2 s
    of CPU, once per process) -- what *compiling* needs.  Rebuilding a cached kernel
    from its machine code needs only numba's runtime (NRT), which the refresh would
    start: this starts it alone.  The first compile in the process refreshes as usual
    (numba's compiler does so itself)."""
    global light_loads
    from numba.core.runtime import rtsys
    rtsys.initialize(target_context)
    with cache._guard_against_spurious_io_errors():
        loaded = cache._load_overload(sig, target_context)
    light_loads += loaded is not None
    return loaded


def start_runtime() -> None:
    """Start numba's runtime (NRT) now: what loading or running any compiled kernel needs
    first (about 30 ms, mostly LLVM work outside the interpreter lock); once per process."""
    from numba.core import registry
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys
    with global_compiler_lock:   # as numba starts it: never two threads at once
        rtsys.initialize(registry.cpu_target.target_context)


def _guard_numba_cache() -> None:
    """Make numba's cache heal for funcgrad's kernels: files that fail to load
    are deleted and the kernel compiled again, instead of every later call
    failing with an UnpicklingError or EOFError.  Other code's numba caches
    behave as numba makes them."""
    try:
        from numba.core import caching
        cls = caching.Cache
        load, save = cls.load_overload, cls.save_overload
    except (ImportError, AttributeError):   # another numba layout: nothing to guard
        return
    light = _can_load_unrefreshed(cls)
    if getattr(load, "_funcgrad_guard", False):
        return

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        try:
            if light and LIGHT_LOAD and _ours(self):
                return _load_unrefreshed(self, sig, target_context)
            return load(self, sig, target_context)
        except Exception as err:
            if not _ours(self):
                raise
            _discard_numba_entry(self, err)
            return None   # numba compiles it and saves fresh files

    def save_overload(self: Any, sig: Any, data: Any) -> None:
        try:
            save(self, sig, data)
        except OSError:
            if not _ours(self):
                raise   # ours: not cached this time; the compiled kernel works all the same
        except Exception as err:   # saving reads the index first: a damaged one fails here
            if not _ours(self):
                raise
            _discard_numba_entry(self, err)
            try:
                save(self, sig, data)
            except Exception:
                pass

    load_overload._funcgrad_guard = save_overload._funcgrad_guard = True   # type: ignore[attr-defined]
    cls.load_overload, cls.save_overload = load_overload, save_overload
    _add_private_locator(caching)


def _add_private_locator(caching: Any) -> None:
    """numba caches a module's kernels in its ``__pycache__``, else in ``~/.cache/numba``;
    with neither writable (a read-only install and a read-only HOME) it refuses to
    define the function at all.  For funcgrad's kernels a last locator then uses
    this process's private temporary directory, with one CacheWarning."""
    try:
        base = (caching._SourceFileBackedLocatorMixin, caching._CacheLocator)
        locators = caching.CacheImpl._locator_classes
    except AttributeError:
        return

    class PrivateLocator(*base):   # type: ignore[misc]
        def __init__(self, py_func: Any, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(_private_dir() or "", self.get_suitable_cache_subpath(py_file))

        def get_cache_path(self) -> str:
            return self._cache_path

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if not _our_function(py_func) or _private_dir() is None:
                return None
            locator = super().from_function(py_func, py_file)
            if locator is not None:
                _warn_once("numba-private",
                           f"funcgrad: numba can write its compiled kernels neither beside {os.path.dirname(py_file)} "
                           f"nor in its user cache directory; they go to a private temporary directory "
                           f"({_private_dir()}) for this process. Set NUMBA_CACHE_DIR to a writable directory to "
                           "keep them.")
            return locator

    if not any(getattr(c, "_funcgrad", False) for c in locators):
        PrivateLocator._funcgrad = True   # type: ignore[attr-defined]
        locators.append(PrivateLocator)


_guard_numba_cache()
