"""jit(donate_argnums=) reuses donated buffers and deletes the donated Arrays; checkpoint policies."""
import gc
import tracemalloc

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.compiler.codegen import wait_for_kernels
from funcgrad.testing import check_grads


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
    p2 = _fresh()   # a cache hit (the positional fast path) deletes and says so the same way
    f(p2, fnp.ones((16, 8)))
    with pytest.raises(RuntimeError, match=r"Array has been deleted.*jit\(_step\).*argument 0 \(p\)"):
        p2 * 2
    x = _fresh()
    x.delete()
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="x.delete"):
        fnp.sum(x)


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
    wait_for_kernels()   # ... the kernels too (the first calls run on numpy while they compile)
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


# ------------------------------------------------------------------ checkpoint policies

_CP = fg.checkpoint_policies


@pytest.fixture
def count_prims(monkeypatch):
    """Count the host evaluations of chosen primitives (their impls)."""
    from funcgrad.primitives import elementwise as E
    from funcgrad.primitives import linalg as L
    counts = {"matmul": 0, "sin": 0}
    for name, prim in (("matmul", L.matmul_p), ("sin", E.sin_p)):
        orig = prim.impl

        def counted(*a, _orig=orig, _name=name, **k):
            counts[_name] += 1
            return _orig(*a, **k)
        monkeypatch.setattr(prim, "impl", counted)
    return counts


def _model(w1, w2, x):
    return fnp.tanh(fnp.sin(x @ w1) @ w2)


def _grads(f, w1, w2, x):
    return fg.grad(lambda a, b: fnp.sum(f(a, b, x) ** 2), argnums=(0, 1))(w1, w2)


_POLICIES = {"none": None, "nothing": _CP.nothing_saveable, "dots": _CP.dots_saveable,
             "dots_no_batch": _CP.dots_with_no_batch_dims_saveable, "everything": _CP.everything_saveable,
             "sin_only": lambda prim, *avals, **params: prim.name == "sin",
             "both": _CP.save_from_both_policies(_CP.dots_saveable, lambda prim, *a, **k: prim.name == "sin")}


@pytest.mark.parametrize("policy", sorted(_POLICIES))
def test_policy_gradients_equal_plain_and_finite_differences(policy):
    with _x64():
        rng = np.random.default_rng(3)
        w1, w2, x = (fnp.asarray(rng.standard_normal(s)) for s in ((4, 5), (5, 3), (2, 4)))
        f = fg.checkpoint(_model, policy=_POLICIES[policy])
        got, want = _grads(f, w1, w2, x), _grads(_model, w1, w2, x)
        for g, e in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-12)
        # finite differences of the loss in w1
        loss = lambda a: float(fnp.sum(_model(a, w2, x) ** 2))   # noqa: E731
        d = np.random.default_rng(4).standard_normal((4, 5))
        eps = 1e-6
        fd = (loss(fnp.asarray(np.asarray(w1) + eps * d)) - loss(fnp.asarray(np.asarray(w1) - eps * d))) / (2 * eps)
        assert float(np.sum(np.asarray(got[0]) * d)) == pytest.approx(fd, rel=1e-6)
        # second order, under jit and vmap
        from funcgrad.testing import check_grads
        check_grads(lambda a: f(a, w2, x), (w1,), order=2)
        gj = fg.jit(lambda a, b: _grads(f, a, b, x))(w1, w2)
        np.testing.assert_allclose(np.asarray(gj[0]), np.asarray(want[0]), rtol=1e-10)
        per = fg.vmap(lambda xi: fg.grad(lambda a: fnp.sum(f(a, w2, xi[None]) ** 2))(w1))(x)
        np.testing.assert_allclose(np.asarray(per).sum(0), np.asarray(want[0]), rtol=1e-10)


class _x64:
    def __enter__(self):
        self.before = fg.config.enable_x64
        fg.config.update("enable_x64", True)

    def __exit__(self, *exc):
        fg.config.update("enable_x64", self.before)


def test_policy_changes_what_the_backward_pass_recomputes(count_prims):
    rng = np.random.default_rng(0)
    w1, w2, x = (fnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((4, 5), (5, 3), (2, 4)))
    seen = {}
    for name in ("everything", "nothing", "dots", "sin_only", "both"):
        count_prims["matmul"] = count_prims["sin"] = 0
        _grads(fg.checkpoint(_model, policy=_POLICIES[name]), w1, w2, x)
        seen[name] = dict(count_prims)
    # The forward pass runs 2 matmuls and 1 sin in every case.
    # Nothing saved: both matmuls and the sin run again in the backward pass.
    assert seen["nothing"]["matmul"] - seen["dots"]["matmul"] == 2
    assert seen["dots"]["matmul"] == seen["everything"]["matmul"]        # no dot runs twice
    assert seen["nothing"]["sin"] == 2 and seen["dots"]["sin"] == 2       # dots saved, sin recomputed
    assert seen["sin_only"]["sin"] == 1                                   # sin saved ...
    # sin's derivative needs its input: x @ w1 is recomputed all the same, x @ ... @ w2 too.
    assert seen["sin_only"]["matmul"] == seen["nothing"]["matmul"]
    assert seen["both"]["sin"] == 1 and seen["both"]["matmul"] == seen["dots"]["matmul"]
    assert seen["everything"]["sin"] == 1


def _named_model(w1, w2, x):
    return fnp.tanh(fg.checkpoint_name(fnp.sin(x @ w1), "a") @ w2)


def test_name_policies_save_the_named_values(count_prims):
    rng = np.random.default_rng(0)
    w1, w2, x = (fnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((4, 5), (5, 3), (2, 4)))
    want = _grads(_named_model, w1, w2, x)
    # (policy, sin evaluations: 1 when the named sin is kept, 2 when it is recomputed)
    cases = [(_CP.save_only_these_names("a"), 1), (_CP.save_only_these_names("b"), 2),
             (_CP.save_any_names_but_these("a"), 2), (_CP.save_any_names_but_these("b"), 1),
             (_CP.save_anything_except_these_names("a"), 2)]
    for policy, sins in cases:
        count_prims["sin"] = 0
        got = _grads(fg.checkpoint(_named_model, policy=policy), w1, w2, x)
        assert count_prims["sin"] == sins
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    count_prims["sin"] = 0
    _grads(fg.checkpoint(_model, policy=_CP.save_only_these_names("a")), w1, w2, x)   # nothing named
    assert count_prims["sin"] == 2


def test_checkpoint_name_is_an_identity_under_every_transform():
    from funcgrad.ad_checkpoint import checkpoint_name
    x = np.array([[0.3, -1.2], [2.0, 0.5]])
    f = lambda v: fnp.sum(fnp.sin(checkpoint_name({"h": v * v}, "h")["h"]))   # noqa: E731
    with _x64():
        check_grads(f, (x,), order=2)
        np.testing.assert_allclose(np.asarray(fg.jit(fg.grad(f))(x)), np.cos(x * x) * 2 * x, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(fg.vmap(fg.grad(f))(x)), np.cos(x * x) * 2 * x, rtol=1e-12)
    with pytest.raises(TypeError, match="name must be a str"):
        checkpoint_name(x, 3)


@pytest.mark.parametrize("policy", ["dots", "sin_only"])
def test_policy_under_closures_hessian_jvp_and_scan(policy):
    pol = _POLICIES[policy]
    with _x64():
        rng = np.random.default_rng(5)
        w1, w2 = fnp.asarray(rng.standard_normal((3, 3))), fnp.asarray(rng.standard_normal((3, 3)))

        def outer(s, p):   # closes over an outer grad's value
            f = fg.checkpoint(lambda w: fnp.sin(s * w) @ w2, policy=p)
            return fnp.sum(f(w1) ** 2)
        assert float(fg.grad(outer)(2.0, pol)) == pytest.approx(float(fg.grad(outer)(2.0, None)), rel=1e-12)

        def g(w, p):
            return fnp.sum(fg.checkpoint(lambda w: fnp.tanh(fnp.sin(w) @ w2) @ w, policy=p)(w))
        np.testing.assert_allclose(np.asarray(fg.hessian(g)(w1, pol)), np.asarray(fg.hessian(g)(w1, None)),
                                   rtol=1e-10, atol=1e-12)
        assert float(fg.jvp(lambda w: g(w, pol), (w1,), (w2,))[1]) == pytest.approx(
            float(fg.jvp(lambda w: g(w, None), (w1,), (w2,))[1]), rel=1e-12)

        def looped(w, p):
            body = fg.checkpoint(lambda c: fnp.sin(c @ w2), policy=p)
            return fnp.sum(fg.lax.scan(lambda c, _: (body(c), None), w, None, length=3)[0])
        np.testing.assert_allclose(np.asarray(fg.grad(looped)(w1, pol)), np.asarray(fg.grad(looped)(w1, None)),
                                   rtol=1e-12)


def test_donation_with_static_and_keyword_arguments():
    def step(scale, p, x):
        return p * scale + x * 2.0

    f = fg.jit(step, static_argnums=0, donate_argnums=1)
    p = _fresh((4, 3), 1.0)
    addr = _addr(p)
    q = f(3.0, p, fnp.ones((4, 3)))
    assert p.is_deleted() and _addr(q) == addr
    np.testing.assert_array_equal(np.asarray(q), 5.0)
    r = f(3.0, p=q, x=fnp.ones((4, 3)))   # donate_argnums also covers the parameter passed by keyword
    assert q.is_deleted() and _addr(r) == addr
    np.testing.assert_array_equal(np.asarray(r), 17.0)
