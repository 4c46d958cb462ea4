"""Structured control flow on traced values: ``cond``, ``switch``, ``while_loop``, ``fori_loop``,
``scan`` and ``map``, with JAX's signatures and semantics.

Python ``if``/``for``/``while`` on concrete values keep working everywhere;
reach for these when the decision or the trip count depends on a traced
value (inside ``jit``, ``vmap``), or when a long loop should stay one
operation instead of being unrolled into the trace (``jit`` compiles the
body once and the loop calls it). Each function traces its callables once
into a sub-program and binds one primitive
(:mod:`funcgrad.primitives.control_flow`); everything differentiates
(forward and reverse, any order), batches and compiles.

Beyond JAX: reverse-mode derivatives of ``while_loop`` (and of
``fori_loop`` with traced bounds) work. By default every carry the loop
passes through is kept for the backward pass; ``checkpoints=k`` keeps at
most ``k`` (``2k`` inside ``jit``, where the trip count is unknown until
the loop stops) and recomputes the rest with the binomial ("revolve")
schedule (for ``k ~ sqrt(n)``, two or three extra forward passes).
"""
from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._core import Tracer
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.control_flow import cond_p, scan_p, while_p
from funcgrad.primitives.subprograms import trace_sub
from funcgrad.primitives.elementwise import convert_p
from funcgrad.tree_util import flatten_fun, tree_flatten, tree_structure, tree_unflatten

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


# --------------------------------------------------------------------------
# Tracing user functions on pytrees
# --------------------------------------------------------------------------


def _leaves_of(tree: Any, op: str, what: str) -> tuple[list, Any]:
    leaves, treedef = tree_flatten(tree)
    try:
        return [_core.as_array(x) for x in leaves], treedef
    except TypeError:
        bad = next(x for x in leaves if not _is_arraylike(x))
        raise TypeError(f"{op}: {what} must be a pytree of arrays and numbers, but it holds "
                        f"{type(bad).__name__} {bad!r:.40}") from None


def _is_arraylike(x: Any) -> bool:
    try:
        _core.as_array(x)
        return True
    except TypeError:
        return False


def _trace(fun: Callable, in_tree: Any, avals: Sequence[ShapedArray], op: str, role: str) -> tuple:
    """Trace ``fun`` (taking the pytree ``in_tree`` of arguments) on ``avals``: (sub-program, consts, out tree)."""
    if not callable(fun):
        raise TypeError(f"{op}: {role} must be callable, got {type(fun).__name__} {fun!r:.40}")
    flat, out_tree = flatten_fun(fun, in_tree)
    sub, consts = trace_sub(flat, avals)
    return sub, consts, out_tree()


def _paths(treedef: Any, prefix: str) -> list[str]:
    """A readable path for each leaf of ``treedef``: ``carry[1]['w']``."""
    example = tree_unflatten(treedef, list(range(treedef.num_leaves)))
    out: list[str] = [""] * treedef.num_leaves

    def walk(x: Any, path: str) -> None:
        if isinstance(x, int) and not isinstance(x, bool) and type(x) is int:
            out[x] = path
        elif isinstance(x, dict):
            for k in x:
                walk(x[k], f"{path}[{k!r}]")
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        else:   # another registered node: number its leaves
            leaves = tree_flatten(x)[0]
            for i, leaf in enumerate(leaves):
                walk(leaf, f"{path}<{i}>")

    walk(example, prefix)
    return out


def _type_str(aval: ShapedArray) -> str:
    return aval.str_short()


def _check_same(op: str, what: str, want_tree: Any, want: Sequence[ShapedArray], got_tree: Any,
                got: Sequence[ShapedArray], prefix: str, fix: str) -> None:
    """Raise if ``got`` (structure and avals) differs from ``want``, naming the first differing path."""
    if want_tree != got_tree:
        raise TypeError(f"{op}: {what} has structure {got_tree}, but it must be {want_tree}. {fix}")
    for path, a, b in zip(_paths(want_tree, prefix), want, got):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise TypeError(f"{op}: {what} has {path} of type {_type_str(b)}, but it must be {_type_str(a)} "
                            f"(the same shape and dtype). {fix}")


_CARRY_FIX = ("A loop's carry keeps its structure, shapes and dtypes: convert with .astype(...) or make the "
              "initial value match (e.g. fnp.float32(0) rather than 0 for a float carry).")


def _scalar_pred(aval: ShapedArray, op: str, role: str) -> None:
    if aval.shape != () or aval.dtype != np.bool_:
        raise TypeError(f"{op}: {role} must return a boolean scalar, got {_type_str(aval)}. Reduce it "
                        "(fnp.all(x), fnp.any(x)) or compare (x > 0) to make one.")


# --------------------------------------------------------------------------
# cond and switch
# --------------------------------------------------------------------------


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as one operation.

    ``pred`` is a boolean scalar (it may be traced); both branches are
    traced and must return the same structure, shapes and dtypes. Under
    ``vmap`` with a mapped ``pred``, both branches run and each example
    keeps its own (as ``fnp.where``); otherwise only the chosen one runs.

    >>> x = fnp.asarray(3.0)
    >>> lax.cond(x > 0, lambda v: v * 2, lambda v: -v, x)
    Array(6., dtype=float32)
    """
    p = _core.as_array(pred) if not isinstance(pred, Tracer) else pred
    _scalar_pred(_core.get_aval(p), "cond", "the predicate")
    index = _core.bind(convert_p, [p], {"dtype": np.dtype(np.int32)})
    return _switch("cond", index, [false_fun, true_fun], operands, ["false_fun", "true_fun"])


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """``branches[index](*operands)``, ``index`` clamped into ``[0, len(branches) - 1]`` (as JAX: an
    index past either end picks the first or last branch instead of raising).

    >>> i, x = 2, fnp.asarray(3.0)
    >>> lax.switch(i, [lambda v: v, lambda v: v * 2, lambda v: v ** 2], x)
    Array(9., dtype=float32)
    """
    branches = list(branches) if isinstance(branches, (list, tuple)) else branches
    if not isinstance(branches, list) or not branches:
        raise ValueError(f"switch: branches must be a non-empty sequence of callables, got {branches!r:.60}")
    i = _core.as_array(index) if not isinstance(index, Tracer) else index
    aval = _core.get_aval(i)
    if aval.shape != () or aval.dtype.kind not in "iub":
        raise TypeError(f"switch: the index must be an integer scalar, got {describe(i)}. Convert it "
                        "with .astype(fnp.int32).")
    index = _core.bind(convert_p, [i], {"dtype": np.dtype(np.int32)})
    return _switch("switch", index, branches, operands, [f"branches[{k}]" for k in range(len(branches))])


def _switch(op: str, index: Any, funs: list, operands: tuple, names: list[str]) -> Any:
    leaves, in_tree = _leaves_of(tuple(operands), op, "the operands")
    avals = [_core.get_aval(x) for x in leaves]
    traced = [_trace(f, in_tree, avals, op, name) for f, name in zip(funs, names)]
    _, _, tree0 = traced[0]
    for (sub, _, tree), name in zip(traced[1:], names[1:]):
        _check_same(op, f"{name}'s output", tree0, traced[0][0].out_avals, tree, sub.out_avals, "output",
                    f"Every branch must return the same structure, shapes and dtypes ({names[0]} returns "
                    f"{', '.join(_type_str(a) for a in traced[0][0].out_avals) or 'nothing'}).")
    all_consts = [c for _, consts, _ in traced for c in consts]
    subs, offset = [], 0
    for sub, consts, _ in traced:   # every branch takes every branch's constants
        subs.append(_taking_all(sub, offset, len(consts), [_core.get_aval(c) for c in all_consts], avals))
        offset += len(consts)
    outs = cond_p.bind(index, *all_consts, *leaves, branches=tuple(subs))
    return tree_unflatten(tree0, outs)


def _taking_all(sub: Any, offset: int, n: int, const_avals: list, avals: list) -> Any:
    """``sub`` (inputs: its n constants, then the operands) over all branches' constants."""
    total = len(const_avals)

    def fun(*args: Any) -> list:
        return sub(*args[offset:offset + n], *args[total:])

    return trace_sub(fun, const_avals + avals)[0]


# --------------------------------------------------------------------------
# while_loop and fori_loop
# --------------------------------------------------------------------------


def _check_checkpoints(checkpoints: Any, op: str) -> None:
    if checkpoints is not None and (not isinstance(checkpoints, int) or isinstance(checkpoints, bool)
                                    or checkpoints < 2):
        raise ValueError(f"{op}: checkpoints must be None (keep every carry for the backward pass) or an int >= 2 "
                         f"(the backward pass then keeps at most twice that many carries), got {checkpoints!r}")


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any, *, checkpoints: int | None = None) -> Any:
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``; return the final ``val``.

    ``val`` is a pytree whose structure, shapes and dtypes the body keeps.
    Reverse-mode derivatives work (JAX refuses them): the backward pass
    replays the loop from kept carries. ``checkpoints=None`` keeps every
    carry (memory grows with the trip count); ``checkpoints=k`` bounds it
    to ``k`` carries (``2k`` inside ``jit``), recomputing the others (see
    the module docstring).

    >>> lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.0), (0, 1.0))
    (Array(10, dtype=int32), Array(1024., dtype=float32))
    """
    _check_checkpoints(checkpoints, "while_loop")
    leaves, tree = _leaves_of(init_val, "while_loop", "init_val")
    avals = [_core.get_aval(x) for x in leaves]
    in_tree = tree_structure((init_val,))
    cond_sub, cond_consts, pred_tree = _trace(cond_fun, in_tree, avals, "while_loop", "cond_fun")
    if pred_tree.num_leaves != 1:
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got a pytree {pred_tree}")
    _scalar_pred(cond_sub.out_avals[0], "while_loop", "cond_fun")
    body_sub, body_consts, out_tree = _trace(body_fun, in_tree, avals, "while_loop", "body_fun")
    _check_same("while_loop", "body_fun's output", tree, avals, out_tree, body_sub.out_avals, "carry", _CARRY_FIX)
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond=cond_sub, body=body_sub,
                        n_cond_consts=len(cond_consts), n_body_consts=len(body_consts), checkpoints=checkpoints)
    return tree_unflatten(tree, outs)


def _concrete_int(x: Any) -> int | None:
    if isinstance(x, Tracer):
        return None
    try:
        value = np.asarray(x.concrete_value() if isinstance(x, Tracer) else getattr(x, "_value", x))
    except Exception:   # noqa: BLE001 -- not a concrete number
        return None
    if value.shape != () or value.dtype.kind not in "iu":
        return None
    return int(value)


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any, *, checkpoints: int | None = None) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``; return ``val``.

    With Python-int (concrete) bounds the loop is a ``scan`` of known
    length (every derivative, any order); with traced bounds it is a
    ``while_loop`` (reverse mode works too; see ``checkpoints`` there).
    ``i`` has the bounds' integer dtype.

    >>> lax.fori_loop(0, 10, lambda i, acc: acc + i, 0)
    Array(45, dtype=int32)
    """
    _check_checkpoints(checkpoints, "fori_loop")
    for name, b in (("lower", lower), ("upper", upper)):
        aval = _core.get_aval(b) if isinstance(b, Tracer) else _core.get_aval(_core.as_array(b))
        if aval.shape != () or aval.dtype.kind not in "iu":
            raise TypeError(f"fori_loop: {name} must be an integer scalar, got {describe(b)}")
    lo, hi = _concrete_int(lower), _concrete_int(upper)
    dtype = _dtypes.result_type(_core.as_array(lower) if not isinstance(lower, Tracer) else lower,
                                _core.as_array(upper) if not isinstance(upper, Tracer) else upper)
    if not callable(body_fun):
        raise TypeError(f"fori_loop: body_fun must be callable, got {type(body_fun).__name__}")
    if lo is not None and hi is not None and checkpoints is None:
        def step(carry: Any, _: Any) -> Any:
            i, val = carry
            return (i + np.asarray(1, dtype), body_fun(i, val)), None

        (_, out), _ = scan(step, (np.asarray(lo, dtype), init_val), length=builtins.max(hi - lo, 0))
        return out
    lower_v = _core.bind(convert_p, [_core.as_array(lower)], {"dtype": dtype})
    upper_v = _core.bind(convert_p, [_core.as_array(upper)], {"dtype": dtype})

    def body(carry: Any) -> Any:
        i, val = carry
        return i + np.asarray(1, dtype), body_fun(i, val)

    return while_loop(lambda c: c[0] < upper_v, body, (lower_v, init_val), checkpoints=checkpoints)[1]


# --------------------------------------------------------------------------
# scan and map
# --------------------------------------------------------------------------


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1) -> tuple[Any, Any]:
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; return ``(carry, stacked ys)``.

    The semantics of ``jax.lax.scan``::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:                 # or range(length) when xs is None
                carry, y = f(carry, x)
                ys.append(y)
            return carry, stack(ys)

    ``reverse=True`` runs from the last element to the first (ys keep their
    positions). The compiled loop calls the compiled body each step, so
    ``unroll`` (accepted for compatibility) changes nothing.

    >>> W, h0, xs = fnp.eye(3), fnp.zeros((2, 3)), fnp.ones((5, 2, 3))     # T=5, B=2, H=3
    >>> def step(h, x): h = fnp.tanh(h @ W + x); return h, h
    >>> h_last, hs = lax.scan(step, h0, xs)
    >>> h_last.shape, hs.shape
    ((2, 3), (5, 2, 3))
    """
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {type(f).__name__} {f!r:.40}")
    if not isinstance(unroll, (int, np.integer)) or unroll < 0:
        raise ValueError(f"scan: unroll must be a non-negative int or a bool, got {unroll!r}")
    x_leaves, x_tree = _leaves_of(xs, "scan", "xs")
    lengths = [(_core.get_aval(x).shape or (None,))[0] for x in x_leaves]
    if None in lengths:
        bad = next(x for x in x_leaves if not _core.get_aval(x).shape)
        raise ValueError(f"scan: every leaf of xs needs a leading axis to scan over, got a scalar {describe(bad)}")
    paths = _paths(x_tree, "xs")
    if length is not None:
        if not isinstance(length, (int, np.integer)) or length < 0:
            raise ValueError(f"scan: length must be a non-negative int, got {length!r}")
        wrong = [(p, n) for p, n in zip(paths, lengths) if n != length]
        if wrong:
            raise ValueError(f"scan: length={length} but {wrong[0][0]} has leading length {wrong[0][1]}")
    elif not lengths:
        raise ValueError("scan: with no xs to scan over, give length= (the number of steps)")
    if len(set(lengths)) > 1:
        shown = ", ".join(f"{p}: {n}" for p, n in zip(paths, lengths))
        raise ValueError(f"scan: every leaf of xs must have the same leading length, got {shown}")
    n = int(length if length is not None else lengths[0])
    init_leaves, carry_tree = _leaves_of(init, "scan", "init")
    carry_avals = [_core.get_aval(c) for c in init_leaves]
    x_avals = [ShapedArray(_core.get_aval(x).shape[1:], _core.get_aval(x).dtype) for x in x_leaves]
    in_tree = tree_structure((init, xs))
    sub, consts, out_tree = _trace(f, in_tree, carry_avals + x_avals, "scan", "f")
    if out_tree.node_type not in (tuple, list) or len(out_tree.children) != 2:
        raise TypeError(f"scan: f must return a pair (carry, y), got a pytree {out_tree}")
    new_carry_tree, y_tree = out_tree.children
    n_carry = len(init_leaves)
    _check_same("scan", "f's output carry", carry_tree, carry_avals, new_carry_tree, sub.out_avals[:n_carry],
                "carry", _CARRY_FIX)
    outs = scan_p.bind(*consts, *init_leaves, *x_leaves, body=sub, n_consts=len(consts), n_carry=n_carry,
                       length=n, reverse=bool(reverse))
    return tree_unflatten(carry_tree, outs[:n_carry]), tree_unflatten(y_tree, outs[n_carry:])


def map(f: Callable, xs: Any) -> Any:  # noqa: A001 -- jax.lax.map's name
    """``f`` applied to each slice of ``xs`` along its leading axis, stacked: a ``scan`` without carry
    (one slice at a time: less memory than ``vmap``, no batching of ``f``).

    >>> lax.map(lambda row: row.sum(), fnp.arange(6.0).reshape(3, 2))
    Array([1., 5., 9.], dtype=float32)
    """
    if not callable(f):
        raise TypeError(f"map: f must be callable, got {type(f).__name__} {f!r:.40}")
    return scan(lambda _, x: ((), f(x)), (), xs)[1]
