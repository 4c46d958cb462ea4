"""CUDA graphs for jitted GPU programs (``config.gpu_graphs``, funcgrad/backends/gpu/graphs.py).

Without a GPU the logic runs on the CuPy stand-in (tests/gpu_standin.py) with a stand-in for stream capture:
the "graph" re-runs the captured program on the captured input buffers and writes its results into the
captured output buffers, as a replayed CUDA graph rewrites the same memory. That checks what funcgrad does
around the capture (warm-up, input and output copies, no aliasing between calls, falling back when capture
fails, re-armed deferred checks); the test marked ``gpu`` captures a real graph. References are float64 numpy.
"""
from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.backends.gpu import _deferred, _detect, graphs
from funcgrad.backends.gpu import array as gpu_array
from gpu_standin import FakeDeviceArray, gpu_standin


class _Stream:
    def wait_event(self, event):
        assert event == "recorded"

    def record(self):
        return "recorded"

    def synchronize(self):
        pass


class _FakeGraph:
    def __init__(self, rerun, outputs):
        self.rerun, self.outputs, self.launches = rerun, outputs, 0

    def launch(self, stream=None):
        self.launches += 1
        for buf, new in zip(self.outputs, self.rerun()):
            np.copyto(buf, new._value)


@pytest.fixture
def fake_graphs(monkeypatch):
    """The stand-in, with CuPy's memory-pool and stream calls, and a capture that records a re-runnable graph."""
    captured = []

    def fake_capture(xp, run, inputs):
        outputs = run(inputs)
        graph = _FakeGraph(lambda: run(inputs), [o._value for o in outputs])
        captured.append(graph)
        return graph, outputs

    monkeypatch.setattr(graphs, "_capture", fake_capture)
    with gpu_standin(use_triton=False):
        xp = gpu_array.binding().xp
        cuda = types.SimpleNamespace(MemoryPool=lambda: types.SimpleNamespace(malloc=None),
                                     using_allocator=lambda malloc: contextlib.nullcontext(),
                                     get_current_stream=_Stream)
        monkeypatch.setattr(xp, "cuda", cuda, raising=False)
        monkeypatch.setattr(fg.config, "gpu_graphs", True)
        yield captured


def _mlp_loss(p, x, y):
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return fnp.mean((h @ p["w2"] - y) ** 2)


def _step(p, x, y):
    g = fg.grad(_mlp_loss)(p, x, y)
    return fg.tree_util.tree_map(lambda w, gw: w - 0.1 * gw, p, g)


def _numpy_step(p, x, y):
    p = {k: v.astype(np.float64) for k, v in p.items()}
    x, y = x.astype(np.float64), y.astype(np.float64)
    a = x @ p["w1"] + p["b1"]
    h = np.tanh(a)
    r = h @ p["w2"] - y
    dout = 2 * r / r.size
    g = {"w2": h.T @ dout}
    da = (dout @ p["w2"].T) * (1 - h ** 2)
    g["w1"], g["b1"] = x.T @ da, da.sum(0)
    return {k: p[k] - 0.1 * g[k] for k in p}


def _data(seed):
    rng = np.random.default_rng(seed)
    p = {"w1": rng.standard_normal((5, 4)), "b1": rng.standard_normal(4), "w2": rng.standard_normal((4, 3))}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    return p, rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)


def _on_gpu(tree):
    return fg.device_put(tree, "gpu")


def _host(tree):
    return {k: np.asarray(fg.device_put(v, "cpu"), np.float64) for k, v in tree.items()}


def test_second_call_is_captured_and_replays_match_numpy_without_aliasing(fake_graphs):
    jstep = fg.jit(_step)
    results, refs = [], []
    for seed in range(5):
        p, x, y = _data(seed)
        out = jstep(_on_gpu(p), _on_gpu(x), _on_gpu(y))
        assert all(v.device == "gpu" and isinstance(v._value, FakeDeviceArray) for v in out.values())
        results.append(out)
        refs.append(_numpy_step(p, x, y))
    assert len(fake_graphs) == 1 and fake_graphs[0].launches == 4   # call 1 warms up, call 2 captures
    for out, ref in zip(results, refs):                              # earlier results were not overwritten
        for k, v in _host(out).items():
            np.testing.assert_allclose(v, ref[k], rtol=1e-5, atol=1e-6)


def test_a_program_that_cannot_be_captured_runs_uncaptured(fake_graphs, monkeypatch):
    tries = []

    def refuse(xp, run, inputs):
        tries.append(1)
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(graphs, "_capture", refuse)
    jstep = fg.jit(_step)
    failed_before = len(graphs.stats["failed"])
    for seed in range(3):
        p, x, y = _data(seed)
        if seed == 1:   # the capture: a warning naming why it failed
            with pytest.warns(RuntimeWarning, match="could not be captured.*not permitted when stream is capturing"):
                out = _host(jstep(_on_gpu(p), _on_gpu(x), _on_gpu(y)))
        else:
            out = _host(jstep(_on_gpu(p), _on_gpu(x), _on_gpu(y)))
        for k, v in _numpy_step(p, x, y).items():
            np.testing.assert_allclose(out[k], v, rtol=1e-5, atol=1e-6)
    assert tries == [1]   # tried once, at the second call; uncaptured ever after
    assert graphs.stats["failed"][failed_before:] == ["RuntimeError: operation not permitted when stream is capturing"]


def test_graphs_off_or_host_arguments_never_capture(fake_graphs, monkeypatch):
    f = fg.jit(lambda a, b: a * 2 + b)
    a = _on_gpu(fnp.arange(4.0))
    monkeypatch.setattr(fg.config, "gpu_graphs", False)
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(fg.device_put(f(a, a), "cpu")), [0, 3, 6, 9])
    monkeypatch.setattr(fg.config, "gpu_graphs", True)
    for _ in range(3):   # a host argument (uncommitted, moved to the GPU inside) is not a graph input
        np.testing.assert_array_equal(np.asarray(fg.device_put(f(a, fnp.arange(4.0)), "cpu")), [0, 3, 6, 9])
    assert fake_graphs == []
    for _ in range(2):   # all on the GPU: the second call is captured
        np.testing.assert_array_equal(np.asarray(fg.device_put(f(a, a), "cpu")), [0, 3, 6, 9])
    assert len(fake_graphs) == 1


def test_checks_deferred_during_capture_are_rearmed_at_every_replay(fake_graphs, monkeypatch):
    armed = []
    monkeypatch.setattr(_deferred, "defer_check", lambda flag, make_error: armed.append((flag, make_error)),
                        raising=False)
    flag = gpu_array.binding().xp.asarray(np.zeros((), np.int32))
    with _deferred.collect_deferred_checks() as scope:
        _deferred.capture_scopes[-1].append((flag, "error maker"))   # a check deferred during a capture
    assert scope == [(flag, "error maker")] and not _deferred.capture_scopes
    cap = graphs._Captured(graph=types.SimpleNamespace(launch=lambda stream=None: None), inputs=[], outputs=[],
                           pool=None, checks=scope)
    program = types.SimpleNamespace(xp=gpu_array.binding().xp, backend=gpu_array.backend)
    graphs._replay(program, cap, [])
    graphs._replay(program, cap, [])
    assert [m for _, m in armed] == ["error maker", "error maker"]
    assert armed[0][0] is not flag and armed[1][0] is not armed[0][0]   # a copy of the flag at each replay


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_real_cuda_graph_of_a_training_step(monkeypatch):
    monkeypatch.setattr(fg.config, "gpu_graphs", True)
    jstep = fg.jit(_step)
    outs = []
    for seed in range(4):
        p, x, y = _data(seed)
        outs.append((jstep(_on_gpu(p), _on_gpu(x), _on_gpu(y)), _numpy_step(p, x, y)))
    built = []
    real_build = graphs._build
    monkeypatch.setattr(graphs, "_build", lambda program, buffers: built.append(real_build(program, buffers))
                        or built[-1])
    for seed in range(4, 6):
        p, x, y = _data(seed)
        outs.append((jstep(_on_gpu(p), _on_gpu(x), _on_gpu(y)), _numpy_step(p, x, y)))
    fresh = fg.jit(_step)
    for seed in range(6, 9):
        p, x, y = _data(seed)
        outs.append((fresh(_on_gpu(p), _on_gpu(x), _on_gpu(y)), _numpy_step(p, x, y)))
    assert len(built) == 1 and isinstance(built[0], graphs._Captured), f"the step was not captured: {built}"
    for out, ref in outs:
        for k, v in _host(out).items():
            np.testing.assert_allclose(v, ref[k], rtol=1e-5, atol=1e-6)


def test_label_checks_deferred_inside_a_captured_step_fire_at_the_next_wait(fake_graphs):
    import funcgrad.nn as nn
    loss = fg.jit(fg.grad(lambda w, x, y: nn.cross_entropy(x @ w, y)))
    rng = np.random.default_rng(0)
    w, x = _on_gpu(rng.standard_normal((4, 3)).astype(np.float32)), _on_gpu(rng.standard_normal((5, 4)).astype(np.float32))
    good, bad = _on_gpu(np.array([0, 1, 2, 1, 0], np.int32)), _on_gpu(np.array([0, 1, 7, 1, 0], np.int32))
    for _ in range(3):                        # warm-up, capture, replay
        fg.block_until_ready(loss(w, x, good))
    assert len(fake_graphs) == 1 and not gpu_array._pending
    out = loss(w, x, bad)                      # a replay with a bad label: no error yet (no host read)...
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\)"):
        fg.block_until_ready(out)              # ...raised at the wait
    assert not gpu_array._pending
    fg.block_until_ready(loss(w, x, good))     # and the next replay is clean


def test_defer_check_during_a_capture_goes_to_the_capture(fake_graphs):
    flag = gpu_array.binding().xp.asarray(np.ones((), np.int32))
    with _deferred.collect_deferred_checks() as scope:
        gpu_array.defer_check(flag, lambda: ValueError("never raised: captured"))
    assert len(scope) == 1 and scope[0][0] is flag and not gpu_array._pending


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_real_cuda_graph_with_cross_entropy_labels(monkeypatch):
    import funcgrad.nn as nn
    monkeypatch.setattr(fg.config, "gpu_graphs", True)
    built = []
    real_build = graphs._build
    monkeypatch.setattr(graphs, "_build", lambda program, buffers: built.append(real_build(program, buffers))
                        or built[-1])
    loss = fg.jit(fg.grad(lambda w, x, y: nn.cross_entropy(x @ w, y)))
    rng = np.random.default_rng(0)
    w64, x64 = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))
    y = np.array([0, 1, 2, 1, 0], np.int32)
    w, x = _on_gpu(w64.astype(np.float32)), _on_gpu(x64.astype(np.float32))
    for _ in range(3):
        g = np.asarray(fg.device_put(loss(w, x, _on_gpu(y)), "cpu"), np.float64)
    z = x64 @ w64
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(5), y] -= 1
    np.testing.assert_allclose(g, x64.T @ p / 5, rtol=1e-4, atol=1e-6)
    assert len(built) == 1 and isinstance(built[0], graphs._Captured), built
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\)"):
        fg.block_until_ready(loss(w, x, _on_gpu(np.array([0, 1, 9, 1, 0], np.int32))))
