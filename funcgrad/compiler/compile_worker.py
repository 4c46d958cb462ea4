"""A child process compiling generated kernels into the shared disk cache.

The background compiles of the tiered start (:func:`funcgrad.compiler.codegen.compile_in_background`)
share the interpreter lock with the calling thread: while numba compiles, the
caller's steps wait for the lock each time numpy hands it back.  With more than
one core, a child process compiles instead: it writes numba's cache files for
the kernel's source file (``kernel_cache`` keeps that directory safe across
processes), and the compiler thread then loads the kernel from there, a few
milliseconds under the lock.  The child is only an accelerator: whatever it
did not cache, the compiler thread compiles itself, as without it.

The child imports numba and the kernels' helper module alone (not funcgrad:
its package modules are stand-ins), so it starts in well under a second, on a
core the caller is not using.  It exits when its input closes: when the
compiler thread goes idle, or at exit.

``FUNCGRAD_JIT_COMPILE_PROCESS``: "1" (the default on machines with more than
one core) or "0".

Protocol: one JSON request per line on stdin, ``{"path", "module", "sig"}``;
one JSON reply per line on stdout, ``{"ok": bool, "error": str}``.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from typing import Any

# The helper modules generated kernels import, loaded in the child without the package around them.
_STAND_INS = ("funcgrad", "funcgrad.compiler", "funcgrad.backends", "funcgrad.backends.cpu")
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def enabled() -> bool:
    """``FUNCGRAD_JIT_COMPILE_PROCESS`` (read at each use), by default: more than one core, and an
    interpreter that can be started again (not one embedded in another program)."""
    value = os.environ.get("FUNCGRAD_JIT_COMPILE_PROCESS", "").strip().lower()
    if value in ("0", "off", "false", "no"):
        return False
    if not os.path.basename(sys.executable or "").lower().startswith(("python", "pypy")):
        return False
    return value in ("1", "on", "true", "yes") or _cores() > 1


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))   # the cores this process may run on
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def encode_signature(signature: tuple) -> list | None:
    """numba argument types as JSON, or None for a type the child would not rebuild."""
    from numba.core import types
    out: list = []
    for t in signature:
        if isinstance(t, types.Array) and isinstance(t.dtype, (types.Number, types.Boolean)):
            out.append(["array", str(t.dtype), t.ndim, t.layout, not t.mutable, t.aligned])
        elif isinstance(t, (types.Integer, types.Float, types.Boolean)):
            out.append(["scalar", str(t)])
        else:
            return None
    return out


def decode_signature(encoded: list) -> tuple:
    import numpy as np
    from numba import from_dtype
    from numba.core import types
    out = []
    for item in encoded:
        if item[0] == "array":
            _, dtype, ndim, layout, readonly, aligned = item
            out.append(types.Array(from_dtype(np.dtype(dtype)), ndim, layout, readonly=readonly, aligned=aligned))
        else:
            out.append(from_dtype(np.dtype(item[1])))
    return tuple(out)


class Child:
    """The compile process, started on first use; one request at a time."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.broken = False
        self.pid = os.getpid()

    def _forked(self) -> None:
        """In a forked process: forget the parent's child (its pipes are the parent's)."""
        if self.pid != os.getpid():
            self.pid, self.proc, self.lock = os.getpid(), None, threading.Lock()

    def usable(self) -> bool:
        """Whether compiles go to the child: switched on, not failed, and a disk cache to share."""
        from funcgrad.compiler import kernel_cache
        return not self.broken and enabled() and kernel_cache.cache_dir() is not None

    def compile(self, path: str, module: str, signature: tuple) -> bool:
        """Have the child compile ``kernel`` of the module at ``path`` for ``signature`` into the disk
        cache; False when it could not (the caller compiles it then)."""
        encoded = encode_signature(signature)
        if encoded is None or self.broken:
            return False
        self._forked()
        with self.lock:
            try:
                proc = self._start()
                proc.stdin.write(json.dumps({"path": path, "module": module, "sig": encoded}) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise OSError("the kernel compile process exited")
                return bool(json.loads(line).get("ok"))
            except (OSError, ValueError):
                self.broken = True   # not again in this process
                self._stop()
                return False

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, _PACKAGE_ROOT], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                         bufsize=1)
        return self.proc

    def close(self) -> None:
        """Let the child exit (its input closes); kill it if a compile keeps it busy for long."""
        self._forked()
        if self.lock.acquire(timeout=30):
            try:
                self._stop()
            finally:
                self.lock.release()
        elif self.proc is not None:
            self.proc.kill()

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()


def serve() -> None:
    """The child's loop (see the module docstring); the stand-in packages are installed."""
    import signal
    import types as pytypes
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle; it closes our input
    importlib.import_module("funcgrad.backends.cpu._threads")   # numba's threading layer, as in the parent
    for line in sys.stdin:
        try:
            request = json.loads(line)
            with open(request["path"]) as f:
                source = f.read()
            module = pytypes.ModuleType(request["module"])
            module.__file__ = request["path"]
            sys.modules[request["module"]] = module
            exec(compile(source, request["path"], "exec"), module.__dict__)
            module.kernel.compile(decode_signature(request["sig"]))
            reply: dict[str, Any] = {"ok": True}
        except Exception as err:   # reported; the parent compiles it itself
            reply = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


# The child's program: stand-ins for the packages on the way to the helper modules (importing
# funcgrad itself would take longer than most compiles), then :func:`serve`.
_CHILD = """
import os, sys, types
root = sys.argv[1]
for name in %r:
    module = types.ModuleType(name)
    module.__path__ = [os.path.join(root, *name.split("."))]
    sys.modules[name] = module
from funcgrad.compiler.compile_worker import serve
serve()
""" % (_STAND_INS,)
