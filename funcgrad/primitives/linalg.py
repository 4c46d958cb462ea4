"""Linear algebra primitives: ``matmul`` (numpy semantics, ndim >= 2) and ``einsum``.

``dot``, ``tensordot``, ``outer`` and 1-d ``matmul`` are written over these
in ``funcgrad.numpy``.  ``einsum`` takes an explicit spec (``"ij,jk->ik"``);
its vjp is another einsum, so it differentiates to any order.
"""
from __future__ import annotations

import string
from typing import Any, Sequence

import numpy as np

from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe, result_type
from funcgrad.primitives.elementwise import add
from funcgrad.primitives.shape import shape_of, unbroadcast
from funcgrad.primitives.shape import broadcast_to, moveaxis, reshape, transpose

# ----------------------------------------------------------------- matmul

matmul_p = Primitive("matmul")
matmul_p.impl = np.matmul


def _matmul_aval(x, y):
    xs, ys = shape_of(x), shape_of(y)
    if len(xs) < 2 or len(ys) < 2 or xs[-1] != ys[-2]:
        raise ValueError(f"matmul: shapes {describe(x)} and {describe(y)} do not match: expected "
                         f"x.shape[-1] == y.shape[-2] (got {xs[-1:]} and {ys[-2:-1]})")
    try:
        batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of {describe(x)} and {describe(y)} cannot be broadcast") from None
    return ShapedArray(tuple(batch) + (xs[-2], ys[-1]), result_type(x, y))


def _swap(x: Any) -> Any:
    nd = len(shape_of(x))
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def matmul(x: Any, y: Any) -> Any:
    """``x @ y`` for 2-d (or batched) operands.

    >>> lax.matmul(fnp.ones((2, 3)), fnp.ones((3, 4))).shape
    (2, 4)
    """
    return matmul_p.bind(x, y)


def _matmul_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    out = matmul(x, y)
    t = None if tx is None else matmul(tx, y)
    if ty is not None:
        t = matmul(x, ty) if t is None else add(t, matmul(x, ty))
    return out, broadcast_to(t, shape_of(out))


def _rows(a: Any) -> Any:
    """(..., r, c) -> (prod(...) * r, c): a stack of matrices as one tall matrix (a free reshape)."""
    shape = shape_of(a)
    return reshape(a, (int(np.prod(shape[:-1])), shape[-1]))


def _columns(a: Any) -> Any:
    """(..., r, c) -> (r, prod(...) * c): a stack of matrices side by side."""
    shape = shape_of(a)
    if len(shape) == 2:
        return a
    return reshape(moveaxis(a, len(shape) - 2, 0), (shape[-2], int(np.prod(shape[:-2])) * shape[-1]))


def _matmul_vjp(ct, primals, out, needs):
    x, y = primals
    batch = shape_of(ct)[:-2]
    cx = cy = None
    if needs[0]:
        if len(shape_of(x)) == 2 and batch and shape_of(y)[:-2] == batch:
            # A shared matrix times a stack: sum_b ct_b @ y_b^T as one product, never the stack of
            # per-matrix products (B x m x k) that unbroadcast would sum.
            cx = matmul(_columns(ct), _swap(_columns(y)))
        else:
            cx = unbroadcast(matmul(ct, _swap(y)), shape_of(x))
    if needs[1]:
        if len(shape_of(y)) == 2 and batch and shape_of(x)[:-2] == batch:
            cy = matmul(_swap(_rows(x)), _rows(ct))
        else:
            cy = unbroadcast(matmul(_swap(x), ct), shape_of(y))
    return cx, cy


def _matmul_batch(values, dims, size):
    (x, y), (dx, dy) = values, dims
    # One operand shared (unbatched, a plain matrix): fold the batch into the other's rows or columns, so
    # the batched product is one matrix product, and so is each side of its gradient.
    if dy is None and len(shape_of(y)) == 2:
        x = moveaxis(x, dx, 0)
        out = matmul(_rows(x), y)
        return reshape(out, shape_of(x)[:-1] + shape_of(y)[-1:]), 0
    if dx is None and len(shape_of(x)) == 2:
        # x @ y_b = (y_b^T @ x^T)^T: the stack goes into the rows again (free transposes when y_b is a vector)
        y = moveaxis(y, dy, 0)
        out = matmul(_rows(_swap(y)), _swap(x))                         # (B... * n, m)
        return _swap(reshape(out, shape_of(y)[:-2] + (shape_of(y)[-1], shape_of(x)[0]))), 0
    rank = max(len(shape_of(v)) - (d is not None) for v, d in zip(values, dims))
    args = []
    for v, d in zip(values, dims):
        if d is not None:
            v = moveaxis(v, d, 0)
            inner = shape_of(v)[1:]
            v = reshape(v, (size,) + (1,) * (rank - len(inner)) + inner)
        args.append(v)
    return matmul(*args), 0


matmul_p.abstract_eval = _matmul_aval
matmul_p.jvp, matmul_p.vjp, matmul_p.batch = _matmul_jvp, _matmul_vjp, _matmul_batch

# ----------------------------------------------------------------- einsum

einsum_p = Primitive("einsum")
einsum_p.impl = lambda *xs, spec: np.einsum(spec, *xs, optimize=True)


def parse_spec(spec: str, n_operands: int) -> tuple[list[str], str]:
    """``"ij,jk->ik"`` -> (["ij", "jk"], "ik"); implicit output as numpy does."""
    spec = spec.replace(" ", "")
    if "." in spec:
        raise ValueError(f"einsum: '...' in spec {spec!r} is not supported; name every axis with a letter")
    if "->" in spec:
        lhs, out = spec.split("->")
    else:
        lhs = spec
        letters = lhs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) != n_operands:
        raise ValueError(f"einsum: spec {spec!r} names {len(ins)} operands but {n_operands} were given")
    return ins, out


def _einsum_aval(*xs, spec):
    ins, out = parse_spec(spec, len(xs))
    sizes: dict[str, int] = {}
    for letters, x in zip(ins, xs):
        shape = shape_of(x)
        if len(letters) != len(shape):
            raise ValueError(f"einsum: operand {describe(x)} has rank {len(shape)} but spec {spec!r} gives it "
                             f"{len(letters)} axes ({letters!r})")
        for c, s in zip(letters, shape):
            if sizes.setdefault(c, s) != s and s != 1 and sizes[c] != 1:
                raise ValueError(f"einsum: axis {c!r} has size {sizes[c]} in one operand and {s} in another "
                                 f"(operands {', '.join(describe(v) for v in xs)}, spec {spec!r})")
            sizes[c] = max(sizes[c], s)
    return ShapedArray(tuple(sizes[c] for c in out), result_type(*xs))


def einsum(spec: str, *xs: Any) -> Any:
    """``numpy.einsum`` over funcgrad arrays (contracted pairwise).

    >>> fnp.asarray(lax.einsum("ij,j->i", fnp.ones((2, 3)), fnp.ones(3)))
    Array([3., 3.], dtype=float32)
    """
    ins, out = parse_spec(spec, len(xs))
    return einsum_p.bind(*xs, spec=",".join(ins) + "->" + out)


def _einsum_operand_ct(ct: Any, xs: Sequence[Any], i: int, ins: list[str], out: str) -> Any:
    letters = ins[i]
    if len(set(letters)) != len(letters):
        raise NotImplementedError(f"einsum: the gradient of an operand with a repeated axis ({letters!r}, a "
                                  "diagonal) is not implemented; take the diagonal explicitly first")
    others = [j for j in range(len(xs)) if j != i]
    available = set(out).union(*[set(ins[j]) for j in others])
    kept = "".join(c for c in letters if c in available)
    sub_spec = ",".join([out] + [ins[j] for j in others]) + "->" + kept
    g = einsum_p.bind(ct, *[xs[j] for j in others], spec=sub_spec)
    shape = shape_of(xs[i])
    if kept != letters:  # axes summed only within this operand: broadcast back
        g = broadcast_to(reshape(g, tuple(shape[k] if c in available else 1 for k, c in enumerate(letters))), shape)
    return unbroadcast(g, shape) if shape_of(g) != shape else g


def _einsum_vjp(ct, primals, out, needs, spec):
    ins, o = parse_spec(spec, len(primals))
    return [_einsum_operand_ct(ct, primals, i, ins, o) if need else None for i, need in enumerate(needs)]


def _einsum_jvp(primals, tangents, spec):
    out = einsum_p.bind(*primals, spec=spec)
    total = None
    for i, t in enumerate(tangents):
        if t is None:
            continue
        args = list(primals)
        args[i] = t
        term = einsum_p.bind(*args, spec=spec)
        total = term if total is None else add(total, term)
    return out, total


def _einsum_batch(values, dims, size, spec):
    ins, out = parse_spec(spec, len(values))
    free = next(c for c in string.ascii_letters if c not in spec)
    args, new_ins = [], []
    for v, d, letters in zip(values, dims, ins):
        if d is None:
            args.append(v)
            new_ins.append(letters)
        else:
            args.append(moveaxis(v, d, 0))
            new_ins.append(free + letters)
    return einsum_p.bind(*args, spec=",".join(new_ins) + "->" + free + out), 0


einsum_p.abstract_eval = _einsum_aval
einsum_p.jvp, einsum_p.vjp, einsum_p.batch = _einsum_jvp, _einsum_vjp, _einsum_batch
