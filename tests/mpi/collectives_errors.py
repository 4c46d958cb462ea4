"""Run under ``mpiexec -n 2`` with a short timeout: bad input across ranks ends in an error on every rank.

1. A jitted collective called with different shapes on the two ranks: ValueError on both (the first
   call's handshake), naming both shapes and the ranks.
2. An eager collective with different dtypes under ``distributed_debug``: the same.
3. After those errors the world still works (a psum agrees).
4. Rank 1 raises before a collective: rank 0 raises TimeoutError naming rank 1 within the timeout,
   and rank 1 exits with its own error.

Each rank writes one JSON line per case, ``{"rank": r, "case": ..., "error": type, "message": ..., "seconds": t}``,
to ``rank<r>.jsonl`` in the folder given as the first argument (the current folder without one).
"""
from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.numpy as fnp

TIMEOUT = 3.0
dist.initialize(timeout=TIMEOUT)
RANK = dist.process_index()
OUT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".") / f"rank{RANK}.jsonl"
OUT.write_text("")


def report(case: str, fun) -> None:
    start = time.monotonic()
    error, message = None, ""
    try:
        fun()
    except Exception as e:   # noqa: BLE001 -- the error is what is reported
        error, message = type(e).__name__, str(e)
    with OUT.open("a") as f:
        f.write(json.dumps({"rank": RANK, "case": case, "error": error, "message": message,
                            "seconds": round(time.monotonic() - start, 2)}) + "\n")


report("jit shape mismatch", lambda: fg.jit(lambda x: dist.psum(x))(fnp.ones(3 + RANK)))
fg.config.update("distributed_debug", True)
report("eager dtype mismatch", lambda: dist.all_gather(fnp.ones(2, np.float32 if RANK == 0 else np.int32)))
fg.config.update("distributed_debug", False)
report("still works", lambda: np.testing.assert_array_equal(np.asarray(dist.psum(fnp.ones(2))), [2.0, 2.0]))
fg.config.update("distributed_debug", True)


def rank_one_fails() -> None:
    if RANK == 1:
        raise RuntimeError("rank 1 fails before the collective")
    dist.psum(fnp.ones(3))


report("failing rank", rank_one_fails)
sys.exit(3)   # both ranks end with an error status, as a real script would
