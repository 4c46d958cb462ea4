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
import inspect
import threading
import warnings
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._config import config
from funcgrad._core import Array, Tracer
from funcgrad._ir import Jaxpr
from funcgrad._warnings import RetraceWarning
from funcgrad.compiler import fusion, passes
from funcgrad.compiler.program import Program
from funcgrad.interpreters.tracing import trace_to_jaxpr
from funcgrad.tree_util import tree_flatten, tree_leaves, tree_unflatten


class Jitted:
    """The callable returned by :func:`jit`."""

    def __init__(self, f: Callable, static_argnums: Sequence[int], static_argnames: Sequence[str], cache_size: int):
        functools.update_wrapper(self, f)
        self.f = f
        self.static_argnums = tuple(static_argnums)
        self.static_argnames = tuple(static_argnames)
        self.cache_size = cache_size
        # Static positions also named by keyword, and whether a missing position has a default.
        self._static_params, self._static_defaults = _static_params(f, self.static_argnums)
        self._cache: OrderedDict[Any, tuple[Program, Any]] = OrderedDict()
        # Same programs, keyed by avals alone, for calls with positional Arrays only:
        # (program, single output?, output tree) in one entry, read without the lock.
        self._fast: dict[Any, tuple[Program, bool, Any]] = {}
        # Misses and evictions change both tables: one thread at a time (hits take no lock).
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        # The argument forms of recent misses, until a RetraceWarning has been given.
        self._miss_forms: list[dict] | None = []

    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, Any]:
        nargs = len(args)
        static_pos = {i % nargs: args[i % nargs] for i in self.static_argnums if -nargs <= i < nargs}
        if len(static_pos) < len(self.static_argnums):
            self._check_missing_static(nargs, kwargs)
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        static_kw = {k: v for k, v in kwargs.items()
                     if k in self.static_argnames or k in self._static_params.values()}
        dyn_kw = {k: v for k, v in kwargs.items() if k not in static_kw}
        static_key = (tuple(sorted(static_pos.items())), tuple(sorted(static_kw.items())))
        try:
            hash(static_key)
        except TypeError:
            bad = [f"argument {k}" for k, v in list(static_pos.items()) + list(static_kw.items()) if not _hashable(v)]
            raise TypeError(f"jit({self.__name__}): static arguments must be hashable, but {', '.join(bad)} "
                            "is not (use a tuple instead of a list, or pass it as an array argument)") from None
        return (dyn_args, dyn_kw), static_pos | {"__kw__": static_kw}, static_key

    def _check_missing_static(self, nargs: int, kwargs: dict) -> None:
        """A static position not passed positionally must be passed by keyword or have a default."""
        for i in self.static_argnums:
            if -nargs <= i < nargs:
                continue
            param = self._static_params.get(i)
            if param is not None and (param in kwargs or param in self._static_defaults):
                continue
            raise ValueError(
                f"jit({self.__name__}): static_argnums={self.static_argnums} but {self.__name__} was called with "
                f"{nargs} positional argument{'s' if nargs != 1 else ''}, so argument {i} does not exist. "
                "static_argnums counts positional arguments from 0: pass that argument positionally, or name it "
                "in static_argnames.")

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
                    program, single, out_tree = entry
                    outs = program.run([a._value for a in args])
                    return outs[0] if single else tree_unflatten(out_tree, outs)
        (dyn_args, dyn_kw), static, static_key = self._split(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kw))
        if any(isinstance(x, Tracer) or (type(x) is not Array and isinstance(x, Array)) for x in leaves):
            # Inside another transform: inline. Device (GPU) arrays: the compiled
            # programs are CPU code, so run op by op on the arrays' backend.
            return self.f(*args, **kwargs)
        leaves = self._array_leaves(leaves, args, kwargs, static)
        # The switches that change the compiled program are part of the signature.
        key = (in_tree, tuple((x.shape, x.dtype) for x in leaves), static_key, config.debug_nans, config.jit_fusion)
        entry = self._cache.get(key)
        if entry is None:
            # Traced outside the lock (the function may call other jitted functions); two
            # threads missing together both trace, and the first to store its program wins.
            entry = self._compile(in_tree, leaves, args, static)
            evicted = None
            with self._lock:
                self.misses += 1
                entry = self._cache.setdefault(key, entry)
                if len(self._cache) > self.cache_size:
                    evicted = self._cache.popitem(last=False)[1][0]
                    # Only the evicted program's fast entry goes (the others stay fast).
                    self._fast = {k: e for k, e in self._fast.items() if e[0] is not evicted}
                if self._miss_forms is not None:
                    self._note_miss(args, kwargs, static)
                if not kwargs and not self.static_argnums and all(type(a) is Array for a in args):
                    fast_key = (config.debug_nans, config.jit_fusion,
                                *[(a._value.shape, a._value.dtype) for a in args])
                    out_tree = entry[1]
                    self._fast[fast_key] = (entry[0], out_tree.num_leaves == 1 and out_tree.node_type is None,
                                            out_tree)
            if evicted is not None:
                evicted.release_buffers()   # now, not when the last reference to it goes
        else:
            self.hits += 1
            try:
                self._cache.move_to_end(key)
            except KeyError:   # another thread evicted it meanwhile; this call still has its program
                pass
        program, out_tree = entry
        return tree_unflatten(out_tree, program.run([x._value for x in leaves]))

    def _array_leaves(self, leaves: list, args: tuple, kwargs: dict, static: dict) -> list:
        """The dynamic leaves as Arrays; a leaf that is no array (a str, an object) is an
        error naming its argument and how to make that argument static."""
        try:
            return [x if isinstance(x, Array) else _core.as_array(x) for x in leaves]
        except TypeError as e:
            raise TypeError(_not_array_message(self.f, self.__name__, args, kwargs, static)) from e

    def _note_miss(self, args: tuple, kwargs: dict, static: dict) -> None:
        """Record what each argument looked like; past RETRACE_WARN_AFTER misses, warn once,
        naming the argument(s) whose changes cause them."""
        forms = {i: ("static", static[i]) if i in static else _arg_form(a) for i, a in enumerate(args)}
        forms.update({k: ("static", v) if k in static.get("__kw__", {}) else _arg_form(v) for k, v in kwargs.items()})
        self._miss_forms.append(forms)
        if len(self._miss_forms) <= RETRACE_WARN_AFTER:
            return
        history, self._miss_forms = self._miss_forms, None   # once per function
        warnings.warn(_retrace_message(self.__name__, history, self.cache_size), RetraceWarning, stacklevel=3)

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
        leaves = self._array_leaves(leaves, args, kwargs, static)
        return self._trace(in_tree, leaves, len(args), static)[0]

    def lower(self, *args: Any, **kwargs: Any) -> Program:
        """The optimised program (fused groups and buffer plan) for these arguments; print it."""
        return compile_jaxpr(self.trace(*args, **kwargs))

    def cache_info(self) -> dict:
        """Hits, misses, current size and the traced signatures."""
        with self._lock:
            keys = list(self._cache)
        return {"hits": self.hits, "misses": self.misses, "size": len(keys), "max_size": self.cache_size,
                "signatures": [(str(k[0]), [f"{np.dtype(d)}{list(s)}" for s, d in k[1]], k[2]) for k in keys]}

    def clear_cache(self) -> None:
        with self._lock:
            for program, _ in self._cache.values():
                program.release_buffers()
            self._cache.clear()
            self._fast.clear()
            self.hits = self.misses = 0


# Misses of one function, beyond which it warns (once) that it keeps retracing.
RETRACE_WARN_AFTER = 8


def _arg_form(x: Any) -> tuple:
    """What of an argument the jit signature depends on: structure, shapes and dtypes."""
    leaves, tree = tree_flatten(x)
    return ("array", tree, tuple((tuple(getattr(v, "shape", ())),
                                  str(_dtypes.canonicalize(v.dtype)) if hasattr(v, "dtype") else type(v).__name__)
                                 for v in leaves))


_RETRACE_HINTS = {"static value": "pass a number that changes as an array argument instead of a static one",
                  "shape": "pad inputs to a few fixed shapes", "dtype": "convert inputs to one dtype",
                  "structure": "keep the argument's pytree structure fixed"}


def _retrace_message(name: str, history: list[dict], cache_size: int) -> str:
    changes, kinds = [], []
    for label in dict.fromkeys(label for forms in history for label in forms):
        seen = list(dict.fromkeys(forms.get(label) for forms in history))
        if len(seen) < 2:
            continue
        if all(form is not None and form[0] == "static" for form in seen):
            kind, shown = "static value", [f"{form[1]!r:.40}" for form in seen]
        elif any(form is None or form[0] == "static" for form in seen) or len({str(f[1]) for f in seen}) > 1:
            kind, shown = "structure", []
        else:
            kind = "shape" if len({tuple(s for s, _ in form[2]) for form in seen}) > 1 else "dtype"
            shown = ["/".join(f"{dtype}{list(shape)}" for shape, dtype in form[2]) for form in seen]
        where = f"argument {label}" if isinstance(label, int) else f"keyword argument {label!r}"
        changes.append(f"{where} ({kind}: {', '.join(shown[:4])}{', ...' if len(shown) > 4 else ''})"
                       if shown else f"{where} ({kind})")
        kinds.append(kind)
    distinct = len({repr(forms) for forms in history})
    if distinct < len(history):   # evicted signatures came back: the cache is too small for them
        return (f"jit({name}) has traced and compiled {len(history)} times for {distinct} signatures that "
                f"repeat: cache_size={cache_size} is smaller than the number of signatures in use; raise it.")
    hints = "; ".join(dict.fromkeys(_RETRACE_HINTS[k] for k in kinds))
    return (f"jit({name}) has traced and compiled {len(history)} times because "
            f"{' and '.join(changes)} changed between calls. Each new signature traces and compiles again: "
            f"{hints}.")


def _not_array(leaf: Any) -> bool:
    try:
        _core.as_array(leaf)
        return False
    except TypeError:
        return True


def _not_array_message(f: Callable, name: str, args: tuple, kwargs: dict, static: dict) -> str:
    """Which dynamic argument holds a value that is no array, and the fix: make it static."""
    sig = _positional_params(f)
    params = [p.name for p in sig[0]] if sig else []
    static_kw = static.get("__kw__", {})
    dynamic = [(i, a) for i, a in enumerate(args) if i not in static]
    dynamic += [(k, v) for k, v in kwargs.items() if k not in static_kw]
    for where, value in dynamic:
        bad = [leaf for leaf in tree_leaves(value) if _not_array(leaf)]
        if not bad:
            continue
        if isinstance(where, int):
            label = f"argument {where}" + (f" ({params[where]})" if where < len(params) else "")
            fix = f"jit({name}, static_argnums=({where},))"
            if where < len(params):
                fix += f" or jit({name}, static_argnames=({params[where]!r},))"
        else:
            label, fix = f"keyword argument {where!r}", f"jit({name}, static_argnames=({where!r},))"
        kind = type(bad[0]).__name__
        kind = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} {bad[0]!r:.40}"
        what = f"is {kind}" if bad[0] is value else f"holds {kind} among its leaves"
        return (f"jit({name}): {label} {what}, which is not an array: jit traces every non-static argument as "
                f"arrays. Mark it static with {fix} (a static value must be hashable, and each new value "
                "compiles again), or pass only arrays and numbers in it")
    return f"jit({name}): an argument holds a value that is not an array"


def compile_jaxpr(jaxpr: Jaxpr) -> Program:
    """Optimise (fold, CSE, DCE), fuse (unless disabled) and plan a program."""
    optimised = passes.optimize(jaxpr)
    # Under debug_nans every primitive runs on its own, so a NaN is named precisely.
    if config.jit_fusion and not config.debug_nans:
        optimised = fusion.fuse(optimised)
    return Program(optimised)


def _positional_params(f: Callable) -> tuple[list, bool, set] | None:
    """(positional parameters, whether f takes *args, keyword names) from f's signature; None if unknown."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):   # builtins and some callables have no signature
        return None
    kinds = inspect.Parameter
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    var_args = any(p.kind == kinds.VAR_POSITIONAL for p in params)
    keywords = {p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
    if any(p.kind == kinds.VAR_KEYWORD for p in params):
        keywords = None   # any name is accepted
    return positional, var_args, keywords


def _static_params(f: Callable, nums: tuple) -> tuple[dict, set]:
    """{static position: its parameter name} and the names among them that have defaults."""
    sig = _positional_params(f)
    if sig is None:
        return {}, set()
    positional = sig[0]
    n = len(positional)
    named = {i: positional[i].name for i in nums if 0 <= i < n}
    defaults = {positional[i].name for i in named if positional[i].default is not inspect.Parameter.empty}
    return named, defaults


def _check_jit_args(f: Callable | None, nums: tuple, names: tuple, cache_size: Any) -> None:
    """Reject static_argnums/static_argnames/cache_size that jit would otherwise ignore silently."""
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in nums):
        raise TypeError(f"jit: static_argnums must be an int or a tuple of ints (argument positions), got {nums!r}")
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"jit: static_argnames must be a str or a tuple of str (parameter names), got {names!r}")
    if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
        raise ValueError(f"jit: cache_size must be a positive int (the number of traced signatures kept), got "
                         f"{cache_size!r}")
    sig = _positional_params(f) if f is not None else None
    if sig is None:
        return
    positional, var_args, keywords = sig
    name, n = getattr(f, "__name__", type(f).__name__), len(positional)
    bad = [i for i in nums if not -n <= i < n]
    if bad and not var_args:
        raise ValueError(f"jit({name}): static_argnums={nums} but {name} takes {n} positional argument"
                         f"{'s' if n != 1 else ''} ({', '.join(p.name for p in positional) or 'none'}); positions "
                         f"{bad} do not exist")
    unknown = [k for k in names if keywords is not None and k not in keywords]
    if unknown:
        raise ValueError(f"jit({name}): static_argnames={names} names {unknown}, which {name} does not take as a "
                         f"keyword (its parameters: {', '.join(sorted(keywords)) or 'none'})")


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
    # A lone int or str (or anything else not a sequence) is one entry; _check_jit_args checks the types.
    nums = tuple(static_argnums) if isinstance(static_argnums, (tuple, list)) else (static_argnums,)
    names = tuple(static_argnames) if isinstance(static_argnames, (tuple, list)) else (static_argnames,)
    _check_jit_args(f, nums, names, cache_size)
    if f is None:
        def decorate(g: Callable) -> Jitted:
            _check_jit_args(g, nums, names, cache_size)
            return Jitted(g, nums, names, cache_size)
        return decorate
    return Jitted(f, nums, names, cache_size)
