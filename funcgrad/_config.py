"""Global switches: float64 support and NaN debugging.

Each can be set by environment variable before import or by a call at run
time::

    FUNCGRAD_ENABLE_X64=1      # or fg.config.update("enable_x64", True)
    FUNCGRAD_DEBUG_NANS=1      # or fg.config.update("debug_nans", True)
    FUNCGRAD_JIT_FUSION=0      # or fg.config.update("jit_fusion", False): jit without generated kernels
    FUNCGRAD_JIT_LOOPS=0       # or fg.config.update("jit_loops", False): jitted loops run their body step by
                               # step instead of as one compiled function (default on)
    FUNCGRAD_CACHE_DIR=/path   # or fg.config.update("cache_dir", "/path"): where generated kernels live
    FUNCGRAD_CACHE_MAX_BYTES=2G          # or fg.config.update("cache_max_bytes", 2 << 30): kernel cache cap (0: none)
    FUNCGRAD_BUFFER_POOL_MAX_BYTES=512M  # or fg.config.update("buffer_pool_max_bytes", ...): jit buffers kept
    FUNCGRAD_HOST_BUFFER_CACHE_BYTES=64M  # or fg.config.update("host_buffer_cache_bytes", ...): freed host memory
                                          # malloc keeps for eager work to reuse (default 256M; 0: glibc's defaults)
    FUNCGRAD_CHECKED_INDEXING=1   # or fg.config.update("checked_indexing", True): out-of-bounds indices raise
                                  # (default, as JAX: gathers clamp, scatters drop out-of-bounds updates)
    FUNCGRAD_DISABLE_JIT=1        # or fg.config.update("disable_jit", True) / fg.disable_jit(): jit runs eagerly
    FUNCGRAD_GPU_HOST_FALLBACK=1  # or fg.config.update("gpu_host_fallback", True): primitives without a GPU
                                  # implementation run on host copies (with a warning) instead of raising
    FUNCGRAD_GPU_GRAPHS=1         # or fg.config.update("gpu_graphs", True): a jitted program on GPU arrays is
                                  # captured into a CUDA graph on its second call and replayed after that
    FUNCGRAD_THREEFRY_PARTITIONABLE=0  # or fg.config.update("threefry_partitionable", False): funcgrad.random's
                                       # legacy key derivation (JAX's stream before 0.5); default on, as JAX
    FUNCGRAD_DISTRIBUTED_DEBUG=1  # or fg.config.update("distributed_debug", True): every eager collective
                                  # across processes first checks that all ranks pass the same shapes/dtypes

Options may also be named with JAX's ``jax_`` prefix (``config.update("jax_enable_x64", True)``).

With x64 disabled (the default, as in JAX) float64/int64/uint64 inputs are
stored as float32/int32/uint32.
"""
from __future__ import annotations

import operator
import os


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class _Config:
    """Mutable process-wide settings read on the hot path as plain attributes."""

    __slots__ = ("enable_x64", "debug_nans", "jit_fusion", "cache_dir", "cache_max_bytes", "buffer_pool_max_bytes",
                 "host_buffer_cache_bytes", "gpu_host_fallback", "checked_indexing", "disable_jit", "threefry_partitionable",
                 "distributed_debug", "gpu_graphs", "jit_loops")

    def __init__(self) -> None:
        self.enable_x64 = _env_flag("FUNCGRAD_ENABLE_X64")
        self.debug_nans = _env_flag("FUNCGRAD_DEBUG_NANS")
        self.jit_fusion = os.environ.get("FUNCGRAD_JIT_FUSION", "1").strip().lower() not in ("0", "false", "no", "off")
        self.cache_dir = os.environ.get("FUNCGRAD_CACHE_DIR") or _default_cache_dir()
        self.cache_max_bytes = _env_bytes("FUNCGRAD_CACHE_MAX_BYTES", 1 << 30)
        self.buffer_pool_max_bytes = _env_bytes("FUNCGRAD_BUFFER_POOL_MAX_BYTES", 256 << 20)
        self.host_buffer_cache_bytes = _env_bytes("FUNCGRAD_HOST_BUFFER_CACHE_BYTES", 256 << 20)
        self.gpu_host_fallback = _env_flag("FUNCGRAD_GPU_HOST_FALLBACK")
        self.checked_indexing = _env_flag("FUNCGRAD_CHECKED_INDEXING")
        self.disable_jit = _env_flag("FUNCGRAD_DISABLE_JIT")
        self.threefry_partitionable = os.environ.get("FUNCGRAD_THREEFRY_PARTITIONABLE", "1").strip().lower() not in (
            "0", "false", "no", "off")
        self.distributed_debug = _env_flag("FUNCGRAD_DISTRIBUTED_DEBUG")
        self.gpu_graphs = _env_flag("FUNCGRAD_GPU_GRAPHS")
        self.jit_loops = os.environ.get("FUNCGRAD_JIT_LOOPS", "1").strip().lower() not in ("0", "false", "no", "off")

    def update(self, name: str, value: bool | str) -> None:
        """Set an option: ``config.update("enable_x64", True)``.

        JAX's names are accepted where funcgrad has the option (``"jax_enable_x64"``,
        ``"jax_debug_nans"``, ``"jax_disable_jit"``, ``"jax_threefry_partitionable"``); JAX options that only
        tune XLA or logging (``"jax_platform_name"``, ``"jax_default_matmul_precision"``, ...) are accepted and
        ignored; a JAX option value funcgrad cannot honour (``"jax_debug_infs"`` True,
        ``"jax_numpy_rank_promotion"`` "raise", ...) raises NotImplementedError.
        """
        if name in _JAX_IGNORED:
            allowed = _JAX_IGNORED[name]
            if allowed is not None and value not in allowed:
                raise NotImplementedError(f"config.update({name!r}, {value!r}): funcgrad supports only "
                                          f"{' or '.join(map(repr, allowed))} for this option")
            return
        name = _JAX_NAMES.get(name, name)
        if name not in self.__slots__:
            raise ValueError(f"unknown config option {name!r}; known options: {', '.join(self.__slots__)} "
                             f"(and JAX's {', '.join(sorted(_JAX_NAMES))})")
        if name == "cache_dir":
            value = str(value)
        elif name in _BYTE_OPTIONS:
            value = _bytes(value, f"config.update({name!r}, ...)")
        else:
            value = bool(value)
        setattr(self, name, value)
        for callback in _OBSERVERS.get(name, ()):
            callback()

    def read(self, name: str) -> object:
        """The value of an option (JAX's ``jax_`` names accepted): ``config.read("jax_enable_x64")``."""
        name = _JAX_NAMES.get(name, name)
        if name not in self.__slots__:
            raise ValueError(f"unknown config option {name!r}; known options: {', '.join(self.__slots__)}")
        return getattr(self, name)

    def __getattr__(self, name: str) -> object:
        # config.jax_enable_x64, as JAX's config object exposes its options.
        if name in _JAX_NAMES:
            return getattr(self, _JAX_NAMES[name])
        raise AttributeError(f"config has no option {name!r}; known options: {', '.join(self.__slots__)}")

    def __repr__(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__).join(("Config(", ")"))


_OBSERVERS: dict[str, list] = {}

# JAX's option names that map onto funcgrad's, and those accepted without effect (XLA tuning,
# logging, sharding: nothing funcgrad does changes with them).
_JAX_NAMES = {"jax_enable_x64": "enable_x64", "jax_debug_nans": "debug_nans", "jax_disable_jit": "disable_jit",
              "jax_compilation_cache_dir": "cache_dir", "jax_threefry_partitionable": "threefry_partitionable"}
# JAX options with no effect here, and the values funcgrad honours without them (None: any value;
# another value raises NotImplementedError rather than being silently ignored).
_JAX_IGNORED = {
    "jax_platform_name": None, "jax_platforms": None, "jax_default_matmul_precision": None,
    "jax_log_compiles": None, "jax_traceback_filtering": None,
    "jax_persistent_cache_min_compile_time_secs": None, "jax_persistent_cache_min_entry_size_bytes": None,
    "jax_explain_cache_misses": None, "jax_check_tracer_leaks": None, "jax_enable_checks": None,
    "jax_use_shardy_partitioner": None, "jax_debug_infs": (False,), "jax_numpy_rank_promotion": ("allow",),
    "jax_numpy_dtype_promotion": ("standard",), "jax_dynamic_shapes": (False,),
    "jax_default_prng_impl": ("threefry2x32", "threefry"),
}


def on_update(name: str, callback: object) -> None:
    """Call ``callback()`` after every ``config.update(name, ...)``.

    (Modules that cache a value derived from an option, such as the default
    dtypes under ``enable_x64``, subscribe here: the config never imports them.)
    """
    _OBSERVERS.setdefault(name, []).append(callback)


_BYTE_OPTIONS = ("cache_max_bytes", "buffer_pool_max_bytes", "host_buffer_cache_bytes")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(value: object, where: str) -> int:
    """A byte count: a non-negative int, or a string such as ``"512M"`` or ``"2G"`` (binary units)."""
    text = str(value).strip().upper().removesuffix("IB").removesuffix("B") if isinstance(value, str) else None
    try:
        if text is not None:
            unit = text[-1:] if text[-1:] in _UNITS else ""
            number = int(text[:len(text) - len(unit)]) * _UNITS[unit]
        elif isinstance(value, bool):
            raise TypeError
        else:
            number = operator.index(value)   # ints, numpy ints
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise ValueError(f"{where}: expected a byte count (a non-negative int, or a string like '512M' or '2G'; "
                         f"0 means no limit), got {value!r}")
    return number


def _env_bytes(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    return _bytes(text, name) if text else default


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "funcgrad", "kernels")


config = _Config()
