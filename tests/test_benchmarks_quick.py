"""The benchmark scripts run (a smoke run of each, tiny sizes, into a temporary folder) and write well-formed
JSON; the generated documentation tables are up to date with the committed results."""
from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import render  # noqa: E402
from run_all import BENCHMARKS  # noqa: E402


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    r = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--quick", "--no-sweeps", "--out", str(out)],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    return r, out


@pytest.mark.slow
def test_run_all_quick_exits_cleanly(quick_run):
    r, _ = quick_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for _, extra, name in BENCHMARKS if "--sweep" not in extra])
def test_quick_json_is_well_formed(quick_run, name):
    _, out = quick_run
    path = out / f"{name}.json"
    assert path.exists(), f"{name} wrote no JSON into {out}"
    payload = json.loads(path.read_text())
    for key in ("benchmark", "mode", "command", "environment", "peers", "measurements", "tables", "seconds"):
        assert key in payload, f"{name}: no {key!r}"
    assert payload["mode"] == "quick"
    env = payload["environment"]
    for key in ("cpu_count", "cpu_model", "load_average", "load_average_after", "numpy", "variables"):
        assert key in env, f"{name}: environment has no {key!r}"
    assert "funcgrad" in payload["peers"] and "missing" not in payload["peers"]["funcgrad"]
    assert payload["measurements"], f"{name}: no measurements"
    for m in payload["measurements"]:
        assert {"workload", "peer", "call", "median_s", "spread", "rounds"} <= set(m)
        assert math.isfinite(m["median_s"]) and m["median_s"] > 0, m
        assert m["min_s"] <= m["median_s"] <= m["max_s"], m
    assert payload["tables"], f"{name}: no tables"
    for table in payload["tables"].values():
        assert table["columns"] and table["rows"]
        assert all(set(row) == set(table["columns"]) for row in table["rows"])


def test_docs_tables_are_up_to_date():
    r = subprocess.run([sys.executable, str(BENCH / "render.py"), "--check"], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_profile_script_prints_both_steps():
    """``profile_mlp_step.py`` (not one of run_all's benchmarks) runs and names where the step's time goes."""
    r = subprocess.run([sys.executable, str(BENCH / "profile_mlp_step.py"), "--steps", "2", "--limit", "3"], cwd=ROOT,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "jit: " in r.stdout and "eager: " in r.stdout and "matmul" in r.stdout, r.stdout


def _payload() -> dict:
    return {"benchmark": "demo", "mode": "full", "command": "python benchmarks/demo.py",
            "timestamp": "2026-01-02T03:04:05Z",
            "environment": {"cpu_model": "Some CPU", "cpu_count": 2, "simd_flags": ["avx2", "avx512f"],
                            "numba_threads": 2, "load_average": [0.1, 0.1, 0.1], "load_average_after": [0.2, 0, 0]},
            "peers": {"funcgrad": {"version": "1.0"}, "jax": {"missing": "not installed"}},
            "measurements": [], "sweeps": {},
            "tables": {"t": {"title": "T", "columns": ["workload", "funcgrad"],
                             "rows": [{"workload": "w", "funcgrad": "1.00 ms ±5%"}]}}}


def test_render_fills_marked_blocks_and_reports_stale_ones():
    text = ("intro\n<!-- bench:demo/t -->\nold\n<!-- /bench:demo/t -->\n"
            "<!-- bench:other/x -->\n<!-- /bench:other/x -->\n")
    new, changed = render.render(text, {"demo": _payload()}, write=False)
    assert changed == ["demo/t", "other/x"]
    assert "| w | 1.00 ms ±5% |" in new and "old" not in new
    assert "Some CPU, 2 cores (AVX-512), numba threads 2" in new and "not installed: jax" in new
    assert render.NOT_YET in new.split("<!-- bench:other/x -->")[1]
    again, changed = render.render(new, {"demo": _payload()}, write=False)
    assert again == new and changed == []
