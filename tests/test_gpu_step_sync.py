"""A training step on GPU arrays runs without host synchronisation: no device value is read by the
host until the caller waits (``block_until_ready``, ``device_put(..., "cpu")``, ``float``).

Out-of-range labels still raise ValueError on the GPU, at that next wait (a deferred device-side
check, as CUDA reports device-side errors). Checked on the numpy stand-in for CuPy with a device
array type that counts host reads, with the Triton kernels in Triton's interpreter
(TRITON_INTERPRET=1, set below before triton is imported) and without them; the ``gpu``-marked
test runs the same checks on a real GPU (reads counted through CuPy's transfer functions).
"""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede any triton import

import contextlib  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import types  # noqa: E402
from typing import Any, Iterator  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import funcgrad as fg  # noqa: E402
import funcgrad.nn as nn  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad.backends.gpu import _detect  # noqa: E402
from funcgrad.backends.gpu import array as gpu_array  # noqa: E402
from gpu_standin import FakeDeviceArray, fake_cupy  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
from dispatch import numpy_mlp_grad  # noqa: E402  (the float64 reference the benchmarks check against)

LR = 0.05
SIZES = (12, 16, 16, 10)   # a small 3-layer MLP (benchmarks/gpu_step.py: 784-512-512-10)
BATCH = 8

# ---------------------------------------------------------------- host-read counting stand-in

READS: list[str] = []


def _counted(name: str):
    method = getattr(np.ndarray, name)

    def read(self, *args, **kwargs):
        READS.append(name)
        return method(self, *args, **kwargs)
    return read


class CountingDeviceArray(FakeDeviceArray):
    """A stand-in device buffer whose every read by the host is recorded in READS."""

    __int__ = _counted("__int__")
    __float__ = _counted("__float__")
    __bool__ = _counted("__bool__")
    __index__ = _counted("__index__")
    item = _counted("item")
    tolist = _counted("tolist")

    def get(self) -> np.ndarray:   # CuPy's device-to-host copy
        READS.append("get")
        return np.array(self).view(np.ndarray)


def counting_cupy() -> types.SimpleNamespace:
    """The numpy stand-in for CuPy over CountingDeviceArray (asnumpy is counted too)."""
    ns = fake_cupy()

    def asarray(a, dtype=None):
        if isinstance(a, CountingDeviceArray) and (dtype is None or a.dtype == dtype):
            return a
        return np.array(a, dtype=dtype, copy=True).view(CountingDeviceArray)

    def array(a, dtype=None, copy=True):
        return np.array(a, dtype=dtype, copy=True).view(CountingDeviceArray)

    def asnumpy(a):
        assert isinstance(a, FakeDeviceArray), f"asnumpy of a host value {type(a)}"
        READS.append("asnumpy")
        return np.array(a).view(np.ndarray)

    ns.ndarray, ns.asarray, ns.array, ns.asnumpy = CountingDeviceArray, asarray, array, asnumpy
    return ns


@contextlib.contextmanager
def counting_standin(use_triton: bool) -> Iterator[None]:
    fg.devices()   # discover the backends (registers the GPU implementations)
    saved = _detect.gpu_available
    _detect.gpu_available = lambda: True
    gpu_array._use_array_module(counting_cupy(), use_triton=use_triton)
    try:
        yield
    finally:
        gpu_array._use_array_module(None)
        _detect.gpu_available = saved


# ---------------------------------------------------------------- the checks, shared with the real GPU run

def _mlp(seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = {}
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        p[f"w{i}"] = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        p[f"b{i}"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int32)
    return p, x, y


def _loss(p, x, y):
    h = nn.relu(x @ p["w1"] + p["b1"])
    h = nn.relu(h @ p["w2"] + p["b2"])
    return nn.cross_entropy(h @ p["w3"] + p["b3"], y)


def _step(p, x, y):
    g = fg.grad(_loss)(p, x, y)
    return fg.tree_util.tree_map(lambda w, gw: w - LR * gw, p, g)


def _numpy_step(p: dict, x: np.ndarray, y: np.ndarray) -> dict:
    """The same SGD step in float64 numpy (the benchmarks' hand-written forward and backward)."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    g = numpy_mlp_grad(p, x.astype(np.float64), y)
    return {k: p[k] - LR * g[k] for k in p}


def _gpu(a) -> Any:
    return fg.device_put(fnp.asarray(a), "gpu")


def check_step_without_host_reads(reads: list) -> None:
    """Eager and jitted steps (twice each: the second jitted call is the steady state) read nothing on
    the host until the wait, and their result equals the float64 numpy step."""
    p, x, y = _mlp()
    want = _numpy_step(p, x, y)
    dp, dx, dy = {k: _gpu(v) for k, v in p.items()}, _gpu(x), _gpu(y)
    for name, step in (("eager", _step), ("jit", fg.jit(_step))):
        for _ in range(2):
            reads.clear()
            out = step(dp, dx, dy)
            assert reads == [], f"{name} step read device values on the host: {reads}"
            assert all(v.device == "gpu" for v in out.values())
            fg.block_until_ready(out)
            assert gpu_array._pending == {}
        for k, v in out.items():
            np.testing.assert_allclose(np.asarray(fg.device_put(v, "cpu")), want[k], rtol=2e-5, atol=2e-6,
                                       err_msg=f"{name} {k}")


def check_bad_labels_raise_at_the_wait(reads: list) -> None:
    """Out-of-range labels: no host read at the call, ValueError (with the labels' range) at the next wait,
    eagerly and under jit, forward and backward; the queue is empty afterwards."""
    p, x, _ = _mlp(1)
    dp, dx = {k: _gpu(v) for k, v in p.items()}, _gpu(x)
    labels = np.arange(BATCH, dtype=np.int32) % SIZES[-1]
    labels[3] = SIZES[-1] + 2
    dy = _gpu(labels)
    pattern = rf"labels must be in \[0, {SIZES[-1]}\), got values in \[0, {SIZES[-1] + 2}\]"
    waits = {
        "block_until_ready": lambda out: fg.block_until_ready(out),
        "device_put cpu": lambda out: fg.device_put(fg.tree_util.tree_leaves(out)[0], "cpu"),
        "float": lambda out: float(fnp.sum(fg.tree_util.tree_leaves(out)[0])),
    }
    calls = {"eager loss": _loss, "jit loss": fg.jit(_loss), "eager step": _step, "jit step": fg.jit(_step)}
    for (call_name, call), (wait_name, wait) in zip(calls.items(), list(waits.items()) * 2):
        reads.clear()
        out = call(dp, dx, dy)
        assert reads == [], f"{call_name} read device values on the host before the wait: {reads}"
        assert gpu_array._pending, f"{call_name}: no pending check"
        with pytest.raises(ValueError, match=pattern):
            wait(out)
        assert gpu_array._pending == {}, f"{call_name} / {wait_name}: checks left pending"
        fg.block_until_ready(out)   # nothing left to raise
    # good labels afterwards: nothing raised
    good = _gpu(labels % SIZES[-1])
    fg.block_until_ready(fg.jit(_step)(dp, dx, good))


def check_queue_is_bounded() -> None:
    """Many calls without a wait keep at most _MAX_PENDING checks (the queue is read when it overflows)."""
    p, x, y = _mlp(2)
    dp, dx = {k: _gpu(v) for k, v in p.items()}, _gpu(x)
    step = fg.jit(_step)
    for _ in range(gpu_array._MAX_PENDING + 3):
        dp = step(dp, dx, _gpu(y))   # a fresh labels buffer each time: one check each
        assert len(gpu_array._pending) <= gpu_array._MAX_PENDING
    fg.block_until_ready(dp)
    assert gpu_array._pending == {}


# ---------------------------------------------------------------- stand-in runs

def _triton_interprets() -> bool:
    """Whether Triton kernels run in the interpreter here (not if another test module imported triton
    before TRITON_INTERPRET=1 was set)."""
    import triton  # noqa: PLC0415

    from funcgrad.backends.gpu import triton_codegen as tc  # noqa: PLC0415
    from funcgrad.backends.gpu import triton_kernels as tk  # noqa: PLC0415
    interpreted = triton.runtime.interpreter.InterpretedFunction
    return (isinstance(tc._load("import triton\n\n\n@triton.jit\ndef kernel(x):\n    pass\n"), interpreted)
            and isinstance(tk._xent_fwd, interpreted))


@pytest.fixture(params=[False, True], ids=["cupy-expressions", "triton-interpreter"])
def standin(request):
    if request.param and not _triton_interprets():
        pytest.skip("triton was imported before TRITON_INTERPRET=1 was set (another test module imported it "
                    "first); run this module on its own")
    with counting_standin(request.param):
        yield request.param


def test_step_makes_no_host_reads(standin):
    check_step_without_host_reads(READS)
    if standin:   # the fused kernels and the cross-entropy kernels ran (in the interpreter)
        p, x, y = _mlp()
        program = fg.jit(_step).lower({k: _gpu(v) for k, v in p.items()}, _gpu(x), _gpu(y))
        assert program.kernels, "no fused Triton kernels in the step"


def test_bad_labels_raise_at_the_next_wait(standin):
    check_bad_labels_raise_at_the_wait(READS)


def test_deferred_checks_are_bounded():
    with counting_standin(False):
        check_queue_is_bounded()


def test_cpu_bad_labels_still_raise_at_the_call():
    p, x, _ = _mlp(1)
    y = np.zeros(BATCH, np.int32)
    y[0] = -1
    with pytest.raises(ValueError, match="out of range"):
        fg.jit(_step)({k: fnp.asarray(v) for k, v in p.items()}, fnp.asarray(x), fnp.asarray(y))


# ---------------------------------------------------------------- real GPU

_SPIN = r"""extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}"""


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_step_without_synchronisation_on_gpu(monkeypatch):
    import cupy   # noqa: PLC0415

    reads: list = []
    asnumpy = cupy.asnumpy

    def counted_asnumpy(a, *args, **kwargs):
        reads.append("asnumpy")
        return asnumpy(a, *args, **kwargs)
    monkeypatch.setattr(cupy, "asnumpy", counted_asnumpy)
    gpu_array._use_array_module(None)
    check_step_without_host_reads(reads)
    check_bad_labels_raise_at_the_wait(reads)
    check_queue_is_bounded()

    # No synchronisation inside a jitted step: a kernel spinning for about a second, queued before the
    # step, is still running when the step returns (a host read inside the step would wait for it).
    p, x, y = _mlp()
    dp, dx, dy = {k: _gpu(v) for k, v in p.items()}, _gpu(x), _gpu(y)
    step = fg.jit(_step)
    fg.block_until_ready(step(dp, dx, dy))   # compile first
    spin = cupy.RawKernel(_SPIN, "spin")
    spin((1,), (1,), (cupy.int64(2_000_000_000),))
    spun = cupy.cuda.Event()
    spun.record()
    out = step(dp, dx, dy)
    assert not spun.done, "the jitted step waited for the GPU"
    fg.block_until_ready(out)
    assert spun.done


# ---------------------------------------------------------------- the CuPy launch path, with fakes

class _FakeStream:
    def __init__(self, ptr: int):
        self.ptr = ptr


class _FakeCuda:
    """cupy.cuda's few calls the launcher makes: the current device and stream."""

    def __init__(self):
        self.device, self.stream, self.device_switches = 0, _FakeStream(0), 0
        self.runtime = types.SimpleNamespace(getDevice=lambda: self.device)

    def get_current_stream(self):
        return self.stream

    def Device(self, device: int):   # noqa: N802 -- cupy's name
        cuda = self

        @contextlib.contextmanager
        def use():
            saved, cuda.device = cuda.device, device
            cuda.device_switches += 1
            try:
                yield
            finally:
                cuda.device = saved
        return use()


class _FakeDriver:
    """Triton's active driver without torch: the legacy default stream, a current device."""

    def __init__(self):
        self.set_calls = []
        self.get_current_stream = lambda device: 0
        self.set_current_device = self.set_calls.append


class _FakeKernel:
    """``kernel[grid](*args)`` recording the stream and device Triton's launcher would use."""

    def __init__(self, driver: _FakeDriver, cuda: _FakeCuda):
        self.driver, self.cuda, self.seen = driver, cuda, []

    def __getitem__(self, grid):
        def run(*args, **meta):
            self.seen.append((self.driver.get_current_stream(self.cuda.device), self.cuda.device))
        return run


def test_cupy_launch_uses_cupys_current_stream(monkeypatch):
    from funcgrad.backends.gpu import _triton_host as host

    cuda, driver = _FakeCuda(), _FakeDriver()
    monkeypatch.setattr(host, "_cupy_state", {"cupy": types.SimpleNamespace(cuda=cuda),
                                              "driver": types.SimpleNamespace(active=driver),
                                              "ready": threading.local()})
    kernel = _FakeKernel(driver, cuda)
    on = {d: types.SimpleNamespace(device=types.SimpleNamespace(id=d)) for d in (0, 1)}
    host._launch_cupy(kernel, (1,), [], {}, on[0])     # first launch on this thread: makes the device current
    cuda.stream = _FakeStream(77)
    host._launch_cupy(kernel, (1,), [], {}, on[0])     # then only the stream is read
    host._launch_cupy(kernel, (1,), [], {}, on[1])     # another device: switched for the launch
    host._launch_cupy(kernel, (1,), [], {}, on[0])
    assert kernel.seen == [(0, 0), (77, 0), (77, 1), (77, 0)]
    assert driver.set_calls == [0, 1, 0]
    assert cuda.device_switches == 3 and cuda.device == 0
    assert driver.get_current_stream(0) == 0   # outside our launches Triton sees its own default again
