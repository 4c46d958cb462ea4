"""The CPU compiler's ``w + alpha * (a @ b)`` computed in the output's buffer (``funcgrad/backends/cpu/gemm_update.py``):
where it applies, where it must not, and its results against float64 numpy and the unfused program."""
import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from conftest import config_set


def _prims(f, *args) -> list[str]:
    return [e.prim.name for e in f.lower(*args).jaxpr.eqns]


def _arrays(seed=0, m=6, k=5, n=4, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in ((m, n), (m, k), (k, n))]


CASES = {
    "w - s * (a @ b)": (lambda w, a, b: w - 0.05 * (a @ b), lambda w, a, b: w - 0.05 * (a @ b)),
    "w + (a @ b) * s": (lambda w, a, b: w + (a @ b) * 3.0, lambda w, a, b: w + (a @ b) * 3.0),
    "(a @ b) + w": (lambda w, a, b: (a @ b) + w, lambda w, a, b: (a @ b) + w),
    "w - a @ b": (lambda w, a, b: w - a @ b, lambda w, a, b: w - a @ b),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rewritten_and_matches_float64(case):
    f, ref = CASES[case]
    w, a, b = _arrays()
    jf = fg.jit(f)
    args = [fnp.asarray(v) for v in (w, a, b)]
    assert "matmul_update" in _prims(jf, *args)
    assert "matmul" not in _prims(jf, *args)
    got = np.asarray(jf(*args))
    want = ref(*[v.astype(np.float64) for v in (w, a, b)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert got.dtype == np.float32


def test_transposed_operands_and_training_step_shape():
    """The gradient of a weight: ``w - lr * (h.T @ d)``, h.T a transposed view (Fortran-ordered)."""
    rng = np.random.default_rng(1)
    w, h, d = (rng.standard_normal(s).astype(np.float32) for s in ((7, 3), (9, 7), (9, 3)))
    jf = fg.jit(lambda w, h, d: w - 0.1 * (h.T @ d.T.T))
    args = [fnp.asarray(v) for v in (w, h, d)]
    assert "matmul_update" in _prims(jf, *args)
    for _ in range(2):   # the second call writes into the recycled output buffer
        got = np.asarray(jf(*args))
        np.testing.assert_allclose(got, w.astype(np.float64) - 0.1 * (h.astype(np.float64).T @ d), rtol=1e-5,
                                   atol=1e-5)
    np.testing.assert_array_equal(np.asarray(args[0]), w)   # the addend is copied, never written


def test_float64(x64):
    w, a, b = _arrays(2, dtype=np.float64)
    jf = fg.jit(lambda w, a, b: w - 0.5 * (a @ b))
    args = [fnp.asarray(v) for v in (w, a, b)]
    assert "matmul_update" in _prims(jf, *args)
    got = np.asarray(jf(*args))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, w - 0.5 * (a @ b), rtol=1e-12, atol=1e-12)


def test_empty_inner_dimension():
    w, a, b = np.ones((3, 4), np.float32), np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    jf = fg.jit(lambda w, a, b: w - 2.0 * (a @ b))
    np.testing.assert_array_equal(np.asarray(jf(*[fnp.asarray(v) for v in (w, a, b)])), w)


NOT_REWRITTEN = {
    # the product is used twice: it must be kept
    "product used twice": lambda w, a, b: (w - 0.1 * (a @ b), a @ b),
    # a broadcast addend (a bias): GEMM's C has the product's shape
    "broadcast addend": lambda w, a, b: w[0] - 0.1 * (a @ b),
    # the product minus w: not an addition into w
    "product minus w": lambda w, a, b: 0.1 * (a @ b) - w,
    # the scale is an array, not a scalar literal
    "array scale": lambda w, a, b: w - w * (a @ b),
}


@pytest.mark.parametrize("case", sorted(NOT_REWRITTEN))
def test_left_alone_where_it_does_not_apply(case):
    f = NOT_REWRITTEN[case]
    w, a, b = _arrays(3)
    jf = fg.jit(f)
    args = [fnp.asarray(v) for v in (w, a, b)]
    names = _prims(jf, *args)
    if case != "product minus w":
        assert "matmul_update" not in names
    got = jf(*args)
    want = f(*[v.astype(np.float64) for v in (w, a, b)])
    for g, r in zip(fg.tree_util.tree_leaves(got), fg.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), r, rtol=1e-5, atol=1e-5)


def test_integer_products_are_left_alone():
    w, a, b = (np.arange(np.prod(s)).reshape(s).astype(np.int32) for s in ((2, 6), (2, 6), (6, 6)))
    jf = fg.jit(lambda w, a, b: w - 2 * (a @ b))
    args = [fnp.asarray(v) for v in (w, a, b)]
    assert "matmul_update" not in _prims(jf, *args)
    np.testing.assert_array_equal(np.asarray(jf(*args)), w - 2 * (a @ b))


def test_gradient_through_the_rewritten_program(x64):
    """jit(grad) of a loss whose step contains the pattern: checked against finite differences."""
    w, a, b = (v.astype(np.float64) for v in _arrays(4))

    def f(w, a, b):
        return fnp.sum(fnp.tanh(w - 0.3 * (a @ b)) ** 2)

    g = fg.jit(fg.grad(f, argnums=(0, 1)))
    got = g(fnp.asarray(w), fnp.asarray(a), fnp.asarray(b))
    eps = 1e-6
    for k, (x, gx) in enumerate(zip((w, a), got)):
        num = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[idx] += eps
            xm[idx] -= eps
            args_p = [xp if j == k else v for j, v in enumerate((w, a, b))]
            args_m = [xm if j == k else v for j, v in enumerate((w, a, b))]
            num[idx] = (np.sum(np.tanh(args_p[0] - 0.3 * args_p[1] @ args_p[2]) ** 2)
                        - np.sum(np.tanh(args_m[0] - 0.3 * args_m[1] @ args_m[2]) ** 2)) / (2 * eps)
        np.testing.assert_allclose(np.asarray(gx), num, rtol=1e-6, atol=1e-8)


def test_loop_bodies_keep_their_products():
    """Inside a loop body the product stays a matmul (the loop compiler runs bodies as whole loops)."""
    from funcgrad import lax
    w, a, b = _arrays(5, m=4, k=4, n=4)
    jf = fg.jit(lambda w, a, b: lax.fori_loop(0, 3, lambda i, v: v - 0.1 * (v @ b), w))
    args = [fnp.asarray(v) for v in (w, a, b)]
    body = next(e for e in jf.lower(*args).jaxpr.eqns if "body" in e.params).params["body"]
    assert [e.prim.name for e in body.program.jaxpr.eqns].count("matmul") == 1
    want = w.astype(np.float64)
    for _ in range(3):
        want = want - 0.1 * (want @ b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(jf(*args)), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_equal_to_the_unfused_program(case):
    """The update rounds as written: bit for bit the program run primitive by primitive (no fusion)."""
    f, _ = CASES[case]
    args = [fnp.asarray(v) for v in _arrays(6, m=33, k=17, n=9)]
    fused = np.asarray(fg.jit(f)(*args))
    with config_set("jit_fusion", False):
        plain = np.asarray(fg.jit(f)(*args))
    np.testing.assert_array_equal(fused, plain)
