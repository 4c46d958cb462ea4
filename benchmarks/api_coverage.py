"""How much of JAX's public API funcgrad has, counted by name, module by module.

The JAX names come from ``benchmarks/jax_api_names.json``, a snapshot of one JAX release's public callables
(dtype and scalar-type names such as ``float32`` or ``floating`` left out, and warning classes); for
``jax.scipy.stats`` the distributions (submodules) are the names. A name counts when funcgrad's
counterpart module has an attribute of that name.

    python benchmarks/api_coverage.py                 # the table
    python benchmarks/api_coverage.py --missing       # ... and the names still missing
    python benchmarks/api_coverage.py --markdown      # the table as Markdown (docs/jax-migration.md)
    python benchmarks/api_coverage.py --refresh       # rewrite the snapshot from the installed JAX
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
SNAPSHOT = os.path.join(HERE, "jax_api_names.json")

# JAX module -> funcgrad module
COUNTERPARTS = {
    "jax.numpy": "funcgrad.numpy", "jax.numpy.linalg": "funcgrad.numpy.linalg", "jax.numpy.fft": "funcgrad.numpy.fft",
    "jax.scipy.special": "funcgrad.scipy.special", "jax.scipy.linalg": "funcgrad.scipy.linalg",
    "jax.scipy.stats": "funcgrad.scipy.stats", "jax.random": "funcgrad.random", "jax.nn": "funcgrad.nn",
    "jax.lax": "funcgrad.lax", "jax.tree": "funcgrad.tree", "jax.tree_util": "funcgrad.tree_util", "jax": "funcgrad",
}


def jax_public_names(module_name: str) -> list[str]:
    """The public callables of one installed JAX module (needs JAX; used by --refresh only)."""
    import numpy as np
    module = importlib.import_module(module_name)
    names = []
    for n in sorted(dir(module)):
        if n.startswith("_"):
            continue
        v = getattr(module, n)
        if isinstance(v, types.ModuleType):
            if module_name == "jax.scipy.stats":
                names.append(n)                     # a distribution: norm, gamma, ...
            continue
        if not callable(v) or (isinstance(v, type) and issubclass(v, (np.generic, Warning))):
            continue
        try:
            np.dtype(v)                             # float32, bfloat16, ...: dtype names
            continue
        except TypeError:
            names.append(n)
    return names


def refresh() -> None:
    import jax
    modules = {m: jax_public_names(m) for m in COUNTERPARTS}
    with open(SNAPSHOT, "w") as f:
        json.dump({"jax_version": jax.__version__, "modules": modules}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {SNAPSHOT} (JAX {jax.__version__})")


def load_snapshot() -> dict:
    """{"jax_version": ..., "modules": {jax module: [names]}}."""
    with open(SNAPSHOT) as f:
        return json.load(f)


def coverage() -> dict[str, dict]:
    """{jax module: {"funcgrad": module, "total": n, "have": n, "missing": [names], "names": [names]}}."""
    snapshot = load_snapshot()
    out = {}
    for jax_module, names in snapshot["modules"].items():
        target = COUNTERPARTS[jax_module]
        try:
            module = importlib.import_module(target)
        except ImportError:
            module = None
        missing = [n for n in names if module is None or not hasattr(module, n)]
        out[jax_module] = {"funcgrad": target, "total": len(names), "have": len(names) - len(missing),
                           "missing": missing, "names": names}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--missing", action="store_true", help="list the missing names")
    ap.add_argument("--refresh", action="store_true", help="rewrite the snapshot from the installed JAX")
    ap.add_argument("--json", help="also write the counts to this file")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the docs)")
    args = ap.parse_args(argv)
    if args.refresh:
        refresh()
        return
    sys.path.insert(0, os.path.dirname(HERE))
    version = load_snapshot()["jax_version"]
    result = coverage()
    if args.markdown:
        print(f"| JAX {version} module | funcgrad module | names | share |\n|---|---|---|---|")
        for jax_module, r in result.items():
            print(f"| `{jax_module}` | `{r['funcgrad']}` | {r['have']} / {r['total']} | {r['have'] / r['total']:.0%} |")
        return
    print(f"funcgrad's coverage of JAX {version}'s public callables, by name\n")
    print(f"{'JAX module':20} {'funcgrad module':24} {'have':>5} {'of':>5} {'share':>6}")
    for jax_module, r in result.items():
        print(f"{jax_module:20} {r['funcgrad']:24} {r['have']:5} {r['total']:5} {r['have'] / r['total']:6.0%}")
    if args.missing:
        for jax_module, r in result.items():
            if r["missing"]:
                print(f"\n{jax_module} missing ({len(r['missing'])}): {', '.join(r['missing'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"jax_version": version, "coverage": result}, f, indent=1)


if __name__ == "__main__":
    main()
