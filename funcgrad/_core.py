"""The core: immutable arrays, primitives, ``bind`` and the trace stack.

Every operation funcgrad performs is a :class:`Primitive` applied with
:func:`bind`.  ``bind`` looks at its arguments: if none is a tracer it runs
the primitive's implementation on numpy buffers right away (eager mode);
otherwise it hands the primitive to the trace of the highest-level tracer,
which may differentiate it (jvp/vjp), batch it (vmap) or record it into the
IR (jit/make_jaxpr).  Transforms nest by levels, as in JAX's Autodidax: each
active transform owns a :class:`MainTrace` on a stack, and a tracer belongs
to exactly one of them.  There is no global tape: a reverse-mode transform
keeps its own record only for the duration of one call.
"""
from __future__ import annotations

import os
import sys
import threading
import warnings as _warnings_mod
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._config import config
from funcgrad._dtypes import ShapedArray, describe
from funcgrad._warnings import _filtered_list as _float_warnings_filtered_in, float_warnings_filtered
# The array half of the core; re-exported because every layer above imports it from here
# (and pickles written before the split name funcgrad._core._array_from_numpy).
from funcgrad._array import (Array, _array_from_numpy, _freeze, _immutable_setitem,  # noqa: F401
                             _int_overflow_message, _new_array, _wrap, commit_to_host, is_committed,
                             to_numpy_input)

# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class TracerLeakError(RuntimeError):
    """A tracer was used after the transform that created it returned.

    >>> leaked = []
    >>> _ = fg.jit(lambda x: leaked.append(x) or x)(fnp.ones(2))
    >>> try:
    ...     leaked[0] + 1
    ... except fg.TracerLeakError as e:
    ...     print(type(e).__name__)
    TracerLeakError
    """


class ConcretizationError(TypeError):
    """Python needed a concrete value (``if``, ``bool()``, ``int()``) from a traced one.

    >>> try:
    ...     fg.jit(lambda x: 1.0 if x > 0 else 0.0)(fnp.ones(()))
    ... except fg.ConcretizationError as e:
    ...     print(type(e).__name__)
    ConcretizationError
    """


class TracerArrayConversionError(TypeError):
    """A traced value was about to become a numpy array (``np.asarray(x)``, a numpy function
    that funcgrad.numpy lacks); numpy would treat it as a constant the transform cannot follow.

    >>> try:
    ...     fg.jit(lambda x: np.asarray(x))(fnp.ones(2))
    ... except fg.TracerArrayConversionError as e:
    ...     print(type(e).__name__)
    TracerArrayConversionError
    """


# The user-facing name of the transform behind each trace type.
_TRANSFORM_NAMES = {"VJPTrace": "grad", "JVPTrace": "jvp", "BatchTrace": "vmap", "JaxprTrace": "jit"}


def transform_name(tracer: "Tracer") -> str:
    """``grad``, ``jvp``, ``vmap`` or ``jit``: the transform that owns ``tracer``."""
    name = type(tracer._trace).__name__
    return _TRANSFORM_NAMES.get(name, name)


def tracer_conversion_error(tracer: "Tracer", what: str = "np.asarray() (numpy's __array__ conversion)",
                            detail: str = "") -> TracerArrayConversionError:
    """The error for ``what`` turning ``tracer`` into a numpy array (``detail``: why no funcgrad route)."""
    name = transform_name(tracer)
    return TracerArrayConversionError(
        f"{what} would turn the traced array {describe(tracer)} inside {name} into a numpy array, at "
        f"{user_source_line()}{detail}. numpy would treat the value as a constant that {name} cannot "
        "follow, so the result would be silently wrong. Use funcgrad.numpy on traced values (fnp.sin(x), "
        "not np.sin(np.asarray(x)); numpy ufuncs and functions that funcgrad.numpy also has, such as "
        "np.sin or np.sum, dispatch there by themselves); write fnp.stop_gradient(x) for a value meant "
        "as a constant; and convert to numpy only outside the transform, on its results.")


def user_source_line() -> str:
    """``file:line (function)`` of the innermost frame outside funcgrad."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# The tests live outside the package, so they count as user code.

# --------------------------------------------------------------------------
# Primitives
# --------------------------------------------------------------------------


class Primitive:
    """One operation with all of its rules declared together.

    * ``impl(*values, **params)``: numpy reference implementation.
    * ``abstract_eval(*avals, **params) -> aval | list[aval]``: shape/dtype rule.
    * ``jvp(primals, tangents, **params) -> (out, tangent_out)``: forward mode
      (tangents may be ``None`` = symbolic zero).
    * ``vjp(cts, primals, outs, needs, **params) -> input cotangents``:
      reverse mode (``needs[i]`` says whether input i wants one).
    * ``batch(values, dims, axis_size, **params) -> (out, out_dim)``: vmap.
    * ``vjp_forward(primals, needs, **params) -> (outs, backward)``
      (optional): reverse mode's forward pass for primitives whose vjp
      needs values the plain forward pass does not keep (a loop's carries);
      ``backward(cts)`` then replaces ``vjp``.

    Rules are written with primitives, so derivatives can be traced again.

    The primitive is also the only registry of what backends and compilers
    know about it, keyed by the object (never by its name):

    * ``impls[backend]``: the implementation on that backend's buffers,
      registered from the backend's folder with :func:`register_impl`
      (``impl`` is the host's: the block's numpy reference until the CPU
      backend registers a faster one);
    * ``lowerings[compiler]``: how a compiler emits it inside a generated
      kernel (:func:`register_lowering`);
    * ``traits``: properties compilers rely on (:func:`add_traits`), such
      as ``"view"`` (the host impl may return a view of an input) or
      ``"writes_out"`` (the host impl accepts ``out=``).
    """

    __slots__ = ("name", "impl", "abstract_eval", "jvp", "vjp", "vjp_forward", "batch", "multiple_results",
                 "impls", "lowerings", "traits", "__weakref__")

    def __init__(self, name: str, *, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        self.impl: Callable[..., Any] | None = None
        self.abstract_eval: Callable[..., Any] | None = None
        self.jvp: Callable[..., Any] | None = None
        self.vjp: Callable[..., Any] | None = None
        self.vjp_forward: Callable[..., Any] | None = None
        self.batch: Callable[..., Any] | None = None
        self.impls: dict[str, Callable[..., Any]] = {}
        self.lowerings: dict[str, Any] = {}
        self.traits: frozenset[str] = frozenset()

    def bind(self, *args: Any, **params: Any) -> Any:
        return bind(self, args, params)

    def __repr__(self) -> str:
        return self.name


def register_impl(prim: Primitive, backend: str, impl: Callable[..., Any]) -> None:
    """Make ``impl`` ``prim``'s implementation on ``backend``'s buffers.

    ``"cpu"`` also makes it the host implementation that eager evaluation,
    compiled programs and constant folding run; the block's reference
    implementation stays reachable as ``prim.impls["reference"]``.
    """
    if backend == "cpu":
        prim.impls.setdefault("reference", prim.impl)
        prim.impl = impl
    prim.impls[backend] = impl


def register_lowering(prim: Primitive, compiler: str, lowering: Any) -> None:
    """Tell ``compiler`` how to emit ``prim`` inside a generated kernel."""
    prim.lowerings[compiler] = lowering


def add_traits(prim: Primitive, *traits: str) -> None:
    """Declare properties of ``prim`` that compilers rely on (see :class:`Primitive`)."""
    prim.traits = prim.traits | frozenset(traits)


# --------------------------------------------------------------------------
# The trace stack
# --------------------------------------------------------------------------


class MainTrace:
    """One active transform: its level on the stack, its trace type, its data."""

    __slots__ = ("level", "trace_type", "data", "alive")

    def __init__(self, level: int, trace_type: type, data: Any):
        self.level = level
        self.trace_type = trace_type
        self.data = data
        self.alive = True


class Trace:
    """How one transform interprets primitives applied to its tracers."""

    __slots__ = ("main",)

    def __init__(self, main: MainTrace):
        self.main = main

    def pure(self, value: Any) -> "Tracer":
        raise NotImplementedError

    lift = pure

    def full_raise(self, value: Any) -> "Tracer":
        if not isinstance(value, Tracer):
            return self.pure(value)
        level = value._trace.main.level
        if value._trace.main is self.main:
            return value
        if level < self.main.level:
            return self.lift(value)
        if not value._trace.main.alive:
            raise _leak_error(value)
        raise TracerLeakError(
            f"a tracer of a transform at level {level} reached the transform at level {self.main.level}; "
            "this usually means a tracer escaped through a global or a closure")

    def process_primitive(self, prim: Primitive, args: Sequence[Any], params: dict) -> Any:
        """Apply ``prim`` to ``args`` (this trace's tracers, lower-level values, constants)."""
        raise NotImplementedError

    def process_custom_vjp(self, call: "CustomVJPCall", tracers: list) -> list:
        raise NotImplementedError

    def process_custom_jvp(self, call: "CustomJVPCall", tracers: list) -> list:
        # A transform without a rule of its own for it (none: the function itself).
        return list(call.fun(*tracers))

    def process_checkpoint(self, fun: Callable, tracers: list) -> list:
        # Outside reverse mode, checkpoint is the function itself.
        return fun(*tracers)


_TRANSFORMS: dict[str, Callable[..., Any]] = {}


def register_transform(name: str, fun: Callable[..., Any]) -> None:
    """Make a flat transform (``"jvp"``: ``jvp_flat``, ``"vjp"``: ``vjp_flat``) reachable from rules.

    A primitive whose derivative is that of a composite function (see
    ``primitives/_nn_rules.py``) differentiates it through here: the
    interpreters register themselves, so the primitives never import them.
    """
    _TRANSFORMS[name] = fun


def transform(name: str) -> Callable[..., Any]:
    """The flat transform registered as ``name`` (see :func:`register_transform`)."""
    return _TRANSFORMS[name]


class _ThreadState(threading.local):
    """The transform state of one Python thread.

    Transforms running in different threads must not see each other: a
    tracer's level is its transform's depth in *this thread's* stack, and a
    shared stack let one thread's push/pop renumber another's nested grads
    (silently wrong derivatives).  ``threading.local`` costs one attribute
    lookup per push/pop; eager ``bind`` never reads it.
    """

    def __init__(self) -> None:
        self.trace_stack: list[MainTrace] = []   # active transforms, innermost last
        self.backward_context: list = []         # record nodes whose vjp rule runs (debug_nans)


_thread_state = _ThreadState()


def push_main(trace_type: type, data: Any = None) -> MainTrace:
    """Push a transform onto this thread's stack; pair with :func:`pop_main` in a ``finally``."""
    stack = _thread_state.trace_stack
    main = MainTrace(len(stack) + 1, trace_type, data)
    stack.append(main)
    return main


def pop_main(main: MainTrace) -> None:
    """End a transform: its tracers count as leaked from now on."""
    main.alive = False
    _thread_state.trace_stack.pop()


def trace_stack() -> list[MainTrace]:
    """This thread's active transforms, innermost last (read-only use)."""
    return _thread_state.trace_stack


class new_main:
    """Push a transform onto the stack for the duration of a ``with`` block.

    (A class rather than a generator-based context manager: it is entered on
    every vmap/jvp call; grad's hot path uses push_main/pop_main directly.)
    """

    __slots__ = ("main",)

    def __init__(self, trace_type: type, data: Any = None):
        self.main = push_main(trace_type, data)

    def __enter__(self) -> MainTrace:
        return self.main

    def __exit__(self, *exc: Any) -> None:
        pop_main(self.main)


def _leak_error(tracer: "Tracer") -> TracerLeakError:
    return TracerLeakError(
        f"a {type(tracer).__name__} ({describe(tracer)}) was used after the transform that created it "
        "returned (a leaked tracer). Values computed inside grad/vmap/jit must be returned from the "
        "function, not stored in globals, closures or attributes.")


class Tracer:
    """A stand-in for an array while a transform runs; has the array API."""

    __slots__ = ("_trace",)
    __array_priority__ = 1000

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def size(self) -> int:
        return self.aval.size

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def concrete_value(self) -> Any:
        """The value behind the tracer, if this transform knows it (eager jvp/grad)."""
        raise ConcretizationError(self._concretization_message())

    def _concretization_message(self) -> str:
        return (f"a concrete value was needed from a traced array {describe(self)} "
                f"inside {type(self._trace).__name__}")

    def __bool__(self) -> bool:
        return bool(self.concrete_value())

    def __int__(self) -> int:
        return int(self.concrete_value())

    def __float__(self) -> float:
        return float(self.concrete_value())

    def __index__(self) -> int:
        return int(self.concrete_value())

    def item(self) -> Any:
        return self.concrete_value().item()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Never a silent constant, even where the value is known (grad/jvp): numpy
        # would drop the derivative. bool()/float()/.item() stay concrete on purpose.
        raise tracer_conversion_error(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}<{describe(self)}>"

    def __hash__(self) -> int:
        raise TypeError("funcgrad arrays and tracers are unhashable")


Tracer.__setitem__ = _immutable_setitem  # type: ignore[method-assign]


def as_array(x: Any) -> Any:
    """``x`` as an Array (or tracer); Python scalars become 0-d arrays of default dtype."""
    if isinstance(x, (Array, Tracer)):
        return x
    if isinstance(x, bool):
        return Array(_freeze(np.asarray(x)))
    if isinstance(x, int):
        try:
            return Array(_freeze(np.asarray(x, dtype=_dtypes.int_)))
        except OverflowError:
            raise OverflowError(_int_overflow_message(x, _dtypes.int_)) from None
    if isinstance(x, float):
        return Array(_freeze(np.asarray(x, dtype=_dtypes.float_)))
    return Array(to_numpy_input(x))


class PrimalTracer(Tracer):
    """A tracer that carries the real value it stands for (``primal``): jvp and vjp.

    Shape and dtype are read straight from the primal (they are on every hot
    path), and Python control flow works on the concrete value.
    """

    __slots__ = ("primal",)

    @property
    def aval(self) -> ShapedArray:
        return get_aval(self.primal)

    @property
    def shape(self) -> tuple[int, ...]:
        p = self.primal
        return p._value.shape if type(p) is Array else shape_of_value(p)

    @property
    def dtype(self) -> np.dtype:
        p = self.primal
        return p._value.dtype if type(p) is Array else dtype_of_value(p)

    @property
    def ndim(self) -> int:
        p = self.primal
        return p._value.ndim if type(p) is Array else len(shape_of_value(p))

    def concrete_value(self) -> Any:
        p = self.primal
        return p.concrete_value() if isinstance(p, Tracer) else p


# --------------------------------------------------------------------------
# bind and eager evaluation
# --------------------------------------------------------------------------


def bind(prim: Primitive, args: Sequence[Any], params: dict) -> Any:
    """Apply ``prim`` to ``args``: evaluate eagerly or hand it to a transform."""
    # The one fast path of eager mode: every argument a host Array or a Python
    # scalar, one array out, no debug_nans. It is apply_primitive inlined for
    # that case; set_fast_path(False) routes everything through apply_primitive.
    values = []
    for a in args:
        if type(a) is Array:
            values.append(a._value)
        elif isinstance(a, (bool, int, float)):
            values.append(a)
        else:
            break
    else:
        if not _fast_path[0]:
            return apply_primitive(prim, args, params)
        if _warnings_mod.filters is not _float_warnings_filtered_in[0]:
            float_warnings_filtered()
        try:
            out = prim.impl(*values, **params) if params else prim.impl(*values)
        except (ValueError, TypeError, IndexError, OverflowError) as e:
            raise impl_error(prim, values, params, e) from e
        if type(out) is np.ndarray and out.dtype.itemsize != 8 and not prim.multiple_results and not config.debug_nans:
            out.setflags(False)   # write=False, passed positionally (no keyword parsing)
            result = _new_array(Array)
            result._value = out
            return result
        return _finish_impl(prim, values, out)
    top = None   # the tracer of the innermost transform among the arguments
    for a in args:
        if isinstance(a, Tracer) and (top is None or a._trace.main.level > top._trace.main.level):
            top = a
    if top is None:
        return apply_primitive(prim, args, params)
    trace = top._trace
    if not trace.main.alive:
        raise _leak_error(top)
    return trace.process_primitive(prim, args, params)


_fast_path = [True]


def set_fast_path(enabled: bool) -> bool:
    """Switch bind's inlined eager fast path on or off; returns the previous setting.

    With it off every eager primitive goes through :func:`apply_primitive`
    (the tests run the op table both ways: the two must agree).
    """
    previous = _fast_path[0]
    _fast_path[0] = bool(enabled)
    return previous


# Primitives that an active transform may claim even when no argument is one of its tracers:
# ``claim(prim, args, params)`` returns the result, or NotImplemented to evaluate eagerly. (A
# collective over the name of an active vmap belongs to that vmap; the vmap turns the inlined
# fast path of ``bind`` off while it runs, so every eager evaluation comes here.)
EAGER_CLAIMS: dict[Primitive, Callable[..., Any]] = {}


def apply_primitive(prim: Primitive, args: Sequence[Any], params: dict) -> Any:
    """Evaluate ``prim`` on concrete arguments where they live: the one evaluation path.

    Host Arrays, Python scalars and user numpy values run the host
    implementation ``prim.impl``; a device array among the arguments runs
    the primitive on that array's backend (its ``prim.impls[name]``).
    Results are wrapped as immutable arrays and checked under debug_nans.
    """
    if EAGER_CLAIMS:
        claim = EAGER_CLAIMS.get(prim)
        if claim is not None:
            out = claim(prim, args, params)
            if out is not NotImplemented:
                return out
    values = []
    for a in args:
        if type(a) is Array:
            values.append(a._value)
        elif isinstance(a, (bool, int, float)):
            values.append(a)
        elif isinstance(a, Array):   # an Array subclass: a device array, so the primitive runs there
            return _apply_on_device(prim, args, params)
        else:
            values.append(to_numpy_input(a))
    if _profiler is None:
        return _finish_impl(prim, values, run_impl(prim, prim.impl, values, params))
    return _finish_impl(prim, values, _profiler.eager(prim, prim.impl, values, params))


# The profiler's hook (``funcgrad.profiler``), None when no thread profiles. While one does,
# bind's fast path is off (``set_fast_path``), so eager work reaches apply_primitive and this
# single check: profiling costs nothing when it is off.
_profiler: Any = None


def run_impl(prim: Primitive, impl: Callable[..., Any], values: Sequence[Any], params: dict) -> Any:
    """``impl(*values, **params)`` on raw buffers; a failure becomes an error naming ``prim``.

    Every caller of an implementation goes through here (eager evaluation,
    compiled programs, constant folding, device arrays).
    """
    float_warnings_filtered()
    try:
        return impl(*values, **params) if params else impl(*values)
    except (ValueError, TypeError, IndexError, OverflowError) as e:
        raise impl_error(prim, values, params, e) from e


def _finish_impl(prim: Primitive, values: list, out: Any) -> Any:
    """Wrap what an implementation returned; check it for NaNs under debug_nans."""
    if prim.multiple_results:
        outs = [_wrap(o) for o in out]
        if config.debug_nans:
            check_nans(prim, values, outs)
        return outs
    result = _wrap(out)
    if config.debug_nans:
        check_nans(prim, values, [result])
    return result


def _apply_on_device(prim: Primitive, args: Sequence[Any], params: dict) -> Any:
    """Evaluate ``prim`` on the backend of the device array among ``args``.

    A backend's array type subclasses Array and names its backend in the
    class attribute ``backend`` (see ``funcgrad.backends``). JAX's rule for
    placement: host data that nobody placed (arrays made by funcgrad
    functions, user numpy arrays, Python scalars: "uncommitted") moves to the
    device of the device arrays it meets; host arrays placed with
    ``fg.device_put(x, "cpu")`` ("committed") and arrays on two devices
    raise a ValueError naming both.
    """
    home = next(a for a in args if isinstance(a, Array) and type(a) is not Array)
    for a in args:
        if isinstance(a, Array) and a.ndim and a.device != home.device and (type(a) is not Array or is_committed(a)):
            raise ValueError(
                f"{prim.name}: arguments live on different devices: {describe(home)} on '{home.device}' and "
                f"{describe(a)} on '{a.device}' (placed there with fg.device_put). Move one with "
                f"fg.device_put(x, '{home.device}') (or '{a.device}').")
    backend = type(home).backend
    values = [backend.device_value(a) for a in args]
    impl = prim.impls.get(backend.name)
    if impl is None:
        impl = backend.missing_impl(prim)   # raises, unless the user asked for host fallback
    out = run_impl(prim, impl, values, params) if _profiler is None else _profiler.eager(prim, impl, values, params)
    outs = [backend.wrap(o) for o in out] if prim.multiple_results else [backend.wrap(out)]
    if config.debug_nans:
        check_nans(prim, [backend.host_value(v) for v in values], [backend.to_host(o) for o in outs])
    return outs if prim.multiple_results else outs[0]


def _impl_error_message(prim: Primitive, values: Sequence[Any], params: dict, err: Exception) -> str:
    if str(err).startswith(f"{prim.name}: "):
        return str(err)   # the implementation already explained itself
    shown = {k: v for k, v in params.items() if not callable(v)}
    args = ", ".join(describe(v) for v in values)
    extra = f" with {shown}" if shown else ""
    if _is_ufunc_type_error(err):
        return f"{prim.name}: not supported for the input types ({args}){extra} (numpy: {err})"
    if isinstance(err, OverflowError):   # a Python int that does not fit in the array's integer dtype
        return (f"{prim.name}: invalid arguments ({args}){extra}: {err}. Use a float, convert the array to a "
                "wider dtype, or enable 64-bit types with fg.config.update('enable_x64', True)")
    return f"{prim.name}: invalid arguments ({args}){extra}: {err}"


def _is_ufunc_type_error(err: Exception) -> bool:
    # numpy's "ufunc 'x' did not contain a loop with signature matching types" family.
    return isinstance(err, TypeError) and type(err).__name__.startswith(("UFunc", "_UFunc"))


def impl_error(prim: Primitive, values: Sequence[Any], params: dict, err: Exception) -> Exception:
    """The exception to raise (``from err``) for ``err`` out of ``prim``'s implementation.

    It keeps ``err``'s type where that type takes a single message (so
    ``except ValueError`` still works) and names the primitive, shapes and
    dtypes.  Exception classes with other constructors (numpy's private
    ``_UFuncNoLoopError`` takes a ufunc and dtypes) give their nearest
    built-in base class instead: building the error must never fail itself.
    """
    message = _impl_error_message(prim, values, params, err)
    if not _is_ufunc_type_error(err):
        try:
            new = type(err)(message)
            if str(new) == message:
                return new
        except Exception:  # noqa: BLE001 -- any constructor failure means: use the builtin base
            pass
    base = next(c for c in type(err).__mro__ if c.__module__ == "builtins" and issubclass(c, Exception))
    return base(message)


# --------------------------------------------------------------------------
# debug_nans
# --------------------------------------------------------------------------

def backward_context() -> list:
    """This thread's record nodes whose vjp rules are running, innermost last.

    While a reverse-mode transform walks its record backwards, it names here
    the forward operation whose vjp rule is running, so a NaN raised inside a
    derivative can point at the user's line that created it.
    """
    return _thread_state.backward_context


def _describe_node(node: Any) -> str:
    name = node.prim if isinstance(node.prim, str) else node.prim.name
    return f"'{name}' created at {node.where}" if node.where else f"'{name}'"


def describe_backward_context() -> str | None:
    """The forward operation whose vjp rule is running in this thread, as
    "'sqrt' created at model.py:12 (loss)", or None outside a backward pass."""
    context = _thread_state.backward_context
    return _describe_node(context[-1]) if context else None


def check_nans(prim: Primitive, values: Sequence[Any], outs: Sequence[Array], source: str | None = None,
               backward: str | None = None) -> None:
    """Raise FloatingPointError if ``prim`` made a NaN that was not in its inputs.

    ``source`` (the user's line) and ``backward`` (the forward operation whose
    derivative this is, see ``describe_backward_context``) default to the
    present; a jitted program passes what was recorded when it was traced.
    """
    for out in outs:
        v = out._value
        if v.dtype.kind in "fc" and np.isnan(v).any():
            if any(isinstance(x, np.ndarray) and x.dtype.kind in "fc" and np.isnan(x).any() for x in values):
                continue  # NaN came in: the first producer already reported (or was user input)
            backward = backward or describe_backward_context()
            where = f" in the backward pass of {backward}" if backward else ""
            raise FloatingPointError(
                f"debug_nans: primitive '{prim.name}' produced a NaN{where} "
                f"(inputs: {', '.join(describe(x) for x in values)}) at {source or user_source_line()}. "
                + (_BACKWARD_NAN_HINT if backward else _forward_nan_hint(prim, values, v)))


_BACKWARD_NAN_HINT = (
    "The forward values were not NaN: the derivative is. A NaN in a gradient through fnp.where often comes "
    "from the branch not taken (e.g. where(x > 0, sqrt(x), 0) at x = 0, where sqrt's derivative is inf and "
    "inf * 0 = NaN): use the double-where pattern where(x > 0, sqrt(where(x > 0, x, 1)), 0).")


def _forward_nan_hint(prim: Primitive, values: Sequence[Any], out: np.ndarray) -> str:
    """Why a forward NaN came from NaN-free inputs: the input values at its first position."""
    first = tuple(int(i) for i in np.argwhere(np.isnan(out))[0])
    shown = []
    for x in values:
        if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
            x = np.asarray(x)
            if x.shape == out.shape:
                shown.append(repr(x[first].item()))
            elif x.ndim == 0:
                shown.append(repr(x.item()))
    at = f" at index {first}" if first else ""
    inputs = f", from the input value{'s' if len(shown) > 1 else ''} {', '.join(shown)}" if shown else ""
    infinite = any(isinstance(x, np.ndarray) and x.dtype.kind in "fc" and np.isinf(x).any() for x in values)
    cause = ("inputs that were already infinite (inf - inf, 0 * inf, inf / inf)" if infinite
             else f"inputs outside the domain of '{prim.name}'")
    return (f"The first NaN is{at}{inputs}: a NaN computed from {cause}. Keep the inputs in range "
            "(clip them, or guard them: a value that fnp.where later discards must be replaced before the "
            "operation too, as in where(x > 0, log(where(x > 0, x, 1)), 0)).")


# --------------------------------------------------------------------------
# custom_vjp and custom_jvp calls (the primitive-like operations behind funcgrad.custom_vjp/custom_jvp)
# --------------------------------------------------------------------------


class CustomVJPCall:
    """A function with a user-supplied reverse-mode rule, on flat arguments.

    ``fun(*xs) -> outs``, ``fwd(*xs) -> (outs, residuals)``,
    ``bwd(residuals, cts) -> input cts`` (all flat lists).
    """

    __slots__ = ("name", "fun", "fwd", "bwd")

    def __init__(self, name: str, fun: Callable, fwd: Callable, bwd: Callable):
        self.name, self.fun, self.fwd, self.bwd = name, fun, fwd, bwd

    def bind(self, *args: Any) -> list:
        top = _top_tracer(args)
        if top is None:
            return list(self.fun(*args))
        trace = top._trace
        return trace.process_custom_vjp(self, [trace.full_raise(a) for a in args])


class CustomJVPCall:
    """A function with a user-supplied forward-mode rule, on flat arguments.

    ``fun(*xs) -> outs``; ``jvp(primals, tangents) -> (outs, tangent_outs)``
    (all flat lists; every tangent an array, zeros where the input's is zero).
    """

    __slots__ = ("name", "fun", "jvp")

    def __init__(self, name: str, fun: Callable, jvp: Callable):
        self.name, self.fun, self.jvp = name, fun, jvp

    def bind(self, *args: Any) -> list:
        top = _top_tracer(args)
        if top is None:
            return list(self.fun(*args))
        trace = top._trace
        return trace.process_custom_jvp(self, [trace.full_raise(a) for a in args])


def bind_checkpoint(fun: Callable, args: Sequence[Any]) -> list:
    """Apply a rematerialised (checkpointed) function of flat arguments."""
    top = _top_tracer(args)
    if top is None:
        return list(fun(*args))
    trace = top._trace
    return list(trace.process_checkpoint(fun, [trace.full_raise(a) for a in args]))


def _top_tracer(args: Sequence[Any]) -> Tracer | None:
    top = None
    for a in args:
        if isinstance(a, Tracer) and (top is None or a._trace.main.level > top._trace.main.level):
            top = a
    if top is not None and not top._trace.main.alive:
        raise _leak_error(top)
    return top


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Array:
    """A concrete array of ``x``'s shape (and dtype, unless given) holding ``fill_value``, on ``x``'s device.

    Transforms make their zero tangents, zero cotangents and seeds here: a
    constant in every transform, and "like" a device array means on its
    device too (values of two devices never meet).
    """
    aval = get_aval(x)
    dtype = aval.dtype if dtype is None else _dtypes.canonicalize(dtype)
    value = np.zeros(aval.shape, dtype) if fill_value == 0 else np.full(aval.shape, fill_value, dtype)
    out = Array(_freeze(value))
    if isinstance(x, Array) and type(x) is not Array:
        out = type(x).backend.to_device(out)
    return out


def zeros_like(x: Any, dtype: Any = None) -> Array:
    """Concrete zeros of ``x``'s shape and dtype on its device (see :func:`full_like`)."""
    return full_like(x, 0, dtype)


def shape_of_value(x: Any) -> tuple[int, ...]:
    return () if isinstance(x, (bool, int, float)) else x.shape


def dtype_of_value(x: Any) -> np.dtype:
    return _dtypes.result_type(x) if isinstance(x, (bool, int, float)) else x.dtype


def get_aval(x: Any) -> ShapedArray:
    """The abstract value of an array, tracer, numpy array or scalar."""
    if isinstance(x, (Array, Tracer)):
        return x.aval
    if isinstance(x, (bool, int, float)):
        return ShapedArray((), _dtypes.result_type(x))
    arr = np.asarray(x)
    return ShapedArray(arr.shape, _dtypes.canonicalize(arr.dtype))
