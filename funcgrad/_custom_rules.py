"""Functions with rules of their own: ``custom_vjp``, ``custom_jvp`` and ``checkpoint`` (``remat``).

Each wraps the user's function in a call object of the core
(``CustomVJPCall``, ``CustomJVPCall``, ``bind_checkpoint``) that every
transform dispatches on; this module is their pytree front end and checks.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad import _core
from funcgrad._argspec import ArgSpec, as_leaf, fun_name as _fun_name, with_args
from funcgrad._core import Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad.tree_util import flatten_fun, tree_flatten, tree_map, tree_structure, tree_unflatten


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
    >>> _ = clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (fnp.clip(g, -1, 1),))
    >>> grad(lambda x: 3.0 * clip_gradient(x))(fnp.asarray(2.0))     # 3 clipped to 1
    Array(1., dtype=float32)

    ``fwd(*args) -> (out, residuals)``; ``bwd(residuals, out_cotangent) ->
    tuple`` with one cotangent (or None for zero) per argument.  Works under
    grad, vjp, vmap and jit; forward mode (jvp, jacfwd, hessian) raises.
    ``nondiff_argnums`` (positions, checked against ``fun``'s signature) are
    passed first to ``bwd``, in that order, and get no cotangent, as in JAX:

    >>> scaled = custom_vjp(lambda k, x: k * x, nondiff_argnums=(0,))
    >>> _ = scaled.defvjp(lambda k, x: (k * x, None), lambda k, res, g: (k * g,))
    >>> grad(lambda x: scaled(3.0, x))(fnp.asarray(1.0))
    Array(3., dtype=float32)
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
        leaves = [as_leaf(x, f"custom_vjp {name}") for x in leaves]
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
    if isinstance(c, (int, float)) and not isinstance(c, bool) and _dtypes.kind(x.dtype) == "f":
        c = as_array(np.asarray(c, dtype=x.dtype))   # a Python number is weakly typed
    shape, dtype = getattr(c, "shape", None), getattr(c, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"custom_vjp {name}: bwd returned {type(c).__name__} {c!r:.40} as the cotangent of input "
                        f"{i} ({describe(x)}); expected an array {describe(x)} (or None for zero)")
    if tuple(shape) != tuple(x.shape):
        raise ValueError(f"custom_vjp {name}: bwd returned a cotangent {describe(c)} for input {i}, an argument "
                         f"{describe(x)}: expected shape {tuple(x.shape)}")
    if _dtypes.kind(x.dtype) == "f" and dtype != x.dtype:
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
    Array(1., dtype=float32)

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
    >>> _ = apply.defjvp(lambda g, primals, tangents: (g(primals[0]), 2.0 * tangents[0]))
    >>> jvp(lambda x: apply(fnp.sin, x), (fnp.asarray(0.0),), (fnp.asarray(1.0),))
    (Array(0., dtype=float32), Array(2., dtype=float32))
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
        leaves = [as_leaf(x, f"custom_jvp {name}") for x in leaves]
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


def checkpoint(f: Callable, wrap: Callable | None = None) -> Callable:
    """Rematerialise ``f``: its intermediates are not kept for the backward pass
    but recomputed from its inputs when the gradient is taken (trading compute
    for memory).  Gradients are the same as without it.  ``f`` returns arrays
    (or a pytree of them).  ``wrap(fun_flat)``: the flat function handed to
    reverse mode (``fg.checkpoint``'s policies give it ``checkpoint_forward``).
    """
    name = _fun_name(f)

    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        leaves, in_tree = tree_flatten(args)
        leaves = [as_leaf(x, "checkpoint") for x in leaves]
        flat_fun, out_tree = flatten_fun(f, in_tree)

        def fun_flat(*xs):
            return [as_leaf(o, f"checkpoint({name})", i) for i, o in enumerate(flat_fun(*xs))]

        outs = _core.bind_checkpoint(fun_flat if wrap is None else wrap(fun_flat), leaves)
        return tree_unflatten(out_tree(), outs)

    return wrapped


remat = checkpoint


