"""A compiled program's fast-path steps (see :class:`funcgrad.compiler.program.Program`).

One function per step, ``step(env)``: it reads its inputs from the slots of ``env`` and writes
its outputs there, doing what ``Program._run_general`` does for the step but with everything that
does not change between calls (slots, literal values, targets, kernel views) fixed when it is
built.  Results are those of the general path: the same implementations and kernels on the
same buffers.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._config import config
from funcgrad._core import _wrap

_IMPL_ERRORS = (ValueError, TypeError, IndexError, OverflowError)


def _memory_root(a: Any) -> Any:
    """The object owning ``a``'s memory (views, broadcasts and strided views point to it)."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def _unaliased(results: list, values: list) -> list:
    """``results``, with a copy of each that shares memory with an input.

    A loop that runs zero times returns its initial carry, a branch may
    return its operand: such an output is an input's buffer, which may be
    one this program reuses on its next call (a planned buffer), so it must
    not escape or outlive the input as the same memory.
    """
    roots = {id(_memory_root(v)) for v in values if isinstance(v, np.ndarray)}
    return [r.copy() if id(_memory_root(r)) in roots else r for r in results]


def _reader(slots: Sequence[int]) -> Any:
    """A C-level ``read(env)``: the values in ``slots``, as a sequence (Python 3.11 runs a list
    comprehension as a function call of its own)."""
    if len(slots) >= 2:
        return operator.itemgetter(*slots)
    return operator.itemgetter(slice(slots[0], slots[0] + 1) if slots else slice(0, 0))


def _fast_step(program: Any, prim: Any, slots: tuple, params: dict, outs: tuple, buffers: list | None,
               eqn: Any) -> Any:
    """The step function of one equation that is no 0-d arithmetic (:func:`_scalar_step`)."""
    if buffers is None:
        return _plain_step(prim, _reader(slots), params, outs)
    targets = [(kind, i, v.aval) for (kind, i), v in zip(buffers, eqn.outvars)]
    if getattr(prim, "input_views", None) is not None and not params:   # a fused kernel
        return _kernel_step(program, prim, slots, outs, targets, eqn)
    return _writing_step(program, prim, _reader(slots), params, outs, targets)


def _plain_step(prim: Any, read: Any, params: dict, outs: tuple) -> Any:
    """A primitive that allocates its results (as run_impl runs it; errors are named by the caller)."""
    impl = prim.impl
    if prim.multiple_results or "higher_order" in prim.traits:
        multiple, unaliased = prim.multiple_results, "higher_order" in prim.traits

        def step(env: list) -> None:
            values = read(env)
            out = impl(*values, **params)
            results = [_buffer_of(r) for r in (out if multiple else [out])]
            if unaliased:
                results = _unaliased(results, values)
            for i, r in zip(outs, results):
                env[i] = r
        return step
    out = outs[0]
    if params:
        def step(env: list) -> None:
            r = impl(*read(env), **params)
            env[out] = r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64) \
                else _wrap(r)._value
        return step

    def step(env: list) -> None:   # most primitives: no parameters
        r = impl(*read(env))
        env[out] = r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64) \
            else _wrap(r)._value
    return step


# Binary ufuncs whose result on two numpy scalars, by Python's operator, is the ufunc's on 0-d arrays
# (the same promotion, IEEE arithmetic; integers wrap around) at a tenth of the cost.
_SCALAR_OPS = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
               np.less: operator.lt, np.less_equal: operator.le, np.greater: operator.gt,
               np.greater_equal: operator.ge, np.equal: operator.eq, np.not_equal: operator.ne}
_UNKNOWN = object()


def _scalar_op(prim: Any, params: dict, eqn: Any) -> Any:
    """The operator for ``eqn`` when it is one of :data:`_SCALAR_OPS` on 0-d integers or floats
    (a loop's counter, its bound test), else None."""
    impl = prim.impl
    op = next((op for f, op in _SCALAR_OPS.items() if f is impl), None) if not params and len(eqn.inputs) == 2 \
        else None
    if op is None or any(v.aval.shape != () or v.aval.dtype.kind not in "iuf" for v in eqn.inputs):
        return None
    return op if eqn.outvars[0].aval.shape == () else None


def _scalar_step(op: Any, slots: tuple, known: list, out: int) -> Any:
    """``op`` on numpy scalars (a 0-d array's ``[()]``; a Python number stays weakly typed), the
    result kept as the general path keeps it (a read-only 0-d array, 64-bit narrowed without x64)."""
    (s0, s1), (c0, c1) = slots, [k if k is _UNKNOWN or type(k) is not np.ndarray else k[()] for k in known]

    def step(env: list) -> None:
        x = env[s0] if c0 is _UNKNOWN else c0
        y = env[s1] if c1 is _UNKNOWN else c1
        r = np.asarray(op(x[()] if type(x) is np.ndarray else x, y[()] if type(y) is np.ndarray else y))
        if r.dtype.itemsize == 8 and not config.enable_x64:
            r = _wrap(r)._value
        else:
            r.setflags(write=False)
        env[out] = r
    return step


def _buffer_of(r: Any) -> np.ndarray:
    """What the general path keeps of an implementation's result: itself, or ``_wrap``'s buffer for a
    number, a numpy scalar or a 64-bit array without x64."""
    return r if type(r) is np.ndarray and (r.dtype.itemsize != 8 or config.enable_x64) else _wrap(r)._value


def _writing_step(program: Any, prim: Any, read: Any, params: dict, outs: tuple, targets: list) -> Any:
    """A ``"writes_out"`` primitive (matmul) filling its planned buffers."""
    impl, multiple = prim.impl, prim.multiple_results

    def step(env: list) -> None:
        full = [program._buffer(i, aval) if kind == "buf" else program._output(i, aval) for kind, i, aval in targets]
        out = impl(*read(env), out=full if multiple else full[0], **params)
        if multiple:
            for i, r in zip(outs, out):
                env[i] = r
        else:
            env[outs[0]] = out
    return step


def _kernel_step(program: Any, fused: Any, slots: tuple, outs: tuple, targets: list, eqn: Any) -> Any:
    """A fused kernel (:class:`funcgrad.compiler.fusion.FusedKernel`) run as its ``impl`` runs it, with
    its inputs' 2-d views worked out once and its planned buffers' 2-d views kept across calls (in
    ``program._views``, dropped when the buffers are released)."""
    from_args = [s < program.n_fixed for s in slots]   # arguments may be numbers or numpy scalars
    plans = [(slot,) + plan for slot, plan in zip(slots, fused.input_views([x.aval.shape for x in eqn.inputs],
                                                                           from_args))]
    planned = [(kind, i, aval, None if kind == "out" and tuple(aval.shape) == shape2d else shape2d)
               for (kind, i, aval), shape2d in zip(targets, fused.out_views)]
    # bfloat16 arrays go to the kernel as their uint16 bit patterns (views): inputs per call, planned
    # buffers' views once (kept in ``views``)
    bits_in = [x.aval.dtype == _dtypes.bfloat16 for x in eqn.inputs] if fused.bfloat16 else None
    as_bits = _kernel_view if fused.bfloat16 else _same
    passed = [k not in fused.aliased for k in range(len(planned))]   # outputs the kernel takes (not aliased)
    views = program._views
    n0, n1 = fused.n0, fused.n1
    prepare = fused.prepare if fused.spec.parallel else None   # thread counts matter to parallel kernels only

    def step(env: list) -> None:
        full, flat = [], []
        for (kind, i, aval, shape2d), take in zip(planned, passed):
            if kind == "buf":
                pair = views.get((i, shape2d))
                if pair is None:
                    buf = program._buffer(i, aval)
                    pair = views[(i, shape2d)] = (buf, as_bits(buf.reshape(shape2d)))
                full.append(pair[0])
                if take:
                    flat.append(pair[1])
            else:
                buf = program._output(i, aval)
                full.append(buf)
                flat.append(as_bits(buf if shape2d is None else buf.reshape(shape2d)))
        kernel = fused.kernel
        if kernel is None:   # not compiled yet
            fused.impl(*[env[slot] for slot in slots], out=full)
        else:
            args = [n0, n1]
            for slot, shape2d, broadcast, from_arg in plans:
                x = env[slot]
                if from_arg and type(x) is not np.ndarray:
                    x = np.asarray(x)
                if broadcast is not None:   # a mixed broadcast: materialised, as the kernel's impl does
                    x = np.ascontiguousarray(np.broadcast_to(x, broadcast))
                args.append(x if shape2d is None else x.reshape(shape2d))
            if bits_in is not None:
                args[2:] = [x.view(np.uint16) if bits else x for x, bits in zip(args[2:], bits_in)]
            if prepare is not None:
                prepare()
            kernel(*args, *flat)
        for i, r in zip(outs, full):
            env[i] = r
    return step


def _kernel_view(x: np.ndarray) -> np.ndarray:
    """A buffer as a fused kernel takes it: bfloat16 as its uint16 bit patterns (a view)."""
    return x.view(np.uint16) if x.dtype == _dtypes.bfloat16 else x


def _same(x: np.ndarray) -> np.ndarray:
    return x


def _in_place_safe(eqn: Any, pos: int, slot: int, ins: list, base_of: dict | None = None) -> bool:
    """Whether output ``pos`` of ``eqn`` may be written over input ``slot`` that it reads:
    only an elementwise output of a fused kernel, the input read at the same index (the
    input has the kernel's full shape; the kernel loads every input element before it
    stores any output element), and no other input a view of it (``base_of``: view slot ->
    the slot whose memory it is; ``x + x.T`` reads elements the kernel has written)."""
    spec = getattr(eqn.prim, "spec", None)
    if spec is None or pos >= len(spec.outputs):
        return False
    if base_of is not None and any(kind == "var" and s != slot and base_of.get(s) == slot for kind, s in ins):
        return False
    shape = eqn.prim.shape
    for (kind, s), x in zip(ins, eqn.inputs):
        if kind == "var" and s == slot and tuple(x.aval.shape) != tuple(shape):
            return False
    return True
