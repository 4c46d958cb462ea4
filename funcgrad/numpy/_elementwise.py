"""Elementwise functions with numpy names and broadcasting."""
from __future__ import annotations

import sys
from typing import Any

from funcgrad._core import bind
from funcgrad.numpy._base import operand, promote, promote_inexact
from funcgrad import lax
from funcgrad.typing import Array, ArrayLike

_NO_PARAMS: dict = {}

# Arithmetic ---------------------------------------------------------------


def add(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x + y`` with numpy broadcasting.

    >>> fnp.add(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Array([4., 6.], dtype=float32)
    """
    return bind(lax.add_p, promote(x, y), _NO_PARAMS)


def subtract(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x - y`` (broadcast, dtypes promoted).

    >>> fnp.subtract(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Array([-2., -2.], dtype=float32)
    """
    return bind(lax.sub_p, promote(x, y), _NO_PARAMS)


def multiply(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x * y`` (broadcast, dtypes promoted).

    >>> fnp.multiply(fnp.array([1.0, 2.0]), fnp.array([3.0, 4.0]))
    Array([3., 8.], dtype=float32)
    """
    return bind(lax.mul_p, promote(x, y), _NO_PARAMS)


def divide(x1: ArrayLike, x2: ArrayLike) -> Array:
    """True division; integers are divided in the default float dtype.

    >>> fnp.divide(fnp.array([1, 3]), 2)
    Array([0.5, 1.5], dtype=float32)
    """
    return lax.div_p.bind(*promote_inexact(x1, x2))


true_divide = divide


def floor_divide(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``x1 // x2`` (zero gradient, as in JAX).

    >>> fnp.floor_divide(fnp.array([7, -7]), 2)
    Array([ 3, -4], dtype=int32)
    """
    return lax.floor_divide_p.bind(*promote(x1, x2))


def mod(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``x1 % x2`` with the sign of ``x2`` (numpy's convention).

    >>> fnp.mod(fnp.array([5, -5]), 3)
    Array([2, 1], dtype=int32)
    """
    return lax.mod_p.bind(*promote(x1, x2))


remainder = mod


def power(x1: ArrayLike, x2: ArrayLike) -> Array:
    """``x1 ** x2``, elementwise with broadcasting.

    >>> fnp.power(fnp.array([2.0, 3.0]), 2)
    Array([4., 9.], dtype=float32)
    """
    return lax.pow_p.bind(*promote(x1, x2))


def negative(x: ArrayLike) -> Array:
    """Elementwise ``-x``.

    >>> fnp.negative(fnp.array([1.0, -2.0]))
    Array([-1.,  2.], dtype=float32)
    """
    return lax.neg_p.bind(operand(x))


def positive(x: ArrayLike) -> Array:
    """Elementwise ``+x`` (a copy of ``x``).

    >>> fnp.positive(fnp.array([1.0, -2.0]))
    Array([ 1., -2.], dtype=float32)
    """
    return operand(x)


def square(x: ArrayLike) -> Array:
    """Elementwise ``x * x``.

    >>> fnp.square(fnp.array([3.0, -2.0]))
    Array([9., 4.], dtype=float32)
    """
    x = operand(x)
    return lax.mul_p.bind(x, x)


def reciprocal(x: ArrayLike) -> Array:
    """Elementwise ``1 / x``.

    >>> fnp.reciprocal(fnp.array([2.0, 4.0]))
    Array([0.5 , 0.25], dtype=float32)
    """
    (x,) = promote_inexact(x)
    return lax.div_p.bind(1.0, x)


def maximum(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise max; at ties each side gets half the gradient (JAX's convention).

    >>> fnp.maximum(fnp.array([1.0, 5.0]), fnp.array([3.0, 4.0]))
    Array([3., 5.], dtype=float32)
    """
    return lax.maximum_p.bind(*promote(x, y))


def minimum(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise minimum (NaN propagates).

    >>> fnp.minimum(fnp.array([1.0, 5.0]), fnp.array([3.0, 4.0]))
    Array([1., 4.], dtype=float32)
    """
    return lax.minimum_p.bind(*promote(x, y))


def arctan2(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The angle of the point ``(x2, x1)``: ``arctan(x1 / x2)`` in the right quadrant.

    >>> fnp.arctan2(fnp.array([1.0]), fnp.array([-1.0]))
    Array([2.3562], dtype=float32)
    """
    return lax.arctan2_p.bind(*promote_inexact(x1, x2))


def abs(x: ArrayLike) -> Array:  # noqa: A001 - numpy's name
    """|x|; the gradient at 0 is 0 (sign(0), JAX's convention).

    >>> fnp.abs(fnp.array([-1.5, 2.0]))
    Array([1.5, 2. ], dtype=float32)
    """
    return lax.abs_p.bind(operand(x))


absolute = abs


def sign(x: ArrayLike) -> Array:
    """Elementwise sign: -1, 0 or 1 (in ``x``'s dtype); zero gradient.

    >>> fnp.sign(fnp.array([-3.0, 0.0, 2.0]))
    Array([-1.,  0.,  1.], dtype=float32)
    """
    return lax.sign_p.bind(operand(x))


# Transcendental (integers promote to the default float) --------------------




def _inexact_unary(p):
    def f(x: Any) -> Any:
        return bind(p, promote_inexact(x), _NO_PARAMS)
    f.__name__ = p.name
    f.__doc__ = f"Elementwise ``{p.name}``; integer inputs are computed in the default float dtype."
    return f


exp = _inexact_unary(lax.exp_p)
exp2 = _inexact_unary(lax.exp2_p)
log = _inexact_unary(lax.log_p)
log2 = _inexact_unary(lax.log2_p)
log1p = _inexact_unary(lax.log1p_p)
expm1 = _inexact_unary(lax.expm1_p)
sqrt = _inexact_unary(lax.sqrt_p)
sin = _inexact_unary(lax.sin_p)
cos = _inexact_unary(lax.cos_p)
tan = _inexact_unary(lax.tan_p)
tanh = _inexact_unary(lax.tanh_p)
arcsin = _inexact_unary(lax.arcsin_p)
arccos = _inexact_unary(lax.arccos_p)
arctan = _inexact_unary(lax.arctan_p)
sinh = _inexact_unary(lax.sinh_p)
cosh = _inexact_unary(lax.cosh_p)
floor = _inexact_unary(lax.floor_p)
ceil = _inexact_unary(lax.ceil_p)


# One checked example for each function above made by _inexact_unary: (function, input, printed result).
_UNARY_EXAMPLES = (
    (exp, "[0.0, 1.0]", "Array([1. , 2.7183], dtype=float32)"),
    (exp2, "[0.0, 3.0]", "Array([1., 8.], dtype=float32)"),
    (log, "[1.0, 2.0]", "Array([0. , 0.6931], dtype=float32)"),
    (log2, "[1.0, 8.0]", "Array([0., 3.], dtype=float32)"),
    (log1p, "[0.0, 1.0]", "Array([0. , 0.6931], dtype=float32)"),
    (expm1, "[0.0, 1.0]", "Array([0. , 1.7183], dtype=float32)"),
    (sqrt, "[4.0, 2.0]", "Array([2. , 1.4142], dtype=float32)"),
    (sin, "[0.0, 1.0]", "Array([0. , 0.8415], dtype=float32)"),
    (cos, "[0.0, 1.0]", "Array([1. , 0.5403], dtype=float32)"),
    (tan, "[0.0, 1.0]", "Array([0. , 1.5574], dtype=float32)"),
    (tanh, "[0.0, 1.0]", "Array([0. , 0.7616], dtype=float32)"),
    (arcsin, "[0.0, 0.5]", "Array([0. , 0.5236], dtype=float32)"),
    (arccos, "[0.0, 0.5]", "Array([1.5708, 1.0472], dtype=float32)"),
    (arctan, "[0.0, 1.0]", "Array([0. , 0.7854], dtype=float32)"),
    (sinh, "[0.0, 1.0]", "Array([0. , 1.1752], dtype=float32)"),
    (cosh, "[0.0, 1.0]", "Array([1. , 1.5431], dtype=float32)"),
    (floor, "[-1.5, 1.2]", "Array([-2., 1.], dtype=float32)"),
    (ceil, "[-1.5, 1.2]", "Array([-1., 2.], dtype=float32)"),
)
for _fn, _example, _result in _UNARY_EXAMPLES:
    _fn.__doc__ += f"\n\n    >>> fnp.{_fn.__name__}(fnp.array({_example}))\n    {_result}\n"


def round(a: ArrayLike, decimals: int = 0, out: None = None) -> Array:  # noqa: A001 - numpy's name
    """Round half to even (numpy's rule) to ``decimals`` places; zero gradient.

    >>> fnp.round(fnp.array([0.5, 1.5, 2.675]), 2)         # float32 2.675 * 100 rounds to 268, as numpy
    Array([0.5 , 1.5 , 2.68], dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("round: out= is not supported (funcgrad arrays are immutable)")
    a = operand(a)
    if not isinstance(a, (bool, int, float)) and a.dtype.kind in "iub":   # integers are already round (JAX)
        if decimals < 0:
            raise NotImplementedError("round: integer round is not implemented for decimals < 0 (as in JAX); "
                                      "convert to float first")
        return a
    (x,) = promote_inexact(a)
    if decimals == 0:
        return lax.round_p.bind(x)
    scale = 10.0 ** decimals
    return lax.div_p.bind(lax.round_p.bind(lax.mul_p.bind(x, scale)), scale)


around = round


def isfinite(x: ArrayLike) -> Array:
    """Elementwise test: neither inf nor NaN (bool).

    >>> fnp.isfinite(fnp.array([1.0, np.inf, np.nan]))
    Array([ True, False, False], dtype=bool)
    """
    return lax.isfinite_p.bind(operand(x))


def isnan(x: ArrayLike) -> Array:
    """Elementwise test for NaN (bool).

    >>> fnp.isnan(fnp.array([1.0, np.inf, np.nan]))
    Array([False, False,  True], dtype=bool)
    """
    return lax.isnan_p.bind(operand(x))


# Comparisons and logic --------------------------------------------------


def equal(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x == y`` (bool).

    >>> fnp.equal(fnp.array([1, 2, 3]), fnp.array([1, 0, 3]))
    Array([ True, False,  True], dtype=bool)
    """
    return lax.eq_p.bind(*promote(x, y))


def not_equal(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x != y`` (bool).

    >>> fnp.not_equal(fnp.array([1, 2, 3]), fnp.array([1, 0, 3]))
    Array([False,  True, False], dtype=bool)
    """
    return lax.ne_p.bind(*promote(x, y))


def less(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x < y`` (bool).

    >>> fnp.less(fnp.array([1, 2, 3]), fnp.array([2, 2, 2]))
    Array([ True, False, False], dtype=bool)
    """
    return lax.lt_p.bind(*promote(x, y))


def less_equal(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x <= y`` (bool).

    >>> fnp.less_equal(fnp.array([1, 2, 3]), fnp.array([2, 2, 2]))
    Array([ True,  True, False], dtype=bool)
    """
    return lax.le_p.bind(*promote(x, y))


def greater(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x > y`` (bool).

    >>> fnp.greater(fnp.array([1, 2, 3]), fnp.array([2, 2, 2]))
    Array([False, False,  True], dtype=bool)
    """
    return lax.gt_p.bind(*promote(x, y))


def greater_equal(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x >= y`` (bool).

    >>> fnp.greater_equal(fnp.array([1, 2, 3]), fnp.array([2, 2, 2]))
    Array([False,  True,  True], dtype=bool)
    """
    return lax.ge_p.bind(*promote(x, y))


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


def logical_and(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x and y`` on truth values (any dtype; nonzero is true).

    >>> fnp.logical_and(fnp.array([True, True, False]), fnp.array([True, False, False]))
    Array([ True, False, False], dtype=bool)
    """
    return lax.and_p.bind(_truth(x), _truth(y))


def logical_or(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x or y`` (bool).

    >>> fnp.logical_or(fnp.array([True, True, False]), fnp.array([True, False, False]))
    Array([ True,  True, False], dtype=bool)
    """
    return lax.or_p.bind(_truth(x), _truth(y))


def logical_xor(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x xor y`` (bool).

    >>> fnp.logical_xor(fnp.array([True, True, False]), fnp.array([True, False, False]))
    Array([False,  True, False], dtype=bool)
    """
    return lax.xor_p.bind(_truth(x), _truth(y))


def logical_not(x: ArrayLike) -> Array:
    """Elementwise ``not x`` (bool).

    >>> fnp.logical_not(fnp.array([True, False]))
    Array([False,  True], dtype=bool)
    """
    return lax.logical_not_p.bind(_truth(x))


def where(condition: ArrayLike, x: ArrayLike | None = None, y: ArrayLike | None = None, *, size: Any = None,
          fill_value: ArrayLike | None = None) -> Any:
    """``x`` where ``condition`` else ``y`` (broadcast together).  With ``condition`` alone it is
    ``nonzero(condition, size=, fill_value=)``, as numpy and JAX.

    The gradient flows only to the chosen side, but the side not chosen is
    still evaluated: ``where(x > 0, sqrt(x), 0)`` has a NaN gradient at 0
    because sqrt's derivative there is inf and ``0 * inf = NaN``.  Use the
    double-where pattern ``where(x > 0, sqrt(where(x > 0, x, 1)), 0)``.

    >>> fnp.where(fnp.array([True, False]), 1.0, 2.0)
    Array([1., 2.], dtype=float32)
    """
    if x is None and y is None:
        fnp = sys.modules["funcgrad.numpy"]   # the package (an import here would be a cycle)
        if not hasattr(fnp, "nonzero"):
            raise NotImplementedError("where(condition) with one argument needs funcgrad.numpy.nonzero")
        return fnp.nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    if size is not None or fill_value is not None:
        raise ValueError("where: size= and fill_value= apply only to the one-argument form where(condition)")
    x, y = promote(x, y)
    return lax.select_p.bind(_truth(condition), x, y)


def clip(arr: ArrayLike | None = None, min: Any = None, max: Any = None) -> Array:  # noqa: A002 - JAX's names
    """``minimum(maximum(arr, min), max)`` (JAX's keywords ``min``/``max``; positional
    ``clip(x, lo, hi)`` as numpy's ``a_min``/``a_max``).  At a bound the gradient is 1/2 (ties).

    >>> fnp.clip(fnp.array([-1.0, 0.5, 2.0]), 0.0, 1.0)
    Array([0. , 0.5, 1. ], dtype=float32)
    >>> fnp.clip(fnp.array([-1.0, 2.0]), max=1.0)
    Array([-1.,  1.], dtype=float32)
    """
    if arr is None:
        raise ValueError("clip: no input was provided (clip(x, min, max))")
    out = operand(arr)
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    return out


def stop_gradient(x: ArrayLike) -> Array:
    """The identity, with a zero derivative.

    >>> fg.grad(lambda x: fnp.sum(x * fnp.stop_gradient(x)))(fnp.array([1.0, 2.0]))   # only the first factor
    Array([1., 2.], dtype=float32)
    """
    from funcgrad.tree_util import tree_map
    return tree_map(lambda v: lax.stop_gradient_p.bind(operand(v)), x)
