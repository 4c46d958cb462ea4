"""The MNIST CNN's layers one by one, forward and backward, funcgrad against PyTorch on the CPU.

The CNN of ``examples/mnist.py`` (batch 128: conv3x3 1->32 at 28x28, ReLU, max-pool 2, conv3x3 32->64 at
14x14, ReLU, max-pool 2, dense) split into its layers, each direction timed on its own: a convolution's
forward, input gradient and weight gradient; a max-pool's forward and backward; the bias + ReLU after each
convolution, forward and backward (the ReLU mask and the bias gradient). funcgrad runs its CPU primitive
implementations on numpy arrays (the kernels a jitted step runs; the bias + ReLU as a jitted ``fnp``
expression, one fused kernel), PyTorch its ATen operators under ``no_grad`` (oneDNN convolutions; its
``convolution_backward`` asked for one gradient at a time). Each runs in a worker process of its own, timed
in interleaved rounds; the table gives medians, their spread and the time relative to PyTorch, and a last
row sums the directions a training step runs (conv1's input gradient is not among them).

``--threads N`` sets the thread counts of both workers (numba, BLAS, OpenMP); ``--profile`` prints
``fg.profiler``'s table of the jitted CNN training step instead (no peers).

    python benchmarks/conv_layers.py [--quick] [--threads 1] [--batch 128] [--profile]
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, fmt_ratio, fmt_stat, fmt_time, json_path  # noqa: E402
from _peers import run_cases, worker  # noqa: E402

NAME = "conv_layers"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "pytorch"]
MODULES = {"funcgrad": "funcgrad", "pytorch": "torch"}
# (label, kind, channels in, channels out, height = width); 3x3 convolutions with padding 1, 2x2 pools
LAYERS = [
    ("conv1 1->32 28x28", "conv", 1, 32, 28),
    ("bias+ReLU 32x28x28", "bias_relu", 32, 32, 28),
    ("pool1 32x28x28", "pool", 32, 32, 28),
    ("conv2 32->64 14x14", "conv", 32, 64, 14),
    ("bias+ReLU 64x14x14", "bias_relu", 64, 64, 14),
    ("pool2 64x14x14", "pool", 64, 64, 14),
]
CALLS = {"conv": ["forward", "input grad", "weight grad"], "bias_relu": ["forward", "backward"],
         "pool": ["forward", "backward"]}
# The directions a training step runs (the first layer needs no input gradient).
NOT_IN_STEP = {("conv1 1->32 28x28", "input grad")}


def arrays(arg: dict) -> dict:
    """The layer's float32 operands, the same in every worker."""
    rng = np.random.default_rng(0)
    n, cin, cout, hw = arg["batch"], arg["cin"], arg["cout"], arg["hw"]
    normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    if arg["kind"] == "conv":
        return {"x": normal(n, cin, hw, hw), "w": normal(cout, cin, 3, 3) / np.float32(3 * cin ** 0.5),
                "dy": normal(n, cout, hw, hw)}
    if arg["kind"] == "bias_relu":
        return {"y": normal(n, cout, hw, hw), "b": normal(cout) * np.float32(0.1), "dy": normal(n, cout, hw, hw)}
    return {"x": normal(n, cin, hw, hw), "dy": normal(n, cin, hw // 2, hw // 2)}


def _summary(a: np.ndarray) -> list[float]:
    """A few numbers that two correct implementations agree on (to float32 rounding)."""
    a = np.asarray(a, np.float64)
    return [float(a.sum()), float(np.abs(a).sum()), *a.ravel()[:4].tolist()]


def build_funcgrad(arg: dict):
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.primitives import conv as C
    a = arrays(arg)
    kind = arg["kind"]
    if kind == "conv":
        geo = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
        x, w, dy = a["x"], a["w"], a["dy"]
        calls = {"forward": lambda: C.conv2d_p.impls["cpu"](x, w, **geo),
                 "input grad": lambda: C.conv2d_input_grad_p.impls["cpu"](dy, w, in_hw=x.shape[2:], **geo),
                 "weight grad": lambda: C.conv2d_weight_grad_p.impls["cpu"](dy, x, kernel_hw=(3, 3), **geo)}
    elif kind == "bias_relu":
        y, b, dy = (fnp.asarray(a[k]) for k in ("y", "b", "dy"))
        fwd = fg.jit(lambda y, b: fnp.maximum(y + fnp.reshape(b, (1, -1, 1, 1)), 0.0))
        out = fwd(y, b)
        bwd = fg.jit(lambda dy, out: (lambda g: (g, fnp.sum(g, axis=(0, 2, 3))))(fnp.where(out > 0, dy, 0.0)))
        calls = {"forward": lambda: fg.block_until_ready(fwd(y, b)),
                 "backward": lambda: fg.block_until_ready(bwd(dy, out))}
        return calls, {"forward": _summary(out)}
    else:
        geo = dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0))
        x, dy = a["x"], a["dy"]
        _, idx = C.max_pool2d_p.impls["cpu"](x, **geo)
        calls = {"forward": lambda: C.max_pool2d_p.impls["cpu"](x, **geo)[0],
                 "backward": lambda: C.max_pool2d_grad_p.impls["cpu"](dy, idx, in_hw=x.shape[2:])}
    return calls, lambda: {"forward": _summary(calls["forward"]())}


def build_torch(arg: dict):
    import torch
    torch.set_grad_enabled(False)
    a = {k: torch.from_numpy(v) for k, v in arrays(arg).items()}
    aten = torch.ops.aten
    kind = arg["kind"]
    if kind == "conv":
        x, w, dy = a["x"], a["w"], a["dy"]
        conv = dict(stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False, output_padding=[0, 0],
                    groups=1)

        def grad(mask):
            return lambda: aten.convolution_backward(dy, x, w, None, output_mask=mask, **conv)
        calls = {"forward": lambda: aten.convolution(x, w, None, **conv),
                 "input grad": grad([True, False, False]), "weight grad": grad([False, True, False])}
    elif kind == "bias_relu":
        y, b, dy = a["y"], a["b"], a["dy"]
        out = torch.relu(y + b.view(1, -1, 1, 1))
        calls = {"forward": lambda: torch.relu(y + b.view(1, -1, 1, 1)),
                 "backward": lambda: (lambda g: (g, g.sum((0, 2, 3))))(aten.threshold_backward(dy, out, 0))}
    else:
        x, dy = a["x"], a["dy"]
        pool = ([2, 2], [2, 2], [0, 0], [1, 1], False)
        _, idx = aten.max_pool2d_with_indices(x, *pool)
        calls = {"forward": lambda: aten.max_pool2d_with_indices(x, *pool)[0],
                 "backward": lambda: aten.max_pool2d_with_indices_backward(dy, x, *pool, idx)}
    return calls, lambda: {"forward": _summary(calls["forward"]().numpy())}


BUILDERS = {("layer", "funcgrad"): build_funcgrad, ("layer", "pytorch"): build_torch}


def check(case: dict, peers: list) -> None:
    """The workers' forward results agree (float32 rounding), or the timing would compare different work."""
    got = {p.name: np.array(p.hello["checks"]["forward"]) for p in peers}
    if len(got) == 2:
        a, b = got.values()
        if not np.allclose(a, b, rtol=1e-3, atol=1e-2 + 1e-5 * float(np.abs(b[1]))):   # b[1]: sum of |values|
            raise SystemExit(f"{case['label']}: the forward results differ: {got}")


def thread_env(threads: int | None) -> dict:
    """Environment variables holding numba, BLAS and OpenMP (PyTorch) to ``threads`` threads."""
    if not threads:
        return {}
    keys = ("NUMBA_NUM_THREADS", "FUNCGRAD_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS")
    return {k: str(threads) for k in keys}


def profile_step(batch: int, steps: int, limit: int) -> None:
    """fg.profiler's table of examples/mnist.py's jitted CNN step (Adam), and the CPU time per step."""
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad import optim, random
    from mnist_epoch import _load_example, data
    example = _load_example()
    model, input_shape = example.build_model("cnn")
    params, _ = model.init(random.key(0), input_shape)
    opt = optim.adam(1e-3)
    opt_state = opt.init(params)
    step, _ = example.make_steps(model, opt)
    x, y, idx = data("cnn", batch, 1)
    xb, yb = fnp.asarray(x[idx[0]]), fnp.asarray(y[idx[0]])
    for _ in range(2):
        params, opt_state, loss = step(params, opt_state, xb, yb)
    cpu = time.process_time()
    with fg.profiler.profile() as prof:
        for _ in range(steps):
            params, opt_state, loss = step(params, opt_state, xb, yb)
        fg.block_until_ready(loss)
    cpu = time.process_time() - cpu
    print(f"MNIST CNN jitted step, batch {batch}, {steps} steps, {fg.get_num_threads()} threads\n")
    print(prof.table(sort_by="self", limit=limit))
    print(f"\n{prof.wall_time / steps * 1e3:.2f} ms/step wall, {cpu / steps * 1e3:.2f} ms/step CPU")


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None, help="threads for both workers (numba, BLAS, OpenMP)")
    ap.add_argument("--profile", action="store_true", help="print the profile of funcgrad's jitted CNN step")
    ap.add_argument("--steps", type=int, default=10, help="steps to profile (--profile)")
    args = ap.parse_args(argv)
    if args.worker:
        worker(BUILDERS, MODULES, args.worker[0], args.worker[1], json.loads(args.worker[2]))
        return
    if args.profile:
        if args.threads:   # numpy's BLAS is loaded already: its pool is set through threadpoolctl
            os.environ.update(thread_env(args.threads))
            from threadpoolctl import threadpool_limits
            threadpool_limits(args.threads)
        profile_step(args.batch, args.steps, 30)
        return
    record = Record(NAME, args)
    batch = 8 if args.quick else args.batch
    layers = LAYERS[:3] if args.quick else LAYERS
    cases = [{"case": "layer", "label": label, "settle": 0.0 if args.quick else 0.02,
              "arg": {"kind": kind, "cin": cin, "cout": cout, "hw": hw, "batch": batch}}
             for label, kind, cin, cout, hw in layers]
    res = run_cases(SCRIPT, chosen(PEERS, args), cases, rounds=2 if args.quick else 15, record=record,
                    baseline="pytorch", env=thread_env(args.threads), budget_s=3 if args.quick else 30,
                    check=check, measure=False)
    rows, totals = [], {}
    for (label, kind, *_), case in zip(layers, cases):
        stats = res[case["label"]]
        for call in CALLS[kind]:
            by_peer = {peer: calls[call] for peer, calls in stats.items() if call in calls}
            record.measure(f"{label} {call}", {peer: {call: s} for peer, s in by_peer.items()}, baseline="pytorch")
            if (label, call) not in NOT_IN_STEP:
                for peer, s in by_peer.items():
                    totals[peer] = totals.get(peer, 0.0) + s["median_s"]
            torch_s = by_peer.get("pytorch", {}).get("median_s")
            rows.append({"layer": label, "direction": call, **{p: fmt_stat(s) for p, s in by_peer.items()},
                         "funcgrad / pytorch": fmt_ratio(by_peer.get("funcgrad", {}).get("median_s"), torch_s)})
    rows.append({"layer": "sum of a step's directions", "direction": "",
                 **{p: fmt_time(t) for p, t in totals.items()},
                 "funcgrad / pytorch": fmt_ratio(totals.get("funcgrad"), totals.get("pytorch"))})
    threads = f", {args.threads} thread{'s' * (args.threads != 1)}" if args.threads else ""
    record.table("conv_layers", f"MNIST CNN layers, batch {batch}{threads}, forward and backward (each framework "
                                "in its own process; interleaved medians)", rows)
    record.write(json_path(NAME, args))


if __name__ == "__main__":
    main()
