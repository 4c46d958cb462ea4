"""``jit`` on GPU arrays: the GPU backend's ``compile(jaxpr)``.

The traced program is optimised as on the CPU (inline calls, fold constants,
CSE, DCE), then fused with the CPU compiler's grouping
(:func:`funcgrad.compiler.fusion.fuse`) under this backend's rule: chains
of elementwise primitives with a Triton lowering
(:mod:`funcgrad.backends.gpu.triton_codegen`) become one generated Triton
kernel each (a trailing reduction may end one). Everything else -- matmul,
other reductions, shape changes, the row kernels, loops -- runs through the
GPU implementations, one primitive at a time, as ``jit`` did before; loop
bodies and branches are compiled the same way, and the GPU loops run their
compiled form (:meth:`GpuProgram.run_on_device`). Everything is launched on the current stream,
in program order, with no host synchronisation.

The run loop resolves each equation's GPU implementation once, when the
program is built, and calls it directly when every input is a GPU array or a
Python scalar (the common case: a jitted step on device arrays), skipping the
general dispatch of ``funcgrad._core.apply_primitive``; anything else (host
arrays among the inputs, a primitive without a GPU implementation, control
flow, the profiler or ``debug_nans`` on) goes through that dispatch.

Fusion needs Triton (and is off under ``debug_nans`` or with
``jit_fusion`` off): without it, the optimised program runs primitive by
primitive.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._config import config
from funcgrad._core import Array
from funcgrad._ir import Jaxpr, Literal, eval_jaxpr, pretty_print
from funcgrad.compiler import fusion, passes
from funcgrad.backends.gpu import graphs, triton_codegen
from funcgrad.primitives import control_flow as CF

__all__ = ["GpuProgram", "compile_jaxpr"]

# Primitives that always take the general dispatch (their implementations run sub-programs).
_DISPATCHED = frozenset({CF.cond_p, CF.scan_p, CF.while_p, CF.while_grad_p, CF.custom_call_p})
_SCALARS = (bool, int, float)


class GpuProgram:
    """A traced program on the GPU: generated Triton kernels for its fused groups, the GPU
    implementations for the rest.

    ``run(buffers)`` takes the arguments' buffers (device buffers, or numpy buffers of host
    arguments) and returns Arrays; ``kernels`` lists the fused groups.
    """

    def __init__(self, jaxpr: Jaxpr, backend: Any, xp: Any, unfused: Jaxpr | None = None):
        self.jaxpr = jaxpr
        self.unfused = jaxpr if unfused is None else unfused   # what a host loop runs (run_buffers)
        self.backend = backend    # the GPU backend object (device values, wrapping)
        self.xp = xp              # its array module (CuPy, or the tests' stand-in)
        self.consts = [backend.to_device(c) if type(c) is Array else c for c in jaxpr.consts]
        self.kernels = [e.prim for e in jaxpr.eqns if isinstance(e.prim, triton_codegen.TritonFused)]
        self.graph_state: Any = 0   # calls before CUDA-graph capture, the captured graph, or "failed"
        self._steps: list[tuple] | None = None   # the run loop's plan (see _plan)

    def run(self, buffers: Sequence[Any]) -> list[Array]:
        """Through the program's CUDA graph when ``gpu_graphs`` is on and it can be captured
        (:mod:`funcgrad.backends.gpu.graphs`), else equation by equation."""
        out = graphs.run(self, buffers)
        return self.run_uncaptured(buffers) if out is None else out

    def run_uncaptured(self, buffers: Sequence[Any]) -> list[Array]:
        backend = self.backend
        return self._run_values([_core._wrap(b) if type(b) is np.ndarray else backend.wrap(b) for b in buffers])

    def _plan(self) -> list[tuple]:
        """Per equation: (eqn, how its inputs are read, its GPU implementation or None), built on first run."""
        plan = []
        for eqn in self.jaxpr.eqns:
            reads = tuple((True, x.value) if isinstance(x, Literal) else (False, id(x)) for x in eqn.inputs)
            fused = isinstance(eqn.prim, triton_codegen.TritonFused)
            impl = None if fused or eqn.prim in _DISPATCHED else eqn.prim.impls.get(self.backend.name)
            plan.append((eqn, reads, fused, impl))
        self._steps = plan
        return plan

    def _run_values(self, args: Sequence[Any]) -> list[Array]:
        backend, xp = self.backend, self.xp
        env: dict[int, Any] = {id(v): c for v, c in zip(self.jaxpr.constvars, self.consts)}
        for v, a in zip(self.jaxpr.invars, args):
            env[id(v)] = a

        def read(x: Any) -> Any:
            return x.value if isinstance(x, Literal) else env[id(x)]

        lean = _core._profiler is None and not config.debug_nans
        claims = _core.EAGER_CLAIMS
        steps = self._steps if self._steps is not None else self._plan()
        device_array = backend.array_type
        for eqn, reads, fused, impl in steps:
            values = _device_values(env, reads, device_array) if (fused or impl is not None) else None
            if fused and values is not None:
                out = [_wrap_raw(backend, xp, o) for o in eqn.prim.run(xp, values)]
            elif fused:
                out = [backend.wrap(o) for o in eqn.prim.run(xp, [backend.device_value(read(x)) for x in eqn.inputs])]
            elif values is not None and lean and not (claims and eqn.prim in claims):
                # every input on the GPU (or a Python scalar): the implementation directly
                raw = _core.run_impl(eqn.prim, impl, values, eqn.params)
                out = ([_wrap_raw(backend, xp, o) for o in raw] if eqn.prim.multiple_results
                       else _wrap_raw(backend, xp, raw))
            else:
                out = _core.apply_primitive(eqn.prim, [read(x) for x in eqn.inputs], eqn.params)
            for v, o in zip(eqn.outvars, out if eqn.prim.multiple_results else [out]):
                env[id(v)] = o
        return [_core.as_array(read(v)) for v in self.jaxpr.outvars]

    def run_on_device(self, values: Sequence[Any]) -> list:
        """A loop body or branch on the GPU: raw values in (device buffers, Python scalars, host
        buffers, which are uploaded), device buffers out."""
        backend = self.backend
        args = [v if isinstance(v, (bool, int, float)) else backend.wrap(v) for v in values]
        return [backend.device_value(o) for o in self._run_values(args)]

    def run_buffers(self, values: Sequence[Any]) -> list:
        """A loop body or branch run by the host's loop (all its operands were host values):
        its equations one by one on the host, host buffers out."""
        wrapped = [v if isinstance(v, (bool, int, float)) else _core._wrap(v) for v in values]
        return [_core.as_array(o)._value for o in eval_jaxpr(self.unfused, wrapped)]

    def release_buffers(self) -> None:
        """Nothing is kept between calls."""

    def __repr__(self) -> str:
        return pretty_print(self.jaxpr)


def _device_values(env: dict, reads: tuple, device_array: type) -> list | None:
    """The raw inputs of an equation when each is a GPU array's buffer or a Python scalar, else None."""
    values = []
    for literal, key in reads:
        a = key if literal else env[key]
        if type(a) is device_array:
            values.append(a._value)
        elif type(a) in _SCALARS:
            values.append(a)
        else:
            return None
    return values


def _wrap_raw(backend: Any, xp: Any, out: Any) -> Array:
    """``backend.wrap(out)``, without its conversions when ``out`` already is a device array of a canonical dtype."""
    if type(out) is xp.ndarray and out.dtype.itemsize != 8:
        return backend.array_type(out)
    return backend.wrap(out)


def fuse(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with its fusible elementwise chains replaced by generated Triton kernels."""
    return fusion.fuse(jaxpr, rule=triton_codegen.rule, emit=triton_codegen.emit)


def compile_jaxpr(jaxpr: Jaxpr, backend: Any, binding: Any) -> GpuProgram:
    """Optimise, fuse into Triton kernels (when Triton can run and fusion is on) and plan a program
    for ``backend`` (the GPU backend) and its ``binding`` (array module, whether Triton runs).

    >>> from funcgrad.backends.gpu import backend
    >>> program = backend.compile(fg.make_jaxpr(lambda x: fnp.sin(x) * 2 + 1)(fnp.ones(3)))
    >>> program.kernels          # [triton_fused[sin,mul,add]]
    """
    # Loop bodies and branches are compiled too: the GPU loops run them with run_on_device.
    unfused = passes.compile_subprograms(passes.optimize(jaxpr), lambda sub: compile_jaxpr(sub, backend, binding))
    fused = unfused
    if config.jit_fusion and not config.debug_nans and binding.use_triton:
        fused = fuse(unfused)
    return GpuProgram(fused, backend, binding.xp, unfused)
