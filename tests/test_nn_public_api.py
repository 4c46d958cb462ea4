"""The libraries (nn, optim, random, mixed_precision, datasets, testing) are written on funcgrad's
public API only, and the public helpers they use for that (funcgrad.core, funcgrad.dtypes,
funcgrad.numpy.array_utils, lax.conv2d_shape / pool2d_shape / int_pair) keep their promises."""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import core, dtypes
from funcgrad.numpy import array_utils

from nn_reference import np_conv, np_pool
from test_nn_conv import CONV_CASES, CONV_IDS, POOL_CASES, POOL_IDS

PACKAGE = pathlib.Path(fg.__file__).parent
LIBRARIES = ["nn", "optim", "datasets", "random", "mixed_precision.py", "testing.py"]


def _library_files() -> list[pathlib.Path]:
    files = []
    for name in LIBRARIES:
        path = PACKAGE / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def _imported_modules(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every funcgrad module (or module.name) imported by ``path``, also inside functions."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return [(line, name) for line, name in out if name.startswith("funcgrad.")]


@pytest.mark.parametrize("path", _library_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_libraries_import_only_public_modules(path):
    """No ``funcgrad._core``, ``funcgrad.primitives``, ``funcgrad.numpy._base``, ``funcgrad.random._shape``...:
    a private part may only be reached inside the library's own package (``funcgrad.nn._layers`` from
    ``funcgrad.nn``)."""
    own = ".".join(("funcgrad",) + path.relative_to(PACKAGE).parts[:1]).removesuffix(".py")
    bad = []
    for line, name in _imported_modules(path):
        parts = name.split(".")
        private = any(p.startswith("_") for p in parts[1:]) or parts[1] in ("primitives", "interpreters", "compiler",
                                                                            "backends")
        if private and not name.startswith(own + "."):
            bad.append(f"line {line}: {name}")
    assert bad == [], f"{path.name} reaches private parts of funcgrad: {bad}"


def test_the_checks_catch_a_private_import(tmp_path):
    """Positive control for the check above."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from funcgrad._core import as_array\n    import funcgrad.primitives.nn\n")
    assert _imported_modules(probe) == [(2, "funcgrad._core.as_array"), (3, "funcgrad.primitives.nn")]


# --------------------------------------------------------------------------
# funcgrad.core and funcgrad.dtypes
# --------------------------------------------------------------------------


def test_core_array_and_tracer():
    seen = []

    def f(x):
        seen.append((isinstance(x, core.Array), isinstance(x, core.Tracer), core.describe(x)))
        return fnp.sum(x * x)

    x = fnp.ones((2, 3))
    f(x)
    fg.grad(f)(x)
    fg.jit(f)(x)
    assert seen[0] == (True, False, "f32[2,3]")
    assert seen[1] == seen[2] == (False, True, "f32[2,3]")
    assert core.describe(2.0) == "float scalar" and core.describe(np.zeros((4,), np.int64)) == "i64[4]"
    assert core.ShapedArray((2, 3), np.float32) == core.ShapedArray((2, 3), "float32")
    assert core.ShapedArray((2, 3), np.float32) != core.ShapedArray((3, 2), np.float32)


def test_dtypes_follow_x64():
    assert dtypes.default_float_dtype() == np.float32 and dtypes.default_int_dtype() == np.int32
    assert dtypes.canonicalize_dtype("float64") == np.float32 and dtypes.canonicalize_dtype(np.int64) == np.int32
    assert dtypes.result_type(fnp.ones(2, np.float16), 2.0) == np.float16
    assert dtypes.result_type(fnp.ones(2, np.int32), 2.5) == np.float32
    with pytest.raises(TypeError, match="strings"):
        dtypes.canonicalize_dtype("U3")
    assert dtypes.canonicalize_dtype(np.complex128) == np.complex64   # narrowed without x64, as JAX
    fg.config.update("enable_x64", True)
    try:
        assert dtypes.default_float_dtype() == np.float64 and dtypes.default_int_dtype() == np.int64
        assert dtypes.canonicalize_dtype("float64") == np.float64
    finally:
        fg.config.update("enable_x64", False)
    assert dtypes.default_float_dtype() == np.float32


# --------------------------------------------------------------------------
# funcgrad.numpy.array_utils: the rules of funcgrad.numpy, errors named by the caller
# --------------------------------------------------------------------------


def test_array_utils_accept_what_fnp_accepts():
    assert array_utils.normalize_axis("op", -1, 3) == 2
    assert array_utils.normalize_axis("op", np.int64(1), 3) == 1
    assert array_utils.normalize_axes("op", (-1, 0), 3) == (0, 2)
    assert array_utils.normalize_axes("op", None, 2) == (0, 1)
    assert array_utils.normalize_axes("op", (2, 0), 3, keep_order=True) == (2, 0)
    assert array_utils.shape_tuple(4, "op") == (4,) and array_utils.shape_tuple([2, np.int64(3)], "op") == (2, 3)


@pytest.mark.parametrize("call, error, words", [
    (lambda: array_utils.normalize_axis("my_op", 3, 3), ValueError, ["my_op", "axis 3", "[-3, 3)"]),
    (lambda: array_utils.normalize_axis("my_op", 1.5, 3), TypeError, ["my_op", "axis", "float"]),
    (lambda: array_utils.normalize_axes("my_op", (0, -2), 2), ValueError, ["my_op", "more than once"]),
    (lambda: array_utils.shape_tuple((2, 2.5), "my_op"), TypeError, ["my_op", "shape", "2.5"]),
    (lambda: array_utils.shape_tuple((2, -1), "my_op"), ValueError, ["my_op", "negative"]),
])
def test_array_utils_errors_name_the_caller(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert all(w in str(info.value) for w in words), str(info.value)


@pytest.mark.parametrize("shape", [(2, 2.5), (2, -1), "3", (True, 2)])
def test_shape_tuple_is_the_rule_of_fnp_zeros(shape):
    with pytest.raises((TypeError, ValueError)) as ours:
        array_utils.shape_tuple(shape, "my_op")
    with pytest.raises((TypeError, ValueError)) as theirs:
        fnp.zeros(shape)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value).replace("my_op", "zeros") == str(theirs.value)


# --------------------------------------------------------------------------
# lax.conv2d_shape / pool2d_shape / int_pair against the float64 loop references
# --------------------------------------------------------------------------


@pytest.mark.parametrize("case", CONV_CASES, ids=CONV_IDS)
def test_conv2d_shape_matches_the_reference(case):
    x_shape, w_shape, stride, padding, dilation, groups = case
    expected = np_conv(np.zeros(x_shape), np.zeros(w_shape), stride, padding, dilation, groups).shape
    assert lax.conv2d_shape(x_shape, w_shape, stride, padding, dilation, groups) == expected
    assert lax.conv2d(fnp.zeros(x_shape), fnp.zeros(w_shape), stride, padding, dilation, groups).shape == expected


@pytest.mark.parametrize("case", POOL_CASES, ids=POOL_IDS)
def test_pool2d_shape_matches_the_reference(case):
    x_shape, kernel, stride, padding = case
    expected = np_pool(np.zeros(x_shape), kernel, stride, padding, np.max, -np.inf).shape
    assert lax.pool2d_shape(x_shape, kernel, stride, padding) == expected
    assert lax.max_pool2d(fnp.zeros(x_shape), kernel, stride, padding).shape == expected
    assert lax.pool2d_shape(x_shape, kernel) == lax.avg_pool2d(fnp.zeros(x_shape), kernel).shape


@pytest.mark.parametrize("call, error, words", [
    (lambda: lax.int_pair("MyPool", "stride", 2.5), TypeError, ["MyPool", "stride", "2.5"]),
    (lambda: lax.int_pair("MyPool", "stride", 0), ValueError, ["MyPool", "stride"]),
    (lambda: lax.conv2d_shape((1, 3, 8, 8), (4, 2, 3, 3), name="MyConv"), ValueError, ["MyConv", "C=3"]),
    (lambda: lax.conv2d_shape((1, 3, 2, 2), (4, 3, 3, 3), name="MyConv", x_what="input"), ValueError,
     ["MyConv", "empty", "input (1, 3, 2, 2)"]),
    (lambda: lax.pool2d_shape((1, 3, 8, 8), 2, padding=2, name="MyPool"), ValueError, ["MyPool", "half"]),
])
def test_shape_helpers_errors_name_the_caller(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert all(w in str(info.value) for w in words), str(info.value)


def test_int_pair_normalises():
    assert lax.int_pair("op", "stride", 2) == (2, 2)
    assert lax.int_pair("op", "padding", (0, 1), 0) == (0, 1)
    assert lax.int_pair("op", "stride", np.int64(3)) == (3, 3)
