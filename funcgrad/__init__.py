"""funcgrad: composable transforms (grad, vmap, jit) of numpy-style functions.

>>> import funcgrad as fg
>>> import funcgrad.numpy as fnp
>>> def loss(params, x):
...     return fnp.mean((x @ params["w"] + params["b"]) ** 2)
>>> grads = fg.grad(loss)({"w": fnp.ones((3, 1)), "b": fnp.zeros(1)}, fnp.ones((8, 3)))
"""
from funcgrad.backends import cpu as _cpu  # noqa: F401  (first: registers the host's kernels and compiler)
from funcgrad import numpy  # noqa: F401  (installs the array methods)
from funcgrad import core, debug, dtypes, errors, nn, optim, random, scipy, tree, tree_util
from funcgrad import distributed  # noqa: F401,E402  (registers the process world with the collectives)
from funcgrad._config import config
from funcgrad._warnings import CacheWarning, FuncgradWarning, RetraceWarning
from funcgrad._core import Array, ConcretizationError, TracerArrayConversionError, TracerLeakError
from funcgrad.api import (ShapeDtypeStruct, block_until_ready, checkpoint, checkpoint_name, checkpoint_policies, clear_caches,
                          closure_convert, custom_jvp, custom_vjp, debug_nans, device_get, effects_barrier, enable_x64,
                          eval_shape, grad, hessian, jacfwd, jacobian, jacrev, jvp, linear_transpose, linearize,
                          make_jaxpr, named_call, named_scope, pure_callback, remat, stop_gradient, typeof,
                          value_and_grad, vjp, vmap)
from funcgrad.devices import default_device, device_put, devices, from_dlpack, set_default_device
from funcgrad.jit import disable_jit, ensure_compile_time_eval, jit
from funcgrad.backends.cpu._threads import get_num_threads, set_num_threads
from funcgrad import mixed_precision
from funcgrad import profiler
from funcgrad._toplevel import (check_tracer_leaks, checking_leaks, debug_infs, default_backend,  # noqa: F401
                                default_matmul_precision, device_count, enable_checks, explain_cache_misses,
                                fwd_and_bwd, host_count, host_id, host_ids, local_device_count, local_devices,
                                log_compiles, make_array_from_callback, numpy_dtype_promotion, numpy_rank_promotion,
                                print_environment_info, process_count, process_index, process_indices,
                                transfer_guard, transfer_guard_device_to_device, transfer_guard_device_to_host,
                                transfer_guard_host_to_device)
from funcgrad._toplevel import (copy_to_host_async, make_array_from_process_local_data,  # noqa: F401
                                make_array_from_single_device_arrays)
from funcgrad._toplevel import (custom_gradient, debug_key_reuse, default_prng_impl, enable_custom_prng, legacy_prng_key,  # noqa: F401
                                softmax_custom_jvp, threefry_partitionable)

__version__ = "0.1.0"

__all__ = ["Array", "CacheWarning", "FuncgradWarning", "RetraceWarning", "ConcretizationError", "TracerArrayConversionError", "TracerLeakError", "checkpoint", "config", "core", "custom_jvp", "custom_vjp", "ShapeDtypeStruct", "block_until_ready", "eval_shape", "jacobian",
           "default_device", "device_put", "dtypes", "get_num_threads", "set_num_threads", "devices", "from_dlpack", "mixed_precision", "set_default_device", "grad",
           "hessian", "jacfwd", "jacrev", "jit", "jvp", "linearize", "make_jaxpr", "nn", "numpy", "optim", "random", "remat", "scipy",
           "stop_gradient", "tree_util", "value_and_grad", "vjp", "vmap",
           "checkpoint_name", "checkpoint_policies", "debug", "device_get", "errors", "disable_jit", "ensure_compile_time_eval", "tree",
           "debug_nans", "effects_barrier", "enable_x64", "named_call", "named_scope", "pure_callback", "typeof",
           "clear_caches", "closure_convert", "linear_transpose"]
__all__ += ["check_tracer_leaks", "checking_leaks", "debug_infs", "default_backend", "default_matmul_precision",
            "device_count", "enable_checks", "explain_cache_misses", "fwd_and_bwd", "host_count", "host_id",
            "host_ids", "local_device_count", "local_devices", "log_compiles", "make_array_from_callback",
            "numpy_dtype_promotion", "numpy_rank_promotion", "print_environment_info", "process_count",
            "process_index", "process_indices", "transfer_guard", "transfer_guard_device_to_device",
            "transfer_guard_device_to_host", "transfer_guard_host_to_device"]
__all__ += ["custom_gradient", "debug_key_reuse", "default_prng_impl", "enable_custom_prng", "legacy_prng_key",
            "softmax_custom_jvp", "threefry_partitionable"]
__all__ += ["profiler"]
__all__ += ["copy_to_host_async", "make_array_from_process_local_data", "make_array_from_single_device_arrays"]
