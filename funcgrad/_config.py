"""Global switches: float64 support and NaN debugging.

Each can be set by environment variable before import or by a call at run
time::

    FUNCGRAD_ENABLE_X64=1      # or fg.config.update("enable_x64", True)
    FUNCGRAD_DEBUG_NANS=1      # or fg.config.update("debug_nans", True)
    FUNCGRAD_JIT_FUSION=0      # or fg.config.update("jit_fusion", False): jit without generated kernels
    FUNCGRAD_CACHE_DIR=/path   # or fg.config.update("cache_dir", "/path"): where generated kernels live

With x64 disabled (the default, as in JAX) float64/int64/uint64 inputs are
stored as float32/int32/uint32.
"""
from __future__ import annotations

import os


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class _Config:
    """Mutable process-wide settings read on the hot path as plain attributes."""

    __slots__ = ("enable_x64", "debug_nans", "jit_fusion", "cache_dir")

    def __init__(self) -> None:
        self.enable_x64 = _env_flag("FUNCGRAD_ENABLE_X64")
        self.debug_nans = _env_flag("FUNCGRAD_DEBUG_NANS")
        self.jit_fusion = os.environ.get("FUNCGRAD_JIT_FUSION", "1").strip().lower() not in ("0", "false", "no", "off")
        self.cache_dir = os.environ.get("FUNCGRAD_CACHE_DIR") or _default_cache_dir()

    def update(self, name: str, value: bool | str) -> None:
        """Set an option: ``config.update("enable_x64", True)``."""
        if name not in self.__slots__:
            raise ValueError(f"unknown config option {name!r}; known options: {', '.join(self.__slots__)}")
        setattr(self, name, str(value) if name == "cache_dir" else bool(value))
        if name == "enable_x64":
            from funcgrad import _dtypes
            _dtypes._refresh_defaults()

    def __repr__(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__).join(("Config(", ")"))


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "funcgrad", "kernels")


config = _Config()
