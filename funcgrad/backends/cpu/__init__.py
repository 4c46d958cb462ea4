"""The CPU backend: numpy buffers, funcgrad's numba kernels, and the numba compiler behind ``jit``.

Importing it (``import funcgrad`` does, before anything runs) registers

* the kernel-selecting host implementations of the primitives that have
  numba kernels (:mod:`.impls`; each primitive's numpy reference stays as
  ``prim.impls["reference"]``) and the traits compiled programs rely on;
* the lowerings of fusible primitives for the numba compiler, and the
  runtime its generated kernels use (:mod:`.lowering`);
* :data:`backend`, whose :meth:`CpuBackend.compile` turns a traced program
  into a :class:`funcgrad.compiler.program.Program` (optimised, fused into
  generated kernels, with a buffer plan).

The kernel cache module is imported before any kernel: numba's cache of
these kernels then heals damaged files and falls back to a private
directory when it cannot write (see :mod:`funcgrad.compiler.kernel_cache`).
"""
from __future__ import annotations

from typing import Any, Callable

from funcgrad.compiler import kernel_cache as _kernel_cache  # noqa: F401  (first: see the docstring)

from funcgrad import _core
from funcgrad._config import config
from funcgrad._core import Array
from funcgrad._ir import Jaxpr
from funcgrad.backends import Backend, register_backend
from funcgrad.backends.cpu import gemm_update
from funcgrad.backends.cpu import bfloat16 as _bfloat16
from funcgrad.backends.cpu import impls as _impls
from funcgrad.backends.cpu import lowering as _lowering
from funcgrad.compiler import fusion, loops, passes, schedule
from funcgrad.compiler.program import Program


class CpuBackend(Backend):
    """The host: numpy buffers behind :class:`funcgrad.Array`, numba kernels, compiled jit programs.

    >>> from funcgrad.backends.cpu import backend
    >>> program = backend.compile(fg.make_jaxpr(lambda x: fnp.sin(x) * 2)(fnp.ones(3)))
    >>> program.run([np.ones(3, np.float32)])[0]      # Array([1.6829419, ...])
    Array([1.6829, 1.6829, 1.6829], dtype=float32)
    """

    name = "cpu"
    array_type = Array

    def device_value(self, arg: Any) -> Any:
        if isinstance(arg, Array):
            return arg._value
        return arg if isinstance(arg, (bool, int, float)) else _core.to_numpy_input(arg)

    def wrap(self, out: Any) -> Array:
        return _core._wrap(out)

    def host_value(self, value: Any) -> Any:
        return value

    def missing_impl(self, prim: Any) -> Callable[..., Any]:
        return prim.impl

    def to_device(self, x: Any) -> Any:
        return x

    def to_host(self, x: Any) -> Any:
        return x

    def compile(self, jaxpr: Jaxpr) -> Program:
        """Optimise (fold, CSE, DCE), fuse into numba kernels (unless disabled) and plan a program.

        ``program.run(buffers)`` takes the inputs' numpy buffers and returns Arrays.
        """
        return self._compile(jaxpr, top=True)

    def _compile(self, jaxpr: Jaxpr, top: bool) -> Program:
        optimised = passes.compile_subprograms(passes.optimize(jaxpr), lambda sub: self._compile(sub, top=False))
        # Under debug_nans every primitive runs on its own, so a NaN is named precisely.
        if config.jit_fusion and not config.debug_nans:
            if top:   # loop bodies keep their products: the loop compiler (compiler/loops.py) runs them
                optimised = gemm_update.rewrite(optimised)
            optimised = fusion.fuse(optimised)
            if top:   # an order keeping fewer bytes alive (before the buffer plan)
                optimised = schedule.schedule(optimised)
        return Program(optimised)


_impls.register()
_bfloat16.register()   # after the kernels' impls: it wraps them
_lowering.register()
loops.install()   # jitted scan/while loops whose bodies allow it run as one compiled function
backend = register_backend(CpuBackend())

__all__ = ["backend", "CpuBackend"]
