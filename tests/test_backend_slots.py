"""Which primitives each backend slot lacks, pinned so that the lists can only shrink.

Every primitive declares what backends and compilers know about it in its
own registries (``prim.impls[backend]``, ``prim.lowerings[compiler]``).
This test walks every :class:`~funcgrad._core.Primitive` in
``funcgrad.primitives.*`` and prints, per slot, the primitives without an
entry. The lists are pinned below and kept exact: a new primitive without
the slot fails (implement it, or pin it consciously), and so does a pinned
primitive that gained the slot (remove it from the list).

Run with ``-s`` to see the report.
"""
from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil

import funcgrad
import funcgrad.primitives as primitives_pkg
from funcgrad._core import Primitive

# Primitives without a GPU implementation (``prim.impls["gpu"]``, funcgrad/backends/gpu/impls.py).
# On GPU arrays they raise, or run on host copies with ``gpu_host_fallback``.
GPU_MISSING = (
   
)

# Elementwise primitives (see ``is_elementwise``) without a lowering for the numba compiler
# (``prim.lowerings["numba"]``, funcgrad/backends/cpu/lowering.py): jit's fusion never joins them.
NUMBA_MISSING = (
    "bessel_i0e", "bessel_i1e", "bessel_jv", "betainc", "betaln", "bitwise_and", "bitwise_or", "complex", "conj",
    "dawsn", "digamma", "erf", "erf_inv", "erfc", "erfcx", "exp1", "expi", "expn", "floor_divide", "fresnel_c",
    "fresnel_s", "frexp_exponent", "frexp_mantissa", "gammasgn", "gcd", "hyp1f1", "hyp1f1_grad_a", "hyp1f1_grad_b",
    "hyp2f1", "hyp2f1_grad_a", "hyp2f1_grad_b", "hyp2f1_grad_c", "igamma", "igamma_grad_a", "igammac", "imag",
    "lcm", "lgamma", "log_ndtr", "loggamma_complex", "mod", "ndtri", "nextafter", "owens_t", "polygamma",
    "population_count", "random_gamma_grad", "random_gamma_grad_da", "random_gamma_grad_dx", "real", "round",
    "shift_left", "shift_right_logical", "sici_ci", "sici_si", "spence", "wofz", "xlog1py", "xlogy", "zeta",
    "zeta_grad_x",
)


def all_primitives() -> list[Primitive]:
    """Every Primitive object in ``funcgrad.primitives.*``, each once."""
    found: dict[int, Primitive] = {}
    for info in pkgutil.iter_modules(primitives_pkg.__path__):
        module = importlib.import_module(f"{primitives_pkg.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, Primitive):
                found[id(obj)] = obj
    return sorted(found.values(), key=lambda p: p.name)


PRIMITIVES = all_primitives()
funcgrad.devices()   # discovers the backends, which register their implementations and lowerings


def is_elementwise(prim: Primitive) -> bool:
    """Declared elementwise (the ``"elementwise"`` trait, which the rule builders of
    ``funcgrad.primitives.elementwise`` give every primitive they declare)."""
    return "elementwise" in prim.traits


def _lacking(slot: str, key: str, among: list[Primitive]) -> tuple[str, ...]:
    return tuple(sorted(p.name for p in among if key not in getattr(p, slot)))


def _check_pinned(what: str, missing: tuple[str, ...], pinned: tuple[str, ...], where: str) -> None:
    print(f"\n{what} missing for {len(missing)} primitives: {', '.join(missing) or '-'}")
    assert pinned == tuple(sorted(set(pinned))), f"keep the pinned {what} list sorted and without repeats"
    new = sorted(set(missing) - set(pinned))
    filled = sorted(set(pinned) - set(missing))
    assert not new, f"primitives without a {what}: {new}. Add one ({where}) or pin them in {__file__}"
    assert not filled, f"pinned primitives that now have a {what}: {filled}; remove them from the list in {__file__}"


def test_primitive_names_are_unique_and_the_walk_finds_them():
    names = [p.name for p in PRIMITIVES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    from funcgrad.primitives.attention import flash_attention_p
    from funcgrad.primitives.elementwise import add_p
    assert add_p in PRIMITIVES and flash_attention_p in PRIMITIVES and len(PRIMITIVES) > 50


def test_gpu_implementations():
    _check_pinned("GPU implementation", _lacking("impls", "gpu", PRIMITIVES), GPU_MISSING,
                  "funcgrad/backends/gpu/impls.py")


def test_numba_lowerings_of_elementwise_primitives():
    elementwise = [p for p in PRIMITIVES if is_elementwise(p)]
    assert len(elementwise) > 40
    _check_pinned("numba lowering", _lacking("lowerings", "numba", elementwise), NUMBA_MISSING,
                  "funcgrad/backends/cpu/lowering.py")


def test_the_slot_check_fails_both_ways():
    # The checker itself can fail: an unpinned missing primitive, and a pinned one that is no longer missing.
    for missing, pinned in ((("a", "b"), ("a",)), (("a",), ("a", "b"))):
        try:
            _check_pinned("test slot", missing, pinned, "here")
        except AssertionError:
            continue
        raise AssertionError(f"missing {missing} vs pinned {pinned} passed")


# --------------------------------------------------------------------------
# no registry keyed by primitive name strings
# --------------------------------------------------------------------------

PACKAGE = pathlib.Path(funcgrad.__file__).parent


# The numpy API layer maps numpy's own function and method names (``np.add`` ->
# ``fnp.add``), which coincide with many primitive names: those are not registries.
NUMPY_API = ("numpy/", "_numpy_dispatch.py")


def _name_keyed_registries(names: set[str]) -> list[str]:
    """Places in the package source that key a table by primitive names.

    * dict literals with two or more primitive names as string keys
      (``{"add": ..., "mul": ...}``), outside the numpy API layer;
    * lookups by a primitive's ``.name``: ``table[prim.name]``,
      ``table.get(eqn.prim.name)``, ``prim.name in table``.
    """
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent)
        numpy_api = str(path.relative_to(PACKAGE)).startswith(NUMPY_API)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict) and not numpy_api:
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in names]
                if len(keys) >= 2:
                    found.append(f"{where}:{node.lineno}: dict keyed by primitive names {keys[:4]}")
            elif isinstance(node, ast.Subscript) and _is_name_attr(node.slice):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("get", "setdefault", "pop") and node.args and _is_name_attr(node.args[0])):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            elif (isinstance(node, ast.Compare) and _is_name_attr(node.left)
                  and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                  and not all(isinstance(c, (ast.Tuple, ast.List, ast.Set, ast.Constant)) for c in node.comparators)):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def _is_name_attr(node: ast.AST) -> bool:
    """``prim.name``, ``eqn.prim.name``, ``self.prim.name``: the name of a primitive."""
    return isinstance(node, ast.Attribute) and node.attr == "name" and "prim" in ast.unparse(node.value).lower()


def test_no_registry_is_keyed_by_primitive_name():
    names = {p.name for p in PRIMITIVES}
    assert _name_keyed_registries(names) == []


def test_the_name_key_scan_finds_name_keyed_tables(tmp_path, monkeypatch):
    # The scan itself can fail: a name-keyed dict and a lookup by prim.name are both reported.
    (tmp_path / "bad.py").write_text('T = {"add": 1, "mul": 2}\ndef f(prim):\n    return T[prim.name]\n')
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    found = _name_keyed_registries({"add", "mul"})
    assert len(found) == 2 and "dict keyed by primitive names" in found[0] and "T[prim.name]" in found[1]
    assert all(f.startswith(f"{tmp_path.name}/bad.py:") for f in found)
