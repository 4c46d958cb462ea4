"""``funcgrad.ad_checkpoint``: as ``jax.ad_checkpoint``, rematerialisation (``checkpoint``), its
policies (which intermediates the backward pass may keep instead of recomputing) and named values.

>>> from funcgrad.ad_checkpoint import checkpoint, checkpoint_name
>>> checkpoint_name(fnp.ones(2), "h")      # the identity, naming its value for the checkpoint policies
Array([1., 1.], dtype=float32)
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from funcgrad import _core
from funcgrad._core import Array, Tracer, as_array
from funcgrad._custom_rules import checkpoint as _checkpoint_all
from funcgrad._ir import Literal as _Literal
from funcgrad.primitives import elementwise as _E
from funcgrad.tree_util import tree_map

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]


class checkpoint_policies:
    """``jax.checkpoint_policies``: which intermediates ``checkpoint(f, policy=...)`` may keep.

    A policy is called as ``policy(prim, *avals, **params) -> bool`` (save this primitive's
    output?), with the avals of the primitive's inputs. ``everything_saveable`` keeps every
    intermediate (as without checkpoint), ``nothing_saveable`` (the default) recomputes them all in
    the backward pass, ``dots_saveable`` keeps the outputs of matmul/dot_general/einsum/conv and
    recomputes the rest (``dots_with_no_batch_dims_saveable``: only dots without batch
    dimensions); any function of that form works. Gradients are the same under every policy;
    only memory and time differ. ``save_only_these_names(*names)`` and
    ``save_any_names_but_these(*names)`` save values named with :func:`checkpoint_name` (only
    named values: unnamed intermediates are recomputed, as in JAX).

    >>> layer = fg.checkpoint(lambda w, x: fnp.tanh(x @ w), policy=fg.checkpoint_policies.dots_saveable)
    """

    @staticmethod
    def everything_saveable(*_: Any, **__: Any) -> bool:
        return True

    @staticmethod
    def nothing_saveable(*_: Any, **__: Any) -> bool:
        return False

    @staticmethod
    def dots_saveable(prim: Any, *_: Any, **__: Any) -> bool:
        return getattr(prim, "name", "") in ("matmul", "dot_general", "einsum", "conv2d")

    checkpoint_dots = dots_saveable

    @staticmethod
    def dots_with_no_batch_dims_saveable(prim: Any, *_: Any, **params: Any) -> bool:
        if getattr(prim, "name", "") != "dot_general":
            return getattr(prim, "name", "") == "matmul"
        dims = params.get("dimension_numbers")
        return not (dims and dims[1][0])

    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable

    @staticmethod
    def save_only_these_names(*names: str) -> Callable:
        """Save the values named (with :func:`checkpoint_name`) one of ``names``."""
        wanted = frozenset(names)

        def policy(prim: Any, *_: Any, **params: Any) -> bool:
            return prim is _E.name_p and params["name"] in wanted
        return policy

    @staticmethod
    def save_any_names_but_these(*names: str) -> Callable:
        """Save every value named with :func:`checkpoint_name` except those named one of ``names``."""
        unwanted = frozenset(names)

        def policy(prim: Any, *_: Any, **params: Any) -> bool:
            return prim is _E.name_p and params["name"] not in unwanted
        return policy

    save_anything_except_these_names = save_any_names_but_these

    @staticmethod
    def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
        """Save what either policy saves."""
        if policy_1 is checkpoint_policies.everything_saveable or policy_2 is checkpoint_policies.everything_saveable:
            return checkpoint_policies.everything_saveable

        def policy(*args: Any, **params: Any) -> bool:
            return bool(policy_1(*args, **params)) or bool(policy_2(*args, **params))
        return policy


def checkpoint_name(x: Any, name: str) -> Any:
    """Name ``x`` (an array or a pytree of arrays) for the name-based :class:`checkpoint_policies`:
    the identity, with derivatives passing through (as ``jax.ad_checkpoint.checkpoint_name``).

    >>> policy = fg.checkpoint_policies.save_only_these_names("hidden")
    >>> f = fg.checkpoint(lambda w: fnp.sum(fg.checkpoint_name(fnp.sin(w), "hidden") ** 2), policy=policy)
    >>> grad(f)(fnp.array([0.5, 1.0]))      # sin(w) is kept from the forward pass, not recomputed
    Array([0.8415 , 0.9093], dtype=float32)
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a str, got {name!r:.60}")
    return tree_map(lambda v: _E.name_p.bind(v if isinstance(v, (Array, Tracer)) else as_array(v), name=name), x)


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = ()) -> Callable:
    """Rematerialise ``fun``: its intermediates are recomputed in the backward pass instead of kept.

    ``policy``: one of :class:`checkpoint_policies`, or ``policy(prim, *avals, **params) -> bool``:
    the outputs of the primitives it saves are kept from the forward pass and only the others are
    recomputed (``None``/``nothing_saveable``: recompute everything; ``everything_saveable``: keep
    everything). Gradients are the same, only memory and time differ. With a policy other than
    those two, ``fun`` is traced (as under ``jit``) to find its primitives.
    ``static_argnums``/``static_argnames``: arguments passed through as Python values
    (e.g. a flag the function branches on). ``prevent_cse`` is accepted (funcgrad never merges
    the recomputation away).

    >>> layer = fg.checkpoint(lambda w, x: fnp.tanh(x @ w))
    >>> x, w = fnp.ones((1, 2)), fnp.zeros((2, 3))
    >>> grad(lambda w: fnp.sum(layer(w, x)))(w)     # recomputes tanh in the backward pass
    Array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)
    """
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy, static_argnums=static_argnums,
                                 static_argnames=static_argnames)
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be a function such as checkpoint_policies.nothing_saveable, got "
                        f"{policy!r:.60}")
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    keep_all = policy is checkpoint_policies.everything_saveable
    if policy is None or policy is checkpoint_policies.nothing_saveable or keep_all:
        remat_all = _checkpoint_all
    else:   # keep what the policy saves, recompute the rest
        def remat_all(f: Callable) -> Callable:
            return _checkpoint_all(f, functools.partial(_PolicyFun, policy=policy))
    if not nums and not names:
        return fun if keep_all else remat_all(fun)

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        n = len(args)
        fixed = {i % n: args[i % n] for i in nums if -n <= i < n}
        fixed_kw = {k: v for k, v in kwargs.items() if k in names}
        dyn_pos = [i for i in range(n) if i not in fixed]
        dyn_kw = sorted(k for k in kwargs if k not in fixed_kw)

        def inner(*dyn: Any) -> Any:
            full = list(args)
            for i, v in zip(dyn_pos, dyn[:len(dyn_pos)]):
                full[i] = v
            kw = dict(fixed_kw)
            kw.update(zip(dyn_kw, dyn[len(dyn_pos):]))
            return fun(*full, **kw)

        run = inner if keep_all else remat_all(inner)
        return run(*[args[i] for i in dyn_pos], *[kwargs[k] for k in dyn_kw])

    return wrapped


remat = checkpoint


class _PolicyFun:
    """A checkpointed flat function under a policy: called, it is the function; under reverse
    mode, ``checkpoint_forward(primals)`` runs it keeping the outputs of the equations the policy
    saves, and returns ``(outputs, replay)``: ``replay(*xs)`` recomputes the function for the
    backward pass, recording the saved equations with their kept outputs instead of running
    them again."""

    def __init__(self, fun: Callable, policy: Callable):
        self.fun = fun
        self.policy = policy

    def __call__(self, *xs: Any) -> Any:
        return self.fun(*xs)

    def checkpoint_forward(self, primals: list) -> tuple[list, Callable]:
        from funcgrad.interpreters.tracing import trace_to_jaxpr
        jaxpr, _ = trace_to_jaxpr(self.fun, [_core.get_aval(p) for p in primals])
        if any(isinstance(c, Tracer) for c in jaxpr.consts):   # closes over another transform's values
            return list(self.fun(*primals)), self.fun
        saved: dict[int, list] = {}
        env: dict[int, Any] = {id(v): c for v, c in zip(jaxpr.constvars, jaxpr.consts)}
        env.update({id(v): p for v, p in zip(jaxpr.invars, primals)})

        def read(x: Any) -> Any:
            return x.value if isinstance(x, _Literal) else env[id(x)]

        producer: dict[int, int] = {}    # a variable's id -> the index of the single-output equation making it
        for i, eqn in enumerate(jaxpr.eqns):
            out = _core.bind(eqn.prim, [read(x) for x in eqn.inputs], eqn.params)
            outs = list(out) if eqn.prim.multiple_results else [out]
            if self.policy(eqn.prim, *[x.aval for x in eqn.inputs], **eqn.params):
                saved[i] = outs
                # A saved name holds its operand's value: the equation that made it is kept with it, so the
                # named value is not recomputed (its inputs still are, where its derivative needs them).
                if eqn.prim is _E.name_p and id(eqn.inputs[0]) in producer:
                    saved[producer[id(eqn.inputs[0])]] = outs
            if len(eqn.outvars) == 1:
                producer[id(eqn.outvars[0])] = i
            for v, o in zip(eqn.outvars, outs):
                env[id(v)] = o
        return [read(v) for v in jaxpr.outvars], functools.partial(_replay, jaxpr, saved)


def _replay(jaxpr: Any, saved: dict, *xs: Any) -> list:
    """``jaxpr`` on ``xs`` with the outputs of the equations in ``saved`` taken from there."""
    from funcgrad.interpreters.reverse import bind_saved
    env: dict[int, Any] = {id(v): c for v, c in zip(jaxpr.constvars, jaxpr.consts)}
    env.update({id(v): x for v, x in zip(jaxpr.invars, xs)})

    def read(x: Any) -> Any:
        return x.value if isinstance(x, _Literal) else env[id(x)]

    for i, eqn in enumerate(jaxpr.eqns):
        args = [read(x) for x in eqn.inputs]
        out = bind_saved(eqn.prim, args, eqn.params, saved[i]) if i in saved else _core.bind(eqn.prim, args, eqn.params)
        for v, o in zip(eqn.outvars, out if eqn.prim.multiple_results else [out]):
            env[id(v)] = o
    return [read(v) for v in jaxpr.outvars]
