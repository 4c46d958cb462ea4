"""The process world: who we are, how many we are, and the MPI communicator that joins us.

A plain ``python script.py`` is a one-process world and never imports MPI. Under
``mpiexec``/``mpirun``/``srun`` (detected from the launcher's environment) the world
is MPI's ``COMM_WORLD``, through mpi4py.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from typing import Any

import numpy as np

from funcgrad._config import config
from funcgrad.primitives import collectives as _collectives

#: The name of the axis that runs across processes: collectives name it as vmap's ``axis_name``.
PROCESS_AXIS = _collectives.PROCESS_AXIS

#: Seconds a collective waits for the other processes before it raises TimeoutError.
DEFAULT_TIMEOUT = 300.0
# Seconds a wait polls without sleeping before it starts pausing between polls.
_SPIN_SECONDS = 0.01

# Environment variables that MPI launchers (MPICH/Hydra, Open MPI, PMIx, Slurm) set in every rank.
_LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS")

_lock = threading.Lock()
_world: "_World | None" = None


class _World:
    __slots__ = ("comm", "rank", "size", "timeout", "data_comm", "check_comm", "handshakes")

    def __init__(self, comm: Any, rank: int, size: int, timeout: float):
        self.comm = comm
        self.rank = rank
        self.size = size
        self.timeout = timeout
        # Collectives run on communicators of their own: a user's MPI messages on COMM_WORLD never meet them.
        self.data_comm = comm.Dup() if comm is not None else None
        self.check_comm = comm.Dup() if comm is not None else None
        self.handshakes = 0


def _env_timeout() -> float:
    value = os.environ.get("FUNCGRAD_DISTRIBUTED_TIMEOUT", "").strip()
    if not value:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"FUNCGRAD_DISTRIBUTED_TIMEOUT={value!r}: expected a number of seconds") from None
    return _checked_timeout(seconds, "FUNCGRAD_DISTRIBUTED_TIMEOUT")


def _checked_timeout(seconds: Any, where: str) -> float:
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: the timeout must be a number of seconds, got {seconds!r}") from None
    if not seconds > 0:
        raise ValueError(f"{where}: the timeout must be a positive number of seconds, got {seconds}")
    return seconds


def _launched_by_mpi() -> bool:
    for var in _LAUNCHER_SIZE_VARS:
        value = os.environ.get(var)
        if value is not None and value.strip().isdigit() and int(value) > 1:
            return True
    return False


def initialize(use_mpi: bool | None = None, timeout: float | None = None) -> None:
    """Join the process world (idempotent).

    ``use_mpi=None`` uses MPI when the script was started by an MPI launcher with
    more than one process; ``True`` always uses MPI (mpi4py must be installed);
    ``False`` makes a one-process world. ``timeout``: seconds a collective waits for
    the other processes before raising TimeoutError (default: the environment
    variable ``FUNCGRAD_DISTRIBUTED_TIMEOUT``, else 300); it may be set again later.

    >>> initialize()
    """
    global _world
    with _lock:
        if _world is not None:
            if timeout is not None:
                _world.timeout = _checked_timeout(timeout, "initialize(timeout=...)")
            return
        seconds = _env_timeout() if timeout is None else _checked_timeout(timeout, "initialize(timeout=...)")
        if use_mpi is None:
            use_mpi = _launched_by_mpi()
        if not use_mpi:
            _world = _World(None, 0, 1, seconds)
            return
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise ImportError(
                "funcgrad.distributed: this script was started by an MPI launcher (mpiexec/mpirun/srun) but "
                "mpi4py is not installed. Install it with `pip install mpi4py mpich` (or mpi4py against your "
                "system's MPI), or run the script with plain `python`.") from e
        comm = MPI.COMM_WORLD
        _world = _World(comm, comm.Get_rank(), comm.Get_size(), seconds)


def world() -> _World:
    """The world, joined on first use."""
    if _world is None:
        initialize()
    return _world  # type: ignore[return-value]


def comm() -> Any:
    """The MPI communicator of the world (None in a one-process world)."""
    return world().comm


def process_index() -> int:
    """This process's index in the world, 0 .. process_count() - 1.

    >>> process_index()                 # under plain ``python``; 0 to n - 1 under ``mpiexec -n n``
    0
    """
    return world().rank


def process_count() -> int:
    """The number of processes in the world (1 under plain ``python``).

    >>> process_count()                 # under plain ``python``; n under ``mpiexec -n n``
    1
    """
    return world().size


def barrier() -> None:
    """Wait until every process reaches this call (TimeoutError after the world's timeout).

    >>> barrier()
    """
    w = world()
    if w.comm is not None:
        _wait([w.data_comm.Ibarrier()], w, "barrier")


def timeout() -> float:
    """Seconds a collective waits for the other processes before it raises TimeoutError.

    >>> timeout() > 0
    True
    """
    return world().timeout


# --------------------------------------------------------------------------
# Collectives over PROCESS_AXIS: non-blocking MPI requests polled against the timeout
# --------------------------------------------------------------------------

def _wait(requests: list, w: _World, what: str, peers: list | None = None) -> None:
    """Poll ``requests`` until all complete; TimeoutError after ``w.timeout`` seconds.

    ``peers[i]``: the rank point-to-point request ``i`` waits for (then the error names those that
    did not arrive, and the requests are cancelled; MPI cannot cancel a collective's request).
    """
    from mpi4py import MPI
    testall = MPI.Request.Testall
    if testall(requests):
        return
    start = time.monotonic()
    deadline = start + w.timeout
    # Spin first, as a blocking MPI call does (a sleep costs far more than a fast collective takes),
    # then poll with growing pauses so that a long wait does not burn a core.
    while time.monotonic() - start < _SPIN_SECONDS:
        for _ in range(100):
            if testall(requests):
                return
    pause = 1e-4
    while not testall(requests):
        if time.monotonic() > deadline:
            missing = sorted({peers[i] for i, r in enumerate(requests) if not r.Test()}) if peers else None
            for r in requests if peers else ():
                try:
                    r.Cancel()
                except Exception:  # noqa: BLE001 -- a request that cannot be cancelled is left to MPI_Finalize
                    pass
            who = (f"rank(s) {', '.join(map(str, missing))} did not arrive" if missing else
                   "the other ranks did not all arrive (set fg.config.update('distributed_debug', True) to "
                   "name them)")
            raise TimeoutError(
                f"funcgrad.distributed: {what} on rank {w.rank} of {w.size} waited {w.timeout:g} s: {who}. A rank "
                "that raised, exited or took another branch never reaches this collective; every rank must run "
                "the same collectives in the same order. The timeout is FUNCGRAD_DISTRIBUTED_TIMEOUT or "
                "funcgrad.distributed.initialize(timeout=...).")
        time.sleep(pause)
        pause = min(pause * 2, 2e-3)


def _signature(kind: str, x: np.ndarray, params: dict) -> str:
    shown = {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(params.items())}
    return json.dumps([kind, list(x.shape), str(x.dtype), shown], default=str)


def _describe_signature(sig: str) -> str:
    try:
        kind, shape, dtype, params = json.loads(sig)
    except ValueError:   # cut short (a very long permutation): show it as it came
        return sig
    extra = "".join(f", {k}={v}" for k, v in params.items())
    return f"{kind}({dtype}[{','.join(map(str, shape))}]{extra})"


_SIG_BYTES = 1024
_DIGEST = 40


def _encode(sig: str) -> np.ndarray:
    """``sig`` as a fixed-size message: its start, then a digest of all of it (so long ones still compare)."""
    digest = hashlib.sha1(sig.encode()).hexdigest().encode()
    head = sig.encode()[:_SIG_BYTES - _DIGEST].ljust(_SIG_BYTES - _DIGEST, b" ")
    return np.frombuffer(head + digest, np.uint8).copy()


def _decode(raw: np.ndarray) -> tuple[str, str]:
    """``(shown, key)``: the signature's start (for the message) and the whole message (to compare)."""
    data = raw.tobytes()
    return data[:_SIG_BYTES - _DIGEST].decode(errors="replace").rstrip(), data.decode(errors="replace")


def handshake(w: _World, kind: str, x: np.ndarray, params: dict) -> None:
    """Check that every rank calls the same collective on the same shape and dtype; raise on every rank if not.

    Each rank sends its signature to every other one (point to point, so a rank that never
    arrives is named in the TimeoutError).
    """
    sig = _signature(kind, x, params)
    mine = _encode(sig)
    tag = w.handshakes % 32000
    w.handshakes += 1
    others = [r for r in range(w.size) if r != w.rank]
    inbox = {r: np.empty(_SIG_BYTES, np.uint8) for r in others}
    recvs = [w.check_comm.Irecv(inbox[r], source=r, tag=tag) for r in others]
    sends = [w.check_comm.Isend(mine, dest=r, tag=tag) for r in others]
    what = f"{_describe_signature(sig[:200])} (the shape/dtype check)"
    _wait(recvs, w, what, others)
    _wait(sends, w, what, others)
    received = {w.rank: _decode(mine)}
    received.update({r: _decode(inbox[r]) for r in others})
    groups: dict[str, list[int]] = {}
    shown: dict[str, str] = {}
    for r in range(w.size):
        text, key = received[r]
        groups.setdefault(key, []).append(r)
        shown[key] = text
    if len(groups) > 1:
        described = "; ".join(f"rank(s) {', '.join(map(str, ranks))}: {_describe_signature(shown[key])}"
                              for key, ranks in groups.items())
        raise ValueError(f"{kind}: the processes called it with different operands ({described}). Every rank must "
                         "call the same collectives, in the same order, on the same shapes and dtypes.")


def _reduce_op(kind: str, dtype: np.dtype) -> Any:
    from mpi4py import MPI
    if kind == "psum":
        return MPI.SUM
    if dtype.kind == "b":
        return MPI.LOR if kind == "pmax" else MPI.LAND
    return MPI.MAX if kind == "pmax" else MPI.MIN


def _contig(x: np.ndarray) -> np.ndarray:
    # (np.ascontiguousarray would make a 0-d array 1-d.)
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")


def _bytes_of(x: np.ndarray) -> np.ndarray:
    return _contig(x).reshape(-1).view(np.uint8)


class _ProcessWorld:
    """The process world as the collectives' transport (registered with the primitives)."""

    def size(self) -> int:
        return world().size

    def rank(self) -> int:
        return world().rank

    def run(self, prim: Any, x: np.ndarray, params: dict, check: Any) -> np.ndarray:
        w = world()
        if w.comm is None or w.size == 1:
            return _collectives.size_one(prim, x, params)
        _check_once(w, prim.name, x, params, check)
        return _RUNNERS[prim](w, x, **params)

    def run_on_device(self, prim: Any, buf: Any, params: dict, check: Any) -> Any:
        """``prim`` on a GPU buffer without host copies where NCCL can: a psum of a float buffer once
        the world's NCCL averager is made (``_nccl.averager()``). None: not handled here (the GPU
        implementation then runs :meth:`run` on a host copy)."""
        w = world()
        if w.comm is None or w.size == 1 or prim is not _collectives.psum_p:
            return None
        averager_for, device_sum = _device_sum
        avg = averager_for(buf)
        if avg is None:
            return None
        _check_once(w, prim.name, buf, params, check)
        return device_sum(avg, buf)


# ``(averager_for(buf), device_sum(averager, buf))``: set by ``_nccl`` when it is imported (it sits above
# this module); until then no averager exists, and GPU buffers are summed through host copies.
_device_sum: tuple = (lambda buf: None, None)


def use_device_sum(averager_for: Any, device_sum: Any) -> None:
    """Let psum over the processes sum GPU buffers with ``device_sum(averager_for(buf), buf)`` (NCCL)."""
    global _device_sum
    _device_sum = (averager_for, device_sum)


def _check_once(w: _World, kind: str, x: Any, params: dict, check: Any) -> None:
    """The shape/dtype handshake: once per jitted collective (``check``), or each eager call under
    ``distributed_debug``."""
    if check is None:
        if config.distributed_debug:
            handshake(w, kind, x, params)
    elif not check.done:
        handshake(w, kind, x, params)
        check.done = True


def _run_reduce(kind: str):
    def run(w: _World, x: np.ndarray) -> np.ndarray:
        dtype = x.dtype
        if kind == "psum" and dtype.kind == "b":
            x = x.astype(_collectives.sum_dtype(dtype))
        wire = x.astype(np.float32) if x.dtype == np.float16 else _contig(x)
        out = np.empty_like(wire)
        _wait([w.data_comm.Iallreduce(wire, out, _reduce_op(kind, x.dtype))], w, f"{kind}({x.dtype}{list(x.shape)})")
        return out.astype(x.dtype) if out.dtype != x.dtype else out
    return run


def _gather_rows(w: _World, x: np.ndarray, what: str) -> np.ndarray:
    """Every rank's ``x`` stacked: ``(size, *x.shape)``."""
    out = np.empty((w.size,) + x.shape, x.dtype)
    _wait([w.data_comm.Iallgather(_bytes_of(x), _bytes_of(out) if out.size else out.view(np.uint8))], w, what)
    return out


def _run_all_gather(w: _World, x: np.ndarray, axis: int, tiled: bool) -> np.ndarray:
    rows = _gather_rows(w, x, f"all_gather({x.dtype}{list(x.shape)})")
    if tiled:
        a = axis % x.ndim
        moved = np.moveaxis(rows, 0, a)
        return moved.reshape(x.shape[:a] + (x.shape[a] * w.size,) + x.shape[a + 1:])
    return _contig(np.moveaxis(rows, 0, axis % (x.ndim + 1)))


def _run_psum_scatter(w: _World, x: np.ndarray, scatter_dimension: int, tiled: bool) -> np.ndarray:
    d = scatter_dimension % x.ndim
    if x.dtype.kind == "b":
        x = x.astype(_collectives.sum_dtype(x.dtype))
    dtype = x.dtype
    wire = _contig(np.moveaxis(x, d, 0).astype(np.float32 if dtype == np.float16 else dtype))
    out = np.empty((wire.shape[0] // w.size,) + wire.shape[1:], wire.dtype)
    from mpi4py import MPI
    _wait([w.data_comm.Ireduce_scatter_block(wire, out, MPI.SUM)], w, f"psum_scatter({dtype}{list(x.shape)})")
    out = np.moveaxis(out.astype(dtype), 0, d)
    return _contig(out if tiled else np.squeeze(out, d))


def _run_ppermute(w: _World, x: np.ndarray, perm: tuple) -> np.ndarray:
    x = _contig(x)
    out = np.zeros_like(x)
    requests, peers = [], []
    for src, dst in perm:
        if src == w.rank and dst == w.rank:
            out[...] = x
        elif dst == w.rank:
            requests.append(w.data_comm.Irecv(_bytes_of(out) if out.size else out.view(np.uint8), source=src, tag=7))
            peers.append(src)
        elif src == w.rank:
            requests.append(w.data_comm.Isend(_bytes_of(x), dest=dst, tag=7))
            peers.append(dst)
    _wait(requests, w, f"ppermute({x.dtype}{list(x.shape)})", peers)
    return out


def _run_all_to_all(w: _World, x: np.ndarray, split_axis: int, concat_axis: int, tiled: bool) -> np.ndarray:
    n, s = w.size, split_axis % x.ndim
    chunks = x.reshape(x.shape[:s] + (n, x.shape[s] // n) + x.shape[s + 1:])
    send = _contig(np.moveaxis(chunks, s, 0))          # (k, ...): chunk k goes to rank k
    recv = np.empty_like(send)                                       # (j, ...): the chunk from rank j
    _wait([w.data_comm.Ialltoall(_bytes_of(send), _bytes_of(recv) if recv.size else recv.view(np.uint8))], w,
          f"all_to_all({x.dtype}{list(x.shape)})")
    if tiled:
        c = concat_axis % x.ndim
        moved = np.moveaxis(recv, 0, c)                              # j just before the concat axis
        shape = moved.shape
        return _contig(moved.reshape(shape[:c] + (shape[c] * shape[c + 1],) + shape[c + 2:]))
    recv = np.squeeze(recv, s + 1)                                   # the size-1 chunk axis
    return _contig(np.moveaxis(recv, 0, concat_axis % x.ndim))


def _run_pbroadcast(w: _World, x: np.ndarray, source: int) -> np.ndarray:
    buf = _contig(x).copy()
    _wait([w.data_comm.Ibcast(_bytes_of(buf) if buf.size else buf.view(np.uint8), root=source)], w,
          f"broadcast({x.dtype}{list(x.shape)}) from rank {source}")
    return buf


_RUNNERS = {_collectives.psum_p: _run_reduce("psum"), _collectives.pmax_p: _run_reduce("pmax"),
            _collectives.pmin_p: _run_reduce("pmin"), _collectives.all_gather_p: _run_all_gather,
            _collectives.psum_scatter_p: _run_psum_scatter, _collectives.ppermute_p: _run_ppermute,
            _collectives.all_to_all_p: _run_all_to_all, _collectives.pbroadcast_p: _run_pbroadcast,
            _collectives.pvary_p: lambda w, x: np.array(x, copy=True)}

_collectives.set_process_world(_ProcessWorld())
