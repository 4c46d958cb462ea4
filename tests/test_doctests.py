"""Every public function and class of the documented modules has a ``>>>`` example in its docstring.

The examples themselves run as doctests (``--doctest-modules`` over the package, see the root conftest.py);
this test keeps new public names from arriving without one.
"""
from __future__ import annotations

import importlib
import inspect
import types

import pytest

MODULES = ["funcgrad", "funcgrad.tree", "funcgrad.tree_util", "funcgrad.devices", "funcgrad.testing", "funcgrad.debug",
           "funcgrad.mixed_precision", "funcgrad.numpy", "funcgrad.numpy.linalg", "funcgrad.numpy.fft", "funcgrad.nn",
           "funcgrad.nn.initializers", "funcgrad.optim", "funcgrad.scipy.special", "funcgrad.scipy.linalg",
           "funcgrad.scipy.stats", "funcgrad.lax", "funcgrad.lax.linalg", "funcgrad.random", "funcgrad.distributed",
           "funcgrad.profiler", "funcgrad.datasets"]

# Names that are not funcgrad's own callables: numpy's scalar types re-exported as dtypes, typing aliases and
# names a module imports for its own use.
NOT_OURS = {
    "funcgrad.numpy": {"bfloat16", "bool_", "complex64", "complex128", "float16", "float32", "float64", "int8", "int16", "int32",
                       "int64", "uint8", "uint32"},
    "funcgrad.tree_util": {"KeyEntry", "KeyPath"},
    "funcgrad.testing": {"Any", "Callable", "Sequence", "canonicalize_dtype", "tree_flatten", "tree_map"},
    "funcgrad.nn.initializers": {"Initializer"},
    "funcgrad.lax": {"ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers", "PrecisionLike"},
}


def _own_doc(obj) -> str:
    """The docstring written for ``obj`` (a class's own, not one inherited from ``object`` or ``tuple``)."""
    if inspect.isclass(obj):
        return vars(obj).get("__doc__") or ""
    return getattr(obj, "__doc__", None) or ""


def _missing_examples(modname: str) -> list[str]:
    mod = importlib.import_module(modname)
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    missing = []
    for name in names:
        obj = getattr(mod, name, None)
        if obj is None or isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        if name in NOT_OURS.get(modname, ()):
            continue
        if ">>>" not in _own_doc(obj):
            missing.append(name)
    return missing


@pytest.mark.parametrize("modname", MODULES)
def test_every_public_callable_has_an_example(modname):
    assert _missing_examples(modname) == [], f"{modname}: public callables without a >>> example"


def test_the_check_sees_a_missing_example(monkeypatch):
    import funcgrad.debug as debug

    def undocumented(x):
        return x

    monkeypatch.setattr(debug, "undocumented", undocumented, raising=False)
    monkeypatch.setattr(debug, "__all__", [*getattr(debug, "__all__", []), "undocumented"], raising=False)
    assert "undocumented" in _missing_examples("funcgrad.debug")
