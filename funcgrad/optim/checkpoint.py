"""Deprecated name of :mod:`funcgrad.optim.serialization` (``fg.checkpoint`` is rematerialisation).

``import funcgrad.optim.checkpoint`` keeps working, with a DeprecationWarning;
use ``funcgrad.optim.serialization`` instead (the same ``save`` and ``load``,
the same files).
"""
from funcgrad.optim import _warn_renamed
from funcgrad.optim.serialization import load, save

__all__ = ["save", "load"]

_warn_renamed(stacklevel=2)
