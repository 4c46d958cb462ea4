"""What a real GPU does with bfloat16: CuPy's own bfloat16 support, and funcgrad's op table on bfloat16 GPU arrays.

funcgrad's GPU implementations route around the parts of CuPy's bfloat16 support that are missing or unreliable
(batched matmul and einsum compute in float32 while matrix products go to CuPy's cuBLAS bfloat16 GEMM, sums and
products accumulate in float32, Python scalars become bfloat16 scalars). This probe tells which CuPy functions take bfloat16 arrays as they are (so a later change may call them
directly), and checks funcgrad's results:

* ``cupy``: each array function the GPU implementations call, on bfloat16 operands: its result dtype, or its error.
* ``matmul``: CuPy's own bfloat16 matmul (2-D and batched) against float64 numpy, and funcgrad's, and their speed
  against float32 (CUDA events, medians).
* ``op_table``: every row of ``tests/op_table.py`` with a float argument, on bfloat16 GPU arrays, against float64
  numpy on the same values (the test of record's forward check), with the rows that fail on the CPU too marked.

    python benchmarks/gpu_bf16_probe.py [--out DIR] [--quick]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import numpy as np  # noqa: E402


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def probe_cupy() -> dict:
    """Each CuPy function funcgrad's GPU implementations use, on bfloat16 operands."""
    import cupy as cp
    import ml_dtypes
    bf = np.dtype(ml_dtypes.bfloat16)
    a = cp.asarray(np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6).astype(bf))
    b = cp.asarray(np.linspace(0.5, 1.5, 24, dtype=np.float32).reshape(6, 4).astype(bf))
    batch = cp.asarray(np.ones((2, 4, 6), bf))
    calls = {
        "add": lambda: a + a, "multiply by a Python float": lambda: a * 0.5,
        "multiply by a bfloat16 scalar (funcgrad's weak scalars)": lambda: cp.multiply(a, bf.type(0.1)),
        "true_divide": lambda: a / a, "around": lambda: cp.around(a),
        "exp": lambda: cp.exp(a), "sin": lambda: cp.sin(a), "tanh": lambda: cp.tanh(a), "log1p": lambda: cp.log1p(a + 3),
        "sqrt": lambda: cp.sqrt(a * a), "maximum": lambda: cp.maximum(a, 0), "where": lambda: cp.where(a > 0, a, a),
        "isnan": lambda: cp.isnan(a), "astype float32": lambda: a.astype(cp.float32),
        "astype from float32": lambda: a.astype(cp.float32).astype(bf), "sum": lambda: cp.sum(a, axis=1),
        "sum dtype=float32": lambda: cp.sum(a, axis=1, dtype=cp.float32), "cumsum": lambda: cp.cumsum(a, axis=1),
        "cumsum dtype=float32": lambda: cp.cumsum(a, axis=1, dtype=cp.float32),
        "prod dtype=float32": lambda: cp.prod(a, axis=1, dtype=cp.float32),
        "prod": lambda: cp.prod(a, axis=1), "max": lambda: cp.max(a, axis=1), "argmax": lambda: cp.argmax(a, axis=1),
        "from_dlpack": lambda: cp.from_dlpack(a),
        "sort": lambda: cp.sort(a, axis=1), "concatenate": lambda: cp.concatenate([a, a]), "flip": lambda: cp.flip(a, 1),
        "take": lambda: cp.take(a, cp.arange(3), axis=1), "matmul 2-D": lambda: cp.matmul(a, b),
        "matmul batched": lambda: cp.matmul(batch, b), "dot of vectors": lambda: cp.dot(a[0], a[0]),
        "einsum": lambda: cp.einsum("ij,jk->ik", a, b),
        "scatter_add": lambda: __import__("cupyx").scatter_add(cp.zeros(6, bf), cp.arange(6) % 3, cp.ones(6, bf)),
        "cupyx.scipy.special.erf": lambda: __import__("cupyx.scipy.special", fromlist=["erf"]).erf(a),
    }
    out = {}
    for name, call in calls.items():
        try:
            r = call()
            cp.cuda.get_current_stream().synchronize()
            out[name] = f"ok -> {r.dtype}"
        except Exception as e:  # noqa: BLE001 -- a probe: record every failure
            out[name] = _error(e)
    return out


def probe_matmul(m: int) -> dict:
    """CuPy's own bfloat16 matmul and funcgrad's: accuracy against float64, time against float32."""
    import cupy as cp

    import funcgrad as fg
    import funcgrad.numpy as fnp
    bf = np.dtype(fnp.bfloat16)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((m, m)).astype(np.float32).astype(bf) for _ in range(2))
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(want).max()

    def timed(fn) -> float:
        fn()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(10):
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        return float(np.median(times))

    out: dict = {"size": m}
    ga, gb = cp.asarray(a), cp.asarray(b)
    fa_, fb_ = fg.device_put(fnp.asarray(a), "gpu"), fg.device_put(fnp.asarray(b), "gpu")
    for name, fn in (("cupy bfloat16", lambda: cp.matmul(ga, gb)),
                     ("cupy float32", lambda: cp.matmul(ga.astype(cp.float32), gb.astype(cp.float32))),
                     ("funcgrad bfloat16", lambda: fnp.matmul(fa_, fb_)._value)):
        try:
            r = fn()
            err = float(np.abs(cp.asnumpy(r).astype(np.float64) - want).max() / scale)
            s = timed(fn)
            out[name] = {"dtype": str(r.dtype), "max error / max |result|": err, "median_s": s,
                         "TFLOP/s": 2 * m ** 3 / s / 1e12}
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": _error(e)}
    small = {"batched": lambda: cp.matmul(cp.ones((2, 8, 300), bf), cp.ones((2, 300, 4), bf)),
             "rows @ matrix": lambda: cp.matmul(cp.ones((2, 8, 300), bf), cp.ones((300, 4), bf)),
             "dot of vectors": lambda: cp.dot(cp.ones(300, bf), cp.ones(300, bf))}
    for name, fn in small.items():   # 300 ones: a float32 sum gives 300 exactly, a bfloat16 one stalls at 256
        try:
            r = fn()
            out[f"cupy bfloat16 {name}"] = {"dtype": str(r.dtype), "sums 300 ones to":
                                            sorted({float(x) for x in cp.asnumpy(r).astype(np.float64).ravel()})}
        except Exception as e:  # noqa: BLE001
            out[f"cupy bfloat16 {name}"] = {"error": _error(e)}
    out["CUPY_TF32"] = os.environ.get("CUPY_TF32", "")
    return out


def probe_op_table(limit: int | None) -> dict:
    """The op table's forward rows on bfloat16 GPU arrays against float64 numpy on the same values."""
    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.tree_util import tree_leaves
    from op_table import OPS
    bf = np.dtype(fnp.bfloat16)
    warnings.simplefilter("ignore")

    def check(out, ref, op, traced):
        for o, r, t in zip(tree_leaves(out), tree_leaves(ref), traced or [None] * len(tree_leaves(out))):
            if t is not None and getattr(o, "dtype", None) is not None and o.dtype != t.dtype:
                raise AssertionError(f"dtype {o.dtype}, the traced program says {t.dtype}")
            o = np.asarray(fg.device_put(o, "cpu")) if getattr(o, "device", "cpu") == "gpu" else np.asarray(o)
            r = np.asarray(r)
            if o.shape != r.shape:
                raise AssertionError(f"shape {o.shape} vs {r.shape}")
            if o.dtype == bf or (o.dtype.kind not in "biu" and r.dtype.kind not in "biu"):
                np.testing.assert_allclose(o.astype(np.complex128 if o.dtype.kind == "c" else np.float64), r,
                                           rtol=3e-2, atol=3e-2, equal_nan=True)

    fails: dict = collections.defaultdict(list)
    n = 0
    for op in OPS[:limit]:
        rng = np.random.default_rng(0)
        shapes = op.shapes[0] if op.shapes else ()
        args = [np.asarray(gen(rng, s)) for gen, s in zip(op.gen_list(len(shapes)), shapes)]
        args = [a.astype(bf) if a.dtype.kind == "f" else a for a in args]
        if not any(a.dtype == bf for a in args):
            continue
        n += 1
        with np.errstate(all="ignore"):
            ref = op.ref(*[a.astype(np.float64) if a.dtype == bf else a for a in args])
        try:
            traced = tree_leaves(fg.eval_shape(op.fn, *[fnp.asarray(a) for a in args]))
        except Exception:  # noqa: BLE001
            traced = None
        try:
            check(op.fn(*[fnp.asarray(a) for a in args]), ref, op, traced)
            cpu = "ok on the CPU"
        except Exception:  # noqa: BLE001
            cpu = "fails on the CPU too"
        try:
            check(op.fn(*[fg.device_put(fnp.asarray(a), "gpu") for a in args]), ref, op, traced)
        except Exception as e:  # noqa: BLE001
            fails[f"{cpu}: {_error(e)}"].append(op.name)
    return {"rows": n, "failing": sum(len(v) for v in fails.values()),
            "failures": {k: v for k, v in sorted(fails.items(), key=lambda kv: -len(kv[1]))}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="directory for gpu_bf16_probe.json")
    ap.add_argument("--quick", action="store_true", help="a 1024 matmul and the first 100 op-table rows")
    args = ap.parse_args(argv)
    report: dict = {}
    for name, fn in (("cupy", probe_cupy), ("matmul", lambda: probe_matmul(1024 if args.quick else 8192)),
                     ("op_table", lambda: probe_op_table(100 if args.quick else None))):
        t0 = time.perf_counter()
        try:
            report[name] = fn()
        except Exception:  # noqa: BLE001
            report[name] = {"error": traceback.format_exc()[-2000:]}
        print(f"== {name} ({time.perf_counter() - t0:.0f} s)")
        print(json.dumps(report[name], indent=1)[:6000], flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_bf16_probe.json"), "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
