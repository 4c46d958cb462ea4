"""bfloat16 on GPU arrays: transfers, the GPU implementations, fused jit kernels, the Triton row and attention kernels.

No GPU here: GPU arrays are backed by the numpy stand-in for CuPy (``tests/gpu_standin.py``, whose bfloat16
arrays are numpy's ``ml_dtypes.bfloat16`` ones, as in CuPy 14) and the Triton kernels run in Triton's
interpreter (``TRITON_INTERPRET=1``, set below before triton is imported). References are float64 numpy on
the same bfloat16 values. The test marked ``gpu`` runs the same checks on CuPy arrays with compiled kernels, in
a subprocess (this file run as a script, without ``TRITON_INTERPRET``).
"""
from __future__ import annotations

import os

# Run as a script (``--gpu``) this file is the real-GPU worker, which needs compiled kernels; under pytest,
# interpret on the CPU.
_GPU_WORKER = __name__ == "__main__"
if not _GPU_WORKER:
    os.environ["TRITON_INTERPRET"] = "1"  # must precede any triton import

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton==3.9.0)")

import funcgrad as fg  # noqa: E402
import funcgrad.nn as nn  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402
from funcgrad import mixed_precision as mp  # noqa: E402
from funcgrad.backends.gpu import _detect  # noqa: E402
from funcgrad.backends.gpu import flash_attention as fa  # noqa: E402
from funcgrad.backends.gpu import triton_kernels as tk  # noqa: E402
import gpu_standin as gpu_standin_module  # noqa: E402
from gpu_standin import FakeDeviceArray, gpu_standin  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]

if not _GPU_WORKER and not isinstance(fa._attn_fwd, triton.runtime.interpreter.InterpretedFunction):
    pytest.skip("triton was imported before TRITON_INTERPRET=1 was set (another test module imported it first); "
                "run this module on its own", allow_module_level=True)

BF16 = np.dtype(fnp.bfloat16)
rng = np.random.default_rng(0)


@pytest.fixture
def gpu():
    with gpu_standin(use_triton=True):
        yield


def dev(x):
    return fg.device_put(fnp.asarray(x), "gpu")


def host(y) -> np.ndarray:
    assert y.device == "gpu" and (_GPU_WORKER or isinstance(y._value, FakeDeviceArray)), (y.device, type(y._value))
    return np.asarray(fg.device_put(y, "cpu"))


def bf16(x) -> np.ndarray:
    return np.asarray(x, np.float32).astype(BF16)


def f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of bfloat16's spacing at ``want`` (``got`` bfloat16, ``want`` float64)."""
    assert got.dtype == BF16, got.dtype
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) * 2.0 ** 16   # float32 -> bf16 ulp
    return np.abs(f64(got) - want) / np.maximum(spacing, 2.0 ** -133)


def assert_rounded_once(got: np.ndarray, want: np.ndarray, what: str, within: float = 0.5) -> None:
    """One rounding of a float32-accurate value: within half a bfloat16 ulp (plus float32 slack)."""
    err = ulps(got, want)
    assert err.max() <= within + 2.0 ** -14, f"{what}: {err.max():.3f} bf16 ulps off"


# The hand-written Triton kernels store with ``.to(tl.bfloat16)``: round to nearest even on a GPU, a truncation
# in Triton's interpreter. Under the interpreter their outputs are within one ulp; on a GPU, half an ulp.
KERNEL_ULPS = 0.5 if _GPU_WORKER else 1.0


# --------------------------------------------------------------------------
# transfers
# --------------------------------------------------------------------------


def test_device_put_keeps_bfloat16_bits_both_ways(gpu):
    # zeros, one, pi, the smallest subnormal, the largest finite, infinities, NaNs with payloads
    bits = np.array([0x0000, 0x8000, 0x3F80, 0x4049, 0x0001, 0x7F7F, 0x7F80, 0xFF80, 0x7FC1, 0xFFA5], np.uint16)
    g = dev(bits.view(BF16))
    assert g.dtype == BF16 and g._value.dtype == BF16 and g.shape == (10,)
    np.testing.assert_array_equal(host(g).view(np.uint16), bits)
    assert "dtype=bfloat16, device='gpu'" in repr(g)
    assert float(dev(bf16([3.14159]))[0]) == 3.140625


# --------------------------------------------------------------------------
# the GPU implementations (CuPy's array functions)
# --------------------------------------------------------------------------


def test_sums_accumulate_in_float32_and_round_once(gpu):
    # 4096 ones: a bfloat16 accumulator stalls at 256 (256 + 1 rounds back to 256).
    ones = np.ones((2, 4096), BF16)
    total = fnp.sum(dev(ones), axis=1)
    assert total.dtype == BF16
    np.testing.assert_array_equal(f64(host(total)), [4096, 4096])
    running = host(fnp.cumsum(dev(ones[0])))
    assert running.dtype == BF16   # each prefix sum exact in float32, then rounded to bfloat16
    np.testing.assert_array_equal(running.view(np.uint16), np.arange(1, 4097, dtype=np.float32).astype(BF16).view(np.uint16))
    x = bf16(rng.standard_normal((3, 1000)))
    assert_rounded_once(host(fnp.sum(dev(x), axis=1)), f64(x).sum(axis=1), "sum")
    assert_rounded_once(host(fnp.cumsum(dev(x), axis=1)), np.cumsum(f64(x), axis=1), "cumsum")
    p = bf16(rng.uniform(0.9, 1.1, (2, 64)))
    assert_rounded_once(host(fnp.prod(dev(p), axis=1)), np.prod(f64(p), axis=1), "prod")


def test_matmul_and_einsum_compute_in_float32_and_round_once(gpu):
    """Matrix products (and stacks of rows times a matrix) take CuPy's 2-D bfloat16 matmul (cuBLAS, float32
    accumulation); batched products, vector products and einsum widen to float32. All round once."""
    a, b = bf16(rng.standard_normal((2, 3, 512))), bf16(rng.standard_normal((512, 4)))
    c, v = bf16(rng.standard_normal((2, 512, 5))), bf16(rng.standard_normal(512))
    a64, b64, c64, v64 = f64(a), f64(b), f64(c), f64(v)
    cases = (("rows @ matrix", lambda: dev(a) @ dev(b), a64 @ b64, 1),
             ("dot", lambda: fnp.dot(dev(a[0]), dev(b)), a64[0] @ b64, 1),
             ("batched", lambda: dev(a) @ dev(c), a64 @ c64, 0),
             ("vector", lambda: dev(v) @ dev(b), v64 @ b64, 1),   # (a 1-row matrix: 4 outputs)
             ("inner", lambda: fnp.dot(dev(v), dev(v)), v64 @ v64, 0),   # (one output)
             ("einsum", lambda: fnp.einsum("bik,kj->bij", dev(a), dev(b)), a64 @ b64, 0))
    for name, run, want, cublas in cases:
        before = gpu_standin_module.BF16_MATMULS[0]
        got = host(run())
        assert _GPU_WORKER or gpu_standin_module.BF16_MATMULS[0] - before == cublas, name
        assert got.dtype == BF16, name
        assert_rounded_once(got, want, name)
    # float32 with bfloat16 promotes to float32 (JAX's rule), computed in float32
    mixed = host(dev(a[0]) @ dev(b64.astype(np.float32)))
    assert mixed.dtype == np.float32
    np.testing.assert_allclose(mixed, a64[0] @ b64, rtol=1e-5, atol=1e-4)


def test_python_scalars_keep_bfloat16_as_in_the_traced_program(gpu):
    """numpy computes ``bf16 * 0.1`` in float32; on GPU arrays it stays bfloat16 (the scalar is weak)."""
    x = bf16(rng.standard_normal(50))
    for name, fn in (("mul", lambda v: v * 0.1), ("add", lambda v: 0.3 + v), ("where", lambda v: fnp.where(v > 0, v, 0.5)),
                     ("sigmoid", nn.sigmoid), ("pow", lambda v: v ** 1.5)):
        got = fn(dev(x))
        assert got.dtype == BF16 == fg.eval_shape(fn, fnp.asarray(x)).dtype, name
    np.testing.assert_array_equal(host(dev(x) * 0.1).view(np.uint16), (x * bf16(0.1)).view(np.uint16))


def test_sort_argmax_and_round_go_through_float32(gpu):
    """CuPy 14.2's sorts, argmax/argmin and round have no bfloat16 (the stand-in refuses its sorts too): they
    widen, exactly."""
    x = bf16(np.r_[rng.standard_normal(40), [np.nan, np.inf, -np.inf, 0.0, -0.0]])
    order = host(fnp.argsort(dev(x)))
    np.testing.assert_array_equal(order, np.argsort(f64(x), kind="stable"))
    got = host(fnp.sort(dev(x)))
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), x[np.argsort(f64(x), kind="stable")].view(np.uint16))
    y = bf16(rng.standard_normal((3, 50)))
    np.testing.assert_array_equal(host(fnp.argmax(dev(y), axis=1)), np.argmax(f64(y), axis=1))
    np.testing.assert_array_equal(host(fnp.argmin(dev(y), axis=1)), np.argmin(f64(y), axis=1))
    z = bf16(np.r_[rng.uniform(-40, 40, 30), [0.5, 1.5, 2.5, -0.5]])
    rounded = host(fnp.round(dev(z)))
    assert rounded.dtype == BF16
    np.testing.assert_array_equal(f64(rounded), np.round(f64(z)))   # half to even, as numpy


def test_special_functions_and_solves_compute_in_float32(gpu):
    x = bf16(rng.uniform(-0.9, 0.9, 20))
    got = host(fg.scipy.special.erf(dev(x)))
    assert got.dtype == BF16
    from scipy import special
    assert_rounded_once(got, special.erf(f64(x)), "erf")
    a = bf16(rng.standard_normal((3, 3)) + 4 * np.eye(3))
    y = bf16(rng.standard_normal((3, 2)))
    sol = host(fg.scipy.linalg.solve_triangular(dev(a), dev(y), lower=True))
    assert sol.dtype == BF16
    np.testing.assert_allclose(f64(sol), np.linalg.solve(np.tril(f64(a)), f64(y)), rtol=2 ** -7, atol=2 ** -7)


def test_conv2d_and_its_gradients_accumulate_in_float32(gpu):
    # Sums of 600 or 900 ones: exact in bfloat16 once rounded; a bfloat16 accumulator stalls at 256.
    ones = lambda *shape: np.ones(shape, BF16)  # noqa: E731
    y = host(fg.lax.conv2d(dev(ones(1, 600, 1, 1)), dev(ones(2, 600, 1, 1))))
    dx = host(fg.lax.conv2d_input_grad(dev(ones(1, 600, 1, 1)), dev(ones(600, 1, 1, 1)), (1, 1)))
    dw = host(fg.lax.conv2d_weight_grad(dev(ones(1, 1, 30, 30)), dev(ones(1, 1, 30, 30)), (1, 1)))
    assert y.dtype == dx.dtype == dw.dtype == BF16
    np.testing.assert_array_equal(f64(y), 600)
    np.testing.assert_array_equal(f64(dx), 600)
    np.testing.assert_array_equal(f64(dw), 900)
    x, w = bf16(rng.standard_normal((2, 8, 5, 5))), bf16(rng.standard_normal((3, 8, 3, 3)))
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(f64(x), ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3),
                                                       axis=(2, 3))   # (n, c, h, w, kh, kw)
    assert_rounded_once(host(fg.lax.conv2d(dev(x), dev(w), padding=1)),
                        np.einsum("nchwij,ocij->nohw", windows, f64(w)), "conv2d")


# --------------------------------------------------------------------------
# the Triton row kernels and FlashAttention kernels
# --------------------------------------------------------------------------


def test_softmax_and_cross_entropy_run_the_bfloat16_row_kernels(gpu, monkeypatch):
    calls = []
    for name in ("softmax", "log_softmax", "softmax_cross_entropy"):
        def counting(*args, _f=getattr(tk, name), _name=name, **kwargs):
            calls.append(_name)
            return _f(*args, **kwargs)
        monkeypatch.setattr(tk, name, counting)
    x = bf16(rng.standard_normal((4, 37)) * 3)
    labels = np.array([0, 5, 36, 7], np.int32)
    x64 = f64(x)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    want_soft = e / e.sum(-1, keepdims=True)
    soft, logsoft = host(nn.softmax(dev(x))), host(nn.log_softmax(dev(x)))
    loss = host(nn.cross_entropy(dev(x), dev(labels), reduction="none"))
    assert calls == ["softmax", "log_softmax", "softmax_cross_entropy"]   # the Triton kernels, bf16 buffers
    assert soft.dtype == logsoft.dtype == loss.dtype == BF16
    assert_rounded_once(soft, want_soft, "softmax", KERNEL_ULPS)
    assert_rounded_once(logsoft, np.log(want_soft), "log_softmax", KERNEL_ULPS)
    assert_rounded_once(loss, -np.log(want_soft[np.arange(4), labels]), "cross_entropy", KERNEL_ULPS)


def test_flash_kernels_take_bfloat16_arrays_as_their_bits(gpu):
    """The direct entry points: bfloat16 arrays and uint16 views of the same memory give the same bits."""
    to = (lambda x: __import__("cupy").asarray(x)) if _GPU_WORKER else (lambda x: x)
    q, k, v, do = (to(bf16(rng.standard_normal(s))) for s in ((1, 5, 16), (1, 7, 16), (1, 7, 16), (1, 5, 16)))
    back = (lambda x: x.get()) if _GPU_WORKER else (lambda x: x)
    o, lse = fa.flash_attention_forward(q, k, v, causal=True, scale=0.3)
    o_bits, lse_bits = fa.flash_attention_forward(*(x.view(np.uint16) for x in (q, k, v)), causal=True, scale=0.3)
    assert o.dtype == BF16 and lse.dtype == np.float32
    np.testing.assert_array_equal(back(o.view(np.uint16)), back(o_bits))
    np.testing.assert_array_equal(back(lse), back(lse_bits))
    grads = fa.flash_attention_backward(q, k, v, o, lse, do, causal=True, scale=0.3)
    grads_bits = fa.flash_attention_backward(*(x.view(np.uint16) for x in (q, k, v, o)), lse, do.view(np.uint16),
                                             causal=True, scale=0.3)
    for g, gb in zip(grads, grads_bits):
        assert g.dtype == BF16
        np.testing.assert_array_equal(back(g.view(np.uint16)), back(gb))


def test_dot_product_attention_flash_on_bfloat16_gpu_arrays(gpu, monkeypatch):
    """The public API, (B, H, N, d) bfloat16 GPU arrays: forward, gradient and jit reach the bfloat16 kernels."""
    calls = []
    for name in ("flash_attention_forward", "flash_attention_backward"):
        def counting(*args, _f=getattr(fa, name), _name=name, **kwargs):
            calls.append((_name, args[0].dtype))
            return _f(*args, **kwargs)
        monkeypatch.setattr(fa, name, counting)
    q, k, v = (bf16(rng.standard_normal((2, 2, 9, 32))) for _ in range(3))
    attend = lambda q, k, v: nn.dot_product_attention(q, k, v, causal=True, impl="flash")  # noqa: E731
    o, vjp = fg.vjp(attend, dev(q), dev(k), dev(v))
    dq = vjp(dev(np.ones(q.shape, BF16)))[0]
    jo = fg.jit(attend)(dev(q), dev(k), dev(v))
    assert o.dtype == dq.dtype == jo.dtype == BF16
    assert calls == [("flash_attention_forward", BF16), ("flash_attention_backward", BF16),
                     ("flash_attention_forward", BF16)]
    q64, k64, v64 = (f64(x) for x in (q, k, v))
    s = q64 @ k64.transpose(0, 1, 3, 2) / np.sqrt(32)
    s = np.where(np.tril(np.ones((9, 9), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v64
    for got in (host(o), host(jo)):
        np.testing.assert_allclose(f64(got), want, rtol=1.6e-2, atol=1.6e-2)


# --------------------------------------------------------------------------
# jit: generated Triton kernels on bfloat16 buffers
# --------------------------------------------------------------------------


def _jit_on_gpu(f, *args):
    jf = fg.jit(f)
    dargs = [dev(a) for a in args]
    program = jf.lower(*dargs)
    out = jf(*dargs)
    return program, out, f(*dargs)


def test_fused_chain_rounds_each_bfloat16_result_as_eager_does(gpu):
    x = bf16(rng.uniform(-2, 2, (4, 33)))
    w = bf16(rng.uniform(0.5, 1.5, 33))
    program, got, eager = _jit_on_gpu(lambda x, w: fnp.exp(x * w) - x / w + 1.0, x, w)
    assert len(program.kernels) == 1
    source = program.kernels[0].source
    assert "tl.bfloat16" in source and "tl.exp(" in source
    got, eager = host(got), host(eager)
    assert got.dtype == eager.dtype == BF16
    # The same per-operation roundings as eager: equal, or one ulp apart where float32 exp differs in its last bit
    # and that decides a bf16 rounding.
    bits_apart = np.abs(got.view(np.uint16).astype(np.int32) - eager.view(np.uint16).astype(np.int32))
    assert bits_apart.max() <= 1 and (bits_apart == 0).mean() > 0.9, bits_apart
    # float64 per-operation reference
    x64, w64 = f64(x), f64(w)
    r = lambda v: f64(v.astype(np.float32).astype(BF16))
    want = r(r(r(np.exp(r(x64 * w64))) - r(x64 / w64)) + 1.0)
    assert (np.abs(f64(got) - want) <= np.abs(want) * 2.0 ** -7).all()


def test_fused_python_scalars_are_rounded_to_bfloat16_as_eagerly(gpu):
    x = bf16(rng.uniform(-3, 3, 200))
    program, got, eager = _jit_on_gpu(lambda v: fnp.where(v > 0.1, v * 0.1 + 0.3, v * 257 - 1.7), x)
    assert len(program.kernels) == 1
    np.testing.assert_array_equal(host(got).view(np.uint16), host(eager).view(np.uint16))
    x64, r = f64(x), lambda v: f64(np.asarray(v, np.float32).astype(BF16))   # (weak scalars: bf16 first)
    want = np.where(x64 > r(0.1), r(r(x64 * r(0.1)) + r(0.3)), r(r(x64 * r(257)) - r(1.7)))
    np.testing.assert_array_equal(f64(host(got)), want)


def test_fused_conversions_round_where_they_stand(gpu):
    i = np.arange(0, 2000, 7, dtype=np.int32)          # ints above 256 round to bfloat16 (spacing 2, 4, 8)
    x = rng.standard_normal(i.shape).astype(np.float32)
    f = lambda i, x: ((i * 3).astype(fnp.bfloat16) + 1.0, (x * 2.0).astype(fnp.bfloat16).astype(np.float32) - x * 2.0)
    program, (a, b), (ea, eb) = _jit_on_gpu(f, i, x)
    assert len(program.kernels) >= 1
    a, b = host(a), host(b)
    assert a.dtype == BF16 and b.dtype == np.float32
    np.testing.assert_array_equal(a.view(np.uint16), host(ea).view(np.uint16))
    np.testing.assert_array_equal(b, host(eb))
    np.testing.assert_array_equal(f64(a), f64((f64(i * 3).astype(np.float32).astype(BF16).astype(np.float32) + 1)
                                              .astype(BF16)))


def test_fused_row_reduction_accumulates_in_float32(gpu):
    x = np.ones((3, 3000), BF16)   # x * 2 summed: a bfloat16 accumulator stalls at 512 (512 + 2 is a tie to 512)
    program, got, _ = _jit_on_gpu(lambda v: fnp.sum(v * 2.0 + 0.0, axis=-1), x)
    assert len(program.kernels) == 1 and program.kernels[0].reduction is not None
    got = host(got)
    assert got.dtype == BF16
    np.testing.assert_array_equal(f64(got), f64(np.float32(6000).astype(BF16)))   # 6016: one rounding of 6000
    y = bf16(rng.standard_normal((2, 700)))
    program, got, _ = _jit_on_gpu(lambda v: fnp.max(fnp.abs(v) - 0.25, axis=-1), y)
    assert len(program.kernels) == 1
    np.testing.assert_array_equal(f64(host(got)), (np.abs(f64(y)) - 0.25).astype(np.float32).astype(BF16)
                                  .astype(np.float64).max(-1))


# --------------------------------------------------------------------------
# mixed precision: a bfloat16 policy on GPU arrays
# --------------------------------------------------------------------------


def test_bfloat16_policy_computes_in_bfloat16_arrays_with_float32_gradients(gpu):
    policy = mp.Policy("float32", "bfloat16", "float32")
    w = rng.standard_normal((8, 3)).astype(np.float32)
    x = rng.standard_normal((5, 8)).astype(np.float32)

    def loss(w, x):
        w16, x16 = policy.cast_to_compute((w, x))
        assert w16.dtype == x16.dtype == BF16
        return policy.cast_to_output(fnp.sum(fnp.tanh(x16 @ w16)))

    value, grad = fg.value_and_grad(loss)(dev(w), dev(x))
    assert value.dtype == grad.dtype == np.float32 and grad.device == "gpu"
    xb, wb = f64(bf16(x)), f64(bf16(w))
    t = np.tanh(xb @ wb)
    np.testing.assert_allclose(float(value), t.sum(), rtol=2 ** -6)
    np.testing.assert_allclose(host(grad), xb.T @ (1 - t ** 2), rtol=4 * 2 ** -7, atol=4 * 2 ** -7)


# --------------------------------------------------------------------------
# Real GPU
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_bfloat16_on_a_real_gpu():
    """The checks above on CuPy arrays with compiled kernels (a subprocess: this module interprets)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), str(REPO_ROOT / "tests"), env.get("PYTHONPATH")]))
    res = subprocess.run([sys.executable, __file__, "--gpu"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert f"checked {len(_checks())} bfloat16 checks" in res.stdout, res.stdout[-2000:]


def _checks() -> list:
    return [f for name, f in sorted(globals().items()) if name.startswith("test_") and name != "test_bfloat16_on_a_real_gpu"]


def _gpu_worker() -> None:
    """Entry point of the GPU subprocess (TRITON_INTERPRET unset): every check on CuPy arrays."""
    import inspect
    for check in _checks():
        with pytest.MonkeyPatch.context() as monkeypatch:
            kwargs = {"gpu": None, "monkeypatch": monkeypatch}
            check(**{name: kwargs[name] for name in inspect.signature(check).parameters})
        print("ok", check.__name__, flush=True)
    print(f"checked {len(_checks())} bfloat16 checks", flush=True)


if _GPU_WORKER and sys.argv[1:] == ["--gpu"]:
    _gpu_worker()
