"""NaN and inf follow JAX (and PyTorch): they propagate instead of vanishing.

Every expected value comes from a float64 numpy reference that spells out
JAX's definition of the function (max-based activations propagate NaN like
``np.maximum``; ``logsumexp`` shifts by 0 where the max is not finite;
softmax shifts by the raw max). Each case runs eagerly and under ``jit``
with fusion on and off. FlashAttention is checked against the materialised
softmax's semantics (``impl='naive'``) in a float64 reference, and
``debug_nans`` under jit must name what eager mode names.
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # as tests/test_triton_*.py: before any triton import

import inspect  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import config_set  # noqa: E402

import funcgrad as fg  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad import nn  # noqa: E402

THIS_FILE = os.path.basename(__file__)
NAN, INF = np.nan, np.inf

MODES = ["eager", "jit", "jit_unfused"]


def run(mode, f, *args):
    """f(*args) eagerly, or jitted with fusion on or off."""
    if mode == "eager":
        return f(*args)
    with config_set("jit_fusion", mode == "jit"):
        return fg.jit(f)(*args)


def assert_same(got, expected, rtol=1e-5, atol=1e-6):
    """Values match, and NaN and +-inf sit exactly where the reference has them."""
    got = np.asarray(got, dtype=np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg="NaN positions differ")
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(expected), err_msg="+inf positions differ")
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected), err_msg="-inf positions differ")
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=rtol, atol=atol)


# ------------------------------------------------------- float64 references (JAX's definitions)

def _ref_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _ref_gelu(x):   # jax.nn.gelu(approximate=True): x * 0.5 (1 + tanh(...)); -inf * 0 = NaN
    return x * 0.5 * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _ref_logsumexp(x, axis=-1):   # jax.nn.logsumexp: shift by 0 where the max is not finite
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m, axis=axis)


def _ref_softmax(x, axis=-1):     # jax.nn.softmax: shift by the raw max (+inf or all -inf -> NaN)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _ref_log_softmax(x, axis=-1):
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


VALUES = np.array([NAN, -1.5, 0.0, 2.0, INF, -INF, 0.5, -3.0], np.float32)
ROWS = np.array([[1.0, INF, 0.0, 2.0, -1.0],       # +inf entry
                 [-INF, -INF, -INF, -INF, -INF],   # only -inf
                 [0.0, -INF, 1.0, -INF, 3.0],      # some -inf: finite
                 [1.0, 2.0, 3.0, 4.0, NAN],        # NaN last (after the running max)
                 [INF, INF, 0.0, 0.0, 1.0],
                 [INF, -INF, 0.0, 1.0, NAN],
                 [0.5, -0.25, 2.0, 1.0, -1.0]], np.float32)

ELEMENTWISE = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0.0)),
    "leaky_relu": (nn.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
    "softplus": (nn.softplus, lambda x: np.logaddexp(x, 0.0)),
    "sigmoid": (nn.sigmoid, _ref_sigmoid),
    "silu": (nn.silu, lambda x: x * _ref_sigmoid(x)),
    "gelu": (nn.gelu, _ref_gelu),
    "tanh": (nn.tanh, np.tanh),
    "maximum": (lambda x: fnp.maximum(x, 0.25), lambda x: np.maximum(x, 0.25)),
    "minimum": (lambda x: fnp.minimum(0.25, x), lambda x: np.minimum(0.25, x)),
    "clip": (lambda x: fnp.clip(x, -1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0)),
    # A chain, so that jit fuses several max/min ops into one generated kernel.
    "relu_chain": (lambda x: nn.relu(x * 2.0) - fnp.minimum(x, 0.0) + 1.0,
                   lambda x: np.maximum(x * 2.0, 0.0) - np.minimum(x, 0.0) + 1.0),
}

ROWWISE = {
    "max": (lambda x: fnp.max(x, axis=1), lambda x: np.max(x, axis=1)),
    "min": (lambda x: fnp.min(x + 1.0, axis=1), lambda x: np.min(x + 1.0, axis=1)),
    "nn.logsumexp": (lambda x: nn.logsumexp(x, axis=-1), _ref_logsumexp),
    "nn.logsumexp_axis0": (lambda x: nn.logsumexp(x.T, axis=0), _ref_logsumexp),
    "nn.logsumexp_tuple": (lambda x: nn.logsumexp(x, axis=(1,)), _ref_logsumexp),
    "fnp.logsumexp": (lambda x: fnp.logsumexp(x, axis=1), _ref_logsumexp),
    "softmax": (nn.softmax, _ref_softmax),
    "softmax_tuple": (lambda x: nn.softmax(x, axis=(1,)), _ref_softmax),
    "log_softmax": (nn.log_softmax, _ref_log_softmax),
    "log_softmax_tuple": (lambda x: nn.log_softmax(x, axis=(1,)), _ref_log_softmax),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_propagates_nan_and_inf(name, mode):
    f, ref = ELEMENTWISE[name]
    with np.errstate(all="ignore"):
        expected = ref(VALUES.astype(np.float64))
        got = run(mode, f, fnp.asarray(VALUES))
    assert_same(got, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(ROWWISE))
def test_rowwise_reductions_follow_jax(name, mode):
    f, ref = ROWWISE[name]
    with np.errstate(all="ignore"):
        expected = ref(ROWS.astype(np.float64))
        got = run(mode, f, fnp.asarray(ROWS))
    assert_same(got, expected)


def test_logsumexp_infinities():
    got = np.asarray(nn.logsumexp(fnp.asarray([[1.0, INF, 2.0], [-INF, -INF, -INF], [-INF, 0.0, -INF]]), axis=-1))
    assert got[0] == INF and got[1] == -INF and got[2] == 0.0


def test_logsumexp_rows_kernel_parallel_and_float64():
    # Long rows take the parallel numba kernel; float64 its own compile.
    from funcgrad.backends.cpu import kernels_softmax as K
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = rng.normal(size=(512, 160)).astype(dtype)
        x[0, 7], x[1, :], x[2, 100] = INF, -INF, NAN
        x[3, ::3] = -INF
        out = np.empty(512, dtype)
        K._logsumexp_par(x, out)
        with np.errstate(all="ignore"):
            assert_same(out, _ref_logsumexp(x.astype(np.float64)), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_relu_gradient_at_nan_passes_the_cotangent():
    # Forward NaN; the derivative passes the cotangent through where x is not
    # <= 0 (NaN included), as PyTorch's relu backward does.
    x = VALUES.astype(np.float64)
    loss, g = fg.value_and_grad(lambda v: fnp.sum(nn.relu(v)))(fnp.asarray(VALUES))
    assert np.isnan(float(loss))
    assert_same(g, np.where(x <= 0, 0.0, 1.0))


@pytest.mark.parametrize("mode", MODES)
def test_max_gradient_is_nan_for_a_row_holding_nan(mode):
    # JAX: cotangent / (number of positions equal to the max) -> 0 / 0 in a NaN row.
    x = ROWS.astype(np.float64)
    m = np.max(x, axis=1, keepdims=True)
    hits = (x == m).astype(np.float64)
    with np.errstate(all="ignore"):
        expected = hits / hits.sum(axis=1, keepdims=True)
        got = run(mode, fg.grad(lambda v: fnp.sum(fnp.max(v, axis=1))), fnp.asarray(ROWS))
    assert_same(got, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["nn.logsumexp", "fnp.logsumexp"])
def test_logsumexp_gradient_follows_jax(name, mode):
    # JAX: d/dx = exp(x - logsumexp(x)): NaN at a +inf entry and 0 beside it, NaN for all -inf.
    f = ROWWISE[name][0]
    x = ROWS.astype(np.float64)
    with np.errstate(all="ignore"):
        expected = np.exp(x - _ref_logsumexp(x)[:, None])
        got = run(mode, fg.grad(lambda v: fnp.sum(f(v))), fnp.asarray(ROWS))
    assert_same(got, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axis", [-1, (1,)])
def test_softmax_gradient_is_nan_in_nan_rows(axis, mode):
    w = np.linspace(-1.0, 1.0, ROWS.size).reshape(ROWS.shape)
    with np.errstate(all="ignore"):
        y = _ref_softmax(ROWS.astype(np.float64))
        expected = y * (w - np.sum(w * y, axis=1, keepdims=True))
        got = run(mode, fg.grad(lambda v: fnp.sum(nn.softmax(v, axis=axis) * w)), fnp.asarray(ROWS))
    assert_same(got, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_argmax_argmin_pick_the_first_nan(mode):
    x = ROWS.astype(np.float64)
    got_max = run(mode, lambda v: fnp.argmax(v, axis=1), fnp.asarray(ROWS))
    got_min = run(mode, lambda v: fnp.argmin(v, axis=1), fnp.asarray(ROWS))
    np.testing.assert_array_equal(np.asarray(got_max), np.argmax(x, axis=1))
    np.testing.assert_array_equal(np.asarray(got_min), np.argmin(x, axis=1))


def test_max_pool_propagates_nan():
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    x[0, 0, 1, 1], x[0, 1, 3, 2] = NAN, INF
    got = nn.max_pool2d(fnp.asarray(x), 2)
    expected = x.astype(np.float64).reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))   # NaN wins, as np.max
    assert_same(got, expected)


def test_cross_entropy_with_infinite_logits():
    # loss = logsumexp(row) - row[label]: +inf elsewhere -> +inf; +inf at the label -> inf - inf = NaN.
    logits = np.array([[0.0, INF, 1.0], [INF, 0.0, 1.0], [1.0, 2.0, 3.0]], np.float32)
    labels = np.array([0, 0, 2])
    with np.errstate(all="ignore"):
        x = logits.astype(np.float64)
        expected = _ref_logsumexp(x) - x[np.arange(3), labels]
        got = nn.cross_entropy(fnp.asarray(logits), fnp.asarray(labels), reduction="none")
    assert_same(got, expected)


# ------------------------------------------------------------------ FlashAttention

def attention_reference(q, k, v, w, causal, scale):
    """Float64 forward and gradients of sum(attention * w) with the materialised
    softmax's semantics: shift by the row max or by 0 where it is not finite,
    rows with no visible key give 0; NaN wherever that arithmetic makes one.
    ``q k^T`` is taken in the inputs' float32, so it overflows where theirs does."""
    nq, nk = q.shape[-2], k.shape[-2]
    visible = np.arange(nk)[None, :] <= np.arange(nq)[:, None] + (nk - nq) if causal else np.ones((nq, nk), bool)
    has_key = visible.any(axis=1)[:, None]
    with np.errstate(all="ignore"):
        qk = (q @ np.swapaxes(k, -1, -2)).astype(np.float64)
        q, k, v, w = (a.astype(np.float64) for a in (q, k, v, w))
        s = np.where(visible, qk * scale, -INF)
        m = s.max(-1, keepdims=True)
        p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
        total = p.sum(-1, keepdims=True)
        prob = p / np.where(has_key, total, 1.0)
        o = prob @ v
        dp = w @ np.swapaxes(v, -1, -2)
        ds = np.where(visible, prob * (dp - (dp * prob).sum(-1, keepdims=True)), 0.0) * scale
        return o, ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(prob, -1, -2) @ w


def _attention_inputs(case, nq=6, nk=5, d=4):
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, n, d)).astype(np.float32) for n in (nq, nk, nk))
    scale = 0.5
    if case == "nan_q_row":
        q[0, 4] = NAN
    elif case == "nan_in_q":
        q[1, 2, 1] = NAN
    elif case == "inf_in_q":
        q[1, 5, 0] = INF
    elif case == "neg_inf_in_q":
        q[0, 3, 2] = -INF
    elif case == "all_scores_neg_inf":       # -inf times positive keys: every score of the row is -inf
        q[0, 5] = 0.0
        q[0, 5, 0] = -INF
        k[0, :, 0] = np.abs(k[0, :, 0]) + 0.1
    elif case == "nan_in_k":
        k[1, 2, 0] = NAN
    elif case == "scale_nan":
        scale = NAN
    elif case == "overflowing_scores":       # finite inputs whose scores overflow float32
        q[0, 1] *= 1e20
        k[0] *= 1e20
    elif case == "very_negative_scores":     # finite: every score far below exp's range (no NaN)
        q, k = -30 * np.abs(q), 30 * np.abs(k)
    return q, k, v, scale


FINITE_CASES = ("finite", "very_negative_scores")
ATTENTION_CASES = [*FINITE_CASES, "nan_q_row", "nan_in_q", "inf_in_q", "neg_inf_in_q", "all_scores_neg_inf",
                   "nan_in_k", "scale_nan", "overflowing_scores"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("impl", ["flash", "naive"])
@pytest.mark.parametrize("case", ATTENTION_CASES)
def test_attention_nan_and_inf_match_the_materialised_softmax(case, impl, causal):
    q, k, v, scale = _attention_inputs(case)
    w = np.random.default_rng(3).normal(size=q.shape).astype(np.float32)

    def loss(q, k, v):
        return fnp.sum(nn.dot_product_attention(q, k, v, causal=causal, scale=scale, impl=impl) * w)

    with np.errstate(all="ignore"):
        o = nn.dot_product_attention(fnp.asarray(q), fnp.asarray(k), fnp.asarray(v), causal=causal,
                                     scale=scale, impl=impl)
        grads = fg.grad(loss, argnums=(0, 1, 2))(fnp.asarray(q), fnp.asarray(k), fnp.asarray(v))
    expected = attention_reference(q, k, v, w, causal, scale)
    assert np.isnan(expected[0]).any() == (case not in FINITE_CASES)    # the case really makes NaN (or not)
    for got, want in zip((o, *grads), expected):
        assert_same(got, want, rtol=2e-4, atol=2e-5)


def test_flash_rows_without_keys_stay_zero_beside_nan_rows():
    # causal with Nq > Nk: the first row sees no key (output 0, gradient 0) even when another row is NaN.
    q, k, v, scale = _attention_inputs("nan_q_row")
    o = np.asarray(nn.dot_product_attention(fnp.asarray(q), fnp.asarray(k), fnp.asarray(v), causal=True,
                                            scale=scale, impl="flash"))
    assert np.isnan(o[0, 4]).all() and (o[:, 0] == 0).all() and np.isfinite(o[1]).all()


def test_flash_jit_matches_eager_on_nan_rows():
    q, k, v, scale = _attention_inputs("inf_in_q")
    f = lambda q, k, v: nn.dot_product_attention(q, k, v, scale=scale, impl="flash")   # noqa: E731
    with np.errstate(all="ignore"):
        eager = np.asarray(f(fnp.asarray(q), fnp.asarray(k), fnp.asarray(v)))
        jitted = fg.jit(f)(fnp.asarray(q), fnp.asarray(k), fnp.asarray(v))
    assert np.isnan(eager).any()
    assert_same(jitted, eager.astype(np.float64), rtol=0, atol=0)


TRITON_CASES = [("nan_q_row", False), ("nan_in_q", False), ("inf_in_q", True), ("neg_inf_in_q", True),
                ("all_scores_neg_inf", False), ("nan_in_k", True), ("scale_nan", False),
                ("very_negative_scores", True)]


@pytest.mark.parametrize("case, causal", TRITON_CASES)
def test_triton_flash_nan_and_inf_match_the_materialised_softmax(case, causal):
    triton = pytest.importorskip("triton", reason="triton is not installed")
    from funcgrad.backends.gpu import flash_attention as fa
    if not isinstance(fa._attn_fwd, triton.runtime.interpreter.InterpretedFunction):
        pytest.skip("the Triton kernels were imported before TRITON_INTERPRET=1 was set; run this module alone")
    q, k, v, scale = _attention_inputs(case, d=16)
    do = np.random.default_rng(3).normal(size=q.shape).astype(np.float32)
    with np.errstate(all="ignore"):
        o, lse = fa.flash_attention_forward(q, k, v, causal=causal, scale=scale)
        grads = fa.flash_attention_backward(q, k, v, o, lse, do, causal=causal, scale=scale)
    expected = attention_reference(q, k, v, do, causal, scale)
    assert np.isnan(expected[0]).any() == (case not in FINITE_CASES)
    for got, want in zip((o, *grads), expected):
        assert_same(got, want, rtol=1e-3, atol=1e-4)


def test_triton_row_kernels_follow_jax():
    triton = pytest.importorskip("triton", reason="triton is not installed")
    from funcgrad.backends.gpu import triton_kernels as tk
    if not isinstance(tk._softmax_fwd, triton.runtime.interpreter.InterpretedFunction):
        pytest.skip("the Triton kernels were imported before TRITON_INTERPRET=1 was set; run this module alone")
    labels = np.array([0, 1, 2, 4, 2, 2, 3])
    x = ROWS.astype(np.float64)
    with np.errstate(all="ignore"):
        assert_same(tk.softmax(ROWS), _ref_softmax(x))
        assert_same(tk.log_softmax(ROWS), _ref_log_softmax(x))
        loss, lse = tk.softmax_cross_entropy(ROWS, labels)
        assert_same(lse, _ref_logsumexp(x))
        assert_same(loss, _ref_logsumexp(x) - x[np.arange(len(x)), labels])


# ----------------------------------------------------------------------- debug_nans

def _sqrt_loss(x):
    y = fnp.sqrt(x)                                        # SQRT_LINE
    return fnp.sum(fnp.where(x > 0, y, 0.0))               # NaN in sqrt's backward pass at x = 0


def _line_of(marker):
    return next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if text.rstrip().endswith(marker) and "def " not in text)


@pytest.mark.parametrize("fusion", [True, False])
def test_debug_nans_under_jit_names_the_backward_pass(debug_nans, fusion):
    x = fnp.asarray([0.0, 1.0])
    messages = {}
    with np.errstate(all="ignore"), config_set("jit_fusion", fusion):
        for name, fn in (("eager", fg.grad(_sqrt_loss)), ("jit", fg.jit(fg.grad(_sqrt_loss)))):
            with pytest.raises(FloatingPointError) as info:
                call_line = inspect.currentframe().f_lineno + 1
                fn(x)
            messages[name] = str(info.value)
    msg = messages["jit"]
    assert "primitive 'mul'" in msg                                # the primitive that made the NaN
    assert "in the backward pass of 'sqrt'" in msg                 # the forward op it differentiates
    assert f"{THIS_FILE}:{_line_of('# SQRT_LINE')} (_sqrt_loss)" in msg   # ... and where the user wrote it
    assert f"{THIS_FILE}:{call_line}" in msg                       # the user's line that ran the backward pass
    assert msg == messages["eager"]                                # the same detail as eager mode


def test_debug_nans_under_jit_names_the_traced_line_not_the_call(debug_nans):
    def f(v):
        return fnp.log(v) * 2.0                                    # LOG_LINE

    jitted = fg.jit(f)
    with np.errstate(all="ignore"), pytest.raises(FloatingPointError) as info:
        jitted(fnp.asarray([-1.0, 1.0]))
    msg = str(info.value)
    assert "primitive 'log'" in msg and "backward pass" not in msg
    assert f"{THIS_FILE}:{_line_of('# LOG_LINE')} (f)" in msg
