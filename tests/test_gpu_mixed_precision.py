"""Mixed precision on GPU arrays: float16/bfloat16 accumulation, bfloat16 bits, Policy training steps.

Without a GPU the arrays are backed by the numpy stand-in for CuPy
(``tests/gpu_standin.py``); the test marked ``gpu`` runs the same checks on
real CuPy. The training steps are ``examples/mnist.py``'s own
(``make_steps`` with ``--precision``), on a small MLP, and must match the
same steps run on the CPU.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import mixed_precision as mp
from funcgrad import optim, random
from funcgrad.backends.gpu import _detect
from gpu_standin import gpu_standin

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mnist.py"


@pytest.fixture(scope="module")
def mnist_example():
    spec = importlib.util.spec_from_file_location("mnist_example_precision", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _gpu(x: Any) -> Any:
    return fg.device_put(fnp.asarray(x), "gpu")


def _host(x: Any) -> np.ndarray:
    assert x.device == "gpu", x.device
    return np.asarray(fg.device_put(x, "cpu"))


# --------------------------------------------------------------------------
# The checks (shared by the stand-in and the real-GPU run)
# --------------------------------------------------------------------------


def check_float16_matmul_accumulates_in_float32() -> None:
    """4096 products of ones sum to 4096 (exact in float16); a float16 accumulator stalls at 2048."""
    a, b = np.ones((2, 4096), np.float16), np.ones((4096, 3), np.float16)
    for name, got in (("matmul", fnp.matmul(_gpu(a), _gpu(b))), ("einsum", fnp.einsum("ik,kj->ij", _gpu(a), _gpu(b))),
                      ("sum", fnp.sum(_gpu(a), axis=1))):
        host = _host(got)
        assert host.dtype == np.float16, name
        np.testing.assert_array_equal(host, 4096, err_msg=name)
    # Through grad: d/da sum(a @ b) = ones @ b^T, another float16 matmul (each entry 3).
    grad = fg.grad(lambda a_: fnp.sum(fnp.matmul(a_, _gpu(b)).astype(fnp.float32)))(_gpu(a))
    np.testing.assert_array_equal(_host(grad), 3)
    # Rounded once at the end: sum of k * (1 + 2**-10) rounds like the float64 value.
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 512)).astype(np.float16), rng.standard_normal((512, 4)).astype(np.float16)
    want = (x.astype(np.float64) @ y.astype(np.float64)).astype(np.float16)
    np.testing.assert_allclose(_host(fnp.matmul(_gpu(x), _gpu(y))).astype(np.float64), want, rtol=2e-3, atol=2e-3)


def check_bfloat16_conversions_match_the_cpu() -> None:
    """to_bfloat16 / from_bfloat16 / round_to_bfloat16 on GPU arrays give the CPU's bits (ties, NaN, inf)."""
    values = np.array([1.0, 3.14159, 1.00390625, 1.01171875, -2.5, 1e-3, 3.4e38, -np.inf, np.nan, 0.0, -0.0,
                       1e-40], np.float32)
    want_bits = np.asarray(mp.to_bfloat16(fnp.array(values)))
    got_bits = mp.to_bfloat16(_gpu(values))
    np.testing.assert_array_equal(_host(got_bits), want_bits)
    np.testing.assert_array_equal(_host(mp.from_bfloat16(got_bits)), np.asarray(mp.from_bfloat16(fnp.array(want_bits))))
    # round_to_bfloat16: values of the bf16 rounding, identity gradient.
    finite = values[np.abs(values) < 1e30]   # (3.4e38 rounds to inf in bfloat16)
    rounded, grad = fg.value_and_grad(lambda x: fnp.sum(mp.round_to_bfloat16(x) * 2.0))(_gpu(finite))
    np.testing.assert_array_equal(_host(grad), np.full(finite.shape, 2.0, np.float32))
    np.testing.assert_allclose(float(fg.device_put(rounded, "cpu")),
                               2 * float(np.sum(np.asarray(mp.round_to_bfloat16(fnp.array(finite))), dtype=np.float64)),
                               rtol=1e-6)


def _small_setup(example: Any, precision: str, to_device: Callable[[Any], Any]):
    """examples/mnist.py's steps on a 20-16-10 MLP, SGD (updates proportional to the gradients, so rounding
    differences stay small), one batch of 8 three times: (model, train_step, predict, params, state, batches)."""
    model = nn.Sequential(nn.Linear(16), nn.ReLU(), nn.Linear(10))
    params, _ = model.init(random.key(0), (-1, 20))
    opt = optim.sgd(0.2)
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((8, 20)).astype(np.float32), rng.integers(0, 10, 8).astype(np.int32))] * 3
    train_step, predict = example.make_steps(model, opt, precision)
    params = to_device(params)
    return model, train_step, predict, params, to_device(example.init_opt_state(opt, params, precision)), batches


def _run_steps(example: Any, precision: str, to_device: Callable[[Any], Any]):
    """Three training steps: (losses, params, logits and predictions of the batch after them)."""
    model, train_step, predict, params, state, batches = _small_setup(example, precision, to_device)
    losses = []
    for x, y in batches:
        params, state, loss = train_step(params, state, *to_device((fnp.asarray(x), fnp.asarray(y))))
        losses.append(loss)
    x = to_device(fnp.asarray(batches[0][0]))
    logits = model.apply(*example.make_policy(precision).cast_to_compute((params, x)))
    return losses, params, logits, predict(params, x)


# Step-for-step agreement: float32 to float32 rounding of reordered sums; float16 to a few float16 ulps
# (the loss is ~2.3, its ulp 2**-9); bfloat16 to a few bfloat16 ulps (2**-8 relative: a sum accumulated in
# another order may round to the neighbouring bf16 value, and the steps carry that on).
STEP_TOLERANCE = {"fp32": 1e-5, "bf16": 1.6e-2, "fp16": 8e-3}


def check_policy_steps_match_the_cpu(example: Any, precision: str) -> None:
    want_losses, want_params, want_logits, _ = _run_steps(example, precision, lambda tree: tree)
    got_losses, got_params, got_logits, got_pred = _run_steps(example, precision,
                                                              lambda tree: fg.device_put(tree, "gpu"))
    tol = STEP_TOLERANCE[precision]
    for got, want in zip(got_losses, want_losses):
        assert got.device == "gpu" and got.dtype == np.float32
        np.testing.assert_allclose(float(fg.device_put(got, "cpu")), float(want), rtol=tol)
    for got, want in zip(fg.tree_util.tree_leaves(got_params), fg.tree_util.tree_leaves(want_params)):
        assert got.dtype == np.float32 == want.dtype   # float32 master parameters
        np.testing.assert_allclose(_host(got), np.asarray(want), rtol=tol, atol=tol)
    assert float(want_losses[-1]) < float(want_losses[0]) - 0.1   # the steps learn
    compute = example.make_policy(precision).compute_dtype
    assert got_logits.dtype == compute, "GPU"   # real float16 / bfloat16 arrays
    assert want_logits.dtype == compute, "CPU"
    np.testing.assert_allclose(_host(got_logits).astype(np.float64), np.asarray(want_logits).astype(np.float64),
                               rtol=tol, atol=tol)
    np.testing.assert_array_equal(_host(got_pred), _host(got_logits).argmax(axis=-1))


# --------------------------------------------------------------------------
# Stand-in runs
# --------------------------------------------------------------------------


@pytest.fixture
def standin():
    with gpu_standin(use_triton=False):
        yield


def test_float16_matmul_sum_and_grad_accumulate_in_float32_on_gpu(standin):
    check_float16_matmul_accumulates_in_float32()


def test_bfloat16_conversions_on_gpu_give_the_cpu_bits(standin):
    check_bfloat16_conversions_match_the_cpu()


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_mnist_policy_steps_on_gpu_match_the_cpu_policy_run(standin, mnist_example, precision):
    check_policy_steps_match_the_cpu(mnist_example, precision)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # the overflow itself
def test_fp16_step_skips_the_update_and_halves_the_scale_on_overflow(standin, mnist_example):
    """A loss scale so large that the float16 backward overflows: the GPU step keeps the parameters."""
    _, train_step, _, params, (state, scale), batches = _small_setup(
        mnist_example, "fp16", lambda tree: fg.device_put(tree, "gpu"))
    huge = fg.device_put(mp.DynamicLossScale(scale=2.0 ** 30), "gpu")
    x, y = batches[0]
    new_params, (_, new_scale), _ = train_step(params, (state, huge), _gpu(x), _gpu(y))
    assert float(fg.device_put(new_scale.scale, "cpu")) == 2.0 ** 29
    for got, want in zip(fg.tree_util.tree_leaves(new_params), fg.tree_util.tree_leaves(params)):
        np.testing.assert_array_equal(_host(got), _host(want))


def _fake_mnist(shape, limit_train, limit_test):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 784)).astype(np.float32)
    y = (np.abs(x[:, :10]).argmax(axis=1)).astype(np.int32)   # learnable labels
    return (x, y), (x[:32], y[:32])


def test_mnist_script_runs_bf16_on_the_gpu_end_to_end(standin, mnist_example, monkeypatch, tmp_path):
    monkeypatch.setattr(mnist_example, "load_data", _fake_mnist)
    small = nn.Sequential(nn.Linear(32), nn.ReLU(), nn.Linear(10))   # (the script's 784-512-512-10 is slower)
    monkeypatch.setattr(mnist_example, "build_model", lambda name: (small, (-1, 784)))
    monkeypatch.setattr(mnist_example, "plot_curves", lambda history, path, title="": None)   # (matplotlib: slow)
    args = ["--precision", "bf16", "--epochs", "1", "--batch-size", "32", "--no-progress", "--out"]
    monkeypatch.setenv("CUPY_TF32", "")   # (recorded, so that teardown restores the original environment)
    monkeypatch.delenv("CUPY_TF32")
    gpu = mnist_example.main(args + [str(tmp_path / "gpu"), "--device", "gpu"])
    assert os.environ["CUPY_TF32"] == "1"   # float32 GEMMs of bf16 values on TF32 tensor cores (exact products)
    cpu = mnist_example.main(args + [str(tmp_path / "cpu")])
    np.testing.assert_allclose(gpu["step_loss"], cpu["step_loss"], rtol=STEP_TOLERANCE["bf16"])
    np.testing.assert_allclose(gpu["test_accuracy"], cpu["test_accuracy"], atol=1 / 32 + 1e-9)   # one of 32 may flip
    metrics = json.loads((tmp_path / "gpu" / "metrics.json").read_text())
    assert (metrics["precision"], metrics["device"]) == ("bf16", "gpu")
    assert (tmp_path / "gpu" / "params.safetensors").stat().st_size > 784 * 32 * 4   # float32 parameters


def test_mnist_precision_flag_is_checked(mnist_example, capsys):
    with pytest.raises(SystemExit):
        mnist_example.parse_args(["--precision", "fp8"])
    assert "invalid choice: 'fp8'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown precision 'int8'"):
        mnist_example.make_policy("int8")


# --------------------------------------------------------------------------
# Real GPU
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_mixed_precision_on_a_real_gpu(mnist_example):
    """On CuPy, float16 matmuls run on tensor cores with float32 accumulation (cuBLAS CUBLAS_COMPUTE_32F)."""
    check_float16_matmul_accumulates_in_float32()
    check_bfloat16_conversions_match_the_cpu()
    for precision in ("fp32", "bf16", "fp16"):
        check_policy_steps_match_the_cpu(mnist_example, precision)
