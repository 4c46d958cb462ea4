"""Argument handling shared by the funcgrad.scipy.stats distributions."""
from __future__ import annotations

import math
from typing import Any

from funcgrad.scipy.special import _floats

LOG_2PI = math.log(2.0 * math.pi)
NAN, INF = float("nan"), float("inf")


def promote(*xs: Any, broadcast: bool = True) -> list:
    """The operands as arrays of their common float dtype (ints and bools: the default float).

    With ``broadcast`` (elementwise distributions) operands that do not broadcast together raise a
    ValueError naming the distribution function."""
    return _floats(*xs, check=broadcast)

