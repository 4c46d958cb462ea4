"""The transforms: grad, value_and_grad, vjp, jvp, linearize, jacfwd, jacrev
(jacobian), hessian, vmap, custom_vjp, custom_jvp, checkpoint, make_jaxpr and
eval_shape, and block_until_ready.

Each is a thin pytree wrapper around a ``*_flat`` driver in
``funcgrad.interpreters`` that works on flat lists of arrays.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core, _dtypes, lax
from funcgrad._argspec import ArgSpec, fun_name as _fun_name, with_args
from funcgrad._core import Array, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad._ir import Jaxpr
from funcgrad.interpreters.batching import vmap_flat
from funcgrad.interpreters.forward import jvp_flat
from funcgrad.interpreters.reverse import vjp_flat
from funcgrad.interpreters.tracing import trace_to_jaxpr
from funcgrad.tree_util import (broadcast_prefix, flatten_fun, tree_flatten, tree_leaves, tree_map, tree_structure,
                                tree_unflatten)

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev", "jacobian", "hessian", "vmap",
           "custom_vjp", "custom_jvp", "checkpoint", "remat", "make_jaxpr", "eval_shape", "ShapeDtypeStruct",
           "block_until_ready", "stop_gradient"]


def _as_leaf(x: Any, where: str) -> Any:
    if isinstance(x, (Array, Tracer)):
        return x
    try:
        return as_array(x)
    except TypeError:
        raise TypeError(f"{where}: every leaf of the arguments must be an array or a number, got "
                        f"{type(x).__name__}: {x!r:.60}") from None


_SINGLE_LEAF = tree_structure((0,))


def _argnums_spec(f: Callable, argnums: Any, transform: str) -> ArgSpec:
    """``argnums`` checked (once, when the transform is made): the arguments to differentiate."""
    return ArgSpec(transform, "argnums", argnums, static=False, unique=True, fun=f)


def _diff_inputs(spec: ArgSpec, args: tuple, transform: str) -> tuple[tuple[int, ...], list, Any]:
    """The positions, float leaves and structure of the arguments ``spec`` differentiates.

    The structure is that of the tuple of those arguments (what
    :func:`flatten_fun` rebuilds); an int ``argnums`` picks its one child.
    """
    nums = spec.positions(len(args))
    leaves, tree = tree_flatten(tuple([args[i] for i in nums]))
    leaves = [_as_leaf(x, transform) for x in leaves]
    _check_float_inputs(leaves, transform)
    return nums, leaves, tree


def _check_float_inputs(leaves: list, name: str) -> None:
    for x in leaves:
        if x.dtype.kind != "f":
            raise TypeError(f"{name} requires float inputs to differentiate with respect to, got an array "
                            f"{describe(x)}. Convert it with .astype(fnp.float32), or leave it out of argnums.")


# ------------------------------------------------------------------ grad


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """Like :func:`grad`, returning ``(value, grads)`` (``((value, aux), grads)`` with ``has_aux``)."""
    return _value_and_grad(f, argnums, has_aux, with_value=True)


def _value_and_grad(f: Callable, argnums: Any, has_aux: bool, with_value: bool) -> Callable:
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
                  and args[argnums]._value.dtype.kind == "f")
        if single:
            nums, leaves, tree = (argnums,), [args[argnums]], _SINGLE_LEAF
        else:
            nums, leaves, tree = _diff_inputs(spec, args, transform)
        # f(x): nothing to put back among other arguments (with_args would give f too; this is the hot path).
        fun = f if len(args) == 1 and not kwargs else with_args(f, args, kwargs, nums)
        flat_fun, out_tree = flatten_fun(fun, tree, has_aux=has_aux, where=aux_where)
        result = vjp_flat(flat_fun, leaves, has_aux)
        outs, pullback, out_def = result[0], result[1], out_tree()
        # One array out (checked next); any other structure is rebuilt for _check_scalar_output to describe.
        value = outs[0] if out_def.node_type is None else tree_unflatten(out_def, outs)
        if type(value) is Array and value._value.shape == () and value._value.dtype.kind == "f":
            seed = _unit(value._value.dtype)   # a host value: a new unit
        else:
            _check_scalar_output(value, name)
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


def _check_scalar_output(value: Any, name: str) -> None:
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
    if value.dtype.kind != "f":
        raise TypeError(f"grad requires a float output, got {describe(value)} from {name}")


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of scalar-valued ``f`` with respect to argument(s) ``argnums``.

    Arguments may be pytrees of arrays; the gradient has the same structure.

    >>> def loss(params, x):
    ...     return fnp.sum((x @ params["w"] + params["b"]) ** 2)
    >>> g = grad(loss)({"w": fnp.ones((3, 2)), "b": fnp.zeros(2)}, fnp.ones((4, 3)))
    >>> g["w"].shape, g["b"].shape
    ((3, 2), (2,))
    """
    return _value_and_grad(f, argnums, has_aux, with_value=False)


# ------------------------------------------------------------- vjp / jvp


def vjp(f: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(f(*primals), pullback)``; ``pullback(ct)`` returns a tuple of cotangents, one per primal.

    >>> y, pullback = vjp(fnp.sin, fnp.zeros(3))
    >>> pullback(fnp.ones(3))     # (Array([1., 1., 1.]),)
    """
    leaves, in_tree = tree_flatten(primals)
    leaves = [_as_leaf(x, "vjp") for x in leaves]
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
    if isinstance(t, (int, float)) and not isinstance(t, bool) and aval.dtype.kind == "f":
        t = as_array(np.asarray(t, dtype=aval.dtype))
    t = _as_leaf(t, what.split(":")[0])
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
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument of f)")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise ValueError(f"jvp: primals {p_tree} and tangents {t_tree} have different structures")
    p_leaves = [_as_leaf(x, "jvp") for x in p_leaves]
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
    """
    out = f(*primals)
    return out, lambda *tangents: jvp(f, primals, tangents)[1]


# ------------------------------------------------------------- Jacobians


def _jac_inputs(spec: ArgSpec, f: Callable, args: tuple, kwargs: dict, transform: str, has_aux: bool = False):
    """Flat ``f`` of the differentiated leaves, those leaves, the output structure (once it ran)
    and the structure the Jacobian blocks take on the input side."""
    nums, leaves, in_tree = _diff_inputs(spec, args, transform)
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


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """Jacobian by forward mode (one jvp per input element, batched with vmap).

    The result has shape ``out.shape + in.shape`` (a tree of such blocks).
    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the result is
    ``(jacobian, aux)``.

    >>> jacfwd(lambda x: fnp.sin(x) * 2)(fnp.zeros(2))   # [[2., 0.], [0., 2.]]
    """
    spec = _argnums_spec(f, argnums, "jacfwd")

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        flat_fun, leaves, out_tree, jac_tree = _jac_inputs(spec, f, args, kwargs, "jacfwd", has_aux)
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


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """Jacobian by reverse mode (one vjp per output element, batched with vmap).

    The result has shape ``out.shape + in.shape`` (a tree of such blocks).
    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the result is
    ``(jacobian, aux)``. ``jacobian`` is another name for this function.

    >>> jacrev(lambda x: fnp.sum(x ** 2))(fnp.ones(3))   # [2., 2., 2.]
    """
    spec = _argnums_spec(f, argnums, "jacrev")

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        flat_fun, leaves, out_tree, jac_tree = _jac_inputs(spec, f, args, kwargs, "jacrev", has_aux)
        result = vjp_flat(flat_fun, leaves, has_aux)
        outs, pullback = result[0], result[1]
        outs = [_as_leaf(o, "jacrev") for o in outs]
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


def hessian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Hessian of scalar ``f``: forward-over-reverse, ``jacfwd(jacrev(f))``."""
    argnums = _argnums_spec(f, argnums, "hessian").spec
    return jacfwd(jacrev(f, argnums), argnums)


# ------------------------------------------------------------------ vmap


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0) -> Callable:
    """Vectorise ``f`` over axis ``in_axes`` of its arguments.

    ``in_axes``: an int, None (not mapped) or a tuple with one entry per
    positional argument, each an int/None or a pytree prefix of it.

    >>> per_example = vmap(grad(loss), in_axes=(None, 0))(params, xs)
    """
    name = _fun_name(f)

    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        axes_prefix = in_axes
        if isinstance(in_axes, list):
            axes_prefix = tuple(in_axes)
        if isinstance(axes_prefix, tuple) and len(axes_prefix) != len(args):
            raise ValueError(f"vmap({name}): in_axes has {len(axes_prefix)} entries but {len(args)} positional "
                             "arguments were given")
        leaves, in_tree = tree_flatten(args)
        dims = broadcast_prefix(axes_prefix if isinstance(axes_prefix, tuple) else (axes_prefix,) * len(args),
                                args, f"vmap({name}) in_axes")
        leaves = [_as_leaf(x, f"vmap({name})") if d is not None else x for x, d in zip(leaves, dims)]
        size, dims = _axis_size(leaves, dims, name)
        flat_fun, out_tree_of = flatten_fun(f, in_tree)

        def resolve_out_dims() -> list:
            out_tree = out_tree_of()
            if out_axes is None or isinstance(out_axes, int):
                return [out_axes] * out_tree.num_leaves
            example = tree_unflatten(out_tree, [0] * out_tree.num_leaves)
            return broadcast_prefix(out_axes, example, f"vmap({name}) out_axes")

        outs = vmap_flat(flat_fun, leaves, dims, size, out_dims=resolve_out_dims)
        return tree_unflatten(out_tree_of(), outs)

    return wrapped


def _axis_size(leaves: list, dims: list, name: str) -> tuple[int, list]:
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
    if not sizes:
        raise ValueError(f"vmap({name}): no argument is mapped (all in_axes are None)")
    if len(set(sizes)) > 1:
        raise ValueError(f"vmap({name}): mapped arguments have different sizes along their mapped axes: "
                         f"{sorted(set(sizes))}")
    return sizes[0], norm


# --------------------------------------------------------- custom rules


class _CustomRules:
    """What custom_vjp and custom_jvp share: the function, and ``nondiff_argnums`` (checked now,
    whether given here or set later, against the function's signature)."""

    _transform = ""      # "custom_vjp" / "custom_jvp", for messages
    _rule_takes = ""     # what gets the nondiff arguments first

    def __init__(self, fun: Callable, nondiff_argnums: int | Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = nondiff_argnums

    @property
    def nondiff_argnums(self) -> tuple[int, ...]:
        return self._nondiff.nums

    @nondiff_argnums.setter
    def nondiff_argnums(self, nums: int | Sequence[int]) -> None:
        self._nondiff = ArgSpec(self._transform, "nondiff_argnums", nums, static=True, unique=True, fun=self.fun,
                                check_signature=True, purpose=f"positions of the arguments {self._rule_takes} gets "
                                "first, not differentiated", where=f"{self._transform} {_fun_name(self.fun)}")


class custom_vjp(_CustomRules):
    """A function with a hand-written reverse-mode derivative.

    >>> @custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (fnp.clip(g, -1, 1),))

    ``fwd(*args) -> (out, residuals)``; ``bwd(residuals, out_cotangent) ->
    tuple`` with one cotangent (or None for zero) per argument.  Works under
    grad, vjp, vmap and jit; forward mode (jvp, jacfwd, hessian) raises.
    ``nondiff_argnums`` (positions, checked against ``fun``'s signature) are
    passed first to ``bwd``, in that order, and get no cotangent, as in JAX:

    >>> scaled = custom_vjp(lambda k, x: k * x, nondiff_argnums=(0,))
    >>> scaled.defvjp(lambda k, x: (k * x, None), lambda k, res, g: (k * g,))
    """

    _transform, _rule_takes = "custom_vjp", "bwd"

    def __init__(self, fun: Callable, nondiff_argnums: int | Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> "custom_vjp":
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args: Any) -> Any:
        if self.fwd is None:
            raise TypeError(f"custom_vjp {_fun_name(self.fun)}: call defvjp(fwd, bwd) before using it")
        name = _fun_name(self.fun)
        split = self._nondiff.split(args, {})
        dyn = split.dynamic
        leaves, in_tree = tree_flatten(dyn)
        leaves = [_as_leaf(x, f"custom_vjp {name}") for x in leaves]
        fun_flat, fun_out_tree = flatten_fun(split.bind(self.fun), in_tree)
        fwd_pair, fwd_out_tree = flatten_fun(split.bind(self._checked_fwd), in_tree, has_aux=True)
        res_tree: list = []

        def fwd_flat(*xs):
            out_leaves, res = fwd_pair(*xs)
            res_leaves, tree = tree_flatten(res)
            res_tree[:] = [tree]
            return out_leaves, res_leaves

        def bwd_flat(res_leaves, ct_leaves):
            res = tree_unflatten(res_tree[0], res_leaves)
            ct = tree_unflatten(fwd_out_tree(), ct_leaves)
            in_cts = self.bwd(*[args[i] for i in split.fixed_positions], res, ct)
            if not isinstance(in_cts, tuple):
                raise TypeError(f"custom_vjp {name}: bwd must return a tuple with one cotangent per "
                                f"differentiable argument ({len(dyn)}), got {type(in_cts).__name__}"
                                f"{' ' + describe(in_cts) if hasattr(in_cts, 'shape') else ''}; for one argument "
                                "return (g,), not g")
            if len(in_cts) != len(dyn):
                raise ValueError(f"custom_vjp {name}: bwd must return a tuple with one cotangent per "
                                 f"differentiable argument ({len(dyn)}), got a tuple of length {len(in_cts)}")
            # None means zero; zeros_like reads only shape and dtype (the arguments' tracers are done by now).
            filled = tuple(tree_map(_core.zeros_like, d) if c is None else c for c, d in zip(in_cts, dyn))
            ct_flat, ct_tree = tree_flatten(filled)
            if ct_tree != in_tree:
                raise ValueError(f"custom_vjp {name}: bwd returned cotangents of structure {ct_tree}, expected "
                                 f"the structure of the arguments {in_tree}")
            return [_bwd_cotangent(c, x, i, name) for i, (c, x) in enumerate(zip(ct_flat, leaves))]

        outs = _core.CustomVJPCall(name, fun_flat, fwd_flat, bwd_flat).bind(*leaves)
        out_tree = fun_out_tree()
        return tree_unflatten(fwd_out_tree() if out_tree is None else out_tree, outs)

    def _checked_fwd(self, *args: Any) -> tuple:
        result = self.fwd(*args)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"custom_vjp {_fun_name(self.fun)}: fwd must return a pair (output, residuals)")
        return result


def _bwd_cotangent(c: Any, x: Any, i: int, name: str) -> Any:
    """Check the cotangent a custom_vjp bwd returned for (flat) input ``i``: ``x``'s shape and dtype."""
    if isinstance(c, (int, float)) and not isinstance(c, bool) and x.dtype.kind == "f":
        c = as_array(np.asarray(c, dtype=x.dtype))   # a Python number is weakly typed
    shape, dtype = getattr(c, "shape", None), getattr(c, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"custom_vjp {name}: bwd returned {type(c).__name__} {c!r:.40} as the cotangent of input "
                        f"{i} ({describe(x)}); expected an array {describe(x)} (or None for zero)")
    if tuple(shape) != tuple(x.shape):
        raise ValueError(f"custom_vjp {name}: bwd returned a cotangent {describe(c)} for input {i}, an argument "
                         f"{describe(x)}: expected shape {tuple(x.shape)}")
    if x.dtype.kind == "f" and dtype != x.dtype:
        raise TypeError(f"custom_vjp {name}: bwd returned a cotangent {describe(c)} for input {i}, an argument "
                        f"{describe(x)}: a cotangent must have its argument's dtype {x.dtype}. Convert it in bwd "
                        f"with .astype('{x.dtype}')")
    return c


class custom_jvp(_CustomRules):
    """A function with a hand-written forward-mode derivative (JAX's ``custom_jvp``).

    >>> @custom_jvp
    ... def log1pexp(x):
    ...     return fnp.log1p(fnp.exp(x))
    >>> @log1pexp.defjvp
    ... def log1pexp_jvp(primals, tangents):
    ...     x, = primals
    ...     x_dot, = tangents
    ...     return log1pexp(x), x_dot * (1 - 1 / (1 + fnp.exp(x)))
    >>> grad(log1pexp)(fnp.asarray(100.0))    # 1.0, where plain autodiff of log1p(exp(x)) gives nan

    ``defjvp(rule)``: ``rule(primals, tangents) -> (out, tangent_out)``, with
    ``primals`` and ``tangents`` tuples (one entry per argument, pytrees as the
    arguments are; the tangent of an argument with no derivative is zeros)
    and ``tangent_out`` of ``out``'s structure, shapes and dtypes.
    ``defjvps(*rules)``: one rule per argument, ``rule(g, out, *primals)``
    giving that argument's contribution to ``tangent_out`` (None: none):

    >>> f = custom_jvp(lambda x, y: fnp.sin(x) * y)
    >>> f.defjvps(lambda g, ans, x, y: fnp.cos(x) * g * y, lambda g, ans, x, y: fnp.sin(x) * g)

    Every transform uses the rule: jvp, jacfwd and hessian call it;
    grad, vjp and jacrev pull cotangents back through its tangent map
    ``t -> rule(primals, t)[1]`` (linear in ``t``), differentiated by reverse
    mode in the backward pass, so the forward pass runs the function once
    and the rule runs when the gradient is taken (a rule that is itself
    differentiable gives grad of grad); vmap batches the function and the
    rule; jit traces the function, and transforms of the traced program use
    the rule. Outside a transform the function just runs.
    ``nondiff_argnums`` (positions, checked against ``fun``'s signature) are
    passed first to the rule, in that order, and are not differentiated
    (they may be functions, or any Python value):

    >>> apply = custom_jvp(lambda g, x: g(x), nondiff_argnums=(0,))
    >>> apply.defjvp(lambda g, primals, tangents: (g(primals[0]), 2.0 * tangents[0]))
    """

    _transform, _rule_takes = "custom_jvp", "the jvp rule"

    def __init__(self, fun: Callable, nondiff_argnums: int | Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.jvp: Callable | None = None
        try:
            self._signature: inspect.Signature | None = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None   # some builtins have none

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the rule ``jvp(primals, tangents) -> (out, tangent_out)``; returns ``jvp`` (a decorator)."""
        if not callable(jvp):
            raise TypeError(f"custom_jvp {_fun_name(self.fun)}: defjvp takes the rule, a function "
                            f"(primals, tangents) -> (out, tangent_out), got {type(jvp).__name__}")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """Set the rule from one function per argument: ``rule(g, out, *primals)`` is that argument's
        contribution to the output tangent, for its tangent ``g`` (None: the argument contributes none)."""
        name = _fun_name(self.fun)
        if self.nondiff_argnums:
            raise TypeError(f"custom_jvp {name}: defjvps cannot be used with nondiff_argnums "
                            f"{self.nondiff_argnums}; write one rule with defjvp(rule), which gets the "
                            "nondiff arguments first")
        for i, rule in enumerate(jvps):
            if rule is not None and not callable(rule):
                raise TypeError(f"custom_jvp {name}: defjvps takes one function (or None) per argument; "
                                f"rule {i} is {type(rule).__name__}")

        def jvp(primals: tuple, tangents: tuple) -> tuple:
            if len(jvps) != len(primals):
                raise TypeError(f"custom_jvp {name}: defjvps was given {len(jvps)} rules but {name} was called "
                                f"with {len(primals)} arguments: give one rule (or None) per argument")
            out = self(*primals)
            out_tree, total = tree_structure(out), None
            for i, (rule, g) in enumerate(zip(jvps, tangents)):
                if rule is None:
                    continue
                part = rule(g, out, *primals)
                if tree_structure(part) != out_tree:
                    raise TypeError(f"custom_jvp {name}: the defjvps rule for argument {i} returned a value of "
                                    f"structure {tree_structure(part)}; it must have the output's structure "
                                    f"{out_tree}")
                total = part if total is None else tree_map(lambda a, b: a + b, total, part)
            return out, tree_map(_core.zeros_like, out) if total is None else total

        self.defjvp(jvp)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = _fun_name(self.fun)
        if self.jvp is None:
            raise TypeError(f"custom_jvp {name}: no jvp rule was defined; call {name}.defjvp(rule) (or "
                            f"{name}.defjvps(...)) before calling the function")
        args = _positional(self._signature, args, kwargs, f"custom_jvp {name}")
        split = self._nondiff.split(args, {})
        nondiff = _Nondiff([args[i] for i in split.fixed_positions])
        # The call's inputs: the differentiated arguments' leaves, then the traced leaves of the
        # nondiff ones (so every transform sees them; their tangents are dropped: stop_gradient).
        leaves, in_tree = tree_flatten((split.dynamic, tuple(nondiff.traced)))
        leaves = [_as_leaf(x, f"custom_jvp {name}") for x in leaves]
        call_fun = with_args(self.fun, args, {}, split.positions + split.fixed_positions)
        fun_flat, fun_out_tree = flatten_fun(lambda dyn, traced: call_fun(*dyn, *nondiff.args(traced)), in_tree)
        rule_out_tree: list = []

        def jvp_flat_rule(primals: list, tangents: list) -> tuple[list, list]:
            dyn, traced = tree_unflatten(in_tree, primals)
            result = self.jvp(*nondiff.args(traced), dyn, tree_unflatten(in_tree, tangents)[0])
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(f"custom_jvp {name}: the jvp rule must return a pair (primal_out, tangent_out), "
                                f"got {_describe_value(result)}")
            out_leaves, out_tree = tree_flatten(result[0])
            tangent_leaves, tangent_tree = tree_flatten(result[1])
            if tangent_tree != out_tree:
                raise TypeError(f"custom_jvp {name}: the jvp rule returned a primal output of structure {out_tree} "
                                f"but a tangent output of structure {tangent_tree}; they must match")
            known = fun_out_tree()
            if known is not None and known != out_tree:
                raise TypeError(f"custom_jvp {name}: the jvp rule's primal output has structure {out_tree} but "
                                f"{name} returns {known}; the rule must return what {name} does")
            rule_out_tree[:] = [out_tree]
            return out_leaves, tangent_leaves

        outs = _core.CustomJVPCall(name, fun_flat, jvp_flat_rule).bind(*leaves)
        out_tree = fun_out_tree()
        return tree_unflatten(rule_out_tree[0] if out_tree is None else out_tree, outs)


class _Nondiff:
    """The nondiff arguments of one custom_jvp call, with their traced leaves split off.

    ``traced``: the leaves that are tracers; ``args(values)``: the arguments with
    ``values`` in their place (the values the function and rule see, at the call's level).
    """

    __slots__ = ("leaves", "tree", "where", "traced")

    def __init__(self, args: list):
        self.leaves, self.tree = tree_flatten(args)
        self.where = [i for i, x in enumerate(self.leaves) if isinstance(x, Tracer)]
        self.traced = [self.leaves[i] for i in self.where]

    def args(self, values: Sequence[Any]) -> list:
        if not self.where:
            return tree_unflatten(self.tree, self.leaves)
        leaves = list(self.leaves)
        for i, v in zip(self.where, values):
            leaves[i] = v
        return tree_unflatten(self.tree, leaves)


def _positional(sig: inspect.Signature | None, args: tuple, kwargs: dict, where: str) -> tuple:
    """``args`` and ``kwargs`` as positional arguments of a function with signature ``sig``, defaults filled
    in, as JAX does (the function and its rule then see the same arguments however it was called)."""
    if sig is None:
        if kwargs:
            raise TypeError(f"{where}: the function has no signature to place keyword arguments "
                            f"{sorted(kwargs)} by; pass them positionally")
        return args
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{where}: the arguments do not fit the function's signature {sig}: {e}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{where}: keyword-only parameters {sorted(bound.kwargs)} are not supported (the rule gets "
                        "the arguments by position); make them positional parameters")
    return bound.args


def _describe_value(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} items"
    return describe(x) if hasattr(x, "shape") else type(x).__name__


def checkpoint(f: Callable) -> Callable:
    """Rematerialise ``f``: its intermediates are not kept for the backward pass
    but recomputed from its inputs when the gradient is taken (trading compute
    for memory).  Gradients are the same as without it.  ``f`` returns arrays
    (or a pytree of them).
    """
    name = _fun_name(f)

    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        leaves, in_tree = tree_flatten(args)
        leaves = [_as_leaf(x, "checkpoint") for x in leaves]
        flat_fun, out_tree = flatten_fun(f, in_tree)

        def fun_flat(*xs):
            return [_output_leaf(o, i, f"checkpoint({name})") for i, o in enumerate(flat_fun(*xs))]

        outs = _core.bind_checkpoint(fun_flat, leaves)
        return tree_unflatten(out_tree(), outs)

    return wrapped


remat = checkpoint


def _output_leaf(x: Any, i: int, where: str) -> Any:
    """An output leaf of a transformed function: an array, a tracer or a number (made an array)."""
    if isinstance(x, (Array, Tracer)):
        return x
    try:
        return as_array(x)
    except TypeError:
        raise TypeError(f"{where}: the function must return arrays (or a pytree of arrays), but output leaf {i} "
                        f"is {type(x).__name__}: {x!r:.60}") from None


def stop_gradient(x: Any) -> Any:
    """``x`` (a pytree), with a zero derivative: a constant to every transform.

    >>> grad(lambda v: fnp.sum(v * stop_gradient(v)))(fnp.ones(2))    # [1., 1.], not [2., 2.]
    """
    return tree_map(lambda v: lax.stop_gradient(v if isinstance(v, (Array, Tracer, bool, int, float))
                                                else as_array(v)), x)


# ------------------------------------------------------------ make_jaxpr


def make_jaxpr(f: Callable, static_argnums: int | Sequence[int] = ()) -> Callable:
    """``make_jaxpr(f)(*args)`` traces ``f`` and returns its IR (print it).

    >>> print(make_jaxpr(lambda x: fnp.sum(fnp.sin(x) * x))(fnp.ones(3)))
    { lambda ; a:f32[3] . let
        b:f32[3] = sin a
        c:f32[3] = mul b a
        d:f32[] = reduce_sum[axes=(0,)] c
      in ( d ) }
    """
    spec = ArgSpec("make_jaxpr", "static_argnums", static_argnums, static=True, fun=f,
                   purpose="positions of the arguments to hold static")

    def wrapped(*args: Any) -> Jaxpr:
        split = spec.split(args, {})
        leaves, in_tree = tree_flatten(split.dynamic)
        avals = [_core.get_aval(_as_leaf(x, "make_jaxpr")) for x in leaves]
        return trace_to_jaxpr(flatten_fun(split.bind(f), in_tree)[0], avals)[0]

    return wrapped


# ------------------------------------------------------------ eval_shape


class ShapeDtypeStruct:
    """The shape and dtype of an array, without its values: what :func:`eval_shape` returns
    and takes (as an argument standing for an array).

    >>> s = ShapeDtypeStruct((2, 3), fnp.float32)
    >>> s.ndim, s.size, s
    (2, 6, ShapeDtypeStruct(shape=(2, 3), dtype=float32))
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Sequence[int], dtype: Any):
        try:
            shape = tuple(int(d) for d in shape)
        except TypeError:
            raise TypeError(f"ShapeDtypeStruct: shape must be a tuple of ints, got {shape!r:.60}") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"ShapeDtypeStruct: shape {shape} has a negative dimension")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(dtype))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ShapeDtypeStruct is immutable: make a new one")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d ShapeDtypeStruct")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeDtypeStruct) and self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __reduce__(self) -> Any:
        return (ShapeDtypeStruct, (self.shape, self.dtype))


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes ``fun(*args, **kwargs)`` would return, found by tracing it without
    computing anything: a pytree of :class:`ShapeDtypeStruct`.

    Argument leaves may be arrays, numpy arrays, Python scalars or ShapeDtypeStructs (all are
    traced abstractly, as jit traces: only their shapes and dtypes count).

    >>> eval_shape(lambda x, w: fnp.tanh(x @ w), ShapeDtypeStruct((8, 3), fnp.float32), fnp.ones((3, 2)))
    ShapeDtypeStruct(shape=(8, 2), dtype=float32)
    """
    name = _fun_name(fun)
    leaves, in_tree = tree_flatten((args, kwargs))
    avals = [_abstract_leaf(x, i, name) for i, x in enumerate(leaves)]
    flat_fun, out_tree = flatten_fun(lambda a, k: fun(*a, **k), in_tree)

    def checked(*xs: Any) -> list:
        return [_output_leaf(o, i, f"eval_shape({name})") for i, o in enumerate(flat_fun(*xs))]

    jaxpr, _ = trace_to_jaxpr(checked, avals)
    return tree_unflatten(out_tree(), [ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in jaxpr.outvars])


def _abstract_leaf(x: Any, i: int, name: str) -> Any:
    """The abstract value an argument leaf of :func:`eval_shape` stands for."""
    if isinstance(x, ShapeDtypeStruct):
        return _dtypes.ShapedArray(x.shape, _dtypes.canonicalize(x.dtype))
    if isinstance(x, (Array, Tracer, bool, int, float, np.ndarray, np.generic)):
        return _core.get_aval(x)
    raise TypeError(f"eval_shape({name}): argument leaf {i} is {type(x).__name__} {x!r:.60}; every leaf must be an "
                    "array, a Python scalar or a ShapeDtypeStruct. Bind other arguments first, e.g. "
                    f"eval_shape(functools.partial({name}, option), x)")


# ------------------------------------------------------ block_until_ready


def block_until_ready(x: Any) -> Any:
    """``x`` (a pytree), once every array in it has been computed.

    Device (GPU) computations run asynchronously: wait for them before reading a clock.
    Host arrays are always ready, and leaves that are not arrays are left alone.

    >>> y = block_until_ready(step(params, batch))   # time step(...) honestly
    """
    for leaf in tree_leaves(x):
        wait = getattr(leaf, "block_until_ready", None)
        if callable(wait):
            wait()
    return x
