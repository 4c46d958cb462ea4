"""Tile-size sweep for the numba FlashAttention CPU kernels vs PyTorch SDPA.

Times ``flash_attention_forward`` and forward+backward for each
(block_q, block_k) pair, causal and non-causal, at B*H=8, N=4096, d=64,
float32 by default, with ``torch.nn.functional.scaled_dot_product_attention``
on the CPU as the baseline column when torch is importable. All
configurations are interleaved within each repeat (the machine is shared
and noisy) and medians are reported, with the spread (max/min).

    python benchmarks/attention_tiles.py                 # full sweep
    python benchmarks/attention_tiles.py --n 1024 --repeats 3 --tiles 128x128,256x256
    python benchmarks/attention_tiles.py --schedule both   # one- vs two-pass bwd

Writes JSON to ``--json`` (default benchmarks/results/attention_tiles.json).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time

_HAVE_TORCH = importlib.util.find_spec("torch") is not None

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numba  # noqa: E402

from funcgrad.backends.cpu import _threads  # noqa: E402
from funcgrad.backends.cpu.flash_attention import (  # noqa: E402
    flash_attention_backward,
    flash_attention_forward,
)

DEFAULT_TILES = "default,64x64,128x128,256x128,256x256,256x512,512x256,512x512"


def _parse_tiles(spec):
    """"256x512,..." -> [(256, 512), ...]; "default" -> (None, None), the
    kernels' own defaults (which differ between forward and backward)."""
    return [(None, None) if t == "default" else tuple(int(x) for x in t.split("x"))
            for t in spec.split(",") if t]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _flash_runner(q, k, v, do, causal, scale, bq, bk, onepass):
    """Returns a function timing (fwd, bwd) once."""
    def run():
        tf, (o, lse) = _timed(lambda: flash_attention_forward(
            q, k, v, causal=causal, scale=scale, block_q=bq, block_k=bk))
        tb, _ = _timed(lambda: flash_attention_backward(
            q, k, v, o, lse, do, causal=causal, scale=scale, block_q=bq,
            block_k=bk, onepass=onepass))
        return tf, tb
    return run


def _sdpa_runner(q, k, v, do, causal, scale):
    """Returns a function timing SDPA (fwd, bwd) once, or None."""
    if not _HAVE_TORCH:
        return None
    import torch
    import torch.nn.functional as F
    # (1, BH, N, d): one batch of BH heads, like a (B, H) model input
    tq, tk, tv = (torch.from_numpy(a)[None].clone().requires_grad_(True)
                  for a in (q, k, v))
    tdo = torch.from_numpy(do)[None].clone()

    def run():
        for t in (tq, tk, tv):
            t.grad = None
        t0 = time.perf_counter()
        o = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal,
                                           scale=scale)
        tf = time.perf_counter() - t0
        t0 = time.perf_counter()
        o.backward(tdo)
        tb = time.perf_counter() - t0
        return tf, tb
    return run


def _env_info():
    info = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_threads": numba.get_num_threads(),
        "numba_threading_layer": _threads.threading_layer(),
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES"),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if _HAVE_TORCH:
        import torch
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bh", type=int, default=8, help="batch x heads")
    ap.add_argument("--n", type=int, default=4096, help="sequence length")
    ap.add_argument("--d", type=int, default=64, help="head dim")
    ap.add_argument("--tiles", default=DEFAULT_TILES,
                    help="comma list of block_qxblock_k")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--schedule", choices=["auto", "onepass", "twopass", "both"],
                    default="auto", help="backward schedule(s) to time")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", "attention_tiles.json"))
    args = ap.parse_args(argv)

    global _HAVE_TORCH
    if args.no_torch:
        _HAVE_TORCH = False
    rng = np.random.default_rng(0)
    shape = (args.bh, args.n, args.d)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    scale = args.d ** -0.5
    tiles = _parse_tiles(args.tiles)
    schedules = {"auto": [None], "onepass": [True], "twopass": [False],
                 "both": [True, False]}[args.schedule]
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]

    results = []
    for causal in causals:
        runners = {}
        for bq, bk in tiles:
            for sched in schedules:
                name = ("default" if bq is None else f"{bq}x{bk}") + ("" if sched is None else
                                       ("/1pass" if sched else "/2pass"))
                runners[name] = _flash_runner(q, k, v, do, causal, scale,
                                              bq, bk, sched)
        sdpa = _sdpa_runner(q, k, v, do, causal, scale)
        if sdpa is not None:
            runners["sdpa"] = sdpa
        for run in runners.values():  # warm-up: compile, caches, pages
            run()
        times = {name: [] for name in runners}
        for _ in range(args.repeats):
            for name, run in runners.items():
                times[name].append(run())
        base = None
        if "sdpa" in times:
            t = np.array(times["sdpa"])
            base = (float(np.median(t[:, 0])), float(np.median(t[:, 0] + t[:, 1])))
        for name, ts in times.items():
            t = np.array(ts)
            fwd = t[:, 0]
            tot = t[:, 0] + t[:, 1]
            row = {
                "config": name, "causal": causal,
                "fwd_ms": 1e3 * float(np.median(fwd)),
                "fwd_bwd_ms": 1e3 * float(np.median(tot)),
                "bwd_ms": 1e3 * float(np.median(t[:, 1])),
                "fwd_spread": float(fwd.max() / fwd.min()),
                "fwd_bwd_spread": float(tot.max() / tot.min()),
                "fwd_all_ms": (1e3 * fwd).round(2).tolist(),
                "fwd_bwd_all_ms": (1e3 * tot).round(2).tolist(),
            }
            if base is not None:
                row["fwd_vs_sdpa"] = row["fwd_ms"] / 1e3 / base[0]
                row["fwd_bwd_vs_sdpa"] = row["fwd_bwd_ms"] / 1e3 / base[1]
            results.append(row)

    _print_table(results, args)
    out = {"args": vars(args), "env": _env_info(), "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.json}")


def _print_table(results, args):
    print(f"\nB*H={args.bh} N={args.n} d={args.d} float32, medians of "
          f"{args.repeats} interleaved repeats, {numba.get_num_threads()} threads")
    hdr = (f"{'causal':>6} {'config':>14} {'fwd ms':>9} {'xSDPA':>6} "
           f"{'fwd+bwd ms':>11} {'xSDPA':>6} {'spread':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        rf = f"{r['fwd_vs_sdpa']:.2f}" if "fwd_vs_sdpa" in r else "-"
        rb = f"{r['fwd_bwd_vs_sdpa']:.2f}" if "fwd_bwd_vs_sdpa" in r else "-"
        print(f"{str(r['causal']):>6} {r['config']:>14} {r['fwd_ms']:9.1f} {rf:>6} "
              f"{r['fwd_bwd_ms']:11.1f} {rb:>6} {r['fwd_bwd_spread']:7.2f}")


if __name__ == "__main__":
    main()
