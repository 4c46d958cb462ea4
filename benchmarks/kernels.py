"""funcgrad's CPU kernels (hand-written and jit-fused) against numpy and PyTorch on the CPU.

Workloads: row softmax 4096x4096 f32 (the numba kernel, ``nn.softmax`` and a jit-fused ``fnp`` composite);
relu(x*w+b) on 8M f32 elements (jit fusion against numpy's plain expression and its best ``out=`` form);
softmax cross-entropy forward and backward at (128, 10) and (4096, 1000) f32; conv2d layers of an MNIST CNN
(batch 128, 3x3, padding 1, 28x28: 1->32 forward + weight grad, 32->64 forward + input and weight grads);
max-pool 2x2 forward and backward; scatter_add_rows against np.add.at; where under a random mask.

funcgrad, numpy and PyTorch each run in a worker process of their own, timed in interleaved rounds (after
warm-up, with a short pause before each big call so that the previous peer's spinning threads go idle);
the table gives medians, their spread and the time relative to numpy's first form in the same run. Every
output buffer is allocated once outside the timed region, and numpy gets the same favour (its best
``out=`` form).

    python benchmarks/kernels.py [--quick] [--only softmax] [--peers funcgrad,numpy]
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _harness import Record, arguments, chosen, json_path  # noqa: E402
from _peers import long_rows, run_cases, worker  # noqa: E402

NAME = "kernels"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "numpy", "pytorch"]
MODULES = {"funcgrad": "funcgrad", "numpy": "numpy", "pytorch": "torch"}
torch = F = ks = kc = ksc = None          # loaded by the worker of the peer that uses them


def load(peer: str) -> None:
    """Import the modules the peer's contenders use (PyTorch only in its own worker)."""
    global torch, F, ks, kc, ksc
    if peer == "pytorch":
        import torch
        import torch.nn.functional as F
    elif peer == "funcgrad":
        from funcgrad.backends.cpu import kernels_conv as kc
        from funcgrad.backends.cpu import kernels_scatter as ksc
        from funcgrad.backends.cpu import kernels_softmax as ks


def owner(contender: str) -> tuple[str, str]:
    """(peer, call) of a contender's name: "funcgrad jit" -> ("funcgrad", "jit"), "torch" -> ("pytorch", "call")."""
    first, _, rest = contender.partition(" ")
    peer = {"funcgrad": "funcgrad", "torch": "pytorch"}.get(first)
    if peer is None:
        return "numpy", contender.removeprefix("numpy ")
    return peer, rest or "call"


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

QUICK = (2, 9, 10)       # the cases a smoke run times (each numba kernel costs seconds to compile)


def cases(quick: bool) -> list[tuple]:
    """(label, make(rng), calls per sample, pause before each sample); tiny sizes with ``quick``."""
    q = 16 if quick else 1                      # shrink factor
    n = 128 // q
    return [
        (f"softmax {4096 // q}x{4096 // q} f32", lambda rng: softmax_case(rng, 4096 // q, 4096 // q)),
        (f"softmax {4096 // q}x{4096 // q} f32 (public API)", lambda rng: softmax_api_case(rng, 4096 // q, 4096 // q)),
        (f"relu(x*w+b) {8 // q if q == 1 else 0.5}M f32", lambda rng: relu_affine_case(rng, 8 * 1024 * 1024 // q)),
        ("softmax xent fwd+bwd 128x10", lambda rng: xent_case(rng, 128, 10), 200 // q, 0),
        (f"softmax xent fwd+bwd {4096 // q}x1000", lambda rng: xent_case(rng, 4096 // q, 1000)),
        (f"conv 1->32 3x3 B{n} 28x28 fwd+dw", lambda rng: conv_case(rng, 1, 32, False, n=n)),
        (f"conv 32->64 3x3 B{n} 28x28 fwd+dx+dw", lambda rng: conv_case(rng, 32, 64, True, n=n)),
        (f"max_pool 2x2 B{n} C32 28x28 fwd+bwd", lambda rng: maxpool_case(rng, n=n)),
        (f"scatter_add_rows 50000x128 <- {4096 // q}", lambda rng: scatter_case(rng, 50000, 4096 // q, 128),
         20 // q, 0),
        (f"scatter_add_rows 1000x1 <- {100000 // q}", lambda rng: scatter_case(rng, 1000, 100000 // q, 1), 20 // q, 0),
        ("where 128x512 f32, random mask", lambda rng: select_case(rng, False), 50 // q, 0),
        ("where 128x512 f32, scalar other side", lambda rng: select_case(rng, True), 50 // q, 0),
    ]


def build(peer: str):
    """The builder of one peer: the case's contenders that belong to it, built from the same seed."""
    def make(arg):
        load(peer)
        label, factory, *_ = cases(arg["quick"])[arg["index"]]
        contenders = factory(np.random.default_rng(arg["index"]))
        return {owner(k)[1]: f for k, f in contenders.items() if owner(k)[0] == peer}, {}
    return make


BUILDERS = {("case", peer): build(peer) for peer in PEERS}


def main(argv=None):
    ap = arguments(NAME, __doc__)
    ap.add_argument("--only", default="", help="run only the workloads whose name contains this text")
    args = ap.parse_args(argv)
    if args.worker:
        worker(BUILDERS, MODULES, args.worker[0], args.worker[1], json.loads(args.worker[2]))
        return
    record = Record(NAME, args)
    todo = []
    for i, (label, _, *opts) in enumerate(cases(args.quick)):
        if args.only in label and (i in QUICK or not args.quick):
            inner, settle = opts if opts else (1, 0.02)
            todo.append({"case": "case", "label": label, "arg": {"index": i, "quick": args.quick},
                         "inner": inner, "settle": settle})
    results = run_cases(SCRIPT, chosen(PEERS, args), todo, rounds=2 if args.quick else 15, record=record,
                        baseline="numpy", budget_s=5 if args.quick else 60)
    record.table("kernels", "CPU kernels (each peer in its own process; interleaved medians)",
                 long_rows(results, "numpy"))
    record.write(json_path(NAME, args))


if __name__ == "__main__":
    main()
