"""The benchmark tables and plots of docs/benchmarks.md and the README, generated from the JSON results.

Every generated piece sits between markers, ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``:

* ``RESULT/TABLE``: a table a benchmark wrote (``benchmarks/results/RESULT.json``, its ``tables[TABLE]``),
  with the command that produced it and the machine it ran on;
* ``RESULT/plot:SWEEP``: a sweep's plot (PNG into docs/img/) and its numbers as a table;
* ``headline``: the README's summary, one row per headline workload, from several results.

A piece whose JSON is missing says so (and how to measure it) instead of showing numbers.

    python benchmarks/render.py            # rewrite the tables and plots from benchmarks/results/*.json
    python benchmarks/render.py --check    # exit 1 when a table is out of date (no files written)
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _harness import RESULTS, fmt_ratio, fmt_time, markdown_table  # noqa: E402
from run_all import BENCHMARKS, GPU_BENCHMARKS  # noqa: E402

DOCS = [os.path.join(ROOT, "docs", "benchmarks.md"), os.path.join(ROOT, "README.md")]
IMG = os.path.join(ROOT, "docs", "img")
MARKER = re.compile(r"(<!-- bench:(?P<name>[^ ]+) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S)
NOT_YET = "*Not yet measured with the own-process method.*"

# The README's headline rows: (workload, result, workload in the JSON, {column: (peer, call)})
HEADLINE = [
    ("MLP training step 784-512-512-10, B=128, `jit`", "mlp_step", "MLP step, B=128",
     {"funcgrad": ("funcgrad", "jit"), "JAX": ("jax", "jit"), "PyTorch": ("pytorch", "call")}),
    ("MLP `jit(grad)` through `vmap(dot)`, B=128", "batched_contractions", "MLP 784-512-512-10, grad through vmap(dot), B=128",
     {"funcgrad": ("funcgrad", "step"), "JAX": ("jax", "step"), "PyTorch": ("pytorch", "step")}),
    ("per-example grads of a 512x784 linear layer, B=128", "batched_contractions",
     "per-example grads of a 512x784 linear layer, B=128",
     {"funcgrad": ("funcgrad", "step"), "JAX": ("jax", "step"), "PyTorch": ("pytorch", "step")}),
    ("RNN `scan` forward+backward, T=1,000, B=32, H=128", "control_flow", "RNN scan forward+backward",
     {"funcgrad": ("funcgrad", "forward+backward"), "JAX": ("jax", "forward+backward"),
      "PyTorch": ("pytorch", "forward+backward")}),
    ("MNIST CNN training step, B=128", "mnist_epoch", "cnn step, B=128",
     {"funcgrad": ("funcgrad", "step"), "PyTorch": ("pytorch", "step")}),
    ("attention forward+backward, B*H=8, N=4,096, d=64", "attention", "B*H=8, N=4096, d=64, non-causal",
     {"funcgrad": ("funcgrad", "flash fwd+bwd"), "PyTorch": ("pytorch", "sdpa fwd+bwd")}),
]


def command_for(result: str) -> str:
    for script, extra, name in BENCHMARKS + GPU_BENCHMARKS:
        if name == result:
            return " ".join(["python", f"benchmarks/{script}.py", *extra])
    return "python benchmarks/run_all.py"


def load_results(folder: str = RESULTS) -> dict[str, dict]:
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            payload = json.load(f)
        if isinstance(payload, dict) and "benchmark" in payload and payload.get("mode") != "quick":
            out[os.path.basename(path)[:-5]] = payload
    return out


def machine_line(payload: dict) -> str:
    """Where and when: CPU, cores, SIMD, thread counts, load, peers' versions (and the GPU, for GPU results)."""
    gpu = (payload.get("device") or {}).get("gpu")
    if gpu:
        dev = payload["device"]
        peers = [f"{k} {v.get('version')}" for k, v in payload.get("peers", {}).items() if v.get("version")]
        return (f"`{payload.get('command', '')}` on an {gpu} ({dev.get('memory_gib', '?')} GiB, "
                f"{dev.get('multiprocessors', '?')} SMs, CUDA runtime {dev.get('cuda_runtime', '?')}, "
                f"CuPy {dev.get('cupy', '?')}); {payload.get('timestamp', '?')[:10]}; {', '.join(peers)}.")
    env = payload.get("environment", {})
    flags = set(env.get("simd_flags", []))
    simd = ["AVX-512"] if any(f.startswith("avx512") for f in flags) else ["AVX2"] if "avx2" in flags else []
    peers = [f"{k} {v.get('version')}" for k, v in payload.get("peers", {}).items() if "missing" not in v]
    missing = ", ".join(k for k, v in payload.get("peers", {}).items() if "missing" in v)
    load = env.get("load_average") or ["?"]
    parts = [f"`{payload.get('command', '')}` on {env.get('cpu_model', '?')}, {env.get('cpu_count', '?')} cores"
             f"{' (' + simd[0] + ')' if simd else ''}, numba threads {env.get('numba_threads', '?')}, "
             f"load {load[0]} before and {(env.get('load_average_after') or ['?'])[0]} after"
             + (f", float32 GEMM {env['gemm_gflops']:g} GFLOP/s before and {env.get('gemm_gflops_after', '?')} after"
                if env.get("gemm_gflops") else ""),
             payload.get("timestamp", "?")[:10], *peers[:1]]
    text = "; ".join(parts) + "".join(f", {p}" for p in peers[1:])
    return text + (f"; not installed: {missing}." if missing else ".")


def table_block(payload: dict, key: str) -> str:
    t = payload["tables"][key]
    note = f"\n{t['note']}\n" if t.get("note") else ""
    return f"{markdown_table(t['columns'], t['rows'])}\n{note}\n{machine_line(payload)}\n"


def sweep_block(payload: dict, result: str, key: str, write: bool) -> str:
    s = payload["sweeps"][key]
    png = f"bench-{result}-{key}.png"
    if write:
        plot(s, os.path.join(IMG, png))
    xs = sorted({x for pts in s["series"].values() for x, _ in pts})
    rows = [{s["x"]: f"{x:,}", **{label: _num(dict(map(tuple, pts)).get(x)) for label, pts in s["series"].items()}}
            for x in xs]
    columns = [s["x"], *s["series"]]
    return (f"![{s['title']}](img/{png})\n\n{s['title']} ({s['y']}):\n\n{markdown_table(columns, rows)}\n\n"
            f"{machine_line(payload)}\n")


def _num(v) -> str:
    if v is None:
        return ""
    return f"{v:.3g}" if v < 100 else f"{v:,.0f}"


def plot(sweep: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for label, pts in sweep["series"].items():
        xs, ys = zip(*sorted(pts))
        ax.plot(xs, ys, marker="o", label=label)
    if sweep.get("logx", True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({x for pts in sweep["series"].values() for x, _ in pts}))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    if sweep.get("logy", True):
        ax.set_yscale("log")
    ax.set_xlabel(sweep["x"])
    ax.set_ylabel(sweep["y"])
    ax.set_title(sweep["title"], fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def _find(payload: dict, workload: str, peer: str, call: str) -> dict | None:
    for m in payload.get("measurements", []):
        if m["workload"].startswith(workload) and m["peer"] == peer and m["call"] == call:
            return m
    return None


def headline_block(results: dict) -> str:
    rows, used = [], []
    columns = ["workload", "funcgrad", "JAX", "PyTorch", "funcgrad / JAX", "funcgrad / PyTorch"]
    for label, result, workload, cells in HEADLINE:
        payload = results.get(result)
        if payload is None:
            rows.append({"workload": label, "funcgrad": NOT_YET.strip("*")})
            continue
        used.append(result)
        got = {col: _find(payload, workload, *pc) for col, pc in cells.items()}
        if not got.get("funcgrad"):
            rows.append({"workload": label, "funcgrad": f"not in {result}.json"})
            continue
        row = {"workload": label}
        for col, m in got.items():
            missing = payload.get("peers", {}).get(cells[col][0], {}).get("missing")
            row[col] = f"{fmt_time(m['median_s'])} ±{m['spread']:.0%}" if m else (missing or "")
        fg = got.get("funcgrad")
        for col in ("JAX", "PyTorch"):
            other = got.get(col)
            row[f"funcgrad / {col}"] = fmt_ratio(fg and fg["median_s"], other and other["median_s"])
        rows.append(row)
    lines = [markdown_table(columns, rows), ""]
    if not used:
        lines.append("Run `python benchmarks/run_all.py`, then `python benchmarks/render.py`, to fill it in.")
    else:
        payload = results[used[0]]
        env = payload.get("environment", {})
        lines.append(f"Medians ± spread ((max - min) / median) of interleaved rounds, each library in its own "
                     f"process; {env.get('cpu_model', '?')}, {env.get('cpu_count', '?')} cores, "
                     + ("every library held to one thread, " if env.get("numba_threads") == 1 else "")
                     + (f"pinned to CPU {pinned}, " if (pinned := env.get("variables", {}).get("FUNCGRAD_BENCH_CPUS"))
                        else "")
                     + f"{payload.get('timestamp', '?')[:10]}.")
    return "\n".join(lines) + "\n"


def _median(xs: list) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def gpu_headline_block(results: dict) -> str:
    """The README's GPU summary: the MLP step and epoch, and FlashAttention at N=4096, against the peers."""
    step, attn = results.get("gpu_step"), results.get("gpu_attention")
    if step is None and attn is None:
        return f"{NOT_YET} Measure it with `python benchmarks/run_all.py --gpu`, then `python benchmarks/render.py`.\n"
    lines = []
    if step is not None:
        got = {(m["peer"], m["call"]): m for m in step.get("measurements", []) if "step" in m}
        rows = []
        for label, key in (("funcgrad `jit`", ("funcgrad", "jit")),
                           ("funcgrad `jit`, CUDA graph", ("funcgrad", "jit + CUDA graph")),
                           ("funcgrad eager", ("funcgrad", "eager")),
                           ("JAX `jit`", ("jax", "jit")), ("PyTorch eager", ("pytorch", "eager"))):
            m = got.get(key)
            if m:
                rows.append({"MLP 784-512-512-10, B=128, float32": label, "step": fmt_time(m["step"]["median_s"]),
                             "epoch (469 steps)": fmt_time(_median(m["epoch_s"]))})
        base = got.get(("pytorch", "eager"))
        for row, key in zip(rows, [k for k in (("funcgrad", "jit"), ("funcgrad", "jit + CUDA graph"),
                                               ("funcgrad", "eager"), ("jax", "jit"), ("pytorch", "eager"))
                                   if k in got]):
            row["step / PyTorch"] = fmt_ratio(got[key]["step"]["median_s"], base and base["step"]["median_s"])
        lines += [markdown_table(list(rows[0]) if rows else ["MLP"], rows), "", machine_line(step), ""]
    if attn is not None:
        rows = []
        for m in attn.get("measurements", []):
            c = m["config"]
            if c["n"] != 4096 or c["d"] not in (64, 128) or c["dtype"] != "bfloat16":
                continue
            fl_f, fl_b = m["flops"]
            fg, pt = m.get("funcgrad", {}), m.get("pytorch", {})
            tf = lambda f, s: f / s["median_s"] / 1e12 if s and "median_s" in s else None  # noqa: E731
            vals = [tf(fl_f, fg.get("kernel fwd")), tf(fl_f, pt.get("sdpa fwd")), tf(fl_b, fg.get("kernel bwd")),
                    tf(fl_b, pt.get("sdpa bwd"))]
            rows.append({"FlashAttention bf16, N=4,096": f"d={c['d']}{', causal' if c['causal'] else ''}",
                         "funcgrad fwd": _num(vals[0]), "SDPA flash fwd": _num(vals[1]),
                         "fwd ratio": fmt_ratio(vals[0], vals[1]).replace("x", "") if vals[0] and vals[1] else "",
                         "funcgrad bwd": _num(vals[2]), "SDPA flash bwd": _num(vals[3]),
                         "bwd ratio": fmt_ratio(vals[2], vals[3]).replace("x", "") if vals[2] and vals[3] else ""})
        if rows:
            lines += ["TFLOP/s (ratio: funcgrad / SDPA, higher is better):", "",
                      markdown_table(list(rows[0]), rows), "", machine_line(attn)]
    return "\n".join(lines).rstrip("\n") + "\n"


def block(name: str, results: dict, write: bool) -> str:
    if name == "headline":
        return headline_block(results)
    if name == "gpu_headline":
        return gpu_headline_block(results)
    result, _, key = name.partition("/")
    payload = results.get(result)
    is_plot = key.startswith("plot:")
    key = key.removeprefix("plot:")
    if payload is None or key not in payload.get("sweeps" if is_plot else "tables", {}):
        return f"{NOT_YET} Measure it with `{command_for(result)}`, then `python benchmarks/render.py`.\n"
    return sweep_block(payload, result, key, write) if is_plot else table_block(payload, key)


def render(text: str, results: dict, write: bool) -> tuple[str, list[str]]:
    """The text with every marked block regenerated, and the names of the blocks that changed."""
    changed = []

    def sub(m: re.Match) -> str:
        body = block(m["name"], results, write)
        if body != m["body"]:
            changed.append(m["name"])
        return m.group(1) + body + m.group(4)
    return MARKER.sub(sub, text), changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a generated table is out of date")
    ap.add_argument("--results", default=RESULTS, help="folder of the JSON results (default benchmarks/results)")
    args = ap.parse_args(argv)
    results = load_results(args.results)
    stale = []
    for path in DOCS:
        with open(path) as f:
            text = f.read()
        new, changed = render(text, results, write=not args.check)
        rel = os.path.relpath(path, ROOT)
        stale += [f"{rel}: {name}" for name in changed]
        if changed and not args.check:
            with open(path, "w") as f:
                f.write(new)
            print(f"rewrote {len(changed)} table(s) in {rel}")
    if args.check and stale:
        print("out of date (run python benchmarks/render.py):\n  " + "\n  ".join(stale))
        return 1
    if args.check:
        print(f"all tables up to date ({len(results)} results)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
