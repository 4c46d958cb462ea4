"""What every function of ``funcgrad.scipy.special`` starts with: its operands as arrays of their common
float dtype (``_floats``, which also names the calling function in its errors; ``scipy.stats`` uses it
too), and checks of integer and static-int arguments. The functions themselves are in the sibling
modules ``_gamma``, ``_erf``, ``_logistic``, ``_bessel`` and ``_complex``.
"""
from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from funcgrad import _dtypes, lax
from funcgrad._core import Array, Tracer
from funcgrad.numpy._base import promote_inexact


_SCALARS = (bool, int, float)


def _caller_name() -> str:
    """The public function that called into these helpers: ``gammaln``, or ``norm.logpdf`` for stats."""
    frame = sys._getframe(2)
    while frame.f_back is not None and (frame.f_code.co_name.startswith("_")
                                        or frame.f_code.co_name in ("promote", "_floats")):
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "")
    if module.rsplit(".", 1)[0] == __package__:   # one of this package's modules: the function's own name
        return frame.f_code.co_name
    return f"{module.rsplit('.', 1)[-1]}.{frame.f_code.co_name}"


def _floats(*xs: Any, name: str | None = None, check: bool = True, complex_ok: bool = False) -> list:
    """The operands as arrays of their common float dtype (ints and bools: the default float).

    Operands that do not broadcast together raise a ValueError naming the calling function
    (``name``, else the caller's module and function: ``norm.logpdf``); complex operands raise a
    TypeError unless ``complex_ok`` (the functions JAX defines on complex numbers)."""
    xs = promote_inexact(*xs)
    if not complex_ok and any(isinstance(x, complex) or getattr(x, "dtype", None) is not None and
                              x.dtype.kind == "c" for x in xs):
        name = name or _caller_name()
        described = ", ".join(_dtypes.describe(x) for x in xs)
        raise TypeError(f"{name}: complex arguments ({described}) are not supported (as in JAX: it is defined "
                        "for real numbers); pass the real part (fnp.real(x)) if that is what you mean")
    shapes = [np.shape(x) for x in xs]
    if check and len(shapes) > 1:
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            name = name or _caller_name()
            described = ", ".join(_dtypes.describe(x) for x in xs)
            raise ValueError(f"{name}: the arguments ({described}) cannot be broadcast together (numpy "
                             "broadcasting: aligned from the right, each dimension must match or be 1)") from None
    dtype = _dtypes.result_type(*xs)
    return [lax.convert_element_type(x, dtype) if isinstance(x, _SCALARS + (complex,)) else x for x in xs]


def _unary(p, x, complex_ok: bool = False):
    (x,) = _floats(x, complex_ok=complex_ok)
    return p.bind(x)


def _check_int_dtype(name: str, what: str, n: Any) -> None:
    if isinstance(n, (Array, Tracer, np.ndarray)) and n.dtype.kind not in "iub":
        raise ValueError(f"{name}: argument `{what}` must be of integer type, got {n.dtype} "
                         f"(as in JAX); convert with .astype(int)")
    if isinstance(n, float):
        raise ValueError(f"{name}: argument `{what}` must be an integer, got the float {n!r} (as in JAX)")


def _static_int(name: str, what: str, value: Any) -> int:
    try:
        n = operator.index(value)
    except TypeError:
        if isinstance(value, (Array, np.ndarray)) and value.shape == () and value.dtype.kind in "iu":
            return int(value)
        raise TypeError(f"{name}: `{what}` must be a static Python int, got {type(value).__name__} "
                        f"{value!r:.40}") from None
    return int(n)
