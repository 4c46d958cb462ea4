"""The package's import structure: no circles, and layers that point one way.

Read from the source with ``ast`` (nothing is imported), counting every
import, including those inside functions: an import deferred into a
function still makes the lower module depend on the higher one.

The layers, lowest first (a module may import its own layer and those below):

    config     _config, _dtypes, _warnings
    core       _core (with _primitive, _tracer, _trace_stack, _custom_calls, _debug_nans), _array, _ir,
               tree_util/*, _threefry, core, dtypes, typing, backends (the registry only)
    prims      primitives/*
    lax        lax
    transforms interpreters/*, api (with _grad, _vjp_jvp, _jacobians, _vmap, _custom_rules, _staging), jit,
               compiler/*, devices, backends/<name>/*
    numpy      numpy/*, scipy/*, _numpy_dispatch
    libraries  nn, optim, random, mixed_precision, datasets, testing, distributed

Backend folders sit beside the transforms: they register implementations
against primitives, and only ``devices`` finds them (the core, the
primitives and lax never name a backend).
"""
from __future__ import annotations

import ast
import pathlib

import funcgrad

PACKAGE = pathlib.Path(funcgrad.__file__).parent

LAYERS = ["config", "core", "prims", "lax", "transforms", "numpy", "libraries"]

_EXACT = {
    "funcgrad._config": "config", "funcgrad._dtypes": "config", "funcgrad._warnings": "config",
    "funcgrad._host_buffers": "config",
    "funcgrad._core": "core", "funcgrad._array": "core", "funcgrad._ir": "core", "funcgrad.tree_util": "core",
    "funcgrad._primitive": "core", "funcgrad._tracer": "core", "funcgrad._trace_stack": "core",
    "funcgrad._custom_calls": "core", "funcgrad._debug_nans": "core",
    "funcgrad.tree": "core", "funcgrad.errors": "core", "funcgrad.debug": "libraries",
    "funcgrad._threefry": "core",
    "funcgrad.backends": "core", "funcgrad.core": "core", "funcgrad.dtypes": "core", "funcgrad.typing": "core",
    "funcgrad.lax": "lax",
    "funcgrad.api": "transforms", "funcgrad.jit": "transforms", "funcgrad.devices": "transforms",
    "funcgrad._argspec": "transforms", "funcgrad._custom_rules": "transforms", "funcgrad._staging": "transforms",
    "funcgrad._grad": "transforms", "funcgrad._vjp_jvp": "transforms", "funcgrad._jacobians": "transforms",
    "funcgrad._vmap": "transforms",
    "funcgrad._numpy_dispatch": "numpy",
    "funcgrad.random": "libraries", "funcgrad.mixed_precision": "libraries", "funcgrad.testing": "libraries",
    "funcgrad._toplevel": "libraries", "funcgrad.ad_checkpoint": "transforms", "funcgrad.profiler": "libraries",
}
_PREFIXES = [
    ("funcgrad.tree_util", "core"), ("funcgrad.primitives", "prims"), ("funcgrad.lax", "lax"),
    ("funcgrad.interpreters", "transforms"),
    ("funcgrad.compiler", "transforms"), ("funcgrad.backends", "transforms"), ("funcgrad.numpy", "numpy"),
    ("funcgrad.scipy", "numpy"),
    ("funcgrad.random", "libraries"),
    ("funcgrad.nn", "libraries"), ("funcgrad.optim", "libraries"), ("funcgrad.datasets", "libraries"),
    ("funcgrad.distributed", "libraries"),
]


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("funcgrad",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def layer_of(module: str) -> str | None:
    if module == "funcgrad":
        return None   # the curated public API on top of everything
    if module in _EXACT:
        return _EXACT[module]
    for prefix, layer in _PREFIXES:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None


def _target(name: str) -> str:
    """The funcgrad module an imported dotted name lives in."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(module: str, top_level_only: bool = False) -> set[str]:
    """The funcgrad modules ``module`` imports (all of them, or those run at import time)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == "funcgrad" or name.startswith("funcgrad."):
                target = _target(name)
                if target != module:
                    found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in MODULES if m != "funcgrad" and layer_of(m) is None)
    assert unplaced == [], f"modules outside the layer map (add them to tests/test_layering.py): {unplaced}"


def test_no_import_circles():
    # The package root re-exports everything; edges into it are checked by the layer test instead.
    graph = {m: {t for t in imports_of(m) if t != "funcgrad"} for m in MODULES if m != "funcgrad"}
    assert _cycles(graph) == []


def test_layers_point_one_way():
    upward = []
    for module in MODULES:
        source = layer_of(module)
        if source is None:
            continue
        for target in sorted(imports_of(module)):
            wanted = layer_of(target)
            if wanted is None or LAYERS.index(wanted) > LAYERS.index(source):
                upward.append(f"{module} ({source}) imports {target} ({wanted or 'the package root'})")
    assert upward == []


def test_core_and_primitives_never_name_a_backend():
    offenders = [f"{m} imports {t}" for m in MODULES if layer_of(m) in ("config", "core", "prims", "lax")
                 for t in imports_of(m) if t.startswith("funcgrad.backends.")]
    assert offenders == []


def test_numpy_is_written_on_lax():
    # funcgrad.numpy binds primitives through funcgrad.lax (which exports the primitive objects too).
    offenders = [f"{m} imports {t}" for m in MODULES if layer_of(m) == "numpy"
                 for t in imports_of(m) if t.startswith("funcgrad.primitives")]
    assert offenders == []


def test_cycle_finder_finds_a_cycle():
    # The checker itself can fail: a two-module loop and a three-module loop are reported.
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert _cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_relative_and_deferred_imports_are_counted(tmp_path, monkeypatch):
    # A function-level import counts for the full graph and not for the import-time one.
    fake = {"funcgrad.x": tmp_path / "x.py", "funcgrad.y": tmp_path / "y.py"}
    fake["funcgrad.x"].write_text("def f():\n    from funcgrad import y\n")
    fake["funcgrad.y"].write_text("")
    monkeypatch.setattr(__import__(__name__), "MODULES", fake)
    assert imports_of("funcgrad.x") == {"funcgrad.y"}
    assert imports_of("funcgrad.x", top_level_only=True) == set()
