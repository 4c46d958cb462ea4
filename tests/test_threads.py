"""funcgrad from several Python threads at once.

The threaded runs happen in a child interpreter, so that a crash in a native
threading layer (numba's ``workqueue`` layer aborts the process when two
threads launch parallel kernels together) is reported as a failed test with
its signal instead of killing pytest.  The child computes every result once
serially first (checked against float64 numpy references), then 4 threads
recompute them all, interleaved, and every threaded result must match the
serial one.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _core

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = textwrap.dedent(r"""
    import sys, threading, time
    sys.path.insert(0, {repo!r})
    import numpy as np
    import funcgrad as fg, funcgrad.numpy as fnp
    from funcgrad.backends.cpu import _threads, kernels_softmax
    from funcgrad.compiler import codegen

    rng = np.random.default_rng(0)
    ROUNDS, NESTED_REPEATS, NAMES = {rounds}, {nested_repeats}, {names!r}

    # Each task returns a list of numpy arrays; its reference, the float64 numpy values.

    sm_x = rng.standard_normal((512, 512)).astype(np.float32) * 3
    # Parallel kernels must really run, or the test proves nothing.
    assert sm_x.size >= kernels_softmax._PARALLEL_MIN_SIZE and _threads.get_num_threads() > 1

    def softmax_task():
        return [np.asarray(fg.nn.softmax(fnp.asarray(sm_x)))]

    def softmax_reference():
        x = sm_x.astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        return [e / e.sum(1, keepdims=True)]

    @fg.jit
    def fused(x):
        return fnp.tanh(x) * 2.0 + fnp.exp(-x * x)

    el_xs = [rng.standard_normal(s).astype(np.float32) for s in [(256, 128), (128, 512), (64, 1024)]]

    def elementwise_task():
        return [np.asarray(fused(x)) for x in el_xs]

    def elementwise_reference():
        return [np.tanh(x.astype(np.float64)) * 2.0 + np.exp(-x.astype(np.float64) ** 2) for x in el_xs]

    def mlp_loss(p, x, y):
        h = fnp.maximum(x @ p["w1"] + p["b1"], 0.0)
        return fg.nn.cross_entropy(h @ p["w2"] + p["b2"], y)

    @fg.jit
    def train_step(p, x, y):
        loss, g = fg.value_and_grad(mlp_loss)(p, x, y)
        return loss, {{k: p[k] - 0.1 * g[k] for k in p}}

    params = {{"w1": rng.standard_normal((64, 256)).astype(np.float32) * 0.1,
               "b1": np.full(256, 0.01, np.float32),
               "w2": rng.standard_normal((256, 10)).astype(np.float32) * 0.1,
               "b2": np.zeros(10, np.float32)}}
    batches = [(rng.standard_normal((b, 64)).astype(np.float32), rng.integers(0, 10, b).astype(np.int32))
               for b in (256, 128)]   # hidden layers of 65536 and 32768 elements: parallel fused kernels

    def mlp_task():
        out = []
        for x, y in batches:
            loss, new = train_step(params, x, y)
            out += [np.asarray(loss)] + [np.asarray(new[k]) for k in sorted(new)]
        return out

    def mlp_reference():
        out = []
        p = {{k: v.astype(np.float64) for k, v in params.items()}}
        for x, y in batches:
            a1 = x @ p["w1"] + p["b1"]
            h = np.maximum(a1, 0)
            z = h @ p["w2"] + p["b2"]
            z = z - z.max(1, keepdims=True)
            lse = np.log(np.exp(z).sum(1))
            d = np.exp(z - lse[:, None])
            d[np.arange(len(y)), y] -= 1
            d /= len(y)
            dh = (d @ p["w2"].T) * (a1 > 0)
            g = {{"w2": h.T @ d, "b2": d.sum(0), "w1": x.T @ dh, "b1": dh.sum(0)}}
            out += [np.mean(lse - z[np.arange(len(y)), y])] + [p[k] - 0.1 * g[k] for k in sorted(p)]
        return out

    # d/dx of [d/dy sin(x y) x y at y = 1.5 x]: the inner function closes over
    # the outer tracer, so mixing up the two transforms' levels gives a wrong value.
    def inner_at(x):
        time.sleep(0)   # user code may let other threads run anywhere (I/O, large numpy calls)
        return fg.grad(lambda y: fnp.sin(x * y) * x * y)(x * 1.5)

    nested = fg.grad(inner_at)
    gg_xs = [np.float32(0.3 + 0.25 * i) for i in range(4)]

    def nested_task():
        return [np.asarray(nested(fnp.asarray(x))) for x in gg_xs]

    def nested_reference():
        out = []
        for x in map(np.float64, gg_xs):
            u, du = 1.5 * x * x, 3.0 * x   # h(x) = x u cos(u) + x sin(u)
            out.append(u * np.cos(u) + np.sin(u) + x * du * (np.cos(u) - u * np.sin(u) + np.cos(u)))
        return out

    tasks = {{name: globals()[name + "_task"] for name in NAMES}}

    # -- serial results, checked against float64 numpy --------------------------
    serial = {{name: task() for name, task in tasks.items()}}
    for name in NAMES:
        for got, want in zip(serial[name], globals()[name + "_reference"](), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())),
                                       err_msg=name)
    for x in el_xs:
        assert x.size >= codegen.PARALLEL_MIN_ELEMENTS
        assert any(getattr(step[0], "spec", None) is not None and step[0].spec.parallel
                   for step in fused.lower(x).steps), "no parallel fused kernel"

    # -- the same work from 4 threads, interleaved ------------------------------
    failures = []
    start = threading.Barrier(4)

    def worker(t):
        start.wait()
        try:
            for r in range(ROUNDS):
                for name in NAMES[t % len(NAMES):] + NAMES[:t % len(NAMES)]:   # each thread in its own order
                    for _ in range(NESTED_REPEATS if name == "nested" else 1):
                        for got, want in zip(tasks[name](), serial[name]):
                            if not np.allclose(got, want, rtol=1e-6, atol=1e-6):
                                failures.append(f"thread {{t}} round {{r}}: {{name}} differs from the serial result")
        except BaseException as e:
            failures.append(f"thread {{t}}: {{type(e).__name__}}: {{e}}")

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads often: races show up
    try:
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    print(_threads.threading_layer())
    if failures:
        sys.exit(f"{{len(failures)}} failures, first: " + "; ".join(failures[:5]))
""")


def _run_child(names: list[str], rounds: int, nested_repeats: int = 1, layer: str | None = None) -> str:
    """Run the threaded script in a fresh interpreter; return numba's threading layer there."""
    env = dict(os.environ, NUMBA_NUM_THREADS="4")   # parallel kernels even on a 1-core runner
    env.pop("FUNCGRAD_NUM_THREADS", None)
    env.pop("NUMBA_THREADING_LAYER", None)
    if layer is not None:
        env["NUMBA_THREADING_LAYER"] = layer
    script = _CHILD.format(repo=REPO, rounds=rounds, nested_repeats=nested_repeats, names=names)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode < 0:
        raise AssertionError(f"the threaded run was killed by {signal.Signals(-proc.returncode).name}:\n"
                             f"{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()[-1]


def test_four_threads_match_the_serial_results():
    """Eager parallel softmax, a jitted function at 3 shapes, a jitted MLP step at
    2 batch sizes and nested grads, from 4 threads at once, under a fast switch
    interval: no crash and every result equal to the serial one."""
    layer = _run_child(["softmax", "elementwise", "mlp", "nested"], rounds=3, nested_repeats=15)
    assert layer in ("tbb", "omp"), layer   # a layer that parallel kernels may enter from several threads


def test_workqueue_layer_is_serialised_not_aborted():
    """numba's workqueue layer (chosen explicitly) aborts the process on concurrent
    parallel launches; funcgrad serialises its launches under it instead."""
    assert _run_child(["softmax", "elementwise"], rounds=4, layer="workqueue") == "workqueue"


def test_trace_stacks_are_per_thread():
    """Thread A stays inside grad (blocked) while this thread runs nested grads,
    and then A runs its inner grad after this thread's transforms ended: each
    thread numbers its transforms from 1, and both results are right."""
    inside_a, b_done = threading.Event(), threading.Event()
    seen: dict = {}

    def f_a(x):
        seen["a_outer_level"] = x._trace.main.level
        inside_a.set()
        if not b_done.wait(timeout=60):
            raise TimeoutError("thread B did not finish")
        # B pushed and popped its transforms while A was in here.
        def inner(y):
            seen["a_inner_level"] = y._trace.main.level
            return fnp.sin(x * y) * y
        return fg.grad(inner)(x * 2.0)

    result: dict = {}

    def thread_a():
        try:
            result["a"] = float(fg.grad(f_a)(fnp.asarray(np.float32(0.7))))
        except BaseException as e:   # reported below, in the test's thread
            result["a"] = e

    ta = threading.Thread(target=thread_a)
    ta.start()
    try:
        assert inside_a.wait(timeout=60)
        assert _core.trace_stack() == []   # A's transform is not on this thread's stack

        def g(x):
            seen["b_level"] = x._trace.main.level
            return fg.grad(lambda y: fnp.cos(x * y) * y)(x)
        got_b = float(fg.grad(g)(fnp.asarray(np.float32(0.4))))
    finally:
        b_done.set()
        ta.join(timeout=60)
    assert not isinstance(result["a"], BaseException), result["a"]
    assert seen["b_level"] == 1 and seen["a_outer_level"] == 1 and seen["a_inner_level"] == 2

    # d/dy [cos(x y) y] = cos(x y) - x y sin(x y); at y = x: cos(x^2) - x^2 sin(x^2); d/dx of that:
    x = 0.4
    want_b = -2 * x * np.sin(x * x) - 2 * x * np.sin(x * x) - x * x * 2 * x * np.cos(x * x)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5)
    # d/dy [sin(x y) y] = x y cos(x y) + sin(x y); at y = 2x with u = 2x^2: u cos(u) + sin(u); d/dx:
    x = 0.7
    u, du = 2 * x * x, 4 * x
    want_a = du * (np.cos(u) - u * np.sin(u)) + du * np.cos(u)
    np.testing.assert_allclose(result["a"], want_a, rtol=1e-5)


_BLAS_CHILD = textwrap.dedent(r"""
    import sys, threading
    sys.path.insert(0, {repo!r})
    import numpy as np
    from threadpoolctl import threadpool_info
    from funcgrad.backends.cpu import kernels_conv

    def blas_threads():
        return sorted({{info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}})

    assert blas_threads() == [2], blas_threads()   # OPENBLAS_NUM_THREADS=2
    a_in, release_a, a_out, b_in = (threading.Event() for _ in range(4))
    seen = {{}}

    def conv_a():
        with kernels_conv._blas_one_thread():
            a_in.set()
            release_a.wait(timeout=60)
        a_out.set()

    def conv_b():
        with kernels_conv._blas_one_thread():
            b_in.set()
            a_out.wait(timeout=60)
            seen["b_after_a"] = blas_threads()   # B's workers still running

    ta = threading.Thread(target=conv_a)
    ta.start()
    a_in.wait(timeout=60)
    tb = threading.Thread(target=conv_b)
    tb.start()
    b_in.wait(timeout=0.5)   # B starts while A is inside (or waits for its turn)
    release_a.set()
    ta.join(timeout=60)
    tb.join(timeout=60)
    assert seen["b_after_a"] == [1], seen   # still one BLAS thread while B's convolution runs
    assert blas_threads() == [2], blas_threads()   # and BLAS's own threads back afterwards

    rng = np.random.default_rng(0)   # real convolutions from 4 threads: same results
    x = rng.standard_normal((8, 4, 16, 16)).astype(np.float32)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    want = kernels_conv.conv2d_forward(x, w, padding=1)
    bad = []
    def work():
        for _ in range(10):
            if not np.array_equal(kernels_conv.conv2d_forward(x, w, padding=1), want):
                bad.append(1)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad and blas_threads() == [2], (len(bad), blas_threads())
""")


def test_overlapping_convolutions_restore_blas_threads():
    """conv2d holds BLAS to one thread while its workers run. Two threads'
    convolutions overlapping (A starts, B starts, A ends, B ends) must keep
    BLAS on one thread until B ends, then give it back its threads (not the 1
    that B found when it started)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    proc = subprocess.run([sys.executable, "-c", _BLAS_CHILD.format(repo=REPO)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_numba_messages_on_another_thread_leave_sys_stdout_alone(monkeypatch):
    """numba formats messages during ordinary compiles (typing a global first fails one way), and funcgrad
    compiles on a background thread. With colorama installed, numba used to replace ``sys.stdout`` and
    ``sys.stderr`` around each message and put back what it had seen, so another thread's output (a doctest's,
    a ``redirect_stdout``'s) could go to the wrong stream. The message is formatted here on a second thread,
    as the background compiles do; colorama would have wrapped (and so asked ``isatty`` of) the stream."""
    import io

    import numba

    class Watched(io.StringIO):
        asked = 0

        def isatty(self):
            Watched.asked += 1
            return False

    stream = Watched()
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(sys, "stderr", stream)
    messages = []

    def numba_fails_to_type_a_value():
        try:
            numba.typeof(object())
        except ValueError as e:
            messages.append(str(e))
    worker = threading.Thread(target=numba_fails_to_type_a_value)
    worker.start()
    worker.join()
    assert sys.stdout is stream and sys.stderr is stream
    assert Watched.asked == 0, "numba wrapped sys.stdout/sys.stderr while formatting a message"
    assert messages and "Cannot determine Numba type" in messages[0], messages


_ONE_CPU_CHILD = textwrap.dedent(r"""
    import os, sys, threading
    os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})   # before numba and TBB look
    sys.path.insert(0, {repo!r})
    import numpy as np
    import funcgrad as fg
    from funcgrad.backends.cpu import _threads
    x = np.arange(1 << 17, dtype=np.float32)          # large enough for a parallel kernel
    out = []
    # The pool starts on this thread (as on funcgrad's background compiler); the interpreter ends on another.
    worker = threading.Thread(target=lambda: out.append(np.asarray(fg.jit(lambda a: a * 2.0 + 1.0)(x))))
    worker.start()
    worker.join()
    assert np.array_equal(out[0], x * 2.0 + 1.0)
    print(_threads.threading_layer())
""")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity masks (Linux)")
def test_a_process_on_one_cpu_exits():
    """On one CPU oneTBB starts no worker thread; numba's TBB pool, started on one thread, then hung the
    interpreter's exit on another. funcgrad picks numba's workqueue layer there."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    proc = subprocess.run([sys.executable, "-c", _ONE_CPU_CHILD.format(repo=REPO)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["workqueue"], proc.stdout
