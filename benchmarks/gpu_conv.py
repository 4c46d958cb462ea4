"""conv2d and max_pool2d on the GPU: funcgrad's implementations (im2col + cuBLAS) against PyTorch (cuDNN).

    python benchmarks/gpu_conv.py [--quick]

Times the three primitives (forward, input gradient, weight gradient) on raw
CuPy buffers with ``cupyx.profiler.benchmark`` (GPU time, CUDA events; median
of the repeats), and the same convolutions through ``torch.nn.functional`` /
``torch.nn.grad`` (cuDNN, TF32 off) when PyTorch is installed. CuPy 14 has no cuDNN
bindings of its own, so PyTorch is the cuDNN reference. Prints a table and
writes the JSON like the other benchmarks. Without a usable GPU it says so and
exits cleanly.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import Record, arguments, json_path  # noqa: E402

# (name, x shape NCHW, w shape OIHW, padding, stride)
WORKLOADS = [
    ("mnist conv1", (128, 1, 28, 28), (32, 1, 3, 3), 1, 1),
    ("mnist conv2", (128, 32, 14, 14), (64, 32, 3, 3), 1, 1),
    ("resnet 3x3", (32, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("resnet 3x3/2", (32, 128, 28, 28), (256, 128, 3, 3), 1, 2),
]
QUICK = WORKLOADS[:2]


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cudnn.allow_tf32 = False   # float32 arithmetic, as CuPy's matmul (no TF32 by default)
    return torch


def _gpu_ms(fn, repeats: int) -> float:
    from cupyx.profiler import benchmark
    import numpy as np
    result = benchmark(fn, n_repeat=repeats, n_warmup=3)
    return float(np.median(result.gpu_times[0])) * 1e3


def run_workload(name, x_shape, w_shape, pad, stride, repeats, torch):
    import cupy as cp

    from funcgrad.primitives import conv as C

    geo = dict(stride=(stride, stride), padding=(pad, pad), dilation=(1, 1), groups=1)
    x = cp.random.standard_normal(x_shape, dtype=cp.float32)
    w = cp.random.standard_normal(w_shape, dtype=cp.float32) * 0.1
    y = C.conv2d_p.impls["gpu"](x, w, **geo)
    dy = cp.random.standard_normal(y.shape, dtype=cp.float32)
    ours = {
        "forward": lambda: C.conv2d_p.impls["gpu"](x, w, **geo),
        "input grad": lambda: C.conv2d_input_grad_p.impls["gpu"](dy, w, in_hw=x_shape[2:], **geo),
        "weight grad": lambda: C.conv2d_weight_grad_p.impls["gpu"](dy, x, kernel_hw=w_shape[2:], **geo),
    }
    theirs = {}
    if torch is not None:
        tx, tw, tdy = (torch.from_dlpack(a) for a in (x, w, dy))
        F, G = torch.nn.functional, torch.nn.grad
        theirs = {
            "forward": lambda: F.conv2d(tx, tw, stride=stride, padding=pad),
            "input grad": lambda: G.conv2d_input(tx.shape, tw, tdy, stride=stride, padding=pad),
            "weight grad": lambda: G.conv2d_weight(tx, tw.shape, tdy, stride=stride, padding=pad),
        }
        ref = theirs["forward"]()
        err = float(cp.abs(y - cp.from_dlpack(ref)).max())
        assert err < 1e-2 * max(1.0, float(cp.abs(y).max())), f"{name}: im2col and cuDNN disagree by {err}"
    rows = []
    for call, fn in ours.items():
        row = {"workload": name, "call": call, "im2col+cuBLAS ms": f"{_gpu_ms(fn, repeats):.3f}"}
        if call in theirs:
            t = _gpu_ms(theirs[call], repeats)
            row["torch cuDNN ms"] = f"{t:.3f}"
            row["ratio"] = f"{float(row['im2col+cuBLAS ms']) / t:.2f}x"
        rows.append(row)
    return rows


def run_pool(name, x_shape, kernel, repeats, torch):
    """max_pool2d forward (values and argmax) and its gradient, against PyTorch's."""
    import cupy as cp

    from funcgrad.primitives import conv as C

    geo = dict(kernel=(kernel, kernel), stride=(kernel, kernel), padding=(0, 0))
    x = cp.random.standard_normal(x_shape, dtype=cp.float32)
    y, idx = C.max_pool2d_p.impls["gpu"](x, **geo)
    dy = cp.random.standard_normal(y.shape, dtype=cp.float32)
    ours = {"max_pool forward": lambda: C.max_pool2d_p.impls["gpu"](x, **geo),
            "max_pool grad": lambda: C.max_pool2d_grad_p.impls["gpu"](dy, idx, in_hw=x_shape[2:])}
    theirs = {}
    if torch is not None:
        tx, tdy = torch.from_dlpack(x), torch.from_dlpack(dy)
        _, tidx = torch.nn.functional.max_pool2d(tx, kernel, return_indices=True)
        backward = torch.ops.aten.max_pool2d_with_indices_backward
        theirs = {"max_pool forward": lambda: torch.nn.functional.max_pool2d(tx, kernel, return_indices=True),
                  "max_pool grad": lambda: backward(tdy, tx, [kernel] * 2, [kernel] * 2, [0, 0], [1, 1], False, tidx)}
    rows = []
    for call, fn in ours.items():
        row = {"workload": name, "call": call, "im2col+cuBLAS ms": f"{_gpu_ms(fn, repeats):.3f}"}
        if call in theirs:
            t = _gpu_ms(theirs[call], repeats)
            row["torch cuDNN ms"] = f"{t:.3f}"
            row["ratio"] = f"{float(row['im2col+cuBLAS ms']) / t:.2f}x"
        rows.append(row)
    return rows


def main() -> int:
    args = arguments("gpu_conv", __doc__).parse_args()
    from funcgrad.backends.gpu import _detect
    if not _detect.gpu_available():
        print(f"gpu_conv: no usable GPU ({_detect.gpu_unavailable_reason()}); nothing to time")
        return 0
    torch = _torch_cuda()
    rec = Record("gpu_conv", args)
    repeats = 5 if args.quick else 30
    rows = []
    for workload in (QUICK if args.quick else WORKLOADS):
        rows += run_workload(*workload, repeats, torch)
    rows += run_pool("mnist pool", (16 if args.quick else 128, 32, 28, 28), 2, repeats, torch)
    for r in rows:   # the harness's measurement records: one per library and call
        for peer, column in (("funcgrad", "im2col+cuBLAS ms"), ("torch", "torch cuDNN ms")):
            if r.get(column):
                rec.payload["measurements"].append({"workload": r["workload"], "peer": peer, "call": r["call"],
                                                    "median_s": float(r[column]) * 1e-3})
    note = "" if torch is not None else "PyTorch with CUDA is not installed: no cuDNN column."
    rec.table("gpu_conv", "conv2d and max_pool2d, float32, on the GPU: median GPU time per call", rows,
              ["workload", "call", "im2col+cuBLAS ms", "torch cuDNN ms", "ratio"],
              note=note + " funcgrad's column is its GPU implementation (im2col + cuBLAS for conv, CuPy for pooling).")
    rec.write(json_path("gpu_conv", args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
