"""A matrix product added into another array in the output's own memory: ``w + alpha * (a @ b)``.

A training step ends with ``w - lr * (h.T @ d)`` for each weight matrix: a
product, a scale and a subtraction. Run as written, the product's result is
an intermediate as large as the weight, with a buffer of its own that a
compiled program keeps between calls. :func:`rewrite` (a pass of the CPU
compiler, before fusion) turns the three equations into one
:class:`GemmUpdate`, which computes the product straight into the output's
buffer and then scales it and adds ``w`` there, in place: the intermediate's
buffer is gone, as in XLA's CPU compiler, which fuses an addition into the
output of a dot. The arithmetic is the same as written (``w + (alpha * p)``,
each rounded), so the results equal the unfused program's. The scale and
the addition run as one pass over the output (a fused kernel, compiled in
the background: numpy meanwhile, the same bits).

It applies where the product's result is used once, by ``mul`` with a
scalar literal (or by nothing else but the addition), whose result is used
once, by ``add``/``sub`` with an array of the product's shape and dtype
(float32 or float64, no broadcasting).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from funcgrad._dtypes import ShapedArray
from funcgrad._ir import Eqn, Jaxpr, Literal, Var
from funcgrad.compiler.codegen import PARALLEL_MIN_ELEMENTS, KernelSpec, Op
from funcgrad.compiler.fusion import FusedKernel
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import linalg as L

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

# Updates finished by the one-pass kernel, over the process (tests check that it ran).
stats = {"one_pass": 0}


class GemmUpdate:
    """``out = w + alpha * (a @ b)`` for 2-d float arrays, computed in ``out`` (a program's buffer)."""

    multiple_results = False
    name = "matmul_update"
    lowerings: dict = {}
    traits = frozenset({"writes_out"})

    def __init__(self, alpha: float, aval: ShapedArray):
        self.alpha = float(alpha)
        self.aval = aval
        self.update: Any = None     # the fused kernel finishing the update in one pass (made on first use)

    def __repr__(self) -> str:
        return f"matmul_update[alpha={self.alpha:g}]"

    def impl(self, w: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(self.aval.shape, self.aval.dtype)
        np.matmul(a, b, out=out)                  # the product in the output's own memory
        if not self._one_pass(w, out):
            np.multiply(out, self.alpha, out=out)     # then w + alpha * product, rounded as written
            np.add(w, out, out=out)
        return out

    def _one_pass(self, w: np.ndarray, out: np.ndarray) -> bool:
        """``out = w + alpha * out`` by the update's fused kernel (on numpy until it is compiled: the
        same bits); False where the arrays are not contiguous and apart (numpy's two passes then)."""
        if type(w) is not np.ndarray or w.dtype != out.dtype or w.shape != out.shape or out.ndim != 2 \
                or not (w.flags.c_contiguous and out.flags.c_contiguous) or np.may_share_memory(w, out):
            return False
        if self.update is None:
            self.update = _update_kernel(self.alpha, self.aval)
        self.update.impl(w, out, out=[out])
        stats["one_pass"] += 1
        return True


def _update_kernel(alpha: float, aval: ShapedArray) -> FusedKernel:
    """The fused kernel ``x1 = x0 + alpha * x1`` (``x0``: the weight, ``x1``: the product, written in
    place), each operation rounded as numpy rounds it: exact, so it runs on numpy until compiled."""
    dtype = np.dtype(aval.dtype)
    w, p, scaled, out = Var(aval), Var(aval), Var(aval), Var(aval)
    eqns = [Eqn(E.mul_p, [p, Literal(alpha)], {}, [scaled]), Eqn(E.add_p, [w, scaled], {}, [out])]
    ops = [Op("v0", E.mul_p, ["x1", alpha], dtype), Op("v1", E.add_p, ["x0", "v0"], dtype)]
    n = math.prod(aval.shape)
    spec = KernelSpec([("x0", "[i, j]", dtype), ("x1", "[i, j]", dtype)], ops, ["v1"], None,
                      n >= PARALLEL_MIN_ELEMENTS, aliases=(("v1", "x1"),))
    shape = tuple(aval.shape)
    return FusedKernel(spec, [("[i, j]", None)] * 2, shape, shape, [aval], "matmul_update", (eqns, [w, p], [out]))


def _uses(jaxpr: Jaxpr) -> dict[int, int]:
    count: dict[int, int] = {}
    for eqn in jaxpr.eqns:
        for x in eqn.inputs:
            if isinstance(x, Var):
                count[id(x)] = count.get(id(x), 0) + 1
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            count[id(v)] = count.get(id(v), 0) + 2   # an output is never folded away
    return count


def _product(eqn: Eqn) -> bool:
    """A 2-d float32/float64 ``matmul`` of two arrays of its own dtype."""
    if eqn.prim is not L.matmul_p or len(eqn.inputs) != 2:
        return False
    out = eqn.outvars[0].aval
    return (out.dtype in _FLOATS and len(out.shape) == 2
            and all(isinstance(x, Var) and len(x.aval.shape) == 2 and x.aval.dtype == out.dtype
                    for x in eqn.inputs))


def _scale(eqn: Eqn, product: Var) -> float | None:
    """The scalar ``s`` of ``mul(s, product)`` / ``mul(product, s)`` (a literal), else None."""
    if eqn.prim is not E.mul_p or eqn.outvars[0].aval != product.aval:
        return None
    a, b = eqn.inputs
    other = b if a is product else a if b is product else None
    if isinstance(other, Literal) and np.ndim(other.value) == 0 and np.isrealobj(other.value):
        return float(other.value)
    return None


def _addend(eqn: Eqn, term: Var) -> tuple[Var, float] | None:
    """``(w, sign)`` of ``add(w, term)``/``add(term, w)`` (+1) or ``sub(w, term)`` (-1), ``w`` of the
    term's shape and dtype, else None."""
    if eqn.prim not in (E.add_p, E.sub_p) or eqn.outvars[0].aval != term.aval:
        return None
    a, b = eqn.inputs
    if eqn.prim is E.sub_p:
        w, sign = (a, -1.0) if b is term and a is not term else (None, 0.0)
    else:
        w, sign = (b if a is term else a if b is term else None), 1.0
    if isinstance(w, Var) and w is not term and w.aval == term.aval:
        return w, sign
    return None


def rewrite(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each ``w +/- s * (a @ b)`` (and ``w +/- a @ b``) as one :class:`GemmUpdate`."""
    uses = _uses(jaxpr)
    single_user: dict[int, Eqn] = {}
    for eqn in jaxpr.eqns:
        for x in eqn.inputs:
            if isinstance(x, Var) and uses.get(id(x)) == 1:
                single_user[id(x)] = eqn
    replaced: dict[int, Eqn | None] = {}   # id(eqn) -> its replacement (None: dropped)
    for eqn in jaxpr.eqns:
        if not _product(eqn):
            continue
        g = eqn.outvars[0]
        user = single_user.get(id(g))
        if user is None or id(user) in replaced:
            continue
        alpha, scale_eqn, term = 1.0, None, g
        s = _scale(user, g)
        if s is not None:
            scale_eqn, term = user, user.outvars[0]
            user = single_user.get(id(term))
            if user is None or id(user) in replaced:
                continue
            alpha = s
        found = _addend(user, term)
        if found is None:
            continue
        w, sign = found
        a, b = eqn.inputs
        fused = Eqn(GemmUpdate(sign * alpha, user.outvars[0].aval), [w, a, b], {}, list(user.outvars),
                    user.source, user.backward)
        replaced[id(eqn)] = None
        if scale_eqn is not None:
            replaced[id(scale_eqn)] = None
        replaced[id(user)] = fused
    if not replaced:
        return jaxpr
    eqns = []
    for eqn in jaxpr.eqns:
        new = replaced.get(id(eqn), eqn)
        if new is not None:
            eqns.append(new)
    return Jaxpr(jaxpr.constvars, jaxpr.consts, jaxpr.invars, eqns, jaxpr.outvars)
