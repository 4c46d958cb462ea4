"""Collectives across the processes of the world for data-parallel training, as primitives.

* ``allreduce_start_p(*xs, scale)``: flattens ``scale * x`` for every ``x`` into one new 1-D buffer
  and starts summing it across processes (MPI ``Iallreduce``, non-blocking); returns the buffer,
  *in flight*: nothing may read it before ``allreduce_done_p`` returns it.
* ``allreduce_done_p(buf)``: waits for the sum started on ``buf`` and returns it.
* ``bucket_p(*xs, slot, scale)``: the identity on ``xs``, whose reverse-mode rule starts the
  all-reduce of their cotangents (times ``scale``) and hands the in-flight buffer back as the cotangent of ``slot`` (a 1-D array
  of the flattened size). It has the ``early_backward`` trait: the backward pass runs its rule as
  soon as the cotangents of ``xs`` are complete (see ``interpreters/reverse.py``), so the sum of one
  bucket of gradients travels while the backward pass computes the next.

A start/done pair is what keeps the communication off the critical path: both are steps of a
jitted program, run in program order like XLA's ``all-reduce-start``/``all-reduce-done``. Both have
the ``effect`` trait (never evaluated at trace time, never merged or dropped by the IR passes).
None of the three has a derivative of its own. In a one-process world they copy and need no MPI.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive, add_traits
from funcgrad._dtypes import ShapedArray

__all__ = ["allreduce_done_p", "allreduce_start_p", "bucket_p", "pending_count", "use_communicator"]

# In-flight sums: the data address of each buffer -> (MPI request, the buffer, kept alive for MPI).
_pending: dict[int, tuple] = {}


# Where the communicator comes from: ``funcgrad.distributed`` (a layer above the primitives) plugs in
# its world's ``comm()`` when imported; until then every process is a world of its own.
# ``wait(request, what)`` completes an MPI request (the world's waits give up after its timeout).
_communicator: list = [lambda: None, lambda request, what: request.Wait()]


def use_communicator(source: Any, wait: Any = None) -> None:
    """Take the MPI communicator from ``source()`` (None: a one-process world), and complete requests
    with ``wait(request, what)`` (default: MPI's ``Wait``)."""
    _communicator[0] = source
    if wait is not None:
        _communicator[1] = wait


def _wait(request: Any, what: str) -> None:
    _communicator[1](request, what)


def _comm() -> Any:
    return _communicator[0]()


def _address(buf: np.ndarray) -> int:
    return buf.__array_interface__["data"][0]


def _flat_size(avals: Any) -> int:
    return int(sum(int(np.prod(a.shape, dtype=np.int64)) for a in avals))


def _common_dtype(name: str, xs: Any) -> np.dtype:
    dtypes = {np.dtype(x.dtype) for x in xs}
    if len(dtypes) != 1:
        raise TypeError(f"{name}: all arrays of one bucket must share a dtype, got {sorted(map(str, dtypes))}; "
                        "group the arrays by dtype")
    dtype = dtypes.pop()
    if _dtypes.kind(dtype) not in "fc":
        raise TypeError(f"{name}: expected float arrays (gradients), got {dtype}")
    return dtype


# ---------------------------------------------------------------- allreduce start / done

allreduce_start_p = Primitive("allreduce_start")


def _start_impl(*xs: np.ndarray, scale: float) -> np.ndarray:
    dtype = _common_dtype("allreduce_start", xs)
    buf = np.empty(_flat_size(xs), dtype)
    offset = 0
    for x in xs:
        n = x.size
        np.multiply(np.ravel(x), scale, out=buf[offset:offset + n], casting="unsafe")
        offset += n
    comm = _comm()
    if comm is not None:
        from mpi4py import MPI
        for request, _ in _pending.values():
            request.Test()   # MPI moves a non-blocking sum along only inside MPI calls: nudge the earlier ones
        _pending[_address(buf)] = (comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM), buf)
    return buf


def _start_abstract(*xs: Any, scale: float) -> ShapedArray:
    return ShapedArray((_flat_size(xs),), _common_dtype("allreduce_start", xs))


allreduce_start_p.impl = _start_impl
allreduce_start_p.abstract_eval = _start_abstract

allreduce_done_p = Primitive("allreduce_done")


def _done_impl(buf: np.ndarray) -> np.ndarray:
    entry = _pending.pop(_address(buf), None)
    if entry is None:
        # No sum was started for it: the zero cotangent of a bucket that the loss does not use
        # (zero on every process, as every process runs the same program).
        return buf
    _wait(entry[0], f"allreduce_done(f{buf.dtype.itemsize * 8}[{buf.size}]) (a bucket of gradients)")
    return entry[1]


allreduce_done_p.impl = _done_impl
allreduce_done_p.abstract_eval = lambda buf: ShapedArray(buf.shape, buf.dtype)


def pending_count() -> int:
    """How many all-reduces are in flight in this process (0 after every complete step)."""
    return len(_pending)


# ---------------------------------------------------------------- the bucket identity

bucket_p = Primitive("gradient_bucket", multiple_results=True)


def _bucket_impl(*xs_and_slot: np.ndarray, scale: float) -> list:
    return [np.array(x) for x in xs_and_slot[:-1]]


def _bucket_abstract(*xs_and_slot: Any, scale: float) -> list:
    xs, slot = xs_and_slot[:-1], xs_and_slot[-1]
    if tuple(slot.shape) != (_flat_size(xs),):
        raise ValueError(f"gradient_bucket: the slot must be 1-D of the flattened size {_flat_size(xs)}, got shape "
                         f"{tuple(slot.shape)}")
    return [ShapedArray(tuple(x.shape), x.dtype) for x in xs]


def _bucket_vjp_forward(primals: list, needs: Any, scale: float) -> tuple:
    xs = primals[:-1]

    def backward(cts: list) -> list:
        from funcgrad._core import zeros_like
        cts = [zeros_like(x) if c is None else c for c, x in zip(cts, xs)]
        return [None] * len(xs) + [allreduce_start_p.bind(*cts, scale=scale)]

    return list(xs), backward


bucket_p.impl = _bucket_impl
bucket_p.abstract_eval = _bucket_abstract
bucket_p.vjp_forward = _bucket_vjp_forward

add_traits(allreduce_start_p, "effect")
add_traits(allreduce_done_p, "effect")
add_traits(bucket_p, "early_backward")
