"""MNIST training: the time per training step and per epoch of examples/mnist.py's models, funcgrad's jitted
step next to PyTorch on the CPU.

Both train the same architecture (``mlp``: 784-512-512-10; ``cnn``: two 3x3 conv + ReLU + 2x2 max-pool
blocks, then 128 and 10 units) with Adam (lr 1e-3) on the same batches of 28x28 images (seeded random
pixels of MNIST's shape and scale: the time of a step does not depend on the pixel values, and the
benchmark needs no download). Each framework runs in a worker process of its own; the parent times chunks
of 10 steps from each in interleaved rounds. Reported: the median time per step and its spread, and the
epoch (60,000 images) that this step time makes.

``--sweep`` times the CNN step against the batch size (16 to 512).

    python benchmarks/mnist_epoch.py [--quick] [--sweep] [--models mlp cnn] [--peers funcgrad,pytorch]
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, fmt_ratio, fmt_stat, fmt_time, json_path  # noqa: E402
from _peers import run_cases, worker  # noqa: E402

NAME = "mnist_epoch"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "pytorch"]
MODULES = {"funcgrad": "funcgrad", "pytorch": "torch"}
CHUNK = 10                                   # steps per timed sample
EPOCH = 60000
POOL = 2048                                  # distinct images the steps cycle through
SWEEP_BATCHES = [16, 32, 64, 128, 256, 512]
INPUT_SHAPES = {"mlp": (784,), "cnn": (1, 28, 28)}


def data(model: str, batch: int, chunk: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Normalised float32 images in the model's layout, int32 labels, and ``chunk`` index batches."""
    rng = np.random.default_rng(0)
    n = max(POOL, batch * chunk)
    x = ((rng.integers(0, 256, (n, 28, 28)).astype(np.float32) / 255.0 - 0.1307) / 0.3081)
    y = rng.integers(0, 10, n).astype(np.int32)
    order = rng.permutation(n)
    idx = [order[(i * batch) % (n - batch + 1):][:batch] for i in range(chunk)]
    return x.reshape((n,) + INPUT_SHAPES[model]), y, idx


def _load_example() -> Any:
    """examples/mnist.py as a module: the models and the training step are the example's own."""
    spec = importlib.util.spec_from_file_location("mnist_example", os.path.join(ROOT, "examples", "mnist.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["mnist_example"] = module
    spec.loader.exec_module(module)
    return module


def steps_funcgrad(arg: dict):
    import funcgrad as fg
    from funcgrad import optim, random
    example = _load_example()
    x, y, idx = data(arg["model"], arg["batch"], arg.get("chunk", CHUNK))
    model, input_shape = example.build_model(arg["model"])
    params, _ = model.init(random.key(0), input_shape)
    opt = optim.adam(1e-3)
    state = {"params": params, "opt": opt.init(params)}
    train_step, _ = example.make_steps(model, opt)
    batches = [(x[i], y[i]) for i in idx]

    def chunk():
        for xb, yb in batches:
            state["params"], state["opt"], loss = train_step(state["params"], state["opt"], xb, yb)
        return float(fg.block_until_ready(loss))
    return {"steps": chunk}, {}


def torch_model(name: str) -> Any:
    import torch.nn as tnn
    if name == "mlp":
        return tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(), tnn.Linear(512, 10))
    return tnn.Sequential(
        tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Flatten(), tnn.Linear(64 * 7 * 7, 128), tnn.ReLU(), tnn.Linear(128, 10))


def steps_torch(arg: dict):
    import torch
    torch.manual_seed(0)
    model = torch_model(arg["model"])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y, idx = data(arg["model"], arg["batch"], arg.get("chunk", CHUNK))
    batches = [(torch.from_numpy(x[i]), torch.from_numpy(y[i].astype(np.int64))) for i in idx]

    def chunk():
        for xb, yb in batches:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
        return float(loss.detach())
    return {"steps": chunk}, {}


BUILDERS = {("steps", "funcgrad"): steps_funcgrad, ("steps", "pytorch"): steps_torch}


def per_step(s: dict, chunk: int) -> dict:
    """Stats of a chunk of steps as stats per step."""
    return {k: (v / chunk if k.endswith("_s") and isinstance(v, float) else v) for k, v in s.items()
            if k != "samples_s"}


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__, sweep="the CNN step against the batch size")
    ap.add_argument("--models", nargs="+", choices=["mlp", "cnn"], default=["mlp", "cnn"])
    ap.add_argument("--batch-size", type=int, default=128)
    args = ap.parse_args(argv)
    if args.worker:
        worker(BUILDERS, MODULES, args.worker[0], args.worker[1], json.loads(args.worker[2]))
        return
    record = Record(NAME + ("_sweep" if args.sweep else ""), args, script=NAME)
    quick, peers = args.quick, chosen(PEERS, args)
    chunk = 2 if quick else CHUNK
    if args.sweep:
        batches = [8, 16] if quick else SWEEP_BATCHES
        cases = [{"case": "steps", "label": f"CNN step, B={b}", "arg": {"model": "cnn", "batch": b, "chunk": chunk}}
                 for b in batches]
        res = run_cases(SCRIPT, peers, cases, rounds=2 if quick else 7, budget_s=5 if quick else 30,
                        record=record, measure=False)
        series: dict[str, list] = {}
        for b, case in zip(batches, cases):
            for peer, calls in res[case["label"]].items():
                s = per_step(calls["steps"], chunk)
                series.setdefault(peer, []).append([b, s["median_s"] * 1e3])
                record.measure(case["label"], {peer: {"step": s}}, baseline="pytorch/step")
        record.sweep("cnn_batch", "MNIST CNN training step against the batch size", "batch size", "ms per step",
                     series)
        rows = [{"batch": b, **{p: f"{v[i][1]:.2f} ms" for p, v in series.items()}} for i, b in enumerate(batches)]
        record.table("cnn_batch", "MNIST CNN training step against the batch size (median ms per step)", rows)
    else:
        batch = 16 if quick else args.batch_size
        models = ["mlp"] if quick else args.models
        cases = [{"case": "steps", "label": f"{m} step, B={batch}", "arg": {"model": m, "batch": batch, "chunk": chunk}}
                 for m in models]
        res = run_cases(SCRIPT, peers, cases, rounds=2 if quick else 15, budget_s=5 if quick else 90,
                        record=record, measure=False)
        rows = []
        for m, case in zip(models, cases):
            stats = {peer: {"step": per_step(calls["steps"], chunk)} for peer, calls in res[case["label"]].items()}
            record.measure(case["label"], stats, baseline="pytorch/step")
            torch_step = stats.get("pytorch", {}).get("step")
            for peer, s in stats.items():
                epoch = s["step"]["median_s"] * EPOCH / batch
                rows.append({"model": m, "framework": peer, "step (median ± spread)": fmt_stat(s["step"]),
                             "epoch of 60,000 images": fmt_time(epoch),
                             "images/s": f"{batch / s['step']['median_s']:,.0f}",
                             "time / PyTorch": fmt_ratio(s["step"]["median_s"], torch_step and torch_step["median_s"])})
        record.table("epoch", f"MNIST training step and epoch, batch {batch}, Adam (each framework in its own "
                              "process; interleaved chunks of steps)", rows)
    record.write(json_path(record.name, args))


if __name__ == "__main__":
    main()
