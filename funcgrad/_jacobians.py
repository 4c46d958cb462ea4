"""Jacobians: jacfwd (one jvp per input element), jacrev (one vjp per output element), both
batched with vmap; ``jacobian`` (jacrev) and hessian (jacfwd over jacrev).

The result has shape ``out.shape + in.shape``, a tree of such blocks for
pytree inputs and outputs.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes, lax
from funcgrad._argspec import ArgSpec, as_leaf, fun_name as _fun_name, with_args
from funcgrad._core import as_array
from funcgrad._grad import _argnums_spec, _check_holomorphic_outputs, _check_real_outputs, _diff_inputs
from funcgrad._vjp_jvp import _AuxAsOutputs
from funcgrad.interpreters.batching import vmap_flat
from funcgrad.interpreters.forward import jvp_flat
from funcgrad.interpreters.reverse import vjp_flat
from funcgrad.tree_util import flatten_fun, tree_unflatten


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
