"""jax's top-level names for devices, processes and configuration contexts, as funcgrad has them:
one process, one device per backend, and JAX's option context managers where funcgrad honours (or
has no use for) the value -- a value funcgrad cannot honour raises NotImplementedError."""
from __future__ import annotations

import contextlib
import platform
import sys
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["check_tracer_leaks", "checking_leaks", "copy_to_host_async", "custom_gradient", "debug_infs",
           "default_backend", "default_matmul_precision", "device_count", "enable_checks", "explain_cache_misses",
           "fwd_and_bwd", "host_count", "host_id", "host_ids", "local_device_count", "local_devices", "log_compiles",
           "make_array_from_callback", "make_array_from_process_local_data", "make_array_from_single_device_arrays",
           "numpy_dtype_promotion", "numpy_rank_promotion", "print_environment_info", "process_count",
           "process_index", "process_indices", "threefry_partitionable", "transfer_guard",
           "transfer_guard_device_to_device", "transfer_guard_device_to_host", "transfer_guard_host_to_device"]

_NO_VALUE = object()


def _backend(backend: Any, op: str) -> str:
    """The backend's name (None: the default device's)."""
    from funcgrad.devices import default_device, devices
    if backend is None:
        return default_device()
    name = str(getattr(backend, "platform", backend)).strip().lower()
    name = {"cuda": "gpu", "rocm": "gpu", "host": "cpu"}.get(name, name)
    if name not in devices():
        raise RuntimeError(f"{op}: backend {backend!r} is not available; available: {', '.join(devices())}")
    return name


def default_backend() -> str:
    """The platform name of the default device (``"cpu"`` or ``"gpu"``), as ``jax.default_backend``.

    >>> default_backend()      # 'cpu'
    'cpu'
    """
    from funcgrad.devices import default_device
    return default_device()


def device_count(backend: Any = None) -> int:
    """The number of devices of ``backend`` (default: the default device's): funcgrad uses one per
    backend, so 1.

    >>> device_count()
    1
    """
    _backend(backend, "device_count")
    return 1


def local_device_count(backend: Any = None) -> int:
    """The number of devices this process drives (1; funcgrad runs one process).

    >>> local_device_count()
    1
    """
    return device_count(backend)


def local_devices(process_index: int | None = None, backend: Any = None, host_id: int | None = None) -> list:
    """The devices of this process: ``[name]`` of ``backend`` (default: the default device), as
    ``jax.local_devices`` (funcgrad's devices are named by strings: ``"cpu"``, ``"gpu"``).

    >>> local_devices()     # ['cpu']
    ['cpu']
    """
    index = process_index if process_index is not None else host_id
    if index not in (None, 0):
        raise ValueError(f"local_devices: process_index={index}, but funcgrad runs one process (index 0)")
    return [_backend(backend, "local_devices")]


def process_count(backend: Any = None) -> int:
    """The number of processes (1: funcgrad has no multi-process runtime).

    >>> process_count()
    1
    """
    _backend(backend, "process_count")
    return 1


def process_index(backend: Any = None) -> int:
    """This process's index (0: funcgrad has no multi-process runtime).

    >>> process_index()
    0
    """
    _backend(backend, "process_index")
    return 0


def process_indices(backend: Any = None) -> list[int]:
    """The indices of all processes (``[0]``).

    >>> process_indices()
    [0]
    """
    _backend(backend, "process_indices")
    return [0]


host_count, host_id, host_ids = process_count, process_index, process_indices


def print_environment_info(return_string: bool = False) -> str | None:
    """Print (or return) funcgrad's, numpy's and Python's versions and the devices, as
    ``jax.print_environment_info``.

    >>> print_environment_info(return_string=True).splitlines()[0]     # 'funcgrad:    0.1.0'
    'funcgrad:    0.1.0'
    """
    from funcgrad.devices import devices
    try:
        import numba
        numba_version = numba.__version__
    except Exception:     # pragma: no cover - numba is a dependency
        numba_version = "not installed"
    version = getattr(sys.modules.get("funcgrad"), "__version__", "unknown")
    info = (f"funcgrad:    {version}\nnumpy:       {np.__version__}\nnumba:       {numba_version}\n"
            f"python:      {sys.version}\ndevices:     {devices()}\nplatform:    {platform.platform()}\n")
    if return_string:
        return info
    print(info)
    return None


def make_array_from_callback(shape: Sequence[int], sharding: Any, data_callback: Callable,
                             dtype: Any = None) -> Any:
    """An array of ``shape`` from ``data_callback(index)``, as ``jax.make_array_from_callback`` on one device:
    the callback is called once, with the index of the whole array (a tuple of ``slice(None)``).
    ``sharding`` is accepted for one device only (funcgrad has no multi-device shardings).

    >>> make_array_from_callback((2, 3), None, lambda idx: np.ones((2, 3))[idx])
    Array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)
    """
    from funcgrad import numpy as fnp
    shape = tuple(int(n) for n in shape)
    devices_of = getattr(sharding, "device_set", None)
    if devices_of is not None and len(devices_of) > 1:
        raise NotImplementedError("make_array_from_callback: multi-device shardings are not supported")
    data = data_callback(tuple(slice(None) for _ in shape))
    out = fnp.asarray(data, dtype=dtype)
    if tuple(out.shape) != shape:
        raise ValueError(f"make_array_from_callback: the callback returned shape {tuple(out.shape)}, expected {shape}")
    return out


def _one_device(op: str, sharding: Any) -> None:
    devices_of = getattr(sharding, "device_set", None)
    if devices_of is not None and len(devices_of) > 1:
        raise NotImplementedError(f"{op}: multi-device shardings are not supported (funcgrad uses one device)")


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Any, arrays: Sequence[Any], *,
                                         dtype: Any = None) -> Any:
    """The array of ``shape`` made of per-device ``arrays``, as ``jax.make_array_from_single_device_arrays``
    on one device: ``arrays`` holds the one array of the whole ``shape``.

    >>> make_array_from_single_device_arrays((2,), None, [np.ones(2)])
    Array([1., 1.], dtype=float32)
    """
    from funcgrad import numpy as fnp
    _one_device("make_array_from_single_device_arrays", sharding)
    arrays = list(arrays)
    shape = tuple(int(n) for n in shape)
    if len(arrays) != 1:
        raise NotImplementedError(f"make_array_from_single_device_arrays: one array per device and funcgrad uses "
                                  f"one device; got {len(arrays)} arrays")
    out = fnp.asarray(arrays[0], dtype=dtype)
    if tuple(out.shape) != shape:
        raise ValueError(f"make_array_from_single_device_arrays: the array has shape {tuple(out.shape)}, "
                         f"expected {shape}")
    return out


def make_array_from_process_local_data(sharding: Any, local_data: Any, global_shape: Sequence[int] | None = None
                                       ) -> Any:
    """``local_data`` as an array, as ``jax.make_array_from_process_local_data`` in one process (the local
    data is the global array).

    >>> make_array_from_process_local_data(None, np.ones(2))
    Array([1., 1.], dtype=float32)
    """
    from funcgrad import numpy as fnp
    _one_device("make_array_from_process_local_data", sharding)
    out = fnp.asarray(local_data)
    if global_shape is not None and tuple(out.shape) != tuple(int(n) for n in global_shape):
        raise ValueError(f"make_array_from_process_local_data: global_shape {tuple(global_shape)} differs from the "
                         f"local data's {tuple(out.shape)}, but funcgrad runs one process")
    return out


def copy_to_host_async(x: Any) -> None:
    """Start copying ``x``'s arrays to the host, as ``jax.copy_to_host_async``: a hint only (the values
    are unchanged); funcgrad copies when the host reads them, so nothing is started early.

    >>> x = fnp.ones(2)
    >>> fg.copy_to_host_async(x)     # None; np.asarray(x) copies when it is needed
    """
    return None


def fwd_and_bwd(fun: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """``(fwd, bwd)`` as ``jax.fwd_and_bwd``: ``fwd(*args) -> (out, residuals[, aux])`` and
    ``bwd(residuals, cotangent)`` -> the cotangents of the ``argnums`` arguments (one array for an
    int ``argnums``, a tuple for a sequence). funcgrad's residuals are the arguments themselves:
    ``bwd`` recomputes the forward pass (same values; more compute than JAX's saved residuals).

    >>> x, w = fnp.ones((1, 2)), fnp.ones((2, 3))
    >>> fwd, bwd = fg.fwd_and_bwd(lambda x, w: x @ w, argnums=(0, 1))
    >>> y, res = fwd(x, w); cx, cw = bwd(res, fnp.ones_like(y))
    >>> cx, cw.shape
    (Array([[3., 3.]], dtype=float32), (2, 3))
    """
    from funcgrad.api import vjp
    from funcgrad.jit import jit
    nums = (argnums,) if isinstance(argnums, int) else tuple(int(i) for i in argnums)

    def fwd(*args: Any) -> tuple:
        out = fun(*args)
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError("fwd_and_bwd(has_aux=True): fun must return a pair (output, aux)")
            return out[0], tuple(args), out[1]
        return out, tuple(args)

    def bwd(residuals: Any, cotangent: Any) -> Any:
        args = tuple(residuals)
        for i in nums:
            if not -len(args) <= i < len(args):
                raise ValueError(f"fwd_and_bwd: argnums {argnums} out of range for {len(args)} arguments")

        def part(*diff: Any) -> Any:
            full = list(args)
            for i, d in zip(nums, diff):
                full[i] = d
            out = fun(*full)
            return out[0] if has_aux else out
        _, pullback = vjp(part, *(args[i] for i in nums))
        cts = pullback(cotangent)
        return cts[0] if isinstance(argnums, int) else tuple(cts)
    return (jit(fwd), jit(bwd)) if jitted else (fwd, bwd)


# ------------------------------------------------------------------ JAX's option context managers


@contextlib.contextmanager
def _jax_option(jax_name: str, value: Any) -> Any:
    """Set JAX's option ``jax_name`` for the block through ``config.update``: options funcgrad has are
    set and restored; options it ignores are checked (an unsupported value raises NotImplementedError)."""
    from funcgrad._config import config
    try:
        before = config.read(jax_name)
    except ValueError:
        before = _NO_VALUE
    config.update(jax_name, value)
    try:
        yield
    finally:
        if before is not _NO_VALUE:
            config.update(jax_name, before)


def _bool_option(jax_name: str, doc: str) -> Callable:
    def manager(new_val: Any = True) -> Any:
        return _jax_option(jax_name, new_val)
    manager.__name__ = jax_name[4:]
    manager.__doc__ = doc + f"\n\n    >>> with fg.{jax_name[4:]}(False):\n    ...     fnp.sin(fnp.zeros(2))\n    Array([0., 0.], dtype=float32)\n"
    return manager


_EXAMPLE_VALUES = {"numpy_dtype_promotion": "standard", "numpy_rank_promotion": "allow",
                   "default_matmul_precision": "highest", "default_prng_impl": "threefry2x32"}


def _value_option(jax_name: str, doc: str) -> Callable:
    def manager(new_val: Any = _NO_VALUE) -> Any:
        if new_val is _NO_VALUE:
            raise TypeError(f"Context manager for {jax_name[4:]} config option requires an argument representing "
                            "the new value for the config option.")
        return _jax_option(jax_name, new_val)
    manager.__name__ = jax_name[4:]
    manager.__doc__ = doc + f"\n\n    >>> with fg.{jax_name[4:]}({_EXAMPLE_VALUES[jax_name[4:]]!r}):\n    ...     fnp.sin(fnp.zeros(2))\n    Array([0., 0.], dtype=float32)\n"
    return manager


check_tracer_leaks = _bool_option(
    "jax_check_tracer_leaks", "Context manager (``jax.check_tracer_leaks``): funcgrad always detects a leaked tracer "
    "when it is used (TracerLeakError), so any value is accepted.")
debug_infs = _bool_option(
    "jax_debug_infs", "Context manager (``jax.debug_infs``): only ``False`` is supported; ``True`` raises "
    "NotImplementedError (funcgrad checks NaNs with debug_nans, not infs).")
log_compiles = _bool_option(
    "jax_log_compiles", "Context manager (``jax.log_compiles``): accepted; funcgrad logs no compilations.")
explain_cache_misses = _bool_option(
    "jax_explain_cache_misses", "Context manager (``jax.explain_cache_misses``): accepted; funcgrad warns on "
    "retracing with RetraceWarning instead.")
enable_checks = _bool_option(
    "jax_enable_checks", "Context manager (``jax.enable_checks``): accepted; funcgrad's internal checks always run.")
numpy_dtype_promotion = _value_option(
    "jax_numpy_dtype_promotion", "Context manager (``jax.numpy_dtype_promotion``): only ``'standard'`` (JAX's "
    "default) is supported; ``'strict'`` raises NotImplementedError.")
numpy_rank_promotion = _value_option(
    "jax_numpy_rank_promotion", "Context manager (``jax.numpy_rank_promotion``): only ``'allow'`` (JAX's default) "
    "is supported; ``'warn'`` / ``'raise'`` raise NotImplementedError.")
default_matmul_precision = _value_option(
    "jax_default_matmul_precision", "Context manager (``jax.default_matmul_precision``): accepted; funcgrad's "
    "matmuls always run at full precision of their dtype (JAX's 'highest').")


threefry_partitionable = _bool_option(
    "jax_threefry_partitionable", "Context manager (``jax.threefry_partitionable``): sets funcgrad's "
    "``config.threefry_partitionable`` (which bits random functions draw, as JAX) for the block.")
default_prng_impl = _value_option(
    "jax_default_prng_impl", "Context manager (``jax.default_prng_impl``): only ``'threefry2x32'`` is supported.")


@contextlib.contextmanager
def _checked(name: str, value: Any, allowed: tuple, why: str) -> Any:
    if value not in allowed:
        raise NotImplementedError(f"{name}({value!r}): funcgrad supports only {' or '.join(map(repr, allowed))} "
                                  f"({why})")
    yield


def debug_key_reuse(new_val: Any = True) -> Any:
    """Context manager (``jax.debug_key_reuse``): only ``False`` is supported (funcgrad does not track key
    reuse).

    >>> with fg.debug_key_reuse(False):
    ...     random.normal(random.key(0), (2,)).shape
    (2,)
    """
    return _checked("debug_key_reuse", new_val, (False,), "funcgrad does not track key reuse")


def enable_custom_prng(new_val: Any = True) -> Any:
    """Context manager (``jax.enable_custom_prng``): only ``False`` is supported.

    >>> with fg.enable_custom_prng(False):
    ...     random.normal(random.key(0), (2,)).shape
    (2,)
    """
    return _checked("enable_custom_prng", new_val, (False,), "funcgrad has no custom PRNG implementations")


def legacy_prng_key(new_val: Any = _NO_VALUE) -> Any:
    """Context manager (``jax.legacy_prng_key``): only ``'allow'`` (JAX's default) is supported.

    >>> with fg.legacy_prng_key("allow"):
    ...     random.PRNGKey(0).shape
    (2,)
    """
    if new_val is _NO_VALUE:
        raise TypeError("Context manager for legacy_prng_key config option requires an argument representing the "
                        "new value for the config option.")
    return _checked("legacy_prng_key", new_val, ("allow",), "funcgrad neither warns about nor rejects raw keys")


def softmax_custom_jvp(new_val: Any = True) -> Any:
    """Context manager (``jax.softmax_custom_jvp``): accepted; it picks how JAX writes softmax's derivative,
    not its value, and funcgrad's softmax has its own exact rule either way.

    >>> with fg.softmax_custom_jvp(True):
    ...     nn.softmax(fnp.zeros(2))
    Array([0.5, 0.5], dtype=float32)
    """
    return _checked("softmax_custom_jvp", bool(new_val), (False, True), "")


def checking_leaks() -> Any:
    """Context manager: ``with checking_leaks():`` as ``jax.checking_leaks`` (funcgrad always detects
    leaked tracers when they are used).

    >>> with fg.checking_leaks():
    ...     fnp.sin(fnp.zeros(2))
    Array([0., 0.], dtype=float32)
    """
    return check_tracer_leaks(True)


_TRANSFER_VALUES = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")


def _transfer_guard(name: str) -> Callable:
    @contextlib.contextmanager
    def guard(new_val: str) -> Any:
        if new_val not in _TRANSFER_VALUES:
            raise ValueError(f"{name}: new_val must be one of {_TRANSFER_VALUES}, got {new_val!r}")
        if new_val != "allow":
            raise NotImplementedError(f"{name}({new_val!r}): funcgrad does not guard transfers; only 'allow' "
                                      "is supported")
        yield
    guard.__name__ = name
    guard.__doc__ = (f"Context manager (``jax.{name}``): only ``'allow'`` (JAX's default) is supported; "
                     f"other levels raise NotImplementedError.\n\n"
                     f"    >>> with fg.{name}('allow'):\n    ...     fnp.sin(fnp.zeros(2))\n    Array([0., 0.], dtype=float32)\n")
    return guard


transfer_guard = _transfer_guard("transfer_guard")
transfer_guard_host_to_device = _transfer_guard("transfer_guard_host_to_device")
transfer_guard_device_to_device = _transfer_guard("transfer_guard_device_to_device")
transfer_guard_device_to_host = _transfer_guard("transfer_guard_device_to_host")


def custom_gradient(fun: Callable) -> Callable:
    """A function with its own reverse-mode rule, as ``jax.custom_gradient``: ``fun(*args)`` returns
    ``(output, vjp)`` with ``vjp(cotangent)`` -> a tuple of cotangents, one per positional argument.
    The ``vjp`` closure is traced when the forward pass runs (its captured arrays become residuals),
    so it works under jit and for higher derivatives of what it computes. Reverse mode only (as JAX's:
    jvp raises).

    >>> @custom_gradient
    ... def f(x):
    ...     return x ** 2, lambda g: (g * 2 * x,)
    """
    import functools
    from funcgrad import _core
    from funcgrad.primitives.subprograms import trace_sub
    from funcgrad.tree_util import tree_flatten, tree_unflatten

    @functools.wraps(fun)
    def wrapped(*args: Any) -> Any:
        leaves, in_tree = tree_flatten(args)
        out_tree: list = [None]
        program: list = [None]
        primal_out: list = [None]

        def split(result: Any) -> tuple:
            if not (isinstance(result, (tuple, list)) and len(result) == 2 and callable(result[1])):
                raise TypeError("custom_gradient: the function must return a pair (output, vjp function)")
            return result[0], result[1]

        def flat_fun(*xs: Any) -> list:
            ans, _ = split(fun(*tree_unflatten(in_tree, list(xs))))
            out, out_tree[0] = tree_flatten(ans)
            return out

        def fwd(*xs: Any) -> tuple:
            ans, vjp_fn = split(fun(*tree_unflatten(in_tree, list(xs))))
            out, out_tree[0] = tree_flatten(ans)

            def flat_vjp(*cts: Any) -> list:
                g = vjp_fn(tree_unflatten(out_tree[0], list(cts)))
                if not isinstance(g, (tuple, list)) or len(g) != len(args):
                    raise TypeError(f"custom_gradient: the vjp function must return a tuple of {len(args)} "
                                    f"cotangent(s), one per positional argument, got {type(g).__name__}")
                g_leaves, g_tree = tree_flatten(tuple(g))
                if g_tree != in_tree:
                    raise ValueError(f"custom_gradient: the vjp returned cotangents of structure {g_tree}, "
                                     f"expected the arguments' {in_tree}")
                return g_leaves
            sub, consts = trace_sub(flat_vjp, [_core.get_aval(o) for o in out])
            program[0], primal_out[0] = sub, out
            return out, list(consts)

        def bwd(consts: list, cts: list) -> list:
            cts = [_core.zeros_like(o) if c is None else c for c, o in zip(cts, primal_out[0])]
            return list(program[0](*consts, *cts))

        outs = _core.CustomVJPCall(getattr(fun, "__name__", "custom_gradient"), flat_fun, fwd, bwd).bind(*leaves)
        return tree_unflatten(out_tree[0], outs)
    return wrapped
