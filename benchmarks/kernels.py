"""Benchmark funcgrad's CPU kernels (hand-written and jit-fused) against numpy (and PyTorch CPU).

    python benchmarks/kernels.py [--repeats 15] [--json PATH] [--quick]

Workloads: row softmax 4096x4096 f32 (the numba kernel, ``nn.softmax`` and a
jit-fused ``fnp`` composite); relu(x*w+b) on 8M f32 elements (jit fusion vs
numpy's plain expression and its best ``out=`` form; the target is
>= 2.5x the plain expression); softmax cross-entropy fwd+bwd at
(128, 10) and (4096, 1000) f32; conv2d layers of an MNIST CNN (batch 128,
3x3, padding 1, 28x28: 1->32 forward + weight grad, 32->64 forward + input
and weight grads), max-pool 2x2 fwd+bwd; scatter_add_rows vs np.add.at.
Contenders run interleaved (one call of each per round, after warm-up) and
the table reports medians, the spread (p90/p10) and speedups vs numpy.
Every output buffer is allocated once outside the timed region, as the
library's planned buffers will be; the numpy baselines get the same favour
(their best ``out=`` form). The machine is shared: rerun when spreads are
wide. JSON goes to --json with thread counts and GLIBC_TUNABLES.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from funcgrad.backends.cpu import _threads  # noqa: E402  (before torch/numba)
from funcgrad.backends.cpu import kernels_conv as kc  # noqa: E402
from funcgrad.backends.cpu import kernels_scatter as ksc  # noqa: E402
from funcgrad.backends.cpu import kernels_softmax as ks  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # torch is optional
    torch = None


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------

def run_interleaved(contenders: dict, repeats: int, warmup: int = 2,
                    settle_s: float = 0.02, inner: int = 1):
    """Median/p10/p90 ms per call per contender, interleaved per round.

    Big workloads: a short untimed sleep before each timed call lets the
    previous contender's spinning worker threads (OpenMP in torch,
    OpenBLAS) go idle, so they do not steal the cores from the next one.
    Tiny workloads (settle_s=0, inner>1): ``inner`` back-to-back calls are
    timed together, as in a training loop; a sleep would leave caches and
    branch predictors cold and triple a 20 us op.
    """
    for _ in range(warmup):
        for fn in contenders.values():
            fn()
    times = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            if settle_s:
                time.sleep(settle_s)
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            times[name].append((time.perf_counter() - t0) / inner)
    out = {}
    for name, ts in times.items():
        ts = np.array(ts)
        out[name] = dict(median_ms=float(np.median(ts) * 1e3),
                         p10_ms=float(np.percentile(ts, 10) * 1e3),
                         p90_ms=float(np.percentile(ts, 90) * 1e3))
    return out


# ---------------------------------------------------------------------------
# workloads: each returns {contender name: zero-arg callable}
# ---------------------------------------------------------------------------

def softmax_case(rng, n=4096, c=4096):
    x = rng.standard_normal((n, c), dtype=np.float32)
    o_fg, o_np = np.empty_like(x), np.empty_like(x)

    def numpy_out():
        np.subtract(x, x.max(1, keepdims=True), out=o_np)
        np.exp(o_np, out=o_np)
        np.divide(o_np, o_np.sum(1, keepdims=True), out=o_np)

    cont = {"funcgrad": lambda: ks.softmax(x, o_fg), "numpy out=": numpy_out}
    if torch is not None:
        xt = torch.from_numpy(x)
        cont["torch"] = lambda: torch.softmax(xt, 1)
    return cont


def softmax_api_case(rng, n=4096, c=4096):
    """The same softmax through the public API: the primitive, and a jit-fused composite."""
    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    x_np = rng.standard_normal((n, c), dtype=np.float32)
    x = fnp.array(x_np)
    o_np = np.empty_like(x_np)

    def composite(v):
        e = fnp.exp(v - fnp.max(v, axis=1, keepdims=True))
        return e / fnp.sum(e, axis=1, keepdims=True)

    fused = fg.jit(composite)

    def numpy_out():
        np.subtract(x_np, x_np.max(1, keepdims=True), out=o_np)
        np.exp(o_np, out=o_np)
        np.divide(o_np, o_np.sum(1, keepdims=True), out=o_np)

    return {"funcgrad nn.softmax": lambda: nn.softmax(x, axis=1), "numpy out=": numpy_out,
            "funcgrad jit(fnp)": lambda: fused(x)}


def relu_affine_case(rng, n=8 * 1024 * 1024):
    """relu(x * w + b) elementwise on 8M float32: one fused kernel vs numpy's temporaries."""
    import funcgrad as fg
    import funcgrad.nn as nn
    import funcgrad.numpy as fnp
    x_np, w_np, b_np = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    x, w, b = fnp.array(x_np), fnp.array(w_np), fnp.array(b_np)
    fused = fg.jit(lambda x, w, b: nn.relu(x * w + b))
    o_np = np.empty_like(x_np)

    def numpy_out():
        np.multiply(x_np, w_np, out=o_np)
        np.add(o_np, b_np, out=o_np)
        np.maximum(o_np, 0, out=o_np)

    cont = {"numpy plain": lambda: np.maximum(x_np * w_np + b_np, 0), "funcgrad jit": lambda: fused(x, w, b),
            "numpy out=": numpy_out}
    if torch is not None:
        xt, wt, bt = (torch.from_numpy(a) for a in (x_np, w_np, b_np))
        cont["torch"] = lambda: torch.relu(xt * wt + bt)
    return cont


def xent_case(rng, n, c):
    """Mean softmax cross-entropy, forward + backward (dlogits)."""
    x = rng.standard_normal((n, c), dtype=np.float32)
    labels = rng.integers(0, c, n)
    loss, lse = np.empty(n, np.float32), np.empty(n, np.float32)
    g = np.full(n, 1.0 / n, np.float32)
    dx = np.empty_like(x)
    m_np, p_np = np.empty((n, 1), np.float32), np.empty_like(x)
    rows = np.arange(n)

    def fg():
        ks.softmax_xent_fwd(x, labels, loss, lse)
        ks.softmax_xent_bwd(x, labels, lse, g, dx)
        return loss.mean()

    def numpy_out():
        np.max(x, axis=1, keepdims=True, out=m_np)
        np.subtract(x, m_np, out=p_np)
        np.exp(p_np, out=p_np)
        s = p_np.sum(1, keepdims=True)
        value = (np.log(s[:, 0]) + m_np[:, 0] - x[rows, labels]).mean()
        np.divide(p_np, s, out=p_np)
        p_np[rows, labels] -= 1.0
        np.multiply(p_np, np.float32(1.0 / n), out=p_np)
        return value

    cont = {"funcgrad": fg, "numpy out=": numpy_out}
    if torch is not None:
        xt0 = torch.from_numpy(x)
        lt = torch.from_numpy(labels)

        def torch_fb():
            xt = xt0.detach().requires_grad_()
            F.cross_entropy(xt, lt).backward()
        cont["torch"] = torch_fb
    return cont


def _numpy_conv_layer(x, w, pad, need_dx):
    """numpy im2col reference layer (stride 1, 3x3): y, then dx/dw from dy."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    w2 = w.reshape(o, -1)

    def step():
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), (2, 3))
        cols = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, h * wd)
        y = np.matmul(w2, cols)
        dy = y  # stand-in cotangent of the right shape
        dw = np.tensordot(dy, cols, axes=([0, 2], [0, 2]))
        if need_dx:
            dcols = np.matmul(w2.T, dy).reshape(n, c, kh, kw, h, wd)
            dxp = np.zeros_like(xp)
            for i in range(kh):
                for j in range(kw):
                    dxp[:, :, i:i + h, j:j + wd] += dcols[:, :, i, j]
            return dw, dxp[:, :, pad:-pad, pad:-pad]
        return dw
    return step


def conv_case(rng, cin, cout, need_dx, n=128, hw=28):
    x = rng.standard_normal((n, cin, hw, hw), dtype=np.float32)
    w = (rng.standard_normal((cout, cin, 3, 3), dtype=np.float32)
         / np.sqrt(9 * cin)).astype(np.float32)

    def fg():
        y = kc.conv2d_forward(x, w, 1, 1)
        dw = kc.conv2d_backward_weight(y, x, w.shape, 1, 1)
        if need_dx:
            return dw, kc.conv2d_backward_input(y, w, x.shape, 1, 1)
        return dw

    cont = {"funcgrad": fg, "numpy im2col": _numpy_conv_layer(x, w, 1, need_dx)}
    if torch is not None:
        xt0, wt0 = torch.from_numpy(x), torch.from_numpy(w)

        def torch_fb():
            xt = xt0.detach().requires_grad_(need_dx)
            wt = wt0.detach().requires_grad_()
            y = F.conv2d(xt, wt, padding=1)
            y.backward(y.detach())
        cont["torch"] = torch_fb
    return cont


def maxpool_case(rng, n=128, c=32, hw=28):
    x = rng.standard_normal((n, c, hw, hw), dtype=np.float32)

    def fg():
        y, idx = kc.max_pool2d_forward(x, 2)
        return kc.max_pool2d_backward(y, idx, x.shape)

    def numpy_ref():
        win = x.reshape(n, c, hw // 2, 2, hw // 2, 2)
        y = win.max(axis=(3, 5))
        mask = win == y[:, :, :, None, :, None]
        return (mask * y[:, :, :, None, :, None]).reshape(x.shape)

    cont = {"funcgrad": fg, "numpy reshape": numpy_ref}
    if torch is not None:
        xt0 = torch.from_numpy(x)

        def torch_fb():
            xt = xt0.detach().requires_grad_()
            y = F.max_pool2d(xt, 2)
            y.backward(y.detach())
        cont["torch"] = torch_fb
    return cont


def scatter_case(rng, m, n, k):
    """Gradient of a row gather (embedding lookup): out[idx[i]] += src[i]."""
    idx = rng.integers(0, m, n)
    src = rng.standard_normal((n, k), dtype=np.float32)
    out_fg, out_np = np.zeros((m, k), np.float32), np.zeros((m, k), np.float32)

    # Accumulate into the same buffers every call: zero-filling a 25 MB
    # table would dominate the timing and is not part of the scatter.
    def fg():
        ksc.scatter_add_rows(out_fg, idx, src)

    def numpy_at():
        np.add.at(out_np, idx, src)

    cont = {"funcgrad": fg, "np.add.at": numpy_at}
    if torch is not None:
        it, st = torch.from_numpy(idx), torch.from_numpy(src)
        ot = torch.zeros(m, k)

        def torch_ia():
            ot.index_add_(0, it, st)
        cont["torch index_add_"] = torch_ia
    return cont


def select_case(rng, scalar_other, shape=(128, 512)):
    """fnp.where / the select primitive under a random mask (a ReLU's backward pass)."""
    import funcgrad.numpy as fnp
    c = rng.random(shape) > 0.5
    x = rng.standard_normal(shape, dtype=np.float32)
    y = np.float32(0.0) if scalar_other else rng.standard_normal(shape, dtype=np.float32)
    cf, xf, yf = fnp.array(c), fnp.array(x), (0.0 if scalar_other else fnp.array(y))
    cont = {"funcgrad": lambda: fnp.where(cf, xf, yf), "np.where": lambda: np.where(c, x, y)}
    if torch is not None:
        ct, xt, yt = torch.from_numpy(c), torch.from_numpy(x), torch.as_tensor(y)
        cont["torch.where"] = lambda: torch.where(ct, xt, yt)
    return cont


# ---------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--quick", action="store_true",
                    help="fewer repeats (smoke test)")
    ap.add_argument("--json", default=str(Path(__file__).parent / "results"
                                          / "kernels.json"))
    ap.add_argument("--only", default="", help="run only the workloads whose name contains this text")
    args = ap.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    rng = np.random.default_rng(0)

    # (name, make contenders, calls per timing, settle sleep before timing)
    cases = [
        ("softmax 4096x4096 f32", lambda: softmax_case(rng)),
        ("softmax 4096x4096 f32 (public API)", lambda: softmax_api_case(rng)),
        ("relu(x*w+b) 8M f32", lambda: relu_affine_case(rng)),
        ("softmax xent fwd+bwd 128x10", lambda: xent_case(rng, 128, 10), 200, 0),
        ("softmax xent fwd+bwd 4096x1000", lambda: xent_case(rng, 4096, 1000)),
        ("conv 1->32 3x3 B128 28x28 fwd+dw", lambda: conv_case(rng, 1, 32, False)),
        ("conv 32->64 3x3 B128 28x28 fwd+dx+dw", lambda: conv_case(rng, 32, 64, True)),
        ("max_pool 2x2 B128 C32 28x28 fwd+bwd", lambda: maxpool_case(rng)),
        ("scatter_add_rows 50000x128 <- 4096",
         lambda: scatter_case(rng, 50000, 4096, 128), 20, 0),
        ("scatter_add_rows 1000x1 <- 100000",
         lambda: scatter_case(rng, 1000, 100000, 1), 20, 0),
        ("where 128x512 f32, random mask", lambda: select_case(rng, False), 50, 0),
        ("where 128x512 f32, scalar other side", lambda: select_case(rng, True), 50, 0),
    ]
    results = []
    print(f"threads: funcgrad/numba {_threads.get_num_threads()}, torch "
          f"{torch.get_num_threads() if torch else '-'}; GLIBC_TUNABLES="
          f"{os.environ.get('GLIBC_TUNABLES', '')!r}")
    header = f"{'workload':40s} {'contender':18s} {'median ms':>10s} " \
             f"{'p90/p10':>8s} {'speedup vs numpy':>17s}"
    print(header)
    print("-" * len(header))
    for name, make, *opts in cases:
        if args.only not in name:
            continue
        inner, settle = opts if opts else (1, 0.02)
        cont = make()
        timing = run_interleaved(cont, repeats, settle_s=settle, inner=inner)
        base_name = [k for k in cont if not k.startswith(("funcgrad", "torch"))][0]
        base = timing[base_name]["median_ms"]
        for cname, t in timing.items():
            t["speedup_vs_numpy"] = base / t["median_ms"]
            spread = t["p90_ms"] / t["p10_ms"]
            print(f"{name:40s} {cname:18s} {t['median_ms']:10.3f} "
                  f"{spread:8.2f} {t['speedup_vs_numpy']:16.2f}x")
        results.append(dict(workload=name, baseline=base_name,
                            calls_per_timing=inner, settle_s=settle,
                            timings=timing))
        print()

    meta = dict(
        funcgrad_threads=_threads.get_num_threads(),
        numba_threading_layer=_threads.threading_layer(),
        torch_threads=torch.get_num_threads() if torch else None,
        torch_version=torch.__version__ if torch else None,
        numpy_version=np.__version__,
        cpu_count=os.cpu_count(),
        glibc_tunables=os.environ.get("GLIBC_TUNABLES", ""),
        openblas_num_threads=os.environ.get("OPENBLAS_NUM_THREADS", ""),
        machine=platform.processor() or platform.machine(),
        python=platform.python_version(),
        repeats=repeats,
    )
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(meta=meta, results=results), indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
