"""Argument handling shared by the funcgrad.scipy.stats distributions."""
from __future__ import annotations

import math
from typing import Any

import funcgrad.numpy as fnp
from funcgrad.scipy.special import _floats

LOG_2PI = math.log(2.0 * math.pi)
NAN, INF = float("nan"), float("inf")


def promote(*xs: Any) -> list:
    """The operands as arrays of their common float dtype (ints and bools: the default float)."""
    return _floats(*xs)


def log_of(p: Any) -> Any:
    """``log(p)`` (a probability: 0 gives -inf, quietly)."""
    return fnp.log(p)


def positive_scale(val: Any, scale: Any) -> Any:
    """``val``, NaN where ``scale <= 0`` (scipy's convention for an invalid scale)."""
    return fnp.where(scale > 0, val, NAN)
