"""A real, short MNIST training run through examples/mnist.py (skipped when MNIST is not available).

The MLP (784-512-512-10) trains with Adam under ``funcgrad.jit`` on the
first 2,000 training images and must reach >= 90% on the first 1,000 test
images. Progress bars are off; the plot is written when matplotlib is
installed (the ``examples`` extra), the checkpoint and metrics always.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from funcgrad import datasets
from funcgrad.optim import serialization

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mnist.py"


@pytest.fixture(scope="module")
def mnist_example():
    try:
        datasets.mnist()
    except datasets.DataNotFoundError as e:
        pytest.skip(f"MNIST data is not available here: {str(e).splitlines()[0]}")
    spec = importlib.util.spec_from_file_location("mnist_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["mnist_example"] = module
    spec.loader.exec_module(module)
    return module


def test_short_mlp_run_reaches_90_percent(mnist_example, tmp_path):
    start = time.perf_counter()
    history = mnist_example.main(["--model", "mlp", "--limit-train", "2000", "--limit-test", "1000",
                                  "--epochs", "8", "--batch-size", "64", "--lr", "2e-3", "--seed", "0",
                                  "--no-progress", "--out", str(tmp_path)])
    seconds = time.perf_counter() - start
    assert history["test_accuracy"][-1] >= 0.90, history["test_accuracy"]
    assert np.mean(history["step_loss"][-10:]) < 0.2 * np.mean(history["step_loss"][:10])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["test_accuracy"] == history["test_accuracy"]
    # The checkpoint reloads into the model's parameter structure.
    model, input_shape = mnist_example.build_model("mlp")
    from funcgrad import random
    like, _ = model.init(random.key(0), input_shape)
    params = serialization.load(tmp_path / "params.safetensors", like=like)
    assert [p["w"].shape for p in params if p] == [(784, 512), (512, 512), (512, 10)]
    print(f"MNIST 2000-image MLP run: {history['test_accuracy'][-1]:.1%} in {seconds:.1f} s")


def test_script_writes_the_plot(mnist_example, tmp_path):
    pytest.importorskip("matplotlib")
    mnist_example.main(["--model", "cnn", "--limit-train", "256", "--limit-test", "100", "--epochs", "1",
                        "--batch-size", "64", "--no-progress", "--out", str(tmp_path)])
    png = tmp_path / "curves.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gpu_device_fails_clearly(mnist_example):
    with pytest.raises(SystemExit, match="--device gpu: (GPU backend not available yet|no usable GPU)"):
        mnist_example.main(["--device", "gpu", "--limit-train", "10"])
