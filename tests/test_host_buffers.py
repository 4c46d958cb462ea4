"""Reuse of freed host memory (``config.host_buffer_cache_bytes``): malloc keeps large freed blocks.

The allocator's behaviour is process-wide and set at import, so the measuring
tests run a fresh interpreter each: a step-like pattern (many live megabyte
buffers, all freed, again) counts page faults and the free memory malloc keeps.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _host_buffers

pytestmark = pytest.mark.skipif(_host_buffers._glibc() is None, reason="needs glibc's malloc")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.sysconf("SC_PAGE_SIZE")

# A training step's allocation pattern: N one-MiB buffers alive at once (written, as outputs are), then all
# freed; repeated. Reports the page faults of the last round and the free bytes malloc keeps at the heap top.
_STEP_PATTERN = textwrap.dedent("""
    import ctypes, json, os, resource, sys, types
    import numpy as np
    package = types.ModuleType("funcgrad")         # the allocator module alone, without importing the library
    package.__path__ = [os.path.join(os.environ["PYTHONPATH"], "funcgrad")]
    sys.modules["funcgrad"] = package
    import funcgrad._host_buffers as hb
    n = int(sys.argv[1])
    faults = []
    for _ in range(4):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        live = [np.ones(1 << 18, np.float32) for _ in range(n)]
        del live
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    class MallInfo2(ctypes.Structure):
        _fields_ = [(k, ctypes.c_size_t) for k in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                    "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    print(json.dumps({"faults": faults, "keepcost": libc.mallinfo2().keepcost, "info": hb.info()}))
""")


def _run_pattern(n: int, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("GLIBC_TUNABLES", "FUNCGRAD_HOST_BUFFER_CACHE_BYTES") and not k.startswith("MALLOC_")}
    clean.update(env, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", _STEP_PATTERN, str(n)], env=clean, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_freed_buffers_are_reused_instead_of_faulted_in_again():
    pages = 16 * (1 << 20) // PAGE            # 16 MiB of fresh pages if nothing is reused
    on = _run_pattern(16)
    off = _run_pattern(16, FUNCGRAD_HOST_BUFFER_CACHE_BYTES="0")
    assert on["info"]["active"] and on["info"]["cache_bytes"] == 256 << 20
    assert not off["info"]["active"]
    assert off["faults"][-1] > pages // 2, off       # glibc's default returns the memory each round ...
    assert on["faults"][-1] < pages // 20, on        # ... the cache keeps it: the last round reuses it


def test_kept_memory_is_bounded_by_the_cap():
    small = _run_pattern(32, FUNCGRAD_HOST_BUFFER_CACHE_BYTES="4M")
    large = _run_pattern(32, FUNCGRAD_HOST_BUFFER_CACHE_BYTES="64M")
    assert small["info"]["cache_bytes"] == 4 << 20
    assert small["keepcost"] <= (4 << 20) + (1 << 20), small    # trimmed back to the cap (within one block)
    assert large["keepcost"] >= 24 << 20, large                 # 32 MiB freed, kept under a 64 MiB cap
    assert large["faults"][-1] < (32 << 20) // PAGE // 20


def test_malloc_options_from_the_environment_are_left_alone():
    r = _run_pattern(2, GLIBC_TUNABLES="glibc.malloc.trim_threshold=1000000")
    assert not r["info"]["active"] and "environment" in r["info"]["reason"]
    r = _run_pattern(2, MALLOC_TRIM_THRESHOLD_="1000000")
    assert not r["info"]["active"]


def test_switching_off_and_on_at_run_time():
    if _host_buffers.user_tuned_malloc():
        pytest.skip("this process's malloc is tuned by the environment")
    before = fg.config.host_buffer_cache_bytes
    try:
        fg.config.update("host_buffer_cache_bytes", 0)
        assert _host_buffers.info() == {"active": False, "cache_bytes": 0, "reason": "off (host_buffer_cache_bytes=0)"}
        fg.config.update("host_buffer_cache_bytes", "8M")
        assert _host_buffers.info()["active"] and _host_buffers.info()["cache_bytes"] == 8 << 20
    finally:
        fg.config.update("host_buffer_cache_bytes", before)
    with pytest.raises(ValueError, match="host_buffer_cache_bytes"):
        fg.config.update("host_buffer_cache_bytes", -1)


def test_a_view_of_a_dead_array_is_never_reused():
    x = fnp.arange(1 << 18, dtype=fnp.float32) * 3.0
    view = np.asarray(x)[5:]
    del x
    churn = [fnp.ones(1 << 18, dtype=fnp.float32) * 7.0 for _ in range(8)]   # same size: the freed block size
    del churn
    np.testing.assert_array_equal(view, np.arange(5, 1 << 18, dtype=np.float64) * 3.0)


def test_eager_gradients_are_unchanged_with_the_cache_off():
    rng = np.random.default_rng(0)
    w_np, x_np = rng.standard_normal((64, 300)), rng.standard_normal((32, 64))

    def loss(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)

    def reference():
        h = np.tanh(x_np @ w_np)
        return x_np.T @ (2 * h * (1 - h * h))

    before = fg.config.host_buffer_cache_bytes
    grads = []
    try:
        for cap in (before, 0):
            fg.config.update("host_buffer_cache_bytes", cap)
            grads.append([np.asarray(fg.grad(loss)(fnp.array(w_np), fnp.array(x_np))) for _ in range(3)])
    finally:
        fg.config.update("host_buffer_cache_bytes", before)
    for g in grads[0] + grads[1]:
        np.testing.assert_allclose(g, reference(), rtol=2e-4, atol=2e-4)
