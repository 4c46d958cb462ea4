"""The eager reverse-mode path's Python work, counted (never timed): calls per tiny gradient.

A tiny ``grad`` is all dispatch: its cost is the number of Python functions it
runs. These bounds hold today's counts with a little room, so that a change
adding work to every primitive or every grad call shows up here; the
gradients are checked against float64 numpy at the same time.
"""
from __future__ import annotations

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _core
from call_counting import _python_calls, _tiny


def test_tiny_eager_grad_runs_few_python_calls():
    g = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x))
    x, ref = _tiny()
    g(x)                                           # first call: anything cached is cached
    out, counts = _python_calls(g, x)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-6)
    total = sum(counts.values())
    binds = counts["_core.py", "bind"]
    # 3 primitives forward (each bound twice: by the reverse trace, then eagerly beneath it),
    # 6 backward (broadcast, two products, cos and its product, the accumulating add).
    assert binds <= 13, counts
    assert total <= 76, f"{total} Python calls per tiny grad: {counts.most_common(12)}"


def test_tiny_eager_grad_records_and_frees_nothing_else():
    g = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x))
    x, ref = _tiny()
    g(x)
    out, counts = _python_calls(g, x)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-6)
    assert counts["reverse.py", "__init__"] <= 8, counts      # 3 nodes, a leaf and 4 tracers
    assert counts["reverse.py", "process_primitive"] == 3, counts
    assert not _core.backward_context(), "the backward context is left empty"


def test_grad_of_two_array_arguments_needs_no_pytree_work():
    f = lambda w, x: fnp.sum(fnp.tanh(w * x))  # noqa: E731
    w, x = fnp.array(np.linspace(0.1, 1.0, 10, dtype=np.float32)), fnp.array(np.ones(10, np.float32))
    g1, g2 = fg.grad(f), fg.grad(f, argnums=(0, 1))
    g1(w, x), g2(w, x)
    (o1, c1), (o2, c2) = _python_calls(g1, w, x), _python_calls(g2, w, x)
    w64 = np.linspace(0.1, 1.0, 10)
    np.testing.assert_allclose(np.asarray(o1), 1 - np.tanh(w64) ** 2, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(o2[1]), w64 * (1 - np.tanh(w64) ** 2), rtol=1e-5)
    assert sum(c2.values()) <= sum(c1.values()) + 14, (c1.most_common(8), c2.most_common(8))
