"""matmul, dot, tensordot, outer, einsum (with ``...`` and contraction paths), einsum_path, cross, vecdot,
matvec, vecmat."""
from __future__ import annotations

import string
from typing import Any

import numpy as np

from funcgrad._dtypes import describe
from funcgrad.numpy import _shape
from funcgrad.numpy._base import arr, normalize_axis, promote
from funcgrad.numpy._elementwise import multiply, subtract
from funcgrad.numpy._reductions import sum as _sum
from funcgrad.numpy._shape import ravel
from funcgrad.lax import reshape
from funcgrad import lax
from funcgrad.typing import Array, ArrayLike


def matmul(x: ArrayLike, y: ArrayLike) -> Array:
    """numpy's ``x @ y``: 1-d operands are promoted and the added axis removed.

    >>> fnp.matmul(fnp.ones((2, 3)), fnp.ones((3,))).shape
    (2,)
    """
    x, y = promote(arr(x), arr(y))
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"matmul: operands must be at least 1-d, got {describe(x)} and {describe(y)}")
    if x.shape[-1] != y.shape[-2 if y.ndim > 1 else 0]:
        # Checked here so the message shows the user's shapes (1-d operands are reshaped below).
        raise ValueError(f"matmul: shapes {describe(x)} and {describe(y)} do not match: the last axis of the first "
                         f"({x.shape[-1]}) must equal the {'second-to-last' if y.ndim > 1 else 'only'} axis of the "
                         f"second ({y.shape[-2 if y.ndim > 1 else 0]})")
    x2 = reshape(x, (1,) + x.shape) if x.ndim == 1 else x
    y2 = reshape(y, y.shape + (1,)) if y.ndim == 1 else y
    out = lax.matmul_p.bind(x2, y2)
    if x.ndim == 1 and y.ndim == 1:
        return reshape(out, ())
    if x.ndim == 1:
        return reshape(out, out.shape[:-2] + out.shape[-1:])
    if y.ndim == 1:
        return reshape(out, out.shape[:-1])
    return out


def _expand_ellipsis(spec: str, shapes: list) -> tuple[list[str], str]:
    """Name every axis: ``"...ij,...jk->...ik"`` -> (["Aij", "Ajk"], "Aik") for the operands' ranks."""
    spec = spec.replace(" ", "")
    if "->" in spec:
        lhs, out = spec.split("->")
        explicit = True
    else:
        lhs, out, explicit = spec, "", False
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: spec {spec!r} names {len(ins)} operands but {len(shapes)} were given")
    for part in ins + [out]:
        rest = part.replace("...", "")
        if "." in rest or any(not c.isalpha() for c in rest):
            raise ValueError(f"einsum: invalid subscripts {part!r} in {spec!r}: use letters and at most one '...'")
    used = set(c for c in spec if c.isalpha())
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = 0
    for part, shape in zip(ins, shapes):
        if "..." in part:
            k = len(shape) - (len(part) - 3)
            if k < 0:
                raise ValueError(f"einsum: operand of shape {shape} has fewer axes than {part!r} names")
            n_ell = max(n_ell, k)
    ell = "".join(free[:n_ell])
    new_ins = []
    for part, shape in zip(ins, shapes):
        if "..." in part:
            k = len(shape) - (len(part) - 3)
            part = part.replace("...", ell[n_ell - k:])
        new_ins.append(part)
    if explicit:
        if "..." in out:
            out = out.replace("...", ell)
    else:
        letters = "".join(new_ins)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return new_ins, out


def _broadcast_operands(ins: list[str], xs: list) -> list:
    """Size-1 axes named by a letter of size n elsewhere are broadcast (numpy einsum allows it)."""
    sizes: dict[str, int] = {}
    for letters, x in zip(ins, xs):
        if len(letters) != x.ndim:
            raise ValueError(f"einsum: operand {describe(x)} has rank {x.ndim} but its subscripts {letters!r} "
                             f"name {len(letters)} axes")
        for c, n in zip(letters, x.shape):
            if n != 1:
                if sizes.get(c, n) != n:
                    raise ValueError(f"einsum: axis {c!r} has sizes {sizes[c]} and {n} in different operands "
                                     f"({', '.join(describe(v) for v in xs)})")
                sizes[c] = n
    out = []
    for letters, x in zip(ins, xs):
        target = tuple(sizes.get(c, 1) for c in letters)
        out.append(x if target == x.shape else _shape.broadcast_to(x, target))
    return out


def _take_diagonals(letters: str, x: Any) -> tuple[str, Any]:
    """A letter repeated within one operand (``"ii"``): take that diagonal first (differentiable)."""
    while len(set(letters)) != len(letters):
        c = next(ch for ch in letters if letters.count(ch) > 1)
        i = letters.index(c)
        j = letters.index(c, i + 1)
        x = _shape.moveaxis(x, (i, j), (-2, -1))
        n = x.shape[-1]
        idx = np.arange(n)
        x = x[..., idx, idx]
        letters = "".join(ch for k, ch in enumerate(letters) if k not in (i, j)) + c
    return letters, x


def einsum(subscripts: str, /, *operands: Any, out: None = None, optimize: Any = "auto", precision: Any = None,
           preferred_element_type: Any = None, _dot_general: Any = None, out_sharding: Any = None) -> Array:
    """Einstein summation (numpy's subscripts, ``...`` included, explicit or implicit output).

    ``optimize``: 'auto'/True/'greedy'/'optimal' contract pairwise in the order numpy's ``einsum_path``
    picks, False as one contraction, or an explicit path (a list of index tuples, optionally after
    ``'einsum_path'``).

    >>> q = k = fnp.ones((1, 2, 3, 4))
    >>> fnp.einsum("bhqd,bhkd->bhqk", q, k).shape     # attention scores
    (1, 2, 3, 3)
    >>> a, b = fnp.ones((5, 2, 3)), fnp.ones((3, 4))
    >>> fnp.einsum("...ij,...jk", a, b).shape         # batched matmul
    (5, 2, 4)
    """
    if out is not None:
        raise NotImplementedError("einsum: out= is not supported (funcgrad arrays are immutable); use the result")
    if not isinstance(subscripts, str):
        raise NotImplementedError("einsum: only the string form of the subscripts is supported")
    xs = promote(*[arr(o) for o in operands])
    ins, out_letters = _expand_ellipsis(subscripts, [x.shape for x in xs])
    pairs = [_take_diagonals(letters, x) for letters, x in zip(ins, xs)]
    ins, xs = [p[0] for p in pairs], [p[1] for p in pairs]
    xs = _broadcast_operands(ins, xs)
    for c in out_letters:
        if not any(c in letters for letters in ins):
            raise ValueError(f"einsum: output subscript {c!r} of {subscripts!r} names no operand axis")
    if len(xs) <= 2 or optimize is False or optimize is None:
        result = lax.einsum(",".join(ins) + "->" + out_letters, *xs)
    else:
        path = _path(optimize, ins, out_letters, xs)
        result = _contract_along(path, ins, out_letters, xs)
    if preferred_element_type is not None:
        result = lax.convert_element_type(result, preferred_element_type)
    return result


def _path(optimize: Any, ins: list[str], out: str, xs: list) -> list[tuple[int, ...]]:
    if isinstance(optimize, (list, tuple)):
        steps = list(optimize)
        if steps and steps[0] == "einsum_path":
            steps = steps[1:]
        return [tuple(int(i) for i in step) for step in steps]
    if optimize is True or optimize == "auto":
        optimize = "greedy"
    if optimize not in ("greedy", "optimal"):
        raise ValueError(f"einsum: optimize must be a bool, 'auto', 'greedy', 'optimal' or a path, got {optimize!r}")
    dummies = [np.broadcast_to(np.zeros((), np.float64), x.shape) for x in xs]
    path, _ = np.einsum_path(",".join(ins) + "->" + out, *dummies, optimize=optimize)
    return [tuple(step) for step in path[1:]]


def _contract_along(path: list, ins: list[str], out: str, xs: list) -> Any:
    ins, xs = list(ins), list(xs)
    for step in path:
        if any(i >= len(xs) for i in step) or len(set(step)) != len(step):
            raise ValueError(f"einsum: invalid contraction path step {step} for {len(xs)} operands")
        picked = sorted(step, reverse=True)
        sub_ins = [ins[i] for i in step]
        sub_xs = [xs[i] for i in step]
        for i in picked:
            del ins[i]
            del xs[i]
        others = set("".join(ins)) | set(out)
        letters = "".join(sub_ins)
        keep = "".join(c for c in dict.fromkeys(letters) if c in others)
        xs.append(lax.einsum(",".join(sub_ins) + "->" + keep, *sub_xs))
        ins.append(keep)
    if len(xs) != 1:
        return lax.einsum(",".join(ins) + "->" + out, *xs)
    return xs[0] if ins[0] == out else lax.einsum(ins[0] + "->" + out, xs[0])


def einsum_path(subscripts: str, /, *operands: Any, optimize: Any = "auto") -> tuple[list, str]:
    """The contraction order numpy's ``einsum_path`` picks for these operands' shapes: ``(path, report)``.

    >>> a, b, c = fnp.ones((2, 3)), fnp.ones((3, 4)), fnp.ones((4, 5))
    >>> fnp.einsum_path("ij,jk,kl->il", a, b, c, optimize="greedy")[0]
    ['einsum_path', (1, 2), (0, 1)]
    """
    shapes = [tuple(np.shape(o)) if not hasattr(o, "shape") else tuple(o.shape) for o in operands]
    if optimize is True or optimize == "auto":
        optimize = "greedy"
    dummies = [np.broadcast_to(np.zeros((), np.float64), s) for s in shapes]
    return np.einsum_path(subscripts, *dummies, optimize=optimize)


def tensordot(x: ArrayLike, y: ArrayLike, axes: Any = 2) -> Array:
    """Sum of products over the given axes (``axes=n``: the last n of ``a`` and the first n of ``b``).

    >>> fnp.tensordot(fnp.ones((2, 3)), fnp.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    x, y = arr(x), arr(y)
    if isinstance(axes, int):
        ax_x = list(range(x.ndim - axes, x.ndim))
        ax_y = list(range(axes))
    else:
        ax_x, ax_y = ([a] if isinstance(a, int) else list(a) for a in axes)
    ax_x = [a % x.ndim for a in ax_x]
    ax_y = [a % y.ndim for a in ax_y]
    if len(ax_x) != len(ax_y) or any(x.shape[a] != y.shape[b] for a, b in zip(ax_x, ax_y)):
        raise ValueError(f"tensordot: contracted axes {ax_x} of {describe(x)} and {ax_y} of {describe(y)} "
                         "must have equal sizes")
    letters = iter(string.ascii_letters)
    lx = [next(letters) for _ in range(x.ndim)]
    ly = [next(letters) for _ in range(y.ndim)]
    for a, b in zip(ax_x, ax_y):
        ly[b] = lx[a]
    out = [c for i, c in enumerate(lx) if i not in ax_x] + [c for i, c in enumerate(ly) if i not in ax_y]
    return einsum("".join(lx) + "," + "".join(ly) + "->" + "".join(out), x, y)


def dot(x: ArrayLike, y: ArrayLike) -> Array:
    """numpy's ``dot``: products for scalars, matmul for 1-d/2-d, tensordot beyond.

    >>> fnp.dot(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Array(11., dtype=float32)
    """
    x, y = arr(x), arr(y)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    if x.ndim <= 2 and y.ndim <= 2:
        return matmul(x, y)
    return tensordot(x, y, axes=([x.ndim - 1], [max(y.ndim - 2, 0)]))


def vdot(x: ArrayLike, y: ArrayLike) -> Any:
    """Dot product of the flattened arrays (the first conjugated).

    >>> fnp.vdot(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Array(11., dtype=float32)
    """
    x = ravel(x)
    if x.dtype.kind == "c":   # numpy's vdot conjugates its first argument
        x = lax.conj(x)
    return dot(x, ravel(y))


def inner(x: ArrayLike, y: ArrayLike) -> Any:
    """Inner product over the last axes of ``a`` and ``b``.

    >>> fnp.inner(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Array(11., dtype=float32)
    """
    x, y = arr(x), arr(y)
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    return tensordot(x, y, axes=([x.ndim - 1], [y.ndim - 1]))


def outer(x: ArrayLike, y: ArrayLike) -> Array:
    """Outer product of the flattened arrays: f32[m], f32[n] -> f32[m,n].

    >>> fnp.outer(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Array([[3., 4.],
           [6., 8.]], dtype=float32)
    """
    x, y = ravel(arr(x)), ravel(arr(y))
    return multiply(reshape(x, (x.shape[0], 1)), reshape(y, (1, y.shape[0])))


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """Dot product of vectors along ``axis`` (other axes broadcast): ``sum(x1 * x2, axis)``.

    >>> vecdot(fnp.ones((2, 3)), fnp.arange(3.0))
    Array([3., 3.], dtype=float32)
    """
    x1, x2 = promote(arr(x1), arr(x2))
    try:
        shape = np.broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise ValueError(f"vecdot: {describe(x1)} and {describe(x2)} cannot be broadcast together") from None
    ax = normalize_axis("vecdot", axis, len(shape))
    n1 = x1.shape[ax - len(shape) + x1.ndim] if ax - len(shape) + x1.ndim >= 0 else 1
    n2 = x2.shape[ax - len(shape) + x2.ndim] if ax - len(shape) + x2.ndim >= 0 else 1
    if n1 != n2:
        raise ValueError(f"vecdot: the contracted axis {axis} has sizes {n1} and {n2} in {describe(x1)} and "
                         f"{describe(x2)}; they must be equal")
    out = _sum(multiply(x1, x2), axis=ax)
    return out if preferred_element_type is None else lax.convert_element_type(out, preferred_element_type)


def _matrix_vector(name: str, m: Any, v: Any, vector_first: bool) -> Any:
    """``m @ v`` (matvec) or ``v @ m`` (vecmat) over broadcast batch dims, with the shape checks."""
    m, v = arr(m), arr(v)
    x1, x2 = (v, m) if vector_first else (m, v)
    if m.ndim < 2 or v.ndim < 1:
        wanted = "a vector (..., n) and a matrix (..., n, m)" if vector_first else \
            "a matrix (..., m, n) and a vector (..., n)"
        raise ValueError(f"{name}: expected {wanted}, got {describe(x1)} and {describe(x2)}")
    k = -2 if vector_first else -1
    if m.shape[k] != v.shape[-1]:
        if vector_first:
            raise ValueError(f"{name}: the vector {describe(v)} has length {v.shape[-1]} but the matrix "
                             f"{describe(m)} has {m.shape[-2]} rows")
        raise ValueError(f"{name}: the matrix {describe(m)} has {m.shape[-1]} columns but the vector "
                         f"{describe(v)} has length {v.shape[-1]}")
    out = matmul(_shape.expand_dims(v, -2), m) if vector_first else matmul(m, _shape.expand_dims(v, -1))
    return _shape.squeeze(out, k)


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """Matrix-vector product: (..., m, n) and (..., n) -> (..., m), batch dims broadcast.

    >>> matvec(fnp.ones((2, 3)), fnp.ones(3))
    Array([3., 3.], dtype=float32)
    """
    return _matrix_vector("matvec", x1, x2, vector_first=False)


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """Vector-matrix product: (..., n) and (..., n, m) -> (..., m), batch dims broadcast.

    >>> vecmat(fnp.ones(2), fnp.ones((2, 3)))
    Array([2., 2., 2.], dtype=float32)
    """
    return _matrix_vector("vecmat", x2, x1, vector_first=True)


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Any:
    """Cross product of 3-vectors (or 2-vectors, giving the z component) along the given axes.

    >>> cross(fnp.array([1.0, 0.0, 0.0]), fnp.array([0.0, 1.0, 0.0]))
    Array([0., 0., 1.], dtype=float32)
    """
    a, b = promote(arr(a), arr(b))
    if axis is not None:
        axisa = axisb = axisc = axis
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"cross: expected arrays of vectors, got {describe(a)} and {describe(b)}")
    a = _shape.moveaxis(a, normalize_axis("cross", axisa, a.ndim), -1)
    b = _shape.moveaxis(b, normalize_axis("cross", axisb, b.ndim), -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"cross: incompatible vector sizes {a.shape[-1]} and {b.shape[-1]} (each must be 2 or 3)")
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return subtract(multiply(a0, b1), multiply(a1, b0))
    a2 = a[..., 2] if a.shape[-1] == 3 else None
    b2 = b[..., 2] if b.shape[-1] == 3 else None
    c2 = subtract(multiply(a0, b1), multiply(a1, b0))
    c0 = (subtract(multiply(a1, b2), multiply(a2, b1)) if a2 is not None and b2 is not None
          else multiply(a1, b2) if b2 is not None else multiply(multiply(a2, b1), -1))
    c1 = (subtract(multiply(a2, b0), multiply(a0, b2)) if a2 is not None and b2 is not None
          else multiply(multiply(a0, b2), -1) if b2 is not None else multiply(a2, b0))
    c0, c1, c2 = _shape.broadcast_arrays(c0, c1, c2)
    out = _shape.stack([c0, c1, c2], axis=-1)
    return _shape.moveaxis(out, -1, normalize_axis("cross", axisc, out.ndim))
