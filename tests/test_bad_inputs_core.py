"""Bad inputs to the transforms and the core (grad/jit/jvp/vjp arguments, conversions,
operators, reductions, masks, check_grads): table rows through the shared checker, and
the valid neighbours of those rows checked against numpy."""

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp

from bad_input_table import Case, _i32, _two, f32, table_tests  # noqa: F401

CASES: list[Case] = []

# --- transforms and core
# Argument mistakes in the transforms (argnums, static_argnums, tangent dtypes,
# custom_vjp rules, non-scalar grad outputs) and the core (integer overflow,
# non-numeric arrays, bit operators, empty reductions, boolean masks).


def _one_arg(x):
    return x * 2.0


def _var_args(*xs):
    return xs[0]


def _scale_with_bwd(bwd):
    """A custom_vjp ``scale(x) = 2 x`` whose backward rule is ``bwd(residual, g)``."""
    @fg.custom_vjp
    def scale(x):
        return x * 2.0

    scale.defvjp(lambda x: (x * 2.0, x), bwd)
    return lambda x: fg.grad(lambda v: fnp.sum(scale(v)))(x)


_EMPTY_REDUCTION = ["zero-size", "no identity", "f32[0,3]", "axis 0"]
_MASK = ["bool[2]", "f32[3]", "axis 0", "size of axis is 3", "boolean axis is 2"]
_BITS = ["bool arrays only", "logical_and"]

CASES += [
    # argnums: repeated, negative repeats, wrong types, out of range -- for every transform that takes them
    Case("grad-argnums-repeated", lambda: fg.grad(_two, argnums=(0, 0)), ValueError,
         ["grad", "argnums=(0, 0)", "more than once", "argnums=(0,)"]),
    Case("value_and_grad-argnums-repeated", lambda: fg.value_and_grad(_two, argnums=[1, 1]), ValueError,
         ["value_and_grad", "argnums=(1, 1)", "more than once"]),
    Case("jacrev-argnums-repeated", lambda: fg.jacrev(_two, argnums=(0, 0)), ValueError, ["jacrev", "(0, 0)"]),
    Case("jacfwd-argnums-repeated", lambda: fg.jacfwd(_two, argnums=(1, 1)), ValueError, ["jacfwd", "(1, 1)"]),
    Case("hessian-argnums-repeated", lambda: fg.hessian(_two, argnums=(0, 0)), ValueError, ["hessian", "(0, 0)"]),
    Case("grad-argnums-negative-repeat", lambda: fg.grad(_two, argnums=(0, -2))(f32(3), f32(3)), ValueError,
         ["grad", "argnums=(0, -2)", "same argument twice", "2 positional"]),
    Case("grad-argnums-float", lambda: fg.grad(_two, argnums=0.5), TypeError,
         ["grad", "argnums", "0.5", "float", "int or a tuple of ints"]),
    Case("grad-argnums-bool", lambda: fg.grad(_two, argnums=True), TypeError, ["grad", "argnums", "bool"]),
    Case("jacrev-argnums-str", lambda: fg.jacrev(_two, argnums=("x",)), TypeError, ["jacrev", "argnums", "'x'"]),
    Case("grad-argnums-out-of-range", lambda: fg.grad(fnp.sum, argnums=2)(f32(3)), ValueError,
         ["grad", "argnums=2", "1 positional argument", "[-1, 1)"]),
    Case("jacfwd-argnums-out-of-range", lambda: fg.jacfwd(_one_arg, argnums=(0, 3))(f32(2)), ValueError,
         ["jacfwd", "argnums=(0, 3)", "1 positional argument"]),

    # jit's static arguments and cache size
    Case("jit-static-argnums-beyond-signature", lambda: fg.jit(_one_arg, static_argnums=5), ValueError,
         ["jit(_one_arg)", "static_argnums=(5,)", "takes 1 positional argument (x)", "[5]"]),
    Case("jit-static-argnums-beyond-call", lambda: fg.jit(_var_args, static_argnums=2)(f32(3)), ValueError,
         ["jit(_var_args)", "static_argnums=(2,)", "called with 1 positional argument", "static_argnames"]),
    Case("jit-static-argnums-decorator-form", lambda: fg.jit(static_argnums=1)(_one_arg), ValueError,
         ["jit(_one_arg)", "static_argnums=(1,)", "1 positional argument"]),
    Case("jit-static-argnums-float", lambda: fg.jit(_one_arg, static_argnums=0.5), TypeError,
         ["jit", "static_argnums", "0.5", "int"]),
    Case("jit-static-argnames-unknown", lambda: fg.jit(_one_arg, static_argnames="n"), ValueError,
         ["jit(_one_arg)", "static_argnames=('n',)", "['n']", "parameters: x"]),
    Case("jit-static-argnames-not-str", lambda: fg.jit(_one_arg, static_argnames=(0,)), TypeError,
         ["jit", "static_argnames", "str"]),
    Case("jit-cache-size-negative", lambda: fg.jit(_one_arg, cache_size=-1), ValueError,
         ["jit", "cache_size", "positive int", "-1"]),
    Case("jit-cache-size-zero", lambda: fg.jit(cache_size=0), ValueError, ["jit", "cache_size", "positive int", "0"]),
    Case("jit-cache-size-float", lambda: fg.jit(_one_arg, cache_size=2.5), ValueError, ["cache_size", "2.5"]),
    Case("make_jaxpr-static-argnums-beyond-call", lambda: fg.make_jaxpr(_one_arg, static_argnums=3)(f32(2)),
         ValueError, ["make_jaxpr(_one_arg)", "static_argnums=(3,)", "1 positional argument"]),
    Case("make_jaxpr-static-argnums-float", lambda: fg.make_jaxpr(_one_arg, static_argnums=0.5), TypeError,
         ["make_jaxpr", "static_argnums", "0.5"]),

    # tangents and cotangents live in their primal's space: same shape, same dtype
    Case("jvp-int-tangent-float-primal", lambda: fg.jvp(fnp.sin, (f32(3),), (_i32(1, 2, 3),)), TypeError,
         ["jvp", "tangent i32[3]", "primal f32[3]", "dtypes must be equal", "astype('float32')"]),
    Case("jvp-float-tangent-int-primal", lambda: fg.jvp(lambda i: i * 2, (_i32(1, 2),), (f32(2),)), TypeError,
         ["jvp", "tangent f32[2]", "primal i32[2]", "dtypes must be equal", "no derivative"]),
    Case("jvp-f16-tangent-f32-primal",
         lambda: fg.jvp(fnp.sin, (f32(2),), (fnp.ones(2, dtype=fnp.float16),)), TypeError,
         ["jvp", "f16[2]", "f32[2]", "float16", "float32"]),
    Case("jvp-tangent-shape", lambda: fg.jvp(fnp.sin, (f32(3),), (f32(2),)), ValueError,
         ["jvp", "tangent f32[2]", "primal f32[3]", "shapes must be equal"]),
    Case("vjp-int-cotangent", lambda: fg.vjp(fnp.sin, f32(3))[1](_i32(1, 2, 3)), TypeError,
         ["vjp", "cotangent i32[3]", "output f32[3]", "dtypes must be equal"]),
    Case("vjp-cotangent-shape", lambda: fg.vjp(fnp.sin, f32(3))[1](f32(3, 1)), ValueError,
         ["vjp", "cotangent f32[3,1]", "output f32[3]", "shapes must be equal"]),

    # custom_vjp backward rules are checked against the inputs
    Case("custom_vjp-int-cotangent", lambda: _scale_with_bwd(lambda r, g: ((g * 2.0).astype(fnp.int32),))(f32(3)),
         TypeError, ["custom_vjp scale", "input 0", "i32[3]", "f32[3]", "float32"]),
    Case("custom_vjp-cotangent-shape", lambda: _scale_with_bwd(lambda r, g: (fnp.ones(2),))(f32(3)), ValueError,
         ["custom_vjp scale", "input 0", "f32[2]", "f32[3]", "expected shape (3,)"]),
    Case("custom_vjp-too-many-cotangents", lambda: _scale_with_bwd(lambda r, g: (g, g))(f32(3)), ValueError,
         ["custom_vjp scale", "one cotangent per differentiable argument (1)", "length 2"]),
    Case("custom_vjp-bare-cotangent", lambda: _scale_with_bwd(lambda r, g: g * 2.0)(f32(3)), TypeError,
         ["custom_vjp scale", "tuple", "Array f32[3]", "(g,)"]),
    Case("custom_vjp-list-of-cotangents", lambda: _scale_with_bwd(lambda r, g: [g * 2.0])(f32(3)), TypeError,
         ["custom_vjp scale", "tuple", "got list"]),
    Case("custom_vjp-str-cotangent", lambda: _scale_with_bwd(lambda r, g: ("g",))(f32(3)), TypeError,
         ["custom_vjp scale", "str", "input 0", "f32[3]"]),

    # grad needs one float scalar: say what came back and what to do instead
    Case("grad-of-tuple", lambda: fg.grad(lambda x: (fnp.sum(x), x))(f32(3)), TypeError,
         ["grad", "scalar", "tuple of 2 items", "f32[], f32[3]", "has_aux=True"]),
    Case("value_and_grad-of-list", lambda: fg.value_and_grad(lambda x: [fnp.sum(x)])(f32(3)), TypeError,
         ["grad", "list of 1 item", "f32[]", "has_aux=True"]),
    Case("grad-of-dict", lambda: fg.grad(lambda x: {"loss": fnp.sum(x)})(f32(3)), TypeError,
         ["grad", "scalar array", "dict with keys ['loss']"]),
    Case("grad-of-none", lambda: fg.grad(lambda x: None)(f32(3)), TypeError, ["grad", "scalar array", "None"]),
    Case("grad-of-vector", lambda: fg.grad(lambda x: x * 2.0)(f32(3)), TypeError,
         ["grad", "scalar", "f32[3]", "vjp or jacrev"]),
    Case("grad-has-aux-not-a-pair", lambda: fg.grad(lambda x: fnp.sum(x), has_aux=True)(f32(3)), TypeError,
         ["grad(has_aux=True)", "pair (output, aux)", "f32[]"]),
    Case("grad-has-aux-triple", lambda: fg.grad(lambda x: (fnp.sum(x), x, x), has_aux=True)(f32(3)), TypeError,
         ["grad(has_aux=True)", "pair", "tuple of 3 items"]),

    # checkpoint returns arrays
    Case("checkpoint-str-output", lambda: fg.checkpoint(lambda x: "loss")(f32(3)), TypeError,
         ["checkpoint(<lambda>)", "output leaf 0", "str", "'loss'"]),
    Case("checkpoint-object-output-under-grad",
         lambda: fg.grad(lambda x: fnp.sum(fg.checkpoint(lambda v: (v, object()))(x)[0]))(f32(3)), TypeError,
         ["checkpoint(<lambda>)", "output leaf 1", "object"]),

    # core: numpy's ufunc errors re-raised with the primitive and dtypes (never a broken re-raise)
    Case("sign-of-bool", lambda: fnp.sign(f32(3) > 0), TypeError, ["sign", "bool[3]", "not supported"]),
    Case("sign-of-bool-jit", lambda: fg.jit(lambda x: fnp.sign(x > 0) + 1)(f32(3)), TypeError,
         ["sign", "bool[3]", "not supported"]),
    Case("neg-of-bool-jit", lambda: fg.jit(lambda x: -(x > 0) + 1)(f32(3)), TypeError,
         ["neg", "bool[3]", "logical_not"]),
    Case("sub-of-bools-jit", lambda: fg.jit(lambda x: ((x > 0) - (x > 1)) + 1)(f32(3)), TypeError,
         ["sub", "bool[3], bool[3]", "logical_xor"]),

    # core: integers that do not fit raise OverflowError (as in JAX), never wrap around
    Case("array-int-overflow", lambda: fnp.array([2 ** 40]), OverflowError,
         ["1099511627776", "int32", "enable_x64", "float"]),
    Case("asarray-int-overflow", lambda: fnp.asarray(2 ** 40), OverflowError, ["1099511627776", "int32"]),
    Case("array-int-beyond-int64", lambda: fnp.array([1, 2 ** 70]), OverflowError, [str(2 ** 70), "int32"]),
    Case("array-numpy-int64-overflow", lambda: fnp.asarray(np.array([1, -2 ** 40])), OverflowError,
         [str(-2 ** 40), "int32", "range [-2147483648, 2147483647]"]),
    Case("array-numpy-int64-scalar-overflow", lambda: fnp.asarray(np.int64(2 ** 33)), OverflowError,
         [str(2 ** 33), "int32"]),
    Case("add-int-overflow-eager", lambda: _i32(1, 2, 3) + 2 ** 40, OverflowError,
         ["add", "i32[3]", "1099511627776", "int32", "enable_x64"]),
    Case("add-int-overflow-jit-fused", lambda: fg.jit(lambda i: i * 2 + 2 ** 40)(_i32(1, 2, 3)), OverflowError,
         ["add", "i32[3]", "1099511627776", "int32", "enable_x64"]),
    Case("mul-int-overflow-vmap", lambda: fg.vmap(lambda i: i * 2 ** 35)(_i32(1, 2)), OverflowError,
         ["mul", "34359738368", "int32"]),

    # core: arrays hold bool/int/float/complex only
    Case("array-of-str-and-int", lambda: fnp.array([1, "a"]), TypeError,
         ["<U21", "strings", "bool, integer, float and complex"]),
    Case("array-of-str", lambda: fnp.array(["a", "b"]), TypeError, ["<U1", "strings"]),
    Case("asarray-numpy-str", lambda: fnp.asarray(np.array(["ab"])), TypeError,
         ["<U2", "strings", "bool, integer, bfloat16, float16/32/64 and complex64/128"]),
    Case("array-with-none", lambda: fnp.array([1.0, None]), TypeError, ["list", "non-numeric", "None"]),
    Case("array-ragged", lambda: fnp.array([[1.0, 2.0], [3.0]]), ValueError, ["nested list", "inhomogeneous"]),

    # core: & | ^ ~ are logical on bools; numpy refuses them on floats, and on ints they are bitwise
    Case("and-floats", lambda: f32(3) & f32(3), TypeError, ["&", "bitwise_and", "f32[3] and f32[3]"] + _BITS),
    Case("or-float-scalar", lambda: f32(3) | 1.0, TypeError, ["|", "bitwise_or", "f32[3] and float scalar"]),
    Case("xor-reflected", lambda: 1.0 ^ f32(3), TypeError, ["^", "bitwise_xor", "float scalar and f32[3]"]),
    Case("invert-float", lambda: ~f32(3), TypeError, ["~", "invert", "f32[3]"] + _BITS),
    Case("and-ints-is-not-logical", lambda: _i32(1, 2, 3) & 1, TypeError, ["&", "i32[3] and int scalar"]),
    Case("and-floats-jit", lambda: fg.jit(lambda x: x & x)(f32(3)), TypeError, ["&", "f32[3] and f32[3]"]),
    Case("lshift", lambda: f32(3) << 1, TypeError, ["<<", "left_shift", "f32[3] and int scalar", "power of 2"]),
    Case("rshift-reflected", lambda: 8 >> _i32(1, 2), TypeError, [">>", "right_shift", "int scalar and i32[2]"]),

    # max/min/argmax/argmin of nothing: the same ValueError eagerly, under jit and under vmap
    Case("max-empty-eager", lambda: fnp.max(f32(0, 3), axis=0), ValueError, ["reduce_max"] + _EMPTY_REDUCTION),
    Case("max-empty-jit", lambda: fg.jit(lambda x: fnp.max(x * 2.0, axis=0))(f32(0, 3)), ValueError,
         ["reduce_max"] + _EMPTY_REDUCTION),
    Case("min-empty-jit-all-axes", lambda: fg.jit(lambda x: fnp.min(fnp.exp(x)))(f32(0)), ValueError,
         ["reduce_min", "zero-size", "f32[0]"]),
    Case("max-empty-vmap", lambda: fg.vmap(fnp.max)(f32(3, 0)), ValueError, ["reduce_max", "zero-size", "f32[3,0]"]),
    Case("argmax-empty-jit", lambda: fg.jit(lambda x: fnp.argmax(x, axis=0))(f32(0, 3)), ValueError,
         ["argmax"] + _EMPTY_REDUCTION),
    Case("argmin-empty-eager", lambda: fnp.argmin(f32(0, 3), axis=0), ValueError, ["argmin"] + _EMPTY_REDUCTION),

    # boolean masks must match the axes they select from (numpy's IndexError)
    Case("getitem-mask-too-short", lambda: f32(3)[fnp.array([True, False])], IndexError, ["getitem"] + _MASK),
    Case("getitem-numpy-mask-too-short", lambda: f32(3)[np.array([True, False])], IndexError, ["getitem"] + _MASK),
    Case("getitem-list-mask-too-long", lambda: f32(3)[[True, False, True, True]], IndexError,
         ["getitem", "bool[4]", "size of axis is 3"]),
    Case("getitem-mask-after-slice", lambda: f32(2, 3)[:, np.array([True, False])], IndexError,
         ["getitem", "bool[2]", "f32[2,3]", "axis 1", "size of axis is 3"]),
    Case("getitem-mask-after-ellipsis", lambda: f32(2, 3, 4)[..., np.array([True, False, True])], IndexError,
         ["getitem", "bool[3]", "f32[2,3,4]", "axis 2", "size of axis is 4"]),
    Case("getitem-mask-too-many-axes", lambda: f32(3)[np.ones((3, 1), bool)], IndexError,
         ["getitem", "bool[3,1]", "f32[3]", "too many indices"]),
    Case("getitem-mask-jit", lambda: fg.jit(lambda x: x[np.array([True, False])])(f32(3)), IndexError,
         ["getitem"] + _MASK),
    Case("at-set-mask-too-short", lambda: f32(3).at[fnp.array([True, False])].set(0.0), IndexError,
         ["at[...].set"] + _MASK),
    Case("at-add-mask-too-short", lambda: f32(3).at[np.array([True, False])].add(1.0), IndexError,
         ["at[...].add"] + _MASK),
    Case("at-set-mask-under-grad",
         lambda: fg.grad(lambda x: fnp.sum(x.at[np.array([True, False])].set(0.0)))(f32(3)), IndexError,
         ["at[...].set"] + _MASK),
]


class _TwoArgValueError(ValueError):
    """An exception type whose constructor does not take one message (like numpy's _UFuncNoLoopError)."""

    def __init__(self, code, detail):
        super().__init__(f"code {code}: {detail}")


def test_core_reraise_survives_exception_constructors():
    """An implementation's error keeps its built-in base type and gains the primitive and shapes."""
    from funcgrad._core import Primitive

    p = Primitive("probe_op")

    def impl(x):
        raise _TwoArgValueError(7, "bad value")

    p.impl = impl
    with pytest.raises(ValueError) as info:
        p.bind(f32(2, 3))
    msg = str(info.value)
    assert "probe_op" in msg and "f32[2,3]" in msg and "code 7: bad value" in msg, msg
    assert isinstance(info.value.__cause__, _TwoArgValueError)

    def impl_numpy(x):   # numpy's own no-loop error: a private TypeError subclass taking (ufunc, dtypes)
        return np.sign(np.asarray(x, dtype=bool))

    p.impl = impl_numpy
    with pytest.raises(TypeError) as info:
        p.bind(f32(2))
    assert "probe_op" in str(info.value) and "not supported for the input types" in str(info.value)
    assert type(info.value) is TypeError


def test_core_argnums_valid_neighbours_are_right():
    x, y = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -3.0])
    f = lambda a, b: fnp.sum(a * b ** 2)   # d/da = b**2, d/db = 2 a b
    ga, gb = fg.grad(f, argnums=(0, 1))(fnp.array(x), fnp.array(y))
    np.testing.assert_allclose(np.asarray(ga), y ** 2, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gb), 2 * x * y, rtol=1e-6)
    gb_neg = fg.grad(f, argnums=-1)(fnp.array(x), fnp.array(y))
    np.testing.assert_allclose(np.asarray(gb_neg), 2 * x * y, rtol=1e-6)
    ga_np = fg.grad(f, argnums=np.int64(0))(fnp.array(x), fnp.array(y))
    np.testing.assert_allclose(np.asarray(ga_np), y ** 2, rtol=1e-6)
    jb = fg.jacrev(lambda a, b: a * b, argnums=[1])(fnp.array(x), fnp.array(y))[0]
    np.testing.assert_allclose(np.asarray(jb), np.diag(x), rtol=1e-6)


def test_core_jit_static_valid_neighbours_are_right():
    def power(x, n=2):
        return x ** n

    x = np.array([0.5, 1.5, -2.0])
    by_position = fg.jit(power, static_argnums=1)
    np.testing.assert_allclose(np.asarray(by_position(fnp.array(x), 3)), x ** 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(by_position(fnp.array(x), n=4)), x ** 4, rtol=1e-6)   # by keyword
    np.testing.assert_allclose(np.asarray(by_position(fnp.array(x))), x ** 2, rtol=1e-6)        # the default
    by_name = fg.jit(power, static_argnames="n", cache_size=1)
    np.testing.assert_allclose(np.asarray(by_name(fnp.array(x), n=3)), x ** 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(fg.jit(_var_args, static_argnums=1)(fnp.array(x), "tag")), x)
    ir = str(fg.make_jaxpr(lambda v, n: v * n, static_argnums=-1)(fnp.array(x), 7))   # n is a constant of the IR
    assert "mul" in ir and "7" in ir and "f32[3]" in ir, ir


def test_core_matching_tangents_are_accepted_and_right():
    x = np.array([0.3, -1.2, 2.0])
    _, t = fg.jvp(fnp.sin, (fnp.array(x),), (fnp.array([1.0, 2.0, -1.0]),))
    np.testing.assert_allclose(np.asarray(t), np.cos(x) * [1.0, 2.0, -1.0], rtol=1e-6)
    _, t0 = fg.jvp(fnp.sin, (fnp.asarray(0.5),), (2.0,))   # a Python float takes the primal's dtype
    assert t0.dtype == np.float32
    np.testing.assert_allclose(float(t0), 2.0 * np.cos(0.5), rtol=1e-6)
    _, pullback = fg.vjp(fnp.sin, fnp.array(x))
    (ct,) = pullback(np.array([1.0, 1.0, 2.0]))   # numpy float64 is stored as float32 without x64
    np.testing.assert_allclose(np.asarray(ct), np.cos(x) * [1.0, 1.0, 2.0], rtol=1e-6)
    _, ti = fg.jvp(lambda i: i * 3, (_i32(1, 2),), (_i32(1, 1),))   # int primal, int tangent: as before
    np.testing.assert_array_equal(np.asarray(ti), [3, 3])


def test_core_custom_vjp_valid_cotangents_are_used():
    grad_of = _scale_with_bwd(lambda r, g: (g * 3.0,))   # deliberately not 2: the rule's own value must come out
    np.testing.assert_allclose(np.asarray(grad_of(f32(3))), np.full(3, 3.0))
    scalar = _scale_with_bwd(lambda r, g: (1.5,))   # a Python float for a 0-d input
    np.testing.assert_allclose(float(scalar(fnp.asarray(2.0))), 1.5)
    zero = _scale_with_bwd(lambda r, g: (None,))
    np.testing.assert_array_equal(np.asarray(zero(f32(2))), np.zeros(2))


def test_core_valid_outputs_of_grad_and_checkpoint():
    x = np.array([0.3, -1.2, 2.0])
    (loss, aux), g = fg.value_and_grad(lambda v: (fnp.sum(v ** 2), v * 2.0), has_aux=True)(fnp.array(x))
    np.testing.assert_allclose(np.asarray(g), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(aux), 2 * x, rtol=1e-6)
    f = lambda v: fnp.sum(fnp.sin(v) ** 2)
    g_ckpt = fg.grad(lambda v: fg.checkpoint(f)(v))(fnp.array(x))
    np.testing.assert_allclose(np.asarray(g_ckpt), 2 * np.sin(x) * np.cos(x), rtol=1e-5)
    const = fg.checkpoint(lambda v: (fnp.sum(v), 3.0))(fnp.array(x))   # a Python number becomes an array
    assert float(const[1]) == 3.0


def test_core_integers_in_range_are_exact():
    big = 2 ** 31 - 1
    np.testing.assert_array_equal(np.asarray(fnp.array([big, -big - 1])), [big, -big - 1])
    np.testing.assert_array_equal(np.asarray(fnp.asarray(np.array([5, -7], np.int64))), [5, -7])
    i = _i32(1, 2, 3)
    expected = np.array([1, 2, 3], np.int64) * 2 + (2 ** 30)
    np.testing.assert_array_equal(np.asarray(i * 2 + 2 ** 30), expected)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: v * 2 + 2 ** 30)(i)), expected)
    np.testing.assert_allclose(np.asarray(f32(2) + 2 ** 40), np.full(2, 1.0 + 2 ** 40), rtol=1e-7)


def test_core_bool_operators_match_numpy():
    a, b = np.array([0.5, -1.0, 2.0, 0.0]), np.array([1.0, 1.0, -3.0, 0.0])
    xa, xb = fnp.array(a), fnp.array(b)
    for got, want in [((xa > 0) & (xb > 0), (a > 0) & (b > 0)), ((xa > 0) | (xb > 0), (a > 0) | (b > 0)),
                      ((xa > 0) ^ (xb > 0), (a > 0) ^ (b > 0)), (~(xa > 0), ~(a > 0)),
                      ((xa > 0) & True, (a > 0) & True), (np.array([True, False, True, True]) & (xb > 0),
                                                          np.array([True, False, True, True]) & (b > 0)),
                      (fg.jit(lambda u, v: (u > 0) & ~(v > 0))(xa, xb), (a > 0) & ~(b > 0))]:
        np.testing.assert_array_equal(np.asarray(got), want)


def test_core_nonempty_reductions_still_work():
    x = np.arange(6.0).reshape(3, 2) - 2.5
    for fn, ref in [(fnp.max, np.max), (fnp.min, np.min), (fnp.argmax, np.argmax), (fnp.argmin, np.argmin)]:
        np.testing.assert_array_equal(np.asarray(fn(fnp.array(x), axis=0)), ref(x, axis=0))
        np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: fn(v, axis=1))(fnp.array(x))), ref(x, axis=1))
    # Reducing a non-empty axis of an array with a zero-size axis elsewhere is fine (numpy agrees).
    e = np.ones((0, 3), np.float32)
    assert np.asarray(fnp.max(fnp.array(e), axis=1)).shape == np.max(e, axis=1).shape == (0,)
    assert np.asarray(fg.jit(lambda v: fnp.max(v, axis=1))(fnp.array(e))).shape == (0,)
    np.testing.assert_array_equal(np.asarray(fg.jit(lambda v: fnp.sum(v, axis=0))(fnp.array(e))), np.zeros(3))


def test_core_right_length_masks_match_numpy():
    x = np.arange(12.0).reshape(3, 4)
    rows, cols = np.array([True, False, True]), np.array([False, True, True, False])
    np.testing.assert_array_equal(np.asarray(fnp.array(x)[rows]), x[rows])
    np.testing.assert_array_equal(np.asarray(fnp.array(x)[..., cols]), x[..., cols])
    np.testing.assert_array_equal(np.asarray(fnp.array(x)[x > 4]), x[x > 4])
    expected = x.copy()
    expected[rows] = -1.0
    np.testing.assert_array_equal(np.asarray(fnp.array(x).at[fnp.array(rows)].set(-1.0)), expected)
    g = fg.grad(lambda v: fnp.sum(v[:, cols] ** 2))(fnp.array(x))
    np.testing.assert_allclose(np.asarray(g), np.where(cols, 2 * x, 0.0))


def test_core_check_grads_uses_the_computed_dtype(x32):
    from funcgrad.testing import check_grads

    # float64 numpy inputs are computed in float32 here: the float32 tolerances apply.
    check_grads(fnp.sin, (np.array([0.3, 1.2, 2.0]),), order=2)
    check_grads(lambda a, b: fnp.sum(fnp.tanh(a) * b), (np.array([0.3, -1.2]), np.array([[0.5, 2.0]])), order=1)

    @fg.custom_vjp
    def wrong_sin(x):
        return fnp.sin(x)

    wrong_sin.defvjp(lambda x: (fnp.sin(x), x), lambda x, g: (g * fnp.sin(x),))   # should be cos
    with pytest.raises(AssertionError, match="vjp"):
        check_grads(wrong_sin, (np.array([0.3, 1.2, 2.0]),), modes=("rev",), order=1)



test_bad_input, test_case_ids_are_unique = table_tests(CASES)
