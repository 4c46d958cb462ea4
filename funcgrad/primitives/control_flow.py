"""Structured control flow: ``cond``, ``while``, ``scan`` (and ``while_grad``, the reverse
mode of a while loop whose trip count is known only when it runs).

Each is one primitive whose parameters hold closed sub-programs
(:class:`funcgrad._ir.SubProgram`: the IR of the branch or loop body, its
constants hoisted into leading operands). The rules transform those
sub-programs and bind the same primitives again, so derivatives of loops
are loops, batched loops are loops, and nothing is ever unrolled:

* **jvp**: a loop over the jvp of the body (float operands carry tangents);
* **vjp**: ``scan`` stacks the carries it enters each step with, then runs
  a reverse scan of the body's vjp (which recomputes that step's forward);
  a ``while`` loop whose trip count is known when differentiated becomes
  that scan; otherwise ``while_grad`` runs the loop forward keeping every
  carry (or, with ``checkpoints=k``, at most ``2k`` of them, recomputing the
  rest with the binomial schedule) and then backwards;
* **batching**: the body is batched; a carry that some example changes is
  batched throughout (found by a fixed point); a batched ``cond``
  predicate runs every branch and selects, a batched ``while`` predicate
  runs until every example is done and freezes the finished ones.

The implementations run the loop in Python over the sub-program: equation
by equation when called eagerly, and as a compiled program (fused kernels
inside) when ``jit`` compiled the enclosing program -- or, for a long-running
loop whose body allows it, as one generated native function
(``funcgrad.compiler.loops``, installed through :func:`set_loop_compiler`).

The user API, with pytrees and error checking, is :mod:`funcgrad.lax.control_flow`.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._core import Primitive, add_traits
from funcgrad._dtypes import ShapedArray
from funcgrad._ir import SubProgram
from funcgrad.primitives.elementwise import add_p, convert_p, eq_p, select_p
from funcgrad.primitives.indexing import batch_by_loop
from funcgrad.primitives.shape import move_to_front, moveaxis, reshape
from funcgrad.primitives.subprograms import (aval_of, batched_aval, batched_outputs, closed, float_masks, instantiate,
                                             is_float, jvp_sub, run_sub, split, to_dim, unpack, vmap_sub)

# --------------------------------------------------------------------------
# cond
# --------------------------------------------------------------------------

cond_p = Primitive("cond", multiple_results=True)
add_traits(cond_p, "higher_order")


def _clamp_index(index: Any, n: int) -> int:
    return min(max(int(index), 0), n - 1)


def _types(avals: Sequence[Any]) -> list[tuple]:
    return [(tuple(a.shape), np.dtype(a.dtype)) for a in avals]


def check_operands(op: str, what: str, want: Sequence[Any], got: Sequence[Any]) -> None:
    """The shape rule of a control-flow primitive: ``got`` avals must be ``want``'s (bound directly,
    with operands that do not fit its sub-programs, it says so instead of failing while running)."""
    if _types(want) != _types(got):
        def show(avals: Sequence[Any]) -> str:
            return "(" + ", ".join(_dtypes.describe(a) for a in avals) + ")"
        raise TypeError(f"{op}: {what} {show(got)} do not match what its sub-program takes {show(want)}")


def _cond_abstract_eval(index: Any, *ops: Any, branches: tuple) -> list:
    if index.shape != () or index.dtype.kind not in "iu":
        raise TypeError(f"cond: the branch index must be an integer scalar, got {_dtypes.describe(index)}")
    for b in branches:
        check_operands("cond", "the operands", b.in_avals, ops)
        check_operands("cond", "a branch's outputs", branches[0].out_avals, b.out_avals)
    return list(branches[0].out_avals)


def _cond_jvp(primals: list, tangents: list, branches: tuple) -> tuple[list, list]:
    index, ops, tans = primals[0], primals[1:], tangents[1:]
    mask = [is_float(aval_of(o)) for o in ops]
    jvp_branches = tuple(jvp_sub(b, [len(ops)], [mask]) for b in branches)
    ts = [instantiate(t, o) for t, o, m in zip(tans, ops, mask) if m]
    outs = cond_p.bind(index, *ops, *ts, branches=jvp_branches)
    n = len(branches[0].out_avals)
    out_float = [is_float(a) for a in branches[0].out_avals]
    it = iter(outs[n:])
    return outs[:n], [next(it) if f else None for f in out_float]


def _pullback_sub(sub: SubProgram, n_in: int, mask: Sequence[bool]) -> SubProgram:
    """``(inputs..., cts of float outputs...) -> cts of the float inputs (mask)``, recomputing the forward."""
    out_avals = sub.out_avals
    out_float = [is_float(a) for a in out_avals]
    in_avals = list(sub.in_avals) + [a for a, f in zip(out_avals, out_float) if f]

    def fun(*args: Any) -> list:
        xs, cts = list(args[:n_in]), iter(args[n_in:])
        _, pullback = _core.transform("vjp")(sub, xs)
        in_cts = pullback([next(cts) if f else None for f in out_float])
        return [c for c, m in zip(in_cts, mask) if m]

    return closed(fun, in_avals)


def _cond_vjp(cts: list, primals: list, outs: list, needs: Sequence[bool], branches: tuple) -> list:
    index, ops = primals[0], primals[1:]
    mask = [is_float(aval_of(o)) for o in ops]
    out_float = [is_float(a) for a in branches[0].out_avals]
    cts = [instantiate(c, o) for c, o, f in zip(cts, outs, out_float) if f]
    bwd = tuple(_pullback_sub(b, len(ops), mask) for b in branches)
    in_cts = iter(cond_p.bind(index, *ops, *cts, branches=bwd))
    return [None] + [next(in_cts) if m else None for m in mask]


def _cond_batch(values: list, dims: list, size: int, branches: tuple) -> tuple[list, list]:
    index, ops, idim, odims = values[0], values[1:], dims[0], dims[1:]
    n_out = len(branches[0].out_avals)
    if idim is None:
        out_b = [False] * n_out
        for b in branches:
            out_b = [x or y for x, y in zip(out_b, batched_outputs(b, odims, size))]
        out_dims = [0 if x else None for x in out_b]
        batched = tuple(vmap_sub(b, odims, size, out_dims) for b in branches)
        return cond_p.bind(index, *ops, branches=batched), out_dims
    # A mapped index: every branch runs on every example, and each example keeps its own.
    index = move_to_front(index, idim, size)
    index = _core.bind(convert_p, [index], {"dtype": np.dtype(np.int32)})
    per_branch = [_core.transform("vmap")(b, ops, odims, size, 0) for b in branches]
    outs = []
    for j in range(n_out):
        out = per_branch[0][j]
        for k in range(1, len(branches)):
            pick = _core.bind(eq_p, [_clamped(index, len(branches)), k], {})
            out = _select_examples(pick, per_branch[k][j], out)
        outs.append(out)
    return outs, [0] * n_out


def _clamped(index: Any, n: int) -> Any:
    from funcgrad.primitives.elementwise import maximum_p, minimum_p
    return _core.bind(minimum_p, [_core.bind(maximum_p, [index, 0], {}), n - 1], {})


def _select_examples(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Per example (axis 0): ``on_true`` where ``pred`` (shape (B,)) holds, else ``on_false``."""
    rank = len(aval_of(on_true).shape)
    pred = reshape(pred, (aval_of(pred).shape[0],) + (1,) * (rank - 1))
    return select_p.bind(pred, on_true, on_false)


cond_p.abstract_eval = _cond_abstract_eval
cond_p.jvp = _cond_jvp
cond_p.vjp = _cond_vjp
cond_p.batch = _cond_batch


# --------------------------------------------------------------------------
# scan
# --------------------------------------------------------------------------

scan_p = Primitive("scan", multiple_results=True)
add_traits(scan_p, "higher_order")




def _scan_abstract_eval(*avals: Any, body: SubProgram, n_consts: int, n_carry: int, length: int,
                        reverse: bool) -> list:
    consts, carry, xs = split(avals, n_consts, n_carry)
    if any(x.shape[:1] != (length,) for x in xs):
        raise TypeError(f"scan: every xs operand needs leading length {length}, got "
                        f"{', '.join(_dtypes.describe(x) for x in xs)}")
    slices = [ShapedArray(x.shape[1:], x.dtype) for x in xs]
    check_operands("scan", "the operands", body.in_avals, consts + carry + slices)
    outs = body.out_avals
    check_operands("scan", "the body's carry outputs", carry, outs[:n_carry])
    return list(outs[:n_carry]) + [ShapedArray((length,) + a.shape, a.dtype) for a in outs[n_carry:]]




def _float_tangents(values: Sequence[Any], tangents: Sequence[Any]) -> list:
    return [instantiate(t, v) for v, t in zip(values, tangents) if is_float(aval_of(v))]


def _scan_jvp(primals: list, tangents: list, body: SubProgram, n_consts: int, n_carry: int, length: int,
              reverse: bool) -> tuple[list, list]:
    consts, carry, xs = split(primals, n_consts, n_carry)
    tc, tcarry, txs = split(tangents, n_consts, n_carry)
    n_y = len(body.out_avals) - n_carry
    jbody = jvp_sub(body, [n_consts, n_carry, len(xs)], float_masks(consts, carry, xs), [n_carry, n_y])
    tc, tcarry, txs = _float_tangents(consts, tc), _float_tangents(carry, tcarry), _float_tangents(xs, txs)
    outs = scan_p.bind(*consts, *tc, *carry, *tcarry, *xs, *txs, body=jbody, n_consts=len(consts) + len(tc),
                       n_carry=n_carry + len(tcarry), length=length, reverse=reverse)
    out_float = [is_float(a) for a in body.out_avals]
    carry_out, carry_t, ys, ys_t = split(outs, n_carry, len(tcarry), n_y)
    tangents_out = unpack(carry_t, out_float[:n_carry]) + unpack(ys_t, out_float[n_carry:])
    return carry_out + ys, tangents_out




def scan_transpose(body: SubProgram, consts: list, carries: list, xs: list, ct_carry: list, ct_ys: list,
                   n_carry: int, length: int, reverse: bool, needs: Sequence[bool] | None = None
                   ) -> tuple[list, list, list]:
    """The reverse-mode pass of a scan: cotangents of ``(consts, init, xs)``, None where not float
    (or, for consts and xs, not in ``needs``: nothing is computed for them).

    ``carries``: the carries each step began with, stacked; ``ct_carry``
    and ``ct_ys``: cotangents of the float final carries and float ys. A
    reverse scan runs the body's vjp, recomputing each step's forward from
    its carry, and accumulates the consts' cotangents in its carry.
    """
    n_consts = len(consts)
    in_float = [is_float(a) for a in body.in_avals]
    wanted = [f and (needs is None or n) for f, n in zip(in_float, needs or in_float)]
    const_m, carry_f, x_m = split(wanted, n_consts, n_carry)
    carry_f = in_float[n_consts:n_consts + n_carry]
    bwd = backward_body(body, n_consts, n_carry, len(xs), const_m, x_m)
    acc = [_core.zeros_like(c) for c, m in zip(consts, const_m) if m]
    outs = scan_p.bind(*consts, *acc, *ct_carry, *carries, *xs, *ct_ys, body=bwd, n_consts=n_consts,
                       n_carry=len(acc) + len(ct_carry), length=length, reverse=not reverse)
    ct_consts, ct_init, ct_xs = split(outs, len(acc), len(ct_carry))
    return unpack(ct_consts, const_m), unpack(ct_init, carry_f), unpack(ct_xs, x_m)


def backward_body(body: SubProgram, n_consts: int, n_carry: int, n_xs: int, const_mask: Sequence[bool],
                  x_mask: Sequence[bool]) -> SubProgram:
    """The body of :func:`scan_transpose`: ``(consts, acc, ct_carry, carry_i, x_i, ct_y_i) ->
    (acc + ct_consts_i, ct_carry_before, ct_x_i)``, for the float carries and ys and the consts and
    xs in the masks."""
    in_avals, out_avals = body.in_avals, body.out_avals
    carry_f = [is_float(a) for a in in_avals[n_consts:n_consts + n_carry]]
    y_float = [is_float(a) for a in out_avals[n_carry:]]
    consts_a, carry_a, x_a = split(in_avals, n_consts, n_carry)
    avals = (consts_a + [a for a, m in zip(consts_a, const_mask) if m] + [a for a, f in zip(carry_a, carry_f) if f]
             + carry_a + x_a + [a for a, f in zip(out_avals[n_carry:], y_float) if f])
    n_acc, n_ct = sum(const_mask), sum(carry_f)

    def fun(*args: Any) -> list:
        consts, acc, ct_carry, carry, x, ct_y = split(args, n_consts, n_acc, n_ct, n_carry, n_xs)
        _, pullback = _core.transform("vjp")(body, consts + carry + x)
        in_cts = pullback(unpack(ct_carry, carry_f) + unpack(ct_y, y_float))
        c_consts, c_carry, c_x = split(in_cts, n_consts, n_carry)
        new_acc = [_core.bind(add_p, [a, c], {}) for a, c in zip(acc, [c for c, m in zip(c_consts, const_mask) if m])]
        return (new_acc + [c for c, f in zip(c_carry, carry_f) if f] + [c for c, m in zip(c_x, x_mask) if m])

    return closed(fun, avals)


def _stacking_body(body: SubProgram, n_consts: int, n_carry: int) -> SubProgram:
    """``body`` that also outputs, as its last ys, the carry each step began with."""
    def fun(*args: Any) -> list:
        return list(body(*args)) + list(args[n_consts:n_consts + n_carry])

    return closed(fun, body.in_avals)


def _scan_vjp_forward(primals: list, needs: Sequence[bool], body: SubProgram, n_consts: int, n_carry: int,
                      length: int, reverse: bool) -> tuple[list, Callable]:
    consts, init, xs = split(primals, n_consts, n_carry)
    outs = scan_p.bind(*primals, body=_stacking_body(body, n_consts, n_carry), n_consts=n_consts,
                       n_carry=n_carry, length=length, reverse=reverse)
    n_y = len(body.out_avals) - n_carry
    carry_out, ys, carries = split(outs, n_carry, n_y)

    def backward(cts: list) -> list:
        out_float = [is_float(a) for a in body.out_avals]
        results = carry_out + ys
        cts = [instantiate(c, o) for c, o, f in zip(cts, results, out_float) if f]
        ct_consts, ct_init, ct_xs = scan_transpose(body, consts, carries, xs, cts[:sum(out_float[:n_carry])],
                                                   cts[sum(out_float[:n_carry]):], n_carry, length, reverse, needs)
        return ct_consts + ct_init + ct_xs

    return carry_out + ys, backward


def _scan_vjp(cts: list, primals: list, outs: list, needs: Sequence[bool], **params: Any) -> list:
    # Reached only where no forward pass was recorded (the record keeps vjp_forward's backward).
    return _scan_vjp_forward(primals, needs, **params)[1](cts)


def _scan_batch(values: list, dims: list, size: int, body: SubProgram, n_consts: int, n_carry: int,
                length: int, reverse: bool) -> tuple[list, list]:
    consts, init, xs = split(values, n_consts, n_carry)
    cdims, idims, xdims = split(dims, n_consts, n_carry)
    consts = [c if d is None else moveaxis(c, d, 0) for c, d in zip(consts, cdims)]
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, xdims)]   # axis 0 is the scan's
    cdims = [None if d is None else 0 for d in cdims]
    xdims = [None if d is None else 0 for d in xdims]
    carry_b = _carry_fixpoint(body, cdims, [d is not None for d in idims], xdims, size)
    init = [to_dim(v, d, 0 if b else None, size) for v, d, b in zip(init, idims, carry_b)]
    in_dims = cdims + [0 if b else None for b in carry_b] + xdims
    y_b = batched_outputs(body, in_dims, size)[n_carry:]
    out_dims = [0 if b else None for b in carry_b + y_b]
    outs = scan_p.bind(*consts, *init, *xs, body=vmap_sub(body, in_dims, size, out_dims), n_consts=n_consts,
                       n_carry=n_carry, length=length, reverse=reverse)
    return outs, [0 if b else None for b in carry_b] + [1 if b else None for b in y_b]


def _carry_fixpoint(body: SubProgram, const_dims: list, carry_b: list[bool], x_dims: list, size: int
                    ) -> list[bool]:
    """Which carries are mapped: those mapped initially, and those the body maps (a fixed point)."""
    n_carry = len(carry_b)
    while True:
        outs = batched_outputs(body, const_dims + [0 if b else None for b in carry_b] + x_dims, size)
        new = [a or b for a, b in zip(carry_b, outs[:n_carry])]
        if new == carry_b:
            return carry_b
        carry_b = new


scan_p.abstract_eval = _scan_abstract_eval
scan_p.jvp = _scan_jvp
scan_p.vjp = _scan_vjp
scan_p.vjp_forward = _scan_vjp_forward
scan_p.batch = _scan_batch


# --------------------------------------------------------------------------
# while
# --------------------------------------------------------------------------

while_p = Primitive("while", multiple_results=True)
add_traits(while_p, "higher_order")


def _while_abstract_eval(*avals: Any, cond: SubProgram, body: SubProgram, n_cond_consts: int,
                         n_body_consts: int, checkpoints: int | None) -> list:
    cc, bc, carry = split(avals, n_cond_consts, n_body_consts)
    check_operands("while", "the cond operands", cond.in_avals, cc + carry)
    check_operands("while", "the body operands", body.in_avals, bc + carry)
    check_operands("while", "the body's outputs", carry, body.out_avals)
    if _types(cond.out_avals) != [((), np.dtype(np.bool_))]:
        raise TypeError(f"while: cond must return a boolean scalar, got {cond.out_avals}")
    return list(body.out_avals)


def _while_jvp(primals: list, tangents: list, cond: SubProgram, body: SubProgram, n_cond_consts: int,
               n_body_consts: int, checkpoints: int | None) -> tuple[list, list]:
    cc, bc, carry = split(primals, n_cond_consts, n_body_consts)
    _, tbc, tcarry = split(tangents, n_cond_consts, n_body_consts)
    jbody = jvp_sub(body, [n_body_consts, len(carry)], float_masks(bc, carry))
    carry_f = [is_float(aval_of(c)) for c in carry]
    n_cc = n_cond_consts

    def jcond(*args: Any) -> list:   # the tangents do not decide anything
        return cond(*args[:n_cc + len(carry)])

    jcond_sub = closed(jcond, cond.in_avals + [a for a, f in zip(cond.in_avals[n_cc:], carry_f) if f])
    tbc, tcarry = _float_tangents(bc, tbc), _float_tangents(carry, tcarry)
    outs = while_p.bind(*cc, *bc, *tbc, *carry, *tcarry, cond=jcond_sub, body=jbody, n_cond_consts=n_cc,
                        n_body_consts=len(bc) + len(tbc), checkpoints=checkpoints)
    return outs[:len(carry)], unpack(outs[len(carry):], carry_f)


def _counting(cond: SubProgram, body: SubProgram, n_cc: int, n_bc: int) -> tuple[SubProgram, SubProgram]:
    """``cond`` and ``body`` over ``(trip count, carry...)``: the body also counts its trips."""
    count = ShapedArray((), np.dtype(np.int32))

    def cond_fun(*args: Any) -> list:
        return cond(*args[:n_cc], *args[n_cc + 1:])

    def body_fun(*args: Any) -> list:
        return [_core.bind(add_p, [args[n_bc], 1], {})] + list(body(*args[:n_bc], *args[n_bc + 1:]))

    return (closed(cond_fun, cond.in_avals[:n_cc] + [count] + cond.in_avals[n_cc:]),
            closed(body_fun, body.in_avals[:n_bc] + [count] + body.in_avals[n_bc:]))


def _trip_count(value: Any) -> int | None:
    """The trip count as a Python int, or None if it is known only when the program runs."""
    try:
        return int(value)
    except _core.ConcretizationError:
        return None


def _while_vjp_forward(primals: list, needs: Sequence[bool], cond: SubProgram, body: SubProgram,
                       n_cond_consts: int, n_body_consts: int, checkpoints: int | None) -> tuple[list, Callable]:
    cc, bc, init = split(primals, n_cond_consts, n_body_consts)
    n_carry = len(init)
    carry_f = [is_float(aval_of(c)) for c in init]
    params = dict(n_cond_consts=n_cond_consts, n_body_consts=n_body_consts, checkpoints=checkpoints)
    # The loop counts its trips: known now (eagerly), the backward pass is a scan of that length.
    count_cond, count_body = _counting(cond, body, n_cond_consts, n_body_consts)
    counted = while_p.bind(*cc, *bc, np.int32(0), *init, cond=count_cond, body=count_body, **params)
    count, outs = _trip_count(counted[0]), counted[1:]
    trips = count if checkpoints is None else None

    def backward(cts: list) -> list:
        cts = [instantiate(c, o) for c, o, f in zip(cts, outs, carry_f) if f]
        if trips is not None:
            # The trip count is known: the loop is a scan of that length over the carries.
            stacked = scan_p.bind(*bc, *init, body=_stacking_body(body, n_body_consts, n_carry),
                                  n_consts=n_body_consts, n_carry=n_carry, length=trips, reverse=False)
            ct_bc, ct_init, _ = scan_transpose(body, bc, stacked[n_carry:], [], cts, [], n_carry, trips, False,
                                               needs[n_cond_consts:])
        else:
            bc_m = [is_float(aval_of(c)) and n for c, n in zip(bc, needs[n_cond_consts:])]
            bwd = backward_body(body, n_body_consts, n_carry, 0, bc_m, [])
            # With checkpoints and a known trip count, the binomial schedule covers the whole loop.
            res = while_grad_p.bind(*cc, *bc, *init, *cts, cond=cond, body=body, bwd=bwd, length=count, **params)
            ct_bc, ct_init = unpack(res[:sum(bc_m)], bc_m), unpack(res[sum(bc_m):], carry_f)
        return [None] * n_cond_consts + ct_bc + ct_init

    return outs, backward


def _while_vjp(cts: list, primals: list, outs: list, needs: Sequence[bool], **params: Any) -> list:
    return _while_vjp_forward(primals, needs, **params)[1](cts)


def _while_batch(values: list, dims: list, size: int, cond: SubProgram, body: SubProgram, n_cond_consts: int,
                 n_body_consts: int, checkpoints: int | None) -> tuple[list, list]:
    n_cc, n_bc = n_cond_consts, n_body_consts
    values = [v if d is None else moveaxis(v, d, 0) for v, d in zip(values, dims)]
    dims = [None if d is None else 0 for d in dims]
    cc, bc, init = split(values, n_cc, n_bc)
    ccd, bcd, idims = split(dims, n_cc, n_bc)
    carry_b = _carry_fixpoint(body, bcd, [d is not None for d in idims], [], size)
    pred_b = batched_outputs(cond, ccd + [0 if b else None for b in carry_b], size)[0]
    if pred_b:
        carry_b = [True] * len(init)   # each example stops at its own step: all carries are per example
    init = [to_dim(v, d, 0 if b else None, size) for v, d, b in zip(init, idims, carry_b)]
    cdims = [0 if b else None for b in carry_b]
    params = dict(n_cond_consts=n_cc, checkpoints=checkpoints)
    if not pred_b:
        outs = while_p.bind(*cc, *bc, *init, cond=vmap_sub(cond, ccd + cdims, size, [None]),
                            body=vmap_sub(body, bcd + cdims, size, cdims), n_body_consts=n_bc, **params)
        return outs, cdims
    # A mapped predicate: run while any example goes on; a finished example keeps its carry.
    n_carry = len(init)
    in_avals = ([batched_aval(a, d, size) for a, d in zip(cond.in_avals[:n_cc], ccd)]
                + [batched_aval(a, d, size) for a, d in zip(body.in_avals[:n_bc], bcd)]
                + [batched_aval(a, 0, size) for a in body.in_avals[n_bc:]])

    def going(cc_: list, carry: list) -> Any:
        return _core.transform("vmap")(cond, cc_ + carry, ccd + cdims, size, [0])[0]

    def any_cond(*args: Any) -> list:
        pred = going(list(args[:n_cc]), list(args[n_cc:]))
        return [_any(pred)]

    def select_body(*args: Any) -> list:
        cc_, bc_, carry = split(args, n_cc, n_bc)
        pred = going(cc_, carry)
        new = _core.transform("vmap")(body, bc_ + carry, bcd + cdims, size, cdims)
        return [_select_examples(pred, n, c) for n, c in zip(new, carry)]

    cond_avals = in_avals[:n_cc] + in_avals[n_cc + n_bc:]
    outs = while_p.bind(*cc, *cc, *bc, *init, cond=closed(any_cond, cond_avals),
                        body=closed(select_body, in_avals), n_body_consts=n_cc + n_bc, **params)
    return outs, [0] * n_carry


def _any(pred: Any) -> Any:
    from funcgrad.primitives.reduce import reduce_max_p
    return _core.bind(reduce_max_p, [pred], {"axes": tuple(range(len(aval_of(pred).shape)))})


while_p.abstract_eval = _while_abstract_eval
while_p.jvp = _while_jvp
while_p.vjp = _while_vjp
while_p.vjp_forward = _while_vjp_forward
while_p.batch = _while_batch


# --------------------------------------------------------------------------
# while_grad: reverse mode of a while loop whose trip count is known at run time
# --------------------------------------------------------------------------

while_grad_p = Primitive("while_grad", multiple_results=True)
add_traits(while_grad_p, "higher_order")


def run_backward(init: list, step: Callable, going: Callable, back: Callable, checkpoints: int | None,
                 length: int | None = None) -> int:
    """Run a loop forward from ``init`` while ``going``, then call ``back(carry)`` on the carries
    it entered each step with, last step first. Returns the trip count.

    With ``checkpoints=k`` and the trip count known in advance (``length``),
    the binomial ("revolve") schedule reverses the whole loop keeping at
    most ``k`` carries (:func:`_segment_backward`); nothing runs before it.

    ``checkpoints=None`` keeps every carry. ``checkpoints=k`` keeps at most
    ``2k`` of them. Forward (online: the trip count is unknown until the
    loop stops), a carry every ``stride`` steps; when more than ``k`` are
    kept, every other one is dropped and the stride doubles. Backward, each
    segment between kept carries (at most ``2n/k`` steps) is reversed with
    the binomial schedule and ``k`` spare carries (:func:`_segment_backward`).
    """
    if checkpoints is not None and length is not None:
        _segment_backward(init, length, step, back, checkpoints)
        return length
    kept: list[tuple[int, list]] = [(0, init)]
    carry, n, stride = init, 0, 1
    while going(carry):
        carry = step(carry)
        n += 1
        if checkpoints is None or n % stride == 0:
            kept.append((n, carry))
            if checkpoints is not None and len(kept) > checkpoints:
                stride *= 2
                kept = [(i, c) for i, c in kept if i % stride == 0]
    ends = [i for i, _ in kept[1:]] + [n]
    if kept[-1][0] == n:
        kept, ends = kept[:-1], ends[:-1]   # the final carry is not the start of any step
    for (start, carry0), end in reversed(list(zip(kept, ends))):
        _segment_backward(carry0, end - start, step, back, checkpoints)
    return n


def _segment_backward(carry0: list, length: int, step: Callable, back: Callable, snaps: int | None) -> None:
    """``back`` over the ``length`` steps from ``carry0``, last first.

    ``snaps=None`` keeps every carry of the segment. Otherwise this is
    Griewank's binomial ("revolve") schedule, which is optimal for a known
    length: with ``s`` carries to spare and ``t`` the least number of times
    a step may be recomputed such that ``C(s + t, s) >= length``, advance to
    the split point, reverse the right part with ``s - 1`` spare carries,
    then the left part with ``s`` (and one recomputation fewer).
    """
    if length <= 0:
        return
    if snaps is None or length == 1:
        carries = [carry0]
        for _ in range(length - 1):
            carries.append(step(carries[-1]))
        for carry in reversed(carries):
            back(carry)
        return
    t = 1
    while math.comb(snaps + t, snaps) < length:
        t += 1
    right = min(math.comb(snaps - 1 + t, snaps - 1), length - 1)
    carry = carry0
    for _ in range(length - right):
        carry = step(carry)
    _segment_backward(carry, right, step, back, max(snaps - 1, 1))   # (one spare carry: right == 1)
    _segment_backward(carry0, length - right, step, back, snaps)


def _while_grad_abstract_eval(*avals: Any, cond: SubProgram, body: SubProgram, bwd: SubProgram,
                              n_cond_consts: int, n_body_consts: int, checkpoints: int | None,
                              length: int | None) -> list:
    return list(bwd.out_avals)


def _no_higher_order(*args: Any, **params: Any) -> Any:
    raise NotImplementedError(
        "differentiating the reverse-mode derivative of a while_loop again is supported only where the trip "
        "count is known when the derivative is taken (eagerly, not inside jit or vmap) and without "
        "checkpoints=: take the outer derivative outside jit, or use lax.fori_loop with Python-int bounds or "
        "lax.scan, whose derivatives are loops of known length")


while_grad_p.abstract_eval = _while_grad_abstract_eval
while_grad_p.jvp = _no_higher_order
while_grad_p.vjp = _no_higher_order
while_grad_p.batch = batch_by_loop(while_grad_p)


# --------------------------------------------------------------------------
# custom_call: a function with its own derivative rules, inside a traced program
# --------------------------------------------------------------------------

custom_call_p = Primitive("custom_call", multiple_results=True)
add_traits(custom_call_p, "higher_order")


def _redispatch(call: Any) -> Callable:
    """The Python object behind the equation, applied again: transforms then see its own rules."""
    return lambda *xs: call.bind(*xs)


def _custom_call_abstract_eval(*avals: Any, call: Any, fun: SubProgram) -> list:
    return list(fun.out_avals)


def _custom_call_jvp(primals: list, tangents: list, call: Any, fun: SubProgram) -> tuple[list, list]:
    return _core.transform("jvp")(_redispatch(call), primals, tangents)


def _custom_call_vjp_forward(primals: list, needs: Sequence[bool], call: Any, fun: SubProgram
                             ) -> tuple[list, Callable]:
    outs, pullback = _core.transform("vjp")(_redispatch(call), primals)
    return outs, lambda cts: pullback(cts)


def _custom_call_batch(values: list, dims: list, size: int, call: Any, fun: SubProgram) -> tuple[list, list]:
    outs = _core.transform("vmap")(_redispatch(call), values, dims, size, 0)
    return outs, [0] * len(outs)


custom_call_p.abstract_eval = _custom_call_abstract_eval
custom_call_p.jvp = _custom_call_jvp
custom_call_p.vjp_forward = _custom_call_vjp_forward
custom_call_p.vjp = lambda cts, primals, outs, needs, **params: _custom_call_vjp_forward(primals, needs, **params)[1](cts)
custom_call_p.batch = _custom_call_batch


# --------------------------------------------------------------------------
# Implementations, for any backend
# --------------------------------------------------------------------------


# Whole-loop compilers for host buffers (funcgrad.compiler.loops installs them): ``(scan, while)``,
# each taking the loop's operands and parameters and returning its outputs, or None where the
# loop runs its body step by step.
_loop_compilers: list[Callable] = []


def set_loop_compiler(scan: Callable, while_: Callable) -> None:
    """Install the whole-loop compilers the ``scan`` and ``while`` implementations try first."""
    _loop_compilers[:] = [scan, while_]


def make_impls(run: Callable[[SubProgram, Sequence[Any]], list], empty: Callable[..., Any]) -> dict:
    """The implementations of the control-flow primitives on one backend's buffers.

    ``run(sub, buffers) -> buffers`` runs a sub-program (the host's
    :func:`run_sub`; a device backend wraps its buffers as its arrays and
    applies the equations there); ``empty(shape, dtype)`` makes a buffer.
    """
    def repeated(sub: SubProgram) -> Callable[[Sequence[Any]], list]:
        """``run(sub, buffers)`` as a function of the buffers, for a loop calling it every step."""
        if run is run_sub and sub.program is not None:
            return sub.program.run_buffers   # the host's compiled body, without run_sub's check each step
        return lambda buffers: run(sub, buffers)

    def cond_impl(index: Any, *ops: Any, branches: tuple) -> list:
        return run(branches[_clamp_index(index, len(branches))], ops)

    def scan_impl(*args: Any, body: SubProgram, n_consts: int, n_carry: int, length: int, reverse: bool) -> list:
        if body.program is not None and _loop_compilers and (outs := _loop_compilers[0](
                args, body, n_consts, n_carry, length, reverse)) is not None:
            return outs
        consts, carry, xs = split(args, n_consts, n_carry)
        ys = [empty((length,) + a.shape, a.dtype) for a in body.out_avals[n_carry:]]
        run_body = repeated(body)
        # Each step's slices of xs, in the order the steps take them (one iterator, no list per step).
        rows = zip(*[x[::-1] if reverse else x for x in xs]) if xs else itertools.repeat((), length)
        for step, row in enumerate(rows):
            i = length - 1 - step if reverse else step
            outs = run_body([*consts, *carry, *row])
            carry = outs[:n_carry]
            for y, o in zip(ys, outs[n_carry:]):
                y[i] = o
        return carry + ys

    def while_impl(*args: Any, cond: SubProgram, body: SubProgram, n_cond_consts: int, n_body_consts: int,
                   checkpoints: int | None) -> list:
        if body.program is not None and _loop_compilers and (outs := _loop_compilers[1](
                args, cond, body, n_cond_consts, n_body_consts)) is not None:
            return outs
        cc, bc, carry = split(args, n_cond_consts, n_body_consts)
        run_cond, run_body = repeated(cond), repeated(body)
        while run_cond(cc + carry)[0]:
            carry = run_body(bc + carry)
        return carry

    def while_grad_impl(*args: Any, cond: SubProgram, body: SubProgram, bwd: SubProgram, n_cond_consts: int,
                        n_body_consts: int, checkpoints: int | None, length: int | None) -> list:
        cc, bc, init, cts = split(args, n_cond_consts, n_body_consts, len(body.out_avals))
        acc = [empty(a.shape, a.dtype) for a in bwd.out_avals[:len(bwd.out_avals) - len(cts)]]
        for a in acc:
            a[...] = 0
        state = acc + list(cts)

        def back(carry: list) -> None:
            state[:] = run(bwd, bc + state + carry)

        run_backward(init, lambda carry: run(body, bc + carry), lambda carry: bool(run(cond, cc + carry)[0]),
                     back, checkpoints, length)
        return state

    def custom_call_impl(*args: Any, call: Any, fun: SubProgram) -> list:
        return run(fun, args)

    return {cond_p: cond_impl, scan_p: scan_impl, while_p: while_impl, while_grad_p: while_grad_impl,
            custom_call_p: custom_call_impl}


for _prim, _impl in make_impls(run_sub, np.empty).items():
    _prim.impl = _impl
