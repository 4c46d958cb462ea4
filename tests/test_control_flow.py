"""lax control flow: cond, switch, while_loop, fori_loop, scan, map.

Each row of ``ROWS`` is one operation used the way programs use it, with a
float64 numpy reference written as a plain Python loop. Every row is
checked for values (eagerly and under jit), derivatives to order 2 in both
modes against finite differences, and vmap against a loop over examples
(batched predicates and per-example trip counts included), in float32 and
float64.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.testing import check_close, check_grads


# ----------------------------------------------------------------------------- rows


def _branches():
    return [lambda a, b: fnp.sin(a) * b, lambda a, b: a * a + b, lambda a, b: fnp.exp(b) * a]


_NP_BRANCHES = [lambda a, b: np.sin(a) * b, lambda a, b: a * a + b, lambda a, b: np.exp(b) * a]


def cond_f(x, w):
    return lax.cond(x[0] > 0, lambda a, b: fnp.sin(a) * b, lambda a, b: fnp.cos(a) + b, x, w)


def cond_ref(x, w):
    return np.sin(x) * w if x[0] > 0 else np.cos(x) + w


def switch_f(k):
    def f(x, w):
        return lax.switch(k, _branches(), x, w)
    return f


def switch_ref(k):
    return lambda x, w: _NP_BRANCHES[min(max(k, 0), 2)](x, w)


def switch_traced_f(x, w):   # the index is computed from the data (traced under jit and vmap)
    k = (x[0] > 0).astype(fnp.int32) + (x[1] > 0).astype(fnp.int32)
    return lax.switch(k, _branches(), x, w)


def switch_traced_ref(x, w):
    return _NP_BRANCHES[int(x[0] > 0) + int(x[1] > 0)](x, w)


def while_fixed_f(x, w):
    def body(c):
        i, a = c
        return i + 1, fnp.sin(a) * w + 0.5
    return lax.while_loop(lambda c: c[0] < 4, body, (0, x))[1]


def while_fixed_ref(x, w):
    for _ in range(4):
        x = np.sin(x) * w + 0.5
    return x


def while_data_f(x, w):   # the trip count depends on the values
    return lax.while_loop(lambda a: fnp.sum(a * a) < 20.0, lambda a: a * 1.3 + w * 0.1, x)


def while_data_ref(x, w):
    while np.sum(x * x) < 20.0:
        x = x * 1.3 + w * 0.1
    return x


def _fori_body(w):
    return lambda i, a: a * fnp.cos(w * i) + 0.1 * a * a


def fori_f(x, w):
    return lax.fori_loop(0, 4, _fori_body(w), x)


def fori_checkpointed_f(x, w):   # the while_loop form, with a bounded-memory backward pass
    return lax.fori_loop(0, 4, _fori_body(w), x, checkpoints=2)


def fori_ref(x, w):
    for i in range(4):
        x = x * np.cos(w * i) + 0.1 * x * x
    return x


def scan_f(reverse):
    def f(x, w):
        def step(carry, t):
            h, s = carry
            h = fnp.tanh(h * x + t)
            return (h, s + fnp.sum(h)), h * t
        (h, s), ys = lax.scan(step, (fnp.zeros_like(x), fnp.zeros((), x.dtype)), w, reverse=reverse)
        return h, s, ys
    return f


def scan_ref(reverse):
    def ref(x, w):
        h, s, ys = np.zeros_like(x), 0.0, [None] * len(w)
        for t in (reversed(range(len(w))) if reverse else range(len(w))):
            h = np.tanh(h * x + w[t])
            s = s + np.sum(h)
            ys[t] = h * w[t]
        return h, s, np.stack(ys)
    return ref


def map_f(x, w):
    return lax.map(lambda t: fnp.sin(x * t) + t, w)


def map_ref(x, w):
    return np.stack([np.sin(x * t) + t for t in w])


X_POS = np.array([0.7, -0.3, 0.5])
X_NEG = np.array([-0.6, 0.4, 0.9])
W = np.array([0.2, 0.4, -0.1])

# name: (function, numpy reference, x)
ROWS = {
    "cond_true": (cond_f, cond_ref, X_POS),
    "cond_false": (cond_f, cond_ref, X_NEG),
    "switch_low_clamped": (switch_f(-1), switch_ref(-1), X_POS),
    "switch_1": (switch_f(1), switch_ref(1), X_POS),
    "switch_high_clamped": (switch_f(7), switch_ref(7), X_POS),
    "switch_traced": (switch_traced_f, switch_traced_ref, X_NEG),
    "while_fixed": (while_fixed_f, while_fixed_ref, X_POS),
    "while_data": (while_data_f, while_data_ref, X_POS),
    "fori": (fori_f, fori_ref, X_POS),
    "fori_checkpointed": (fori_checkpointed_f, fori_ref, X_POS),
    "scan": (scan_f(False), scan_ref(False), X_POS),
    "scan_reverse": (scan_f(True), scan_ref(True), X_POS),
    "map": (map_f, map_ref, X_POS),
}
# Per-example inputs for vmap: rows that take different branches / trip counts.
X_BATCH = np.stack([X_POS, X_NEG, np.array([1.5, 0.2, -0.3])])
W_BATCH = np.stack([W, -W, W * 2])

# Reverse mode twice through a while_loop needs the trip count when the derivative is taken,
# and a checkpointed loop is differentiated once (see test_second_reverse_derivative_errors).
SECOND_ORDER_REV = {k: k != "fori_checkpointed" for k in ROWS}


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    if request.param == "float64":
        request.getfixturevalue("x64")
    else:
        request.getfixturevalue("x32")
    return np.dtype(request.param)


def _tol(dtype):
    return 2e-5 if dtype == np.float32 else 1e-12


@pytest.mark.parametrize("name", ROWS)
def test_values_eager_and_jit(name, dtype):
    f, ref, x = ROWS[name]
    args = (x.astype(dtype), W.astype(dtype))
    expected = ref(*[a.astype(np.float64) for a in args])
    tol = _tol(dtype)
    check_close(f(*args), expected, atol=tol, rtol=tol, what=f"{name} eager")
    check_close(fg.jit(f)(*args), expected, atol=tol, rtol=tol, what=f"{name} jit")


@pytest.mark.parametrize("name", ROWS)
def test_derivatives_to_second_order(name, dtype):
    f, _, x = ROWS[name]
    args = (fnp.array(x.astype(dtype)), fnp.array(W.astype(dtype)))
    check_grads(f, args, order=2, modes=("fwd",))
    check_grads(f, args, order=2 if SECOND_ORDER_REV[name] else 1, modes=("rev",))


@pytest.mark.parametrize("name", ROWS)
def test_vmap_against_a_loop(name, dtype):
    f, ref, _ = ROWS[name]
    xs, ws = X_BATCH.astype(dtype), W_BATCH.astype(dtype)
    expected = [ref(x.astype(np.float64), w.astype(np.float64)) for x, w in zip(xs, ws)]
    expected = fg.tree_util.tree_map(lambda *leaves: np.stack(leaves), *expected)
    tol = _tol(dtype)
    check_close(fg.vmap(f)(xs, ws), expected, atol=tol, rtol=tol, what=f"vmap {name}")
    check_close(fg.jit(fg.vmap(f))(xs, ws), expected, atol=tol, rtol=tol, what=f"jit(vmap) {name}")
    # one argument mapped, the other shared (unbatched operands inside a batched loop)
    shared = [ref(x.astype(np.float64), W.astype(np.float64)) for x in xs]
    shared = fg.tree_util.tree_map(lambda *leaves: np.stack(leaves), *shared)
    check_close(fg.vmap(f, in_axes=(0, None))(xs, W.astype(dtype)), shared, atol=tol, rtol=tol,
                what=f"vmap(in_axes=(0, None)) {name}")


def _fd_grad(f, x, eps=1e-6):
    """Central differences of a scalar numpy function (float64)."""
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


# ----------------------------------------------------------------------------- compositions


def test_grad_under_jit_and_vmap_through_while_loop(x64):
    # The trip count is known only when the compiled program runs: the backward pass is while_grad.
    def loss(x, w):
        return fnp.sum(while_data_f(x, w) ** 2)

    def loss_ref(x, w):
        return np.sum(while_data_ref(x, w) ** 2)

    for x, w in zip(X_BATCH, W_BATCH):
        expected = _fd_grad(lambda v: loss_ref(v, w), x)
        check_close(fg.jit(fg.grad(loss))(x, w), expected, atol=1e-6, rtol=1e-6, what="jit(grad(while))")
    expected = np.stack([_fd_grad(lambda v: loss_ref(v, w), x) for x, w in zip(X_BATCH, W_BATCH)])
    check_close(fg.vmap(fg.grad(loss))(X_BATCH, W_BATCH), expected, atol=1e-6, rtol=1e-6,
                what="vmap(grad(while)), per-example trip counts")
    check_close(fg.jit(fg.vmap(fg.grad(loss)))(X_BATCH, W_BATCH), expected, atol=1e-6, rtol=1e-6,
                what="jit(vmap(grad(while)))")


def test_hessian_vector_product_through_fori_loop(x64):
    def loss(x):
        return fnp.sum(fori_f(x, fnp.array(W)) ** 2)

    def grad_ref(x):   # finite differences of the numpy reference's gradient
        return _fd_grad(lambda v: np.sum(fori_ref(v, W) ** 2), x, eps=1e-4)

    v = np.array([0.3, -1.0, 0.5])
    hvp = fg.jvp(fg.grad(loss), (fnp.array(X_POS),), (fnp.array(v),))[1]
    eps = 1e-3
    expected = (grad_ref(X_POS + eps * v) - grad_ref(X_POS - eps * v)) / (2 * eps)
    check_close(hvp, expected, atol=1e-5, rtol=1e-5, what="jvp(grad(fori_loop))")
    check_close(fg.jit(lambda x, t: fg.jvp(fg.grad(loss), (x,), (t,))[1])(X_POS, v), expected, atol=1e-5,
                rtol=1e-5, what="jit(jvp(grad(fori_loop)))")


def test_grad_of_grad_through_scan_under_jit(x64):
    def loss(x):
        h, s, ys = scan_f(False)(x, fnp.array(W))
        return s + fnp.sum(ys)

    def grad_ref(x):
        h, s, ys = scan_ref(False)(x, W)
        return s + np.sum(ys)

    u = np.array([1.0, 0.5, -0.25])
    got = fg.jit(fg.grad(lambda x: fnp.vdot(fg.grad(loss)(x), fnp.array(u))))(X_POS)
    eps = 1e-4
    expected = _fd_grad(lambda x: float(np.vdot(_fd_grad(grad_ref, x, eps), u)), X_POS, eps=1e-3)
    check_close(got, expected, atol=1e-4, rtol=1e-4, what="jit(grad(grad(scan)))")


def test_custom_vjp_rule_holds_inside_a_scan_body():
    @fg.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -0.1, 0.1),))

    def f(x):
        return fnp.sum(lax.scan(lambda c, _: (clip_gradient(c * 3.0), None), x, None, length=3)[0])

    x = fnp.array([1.0, 2.0])
    # Each step's backward clips the cotangent to 0.1 and scales it by 3 (plain autodiff gives 27).
    for g in (fg.grad(f), fg.jit(fg.grad(f))):
        check_close(g(x), np.full(2, 0.3), atol=1e-6, what="custom_vjp in a scan body")


def test_checkpoint_inside_a_loop_body(x64):
    def f(x):
        return fnp.sum(lax.fori_loop(0, 3, lambda i, c: fg.checkpoint(lambda v: fnp.sin(v) * 2)(c), x))

    def ref(x):
        for _ in range(3):
            x = np.sin(x) * 2
        return np.sum(x)

    check_close(fg.grad(f)(X_POS), _fd_grad(ref, X_POS), atol=1e-7, rtol=1e-7, what="checkpoint in fori_loop")
    check_close(fg.jit(fg.grad(f))(X_POS), _fd_grad(ref, X_POS), atol=1e-7, rtol=1e-7, what="jit")


def test_python_loops_on_concrete_values_still_work():
    def f(x, n):
        for _ in range(n):
            x = fnp.sin(x)
        return x

    check_close(fg.jit(f, static_argnums=1)(X_POS, 3), np.sin(np.sin(np.sin(X_POS))), atol=1e-6)


# ----------------------------------------------------------------------------- compilation


def _n_eqns(jaxpr):
    return len(jaxpr.eqns)


def test_jit_never_unrolls_and_prints_nested_programs():
    def f(x, n):
        return lax.fori_loop(0, n, lambda i, c: c * 0.5 + fnp.sin(c), x)

    short = fg.make_jaxpr(lambda x: f(x, 3))(X_POS)
    long = fg.make_jaxpr(lambda x: f(x, 3000))(X_POS)
    assert _n_eqns(short) == _n_eqns(long) == 1, str(long)
    text = str(long)
    assert "scan[" in text and "length=3000" in text and "sin" in text, text
    body_line = next(line for line in text.splitlines() if "sin" in line)
    assert body_line.startswith(" " * 8), "the body prints indented under its loop"
    check_close(fg.jit(lambda x: f(x, 3000))(X_POS), _fixed_point(X_POS), atol=1e-5)


def _fixed_point(x):
    for _ in range(3000):
        x = x * 0.5 + np.sin(x)
    return x


def test_fori_loop_with_traced_bounds_is_a_while_loop():
    def f(x, lo, hi):
        return lax.fori_loop(lo, hi, lambda i, c: c + i.astype(c.dtype) * c, x)

    jitted = fg.jit(f)
    for lo, hi in ((0, 4), (2, 5), (3, 1)):
        expected = X_POS.copy()
        for i in range(lo, hi):
            expected = expected + i * expected
        check_close(jitted(X_POS, lo, hi), expected, atol=1e-5, rtol=1e-5)
    assert "while[" in str(jitted.trace(X_POS, 0, 4))
    assert jitted.cache_info()["misses"] == 1, "new bounds reuse the program"


def test_compiled_body_runs_fused_kernels():
    def f(x):
        return lax.fori_loop(0, 50, lambda i, c: fnp.tanh(c * 1.01 + 0.1) * 0.9, x)

    program = fg.jit(f).lower(X_POS)
    body = program.jaxpr.eqns[0].params["body"]
    assert body.program is not None, "the loop body is compiled with the program"
    assert any(e.prim.name.startswith("fused") for e in body.program.jaxpr.eqns), str(body.program)
    expected = X_POS.copy()
    for _ in range(50):
        expected = np.tanh(expected * 1.01 + 0.1) * 0.9
    check_close(fg.jit(f)(X_POS), expected, atol=1e-5)


# ----------------------------------------------------------------------------- reverse mode through while_loop


def _long_loop(x, n, checkpoints):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.sin(c[1]) * 0.5 + c[1] * 0.5),
                          (0, x), checkpoints=checkpoints)[1]


def _peak_bytes(f, *args):
    tracemalloc.start()
    try:
        f(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_checkpointed_while_loop_memory_grows_like_sqrt_trip_count():
    n, size = 10_000, 1000   # a carry of 4 KB
    x = fnp.array(np.linspace(0.1, 1.0, size, dtype=np.float32))
    carry_bytes = 4 * size
    grad_all = fg.grad(lambda v: fnp.sum(_long_loop(v, n, None)))
    grad_ckpt = fg.grad(lambda v: fnp.sum(_long_loop(v, n, 100)))   # trip count known: binomial schedule
    # under jit the trip count is known only at run time: online thinning, then the binomial schedule
    grad_online = fg.jit(fg.grad(lambda v, m: fnp.sum(_long_loop(v, m, 100))))
    expected = grad_all(x)
    check_close(grad_ckpt(x), expected, atol=1e-6, rtol=1e-5, what="checkpointed vs stored carries")
    check_close(grad_online(x, n), expected, atol=1e-6, rtol=1e-5, what="jit, online checkpoints")
    kept_all = _peak_bytes(grad_all, x) / carry_bytes
    kept_ckpt = _peak_bytes(grad_ckpt, x) / carry_bytes
    kept_online = _peak_bytes(grad_online, x, n) / carry_bytes
    assert kept_all > n / 2, f"storing every carry should hold ~{n} carries, measured {kept_all:.0f}"
    assert kept_ckpt < 1.5 * np.sqrt(n), f"checkpoints=100 held {kept_ckpt:.0f} carries for n={n}"
    assert kept_online < 3 * np.sqrt(n), f"checkpoints=100 under jit held {kept_online:.0f} carries for n={n}"


def test_checkpoint_schedule_against_the_stored_carries():
    # Many trip counts around the schedules' strides and splits, where an off-by-one would show:
    # eagerly (trip count known: binomial schedule) and under jit (online thinning first).
    x = fnp.array([0.3, 0.8])
    f = lambda v, n, c: fnp.sum(_long_loop(v, n, c) ** 2)   # noqa: E731
    for k in (2, 3, 5):
        online = fg.jit(fg.grad(lambda v, n: f(v, n, k)))
        for n in (0, 1, 2, 3, 7, 8, 9, 33):
            expected = fg.grad(lambda v: f(v, n, None))(x)
            check_close(fg.grad(lambda v: f(v, n, k))(x), expected, atol=1e-6, what=f"n={n}, checkpoints={k}")
            check_close(online(x, n), expected, atol=1e-6, what=f"jit: n={n}, checkpoints={k}")


def test_second_reverse_derivative_errors():
    def loss(x):
        return fnp.sum(while_data_f(x, fnp.array(W)))

    second = fg.grad(lambda x: fnp.sum(fg.grad(loss)(x)))
    with pytest.raises(NotImplementedError, match="while_loop"):
        fg.jit(second)(X_POS)   # the trip count is unknown when the program is traced
    with pytest.raises(NotImplementedError, match="while_loop"):
        fg.grad(lambda x: fnp.sum(fg.grad(lambda v: fnp.sum(fori_checkpointed_f(v, fnp.array(W))))(x)))(X_POS)


# ----------------------------------------------------------------------------- errors


def test_body_changes_carry_shape_dtype_or_structure():
    with pytest.raises(TypeError, match=r"while_loop: body_fun's output has carry\[1\] of type f32\[2\], but it "
                                        r"must be f32\[3\]"):
        lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1][:2]), (0, fnp.ones(3)))
    with pytest.raises(TypeError, match=r"scan: f's output carry has carry of type f32\[3\], but it must be i32"):
        lax.scan(lambda c, x: (x * 1.0, x), 0, fnp.ones((2, 3)))
    with pytest.raises(TypeError, match=r"has structure .* but it must be"):
        lax.fori_loop(0, 2, lambda i, c: (c, c), fnp.ones(3))
    with pytest.raises(TypeError, match=r"carry\['b'\] of type f32\[3\], but it must be i32\[3\]"):
        lax.while_loop(lambda c: False, lambda c: {"a": c["a"], "b": c["b"] * 0.5},
                       {"a": fnp.ones(2), "b": fnp.arange(3)})


def test_predicates_must_be_boolean_scalars():
    with pytest.raises(TypeError, match=r"cond: the predicate must return a boolean scalar, got i32\[\]"):
        lax.cond(fnp.array(1), lambda: 1.0, lambda: 2.0)
    with pytest.raises(TypeError, match=r"got bool\[3\]"):
        lax.cond(fnp.ones(3) > 0, lambda: 1.0, lambda: 2.0)
    with pytest.raises(TypeError, match=r"while_loop: cond_fun must return a boolean scalar, got f32\[\]"):
        lax.while_loop(lambda c: c * 1.0, lambda c: c, 1.0)
    with pytest.raises(TypeError, match=r"switch: the index must be an integer scalar"):
        lax.switch(1.5, [lambda: 1.0], )


def test_branches_must_agree():
    with pytest.raises(TypeError, match=r"cond: true_fun's output has output of type f32\[2\], but it must be "
                                        r"f32\[3\]"):
        lax.cond(True, lambda x: x[:2], lambda x: x, fnp.ones(3))
    with pytest.raises(TypeError, match=r"branches\[1\]'s output has structure"):
        lax.switch(0, [lambda x: x, lambda x: (x, x)], fnp.ones(3))
    with pytest.raises(ValueError, match="switch: branches must be a non-empty sequence"):
        lax.switch(0, [], fnp.ones(3))


def test_scan_leading_lengths_and_arguments():
    with pytest.raises(ValueError, match=r"same leading length, got xs\[0\]: 3, xs\[1\]: 4"):
        lax.scan(lambda c, x: (c, x[0]), 0.0, (fnp.ones(3), fnp.ones(4)))
    with pytest.raises(ValueError, match=r"length=5 but xs has leading length 3"):
        lax.scan(lambda c, x: (c, x), 0.0, fnp.ones(3), length=5)
    with pytest.raises(ValueError, match="give length="):
        lax.scan(lambda c, x: (c, x), 0.0, None)
    with pytest.raises(TypeError, match=r"scan: f must return a pair \(carry, y\)"):
        lax.scan(lambda c, x: c, 0.0, fnp.ones(3))
    with pytest.raises(ValueError, match="checkpoints must be None"):
        lax.while_loop(lambda c: False, lambda c: c, 1.0, checkpoints=1)
    with pytest.raises(TypeError, match="fori_loop: upper must be an integer scalar"):
        lax.fori_loop(0, 2.5, lambda i, c: c, 1.0)


# ----------------------------------------------------------------------------- device arrays


def test_loops_run_on_device_arrays():
    import sys
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from gpu_standin import FakeDeviceArray, gpu_standin

    def loss(x, w):   # (no indexing: getitem has no GPU implementation yet)
        h, s, ys = scan_f(False)(x, w)
        c = lax.cond(fnp.sum(x) > 0, lambda a: fnp.sin(a) * w, lambda a: fnp.cos(a), x)
        return fnp.sum(while_fixed_f(h, w)) + s + fnp.sum(ys) + fnp.sum(c)

    def loss_ref(x):
        h, s, ys = scan_ref(False)(x, W)
        c = np.sin(x) * W if np.sum(x) > 0 else np.cos(x)
        return np.sum(while_fixed_ref(h, W)) + s + np.sum(ys) + np.sum(c)

    with gpu_standin(use_triton=False):
        x, w = fg.device_put(fnp.array(X_POS), "gpu"), fg.device_put(fnp.array(W), "gpu")
        for f in (loss, fg.jit(loss)):
            out = f(x, w)
            assert isinstance(out._value, FakeDeviceArray), "the loops stay on the device"
            check_close(fg.device_put(out, "cpu"), loss_ref(X_POS), atol=1e-5, rtol=1e-5)
        g = fg.grad(loss)(x, w)
        assert isinstance(g._value, FakeDeviceArray)
        check_close(fg.device_put(g, "cpu"), _fd_grad(loss_ref, X_POS), atol=1e-4, rtol=1e-4)


def test_primitive_shape_rule_checks_operands_against_the_body():
    def f(x):
        h, s, ys = scan_f(False)(x, fnp.ones(3))
        return h
    eqn = fg.make_jaxpr(f)(X_POS.astype(np.float32)).eqns[-1]
    assert eqn.prim is lax.scan_p, str(eqn.prim)
    bad = fg.jit(lambda x, w: lax.scan_p.bind(x, x[:2], fnp.zeros(()), w, **eqn.params))
    with pytest.raises(TypeError, match=r"scan: the operands \(f32\[3\], f32\[2\], f32\[\], f32\[\]\) do not match"):
        bad(X_POS.astype(np.float32), np.ones(3, np.float32))


def test_a_loop_returning_its_input_does_not_hand_out_reused_memory():
    # Zero trips return the initial carry, which here is a buffer the compiled program reuses on its
    # next call: the result must be its own memory, or the second call would change the first result.
    def init(x):   # a fused kernel, whose output buffer the program plans and reuses
        return fnp.sin(x) * 2.0 + 1.0

    f = fg.jit(lambda x, n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + 1.0), (0, init(x)))[1])
    first = f(X_POS, 0)
    first_copy = np.array(first)
    second = f(X_POS + 1.0, 0)
    check_close(first, first_copy, atol=0, rtol=0, what="the first result after a second call")
    check_close(second, np.sin(X_POS + 1.0) * 2.0 + 1.0, atol=1e-6)
    g = fg.jit(lambda x: lax.cond(True, lambda v: v, lambda v: v + 1.0, init(x)))
    a = g(X_POS)
    a_copy = np.array(a)
    g(X_POS * 0.0)
    check_close(a, a_copy, atol=0, rtol=0, what="a cond returning its operand")


def test_nested_loops_compile_and_differentiate(x64):
    # A fori_loop and a cond inside a scan body: every level compiles, differentiates and batches.
    def f(x):
        def step(h, t):
            h = lax.cond(fnp.sum(h) > t, lambda a: fnp.tanh(a * 1.5), lambda a: fnp.sin(a) * 2, h)
            h = lax.fori_loop(0, 2, lambda i, c: c * 0.9 + fnp.cos(c), h)
            return h, fnp.sum(h)
        h, ys = lax.scan(step, x, fnp.linspace(-1.0, 1.0, 4))
        return fnp.sum(h) + fnp.sum(ys ** 2)

    def ref(x):
        h, total = x, 0.0
        for t in np.linspace(-1.0, 1.0, 4):
            h = np.tanh(h * 1.5) if np.sum(h) > t else np.sin(h) * 2
            for _ in range(2):
                h = h * 0.9 + np.cos(h)
            total += np.sum(h) ** 2
        return np.sum(h) + total

    check_close(fg.jit(f)(X_POS), ref(X_POS), atol=1e-12, rtol=1e-12)
    inner = fg.jit(f).lower(X_POS).jaxpr.eqns
    scan_eqn = next(e for e in inner if e.prim is lax.scan_p)
    nested = [e for e in scan_eqn.params["body"].program.jaxpr.eqns if e.prim in (lax.cond_p, lax.scan_p)]
    assert nested and all(all(b.program is not None for b in (e.params.get("branches") or (e.params["body"],)))
                          for e in nested), "nested loop bodies and branches are compiled too"
    check_close(fg.jit(fg.grad(f))(X_POS), _fd_grad(ref, X_POS), atol=1e-6, rtol=1e-6, what="jit(grad)")
    check_close(fg.vmap(f)(X_BATCH), np.array([ref(x) for x in X_BATCH]), atol=1e-12, rtol=1e-12, what="vmap")
