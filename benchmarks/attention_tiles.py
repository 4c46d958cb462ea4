"""Tile sizes of the numba FlashAttention CPU kernels against PyTorch's scaled_dot_product_attention (SDPA).

Times ``flash_attention_forward`` followed by ``flash_attention_backward`` for each (block_q, block_k)
pair, causal and not, at B*H=8, N=4096, d=64, float32, with SDPA's forward+backward as the baseline.
funcgrad and PyTorch run in worker processes of their own; all configurations are interleaved within
each round, and the table gives medians, their spread and the ratio to SDPA from the same run.

    python benchmarks/attention_tiles.py [--quick]
    python benchmarks/attention_tiles.py --n 1024 --tiles 128x128,256x256 --schedule both
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from _harness import Record, arguments, chosen, json_path  # noqa: E402
from _peers import long_rows, run_cases, worker  # noqa: E402

NAME = "attention_tiles"
SCRIPT = os.path.abspath(__file__)
PEERS = ["funcgrad", "pytorch"]
MODULES = {"funcgrad": "funcgrad", "pytorch": "torch"}
DEFAULT_TILES = "default,64x64,128x128,256x128,256x256,256x512,512x256,512x512"


def parse_tiles(spec: str) -> list:
    """"256x512,..." -> [(256, 512), ...]; "default" -> (None, None), the kernels' own defaults."""
    return [(None, None) if t == "default" else tuple(int(x) for x in t.split("x")) for t in spec.split(",") if t]


def inputs(arg: dict) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    shape = (arg["bh"], arg["n"], arg["d"])
    return tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(4))


def tiles_funcgrad(arg: dict):
    from funcgrad.backends.cpu.flash_attention import flash_attention_backward, flash_attention_forward
    q, k, v, do = inputs(arg)
    scale, causal = arg["d"] ** -0.5, arg["causal"]
    calls = {}
    for bq, bk in parse_tiles(arg["tiles"]):
        for onepass in arg["schedules"]:
            name = ("default" if bq is None else f"{bq}x{bk}") + \
                ("" if onepass is None else ("/1pass" if onepass else "/2pass"))

            def run(bq=bq, bk=bk, onepass=onepass):
                o, lse = flash_attention_forward(q, k, v, causal=causal, scale=scale, block_q=bq, block_k=bk)
                return flash_attention_backward(q, k, v, o, lse, do, causal=causal, scale=scale, block_q=bq,
                                                block_k=bk, onepass=onepass)
            calls[name] = run
    return calls, {}


def tiles_torch(arg: dict):
    import torch
    import torch.nn.functional as F
    q, k, v, do = inputs(arg)
    tq, tk, tv = (torch.from_numpy(a)[None].clone().requires_grad_(True) for a in (q, k, v))
    tdo = torch.from_numpy(do)[None].clone()

    def run():
        for t in (tq, tk, tv):
            t.grad = None
        F.scaled_dot_product_attention(tq, tk, tv, is_causal=arg["causal"], scale=arg["d"] ** -0.5).backward(tdo)
    return {"sdpa": run}, {}


BUILDERS = {("tiles", "funcgrad"): tiles_funcgrad, ("tiles", "pytorch"): tiles_torch}


def main(argv: list[str] | None = None) -> None:
    ap = arguments(NAME, __doc__)
    ap.add_argument("--bh", type=int, default=8, help="batch x heads")
    ap.add_argument("--n", type=int, default=4096, help="sequence length")
    ap.add_argument("--d", type=int, default=64, help="head dim")
    ap.add_argument("--tiles", default=DEFAULT_TILES, help="comma-separated block_q x block_k pairs, or default")
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--schedule", choices=["auto", "onepass", "twopass", "both"], default="auto",
                    help="the backward pass in one sweep, two, both, or the kernels' own choice")
    args = ap.parse_args(argv)
    if args.worker:
        worker(BUILDERS, MODULES, args.worker[0], args.worker[1], json.loads(args.worker[2]))
        return
    if args.quick:
        args.bh, args.n, args.d, args.tiles, args.causal = 2, 256, 32, "default", "no"
    record = Record(NAME, args)
    schedules = {"auto": [None], "onepass": [True], "twopass": [False], "both": [True, False]}[args.schedule]
    cases = [{"case": "tiles", "label": f"B*H={args.bh}, N={args.n}, d={args.d}, "
                                        f"{'causal' if causal else 'non-causal'}",
              "arg": {"bh": args.bh, "n": args.n, "d": args.d, "causal": causal, "tiles": args.tiles,
                      "schedules": schedules}}
             for causal in {"both": [False, True], "yes": [True], "no": [False]}[args.causal]]
    results = run_cases(SCRIPT, chosen(PEERS, args), cases, rounds=2 if args.quick else 5, record=record,
                        baseline="pytorch/sdpa", budget_s=5 if args.quick else 120)
    rows = long_rows(results, "pytorch/sdpa")
    for r in rows:
        r["contender"] = r["contender"].replace("funcgrad ", "flash ")
    record.table("tiles", "FlashAttention forward+backward by tile size (each peer in its own process; "
                          "interleaved medians)", rows)
    record.write(json_path(NAME, args))


if __name__ == "__main__":
    main()
