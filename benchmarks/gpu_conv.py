"""conv2d and max_pool2d on the GPU: funcgrad's implementations (im2col + cuBLAS) against PyTorch (cuDNN).

Times the three convolution primitives (forward, input gradient, weight gradient) and max-pooling (forward
and gradient) on the GPU, float32: funcgrad's GPU implementations on CuPy buffers, and PyTorch's
``torch.nn.functional`` / ``torch.nn.grad`` (cuDNN, TF32 off: float32 arithmetic, as CuPy's matmul). CuPy 14
has no cuDNN bindings of its own, so PyTorch is the cuDNN reference. Each library runs in a worker process of
its own; calls are timed with CUDA events (``_gpu.time_events``: median after warm-up); inputs are made on
the device from the same hash in both workers, and the forward outputs are compared.

    python benchmarks/gpu_conv.py [--quick] [--peers funcgrad,pytorch]
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _gpu import answer, cupy_timer, device_info, hashed_normal, run_worker, time_events, torch_timer  # noqa: E402
from _harness import Record, arguments, chosen, fmt_ratio, json_path  # noqa: E402

NAME = "gpu_conv"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "pytorch"]
# (name, x shape NCHW, w shape OIHW, padding, stride)
WORKLOADS = [
    ("mnist conv1", (128, 1, 28, 28), (32, 1, 3, 3), 1, 1),
    ("mnist conv2", (128, 32, 14, 14), (64, 32, 3, 3), 1, 1),
    ("resnet 3x3", (32, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("resnet 3x3/2", (32, 128, 28, 28), (256, 128, 3, 3), 1, 2),
]
POOL = ("mnist pool 2x2", (128, 32, 28, 28), 2)


def _out_hw(hw: int, k: int, pad: int, stride: int) -> int:
    return (hw + 2 * pad - k) // stride + 1


def _made(shape, offset, arange, to_float):
    return hashed_normal(int(np.prod(shape)), offset, arange, to_float).reshape(shape)


def _cases(quick: bool) -> list:
    return WORKLOADS[:2] if quick else WORKLOADS


def _funcgrad(arg: dict) -> dict:
    import cupy as cp

    import funcgrad
    from funcgrad.primitives import conv as C
    timer = cupy_timer()
    make = lambda shape, off: _made(shape, off, lambda n: cp.arange(n, dtype=cp.int64),  # noqa: E731
                                    lambda h: h.astype(cp.float32))
    out: dict = {"version": funcgrad.__version__, "device": device_info(), "results": {}}
    for name, xs, ws, pad, stride in _cases(arg["quick"]):
        geo = dict(stride=(stride, stride), padding=(pad, pad), dilation=(1, 1), groups=1)
        x, w = make(xs, 1), make(ws, 2) * 0.1
        oh = _out_hw(xs[2], ws[2], pad, stride)
        dy = make((xs[0], ws[0], oh, _out_hw(xs[3], ws[3], pad, stride)), 3)
        calls = {"forward": lambda: C.conv2d_p.impls["gpu"](x, w, **geo),
                 "input grad": lambda: C.conv2d_input_grad_p.impls["gpu"](dy, w, in_hw=xs[2:], **geo),
                 "weight grad": lambda: C.conv2d_weight_grad_p.impls["gpu"](dy, x, kernel_hw=ws[2:], **geo)}
        res = {call: time_events(fn, *timer) for call, fn in calls.items()}
        res["check"] = cp.asnumpy(calls["forward"]())[0, :2, :2, :2].ravel().tolist()
        out["results"][name] = res
    name, xs, k = POOL
    geo = dict(kernel=(k, k), stride=(k, k), padding=(0, 0))
    x = make(xs, 4)
    y, idx = C.max_pool2d_p.impls["gpu"](x, **geo)
    dy = make(y.shape, 5)
    out["results"][name] = {
        "max_pool forward": time_events(lambda: C.max_pool2d_p.impls["gpu"](x, **geo), *timer),
        "max_pool grad": time_events(lambda: C.max_pool2d_grad_p.impls["gpu"](dy, idx, in_hw=xs[2:]), *timer),
        "check": cp.asnumpy(y)[0, :2, :2, :2].ravel().tolist()}
    return out


def _torch(arg: dict) -> dict:
    import torch
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    F, G = torch.nn.functional, torch.nn.grad
    timer = torch_timer()
    make = lambda shape, off: _made(shape, off, lambda n: torch.arange(n, dtype=torch.int64,  # noqa: E731
                                                                        device="cuda"), lambda h: h.to(torch.float32))
    out: dict = {"version": torch.__version__, "results": {}}
    for name, xs, ws, pad, stride in _cases(arg["quick"]):
        x, w = make(xs, 1), make(ws, 2) * 0.1
        dy = make((xs[0], ws[0], _out_hw(xs[2], ws[2], pad, stride), _out_hw(xs[3], ws[3], pad, stride)), 3)
        calls = {"forward": lambda: F.conv2d(x, w, stride=stride, padding=pad),
                 "input grad": lambda: G.conv2d_input(xs, w, dy, stride=stride, padding=pad),
                 "weight grad": lambda: G.conv2d_weight(x, ws, dy, stride=stride, padding=pad)}
        res = {call: time_events(fn, *timer) for call, fn in calls.items()}
        res["check"] = calls["forward"]()[0, :2, :2, :2].double().cpu().numpy().ravel().tolist()
        out["results"][name] = res
    name, xs, k = POOL
    x = make(xs, 4)
    y, idx = F.max_pool2d(x, k, return_indices=True)
    dy = make(tuple(y.shape), 5)
    backward = torch.ops.aten.max_pool2d_with_indices_backward
    out["results"][name] = {
        "max_pool forward": time_events(lambda: F.max_pool2d(x, k, return_indices=True), *timer),
        "max_pool grad": time_events(lambda: backward(dy, x, [k, k], [k, k], [0, 0], [1, 1], False, idx), *timer),
        "check": y[0, :2, :2, :2].double().cpu().numpy().ravel().tolist()}
    return out


WORKERS = {"funcgrad": _funcgrad, "pytorch": _torch}


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds each worker may run")
    args = ap.parse_args(argv)
    if args.worker:
        answer(WORKERS[args.worker[0]](json.loads(args.worker[2])))
        return
    record = Record(NAME, args)
    got = {p: run_worker(SCRIPT, p, {"quick": args.quick}, timeout_s=args.timeout) for p in chosen(PEERS, args)}
    for p, g in got.items():
        record.payload["peers"][p] = {"version": g.get("version"), "error": g.get("error")}
    record.payload["device"] = got.get("funcgrad", {}).get("device")
    ours, theirs = got.get("funcgrad", {}).get("results", {}), got.get("pytorch", {}).get("results", {})
    rows = []
    for workload, calls in ours.items():
        other = theirs.get(workload, {})
        diff = (float(np.max(np.abs(np.subtract(calls["check"], other["check"])))) if other.get("check") else None)
        for call, s in calls.items():
            if call == "check":
                continue
            t = other.get(call, {}).get("median_s")
            rows.append({"workload": workload, "call": call, "funcgrad ms": f"{s['median_s'] * 1e3:.3f}",
                         "PyTorch cuDNN ms": "" if t is None else f"{t * 1e3:.3f}",
                         "funcgrad / PyTorch": fmt_ratio(s["median_s"], t),
                         "max |diff| of outputs": "" if diff is None else f"{diff:.1e}"})
            record.payload["measurements"].append({"workload": workload, "call": call, "funcgrad": s,
                                                   "pytorch": other.get(call)})
    errors = "; ".join(f"{p}: {g['error']}" for p, g in got.items() if "error" in g)
    record.table("gpu_conv", "conv2d and max_pool2d on the GPU, float32: median time per call (CUDA events)",
                 rows or [{"workload": "none", "call": errors or "no GPU"}], note=errors)
    record.write(json_path(record.name, args))


if __name__ == "__main__":
    main()
