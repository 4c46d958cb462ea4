"""numpy's dispatch protocols for funcgrad arrays and tracers.

numpy hands calls that involve a funcgrad array to ``__array_ufunc__``
(ufuncs: ``np.sin(x)``, ``np.add.reduce(x)``, ``np_array * x``) and
``__array_function__`` (``np.sum(x, axis=0)``, ``np.concatenate([x, y])``).
Both run the funcgrad.numpy function of the same name, so the result is a
funcgrad Array and derivatives survive grad/jvp/vmap/jit:

>>> import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
>>> fg.grad(lambda x: np.sum(np.sin(x)))(fnp.zeros(2))    # cos(0) = [1, 1]
Array([1., 1.], dtype=float32)

Where funcgrad.numpy has no equivalent (``np.log10``, ``np.linalg.eig``, a
numpy-only argument such as ``where=``, or ``out=`` naming a numpy buffer):

* a traced value raises TracerArrayConversionError (numpy would silently
  treat it as a constant);
* concrete arrays run in numpy on their read-only values, and the result is
  a plain numpy value.

``out=`` naming a funcgrad array always raises: funcgrad arrays are immutable.
These methods run only when numpy calls them; funcgrad's own operators and
``bind`` never pass through here.
"""
from __future__ import annotations

import inspect
import threading
from typing import Any, Callable

import numpy as np

from funcgrad._core import Array, Tracer, tracer_conversion_error
from funcgrad._dtypes import describe

_OURS = (Array, Tracer)
_P = inspect.Parameter
_POSITIONAL = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)


class _NoEquivalent(Exception):
    """funcgrad.numpy cannot express this numpy call; ``detail`` says why."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


# --------------------------------------------------------------------------
# The two protocol methods
# --------------------------------------------------------------------------


def array_ufunc(self: Any, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """``__array_ufunc__``: a numpy ufunc (or one of its methods) on funcgrad arrays."""
    if _defers_to_other(inputs) or _defers_to_other(kwargs.get("out") or ()):
        return NotImplemented
    if method == "__call__" and not kwargs:
        # The common case (np.sin(x), np_array * x): a plain call of a ufunc funcgrad.numpy has.
        try:
            target = _ufunc_targets[ufunc]
        except KeyError:
            target = _ufunc_targets[ufunc] = _namespace_function("numpy", ufunc.__name__)
        if target is not None:
            return target(*inputs)
    label = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    return _dispatch(label, (ufunc, method), lambda: _translate_ufunc(ufunc, method, inputs, kwargs),
                     lambda: getattr(ufunc, method)(*_to_numpy(inputs), **_to_numpy(kwargs)), (inputs, kwargs))


def array_function(self: Any, func: Callable, types: tuple, args: tuple, kwargs: dict) -> Any:
    """``__array_function__``: a numpy function (``np.sum``, ``np.linalg.norm``...) on funcgrad arrays."""
    if not all(issubclass(t, _OURS) or issubclass(t, np.ndarray) for t in types):
        return NotImplemented   # another array library's type takes part: let it answer
    label = f"{func.__module__}.{func.__name__}"
    return _dispatch(label, func, lambda: _translate_function(func, label, args, kwargs),
                     lambda: func(*_to_numpy(args), **_to_numpy(kwargs)), (args, kwargs))


def _dispatch(label: str, key: Any, translate: Callable, run_numpy: Callable, operands: Any) -> Any:
    """Run the funcgrad.numpy equivalent; without one, raise for tracers or run numpy on values."""
    active = _active_keys()
    try:
        if key in active:   # the funcgrad function called numpy back on these arrays: no funcgrad route
            raise _NoEquivalent(f"; funcgrad.numpy's {label.rsplit('.', 1)[-1]} does not take arrays here")
        call = translate()
    except _NoEquivalent as e:
        tracer = _first_tracer(operands)
        if tracer is not None:
            raise tracer_conversion_error(tracer, label, e.detail) from None
        return run_numpy()
    active.add(key)
    try:
        return call()
    finally:
        active.discard(key)


_local = threading.local()


def _active_keys() -> set:
    keys = getattr(_local, "keys", None)
    if keys is None:
        keys = _local.keys = set()
    return keys


# --------------------------------------------------------------------------
# Ufuncs
# --------------------------------------------------------------------------

# Keyword arguments of a ufunc call that change nothing at these values.
_UFUNC_DEFAULTS = {"where": True, "casting": "same_kind", "order": "K", "dtype": None, "subok": True,
                   "signature": None}
# On bool operands numpy's bitwise ufuncs are the logical ones.
_BOOL_ALIASES = {"bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor",
                 "invert": "logical_not"}
# ufunc.reduce / ufunc.accumulate -> the funcgrad.numpy reduction.
_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}
_ACCUMULATE = {"add": "cumsum"}


def _translate_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Callable:
    out = kwargs.get("out")
    if out is not None:
        _reject_funcgrad_out(f"numpy.{ufunc.__name__}", out)
        raise _NoEquivalent("; out= writes into a numpy buffer")
    if method == "at":
        _reject_funcgrad_out(f"numpy.{ufunc.__name__}.at", inputs[:1], "writes in place into")
        raise _NoEquivalent("; ufunc.at writes in place")
    if method == "__call__":
        target = _ufunc_function(ufunc, inputs)
        _check_defaults(f"numpy.{ufunc.__name__}", kwargs, _UFUNC_DEFAULTS)
        return lambda: target(*inputs)
    if method == "outer":
        target = _ufunc_function(ufunc, inputs)
        _check_defaults(f"numpy.{ufunc.__name__}.outer", kwargs, _UFUNC_DEFAULTS)
        return lambda: _outer(target, *inputs)
    if method in ("reduce", "accumulate"):
        return _reduction(ufunc, method, inputs[0], kwargs)
    raise _NoEquivalent(f"; funcgrad.numpy has no equivalent of ufunc.{method}")


_ufunc_targets: dict = {}   # ufunc -> funcgrad.numpy function of its name (or None)


def _ufunc_function(ufunc: np.ufunc, inputs: tuple) -> Callable:
    name = ufunc.__name__
    if name in _BOOL_ALIASES and all(_dtype_kind(x) == "b" for x in inputs):
        name = _BOOL_ALIASES[name]
    target = _namespace_function("numpy", name)
    if target is None:
        raise _NoEquivalent(f"; funcgrad.numpy has no {name}")
    return target


def _outer(target: Callable, a: Any, b: Any) -> Any:
    fnp = _namespace("numpy")
    a, b = fnp.asarray(a), fnp.asarray(b)
    return target(fnp.reshape(a, tuple(a.shape) + (1,) * b.ndim), b)


def _reduction(ufunc: np.ufunc, method: str, x: Any, kwargs: dict) -> Callable:
    table = _REDUCE if method == "reduce" else _ACCUMULATE
    name = table.get(ufunc.__name__)
    if name is None:
        raise _NoEquivalent(f"; funcgrad.numpy has no equivalent of numpy.{ufunc.__name__}.{method}")
    target = _namespace_function("numpy", name)
    params = {"axis": kwargs.get("axis", 0)}   # numpy's ufunc reductions default to axis 0
    if method == "reduce":
        params["keepdims"] = bool(kwargs.get("keepdims", False))
    if kwargs.get("dtype") is not None:
        if "dtype" not in inspect.signature(target).parameters:
            raise _NoEquivalent(f"; funcgrad.numpy.{name} has no dtype argument")
        params["dtype"] = kwargs["dtype"]
    rest = {k: v for k, v in kwargs.items() if k not in ("axis", "keepdims", "dtype", "out")}
    _check_defaults(f"numpy.{ufunc.__name__}.{method}", rest, {"where": True})
    return lambda: target(x, **params)


def _check_defaults(label: str, kwargs: dict, defaults: dict) -> None:
    for key, value in kwargs.items():
        if key == "out":
            continue
        if key not in defaults or not _same(value, defaults[key]):
            raise _NoEquivalent(f"; funcgrad.numpy has no counterpart of {label}'s {key}={_short(value)}")


# --------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------

# numpy keyword -> funcgrad.numpy keyword, where the names differ beyond the leading arguments.
_ALIASES = {"clip": {"a_min": "min", "a_max": "max"}}
# Arguments that only steer numpy's dispatch.
_DROPPED = frozenset({"like"})
# Functions that read only shapes and dtypes: tracers may take part through stand-ins.
_METADATA_ONLY = frozenset({"result_type", "iscomplexobj", "isrealobj"})


def _translate_function(func: Callable, label: str, args: tuple, kwargs: dict) -> Callable:
    name = func.__name__
    module = func.__module__
    if module == "numpy" and name in _METADATA_ONLY:
        return lambda: func(*_stand_ins(args), **_stand_ins(kwargs))
    try:
        plan = _plans[func]
    except KeyError:
        plan = _plans[func] = _Plan.make(func, _namespace_function(module, name))
    if plan is None:
        where = f"funcgrad.{module} has no {name}" if module in _NAMESPACES else f"funcgrad.numpy has no {label}"
        raise _NoEquivalent(f"; {where}")
    return plan.translate(label, args, kwargs)


_MISSING = object()
_plans: dict = {}   # numpy function -> _Plan (None: funcgrad.numpy has no such function)


class _Plan:
    """How one numpy function's arguments become its funcgrad.numpy twin's (built once per function).

    Arguments are matched by name, leading ones renamed by position (numpy's
    ``a`` is funcgrad's ``x``). Numpy-only arguments pass only at numpy's
    default value (``out=None``, ``order='C'``); any other value has no
    funcgrad equivalent.
    """

    __slots__ = ("target", "np_sig", "positional", "var_positional", "var_keyword", "renames", "defaults",
                 "fg_names", "required", "aliases")

    @classmethod
    def make(cls, func: Callable, target: Callable | None) -> "_Plan | None":
        if target is None:
            return None
        plan = cls()
        plan.target = target
        plan.aliases = _ALIASES.get(func.__name__, {})
        try:
            plan.np_sig, fg_sig = inspect.signature(func), inspect.signature(target)
        except (TypeError, ValueError):   # no signature to go by: pass the arguments on as they are
            plan.np_sig = None
            return plan
        np_params = list(plan.np_sig.parameters.values())
        fg_params = {n: p for n, p in fg_sig.parameters.items() if p.kind not in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD)}
        fg_positional = [n for n, p in fg_params.items() if p.kind in _POSITIONAL]
        np_names = {p.name for p in np_params}
        plan.positional = tuple(p.name for p in np_params if p.kind in _POSITIONAL)
        plan.var_positional = next((p.name for p in np_params if p.kind is _P.VAR_POSITIONAL), None)
        plan.var_keyword = next((p.name for p in np_params if p.kind is _P.VAR_KEYWORD), None)
        plan.fg_names = set(fg_params)
        plan.required = frozenset(n for n, p in fg_params.items() if p.default is _P.empty)
        plan.renames, plan.defaults = {}, {}
        for index, p in enumerate(np_params):
            if p.kind in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD):
                continue
            wanted = plan.aliases.get(p.name, p.name)
            if wanted in fg_params:
                plan.renames[p.name] = wanted
            elif p.kind in _POSITIONAL and index < len(fg_positional) and fg_positional[index] not in np_names:
                plan.renames[p.name] = fg_positional[index]   # the same argument under another name
            else:
                plan.renames[p.name] = None                    # numpy-only
                plan.defaults[p.name] = p.default
        return plan

    def translate(self, label: str, args: tuple, kwargs: dict) -> Callable:
        target = self.target
        if self.np_sig is None:
            return lambda: target(*args, **kwargs)
        extra, supplied = self._bind(label, args, kwargs)
        out = supplied.pop("out", None)
        if out is not None:
            _reject_funcgrad_out(label, out)
            raise _NoEquivalent("; out= writes into a numpy buffer")
        keywords = {}
        for key, value in supplied.items():
            if key in _DROPPED:
                continue
            name = self.renames.get(key, _MISSING)
            if name is _MISSING:   # an argument numpy's **kwargs took (np.clip's min=, np.pad's constant_values=)
                wanted = self.aliases.get(key, key)
                name = wanted if wanted in self.fg_names else None
            if name is None:
                if _same(value, self.defaults.get(key, _MISSING)):
                    continue
                raise _NoEquivalent(f"; funcgrad.numpy has no counterpart of {label}'s {key}={_short(value)}")
            keywords[name] = value
        if extra:   # *args functions (einsum, broadcast_arrays): let the signature judge the call
            try:
                inspect.signature(target).bind(*extra, **keywords)
            except TypeError as e:
                raise _NoEquivalent(f"; funcgrad.numpy.{target.__name__} cannot take these arguments ({e})") from None
        elif not self.required <= keywords.keys():
            missing = ", ".join(sorted(self.required - keywords.keys()))
            raise _NoEquivalent(f"; funcgrad.numpy.{target.__name__} also needs {missing}")
        return lambda: target(*extra, **keywords)

    def _bind(self, label: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """numpy's arguments by name (plus the values of numpy's ``*args``), checked as numpy would."""
        if self.var_positional is None:
            if len(args) > len(self.positional):
                raise TypeError(f"{label}() takes at most {len(self.positional)} positional arguments "
                                f"({len(args)} given)")
            supplied = dict(zip(self.positional, args))
            for key, value in kwargs.items():
                if key in supplied:
                    raise TypeError(f"{label}() got multiple values for argument {key!r}")
                if key not in self.renames and self.var_keyword is None:
                    raise TypeError(f"{label}() got an unexpected keyword argument {key!r}")
                supplied[key] = value
            return (), supplied
        try:
            bound = self.np_sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{label}: {e}") from None
        supplied = dict(bound.arguments)
        extra = tuple(supplied.pop(self.var_positional, ()))
        supplied.update(supplied.pop(self.var_keyword, {}) if self.var_keyword else {})
        return extra, supplied


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

_NAMESPACES = {"numpy": "funcgrad.numpy", "numpy.linalg": "funcgrad.numpy.linalg",
               "numpy.fft": "funcgrad.numpy.fft"}


def _namespace(module: str) -> Any:
    # funcgrad.numpy imports this module, so it is looked up when first needed.
    import importlib
    return importlib.import_module(_NAMESPACES[module])


def _namespace_function(module: str, name: str) -> Callable | None:
    """The public funcgrad.numpy function for numpy's ``module.name``, or None."""
    if module not in _NAMESPACES or name.startswith("_"):
        return None
    f = getattr(_namespace(module), name, None)
    if not callable(f) or isinstance(f, type) or not getattr(f, "__module__", "").startswith("funcgrad."):
        return None
    return f


def _reject_funcgrad_out(label: str, out: Any, what: str = "out= names") -> None:
    for o in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(o, _OURS):
            raise TypeError(
                f"{label}: {what} a funcgrad array {describe(o)}, but funcgrad arrays are immutable. "
                "Use the returned value instead (y = np.add(a, b), not np.add(a, b, out=y)); for a partial "
                "update write x = x.at[index].set(value) (or .add(value)).")


def _defers_to_other(values: Any) -> bool:
    """Whether an operand of another library with its own ``__array_ufunc__`` should answer instead."""
    for v in values:
        if isinstance(v, (*_OURS, np.ndarray, np.generic, bool, int, float, complex, list, tuple)):
            continue
        method = getattr(type(v), "__array_ufunc__", None)
        if method is not None:
            return True
    return False


def _first_tracer(obj: Any) -> Tracer | None:
    if isinstance(obj, Tracer):
        return obj
    if isinstance(obj, (list, tuple)):
        items = obj
    elif isinstance(obj, dict):
        items = obj.values()
    else:
        return None
    for item in items:
        found = _first_tracer(item)
        if found is not None:
            return found
    return None


def _to_numpy(obj: Any) -> Any:
    """``obj`` with every (concrete) funcgrad array replaced by its read-only numpy value."""
    if isinstance(obj, Array):
        return np.asarray(obj)
    if type(obj) in (list, tuple):
        return type(obj)(_to_numpy(o) for o in obj)
    if type(obj) is dict:
        return {k: _to_numpy(v) for k, v in obj.items()}
    return obj


def _stand_ins(obj: Any) -> Any:
    """Like :func:`_to_numpy`, with tracers as zero-strided arrays of their shape and dtype."""
    if isinstance(obj, Tracer):
        return np.broadcast_to(np.zeros((), obj.dtype), obj.shape)
    if type(obj) in (list, tuple):
        return type(obj)(_stand_ins(o) for o in obj)
    if type(obj) is dict:
        return {k: _stand_ins(v) for k, v in obj.items()}
    return _to_numpy(obj)


def _dtype_kind(x: Any) -> str:
    if isinstance(x, bool):
        return "b"
    dtype = getattr(x, "dtype", None)
    return dtype.kind if dtype is not None else "?"


def _same(value: Any, default: Any) -> bool:
    if value is default:
        return True
    if type(value) is not type(default) or not isinstance(value, (bool, int, float, str, type(None))):
        return False
    return bool(value == default)


def _short(value: Any) -> str:
    if isinstance(value, (*_OURS, np.ndarray)):
        return describe(value)
    return value.__name__ if isinstance(value, type) else f"{value!r:.40}"


def install() -> None:
    """Attach the protocol methods to Array and Tracer (called by funcgrad.numpy)."""
    for cls in _OURS:
        cls.__array_ufunc__ = array_ufunc
        cls.__array_function__ = array_function
