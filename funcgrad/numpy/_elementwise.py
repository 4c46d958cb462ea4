"""Elementwise functions with numpy names and broadcasting."""
from __future__ import annotations

from typing import Any

from funcgrad._core import bind
from funcgrad.numpy._base import operand, promote, promote_inexact
from funcgrad.primitives import elementwise as E

_NO_PARAMS: dict = {}

# Arithmetic ---------------------------------------------------------------


def add(x: Any, y: Any) -> Any:
    """Elementwise ``x + y`` with numpy broadcasting."""
    return bind(E.add_p, promote(x, y), _NO_PARAMS)


def subtract(x: Any, y: Any) -> Any:
    return bind(E.sub_p, promote(x, y), _NO_PARAMS)


def multiply(x: Any, y: Any) -> Any:
    return bind(E.mul_p, promote(x, y), _NO_PARAMS)


def divide(x: Any, y: Any) -> Any:
    """True division; integers are divided in the default float dtype."""
    return E.div_p.bind(*promote_inexact(x, y))


true_divide = divide


def floor_divide(x: Any, y: Any) -> Any:
    """``x // y`` (zero gradient, as in JAX)."""
    return E.floor_divide_p.bind(*promote(x, y))


def mod(x: Any, y: Any) -> Any:
    """``x % y`` with the sign of ``y`` (numpy's convention)."""
    return E.mod_p.bind(*promote(x, y))


remainder = mod


def power(x: Any, y: Any) -> Any:
    return E.pow_p.bind(*promote(x, y))


def negative(x: Any) -> Any:
    return E.neg_p.bind(operand(x))


def positive(x: Any) -> Any:
    return operand(x)


def square(x: Any) -> Any:
    x = operand(x)
    return E.mul_p.bind(x, x)


def reciprocal(x: Any) -> Any:
    (x,) = promote_inexact(x)
    return E.div_p.bind(1.0, x)


def maximum(x: Any, y: Any) -> Any:
    """Elementwise max; at ties each side gets half the gradient (JAX's convention)."""
    return E.maximum_p.bind(*promote(x, y))


def minimum(x: Any, y: Any) -> Any:
    return E.minimum_p.bind(*promote(x, y))


def arctan2(y: Any, x: Any) -> Any:
    return E.arctan2_p.bind(*promote_inexact(y, x))


def abs(x: Any) -> Any:  # noqa: A001 - numpy's name
    """|x|; the gradient at 0 is 0 (sign(0), JAX's convention)."""
    return E.abs_p.bind(operand(x))


absolute = abs


def sign(x: Any) -> Any:
    return E.sign_p.bind(operand(x))


# Transcendental (integers promote to the default float) --------------------


def _inexact_unary(p):
    def f(x: Any) -> Any:
        return bind(p, promote_inexact(x), _NO_PARAMS)
    f.__name__ = p.name
    f.__doc__ = f"Elementwise ``{p.name}``; integer inputs are computed in the default float dtype."
    return f


exp = _inexact_unary(E.exp_p)
exp2 = _inexact_unary(E.exp2_p)
log = _inexact_unary(E.log_p)
log2 = _inexact_unary(E.log2_p)
log1p = _inexact_unary(E.log1p_p)
expm1 = _inexact_unary(E.expm1_p)
sqrt = _inexact_unary(E.sqrt_p)
sin = _inexact_unary(E.sin_p)
cos = _inexact_unary(E.cos_p)
tan = _inexact_unary(E.tan_p)
tanh = _inexact_unary(E.tanh_p)
arcsin = _inexact_unary(E.arcsin_p)
arccos = _inexact_unary(E.arccos_p)
arctan = _inexact_unary(E.arctan_p)
sinh = _inexact_unary(E.sinh_p)
cosh = _inexact_unary(E.cosh_p)
floor = _inexact_unary(E.floor_p)
ceil = _inexact_unary(E.ceil_p)


def round(x: Any, decimals: int = 0) -> Any:  # noqa: A001 - numpy's name
    """Round half to even (numpy's rule); zero gradient."""
    (x,) = promote_inexact(x)
    if decimals == 0:
        return E.round_p.bind(x)
    scale = 10.0 ** decimals
    return E.div_p.bind(E.round_p.bind(E.mul_p.bind(x, scale)), scale)


around = round


def isfinite(x: Any) -> Any:
    return E.isfinite_p.bind(operand(x))


def isnan(x: Any) -> Any:
    return E.isnan_p.bind(operand(x))


# Comparisons and logic --------------------------------------------------


def equal(x: Any, y: Any) -> Any:
    return E.eq_p.bind(*promote(x, y))


def not_equal(x: Any, y: Any) -> Any:
    return E.ne_p.bind(*promote(x, y))


def less(x: Any, y: Any) -> Any:
    return E.lt_p.bind(*promote(x, y))


def less_equal(x: Any, y: Any) -> Any:
    return E.le_p.bind(*promote(x, y))


def greater(x: Any, y: Any) -> Any:
    return E.gt_p.bind(*promote(x, y))


def greater_equal(x: Any, y: Any) -> Any:
    return E.ge_p.bind(*promote(x, y))


def _truth(x: Any) -> Any:
    """``x`` as bool (``x != 0``, numpy's truth value; NaN is true).

    The logical primitives only ever see bools: a fused kernel evaluates them
    with Python's ``and``/``or``/``!=``, which on numbers return an operand or
    compare values (``logical_xor(2.0, 3.0)`` would be True).
    """
    x = operand(x)
    if isinstance(x, (bool, int, float)) or x.dtype.kind != "b":
        return not_equal(x, 0)
    return x


def logical_and(x: Any, y: Any) -> Any:
    """Elementwise ``x and y`` on truth values (any dtype; nonzero is true)."""
    return E.and_p.bind(_truth(x), _truth(y))


def logical_or(x: Any, y: Any) -> Any:
    return E.or_p.bind(_truth(x), _truth(y))


def logical_xor(x: Any, y: Any) -> Any:
    return E.xor_p.bind(_truth(x), _truth(y))


def logical_not(x: Any) -> Any:
    return E.logical_not_p.bind(_truth(x))


def where(condition: Any, x: Any, y: Any) -> Any:
    """``x`` where ``condition`` else ``y`` (broadcast together).

    The gradient flows only to the chosen side, but the side not chosen is
    still evaluated: ``where(x > 0, sqrt(x), 0)`` has a NaN gradient at 0
    because sqrt's derivative there is inf and ``0 * inf = NaN``.  Use the
    double-where pattern ``where(x > 0, sqrt(where(x > 0, x, 1)), 0)``.
    """
    x, y = promote(x, y)
    return E.select_p.bind(_truth(condition), x, y)


def clip(x: Any, a_min: Any = None, a_max: Any = None) -> Any:
    """``minimum(maximum(x, a_min), a_max)``; at a bound the gradient is 1/2 (ties)."""
    out = operand(x)
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def stop_gradient(x: Any) -> Any:
    """The identity, with a zero derivative."""
    from funcgrad.tree_util import tree_map
    return tree_map(lambda v: E.stop_gradient_p.bind(operand(v)), x)
