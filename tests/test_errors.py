"""Bad inputs: each error has the right type and speaks the user's language
(the primitive or function, the shapes and dtypes involved).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp

A = lambda: fnp.ones((2, 3))                     # f32[2,3]
B = lambda: fnp.ones(4)                          # f32[4]


def _eager(f):
    return f


def _jitted(f):
    return fg.jit(f)


def _under_grad(f):
    # the error must be the same when the operation runs inside grad
    return lambda *xs: fg.grad(lambda first, *rest: fnp.sum(f(first, *rest).astype(fnp.float32)))(*xs)


MODES = [pytest.param(_eager, id="eager"), pytest.param(_jitted, id="jit"), pytest.param(_under_grad, id="grad")]

# ------------------------------------------------------- binary families

# (public function, the name the error must contain)
BINARY_FAMILIES = [
    # arithmetic
    (fnp.add, "add"), (fnp.subtract, "sub"), (fnp.multiply, "mul"), (fnp.divide, "div"),
    (fnp.power, "pow"), (fnp.maximum, "maximum"), (fnp.minimum, "minimum"), (fnp.arctan2, "arctan2"),
    (fnp.mod, "mod"), (fnp.floor_divide, "floor_divide"),
    # comparison
    (fnp.equal, "eq"), (fnp.not_equal, "ne"), (fnp.less, "lt"), (fnp.less_equal, "le"),
    (fnp.greater, "gt"), (fnp.greater_equal, "ge"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn,name", BINARY_FAMILIES, ids=[n for _, n in BINARY_FAMILIES])
def test_binary_shape_mismatch(fn, name, mode):
    with pytest.raises(ValueError) as info:
        mode(fn)(A(), B())
    msg = str(info.value)
    assert re.search(rf"\b{name}\b", msg), msg
    assert "f32[2,3]" in msg and "f32[4]" in msg, msg
    assert "broadcast" in msg, msg


@pytest.mark.parametrize("mode", [pytest.param(_eager, id="eager"), pytest.param(_jitted, id="jit")])
@pytest.mark.parametrize("fn,name", [(fnp.logical_and, "logical_and"), (fnp.logical_or, "logical_or")])
def test_logical_shape_mismatch(fn, name, mode):
    with pytest.raises(ValueError) as info:
        mode(lambda x, y: fn(x > 0, y > 0))(A(), B())
    msg = str(info.value)
    assert name in msg and "bool[2,3]" in msg and "bool[4]" in msg, msg


@pytest.mark.parametrize("mode", MODES)
def test_where_shape_mismatch(mode):
    with pytest.raises(ValueError) as info:
        mode(lambda x, y: fnp.where(x > 0, x, y))(A(), B())
    msg = str(info.value)
    assert "select" in msg and "f32[2,3]" in msg and "f32[4]" in msg and "bool[2,3]" in msg, msg


@pytest.mark.parametrize("mode", [pytest.param(_eager, id="eager"), pytest.param(_jitted, id="jit")])
def test_where_condition_shape_mismatch(mode):
    with pytest.raises(ValueError) as info:
        mode(lambda c, x: fnp.where(c > 0, x, 0.0))(fnp.ones(5), A())
    msg = str(info.value)
    assert "bool[5]" in msg and "f32[2,3]" in msg, msg


def test_integer_operands_named_with_their_dtype():
    with pytest.raises(ValueError, match=r"i32\[3\].*i32\[2\]"):
        fnp.arange(3) + fnp.arange(2)


# ----------------------------------------------------------------- matmul


@pytest.mark.parametrize("mode", [pytest.param(_eager, id="eager"), pytest.param(_jitted, id="jit"),
                                  pytest.param(_under_grad, id="grad")])
@pytest.mark.parametrize("x_shape,y_shape,xs,ys", [
    ((2, 3), (4, 2), "f32[2,3]", "f32[4,2]"),
    ((3,), (4,), "f32[3]", "f32[4]"),
    ((2, 3), (4,), "f32[2,3]", "f32[4]"),
    ((5, 2, 3), (2, 2), "f32[5,2,3]", "f32[2,2]"),
])
def test_matmul_inner_dimension_mismatch(x_shape, y_shape, xs, ys, mode):
    with pytest.raises(ValueError) as info:
        mode(fnp.matmul)(fnp.ones(x_shape), fnp.ones(y_shape))
    msg = str(info.value)
    assert "matmul" in msg and xs in msg and ys in msg, msg


def test_matmul_operator_and_batch_mismatch():
    with pytest.raises(ValueError, match=r"matmul.*f32\[2,3\].*f32\[2,3\]"):
        fnp.ones((2, 3)) @ fnp.ones((2, 3))
    with pytest.raises(ValueError, match=r"matmul.*f32\[2,3,4\].*f32\[5,4,2\]"):
        fnp.ones((2, 3, 4)) @ fnp.ones((5, 4, 2))
    with pytest.raises(ValueError, match=r"matmul.*f32\[2,3,4\].*f32\[5,4,2\]"):
        fg.jit(fnp.matmul)(fnp.ones((2, 3, 4)), fnp.ones((5, 4, 2)))
    with pytest.raises(ValueError, match="matmul.*1-d"):
        fnp.matmul(fnp.ones(()), fnp.ones(3))


def test_einsum_mismatch():
    with pytest.raises(ValueError, match=r"einsum.*f32\[2,3\]"):
        fnp.einsum("ij,jk->ik", A(), A())
    with pytest.raises(ValueError, match=r"einsum.*rank"):
        fg.jit(lambda x: fnp.einsum("ijk->i", x))(A())


# ------------------------------------------------------------- axis errors

AXIS_OPS = [
    ("sum", lambda x: fnp.sum(x, axis=2)), ("sum", lambda x: fnp.sum(x, axis=-3)),
    ("sum", lambda x: fnp.sum(x, axis=(0, 5))), ("mean", lambda x: fnp.mean(x, axis=3)),
    ("max", lambda x: fnp.max(x, axis=2)), ("min", lambda x: fnp.min(x, axis=-4)),
    ("prod", lambda x: fnp.prod(x, axis=2)), ("var", lambda x: fnp.var(x, axis=2)),
    ("std", lambda x: fnp.std(x, axis=2)), ("argmax", lambda x: fnp.argmax(x, axis=2)),
    ("argmin", lambda x: fnp.argmin(x, axis=-3)), ("cumsum", lambda x: fnp.cumsum(x, axis=2)),
    ("logsumexp", lambda x: fnp.logsumexp(x, axis=2)),
    ("transpose", lambda x: fnp.transpose(x, (0, 2))), ("swapaxes", lambda x: fnp.swapaxes(x, 0, 2)),
    ("moveaxis", lambda x: fnp.moveaxis(x, 3, 0)), ("expand_dims", lambda x: fnp.expand_dims(x, 4)),
    ("squeeze", lambda x: fnp.squeeze(x, 5)), ("concatenate", lambda x: fnp.concatenate([x, x], axis=2)),
    ("stack", lambda x: fnp.stack([x, x], axis=4)), ("flip", lambda x: fnp.flip(x, 3)),
    ("split", lambda x: fnp.split(x, 2, axis=2)), ("take", lambda x: fnp.take(x, np.array([0]), axis=2)),
    ("repeat", lambda x: fnp.repeat(x, 2, axis=2)), ("norm", lambda x: fnp.linalg.norm(x, axis=2)),
    ("sum", lambda x: x.sum(axis=2)),
]


@pytest.mark.parametrize("mode", [pytest.param(_eager, id="eager"), pytest.param(_jitted, id="jit")])
@pytest.mark.parametrize("name,fn", AXIS_OPS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(AXIS_OPS)])
def test_axis_out_of_range(name, fn, mode):
    with pytest.raises(ValueError) as info:
        mode(fn)(A())
    msg = str(info.value)
    assert name in msg and "axis" in msg and "f32[2,3]" in msg, msg


def test_squeeze_non_unit_axis():
    with pytest.raises(ValueError, match=r"squeeze.*size 3.*f32\[2,3\]"):
        fnp.squeeze(A(), 1)


# -------------------------------------------------------------- shape ops


@pytest.mark.parametrize("mode", MODES[:2])
@pytest.mark.parametrize("shape", [(4, 2), (4, -1), (7,), (2, -1, -1)])
def test_reshape_size_mismatch(shape, mode):
    with pytest.raises(ValueError) as info:
        mode(lambda x: fnp.reshape(x, shape))(A())
    msg = str(info.value)
    assert "reshape" in msg and "f32[2,3]" in msg, msg


def test_reshape_method_size_mismatch():
    with pytest.raises(ValueError, match=r"reshape.*f32\[2,3\].*\(4, 2\)"):
        A().reshape(4, 2)


@pytest.mark.parametrize("fn,name,parts", [
    (lambda: fnp.broadcast_to(A(), (3, 3)), "broadcast_to", ["f32[2,3]", "(3, 3)"]),
    (lambda: fnp.concatenate([A(), fnp.ones((3, 3))], axis=1), "concatenate", ["f32[2,3]", "f32[3,3]"]),
    (lambda: fnp.stack([A(), B()]), "stack", ["f32[2,3]", "f32[4]"]),
    (lambda: fnp.split(A(), 2, axis=1), "split", ["3", "2"]),
    (lambda: fnp.pad(A(), ((1, 1), (1, 1), (1, 1))), "pad", ["f32[2,3]"]),
    (lambda: fnp.tensordot(A(), A(), 1), "tensordot", ["f32[2,3]"]),
    (lambda: fnp.take_along_axis(A(), np.zeros(3, np.int32), 1), "take_along_axis", ["f32[2,3]", "i32[3]"]),
    (lambda: fnp.transpose(A(), (0,)), "transpose", ["f32[2,3]"]),
])
def test_shape_op_errors(fn, name, parts):
    with pytest.raises(ValueError) as info:
        fn()
    msg = str(info.value)
    assert name in msg, msg
    for p in parts:
        assert p in msg, msg


def test_index_out_of_bounds():
    # JAX clamps out-of-bounds gathers; config.checked_indexing turns them into errors.
    fg.config.update("checked_indexing", True)
    try:
        with pytest.raises(IndexError, match=r"getitem.*out of bounds.*f32\[3\]"):
            fnp.ones(3)[5]
        with pytest.raises(IndexError, match=r"take.*out of bounds.*f32\[3\]"):
            fnp.take(fnp.ones(3), np.array([5]))
    finally:
        fg.config.update("checked_indexing", False)


# --------------------------------------------------------- pytree leaves


@pytest.mark.parametrize("transform", ["grad", "vmap", "jit", "jvp", "vjp", "jacrev"])
def test_non_array_leaf_is_rejected(transform):
    f = lambda p: fnp.sum(p["w"] * 2.0)
    bad = {"w": "not an array"}
    with pytest.raises(TypeError) as info:
        if transform == "grad":
            fg.grad(f)(bad)
        elif transform == "vmap":
            fg.vmap(f)(bad)
        elif transform == "jit":
            fg.jit(f)(bad)
        elif transform == "jvp":
            fg.jvp(f, (bad,), (bad,))
        elif transform == "vjp":
            fg.vjp(f, bad)
        else:
            fg.jacrev(f)(bad)
    msg = str(info.value)
    assert "str" in msg and "not an array" in msg, msg
    if transform in ("grad", "vmap", "vjp", "jvp"):
        assert transform in msg, msg


# ------------------------------------------------------------------- jit


@pytest.mark.parametrize("value,typename", [([1, 2], "list"), ({"a": 1}, "dict"), (np.ones(2), "ndarray")])
def test_jit_unhashable_static_argument(value, typename):
    f = fg.jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(TypeError) as info:
        f(fnp.ones(2), value)
    msg = str(info.value)
    assert "static" in msg and "hashable" in msg and "argument 1" in msg, msg


def test_jit_unhashable_static_argname():
    f = fg.jit(lambda x, n=(): x, static_argnames="n")
    with pytest.raises(TypeError, match=r"static.*hashable.*\bn\b"):
        f(fnp.ones(2), n=[1])


def test_jit_concretization_names_shape_and_fix():
    with pytest.raises(fg.ConcretizationError) as info:
        fg.jit(lambda x: x * 2 if x.sum() > 0 else x)(A())
    msg = str(info.value)
    assert "f32[]" in msg or "bool[]" in msg, msg
    assert "static_argnums" in msg and "where" in msg, msg


# ---------------------------------------------------------- writes


@pytest.mark.parametrize("where", ["eager", "grad", "jit", "vmap"])
def test_writes_to_an_array_raise(where):
    def write(x):
        x[0] = 1.0
        return fnp.sum(x)

    with pytest.raises(TypeError) as info:
        if where == "eager":
            write(fnp.ones(3))
        elif where == "grad":
            fg.grad(write)(fnp.ones(3))
        elif where == "jit":
            fg.jit(write)(fnp.ones(3))
        else:
            fg.vmap(write)(fnp.ones((2, 3)))
    msg = str(info.value)
    assert "immutable" in msg and ".at[" in msg, msg


def test_in_place_operators_rebind_not_mutate():
    x = fnp.ones(3)
    y = x
    y += 1.0            # Python falls back to y = y + 1.0: x is untouched
    np.testing.assert_array_equal(np.asarray(x), np.ones(3))
    np.testing.assert_array_equal(np.asarray(y), np.full(3, 2.0))


# ---------------------------------------------------------------- vmap


def test_vmap_in_axes_out_of_range():
    with pytest.raises(ValueError, match=r"vmap.*in_axes=2.*f32\[2,3\]"):
        fg.vmap(lambda x: x, in_axes=2)(A())
    with pytest.raises(ValueError, match=r"vmap.*in_axes=0.*f32\[\]"):
        fg.vmap(lambda x: x)(fnp.asarray(1.0))


def test_vmap_mismatched_sizes():
    with pytest.raises(ValueError) as info:
        fg.vmap(lambda x, y: x)(A(), B())
    msg = str(info.value)
    assert "vmap" in msg and "2" in msg and "4" in msg and "sizes" in msg, msg


def test_vmap_in_axes_wrong_structure():
    with pytest.raises(ValueError, match=r"vmap.*in_axes has 3 entries but 2"):
        fg.vmap(lambda x, y: x, in_axes=(0, 0, 0))(A(), A())
    with pytest.raises(ValueError, match=r"vmap.*in_axes.*structure"):
        fg.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": A()})
    with pytest.raises(TypeError, match=r"vmap.*in_axes.*0.5"):
        fg.vmap(lambda x: x, in_axes=0.5)(A())


def test_vmap_nothing_mapped():
    with pytest.raises(ValueError, match="vmap.*no argument is mapped"):
        fg.vmap(lambda x: x, in_axes=None)(A())


# ---------------------------------------------------------------- grad


def test_grad_of_non_scalar_output():
    with pytest.raises(TypeError) as info:
        fg.grad(lambda x: x * 2.0)(A())
    msg = str(info.value)
    assert "scalar" in msg and "f32[2,3]" in msg and "<lambda>" in msg, msg


def test_grad_of_named_function_names_it():
    def my_loss(x):
        return x * 2.0

    with pytest.raises(TypeError, match="my_loss"):
        fg.grad(my_loss)(A())


def test_grad_of_int_output():
    with pytest.raises(TypeError, match=r"float.*i32\[\]"):
        fg.grad(lambda x: fnp.sum(x).astype(fnp.int32))(A())
    with pytest.raises(TypeError, match=r"bool\[\]"):
        fg.grad(lambda x: fnp.sum(x) > 0)(A())


def test_grad_of_python_scalar_output():
    with pytest.raises(TypeError, match="Python float"):
        fg.grad(lambda x: 3.0)(A())


def test_grad_argnums_out_of_range():
    with pytest.raises(ValueError, match=r"argnums=2.*1 positional"):
        fg.grad(lambda x: fnp.sum(x), argnums=2)(A())
    with pytest.raises(ValueError, match=r"grad\(<lambda>\): argnums=-3 but <lambda> was called with 2 positional "
                                         r"arguments, so argument -3 does not exist: .*\[-2, 2\)"):
        fg.grad(lambda x, y: fnp.sum(x * y), argnums=-3)(A(), A())


def test_vjp_has_aux_needs_a_pair():
    with pytest.raises(TypeError, match=r"vjp\(has_aux=True\): <lambda> must return a pair \(output, aux\), "
                                        r"got f32\[2,3\]"):
        fg.vjp(lambda x: x * 2.0, A(), has_aux=True)


def test_custom_vjp_nondiff_argnums_are_checked():
    def scale(k, x):
        return x * k

    with pytest.raises(TypeError, match=r"custom_vjp: nondiff_argnums must be an int or a tuple of ints .*0\.5 of "
                                        r"type float"):
        fg.custom_vjp(scale, nondiff_argnums=0.5)
    with pytest.raises(ValueError, match=r"nondiff_argnums=\(0, 0\) names an argument more than once.*"
                                         r"nondiff_argnums=\(0,\)"):
        fg.custom_vjp(scale, nondiff_argnums=(0, 0))
    with pytest.raises(ValueError, match=r"custom_vjp scale: nondiff_argnums=\(0, -2\) names the same argument "
                                         r"twice"):
        fg.custom_vjp(scale, nondiff_argnums=(0, -2))
    with pytest.raises(ValueError, match=r"custom_vjp scale: nondiff_argnums=\(2,\) but scale takes 2 positional "
                                         r"arguments \(k, x\); positions \[2\] do not exist"):
        fg.custom_vjp(scale, nondiff_argnums=2)
    later = fg.custom_vjp(scale)
    with pytest.raises(ValueError, match=r"positions \[5\] do not exist"):
        later.nondiff_argnums = (5,)
    # with *args the positions are checked against each call
    first = fg.custom_vjp(lambda *xs: xs[0], nondiff_argnums=1)
    first.defvjp(lambda *xs: (xs[0], None), lambda k, res, ct: (ct,))
    with pytest.raises(ValueError, match=r"nondiff_argnums=\(1,\) but <lambda> was called with 1 positional "
                                         r"argument, so argument 1 does not exist"):
        first(B())


# ----------------------------------------------------------- leaked tracers


@pytest.mark.parametrize("transform", ["grad", "jit", "vmap", "jvp"])
def test_leaked_tracer_used_later(transform):
    leaked = []

    def f(x):
        leaked.append(x * 2.0)
        return fnp.sum(x)

    x = fnp.ones(3)
    if transform == "grad":
        fg.grad(f)(x)
    elif transform == "jit":
        fg.jit(f)(x)
    elif transform == "vmap":
        fg.vmap(f)(fnp.ones((2, 3)))
    else:
        fg.jvp(f, (x,), (x,))
    with pytest.raises(fg.TracerLeakError, match="leaked tracer"):
        leaked[0] + 1.0
    with pytest.raises(fg.TracerLeakError):
        fnp.sum(leaked[0])
    with pytest.raises(fg.TracerLeakError):
        fg.grad(lambda v: fnp.sum(v * leaked[0]))(x)


def test_leaked_tracer_concrete_use():
    leaked = []
    fg.grad(lambda x: leaked.append(x) or fnp.sum(x))(fnp.ones(3))
    with pytest.raises(fg.TracerLeakError):
        fnp.exp(leaked[0])


# ------------------------------------------- custom_vjp and vjp structure


def test_custom_vjp_bwd_wrong_number_of_cotangents():
    @fg.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1],))
    with pytest.raises(ValueError, match=r"custom_vjp f: bwd must return a tuple.*\(2\).*length 1"):
        fg.grad(lambda x: fnp.sum(f(x, x)))(fnp.ones(2))


def test_custom_vjp_bwd_wrong_structure():
    @fg.custom_vjp
    def f(p):
        return p["a"] * 2.0

    f.defvjp(lambda p: (p["a"] * 2.0, None), lambda res, g: ({"b": g * 2.0},))
    with pytest.raises(ValueError, match=r"custom_vjp f.*structure.*'b'.*'a'"):
        fg.grad(lambda p: fnp.sum(f(p)))({"a": fnp.ones(2)})


def test_custom_vjp_bwd_wrong_shape():
    @fg.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (x * 2.0, None), lambda res, g: (fnp.ones(5),))
    with pytest.raises(ValueError, match=r"custom_vjp f.*f32\[5\].*f32\[2\]"):
        fg.grad(lambda x: fnp.sum(f(x)))(fnp.ones(2))


def test_custom_vjp_without_defvjp():
    @fg.custom_vjp
    def f(x):
        return x

    with pytest.raises(TypeError, match="defvjp"):
        f(fnp.ones(2))


def test_custom_vjp_fwd_must_return_pair():
    @fg.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: x * 2.0, lambda res, g: (g,))
    with pytest.raises(TypeError, match=r"custom_vjp f: fwd must return a pair"):
        fg.grad(lambda x: fnp.sum(f(x)))(fnp.ones(2))


def test_vjp_cotangent_structure_mismatch():
    _, pullback = fg.vjp(lambda x: (x * 2.0, x), fnp.ones(2))
    with pytest.raises(ValueError, match=r"vjp.*structure"):
        pullback(fnp.ones(2))
    with pytest.raises(ValueError, match=r"vjp.*f32\[3\].*f32\[2\]"):
        pullback((fnp.ones(3), fnp.ones(2)))


def test_jvp_structure_and_shape_mismatch():
    with pytest.raises(ValueError, match=r"jvp.*structure"):
        fg.jvp(lambda x, y: x, (fnp.ones(2), fnp.ones(2)), (fnp.ones(2),))
    with pytest.raises(ValueError, match=r"jvp.*f32\[3\].*f32\[2\]"):
        fg.jvp(lambda x: x, (fnp.ones(2),), (fnp.ones(3),))
    with pytest.raises(TypeError, match="tuple"):
        fg.jvp(lambda x: x, fnp.ones(2), fnp.ones(2))


# ------------------------------------------------------------- misc input


@pytest.mark.parametrize("fn", [lambda: fnp.sqrt("abc"), lambda: fnp.add(A(), "abc"), lambda: A() + None])
def test_non_numeric_operands(fn):
    with pytest.raises(TypeError, match="str|NoneType"):
        fn()


def test_unhashable_array():
    with pytest.raises(TypeError, match="unhashable"):
        hash(A())
    with pytest.raises(TypeError, match="unhashable"):
        {A(): 1}


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="datetimes"):
        fnp.asarray(np.zeros(2, "datetime64[s]"))
    assert fnp.asarray(np.ones(2, np.complex64)).dtype == np.complex64   # complex is supported
