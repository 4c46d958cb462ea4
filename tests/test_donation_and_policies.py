"""jit(donate_argnums=) reuses donated buffers and deletes the donated Arrays; checkpoint policies."""
import gc
import tracemalloc

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp


def _addr(x):
    return x._value.__array_interface__["data"][0]


def _step(p, x):
    return p - 0.1 * fnp.tanh(x) * p


def _fresh(shape=(16, 8), value=1.0):
    return fnp.full(shape, value) + 0.0   # an Array owning its buffer


def test_donated_buffer_is_reused_by_the_output():
    f = fg.jit(_step, donate_argnums=0)
    p, x = _fresh(), fnp.full((16, 8), 0.5)
    for _ in range(3):
        addr, x_addr = _addr(p), _addr(x)
        q = f(p, x)
        assert _addr(q) == addr            # written into the donated buffer
        assert p.is_deleted() and not x.is_deleted()
        assert _addr(x) == x_addr          # the other argument is untouched
        np.testing.assert_array_equal(np.asarray(x), np.full((16, 8), 0.5, np.float32))
        p = q
    assert not q._value.flags.writeable    # handed out read-only, as every output


def test_donated_array_raises_on_use_naming_jit_argument_and_fix():
    f = fg.jit(_step, donate_argnums=0)
    p = _fresh()
    f(p, fnp.ones((16, 8)))
    assert p.is_deleted()
    for use in (lambda: p + 1, lambda: np.asarray(p), lambda: fnp.sin(p), lambda: p.shape,
                lambda: f(p, fnp.ones((16, 8))), lambda: fg.grad(lambda a: a.sum())(p)):
        with pytest.raises(RuntimeError, match=r"Array has been deleted.*jit\(_step\).*argument 0 \(p\).*output"):
            use()
    assert "deleted" in repr(p)
    p.delete()   # deleting again does nothing, as in JAX


def test_values_equal_without_donation_training_step():
    w0 = np.random.default_rng(0).standard_normal((12, 6)).astype(np.float32)
    xs = np.random.default_rng(1).standard_normal((5, 4, 12)).astype(np.float32)

    def loss(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)

    def step(w, x):
        return w - 0.05 * fg.grad(loss)(w, x)

    plain, donating = fg.jit(step), fg.jit(step, donate_argnums=(0,))
    a, b = fnp.asarray(w0), fnp.asarray(w0)
    for x in xs:
        a = plain(a, fnp.asarray(x))
        b = donating(b, fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6, atol=1e-7)


def test_pytree_and_donate_argnames():
    def step(params, x):
        # two elementwise operations each: fused kernels, which write into given buffers
        return {"w": params["w"] * x + 0.5, "b": params["b"] * 2.0 - 1.0}

    f = fg.jit(step, donate_argnames="params")
    params = {"w": _fresh((4, 3)), "b": _fresh((3,))}
    addrs = {k: _addr(v) for k, v in params.items()}
    out = f(params, fnp.full((4, 3), 2.0))
    assert all(v.is_deleted() for v in params.values())
    assert {k: _addr(v) for k, v in out.items()} == addrs
    np.testing.assert_array_equal(np.asarray(out["w"]), np.full((4, 3), 2.5))
    np.testing.assert_array_equal(np.asarray(out["b"]), np.full((3,), 1.0))
    # by keyword too
    out2 = f(params=out, x=fnp.ones((4, 3)))
    assert out["w"].is_deleted() and not out2["w"].is_deleted()


def test_numpy_arguments_and_other_holders_are_left_alone():
    f = fg.jit(_step, donate_argnums=0)
    raw = np.ones((16, 8), np.float32)
    f(raw, fnp.ones((16, 8)))
    np.testing.assert_array_equal(raw, 1.0)            # a numpy array is copied in: never written over
    p = _fresh()
    view = p[1:3]                                      # a view of p's buffer: p's memory is not free
    p_addr = _addr(p)
    q = f(p, fnp.ones((16, 8)))
    assert p.is_deleted() and _addr(q) != p_addr
    np.testing.assert_array_equal(np.asarray(view), 1.0)


def test_not_written_over_while_still_read():
    # The donated argument is read after the output of its shape is made: that output must not take it.
    def f(p, x):
        y = p * 2.0
        return y, fnp.sum(p * x) + fnp.sum(y)

    g = fg.jit(f, donate_argnums=0)
    p = _fresh((4, 4), 3.0)
    y, s = g(p, fnp.ones((4, 4)))
    np.testing.assert_array_equal(np.asarray(y), 6.0)
    assert float(s) == pytest.approx(16 * 3 + 16 * 6)
    # an output that is the argument itself, next to one of its shape
    h = fg.jit(lambda p: (p, p + 1.0), donate_argnums=0)
    a, b = h(_fresh((4,), 1.0))
    np.testing.assert_array_equal(np.asarray(a), 1.0)
    np.testing.assert_array_equal(np.asarray(b), 2.0)


def test_same_array_donated_twice_and_mixed():
    f = fg.jit(lambda a, b: a + b, donate_argnums=(0, 1))
    p = _fresh((5,), 2.0)
    np.testing.assert_array_equal(np.asarray(f(p, p)), 4.0)
    assert p.is_deleted()
    g = fg.jit(lambda a, b: a + b, donate_argnums=0)
    p = _fresh((5,), 2.0)
    np.testing.assert_array_equal(np.asarray(g(p, p)), 4.0)   # also passed undonated: read correctly


def _loop_memory(donate):
    """(growth of traced memory over 20 steps, peaks per step, final value) of a parameter update loop."""
    f = fg.jit(lambda p, g: p - 0.01 * g * p, donate_argnums=0 if donate else None)
    p, g = _fresh((512, 512)), fnp.full((512, 512), 0.5)
    p = f(p, g)   # compile outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        peaks = []
        for i in range(20):
            tracemalloc.reset_peak()
            addr = _addr(p)
            p = f(p, g)
            assert (_addr(p) == addr) == donate
            peaks.append(tracemalloc.get_traced_memory()[1] - base)
        growth = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return growth, peaks, p


def test_memory_of_donating_loop_stays_flat():
    nbytes = 512 * 512 * 4
    growth, peaks, p = _loop_memory(True)
    # No parameter buffer is allocated by any step, and nothing accumulates (small interpreter
    # free lists aside).
    assert max(peaks) < nbytes // 4 and growth < nbytes // 4, (growth, peaks)
    assert max(peaks[10:]) <= max(peaks[:10]) + nbytes // 8, peaks
    np.testing.assert_allclose(np.asarray(p), (1 - 0.005) ** 21, rtol=1e-5)
    # Without donation the program allocates a second parameter buffer (then recycles the two).
    growth0, peaks0, p0 = _loop_memory(False)
    assert max(peaks0) >= nbytes, peaks0
    np.testing.assert_array_equal(np.asarray(p0), np.asarray(p))


def test_lower_shows_donation_plan():
    text = repr(fg.jit(_step, donate_argnums=0).lower(_fresh(), fnp.ones((16, 8))))
    assert "donated argument 0" in text


def test_donate_argnums_type_checked():
    with pytest.raises(TypeError, match="donate_argnums"):
        fg.jit(_step, donate_argnums="p")
