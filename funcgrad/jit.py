"""``jit``: trace a function once per signature into the IR and run the IR.

The signature is (pytree structure, shapes and dtypes of the array leaves,
static arguments).  A call with a new signature traces again (a *miss*);
otherwise the cached program runs without executing the user's Python.

Under another transform (``grad(jit(f))``, ``vmap(jit(f))``), the arguments
are tracers of that transform and ``jit`` simply calls ``f``: the outer
transform sees every primitive, so all compositions work.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import types
import warnings
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._config import config
from funcgrad._array import _mark_deleted
from funcgrad._core import Array, Tracer
from funcgrad._ir import Jaxpr, Literal, pretty_print
from funcgrad._warnings import RetraceWarning
from funcgrad.backends import get_backend
from funcgrad.compiler import codegen
from funcgrad.compiler.program import Program
from funcgrad.interpreters.tracing import trace_to_jaxpr
from funcgrad._argspec import ArgSpec, Split, signature
from funcgrad.tree_util import flatten_fun, tree_flatten, tree_leaves, tree_unflatten


class Jitted:
    """The callable returned by :func:`jit`."""

    def __init__(self, f: Callable, static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
                 cache_size: int = 64, donate_argnums: Any = None, donate_argnames: Any = None):
        functools.update_wrapper(self, f)
        # Donated arguments: their Arrays are deleted by the call, and an output may reuse their buffers.
        self.donate_argnums = _donated(donate_argnums)
        self.donate_argnames = (donate_argnames,) if isinstance(donate_argnames, str) else tuple(donate_argnames or ())
        sig = signature(f)
        params = list(sig.positional) if sig else []
        self._donate_positions = frozenset(self.donate_argnums) | {params.index(n) for n in self.donate_argnames
                                                                    if n in params}
        self._donate_keywords = frozenset(self.donate_argnames) | {params[i] for i in self.donate_argnums
                                                                   if 0 <= i < len(params)}
        self._donating = bool(self._donate_positions or self._donate_keywords)
        self._params = tuple(params)
        self._masks: dict[Any, list[bool]] = {}   # cache key -> which flat leaves are donated
        self.f = f
        # Which arguments are static, checked against f's signature (a static position may come by keyword).
        self._spec = _static_spec(static_argnums, static_argnames, f)
        self.static_argnums = self._spec.nums
        self.static_argnames = self._spec.names
        self.cache_size = cache_size
        self._cache: OrderedDict[Any, tuple[Any, Any]] = OrderedDict()
        # Same programs, keyed by avals alone, for calls with positional Arrays only:
        # (program, single output?, output tree) in one entry, read without the lock.
        self._fast: dict[Any, tuple[Any, bool, Any]] = {}
        # Misses and evictions change both tables: one thread at a time (hits take no lock).
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        # The argument forms of recent misses, until a RetraceWarning has been given.
        self._miss_forms: list[dict] | None = []

    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, Split, Any]:
        """``((dynamic args, dynamic kwargs), the split, the static part of the signature)``."""
        split = self._spec.split(args, kwargs)
        static_pos = sorted([(i, args[i]) for i in split.fixed_positions])
        static_key = (tuple(static_pos), tuple(sorted(split.fixed_kwargs.items())))
        try:
            hash(static_key)
        except TypeError:
            bad = [f"argument {k}" for k, v in static_pos + list(split.fixed_kwargs.items()) if not _hashable(v)]
            raise TypeError(f"jit({self.__name__}): static arguments must be hashable, but {', '.join(bad)} "
                            "is not (use a tuple instead of a list, or pass it as an array argument)") from None
        return (split.dynamic, split.dynamic_kwargs), split, static_key

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # @jit on a method: obj.method(x) calls the jitted function with obj first, as JAX does
        # (obj must then be static -- partial(jit, static_argnums=0) -- or a pytree of arrays).
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _core._profiler is not None and _core._profiler.enters(self):
            return _core._profiler.jit_call(self, args, kwargs)   # funcgrad.profiler: times this call
        if config.disable_jit:
            return self.f(*args, **kwargs)
        if not kwargs and not self.static_argnums:
            # The common call -- positional Arrays only -- skips the pytree machinery (one loop, no
            # comprehension: each is a function call of its own on Python 3.11).
            key = [config.debug_nans, config.jit_fusion, config.threefry_partitionable]
            values = []
            for a in args:
                if type(a) is not Array:
                    break
                v = a._value
                values.append(v)
                key.append((v.shape, v.dtype))
            else:
                entry = self._fast.get(tuple(key))
                if entry is not None:
                    self.hits += 1
                    program, single, out_tree = entry
                    if self._donating:
                        values = v = None   # no reference to a donated buffer but the program's
                        outs = self._run_donating_positional(program, args)
                    else:
                        outs = program.run(values)
                    return outs[0] if single else tree_unflatten(out_tree, outs)
            values = v = None   # (as above, for the general call below)
        (dyn_args, dyn_kw), static, static_key = self._split(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kw))
        device = None   # a device array among the leaves: the program is its backend's
        for x in leaves:
            if type(x) is not Array:
                if isinstance(x, Tracer):
                    # Inside another transform: inline (the outer transform sees every primitive).
                    return self.f(*args, **kwargs)
                if device is None and isinstance(x, Array):
                    device = x
        raw = leaves
        leaves = self._array_leaves(leaves, args, kwargs, static)
        # The switches that change the compiled program are part of the signature.
        key = (in_tree, tuple((x.shape, x.dtype) for x in leaves), static_key, config.debug_nans, config.jit_fusion,
               config.threefry_partitionable)
        if device is not None:   # and where each argument lives
            key += (tuple(type(x) for x in leaves),)
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
                    fast_key = (config.debug_nans, config.jit_fusion, config.threefry_partitionable,
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
        if self._donating:
            mask = self._masks.get(key)
            if mask is None:
                mask = self._masks[key] = self._donated_mask(args, static)
            return tree_unflatten(out_tree, self._run_donating(program, leaves, raw, mask, args, static))
        return tree_unflatten(out_tree, program.run([x._value for x in leaves]))

    def _donated_mask(self, args: tuple, static: Split) -> list[bool]:
        """Per flat dynamic leaf (``tree_flatten((dynamic args, dynamic kwargs))``'s order): donated?"""
        mask: list[bool] = []
        for i in static.positions:
            mask += [i in self._donate_positions] * len(tree_leaves(args[i]))
        kw = static.dynamic_kwargs
        for name in sorted(kw):
            mask += [name in self._donate_keywords] * len(tree_leaves(kw[name]))
        return mask

    def _leaf_label(self, n: int, args: tuple, static: Split) -> str:
        """Which argument flat dynamic leaf ``n`` belongs to (for messages)."""
        for i in static.positions:
            n -= len(tree_leaves(args[i]))
            if n < 0:
                return f"argument {i}" + (f" ({self._params[i]})" if i < len(self._params) else "")
        for name in sorted(static.dynamic_kwargs):
            n -= len(tree_leaves(static.dynamic_kwargs[name]))
            if n < 0:
                return f"keyword argument {name!r}"
        return "an argument"

    def _run_donating_positional(self, program: Any, args: tuple) -> list:
        """:meth:`_run_donating` for positional Arrays only (one leaf each)."""
        mask = [i in self._donate_positions for i in range(len(args))]
        buffers = [a._value for a in args]
        seen = set()
        for i, (a, d) in enumerate(zip(args, mask)):
            if d and id(a) not in seen:
                seen.add(id(a))
                label = f"argument {i}" + (f" ({self._params[i]})" if i < len(self._params) else "")
                _mark_deleted(a, functools.partial(_deleted_message, self, label, a.aval))
        if isinstance(program, Program):
            return program.run(buffers, mask)
        return program.run(buffers)

    def _run_donating(self, program: Any, leaves: list, raw: list, mask: list, args: tuple, static: Split) -> list:
        """Run with the donated arguments' buffers handed over: their Arrays are deleted (as JAX
        does), and the program may write outputs into their buffers."""
        # Only funcgrad Arrays are donated: a numpy array or a number was copied in anyway.
        handed = [d and isinstance(x, Array) for d, x in zip(mask, raw)]
        buffers = [x._value for x in leaves]
        seen = set()
        for n, (x, h) in enumerate(zip(raw, handed)):
            if h and id(x) not in seen:
                seen.add(id(x))
                # The message is written when the deleted array is used (not on every call).
                _mark_deleted(x, functools.partial(_deleted_message, self, functools.partial(
                    self._leaf_label, n, args, static), x.aval))
        del raw[:], leaves[:]   # no reference to a donated buffer but ``buffers``
        if isinstance(program, Program):
            return program.run(buffers, handed)
        return program.run(buffers)

    def _array_leaves(self, leaves: list, args: tuple, kwargs: dict, static: Split) -> list:
        """The dynamic leaves as Arrays; a leaf that is no array (a str, an object) is an
        error naming its argument and how to make that argument static."""
        try:
            return [x if isinstance(x, Array) else _core.as_array(x) for x in leaves]
        except TypeError as e:
            raise TypeError(_not_array_message(self.f, self.__name__, args, kwargs, static)) from e

    def _note_miss(self, args: tuple, kwargs: dict, static: Split) -> None:
        """Record what each argument looked like; past RETRACE_WARN_AFTER misses, warn once,
        naming the argument(s) whose changes cause them."""
        fixed = static.fixed
        forms = {i: ("static", fixed[i]) if i in fixed else _arg_form(a) for i, a in enumerate(args)}
        forms.update({k: ("static", v) if k in fixed else _arg_form(v) for k, v in kwargs.items()})
        self._miss_forms.append(forms)
        if len(self._miss_forms) <= RETRACE_WARN_AFTER:
            return
        history, self._miss_forms = self._miss_forms, None   # once per function
        warnings.warn(_retrace_message(self.__name__, history, self.cache_size), RetraceWarning, stacklevel=3)

    def _compile(self, in_tree: Any, leaves: list, args: tuple, static: Split) -> tuple[Any, Any]:
        if all(type(x) is Array for x in leaves):   # the host's program: its kernels need numba's runtime
            codegen.start_runtime_early()
        jaxpr, out_tree = self._trace(in_tree, leaves, static)
        program = _program(jaxpr, leaves)
        if self._donating and isinstance(program, Program):
            program.plan_donation(self._donated_mask(args, static))
        return program, out_tree

    def _trace(self, in_tree: Any, leaves: list, static: Split) -> tuple[Jaxpr, Any]:
        """The IR of ``f`` on abstract ``leaves`` (of ``(dynamic args, dynamic kwargs)``), static arguments
        in place, and its output structure."""
        call = static.bind(self.f)
        flat_fun, out_tree = flatten_fun(lambda dyn_args, dyn_kw: call(*dyn_args, **dyn_kw), in_tree)
        jaxpr, _ = trace_to_jaxpr(flat_fun, [x.aval for x in leaves])
        return jaxpr, out_tree()

    def _traced(self, args: tuple, kwargs: dict) -> tuple[Jaxpr, list]:
        """The IR for these arguments, and their dynamic leaves as arrays."""
        (dyn_args, dyn_kw), static, _ = self._split(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kw))
        leaves = self._array_leaves(leaves, args, kwargs, static)
        return self._trace(in_tree, leaves, static)[0], leaves

    def trace(self, *args: Any, **kwargs: Any) -> Jaxpr:
        """The IR this function compiles to for these arguments."""
        return self._traced(args, kwargs)[0]

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The program these arguments run (on the CPU: fused groups, buffer plan, donated
        buffers); print it."""
        program = _program(*self._traced(args, kwargs))
        if self._donating and isinstance(program, Program):
            program.plan_donation(self._donated_mask(args, self._split(args, kwargs)[1]))
        return program

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
            self._masks.clear()
            self.hits = self.misses = 0


# Misses of one function, beyond which it warns (once) that it keeps retracing.
RETRACE_WARN_AFTER = 8


def _deleted_message(jitted: Jitted, label: Any, aval: Any) -> str:
    """The error of a use of an array donated to ``jitted`` (``label``: the argument, or a function
    writing it)."""
    label = label() if callable(label) else label
    return (f"Array has been deleted with shape={aval.str_short()}: it was donated to jit({jitted.__name__}) as "
            f"{label} (donate_argnums/donate_argnames), which may have written an "
            "output into its memory. Use that call's output instead (e.g. params = step(params, x)), or do not "
            "donate this argument if it is needed after the call")


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


def _not_array_message(f: Callable, name: str, args: tuple, kwargs: dict, static: Split) -> str:
    """Which dynamic argument holds a value that is no array, and the fix: make it static."""
    sig = signature(f)
    params = sig.positional if sig else ()
    dynamic = [(i, args[i]) for i in static.positions] + list(static.dynamic_kwargs.items())
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


def _program(jaxpr: Jaxpr, leaves: Sequence[Array]) -> Any:
    """The program running ``jaxpr`` on these arguments: the compiled program of the backend of
    the device arrays among them (the host's when there are none), or, for a backend without
    ``compile``, the primitives one by one (:class:`OpByOp`).

    A program's ``run(buffers)`` takes the arguments' buffers (``x._value``) and returns
    Arrays; ``release_buffers()`` gives up the memory it keeps between calls.
    """
    device = next((x for x in leaves if type(x) is not Array), None)
    backend = get_backend("cpu") if device is None else type(device).backend
    if backend.compile is not None:
        return backend.compile(jaxpr)
    return OpByOp(jaxpr, backend, [_core._wrap if type(x) is Array else type(x).backend.wrap for x in leaves])


class OpByOp:
    """A traced program run primitive by primitive where its arguments live
    (``funcgrad._core.apply_primitive``): ``jit`` on a backend that does not compile.

    The function is traced once per signature; each call replays its
    primitives. The program's constants (arrays the function closed over or
    made while it was traced) are moved to ``backend`` once, as ``jit`` does
    on every backend: made eagerly, they would have been made beside the
    device arrays they meet.
    """

    def __init__(self, jaxpr: Jaxpr, backend: Any, wraps: Sequence[Callable[[Any], Array]]):
        self.jaxpr = jaxpr
        self.wraps = wraps   # per argument: its buffer as the array it was (host or device)
        self.consts = [backend.to_device(c) if type(c) is Array else c for c in jaxpr.consts]

    def run(self, buffers: Sequence[Any]) -> list[Array]:
        env: dict[int, Any] = {id(v): c for v, c in zip(self.jaxpr.constvars, self.consts)}
        for v, wrap, b in zip(self.jaxpr.invars, self.wraps, buffers):
            env[id(v)] = wrap(b)

        def read(x: Any) -> Any:
            return x.value if isinstance(x, Literal) else env[id(x)]

        for eqn in self.jaxpr.eqns:
            out = _core.apply_primitive(eqn.prim, [read(x) for x in eqn.inputs], eqn.params)
            for v, o in zip(eqn.outvars, out if eqn.prim.multiple_results else [out]):
                env[id(v)] = o
        return [_core.as_array(read(v)) for v in self.jaxpr.outvars]

    def release_buffers(self) -> None:
        """Nothing is kept between calls."""

    def __repr__(self) -> str:
        return pretty_print(self.jaxpr)


def _static_spec(static_argnums: Any, static_argnames: Any, f: Callable | None = None) -> ArgSpec:
    """jit's static arguments, checked: their types, and with ``f`` its signature (positions it does
    not take, names it does not know)."""
    return ArgSpec("jit", "static_argnums", static_argnums, static=True, names=static_argnames,
                   names_option="static_argnames", fun=f, check_signature=True)


def _check_cache_size(cache_size: Any) -> None:
    if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
        raise ValueError(f"jit: cache_size must be a positive int (the number of traced signatures kept), got "
                         f"{cache_size!r}")


def _hashable(v: Any) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def _donated(donate_argnums: Any) -> tuple[int, ...]:
    if donate_argnums is None:
        return ()
    nums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    if any(not isinstance(i, int) or isinstance(i, bool) for i in nums):
        raise TypeError(f"jit: donate_argnums must be an int or a sequence of ints, got {donate_argnums!r}")
    return nums


_SHARDING_OPTIONS = ("in_shardings", "out_shardings", "device", "backend")


def jit(f: Callable | None = None, *, static_argnums: int | Sequence[int] | None = (),
        static_argnames: str | Sequence[str] | None = (), donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Sequence[str] | None = None, keep_unused: bool = False, inline: bool = False,
        compiler_options: dict | None = None, cache_size: int = 64, **options: Any) -> Any:
    """Compile ``f``: trace once per signature, then run the cached program.

    >>> @jit
    ... def step(params, x):
    ...     return fnp.tanh(x @ params["w"])
    >>> params, x = {"w": fnp.ones((2, 2))}, fnp.ones((1, 2))
    >>> step(params, x)
    Array([[0.9640, 0.9640]], dtype=float32)
    >>> step.cache_info()["misses"]
    1

    Python control flow on traced arguments raises ConcretizationError:
    mark such arguments static (``static_argnums``/``static_argnames``).

    ``donate_argnums``/``donate_argnames`` donate arguments as in JAX: the call deletes the donated
    funcgrad Arrays (any later use raises ``RuntimeError: Array has been deleted``;
    ``x.is_deleted()`` is True) and may write an output of the same shape and dtype into a donated
    buffer, so ``params = step(params, x)`` keeps one copy of the parameters. A donated numpy array
    or number is left alone (it was copied in). ``keep_unused``,
    ``inline`` and ``compiler_options`` are accepted and have no effect; ``in_shardings``,
    ``out_shardings``, ``device`` and ``backend`` must be left unset (one host device). As a
    decorator on a method, ``self`` is the first argument: use ``partial(jit, static_argnums=0)``
    for a hashable ``self``. ``fg.disable_jit()`` runs jitted functions eagerly.
    """
    for name, value in options.items():
        if name not in _SHARDING_OPTIONS:
            raise TypeError(f"jit() got an unexpected keyword argument {name!r}")
        if value is not None:
            raise NotImplementedError(f"jit: {name}={value!r:.60} is not supported (funcgrad runs on one host "
                                      "device; place arrays with fg.device_put instead); leave it unset")
    static_argnums = () if static_argnums is None else static_argnums
    static_argnames = () if static_argnames is None else static_argnames
    _static_spec(static_argnums, static_argnames)   # the types, now (the decorator form has no f yet)
    _check_cache_size(cache_size)
    _donated(donate_argnums)
    if f is None:
        def decorate(g: Callable) -> Jitted:
            return Jitted(g, static_argnums, static_argnames, cache_size, donate_argnums, donate_argnames)
        return decorate
    return Jitted(f, static_argnums, static_argnames, cache_size, donate_argnums, donate_argnames)


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Any:
    """Context manager: inside it, jitted functions run eagerly (op by op, Python control flow
    on concrete values allowed), as ``jax.disable_jit``; for debugging with print and pdb.

    >>> step = jit(lambda x: x * 2 if x.sum() > 0 else x)    # Python control flow on values
    >>> with fg.disable_jit():
    ...     step(fnp.ones(2))
    Array([2., 2.], dtype=float32)
    """
    before = config.disable_jit
    config.update("disable_jit", disable)
    try:
        yield
    finally:
        config.update("disable_jit", before)


@contextlib.contextmanager
def ensure_compile_time_eval() -> Any:
    """Context manager (``jax.ensure_compile_time_eval``): operations on concrete values run now.

    funcgrad already evaluates operations whose inputs are all concrete while it traces for jit
    (only values derived from traced arguments are staged), so this context changes nothing; it
    is here so programs written for JAX run unchanged.

    >>> @jit
    ... def f(x):
    ...     with fg.ensure_compile_time_eval():
    ...         n = fnp.arange(4).sum()      # concrete while tracing
    ...     return x * int(n)
    >>> f(fnp.ones(2))
    Array([6., 6.], dtype=float32)
    """
    yield
