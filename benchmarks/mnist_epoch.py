"""Time one MNIST training epoch per model: funcgrad's jitted step next to PyTorch CPU.

    python benchmarks/mnist_epoch.py                         # mlp and cnn, batch 128, full epoch
    python benchmarks/mnist_epoch.py --models mlp --limit-train 12800 --no-torch

Both frameworks train the same architecture (examples/mnist.py's ``mlp`` or
``cnn``) with Adam (lr 1e-3) on the same shuffled batches in the same
process. A few warm-up steps run first (jit tracing, numba compilation,
PyTorch's first-call setup) and are not timed. Reported per framework: the
epoch's wall time, images/s, and the median and minimum step time (the
machine may be shared: the median resists another process taking a core).

The JSON (``--json``) records the thread counts of numba and PyTorch, the
threading layer, ``GLIBC_TUNABLES`` (glibc's allocator settings change the
step time of allocation-heavy code by up to 1.7x here) and the load average.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load_example() -> Any:
    """examples/mnist.py as a module: the models and data pipeline are the example's own."""
    spec = importlib.util.spec_from_file_location("mnist_example", ROOT / "examples" / "mnist.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mnist_example"] = module
    spec.loader.exec_module(module)
    return module


def _time_steps(step: Callable[[np.ndarray], float], index_batches: list, warmup: int) -> dict:
    """Run ``warmup`` untimed steps, then one timed pass over ``index_batches``."""
    for idx in index_batches[:warmup]:
        step(idx)
    times, losses = [], []
    start = time.perf_counter()
    for idx in index_batches:
        t0 = time.perf_counter()
        losses.append(step(idx))
        times.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    images = len(index_batches) * len(index_batches[0])
    return {"epoch_seconds": total, "images_per_second": images / total, "step_ms_median": 1e3 * float(np.median(times)),
            "step_ms_min": 1e3 * float(np.min(times)), "steps": len(times), "first_loss": losses[0],
            "last_loss": float(np.mean(losses[-20:]))}


# --------------------------------------------------------------------------
# funcgrad
# --------------------------------------------------------------------------


def funcgrad_epoch(example: Any, model_name: str, x: np.ndarray, y: np.ndarray, index_batches: list,
                   warmup: int) -> dict:
    from funcgrad import optim, random
    model, input_shape = example.build_model(model_name)
    params, _ = model.init(random.key(0), input_shape)
    opt = optim.adam(1e-3)
    state = {"params": params, "opt": opt.init(params)}
    train_step, _ = example.make_steps(model, opt)

    def step(idx: np.ndarray) -> float:
        state["params"], state["opt"], loss = train_step(state["params"], state["opt"], x[idx], y[idx])
        return float(loss)

    return _time_steps(step, index_batches, warmup)


# --------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------


def torch_model(name: str) -> Any:
    import torch.nn as tnn
    if name == "mlp":
        return tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(), tnn.Linear(512, 10))
    return tnn.Sequential(
        tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Flatten(), tnn.Linear(64 * 7 * 7, 128), tnn.ReLU(), tnn.Linear(128, 10))


def torch_epoch(model_name: str, x: np.ndarray, y: np.ndarray, index_batches: list, warmup: int) -> dict:
    import torch
    torch.manual_seed(0)
    model = torch_model(model_name)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    def step(idx: np.ndarray) -> float:
        index = torch.from_numpy(idx)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xt[index]), yt[index])
        loss.backward()
        opt.step()
        return float(loss.detach())

    return _time_steps(step, index_batches, warmup)


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


# --------------------------------------------------------------------------
# Environment record and report
# --------------------------------------------------------------------------


def environment(use_torch: bool) -> dict:
    from funcgrad.backends.cpu import _threads
    import numba
    env = {
        "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
        "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "numba_threads": _threads.get_num_threads(), "numba_threading_layer": _threads.threading_layer(),
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES"),
        "thread_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                      "FUNCGRAD_NUM_THREADS")},
        "load_average_before": os.getloadavg(),
    }
    if use_torch:
        import torch
        env.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                   torch_interop_threads=torch.get_num_interop_threads())
    return env


def print_table(rows: list[dict]) -> None:
    header = f"{'model':6s} {'framework':10s} {'epoch s':>9s} {'images/s':>10s} {'step ms (median)':>17s} " \
             f"{'step ms (min)':>14s} {'vs torch':>9s}"
    print(header)
    print("-" * len(header))
    for row in rows:
        ratio = row.get("ratio_to_torch")
        print(f"{row['model']:6s} {row['framework']:10s} {row['epoch_seconds']:9.2f} {row['images_per_second']:10,.0f} "
              f"{row['step_ms_median']:17.2f} {row['step_ms_min']:14.2f} "
              f"{'' if ratio is None else f'{ratio:.2f}x':>9s}")
    print("(vs torch: funcgrad epoch time / PyTorch epoch time; below 1 is faster)")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=["mlp", "cnn"], default=["mlp", "cnn"])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--limit-train", type=int, default=None, help="time a shorter 'epoch' of N images")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch even when it is importable")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "mnist_epoch.json"))
    args = parser.parse_args(argv)

    use_torch = not args.no_torch and _torch_available()
    example = _load_example()
    env = environment(use_torch)
    rows = []
    for model_name in args.models:
        _, input_shape = example.build_model(model_name)
        (x, y), _ = example.load_data(input_shape, args.limit_train, 1)
        index_batches = example.batches(np.random.default_rng(0), len(x), args.batch_size)
        fg_row = dict(model=model_name, framework="funcgrad",
                      **funcgrad_epoch(example, model_name, x, y, index_batches, args.warmup))
        rows.append(fg_row)
        if use_torch:
            torch_row = dict(model=model_name, framework="pytorch",
                             **torch_epoch(model_name, x, y, index_batches, args.warmup))
            fg_row["ratio_to_torch"] = fg_row["epoch_seconds"] / torch_row["epoch_seconds"]
            fg_row["ratio_to_torch_median_step"] = fg_row["step_ms_median"] / torch_row["step_ms_median"]
            rows.append(torch_row)
    env["load_average_after"] = os.getloadavg()
    if use_torch:
        from numba.np.ufunc import parallel
        env["numba_threading_layer"] = parallel.threading_layer() if getattr(parallel, "_is_initialized", False) \
            else None
    print_table(rows)
    result = {"batch_size": args.batch_size, "limit_train": args.limit_train, "warmup_steps": args.warmup,
              "optimizer": "adam(1e-3)", "environment": env, "results": rows}
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
