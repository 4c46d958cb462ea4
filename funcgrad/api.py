"""The transforms: grad, value_and_grad, vjp, jvp, linearize, jacfwd, jacrev
(jacobian), hessian, vmap and stop_gradient; with the functions that have
rules of their own (custom_vjp, custom_jvp, checkpoint: ``_custom_rules``)
and those that look at a function without running it (make_jaxpr,
eval_shape, block_until_ready: ``_staging``), re-exported here.

Each transform is a thin pytree wrapper around a ``*_flat`` driver in
``funcgrad.interpreters`` that works on flat lists of arrays. They live in
``_grad`` (grad, value_and_grad, the checks of differentiated inputs),
``_vjp_jvp`` (vjp, jvp, linearize), ``_jacobians`` (jacfwd, jacrev, hessian)
and ``_vmap``; this module holds the rest of JAX's top-level API
(stop_gradient, device_get, pure_callback, linear_transpose, the option
context managers, ...) and is where every one of them is imported from.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np

from funcgrad import _core, _dtypes, lax
from funcgrad._argspec import as_leaf, fun_name as _fun_name
from funcgrad._core import Array, Tracer, as_array
from funcgrad._dtypes import describe
from funcgrad._grad import grad, value_and_grad  # noqa: F401 (re-exported)
from funcgrad._jacobians import hessian, jacfwd, jacobian, jacrev  # noqa: F401
from funcgrad._vjp_jvp import jvp, linearize, vjp  # noqa: F401
from funcgrad._vmap import vmap  # noqa: F401
from funcgrad._custom_rules import custom_jvp, custom_vjp  # noqa: F401
from funcgrad._staging import ShapeDtypeStruct, block_until_ready, eval_shape, make_jaxpr  # noqa: F401
from funcgrad.ad_checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat  # noqa: F401
from funcgrad.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev", "jacobian", "hessian", "vmap",
           "custom_vjp", "custom_jvp", "checkpoint", "checkpoint_name", "checkpoint_policies", "remat", "make_jaxpr", "eval_shape", "ShapeDtypeStruct",
           "block_until_ready", "stop_gradient", "device_get", "pure_callback", "named_call", "named_scope",
           "effects_barrier", "typeof", "enable_x64", "debug_nans", "linear_transpose", "closure_convert",
           "clear_caches"]


def stop_gradient(x: Any) -> Any:
    """``x`` (a pytree), with a zero derivative: a constant to every transform.

    >>> grad(lambda v: fnp.sum(v * stop_gradient(v)))(fnp.ones(2))    # [1., 1.], not [2., 2.]
    Array([1., 1.], dtype=float32)
    """
    return tree_map(lambda v: lax.stop_gradient(v if isinstance(v, (Array, Tracer, bool, int, float))
                                                else as_array(v)), x)



def device_get(x: Any) -> Any:
    """The arrays of pytree ``x`` as numpy arrays on the host (other leaves unchanged), as
    ``jax.device_get``.

    >>> device_get({"w": fnp.ones(2)})     # {'w': array([1., 1.], dtype=float32)}
    {'w': array([1., 1.], dtype=float32)}
    """
    def get(v: Any) -> Any:
        if isinstance(v, Tracer):
            raise _core.ConcretizationError(
                f"device_get: {describe(v)} is a traced value (inside jit, vmap or grad), which has no host value "
                "yet; call device_get on the transformed function's results")
        return np.asarray(v) if isinstance(v, Array) else v
    return tree_map(get, x)


def pure_callback(callback: Callable, result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call a Python function on runtime values and use its result, as ``jax.pure_callback``.

    ``callback(*args, **kwargs)`` gets numpy arrays (at each call under ``jit``) and must return
    arrays matching ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct``-likes). It must be
    pure: an unused result may skip the call. Under ``vmap``, ``vmap_method="sequential"`` calls it
    per element, ``"expand_dims"``/``"broadcast_all"`` once on the batch. No derivative (wrap it in
    ``custom_jvp``/``custom_vjp``).

    >>> x = fnp.array([3.0, 1.0, 2.0])
    >>> fg.pure_callback(lambda x: np.sort(x), fg.ShapeDtypeStruct((3,), fnp.float32), x)
    Array([1., 2., 3.], dtype=float32)
    """
    from funcgrad.primitives.debug import Callback, pure_callback_p
    if sharding is not None:
        raise NotImplementedError("pure_callback: sharding is not supported (one host device); leave it None")
    if vmap_method not in (None, "sequential", "expand_dims", "broadcast_all", "legacy_vectorized"):
        raise ValueError(f"pure_callback: vmap_method must be 'sequential', 'expand_dims' or 'broadcast_all', got "
                         f"{vmap_method!r}")
    leaves, in_tree = tree_flatten((args, kwargs))
    leaves = [x if isinstance(x, (Array, Tracer)) else as_array(x) for x in leaves]
    specs, out_tree = tree_flatten(result_shape_dtypes)
    try:
        results = tuple(_dtypes.ShapedArray(tuple(int(d) for d in s.shape), _dtypes.canonicalize(s.dtype))
                        for s in specs)
    except AttributeError:
        raise TypeError("pure_callback: result_shape_dtypes must be a pytree of objects with .shape and .dtype "
                        "(ShapeDtypeStruct, arrays)") from None

    def run(*values: Any) -> list:
        a, kw = tree_unflatten(in_tree, list(values))
        out = callback(*a, **kw)
        out_leaves, tree = tree_flatten(out)
        if tree != out_tree:
            raise ValueError(f"pure_callback: {_fun_name(callback)} returned a result of structure {tree}, but "
                             f"result_shape_dtypes has structure {out_tree}")
        return out_leaves

    outs = pure_callback_p.bind(*leaves, callback=Callback(run, _fun_name(callback)), results=results,
                                vmap_method=vmap_method)
    return tree_unflatten(out_tree, outs)


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """``fun`` itself (``jax.named_call`` names a scope in XLA's profile; funcgrad has none).

    >>> double = fg.named_call(lambda x: x * 2, name="double")
    >>> double(fnp.ones(2))
    Array([2., 2.], dtype=float32)
    """
    return fun


@contextlib.contextmanager
def named_scope(name: str) -> Any:
    """A no-op context manager (``jax.named_scope`` names operations for XLA's profiler).

    >>> with fg.named_scope("layer1"):
    ...     fnp.ones(2) * 2
    Array([2., 2.], dtype=float32)
    """
    if not isinstance(name, str):
        raise TypeError(f"named_scope: name must be a str, got {type(name).__name__}")
    yield


def effects_barrier() -> None:
    """Wait for pending effects (``jax.effects_barrier``): funcgrad runs callbacks synchronously.

    >>> fg.effects_barrier()      # returns once every pending callback ran
    """


def typeof(x: Any) -> Any:
    """The abstract value (shape and dtype) of an array or tracer, as ``jax.typeof``.

    >>> fg.typeof(fnp.ones((2, 3)))
    f32[2,3]
    """
    return _core.get_aval(x)


@contextlib.contextmanager
def _option(name: str, value: Any) -> Any:
    from funcgrad._config import config
    before = getattr(config, name)
    config.update(name, value)
    try:
        yield
    finally:
        config.update(name, before)


def enable_x64(new_val: bool = True) -> Any:
    """Context manager: ``with fg.enable_x64():`` float64 inside (``jax.enable_x64``).

    >>> with fg.enable_x64():
    ...     fnp.array([1.0], dtype=fnp.float64).dtype
    dtype('float64')
    """
    return _option("enable_x64", new_val)


def debug_nans(new_val: bool = True) -> Any:
    """Context manager: ``with fg.debug_nans():`` NaN checks inside (``jax.debug_nans``).

    >>> with fg.debug_nans():
    ...     fnp.sqrt(fnp.array([4.0]))
    Array([2.], dtype=float32)
    """
    return _option("debug_nans", new_val)


def linear_transpose(fun: Callable, *primals: Any, reduce_axes: Any = ()) -> Callable:
    """The transpose of a linear function, as ``jax.linear_transpose``: ``f_t(cotangent) -> tuple``
    with one cotangent per input. ``primals`` give the input shapes and dtypes (their values
    are not used). ``fun`` must be linear: funcgrad does not check it (JAX raises for a
    nonlinear function); a nonlinear one gets the transpose of its derivative at zero.

    >>> w = fnp.arange(6.0).reshape(2, 3)
    >>> f_t = fg.linear_transpose(lambda x: x @ w, fnp.ones(2))
    >>> f_t(fnp.arange(3.))     # (w @ arange(3),)
    (Array([ 5., 14.], dtype=float32),)
    """
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported; leave it ()")
    leaves, in_tree = tree_flatten(primals)
    zeros = tree_unflatten(in_tree, [_core.zeros_like(as_leaf(x, "linear_transpose")) for x in leaves])
    _, pullback = vjp(fun, *zeros)

    def transposed(*cotangent: Any) -> tuple:
        ct = cotangent[0] if len(cotangent) == 1 else cotangent
        return tuple(pullback(ct))
    return transposed


def closure_convert(fun: Callable, *example_args: Any) -> tuple[Callable, list]:
    """``(fun, [])``: ``jax.closure_convert`` hoists the arrays ``fun`` closes over into explicit
    arguments for custom_vjp; funcgrad's custom rules take closures directly, so none are hoisted.

    >>> w = fnp.array([2.0, 3.0])
    >>> f, consts = fg.closure_convert(lambda x: x * w, fnp.ones(2))
    >>> f(fnp.ones(2), *consts)
    Array([2., 3.], dtype=float32)
    """
    return fun, []


def clear_caches() -> None:
    """Accepted for ``jax.clear_caches``: each jitted function keeps its own cache (``f.clear_cache()``);
    there is no global one to clear.

    >>> fg.clear_caches()        # later calls of jitted functions trace again
    """
