"""Coverage of JAX's public API by name (counted by benchmarks/api_coverage.py), held to floors.

The snapshot of JAX's names is a file in the repository, so this runs without JAX.  A floor can only
rise: a change that removes a public name, or loses its op-table row, fails here.
"""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

from op_table import PUBLIC

_SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "api_coverage.py"
_spec = importlib.util.spec_from_file_location("api_coverage", _SCRIPT)
api_coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(api_coverage)

COVERAGE = api_coverage.coverage()

# The shares reached (JAX 0.10.2's names): a module may gain names, never lose them.
FLOORS = {"jax.numpy": 1.0, "jax.numpy.linalg": 1.0, "jax.numpy.fft": 1.0, "jax.scipy.special": 1.0,
          "jax.scipy.linalg": 1.0, "jax.scipy.stats": 1.0, "jax.random": 1.0, "jax.tree": 1.0, "jax.tree_util": 1.0,
          "jax.nn": 0.9, "jax.lax": 0.95, "jax": 0.77}


@pytest.mark.parametrize("module", sorted(FLOORS))
def test_coverage_floor(module):
    r = COVERAGE[module]
    share = r["have"] / r["total"]
    assert share >= FLOORS[module], (
        f"funcgrad has {r['have']} of {r['total']} names of {module} ({share:.0%}, floor {FLOORS[module]:.0%}); "
        f"missing: {', '.join(r['missing'])}")


# Public names of funcgrad.numpy tested outside the op table (no array-in, array-out numerics to tabulate),
# each with the file that tests it.
_TESTED_ELSEWHERE = {
    **dict.fromkeys(["array_repr", "array_str", "get_printoptions", "printoptions", "set_printoptions", "save",
                     "savez", "load", "fromfile", "fromiter", "isscalar", "iterable", "can_cast", "isdtype",
                     "issubdtype", "promote_types", "result_type"], "tests/test_numpy_math.py"),
    **dict.fromkeys(["ndim", "shape", "size"], "tests/test_ops.py::test_shape_queries"),
    "from_dlpack": "tests/test_numpy_arrays.py", "frompyfunc": "tests/test_numpy_math.py",
}


@pytest.mark.parametrize("module,prefix", [("jax.numpy", ""), ("jax.numpy.linalg", "linalg."),
                                           ("jax.numpy.fft", "fft.")])
def test_every_covered_name_has_an_op_table_row(module, prefix):
    r = COVERAGE[module]
    have = [n for n in r["names"] if n not in r["missing"]]
    rowless = [n for n in have if prefix + n not in PUBLIC and prefix + n not in _TESTED_ELSEWHERE]
    assert not rowless, f"{module}: names without an op-table row: {rowless}"
