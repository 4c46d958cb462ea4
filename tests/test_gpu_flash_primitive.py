"""The FlashAttention primitive on GPU arrays runs the Triton kernels.

No GPU here: GPU arrays are backed by the numpy stand-in for CuPy
(``tests/gpu_standin.py``) and the Triton kernels run in Triton's
interpreter (``TRITON_INTERPRET=1``, set below before triton is imported).
Forward and gradients go through ``flash_attention_p`` /
``flash_attention_bwd_p`` (``fg.vjp``), and are compared with a float64
numpy reference on the same values, in float32, float16 and bfloat16, for
head dims 16 to 256. Shapes are tiny: the interpreter is slow. The test marked
``gpu`` runs the same checks on CuPy arrays with compiled kernels, in a
subprocess (this file run as a script, without ``TRITON_INTERPRET``).

uint16 bfloat16 bit patterns (``mixed_precision.to_bfloat16``) are not
attention inputs: they are refused with an error naming the bfloat16 dtype.
"""
from __future__ import annotations

import os

# Run as a script (``--gpu``) this file is the real-GPU worker, which needs compiled kernels;
# under pytest, interpret on the CPU.
_GPU_WORKER = __name__ == "__main__"
if not _GPU_WORKER:
    os.environ["TRITON_INTERPRET"] = "1"  # must precede any triton/kernel import

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton==3.9.0)")

import funcgrad as fg  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad.backends.gpu import _detect  # noqa: E402
from funcgrad.backends.gpu import flash_attention as fa  # noqa: E402
from funcgrad.primitives.attention import flash_attention, flash_attention_bwd_p, flash_attention_p  # noqa: E402
from gpu_standin import FakeDeviceArray, gpu_standin  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]

if not _GPU_WORKER and not isinstance(fa._attn_fwd, triton.runtime.interpreter.InterpretedFunction):
    pytest.skip("flash_attention was imported before TRITON_INTERPRET=1 was set "
                "(another test module imported it first); run this module on its own",
                allow_module_level=True)


@pytest.fixture
def gpu(monkeypatch):
    """GPU arrays over the stand-in, Triton on; counts the kernel launches by entry point."""
    calls = {"forward": 0, "backward": 0}

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(fa, "flash_attention_forward", counting("forward", fa.flash_attention_forward))
    monkeypatch.setattr(fa, "flash_attention_backward", counting("backward", fa.flash_attention_backward))
    with gpu_standin(use_triton=True):
        yield calls


def reference(q, k, v, do, *, causal, scale):
    """Attention forward and backward in float64: (o, lse, dq, dk, dv); rows seeing no key give 0 and lse +inf."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    nq, nk = q.shape[-2], k.shape[-2]
    s = scale * q @ np.swapaxes(k, -1, -2)
    visible = np.arange(nk)[None, :] <= np.arange(nq)[:, None] + (nk - nq) if causal else np.ones((nq, nk), bool)
    s = np.where(visible, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    total = e.sum(-1, keepdims=True)
    empty = total == 0
    p = e / np.where(empty, 1, total)
    o = p @ v
    lse = np.where(empty, np.inf, m + np.log(np.where(empty, 1, total)))[..., 0]
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (do * o).sum(-1, keepdims=True))
    return o, lse, scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, dv


def _host(x):
    assert x.device == "gpu", x.device
    return np.asarray(fg.device_put(x, "cpu"))


# (Nq, Nk, causal, d): bottom-right causal alignment (Nq < Nk), rows that see no key (causal,
# Nq > Nk), no mask, a head dim padded up to 32 by the kernels, and the largest tiles (d = 128, 256).
CASES = [(5, 7, True, 16), (9, 4, True, 16), (6, 6, False, 24), (4, 6, True, 64), (6, 3, True, 128),
         (5, 6, False, 256), (7, 5, True, 256)]
CASE_IDS = [f"{c[0]}x{c[1]}-{'causal' if c[2] else 'full'}-d{c[3]}" for c in CASES]


BF16 = np.dtype(fnp.bfloat16)
DTYPES, DTYPE_IDS = [np.float32, np.float16, BF16], ["f32", "f16", "bf16"]
TOLERANCE = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 2e-3, BF16: 1.6e-2}


def check_flash_case(dtype, nq, nk, causal, d):
    """Forward and vjp of flash_attention on GPU arrays against the float64 reference."""
    rng = np.random.default_rng(nq * 100 + nk * 10 + d)
    host = [rng.standard_normal(s).astype(dtype) for s in ((2, nq, d), (2, nk, d), (2, nk, d), (2, nq, d))]
    q, k, v, do = (fg.device_put(fnp.array(x), "gpu") for x in host)
    scale = 0.7 / np.sqrt(d)

    o, vjp_fn = fg.vjp(lambda q_, k_, v_: flash_attention(q_, k_, v_, causal=causal, scale=scale), q, k, v)
    dq, dk, dv = vjp_fn(do)

    want_o, _, want_dq, want_dk, want_dv = reference(*host, causal=causal, scale=scale)
    # float32: the interpreter computes in float32 (~1e-6); on a GPU, tf32x3 dots (~1e-5).
    # float16: errors ~4e-4 of the largest value. bfloat16 (3 fewer significant bits than float16): 8 times
    # that (the outputs and P in the P @ V product are rounded to bfloat16; the lse the backward reads is float32).
    tol = TOLERANCE[np.dtype(dtype)]
    for name, got, want in (("o", o, want_o), ("dq", dq, want_dq), ("dk", dk, want_dk), ("dv", dv, want_dv)):
        got = _host(got)
        assert got.dtype == dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()),
                                   err_msg=f"{name} {np.dtype(dtype).name} {nq}x{nk} causal={causal} d={d}")
    if nq > nk and causal:   # the first Nq - Nk rows see no key: output and query gradient exactly 0
        assert not _host(o)[:, :nq - nk].any() and not _host(dq)[:, :nq - nk].any()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("nq,nk,causal,d", CASES, ids=CASE_IDS)
def test_flash_primitive_on_gpu_arrays_matches_float64_reference(gpu, dtype, nq, nk, causal, d):
    check_flash_case(dtype, nq, nk, causal, d)
    assert gpu == {"forward": 1, "backward": 1}   # both primitives ran the Triton kernels, nothing else did
    if dtype == np.float32 and d == 16:   # the device buffers are the stand-in's, not host arrays
        q = fg.device_put(fnp.ones((1, 2, d)), "gpu")
        assert isinstance(flash_attention(q, q, q, causal=causal, scale=1.0)._value, FakeDeviceArray)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_flash_primitive_outputs_lse_on_gpu(gpu, dtype):
    """lse is float32 for every input dtype (the kernels' own; for half q, as on the CPU), o has q's dtype."""
    rng = np.random.default_rng(3)
    host = [rng.standard_normal(s).astype(dtype) for s in ((1, 6, 16), (1, 3, 16), (1, 3, 16))]
    o, lse = flash_attention_p.bind(*(fg.device_put(fnp.array(x), "gpu") for x in host), causal=True, scale=0.25)
    want_o, want_lse, *_ = reference(*host, np.zeros_like(host[0]), causal=True, scale=0.25)
    got_lse = _host(lse)
    assert got_lse.dtype == np.float32 and got_lse.shape == (1, 6) and o.dtype == dtype
    assert flash_attention_p.abstract_eval(*host, causal=True, scale=0.25)[1].dtype == np.float32   # the shape rule
    np.testing.assert_array_equal(np.isposinf(got_lse), np.isposinf(want_lse))   # rows 0-2 see no key
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(got_lse[finite], want_lse[finite], rtol=2e-5, atol=2e-5)
    tol = 2e-5 if dtype == np.float32 else TOLERANCE[np.dtype(dtype)]
    np.testing.assert_allclose(_host(o).astype(np.float64), want_o, rtol=tol, atol=tol)


def test_float64_flash_on_gpu_is_an_error_naming_the_primitive(gpu, x64):
    q = fg.device_put(fnp.array(np.ones((1, 4, 16))), "gpu")
    assert q.dtype == np.float64
    with pytest.raises(NotImplementedError, match=r"flash_attention: no GPU implementation for \(f64\[1,4,16\].*"
                                                  r"float32, float16 and bfloat16.*fg.device_put\(x, 'cpu'\)"):
        flash_attention(q, q, q, causal=False, scale=0.25)
    assert gpu == {"forward": 0, "backward": 0}
    assert "gpu" in flash_attention_bwd_p.impls   # the backward has the same GPU implementation path


def test_flash_primitive_without_triton_is_an_error_naming_it():
    with gpu_standin(use_triton=False):
        q = fg.device_put(fnp.ones((1, 4, 16)), "gpu")
        with pytest.raises(NotImplementedError, match="flash_attention: no GPU implementation .*needs Triton"):
            flash_attention(q, q, q, causal=False, scale=0.25)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # NaN by design
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_nan_and_inf_rows_and_rows_without_keys_as_on_the_cpu(gpu, causal):
    """Query row 3 holds +inf, key 4 holds NaN; causal 6x5 leaves row 0 without keys. Forward and backward
    NaN/inf patterns equal the host implementation's (the float64 reference the CPU kernels match)."""
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal(s).astype(np.float32) for s in ((1, 6, 16), (1, 5, 16), (1, 5, 16), (1, 6, 16)))
    q[0, 3, 0], k[0, 4, 2] = np.inf, np.nan
    params = {"causal": causal, "scale": 0.3}
    want = flash_attention_p.impl(q, k, v, **params)
    want += flash_attention_bwd_p.impl(q, k, v, *want, do, **params)
    got = flash_attention_p.bind(*(fg.device_put(fnp.array(x), "gpu") for x in (q, k, v)), **params)
    got += flash_attention_bwd_p.bind(*(fg.device_put(fnp.array(x), "gpu") for x in (q, k, v)), *got,
                                      fg.device_put(fnp.array(do), "gpu"), **params)
    for name, w, g in zip(("o", "lse", "dq", "dk", "dv"), want, got):
        g = _host(g)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=name)
        np.testing.assert_array_equal(np.isposinf(g), np.isposinf(w), err_msg=name)
        finite = np.isfinite(w)
        np.testing.assert_allclose(g[finite], w[finite], rtol=2e-5, atol=2e-5, err_msg=name)
    assert np.isnan(want[0]).any() and (np.isposinf(want[1]).any() if causal else True)   # the cases occur


def test_head_dims_over_256_are_an_error_naming_the_primitive(gpu):
    q = fg.device_put(fnp.ones((1, 3, 264)), "gpu")
    with pytest.raises(NotImplementedError, match=r"flash_attention: no GPU implementation .*head dims up to 256, "
                                                  r"got 264.*gpu_host_fallback"):
        flash_attention(q, q, q, causal=True, scale=0.1)
    assert gpu == {"forward": 0, "backward": 0}


def test_bfloat16_bits_are_refused_with_a_clear_error(gpu):
    """uint16 bits are not attention inputs; the error names the bfloat16 dtype and the cast."""
    from funcgrad import mixed_precision as mp
    bits = mp.to_bfloat16(fg.device_put(fnp.full((1, 4, 16), 1.01), "gpu"))
    assert bits.device == "gpu" and bits.dtype == np.uint16
    with pytest.raises(TypeError, match=r"flash_attention: q, k, v must share one float dtype, got u16\[1,4,16\].*"
                                        r"use bfloat16 arrays, x.astype\(fnp.bfloat16\)"):
        flash_attention(bits, bits, bits, causal=False, scale=0.25)
    assert gpu == {"forward": 0, "backward": 0}
    # The route the message gives runs the bfloat16 kernels.
    q = mp.from_bfloat16(bits).astype(fnp.bfloat16)
    o = flash_attention(q, q, q, causal=False, scale=0.25)
    assert o.dtype == BF16 and gpu["forward"] == 1
    np.testing.assert_array_equal(_host(o).astype(np.float64), 1.0078125)   # bf16(1.01): rows average to it


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_flash_primitive_on_a_real_gpu():
    """The same checks on CuPy arrays with compiled kernels (a subprocess: this module interprets)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, __file__, "--gpu"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         timeout=1200)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert f"checked {len(DTYPES) * len(CASES)} cases" in res.stdout, res.stdout[-2000:]


def _gpu_worker() -> None:
    """Entry point of the GPU subprocess (TRITON_INTERPRET unset): every case in float32, float16 and bfloat16."""
    for dtype in DTYPES:
        for case in CASES:
            check_flash_case(dtype, *case)
    print(f"checked {len(DTYPES) * len(CASES)} cases", flush=True)


if _GPU_WORKER and sys.argv[1:] == ["--gpu"]:
    _gpu_worker()
