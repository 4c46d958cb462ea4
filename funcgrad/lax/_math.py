"""More of jax.lax's elementwise functions: asinh, acosh, atanh, cbrt, population_count, and the
primitive objects of :mod:`funcgrad.primitives.elementwise_more` (which funcgrad.numpy binds)."""
from __future__ import annotations

from typing import Any

from funcgrad._core import get_aval
from funcgrad.primitives.elementwise import convert

from funcgrad.primitives.elementwise_more import (arccosh_p, arcsinh_p, arctanh_p, cbrt_p, fmod_p, frexp_exponent_p,
                                                  frexp_mantissa_p, gcd_p, lcm_p, logaddexp_p, population_count_p)

__all__ = ["acosh", "arccosh_p", "arcsinh_p", "arctanh_p", "asinh", "atanh", "cbrt", "cbrt_p", "fmod_p",
           "frexp_exponent_p", "frexp_mantissa_p", "gcd_p", "lcm_p", "logaddexp_p", "population_count",
           "population_count_p"]


def asinh(x: Any) -> Any:
    """Inverse hyperbolic sine, elementwise (float operands).

    >>> lax.asinh(fnp.array([0.5, 2.0]))
    Array([0.4812, 1.4436 ], dtype=float32)
    """
    return arcsinh_p.bind(x)


def acosh(x: Any) -> Any:
    """Inverse hyperbolic cosine, elementwise (NaN below 1).

    >>> lax.acosh(fnp.array([1.0, 2.0]))
    Array([0.      , 1.3170], dtype=float32)
    """
    return arccosh_p.bind(x)


def atanh(x: Any) -> Any:
    """Inverse hyperbolic tangent, elementwise (+-inf at +-1).

    >>> lax.atanh(fnp.array([0.25, 0.5]))
    Array([0.2554, 0.5493], dtype=float32)
    """
    return arctanh_p.bind(x)


def cbrt(x: Any) -> Any:
    """Real cube root, elementwise.

    >>> lax.cbrt(fnp.array([-0.5, 1.5]))
    Array([-0.7937,  1.1447], dtype=float32)
    """
    return cbrt_p.bind(x)


def population_count(x: Any) -> Any:
    """The number of 1 bits of each element (two's complement for signed integers: -1 has them
    all), in ``x``'s dtype (as JAX).

    >>> lax.population_count(fnp.array([7, 8, -1]))
    Array([ 3,  1, 32], dtype=int32)
    """
    return convert(population_count_p.bind(x), get_aval(x).dtype)
