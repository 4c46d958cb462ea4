"""The transforms: grad, value_and_grad, vjp, jvp, linearize, jacfwd, jacrev
(jacobian), hessian, vmap and stop_gradient; with the functions that have
rules of their own (custom_vjp, custom_jvp, checkpoint: ``_custom_rules``)
and those that look at a function without running it (make_jaxpr,
eval_shape, block_until_ready: ``_staging``), re-exported here.

Each transform is a thin pytree wrapper around a ``*_flat`` driver in
``funcgrad.interpreters`` that works on flat lists of arrays.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core, _dtypes, lax
from funcgrad._argspec import ArgSpec, as_leaf, fun_name as _fun_name, with_args
from funcgrad._core import Array, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad.interpreters.batching import vmap_flat
from funcgrad.interpreters.forward import jvp_flat
from funcgrad.interpreters.reverse import vjp_flat
from funcgrad._custom_rules import custom_jvp, custom_vjp  # noqa: F401 (re-exported)
from funcgrad._staging import ShapeDtypeStruct, block_until_ready, eval_shape, make_jaxpr  # noqa: F401
from funcgrad.ad_checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat  # noqa: F401
from funcgrad.tree_util import broadcast_prefix, flatten_fun, tree_flatten, tree_map, tree_structure, tree_unflatten

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev", "jacobian", "hessian", "vmap",
           "custom_vjp", "custom_jvp", "checkpoint", "checkpoint_name", "checkpoint_policies", "remat", "make_jaxpr", "eval_shape", "ShapeDtypeStruct",
           "block_until_ready", "stop_gradient", "device_get", "pure_callback", "named_call", "named_scope",
           "effects_barrier", "typeof", "enable_x64", "debug_nans", "linear_transpose", "closure_convert",
           "clear_caches"]


_SINGLE_LEAF = tree_structure((0,))


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
        kind = x.dtype.kind
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
                  and args[argnums]._value.dtype.kind == "f" and not holomorphic)
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
        if type(value) is Array and value._value.shape == () and value._value.dtype.kind == "f" \
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
        if type(a) is not Array or a._value.dtype.kind != "f":
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
    elif value.dtype.kind != "f":
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


# ------------------------------------------------------------- vjp / jvp


def vjp(f: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(f(*primals), pullback)``; ``pullback(ct)`` returns a tuple of cotangents, one per primal.

    >>> y, pullback = vjp(fnp.sin, fnp.zeros(3))
    >>> pullback(fnp.ones(3))     # (Array([1., 1., 1.]),)
    (Array([1., 1., 1.], dtype=float32),)
    """
    leaves, in_tree = tree_flatten(primals)
    leaves = [as_leaf(x, "vjp") for x in leaves]
    flat_fun, out_tree_of = flatten_fun(f, in_tree, has_aux=has_aux, where=f"vjp(has_aux=True): {_fun_name(f)}")
    result = vjp_flat(flat_fun, leaves, has_aux=has_aux)
    outs, pullback_flat = result[0], result[1]
    out_tree = out_tree_of()

    def pullback(ct: Any) -> tuple:
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree:
            raise ValueError(f"vjp: the cotangent's structure {ct_tree} does not match the output's {out_tree}")
        ct_leaves = [_matching_tangent(c, o, "vjp: cotangent", "the output") for c, o in zip(ct_leaves, outs)]
        return tuple(tree_unflatten(in_tree, pullback_flat(ct_leaves)))

    out = tree_unflatten(out_tree, outs)
    return (out, pullback, result[2]) if has_aux else (out, pullback)


def _matching_tangent(t: Any, primal: Any, what: str, against: str) -> Any:
    """``t`` as an array with ``primal``'s shape and dtype, or a clear error (as in JAX).

    A tangent (or cotangent) lives in the same space as its primal: an int32
    tangent for a float32 primal is a mistake, not something to convert.
    Python scalars are weakly typed and take a float primal's dtype.
    """
    if type(t) is Array and type(primal) is Array and t._value.shape == primal._value.shape \
            and t._value.dtype is primal._value.dtype:
        return t   # the common case, decided without building avals
    aval = _core.get_aval(primal)
    if isinstance(t, (int, float)) and not isinstance(t, bool) and aval.dtype.kind in "fc" or \
            isinstance(t, complex) and aval.dtype.kind == "c":
        t = as_array(np.asarray(t, dtype=aval.dtype))
    t = as_leaf(t, what.split(":")[0])
    if tuple(t.shape) != aval.shape:
        raise ValueError(f"{what} {describe(t)} does not match {against} {describe(aval)}: shapes must be equal")
    if t.dtype != aval.dtype:
        raise TypeError(f"{what} {describe(t)} does not match {against} {describe(aval)}: primal and tangent "
                        f"dtypes must be equal, got {t.dtype} for a {aval.dtype} value. Convert it with "
                        f".astype('{aval.dtype}')" + (" (integer and bool values have no derivative: leave "
                                                        "them out of the differentiated arguments)"
                                                        if aval.dtype.kind != "f" else ""))
    return t


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> tuple:
    """Forward mode: ``(f(*primals), J @ tangents)``.

    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the result is
    ``(output, J @ tangents, aux)``; ``aux`` is not differentiated.

    >>> jvp(fnp.sin, (fnp.zeros(2),), (fnp.ones(2),))   # (sin(0), cos(0) * 1)
    (Array([0., 0.], dtype=float32), Array([1., 1.], dtype=float32))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument of f)")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise ValueError(f"jvp: primals {p_tree} and tangents {t_tree} have different structures")
    p_leaves = [as_leaf(x, "jvp") for x in p_leaves]
    t_leaves = [_matching_tangent(t, p, "jvp: tangent", "its primal") for t, p in zip(t_leaves, p_leaves)]
    flat_fun, out_tree = flatten_fun(f, p_tree, has_aux=has_aux, where=f"jvp(has_aux=True): {_fun_name(f)}")
    if not has_aux:
        outs, touts = jvp_flat(flat_fun, p_leaves, t_leaves)
        return tree_unflatten(out_tree(), outs), tree_unflatten(out_tree(), touts)
    with_aux = _AuxAsOutputs(flat_fun)
    outs, touts = jvp_flat(with_aux.run, p_leaves, t_leaves)
    (outs, aux), (touts, _) = with_aux.split(outs), with_aux.split(touts)
    return tree_unflatten(out_tree(), outs), tree_unflatten(out_tree(), touts), aux


class _AuxAsOutputs:
    """A flat function returning ``(outputs, aux)`` (``flatten_fun(..., has_aux=True)``) as one
    returning the array leaves of aux after the outputs, so that a flat driver that knows nothing
    of aux (jvp_flat, vmap_flat) hands them back as it does outputs: their primal values, not
    differentiated. Other aux leaves (numbers, strings) stay as they are, aside. :meth:`split`
    takes the outputs off again and rebuilds ``aux``."""

    __slots__ = ("fun", "n_out", "aux_leaves", "aux_tree", "arrays")

    def __init__(self, fun: Callable):
        self.fun = fun
        self.n_out, self.aux_leaves, self.aux_tree, self.arrays = 0, [], None, []

    def run(self, *xs: Any) -> list:
        outs, aux = self.fun(*xs)
        self.aux_leaves, self.aux_tree = tree_flatten(aux)
        self.arrays = [i for i, a in enumerate(self.aux_leaves) if isinstance(a, (Array, Tracer))]
        self.n_out = len(outs)
        return list(outs) + [self.aux_leaves[i] for i in self.arrays]

    def split(self, results: list) -> tuple[list, Any]:
        """``(outputs, aux)`` from what ``run`` returned (through a driver)."""
        aux_leaves = list(self.aux_leaves)
        for i, a in zip(self.arrays, results[self.n_out:]):
            aux_leaves[i] = a
        return list(results[:self.n_out]), tree_unflatten(self.aux_tree, aux_leaves)


def linearize(f: Callable, *primals: Any) -> tuple:
    """``(f(*primals), f_jvp)`` with ``f_jvp(*tangents)`` the jvp at ``primals``.

    This version re-runs the forward pass for each call of ``f_jvp``.

    >>> y, f_jvp = fg.linearize(fnp.sin, fnp.asarray(0.0))
    >>> f_jvp(fnp.asarray(2.0))          # cos(0) * 2
    Array(2., dtype=float32)
    """
    out = f(*primals)
    return out, lambda *tangents: jvp(f, primals, tangents)[1]


# ------------------------------------------------------------- Jacobians


def _jac_inputs(spec: ArgSpec, f: Callable, args: tuple, kwargs: dict, transform: str, has_aux: bool = False,
                holomorphic: bool = False):
    """Flat ``f`` of the differentiated leaves, those leaves, the output structure (once it ran)
    and the structure the Jacobian blocks take on the input side."""
    nums, leaves, in_tree = _diff_inputs(spec, args, transform, holomorphic, complex_ok=transform != "jacfwd")
    flat_fun, out_tree = flatten_fun(with_args(f, args, kwargs, nums), in_tree, has_aux=has_aux,
                                     where=f"{transform}(has_aux=True): {_fun_name(f)}")
    jac_tree = in_tree.children[0] if isinstance(spec.spec, int) else in_tree
    return flat_fun, leaves, out_tree, jac_tree


def _basis(leaves: list) -> list:
    """Standard basis of the flattened leaves, as per-leaf arrays with a leading axis."""
    sizes = [int(np.prod(x.shape, dtype=np.int64)) for x in leaves]
    total = sum(sizes)
    dtype = _dtypes.result_type(*leaves) if leaves else _dtypes.float_
    eye = np.eye(total, dtype=dtype)
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        out.append(as_array(eye[:, start:start + n].reshape((total,) + tuple(x.shape))))
        start += n
    return out


def _assemble(blocks_by_out: list, out_tree: Any, in_tree: Any) -> Any:
    return tree_unflatten(out_tree, [tree_unflatten(in_tree, blocks) for blocks in blocks_by_out])


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """Jacobian by forward mode (one jvp per input element, batched with vmap).

    The result has shape ``out.shape + in.shape`` (a tree of such blocks).
    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the result is
    ``(jacobian, aux)``. Complex inputs need ``holomorphic=True`` (as in JAX).

    >>> jacfwd(lambda x: fnp.sin(x) * 2)(fnp.zeros(2))
    Array([[2., 0.],
           [0., 2.]], dtype=float32)
    """
    spec = _argnums_spec(f, argnums, "jacfwd")

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        flat_fun, leaves, out_tree, jac_tree = _jac_inputs(spec, f, args, kwargs, "jacfwd", has_aux, holomorphic)
        with_aux = _AuxAsOutputs(flat_fun) if has_aux else None
        run = with_aux.run if has_aux else flat_fun

        def push(*tangent_leaves):
            outs, tangents = jvp_flat(run, leaves, list(tangent_leaves))
            # aux: its value, the same for every basis vector (mapped with out_axes None)
            return tangents if not has_aux else tangents[:with_aux.n_out] + outs[with_aux.n_out:]

        def out_dims() -> list:
            n_aux = len(with_aux.arrays) if has_aux else 0
            return [-1] * (out_tree().num_leaves) + [None] * n_aux

        basis = _basis(leaves)
        columns = vmap_flat(push, basis, [0] * len(basis), basis[0].shape[0] if basis else 0, out_dims=out_dims)
        if has_aux:
            columns, aux = with_aux.split(columns)
        if holomorphic:
            _check_holomorphic_outputs(columns, "jacfwd")
        blocks = []
        for col in columns:
            out_shape = tuple(col.shape[:-1])
            pieces, start = [], 0
            for x in leaves:
                n = int(np.prod(x.shape, dtype=np.int64))
                pieces.append(lax.reshape(col[..., start:start + n], out_shape + tuple(x.shape)))
                start += n
            blocks.append(pieces)
        jac = _assemble(blocks, out_tree(), jac_tree)
        return (jac, aux) if has_aux else jac

    return wrapped


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """Jacobian by reverse mode (one vjp per output element, batched with vmap).

    The result has shape ``out.shape + in.shape`` (a tree of such blocks).
    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the result is
    ``(jacobian, aux)``. ``jacobian`` is another name for this function.
    Complex outputs need ``holomorphic=True`` (as in JAX).

    >>> jacrev(lambda x: fnp.sum(x ** 2))(fnp.ones(3))
    Array([2., 2., 2.], dtype=float32)
    """
    spec = _argnums_spec(f, argnums, "jacrev")

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        flat_fun, leaves, out_tree, jac_tree = _jac_inputs(spec, f, args, kwargs, "jacrev", has_aux, holomorphic)
        result = vjp_flat(flat_fun, leaves, has_aux)
        outs, pullback = result[0], result[1]
        outs = [as_leaf(o, "jacrev") for o in outs]
        (_check_holomorphic_outputs if holomorphic else _check_real_outputs)(outs, "jacrev")
        basis = _basis(outs)
        total = basis[0].shape[0] if basis else 0
        rows = vmap_flat(lambda *cts: pullback(list(cts)), basis, [0] * len(basis), total, out_dims=0)
        blocks, start = [], 0
        for o in outs:
            n = int(np.prod(o.shape, dtype=np.int64))
            blocks.append([lax.reshape(r[start:start + n], tuple(o.shape) + tuple(x.shape))
                           for r, x in zip(rows, leaves)])
            start += n
        jac = _assemble(blocks, out_tree(), jac_tree)
        return (jac, result[2]) if has_aux else jac

    return wrapped


jacobian = jacrev


def hessian(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """Hessian of scalar ``f``: forward-over-reverse, ``jacfwd(jacrev(f))``.

    >>> fg.hessian(lambda x: fnp.sum(x ** 3))(fnp.array([1.0, 2.0]))     # diag(6 x)
    Array([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)
    """
    argnums = _argnums_spec(f, argnums, "hessian").spec
    return jacfwd(jacrev(f, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums, has_aux=has_aux,
                  holomorphic=holomorphic)


# ------------------------------------------------------------------ vmap


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None, axis_size: int | None = None,
         spmd_axis_name: Any = None, sum_match: bool = False) -> Callable:
    """Vectorise ``f`` over axis ``in_axes`` of its arguments.

    ``in_axes``: an int, None (not mapped) or a tuple with one entry per
    positional argument, each an int/None or a pytree prefix of it.
    ``axis_size``: the batch size, needed when no argument is mapped (then every
    output is repeated ``axis_size`` times); when given with mapped arguments it must
    match them. ``axis_name`` names the mapped axis for collectives inside ``f``
    (``lax.psum(x, axis_name)`` sums over the examples; the examples play the part of
    devices, with ``shard_map``'s derivative convention); ``spmd_axis_name`` is not supported.

    >>> loss = lambda w, x: fnp.sum((x * w) ** 2)
    >>> vmap(grad(loss), in_axes=(None, 0))(fnp.ones(2), fnp.arange(4.0).reshape(2, 2))   # per-example
    Array([[ 0.,  2.],
           [ 8., 18.]], dtype=float32)
    >>> vmap(lambda x: x / lax.psum(x, "i"), axis_name="i")(fnp.array([1.0, 3.0]))   # named axis
    Array([0.25, 0.75], dtype=float32)
    """
    name = _fun_name(f)
    if spmd_axis_name is not None:
        raise NotImplementedError(f"vmap({name}): spmd_axis_name (sharding of the mapped axis) is not supported "
                                  "by funcgrad; leave it None (axis_name alone names the axis for collectives)")
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            raise TypeError(f"vmap({name}): axis_name must be hashable (a string, usually), got {axis_name!r}") \
                from None
        if isinstance(axis_name, tuple):
            raise TypeError(f"vmap({name}): axis_name must be a single name, got the tuple {axis_name!r}; nest "
                            "one vmap per name")
    if sum_match:
        raise NotImplementedError(f"vmap({name}): sum_match=True is not supported; leave it False")
    if axis_size is not None and (not isinstance(axis_size, (int, np.integer)) or isinstance(axis_size, bool)
                                  or axis_size < 0):
        raise TypeError(f"vmap({name}): axis_size must be a non-negative int or None, got {axis_size!r}")

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        axes_prefix = in_axes
        if isinstance(in_axes, list):
            axes_prefix = tuple(in_axes)
        if isinstance(axes_prefix, tuple) and len(axes_prefix) != len(args):
            raise ValueError(f"vmap({name}): in_axes has {len(axes_prefix)} entries but {len(args)} positional "
                             "arguments were given")
        dims = broadcast_prefix(axes_prefix if isinstance(axes_prefix, tuple) else (axes_prefix,) * len(args),
                                args, f"vmap({name}) in_axes")
        fun = f
        if kwargs:
            # As JAX: keyword arguments are mapped over their leading axis (in_axes covers positionals only).
            dims = dims + [0] * len(tree_flatten(kwargs)[0])
            args = (args, kwargs)
            fun = _with_kwargs(f)
        leaves, in_tree = tree_flatten(args)
        leaves = [as_leaf(x, f"vmap({name})") if d is not None else x for x, d in zip(leaves, dims)]
        size, dims = _axis_size(leaves, dims, name, axis_size)
        flat_fun, out_tree_of = flatten_fun(fun, in_tree)

        def resolve_out_dims() -> list:
            out_tree = out_tree_of()
            if out_axes is None or isinstance(out_axes, int):
                return [out_axes] * out_tree.num_leaves
            example = tree_unflatten(out_tree, [0] * out_tree.num_leaves)
            return broadcast_prefix(out_axes, example, f"vmap({name}) out_axes")

        outs = vmap_flat(flat_fun, leaves, dims, size, out_dims=resolve_out_dims, axis_name=axis_name)
        return tree_unflatten(out_tree_of(), outs)

    return wrapped


def _with_kwargs(f: Callable) -> Callable:
    return lambda a, kw: f(*a, **kw)


def _axis_size(leaves: list, dims: list, name: str, axis_size: int | None = None) -> tuple[int, list]:
    sizes, norm = [], []
    for x, d in zip(leaves, dims):
        if d is None:
            norm.append(None)
            continue
        if not isinstance(d, int):
            raise TypeError(f"vmap({name}): in_axes entries must be ints or None, got {d!r}")
        nd = len(x.shape)
        if not -nd <= d < nd:
            raise ValueError(f"vmap({name}): in_axes={d} is out of range for an argument {describe(x)}")
        norm.append(d % nd)
        sizes.append(x.shape[d % nd])
    if axis_size is not None:
        if any(n != axis_size for n in sizes):
            raise ValueError(f"vmap({name}): axis_size={axis_size} does not match the mapped arguments' sizes "
                             f"along their mapped axes: {sorted(set(sizes))}")
        return int(axis_size), norm
    if not sizes:
        raise ValueError(f"vmap({name}): no argument is mapped (all in_axes are None); pass axis_size= to give "
                         "the batch size")
    if len(set(sizes)) > 1:
        raise ValueError(f"vmap({name}): mapped arguments have different sizes along their mapped axes: "
                         f"{sorted(set(sizes))}")
    return sizes[0], norm


def stop_gradient(x: Any) -> Any:
    """``x`` (a pytree), with a zero derivative: a constant to every transform.

    >>> grad(lambda v: fnp.sum(v * stop_gradient(v)))(fnp.ones(2))    # [1., 1.], not [2., 2.]
    Array([1., 1.], dtype=float32)
    """
    return tree_map(lambda v: lax.stop_gradient(v if isinstance(v, (Array, Tracer, bool, int, float))
                                                else as_array(v)), x)



def device_get(x: Any) -> Any:
    """The arrays of pytree ``x`` as numpy arrays on the host (other leaves unchanged), as
    ``jax.device_get``.

    >>> device_get({"w": fnp.ones(2)})     # {'w': array([1., 1.], dtype=float32)}
    {'w': array([1., 1.], dtype=float32)}
    """
    def get(v: Any) -> Any:
        if isinstance(v, Tracer):
            raise _core.ConcretizationError(
                f"device_get: {describe(v)} is a traced value (inside jit, vmap or grad), which has no host value "
                "yet; call device_get on the transformed function's results")
        return np.asarray(v) if isinstance(v, Array) else v
    return tree_map(get, x)


def pure_callback(callback: Callable, result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call a Python function on runtime values and use its result, as ``jax.pure_callback``.

    ``callback(*args, **kwargs)`` gets numpy arrays (at each call under ``jit``) and must return
    arrays matching ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct``-likes). It must be
    pure: an unused result may skip the call. Under ``vmap``, ``vmap_method="sequential"`` calls it
    per element, ``"expand_dims"``/``"broadcast_all"`` once on the batch. No derivative (wrap it in
    ``custom_jvp``/``custom_vjp``).

    >>> x = fnp.array([3.0, 1.0, 2.0])
    >>> fg.pure_callback(lambda x: np.sort(x), fg.ShapeDtypeStruct((3,), fnp.float32), x)
    Array([1., 2., 3.], dtype=float32)
    """
    from funcgrad.primitives.debug import Callback, pure_callback_p
    if sharding is not None:
        raise NotImplementedError("pure_callback: sharding is not supported (one host device); leave it None")
    if vmap_method not in (None, "sequential", "expand_dims", "broadcast_all", "legacy_vectorized"):
        raise ValueError(f"pure_callback: vmap_method must be 'sequential', 'expand_dims' or 'broadcast_all', got "
                         f"{vmap_method!r}")
    leaves, in_tree = tree_flatten((args, kwargs))
    leaves = [x if isinstance(x, (Array, Tracer)) else as_array(x) for x in leaves]
    specs, out_tree = tree_flatten(result_shape_dtypes)
    try:
        results = tuple(_dtypes.ShapedArray(tuple(int(d) for d in s.shape), _dtypes.canonicalize(s.dtype))
                        for s in specs)
    except AttributeError:
        raise TypeError("pure_callback: result_shape_dtypes must be a pytree of objects with .shape and .dtype "
                        "(ShapeDtypeStruct, arrays)") from None

    def run(*values: Any) -> list:
        a, kw = tree_unflatten(in_tree, list(values))
        out = callback(*a, **kw)
        out_leaves, tree = tree_flatten(out)
        if tree != out_tree:
            raise ValueError(f"pure_callback: {_fun_name(callback)} returned a result of structure {tree}, but "
                             f"result_shape_dtypes has structure {out_tree}")
        return out_leaves

    outs = pure_callback_p.bind(*leaves, callback=Callback(run, _fun_name(callback)), results=results,
                                vmap_method=vmap_method)
    return tree_unflatten(out_tree, outs)


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """``fun`` itself (``jax.named_call`` names a scope in XLA's profile; funcgrad has none).

    >>> double = fg.named_call(lambda x: x * 2, name="double")
    >>> double(fnp.ones(2))
    Array([2., 2.], dtype=float32)
    """
    return fun


@contextlib.contextmanager
def named_scope(name: str) -> Any:
    """A no-op context manager (``jax.named_scope`` names operations for XLA's profiler).

    >>> with fg.named_scope("layer1"):
    ...     fnp.ones(2) * 2
    Array([2., 2.], dtype=float32)
    """
    if not isinstance(name, str):
        raise TypeError(f"named_scope: name must be a str, got {type(name).__name__}")
    yield


def effects_barrier() -> None:
    """Wait for pending effects (``jax.effects_barrier``): funcgrad runs callbacks synchronously.

    >>> fg.effects_barrier()      # returns once every pending callback ran
    """


def typeof(x: Any) -> Any:
    """The abstract value (shape and dtype) of an array or tracer, as ``jax.typeof``.

    >>> fg.typeof(fnp.ones((2, 3)))
    f32[2,3]
    """
    return _core.get_aval(x)


@contextlib.contextmanager
def _option(name: str, value: Any) -> Any:
    from funcgrad._config import config
    before = getattr(config, name)
    config.update(name, value)
    try:
        yield
    finally:
        config.update(name, before)


def enable_x64(new_val: bool = True) -> Any:
    """Context manager: ``with fg.enable_x64():`` float64 inside (``jax.enable_x64``).

    >>> with fg.enable_x64():
    ...     fnp.array([1.0], dtype=fnp.float64).dtype
    dtype('float64')
    """
    return _option("enable_x64", new_val)


def debug_nans(new_val: bool = True) -> Any:
    """Context manager: ``with fg.debug_nans():`` NaN checks inside (``jax.debug_nans``).

    >>> with fg.debug_nans():
    ...     fnp.sqrt(fnp.array([4.0]))
    Array([2.], dtype=float32)
    """
    return _option("debug_nans", new_val)


def linear_transpose(fun: Callable, *primals: Any, reduce_axes: Any = ()) -> Callable:
    """The transpose of a linear function, as ``jax.linear_transpose``: ``f_t(cotangent) -> tuple``
    with one cotangent per input. ``primals`` give the input shapes and dtypes (their values
    are not used). ``fun`` must be linear: funcgrad does not check it (JAX raises for a
    nonlinear function); a nonlinear one gets the transpose of its derivative at zero.

    >>> w = fnp.arange(6.0).reshape(2, 3)
    >>> f_t = fg.linear_transpose(lambda x: x @ w, fnp.ones(2))
    >>> f_t(fnp.arange(3.))     # (w @ arange(3),)
    (Array([ 5., 14.], dtype=float32),)
    """
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported; leave it ()")
    leaves, in_tree = tree_flatten(primals)
    zeros = tree_unflatten(in_tree, [_core.zeros_like(as_leaf(x, "linear_transpose")) for x in leaves])
    _, pullback = vjp(fun, *zeros)

    def transposed(*cotangent: Any) -> tuple:
        ct = cotangent[0] if len(cotangent) == 1 else cotangent
        return tuple(pullback(ct))
    return transposed


def closure_convert(fun: Callable, *example_args: Any) -> tuple[Callable, list]:
    """``(fun, [])``: ``jax.closure_convert`` hoists the arrays ``fun`` closes over into explicit
    arguments for custom_vjp; funcgrad's custom rules take closures directly, so none are hoisted.

    >>> w = fnp.array([2.0, 3.0])
    >>> f, consts = fg.closure_convert(lambda x: x * w, fnp.ones(2))
    >>> f(fnp.ones(2), *consts)
    Array([2., 3.], dtype=float32)
    """
    return fun, []


def clear_caches() -> None:
    """Accepted for ``jax.clear_caches``: each jitted function keeps its own cache (``f.clear_cache()``);
    there is no global one to clear.

    >>> fg.clear_caches()        # later calls of jitted functions trace again
    """
