"""Global switches: float64 support and NaN debugging.

Both can be set by environment variable before import or by a call at run
time::

    FUNCGRAD_ENABLE_X64=1      # or fg.config.update("enable_x64", True)
    FUNCGRAD_DEBUG_NANS=1      # or fg.config.update("debug_nans", True)

With x64 disabled (the default, as in JAX) float64/int64/uint64 inputs are
stored as float32/int32/uint32.
"""
from __future__ import annotations

import os


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class _Config:
    """Mutable process-wide settings read on the hot path as plain attributes."""

    __slots__ = ("enable_x64", "debug_nans")

    def __init__(self) -> None:
        self.enable_x64 = _env_flag("FUNCGRAD_ENABLE_X64")
        self.debug_nans = _env_flag("FUNCGRAD_DEBUG_NANS")

    def update(self, name: str, value: bool) -> None:
        """Set a switch: ``config.update("enable_x64", True)``."""
        if name not in self.__slots__:
            raise ValueError(f"unknown config option {name!r}; known options: {', '.join(self.__slots__)}")
        setattr(self, name, bool(value))
        if name == "enable_x64":
            from funcgrad import _dtypes
            _dtypes._refresh_defaults()

    def __repr__(self) -> str:
        return f"Config(enable_x64={self.enable_x64}, debug_nans={self.debug_nans})"


config = _Config()
