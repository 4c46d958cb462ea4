"""The core: primitives, ``bind`` and eager evaluation, and every name of the core's parts.

Every operation funcgrad performs is a :class:`Primitive` applied with
:func:`bind`.  ``bind`` looks at its arguments: if none is a tracer it runs
the primitive's implementation on numpy buffers right away (eager mode);
otherwise it hands the primitive to the trace of the highest-level tracer,
which may differentiate it (jvp/vjp), batch it (vmap) or record it into the
IR (jit/make_jaxpr).  Transforms nest by levels, as in JAX's Autodidax: each
active transform owns a :class:`MainTrace` on a stack, and a tracer belongs
to exactly one of them.  There is no global tape: a reverse-mode transform
keeps its own record only for the duration of one call.

This module holds ``bind``, the one eager evaluation path (``apply_primitive``,
``run_impl``, device arrays, implementation errors) and its switches; the
other parts live beside it and every layer above imports them from here:

* ``_primitive.py``: :class:`Primitive` and ``register_impl``/``register_lowering``/``add_traits``;
* ``_tracer.py``: :class:`Tracer`, :class:`PrimalTracer`, the tracer errors, ``get_aval``/``zeros_like``;
* ``_trace_stack.py``: :class:`MainTrace`, :class:`Trace`, the per-thread stack, ``register_transform``;
* ``_custom_calls.py``: the custom_vjp/custom_jvp and checkpoint calls;
* ``_debug_nans.py``: ``check_nans`` and the backward-pass context it reports;
* ``_array.py``: the immutable :class:`Array`.
"""
from __future__ import annotations

import warnings as _warnings_mod
from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _dtypes
from funcgrad._config import config
from funcgrad._dtypes import describe
from funcgrad._warnings import _filtered_list as _float_warnings_filtered_in, float_warnings_filtered
# The array half of the core; re-exported because every layer above imports it from here
# (and pickles written before the split name funcgrad._core._array_from_numpy).
from funcgrad._array import (Array, _array_from_numpy, _freeze, _immutable_setitem,  # noqa: F401
                             _int_overflow_message, _new_array, _wrap, commit_to_host, is_committed,
                             to_numpy_input)
# The other parts of the core, re-exported for the same reason.
from funcgrad._custom_calls import CustomJVPCall, CustomVJPCall, _top_tracer, bind_checkpoint  # noqa: F401
from funcgrad._debug_nans import (_BACKWARD_NAN_HINT, _describe_node, _forward_nan_hint,  # noqa: F401
                                  backward_context, check_nans, describe_backward_context)
from funcgrad._primitive import Primitive, add_traits, register_impl, register_lowering  # noqa: F401
from funcgrad._trace_stack import (_TRANSFORMS, MainTrace, Trace, _thread_state, _ThreadState,  # noqa: F401
                                   new_main, pop_main, push_main, register_transform, trace_stack, transform)
from funcgrad._tracer import (_PACKAGE_DIR, _TRANSFORM_NAMES, ConcretizationError, PrimalTracer,  # noqa: F401
                              Tracer, TracerArrayConversionError, TracerLeakError, _leak_error, as_array,
                              dtype_of_value, full_like, get_aval, shape_of_value, tracer_conversion_error,
                              transform_name, user_source_line, zeros_like)

# --------------------------------------------------------------------------
# bind and eager evaluation
# --------------------------------------------------------------------------


def bind(prim: Primitive, args: Sequence[Any], params: dict) -> Any:
    """Apply ``prim`` to ``args``: evaluate eagerly or hand it to a transform."""
    # The one fast path of eager mode: every argument a host Array or a Python
    # scalar, one array out, no debug_nans. It is apply_primitive inlined for
    # that case; set_fast_path(False) routes everything through apply_primitive.
    values = []
    weak = False
    for a in args:
        if type(a) is Array:
            values.append(a._value)
        elif isinstance(a, (bool, int, float)):
            values.append(a)
            weak = True
        else:
            break
    else:
        if not _fast_path[0]:
            return apply_primitive(prim, args, params)
        if _warnings_mod.filters is not _float_warnings_filtered_in[0]:
            float_warnings_filtered()
        if weak:   # a Python number: weakly typed (checked inline, no call, unless beside a bfloat16 array)
            for v in values:
                if type(v) is np.ndarray and v.dtype is _BFLOAT16:
                    values = weak_scalars(prim, values)
                    break
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


class _PrimitiveMethods:
    """``Primitive.bind``, defined here beside :func:`bind`: Primitive sits below the tracers."""

    def bind(self: Primitive, *args: Any, **params: Any) -> Any:
        return bind(self, args, params)


Primitive.bind = _PrimitiveMethods.bind   # prim.bind(*args, **params)


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


def weak_scalars(prim: Primitive, values: list) -> list:
    """``values`` with the Python numbers of an elementwise primitive beside a bfloat16 array as 0-d
    bfloat16 arrays.

    Python numbers are weakly typed: they take the array's dtype (JAX's rule, which the shape rules
    follow). numpy does so for its own dtypes, but promotes ml_dtypes' bfloat16 with a Python float to
    float32 or float64; a number converted first keeps the result in bfloat16, rounded once per
    operation as JAX rounds it.
    """
    if "elementwise" not in prim.traits:
        return values
    for v in values:
        if type(v) is np.ndarray and v.dtype == _BFLOAT16:
            return [np.asarray(v, _BFLOAT16) if isinstance(v, (bool, int, float)) else v for v in values]
    return values


_BFLOAT16 = _dtypes.bfloat16


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
    values = weak_scalars(prim, values)
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

