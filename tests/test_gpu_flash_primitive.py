"""The FlashAttention primitive on GPU arrays runs the Triton kernels.

No GPU here: GPU arrays are backed by the numpy stand-in for CuPy
(``tests/gpu_standin.py``) and the Triton kernels run in Triton's
interpreter (``TRITON_INTERPRET=1``, set below before triton is imported).
Forward and gradients go through ``flash_attention_p`` /
``flash_attention_bwd_p`` (``fg.vjp``), and are compared with a float64
numpy reference. Shapes are tiny: the interpreter is slow.
"""
from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede any triton/kernel import

import numpy as np  # noqa: E402
import pytest  # noqa: E402

triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton==3.9.0)")

import funcgrad as fg  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad.backends.gpu import flash_attention as fa  # noqa: E402
from funcgrad.primitives.attention import flash_attention, flash_attention_bwd_p, flash_attention_p  # noqa: E402
from gpu_standin import FakeDeviceArray, gpu_standin  # noqa: E402

if not isinstance(fa._attn_fwd, triton.runtime.interpreter.InterpretedFunction):
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
    assert x.device == "gpu" and isinstance(x._value, FakeDeviceArray), (x.device, type(x._value))
    return np.asarray(fg.device_put(x, "cpu"))


# (Nq, Nk, causal, d): bottom-right causal alignment (Nq < Nk), rows that see
# no key (causal, Nq > Nk), no mask, and a head dim padded up to 32 by the kernels.
CASES = [(5, 7, True, 16), (9, 4, True, 16), (6, 6, False, 24)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("nq,nk,causal,d", CASES, ids=[f"{c[0]}x{c[1]}-{'causal' if c[2] else 'full'}-d{c[3]}"
                                                        for c in CASES])
def test_flash_primitive_on_gpu_arrays_matches_float64_reference(gpu, dtype, nq, nk, causal, d):
    rng = np.random.default_rng(nq * 100 + nk * 10 + d)
    host = [rng.standard_normal(s).astype(dtype) for s in ((2, nq, d), (2, nk, d), (2, nk, d), (2, nq, d))]
    q, k, v, do = (fg.device_put(fnp.array(x), "gpu") for x in host)
    scale = 0.7 / np.sqrt(d)

    o, vjp_fn = fg.vjp(lambda q_, k_, v_: flash_attention(q_, k_, v_, causal=causal, scale=scale), q, k, v)
    dq, dk, dv = vjp_fn(do)
    assert gpu == {"forward": 1, "backward": 1}   # both primitives ran the Triton kernels, nothing else did

    want_o, _, want_dq, want_dk, want_dv = reference(*host, causal=causal, scale=scale)
    tol = 2e-5 if dtype == np.float32 else 2e-3   # float16: errors ~4e-4 of the largest value
    for name, got, want in (("o", o, want_o), ("dq", dq, want_dq), ("dk", dk, want_dk), ("dv", dv, want_dv)):
        got = _host(got)
        assert got.dtype == dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()),
                                   err_msg=name)
    if nq > nk and causal:   # the first Nq - Nk rows see no key: output and query gradient exactly 0
        assert not _host(o)[:, :nq - nk].any() and not _host(dq)[:, :nq - nk].any()


def test_flash_primitive_outputs_lse_on_gpu(gpu):
    rng = np.random.default_rng(3)
    host = [rng.standard_normal(s).astype(np.float32) for s in ((1, 6, 16), (1, 3, 16), (1, 3, 16))]
    o, lse = flash_attention_p.bind(*(fg.device_put(fnp.array(x), "gpu") for x in host), causal=True, scale=0.25)
    want_o, want_lse, *_ = reference(*host, np.zeros_like(host[0]), causal=True, scale=0.25)
    got_lse = _host(lse)
    assert got_lse.dtype == np.float32 and got_lse.shape == (1, 6)
    np.testing.assert_array_equal(np.isposinf(got_lse), np.isposinf(want_lse))   # rows 0-2 see no key
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(got_lse[finite], want_lse[finite], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(_host(o), want_o, rtol=2e-5, atol=2e-5)


def test_float64_flash_on_gpu_is_an_error_naming_the_primitive(gpu, x64):
    q = fg.device_put(fnp.array(np.ones((1, 4, 16))), "gpu")
    assert q.dtype == np.float64
    with pytest.raises(NotImplementedError, match=r"flash_attention: no GPU implementation for \(f64\[1,4,16\].*"
                                                  r"float32 and float16.*fg.device_put\(x, 'cpu'\)"):
        flash_attention(q, q, q, causal=False, scale=0.25)
    assert gpu == {"forward": 0, "backward": 0}
    assert "gpu" in flash_attention_bwd_p.impls   # the backward has the same GPU implementation path


def test_flash_primitive_without_triton_is_an_error_naming_it():
    with gpu_standin(use_triton=False):
        q = fg.device_put(fnp.ones((1, 4, 16)), "gpu")
        with pytest.raises(NotImplementedError, match="flash_attention: no GPU implementation .*needs Triton"):
            flash_attention(q, q, q, causal=False, scale=0.25)
