"""Implicit differentiation as ``jax.lax``'s ``custom_linear_solve`` and ``custom_root``: the solvers are traced
once and never differentiated; the backward pass solves the transposed (or tangent) system.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad.primitives import elementwise as _E
from funcgrad.lax import _more

__all__ = ["custom_linear_solve", "custom_root"]

Array = Any
# ------------------------------------------------------------------ implicit differentiation


def _closure_converted(op: str, fun: Callable, example: Any) -> tuple:
    """``fun`` (pytree -> pytree of ``example``'s structure) traced once on ``example``'s avals: (call, consts,
    tree) where ``call(consts, leaves) -> leaves`` and ``consts`` are the arrays ``fun`` closes over (hoisted, so
    their derivatives can be taken explicitly)."""
    from funcgrad._core import get_aval
    from funcgrad.primitives.subprograms import trace_sub
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    leaves, tree = tree_flatten(example)
    avals = [get_aval(x) for x in leaves]

    def flat(*xs: Any) -> list:
        out, out_tree = tree_flatten(fun(tree_unflatten(tree, list(xs))))
        if out_tree != tree:
            raise TypeError(f"{op}: the function must return the structure of its input {tree}, got {out_tree}")
        return out
    sub, consts = trace_sub(flat, avals)
    outs = sub.jaxpr.outvars
    for v, a in zip(outs, avals):
        got = getattr(v, "aval", None)
        if got is not None and (tuple(got.shape) != tuple(a.shape) or np.dtype(got.dtype) != np.dtype(a.dtype)):
            raise TypeError(f"{op}: the function must keep its input's shapes and dtypes: {a} became {got}")
    return (lambda cs, xs: list(sub(*cs, *xs))), list(consts), tree


def _hoisted(fn: Callable, args: list) -> tuple:
    """``fn`` (flat arrays -> flat list) traced on ``args``' avals: ``(run, consts)`` with ``run(consts, args)``;
    the arrays ``fn`` closes over (an outer transform's tracers included) become explicit ``consts``."""
    from funcgrad._core import get_aval
    from funcgrad.primitives.subprograms import trace_sub
    sub, consts = trace_sub(fn, [get_aval(a) for a in args])
    return (lambda cs, xs: list(sub(*cs, *xs))), list(consts)


def _zeros(ct: Any, like: Any) -> Any:
    from funcgrad._core import zeros_like
    return zeros_like(like) if ct is None else ct


def _vjp(fun: Callable, primals: list, cts: list) -> list:
    from funcgrad._core import transform
    _, pullback = transform("vjp")(fun, primals)
    return list(pullback(cts))


def _as_tree_fn(call: Callable, cs: list, tree: Any) -> Callable:
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    return lambda v: tree_unflatten(tree, call(cs, tree_flatten(v)[0]))


def _neg_float(gs: list, likes: list) -> list:
    return [_E.neg(g) if _dtypes.kind(np.dtype(_more.dtype(x))) in "fc" else g for g, x in zip(gs, likes)]


def _jvp(fun: Callable, primals: list, tangents: list) -> list:
    from funcgrad._core import transform
    return list(transform("jvp")(fun, primals, tangents)[1])


def _split(xs: list, *sizes: int) -> list:
    out, i = [], 0
    for n in sizes:
        out.append(list(xs[i:i + n]))
        i += n
    out.append(list(xs[i:]))
    return out


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable, transpose_solve: Callable | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """``solve(matvec, b)``, differentiated implicitly, as ``jax.lax.custom_linear_solve``: the derivative
    never goes through ``solve``'s iterations; reverse mode solves with ``transpose_solve`` (or ``solve``
    when ``symmetric``) against the transpose of ``matvec``, and differentiates ``matvec`` in the arrays
    it closes over. ``b`` and the solution are pytrees of ``matvec``'s input structure.

    Reverse mode (grad, vjp, jacrev, any order) only: forward mode (jvp, jacfwd) raises, as for a
    custom_vjp function.

    >>> a = fnp.array([[2., 1.], [1., 3.]])
    >>> x = custom_linear_solve(lambda v: a @ v, fnp.ones(2), lambda mv, r: fnp.linalg.solve(a, r),
    ...                         symmetric=True)
    """
    from funcgrad._core import CustomVJPCall, zeros_like
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    op = "lax.custom_linear_solve"
    if not (callable(matvec) and callable(solve)):
        raise TypeError(f"{op}: matvec and solve must be callables")
    call, consts, tree = _closure_converted(op, matvec, b)
    b_leaves = tree_flatten(b)[0]
    nc, nb = len(consts), len(b_leaves)
    aux_tree: list = [None]
    unflat = lambda leaves: tree_unflatten(tree, list(leaves))  # noqa: E731
    zeros_b = [zeros_like(v) for v in b_leaves]

    def matvec_at(cs: list) -> Callable:
        return lambda v: unflat(call(cs, tree_flatten(v)[0]))

    def matvec_t_at(cs: list) -> Callable:      # A^T v: the pullback of the linear map (at any point)
        return lambda v: unflat(_vjp(lambda *xs: call(cs, list(xs)), zeros_b, tree_flatten(v)[0]))

    def solve_flat(*args: Any) -> list:
        cs, bl = _split(list(args), nc)
        out = solve(matvec_at(cs), unflat(bl))
        aux = None
        if has_aux:
            out, aux = out
        x, x_tree = tree_flatten(out)
        if x_tree != tree:
            raise TypeError(f"{op}: solve must return the structure of b {tree}, got {x_tree}")
        aux_leaves, aux_tree[0] = tree_flatten(aux)
        return x + [_E.stop_gradient_p.bind(a) for a in aux_leaves]

    def tsolve_flat(*args: Any) -> list:
        cs, v = _split(list(args), nc)
        out = transpose_solve(matvec_t_at(cs), unflat(v))
        return tree_flatten(out[0] if has_aux else out)[0]
    # The solvers' own closures are hoisted now, while the arrays they read are alive: constants with no
    # derivative, passed along to the backward pass.
    run_solve, s_consts = _hoisted(solve_flat, consts + b_leaves)
    run_tsolve, t_consts = (_hoisted(tsolve_flat, consts + b_leaves) if transpose_solve is not None
                            and not symmetric else (None, []))
    ns, nt = len(s_consts), len(t_consts)

    def fun(*args: Any) -> list:
        sc, _, rest = _split(list(args), ns, nt)
        return run_solve(sc, rest)

    def fwd(*args: Any) -> tuple:
        # The solution saved for bwd is this same call, so a higher-order derivative of bwd (which reads it)
        # differentiates it implicitly too (a transform's fwd runs on its own primals: no endless recursion).
        outs = call_obj.bind(*args)
        return outs, list(args[:ns + nt + nc]) + outs[:nb]

    def bwd(res: list, cts: list) -> list:
        sc, tc, cs, x = _split(res, ns, nt, nc)
        ct_x = [_zeros(c, xi) for c, xi in zip(cts[:nb], x)]

        def solve_fixed(mv: Callable, r: Any) -> Any:
            return unflat(run_solve(sc, cs + tree_flatten(r)[0])[:nb])
        if symmetric:
            lam = custom_linear_solve(matvec_at(cs), unflat(ct_x), solve_fixed, symmetric=True)
        else:
            if run_tsolve is None:
                raise TypeError(f"{op}: transpose_solve is required for reverse-mode differentiation unless "
                                "symmetric=True")

            def tsolve_fixed(mv: Callable, r: Any) -> Any:
                return unflat(run_tsolve(tc, cs + tree_flatten(r)[0]))
            lam = custom_linear_solve(matvec_t_at(cs), unflat(ct_x), tsolve_fixed, solve_fixed)
        lam_leaves = tree_flatten(lam)[0]
        # x = A(c)^-1 b: the constants' cotangent is -(d/dc A(c) x)^T lambda.
        ct_c = _neg_float(_vjp(lambda *c: call(list(c), x), cs, lam_leaves), cs) if nc else []
        return [_zeros(None, v) for v in sc + tc] + ct_c + lam_leaves

    call_obj = CustomVJPCall("custom_linear_solve", fun, fwd, bwd)
    outs = call_obj.bind(*s_consts, *t_consts, *consts, *b_leaves)
    x = unflat(outs[:nb])
    return (x, tree_unflatten(aux_tree[0], outs[nb:])) if has_aux else x


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:
    """A root of ``f`` found by ``solve(f, initial_guess)``, differentiated implicitly, as
    ``jax.lax.custom_root``: ``f(x*, params) = 0`` gives the derivative in the arrays ``f`` closes over,
    without differentiating ``solve``'s iterations; ``tangent_solve(g, y)`` solves the linear system
    ``g(x) = y`` for a linear ``g`` (reverse mode hands it the transposed Jacobian, so it must solve any
    linear ``g``, e.g. ``lambda g, y: y / g(1.0)`` for scalars). The initial guess gets no gradient.

    Reverse mode (grad, vjp, jacrev, any order) only: forward mode (jvp, jacfwd) raises, as for a
    custom_vjp function.

    >>> sqrt2 = lambda a: custom_root(lambda x: x ** 2 - a, 1.0, newton, lambda g, y: y / g(1.0))
    """
    from funcgrad._core import CustomVJPCall
    from funcgrad.tree_util import tree_flatten, tree_unflatten
    op = "lax.custom_root"
    if not (callable(f) and callable(solve) and callable(tangent_solve)):
        raise TypeError(f"{op}: f, solve and tangent_solve must be callables")
    call, consts, tree = _closure_converted(op, f, initial_guess)
    g_leaves = tree_flatten(initial_guess)[0]
    nc, ng = len(consts), len(g_leaves)
    aux_tree: list = [None]
    unflat = lambda leaves: tree_unflatten(tree, list(leaves))  # noqa: E731

    def jac_t_at(cs: list, x: list) -> Callable:     # (df/dx at x)^T v
        return lambda v: unflat(_vjp(lambda *xs: call(cs, list(xs)), x, tree_flatten(v)[0]))

    def jac_at(cs: list, x: list) -> Callable:       # (df/dx at x) v
        return lambda v: unflat(_jvp(lambda *xs: call(cs, list(xs)), x, tree_flatten(v)[0]))

    def solve_flat(*args: Any) -> list:
        cs, gl = _split(list(args), nc)
        out = solve(lambda v: unflat(call(cs, tree_flatten(v)[0])), unflat(gl))
        aux = None
        if has_aux:
            out, aux = out
        x, x_tree = tree_flatten(out)
        if x_tree != tree:
            raise TypeError(f"{op}: solve must return the structure of initial_guess {tree}, got {x_tree}")
        aux_leaves, aux_tree[0] = tree_flatten(aux)
        return [_E.stop_gradient_p.bind(v) for v in x + aux_leaves]

    def tangent_flat(jac: Callable) -> Callable:
        def flat(*args: Any) -> list:
            cs, x, v = _split(list(args), nc, ng)
            return tree_flatten(tangent_solve(jac(cs, x), unflat(v)))[0]
        return flat
    run_solve, s_consts = _hoisted(solve_flat, consts + g_leaves)
    run_tt, t_consts = _hoisted(tangent_flat(jac_t_at), consts + g_leaves + g_leaves)
    run_t, u_consts = _hoisted(tangent_flat(jac_at), consts + g_leaves + g_leaves)
    ns, nt, nu = len(s_consts), len(t_consts), len(u_consts)

    def fun(*args: Any) -> list:
        sc, _, _, rest = _split(list(args), ns, nt, nu)
        return run_solve(sc, rest)

    def fwd(*args: Any) -> tuple:
        outs = call_obj.bind(*args)      # as custom_linear_solve's fwd: the saved root differentiates implicitly
        return outs, list(args[:ns + nt + nu + nc]) + outs[:ng]

    def bwd(res: list, cts: list) -> list:
        sc, tc, uc, cs, x = _split(res, ns, nt, nu, nc)
        ct_x = [_zeros(c, xi) for c, xi in zip(cts[:ng], x)]
        lam = custom_linear_solve(jac_t_at(cs, x), unflat(ct_x),
                                  lambda mv, r: unflat(run_tt(tc, cs + x + tree_flatten(r)[0])),
                                  lambda mv, r: unflat(run_t(uc, cs + x + tree_flatten(r)[0])))
        lam_leaves = tree_flatten(lam)[0]
        # f(x*(c), c) = 0: the constants' cotangent is -(df/dc)^T lambda with (df/dx)^T lambda = ct.
        ct_c = _neg_float(_vjp(lambda *c: call(list(c), x), cs, lam_leaves), cs) if nc else []
        return [_zeros(None, v) for v in sc + tc + uc] + ct_c + [_zeros(None, gi) for gi in g_leaves]

    call_obj = CustomVJPCall("custom_root", fun, fwd, bwd)
    outs = call_obj.bind(*s_consts, *t_consts, *u_consts, *consts, *g_leaves)
    x = unflat(outs[:ng])
    return (x, tree_unflatten(aux_tree[0], outs[ng:])) if has_aux else x
