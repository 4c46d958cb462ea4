"""grad and value_and_grad, with the checks every differentiating transform makes of what it is given.

``argnums`` is checked once, when the transform is made; the differentiated
inputs must be float (or complex, as in JAX), and grad's output a real
scalar. A single float Array argument, or several (``argnums=(0, 1)``), takes
a path without pytree work: that is the hot path of small functions.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad import _core
from funcgrad._argspec import ArgSpec, as_leaf, fun_name as _fun_name, with_args
from funcgrad._core import Array
from funcgrad._dtypes import describe
from funcgrad.interpreters.reverse import vjp_flat
from funcgrad.tree_util import flatten_fun, tree_flatten, tree_structure, tree_unflatten


_SINGLE_LEAF = tree_structure((0,))


_BFLOAT16 = _dtypes.bfloat16   # dtype tests inline on the per-call path (a call costs more)

def _argnums_spec(f: Callable, argnums: Any, transform: str) -> ArgSpec:
    """``argnums`` checked (once, when the transform is made): the arguments to differentiate."""
    return ArgSpec(transform, "argnums", argnums, static=False, unique=True, fun=f)


def _diff_inputs(spec: ArgSpec, args: tuple, transform: str, holomorphic: bool = False,
                 complex_ok: bool = True) -> tuple[tuple[int, ...], list, Any]:
    """The positions, float leaves and structure of the arguments ``spec`` differentiates.

    The structure is that of the tuple of those arguments (what
    :func:`flatten_fun` rebuilds); an int ``argnums`` picks its one child.
    """
    nums = spec.positions(len(args))
    leaves, tree = tree_flatten(tuple([args[i] for i in nums]))
    leaves = [as_leaf(x, transform) for x in leaves]
    _check_float_inputs(leaves, transform, holomorphic, complex_ok)
    return nums, leaves, tree


def _check_float_inputs(leaves: list, name: str, holomorphic: bool = False, complex_ok: bool = True) -> None:
    """The inputs a transform differentiates: float, or complex (as JAX: ``holomorphic=True`` needs complex
    inputs; jacfwd takes complex inputs only with ``holomorphic=True``)."""
    for x in leaves:
        kind = _dtypes.kind(x.dtype)
        if holomorphic:
            if kind != "c":
                raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, but got "
                                f"{describe(x)}. Convert it with .astype(fnp.complex64), or drop holomorphic=True.")
        elif kind == "c" and not complex_ok:
            raise TypeError(f"{name} requires real-valued inputs (a float dtype), but got {describe(x)}. For "
                            "holomorphic differentiation, pass holomorphic=True. For differentiation of "
                            "non-holomorphic functions involving complex inputs, use jvp directly.")
        elif kind not in "fc":
            raise TypeError(f"{name} requires float (or complex) inputs to differentiate with respect to, got an "
                            f"array {describe(x)}. Convert it with .astype(fnp.float32), or leave it out of "
                            "argnums.")


def _check_holomorphic_outputs(outs: list, name: str) -> None:
    for o in outs:
        if o.dtype.kind != "c":
            raise TypeError(f"{name} with holomorphic=True requires outputs with complex dtype, but got "
                            f"{describe(o)}. Drop holomorphic=True for a real-valued function.")


def _check_real_outputs(outs: list, name: str) -> None:
    for o in outs:
        if o.dtype.kind == "c":
            raise TypeError(f"{name} requires real-valued outputs (a float dtype), but got {describe(o)}. For "
                            "holomorphic differentiation, pass holomorphic=True. For differentiation of "
                            "non-holomorphic functions involving complex outputs, use vjp directly (or "
                            "differentiate fnp.real / fnp.imag / fnp.abs of the output).")


# ------------------------------------------------------------------ grad


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable:
    """Like :func:`grad`, returning ``(value, grads)`` (``((value, aux), grads)`` with ``has_aux``).

    >>> fg.value_and_grad(lambda x: fnp.sum(x ** 2))(fnp.array([1.0, 2.0]))
    (Array(5., dtype=float32), Array([2., 4.], dtype=float32))
    """
    return _value_and_grad(f, argnums, has_aux, with_value=True, holomorphic=holomorphic)


def _value_and_grad(f: Callable, argnums: Any, has_aux: bool, with_value: bool, holomorphic: bool = False) -> Callable:
    # grad and value_and_grad in one wrapper (one frame per call, not two).
    name = _fun_name(f)
    transform = "value_and_grad" if with_value else "grad"
    spec = _argnums_spec(f, argnums, transform)
    argnums = spec.spec
    aux_where = f"{transform}(has_aux=True): {name}"

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        # A single float Array argument (the common case of tiny functions) needs no pytree work.
        single = (type(argnums) is int and 0 <= argnums < len(args) and type(args[argnums]) is Array
                  and ((d := args[argnums]._value.dtype).kind == "f" or d is _BFLOAT16) and not holomorphic)
        if single:
            nums, leaves, tree = (argnums,), [args[argnums]], _SINGLE_LEAF
        else:
            nums = None if holomorphic else _float_array_positions(spec, args)
            if nums is not None:     # several float Arrays (argnums=(0, 1)): no pytree work either
                single, leaves, tree = True, [args[i] for i in nums], _leaf_tuple(len(nums))
            else:
                nums, leaves, tree = _diff_inputs(spec, args, transform, holomorphic)
        # f(x): nothing to put back among other arguments (with_args would give f too; this is the hot path).
        fun = f if len(args) == 1 and not kwargs else with_args(f, args, kwargs, nums)
        flat_fun, out_tree = flatten_fun(fun, tree, has_aux=has_aux, where=aux_where)
        result = vjp_flat(flat_fun, leaves, has_aux)
        outs, pullback, out_def = result[0], result[1], out_tree()
        # One array out (checked next); any other structure is rebuilt for _check_scalar_output to describe.
        value = outs[0] if out_def.node_type is None else tree_unflatten(out_def, outs)
        if type(value) is Array and value._value.shape == () and ((d := value._value.dtype).kind == "f"
                                                                   or d is _BFLOAT16) \
                and not holomorphic:
            seed = _unit(value._value.dtype)   # a host value: a new unit
        else:
            _check_scalar_output(value, name, holomorphic, transform)
            seed = _core.full_like(value, 1)   # tracers and device (GPU) arrays get one of their own
        cts = pullback([seed])
        grads = cts if single else tree_unflatten(tree, cts)
        grads = grads[0] if isinstance(argnums, int) else tuple(grads)
        if not with_value:
            return (grads, result[2]) if has_aux else grads
        if has_aux:
            return (value, result[2]), grads
        return value, grads

    return wrapped


def _float_array_positions(spec: ArgSpec, args: tuple) -> tuple[int, ...] | None:
    """The positions ``spec`` differentiates when each argument there is a float host Array, else None
    (then :func:`_diff_inputs` flattens and checks them)."""
    nums = spec.positions(len(args))
    for i in nums:
        a = args[i]
        if type(a) is not Array or not ((d := a._value.dtype).kind == "f" or d is _BFLOAT16):
            return None
    return nums


_LEAF_TUPLES: dict = {}   # n -> the structure of a tuple of n leaves


def _leaf_tuple(n: int) -> Any:
    tree = _LEAF_TUPLES.get(n)
    if tree is None:
        tree = _LEAF_TUPLES[n] = tree_structure(tuple(range(n)))
    return tree


_UNITS: dict = {}   # dtype -> 0-d numpy 1, never handed out: each seed is a copy


def _unit(dtype: np.dtype) -> Array:
    """A new 0-d array 1 of ``dtype``: the seed cotangent.

    Never a shared one: the gradient may be the seed itself or a view of it
    (``grad(lambda x: x)``, ``grad(fnp.sum)``), and a caller writing through
    it (a library ignoring the read-only flag) must not change later grads."""
    one = _UNITS.get(dtype)
    if one is None:
        one = _UNITS[dtype] = np.ones((), dtype)
    return _core._wrap(one.copy())


def _check_scalar_output(value: Any, name: str, holomorphic: bool = False, transform: str = "grad") -> None:
    if isinstance(value, (bool, int, float)):
        raise TypeError(f"grad: {name} returned a Python {type(value).__name__}, not an array that depends on "
                        "the inputs")
    if isinstance(value, (tuple, list)):
        items = ", ".join(describe(v) for v in value[:4]) + (", ..." if len(value) > 4 else "")
        raise TypeError(f"grad requires {name} to return a scalar array, got a {type(value).__name__} of "
                        f"{len(value)} item{'s' if len(value) != 1 else ''} ({items}). If it returns (loss, aux), "
                        "use grad(f, has_aux=True); otherwise return one scalar (e.g. the sum of the items).")
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        got = f"a dict with keys {list(value)[:4]}" if isinstance(value, dict) else \
            f"{type(value).__name__}: {value!r:.60}"
        raise TypeError(f"grad requires {name} to return a scalar array, got {got}. Return a 0-d float array "
                        "such as fnp.sum(...); extra outputs go through grad(f, has_aux=True) as (loss, aux).")
    if value.shape != ():
        raise TypeError(f"grad requires {name} to return a scalar (shape ()), got an array {describe(value)}. "
                        "Use vjp or jacrev for non-scalar outputs, or reduce it (e.g. .sum()).")
    if holomorphic:
        _check_holomorphic_outputs([value], transform)
    elif value.dtype.kind == "c":
        _check_real_outputs([value], transform)
    elif _dtypes.kind(value.dtype) != "f":
        raise TypeError(f"grad requires a float output, got {describe(value)} from {name}")


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """The gradient of scalar-valued ``f`` with respect to argument(s) ``argnums``.

    Arguments may be pytrees of arrays; the gradient has the same structure.
    Complex inputs follow JAX's convention: for a real-valued ``f`` the result
    is the cotangent pulled back from 1 (``grad(lambda z: fnp.abs(z)**2)(z)`` is
    ``2 * conj(z)``); a complex-valued ``f`` needs ``holomorphic=True`` (complex
    inputs and output; the result is ``f'(z)``).

    >>> def loss(params, x):
    ...     return fnp.sum((x @ params["w"] + params["b"]) ** 2)
    >>> g = grad(loss)({"w": fnp.ones((3, 2)), "b": fnp.zeros(2)}, fnp.ones((4, 3)))
    >>> g["w"].shape, g["b"].shape
    ((3, 2), (2,))
    """
    return _value_and_grad(f, argnums, has_aux, with_value=False, holomorphic=holomorphic)
