"""Triton row kernels (softmax, log_softmax, cross-entropy, layer norm) vs
float64 numpy references, in Triton's interpreter on the CPU.

TRITON_INTERPRET=1 is set below, before triton or the kernel module is
imported. Shapes are small and ragged: column counts that are not multiples
of the block (and a forced 16-column block, so rows are swept in several
blocks with a masked tail). The sm_90 compile check runs in a subprocess
without TRITON_INTERPRET and asserts shared memory within the H100's limit.

Accuracy rule: the kernels compute in float32 and round once when storing,
so each output must be within one unit in the last place of its dtype of
the float64 reference (computed from the same rounded inputs), plus a
float32-sized slack.
"""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede any triton/kernel import

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton==3.9.0)")

from funcgrad.backends.gpu import triton_kernels as tk  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SMEM_LIMIT = 232448  # H100 / sm_90: 227 KB of shared memory per block

if not isinstance(tk._softmax_fwd, triton.runtime.interpreter.InterpretedFunction):
    pytest.skip("triton_kernels was imported before TRITON_INTERPRET=1 was set (another test module imported "
                "it first); run this module on its own", allow_module_level=True)


# --------------------------------------------------------------------------
# dtypes: "bfloat16" is stored as uint16 bits
# --------------------------------------------------------------------------

DTYPES = ["float32", "float16", "bfloat16"]


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, round to nearest even (finite inputs)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_dtype(x32: np.ndarray, dtype: str) -> np.ndarray:
    return bf16_bits(x32) if dtype == "bfloat16" else x32.astype(dtype)


def to_f64(x: np.ndarray) -> np.ndarray:
    return bf16_value(x).astype(np.float64) if x.dtype == np.uint16 else x.astype(np.float64)


def ulp(ref: np.ndarray, dtype: str) -> np.ndarray:
    """Spacing of the dtype's grid at |ref| (subnormals: the smallest spacing)."""
    mant, min_exp = {"float32": (23, -126), "float16": (10, -14), "bfloat16": (7, -126)}[dtype]
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.abs(ref)))
    e = np.maximum(np.where(np.isfinite(e), e, min_exp), min_exp)
    return 2.0 ** (e - mant)


def assert_within_ulp(got, ref, dtype, *, slack=2e-6, name=""):
    """|got - ref| <= 1 ulp(dtype) + slack * max|ref| (float32 arithmetic)."""
    got = to_f64(np.asarray(got))
    assert got.shape == ref.shape, name
    tol = ulp(ref, dtype) + slack * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    err = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(err - tol), err.shape) if err.size else None
    assert np.all(err <= tol), (f"{name} {dtype}: err {err[worst]:.3e} > tol {tol[worst]:.3e} at {worst} "
                                f"(got {got[worst]}, want {ref[worst]})")


# --------------------------------------------------------------------------
# float64 references
# --------------------------------------------------------------------------


def softmax_ref(x):
    z = x - x.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def log_softmax_ref(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def layer_norm_ref(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    return xhat * w + b, mean[..., 0], rstd[..., 0], xhat


# (lead dims, C): 1 column, below/at/above one 16-block, several blocks with a tail
SHAPES = [((3,), 1), ((2, 3), 7), ((5,), 16), ((4,), 37), ((3,), 130)]
CONFIGS = {"default": None, "block16": tk.RowConfig(16, 4)}


def make(rng, shape, dtype, scale=3.0):
    return to_dtype((scale * rng.standard_normal(shape)).astype(np.float32), dtype)


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("lead,n_cols", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_log_softmax_forward_backward(dtype, lead, n_cols, cfg):
    rng = np.random.default_rng(n_cols * 10 + len(lead))
    config = CONFIGS[cfg]
    x = make(rng, (*lead, n_cols), dtype)
    dy = make(rng, (*lead, n_cols), dtype, 1.0)
    x64, dy64 = to_f64(x), to_f64(dy)

    y = tk.softmax(x, config=config)
    ly = tk.log_softmax(x, config=config)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert_within_ulp(y, softmax_ref(x64), dtype, name="softmax")
    assert_within_ulp(ly, log_softmax_ref(x64), dtype, name="log_softmax")

    # backward at the kernel's own (rounded) outputs, as the primitive does
    y64, ly64 = to_f64(y), to_f64(ly)
    want = y64 * (dy64 - (dy64 * y64).sum(-1, keepdims=True))
    assert_within_ulp(tk.softmax_backward(y, dy, config=config), want, dtype, slack=4e-6, name="softmax_bwd")
    want = dy64 - np.exp(ly64) * dy64.sum(-1, keepdims=True)
    assert_within_ulp(tk.log_softmax_backward(ly, dy, config=config), want, dtype, slack=4e-6,
                      name="log_softmax_bwd")


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("n_rows,n_cols", [(1, 1), (3, 7), (5, 37), (2, 130)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_softmax_cross_entropy(dtype, n_rows, n_cols, cfg, label_dtype):
    rng = np.random.default_rng(n_rows * 100 + n_cols)
    config = CONFIGS[cfg]
    logits = make(rng, (n_rows, n_cols), dtype)
    labels = rng.integers(0, n_cols, n_rows).astype(label_dtype)
    labels[-1] = n_cols - 1  # the last column (the masked tail block) is a label
    g = rng.standard_normal(n_rows).astype(np.float32)
    x64 = to_f64(logits)
    lse_ref = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1)) + x64.max(-1)
    loss_ref = lse_ref - x64[np.arange(n_rows), labels]

    loss, lse = tk.softmax_cross_entropy(logits, labels, config=config)
    assert loss.dtype == lse.dtype == np.float32
    assert_within_ulp(lse, lse_ref, "float32", slack=1e-6, name="lse")
    assert_within_ulp(loss, loss_ref, "float32", slack=1e-6, name="loss")

    d = tk.softmax_cross_entropy_backward(logits, labels, lse, g, config=config)
    assert d.dtype == logits.dtype
    want = g[:, None] * (softmax_ref(x64) - np.eye(n_cols)[labels])
    assert_within_ulp(d, want, dtype, slack=2e-6, name="dlogits")


def test_cross_entropy_rejects_out_of_range_labels():
    logits = np.zeros((2, 5), np.float32)
    with pytest.raises(ValueError, match=r"labels must be in \[0, 5\)"):
        tk.softmax_cross_entropy(logits, np.array([0, 5], np.int32))
    with pytest.raises(ValueError, match="labels must be in"):
        tk.softmax_cross_entropy_backward(logits, np.array([-1, 0], np.int64), np.zeros(2, np.float32),
                                          np.ones(2, np.float32))


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("lead,n_cols", [((1,), 1), ((2, 3), 7), ((5,), 37), ((40,), 20), ((3,), 130)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_forward_backward(dtype, lead, n_cols, cfg):
    rng = np.random.default_rng(n_cols + 7 * len(lead))
    config = CONFIGS[cfg]
    # an offset mean: the two-pass variance must not cancel
    x = to_dtype((rng.standard_normal((*lead, n_cols)) * 2 + 5).astype(np.float32), dtype)
    w = make(rng, (n_cols,), dtype, 1.0)
    b = make(rng, (n_cols,), dtype, 1.0)
    dy = make(rng, (*lead, n_cols), dtype, 1.0)
    x64, w64, b64, dy64 = (to_f64(a) for a in (x, w, b, dy))
    eps = 1e-5

    y, mean, rstd = tk.layer_norm(x, w, b, eps=eps, config=config)
    y_ref, mean_ref, rstd_ref, xhat = layer_norm_ref(x64, w64, b64, eps)
    assert y.dtype == x.dtype and mean.shape == lead and rstd.dtype == np.float32
    assert_within_ulp(mean, mean_ref, "float32", slack=1e-6, name="mean")
    np.testing.assert_allclose(rstd, rstd_ref, rtol=1e-5, err_msg="rstd")
    assert_within_ulp(y, y_ref, dtype, slack=1e-5, name="y")

    dx, dw, db = tk.layer_norm_backward(x, w, mean, rstd, dy, config=config)
    wdy = w64 * dy64
    dx_ref = rstd_ref[..., None] * (wdy - wdy.mean(-1, keepdims=True)
                                    - xhat * (wdy * xhat).mean(-1, keepdims=True))
    rows = int(np.prod(lead))
    assert dx.dtype == x.dtype and dw.dtype == w.dtype and db.shape == (n_cols,)
    assert_within_ulp(dx, dx_ref, dtype, slack=2e-5, name="dx")
    assert_within_ulp(dw, (dy64 * xhat).reshape(rows, n_cols).sum(0), dtype, slack=2e-5, name="dweight")
    assert_within_ulp(db, dy64.reshape(rows, n_cols).sum(0), dtype, slack=2e-6, name="dbias")


def test_layer_norm_weight_grad_over_many_row_groups():
    """Several dW/dB row groups (16-row blocks), the last one partial."""
    rng = np.random.default_rng(0)
    n_rows, n_cols = 50, 5
    x = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    w, b = np.ones(n_cols, np.float32), np.zeros(n_cols, np.float32)
    dy = rng.standard_normal((n_rows, n_cols)).astype(np.float32)
    assert tk._dwdb_groups(n_rows) == (4, 16)
    _, mean, rstd = tk.layer_norm(x, w, b)
    _, dw, db = tk.layer_norm_backward(x, w, mean, rstd, dy)
    _, _, _, xhat = layer_norm_ref(x.astype(np.float64), 1.0, 0.0, 1e-5)
    np.testing.assert_allclose(dw, (dy * xhat).sum(0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(db, dy.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)


def test_softmax_of_large_logits_does_not_overflow():
    x = np.array([[1e4, 1e4 - 1.0, -1e4]], np.float32)
    y = tk.softmax(x)
    np.testing.assert_allclose(y, softmax_ref(x.astype(np.float64)), rtol=1e-6, atol=1e-30)
    loss, lse = tk.softmax_cross_entropy(x, np.array([2]))
    assert np.isfinite(loss).all() and abs(float(lse[0]) - (1e4 + np.log1p(np.exp(-1.0)))) < 1e-3


def test_wrappers_reject_bad_input():
    with pytest.raises(TypeError, match="float32, float16, bfloat16 or uint16"):
        tk.softmax(np.zeros((2, 3), np.float64))
    with pytest.raises(TypeError, match="share one dtype"):
        tk.layer_norm(np.zeros((2, 3), np.float32), np.ones(3, np.float16), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"weight and bias must be \(3,\)"):
        tk.layer_norm(np.zeros((2, 3), np.float32), np.ones(4, np.float32), np.zeros(4, np.float32))


def test_row_config_blocks():
    assert tk.row_config(1) == tk.RowConfig(16, 4)
    assert tk.row_config(1000).BLOCK_C == 1024
    assert tk.row_config(100_000).BLOCK_C == tk.MAX_BLOCK_C
    assert tk.row_config(4096).num_warps == 16


# --------------------------------------------------------------------------
# sm_90 compile check (CPU only, subprocess without TRITON_INTERPRET)
# --------------------------------------------------------------------------

_COMPILE_SCRIPT = """
import json, sys
from funcgrad.backends.gpu import triton_kernels as tk
out = {dt: tk.compile_report(int(sys.argv[1]), dt, arch=90) for dt in ("float16", "bfloat16", "float32")}
print("REPORT" + json.dumps(out))
"""


def test_kernels_compile_for_sm90_within_shared_memory():
    """Every kernel with the wrappers' largest config (4096-column blocks,
    16 warps) compiles for cuda:sm_90 with Triton's bundled ptxas, within the
    H100's shared memory and without register spills."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, "4096"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    reports = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("REPORT"))[len("REPORT"):])
    problems = []
    for dtype, report in reports.items():
        assert set(report) == set(tk.KERNELS)
        for name, r in report.items():
            print(f"sm_90 {dtype:8s} {name:20s} shared={r['shared']:5d} B regs={r['n_regs']} "
                  f"spills={r['spill_stores']}/{r['spill_loads']}")
            if r["shared"] > SMEM_LIMIT or (r["spill_stores"] or 0) > 0:
                problems.append((dtype, name, r["shared"], r["spill_stores"]))
    assert not problems, f"over shared memory or spilling: {problems}"
