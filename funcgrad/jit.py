"""``jit``: trace a function once per signature into the IR and run the IR.

The signature is (pytree structure, shapes and dtypes of the array leaves,
static arguments).  A call with a new signature traces again (a *miss*);
otherwise the cached program runs without executing the user's Python.

Under another transform (``grad(jit(f))``, ``vmap(jit(f))``), the arguments
are tracers of that transform and ``jit`` simply calls ``f``: the outer
transform sees every primitive, so all compositions work.
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core
from funcgrad._config import config
from funcgrad._core import Array, Tracer
from funcgrad._ir import Jaxpr
from funcgrad.compiler import fusion, passes
from funcgrad.compiler.program import Program
from funcgrad.interpreters.tracing import trace_to_jaxpr
from funcgrad.tree_util import tree_flatten, tree_unflatten


class Jitted:
    """The callable returned by :func:`jit`."""

    def __init__(self, f: Callable, static_argnums: Sequence[int], static_argnames: Sequence[str], cache_size: int):
        functools.update_wrapper(self, f)
        self.f = f
        self.static_argnums = tuple(static_argnums)
        self.static_argnames = tuple(static_argnames)
        self.cache_size = cache_size
        self._cache: OrderedDict[Any, tuple[Program, Any]] = OrderedDict()
        # Same programs, keyed by avals alone, for calls with positional Arrays only.
        self._fast: dict[Any, tuple[Program, bool]] = {}
        self._fast_trees: dict[Any, Any] = {}
        self.hits = 0
        self.misses = 0

    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, Any]:
        nargs = len(args)
        static_pos = {i % nargs: args[i % nargs] for i in self.static_argnums if -nargs <= i < nargs}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        static_kw = {k: v for k, v in kwargs.items() if k in self.static_argnames}
        dyn_kw = {k: v for k, v in kwargs.items() if k not in static_kw}
        static_key = (tuple(sorted(static_pos.items())), tuple(sorted(static_kw.items())))
        try:
            hash(static_key)
        except TypeError:
            bad = [f"argument {k}" for k, v in list(static_pos.items()) + list(static_kw.items()) if not _hashable(v)]
            raise TypeError(f"jit({self.__name__}): static arguments must be hashable, but {', '.join(bad)} "
                            "is not (use a tuple instead of a list, or pass it as an array argument)") from None
        return (dyn_args, dyn_kw), static_pos | {"__kw__": static_kw}, static_key

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and not self.static_argnums:
            # The common call -- positional Arrays only -- skips the pytree machinery.
            for a in args:
                if type(a) is not Array:
                    break
            else:
                key = (config.debug_nans, config.jit_fusion, *[(a._value.shape, a._value.dtype) for a in args])
                entry = self._fast.get(key)
                if entry is not None:
                    self.hits += 1
                    program, single = entry
                    outs = program.run([a._value for a in args])
                    return outs[0] if single else tree_unflatten(self._fast_trees[key], outs)
        (dyn_args, dyn_kw), static, static_key = self._split(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kw))
        if any(isinstance(x, Tracer) or (type(x) is not Array and isinstance(x, Array)) for x in leaves):
            # Inside another transform: inline. Device (GPU) arrays: the compiled
            # programs are CPU code, so run op by op on the arrays' backend.
            return self.f(*args, **kwargs)
        leaves = [x if isinstance(x, Array) else _core.as_array(x) for x in leaves]
        # The switches that change the compiled program are part of the signature.
        key = (in_tree, tuple((x.shape, x.dtype) for x in leaves), static_key, config.debug_nans, config.jit_fusion)
        entry = self._cache.get(key)
        if entry is None:
            self.misses += 1
            entry = self._compile(in_tree, leaves, args, static)
            self._cache[key] = entry
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
                self._fast.clear()
            if not kwargs and not self.static_argnums and all(type(a) is Array for a in args):
                fast_key = (config.debug_nans, config.jit_fusion, *[(a._value.shape, a._value.dtype) for a in args])
                out_tree = entry[1]
                self._fast[fast_key] = (entry[0], out_tree.num_leaves == 1 and out_tree.node_type is None)
                self._fast_trees[fast_key] = out_tree
        else:
            self.hits += 1
            self._cache.move_to_end(key)
        program, out_tree = entry
        return tree_unflatten(out_tree, program.run([x._value for x in leaves]))

    def _compile(self, in_tree: Any, leaves: list, args: tuple, static: dict) -> tuple[Program, Any]:
        jaxpr, out_tree = self._trace(in_tree, leaves, len(args), static)
        return compile_jaxpr(jaxpr), out_tree

    def _trace(self, in_tree: Any, leaves: list, nargs: int, static: dict) -> tuple[Jaxpr, Any]:
        out_tree_cell: list = []
        static_kw = static.get("__kw__", {})

        def flat_fun(*xs):
            dyn_args, dyn_kw = tree_unflatten(in_tree, xs)
            it = iter(dyn_args)
            full = [static[i] if i in static else next(it) for i in range(nargs)]
            out_leaves, out_tree = tree_flatten(self.f(*full, **dyn_kw, **static_kw))
            out_tree_cell.append(out_tree)
            return out_leaves

        jaxpr, _ = trace_to_jaxpr(flat_fun, [x.aval for x in leaves])
        return jaxpr, out_tree_cell[0]

    def trace(self, *args: Any, **kwargs: Any) -> Jaxpr:
        """The IR this function compiles to for these arguments."""
        (dyn_args, dyn_kw), static, _ = self._split(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kw))
        leaves = [_core.as_array(x) for x in leaves]
        return self._trace(in_tree, leaves, len(args), static)[0]

    def lower(self, *args: Any, **kwargs: Any) -> Program:
        """The optimised program (fused groups and buffer plan) for these arguments; print it."""
        return compile_jaxpr(self.trace(*args, **kwargs))

    def cache_info(self) -> dict:
        """Hits, misses, current size and the traced signatures."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache), "max_size": self.cache_size,
                "signatures": [(str(k[0]), [f"{np.dtype(d)}{list(s)}" for s, d in k[1]], k[2]) for k in self._cache]}

    def clear_cache(self) -> None:
        self._cache.clear()
        self._fast.clear()
        self._fast_trees.clear()
        self.hits = self.misses = 0


def compile_jaxpr(jaxpr: Jaxpr) -> Program:
    """Optimise (fold, CSE, DCE), fuse (unless disabled) and plan a program."""
    optimised = passes.optimize(jaxpr)
    # Under debug_nans every primitive runs on its own, so a NaN is named precisely.
    if config.jit_fusion and not config.debug_nans:
        optimised = fusion.fuse(optimised)
    return Program(optimised)


def _hashable(v: Any) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def jit(f: Callable | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), cache_size: int = 64) -> Any:
    """Compile ``f``: trace once per signature, then run the cached program.

    >>> @jit
    ... def step(params, x):
    ...     return fnp.tanh(x @ params["w"])
    >>> step(params, x); step.cache_info()["misses"]
    1

    Python control flow on traced arguments raises ConcretizationError:
    mark such arguments static (``static_argnums``/``static_argnames``).
    """
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    if f is None:
        return lambda g: Jitted(g, nums, names, cache_size)
    return Jitted(f, nums, names, cache_size)
