"""``funcgrad.numpy``: numpy's API over funcgrad's differentiable primitives.

>>> import funcgrad.numpy as fnp
>>> x = fnp.linspace(0.0, 1.0, 5)      # f32[5]
>>> fnp.sum(fnp.sin(x) * x)
Array(1.6543, dtype=float32)
"""
from funcgrad.numpy import fft, linalg
from funcgrad.numpy._creation import (arange, array, asarray, eye, from_dlpack, full, full_like, linspace, ones,
                                      ones_like, zeros, zeros_like)
from funcgrad.numpy._elementwise import (abs, absolute, add, arccos, arcsin, arctan, arctan2, around, ceil, clip,
                                         cos, cosh, divide, equal, exp, exp2, expm1, floor, floor_divide, greater,
                                         greater_equal, isfinite, isnan, less, less_equal, log, log1p, log2,
                                         logical_and, logical_not, logical_or, logical_xor, maximum, minimum, mod,
                                         multiply, negative, not_equal, positive, power, reciprocal, remainder,
                                         round, sign, sin, sinh, sqrt, square, stop_gradient, subtract, tan, tanh,
                                         true_divide, where)
from funcgrad.numpy._linalg import dot, einsum, inner, matmul, outer, tensordot, vdot
from funcgrad.numpy._methods import install as _install
from funcgrad.numpy._reductions import (amax, amin, argmax, argmin, cumsum, logsumexp, max, mean, min, prod, std,
                                        sum, var)
from funcgrad.numpy._shape import (astype, broadcast_arrays, broadcast_to, concatenate, expand_dims, flip, moveaxis,
                                   ndim, pad, ravel, repeat, reshape, shape, size, split, squeeze, stack,
                                   swapaxes, take, take_along_axis, tile, transpose, tril, triu)
from funcgrad._core import Array as ndarray
import ml_dtypes as _ml_dtypes
import numpy as _np
import sys as _sys

float16, float32, float64 = _np.float16, _np.float32, _np.float64
bfloat16 = _ml_dtypes.bfloat16  # the numpy scalar type ml_dtypes registers (as jax.numpy.bfloat16)
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64, bool_ = _np.uint8, _np.uint16, _np.uint32, _np.uint64, _np.bool_
dtype = _np.dtype
# numpy's abstract scalar types, for issubdtype (bfloat16 counts as floating there, as in JAX); like dtype and
# the 16/64-bit unsigned types, attributes only (not in __all__)
generic, number, inexact, floating, complexfloating = _np.generic, _np.number, _np.inexact, _np.floating, \
    _np.complexfloating
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None

__all__ = [  # the public names; linalg is a submodule
    "abs", "absolute", "add", "amax", "amin", "arange", "arccos", "arcsin", "arctan", "arctan2", "argmax", "argmin",
    "around", "array", "asarray", "astype", "bool_", "broadcast_arrays", "broadcast_to", "ceil", "clip", "concatenate",
    "cos", "cosh", "cumsum", "divide", "dot", "e", "einsum", "equal", "exp", "exp2", "expand_dims", "expm1", "eye",
    "bfloat16", "flip", "float16", "float32", "float64", "floor", "floor_divide", "full", "full_like", "greater", "greater_equal",
    "inf", "inner", "int16", "int32", "int64", "int8", "isfinite", "isnan", "less", "less_equal", "linspace", "log",
    "log1p", "log2", "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "matmul", "max", "maximum",
    "mean", "min", "minimum", "mod", "moveaxis", "multiply", "nan", "ndarray", "ndim", "negative", "newaxis",
    "not_equal", "ones", "ones_like", "outer", "pad", "pi", "positive", "power", "prod", "ravel", "reciprocal",
    "remainder", "repeat", "reshape", "round", "shape", "sign", "sin", "sinh", "size", "split", "sqrt", "square",
    "squeeze", "stack", "std", "stop_gradient", "subtract", "sum", "swapaxes", "take", "take_along_axis", "tan", "tanh",
    "tensordot", "tile", "transpose", "tril", "triu", "true_divide", "uint32", "uint8", "var", "vdot", "where", "zeros",
    "zeros_like"
]

from funcgrad.numpy._arrays import *  # noqa: E402,F401,F403
from funcgrad.numpy._math import *  # noqa: E402,F401,F403
from funcgrad.numpy._sorting import *  # noqa: E402,F401,F403
from funcgrad.numpy._statistics import *  # noqa: E402,F401,F403
from funcgrad.numpy._differences import *  # noqa: E402,F401,F403
from funcgrad.numpy._polynomial import *  # noqa: E402,F401,F403
from funcgrad.numpy._complex import *  # noqa: E402,F401,F403
from funcgrad.numpy._rearrange import *  # noqa: E402,F401,F403
from funcgrad.numpy._diagonals import *  # noqa: E402,F401,F403
from funcgrad.numpy._index_helpers import *  # noqa: E402,F401,F403
from funcgrad.numpy._selection import *  # noqa: E402,F401,F403
from funcgrad.numpy._sets import *  # noqa: E402,F401,F403
from funcgrad.numpy._packbits import *  # noqa: E402,F401,F403
from funcgrad.numpy._bitwise import *  # noqa: E402,F401,F403
from funcgrad.numpy._predicates import *  # noqa: E402,F401,F403
from funcgrad.numpy._vectorize import *  # noqa: E402,F401,F403
from funcgrad.numpy._io import *  # noqa: E402,F401,F403
from funcgrad.numpy import _arrays, _complex, _differences, _math, _polynomial, _sorting, _statistics  # noqa: E402
from funcgrad.numpy import (_bitwise, _diagonals, _index_helpers, _io, _packbits, _predicates,  # noqa: E402
                            _rearrange, _selection, _sets, _vectorize)
from funcgrad.numpy._linalg import cross, einsum_path, matvec, vecdot, vecmat  # noqa: E402,F401

__all__ = sorted(set(__all__) | set(_arrays.__all__) | set(_math.__all__) | set(_sorting.__all__)
                 | set(_statistics.__all__) | set(_differences.__all__) | set(_polynomial.__all__)
                 | set(_complex.__all__) | set(_rearrange.__all__) | set(_diagonals.__all__)
                 | set(_index_helpers.__all__) | set(_selection.__all__) | set(_sets.__all__) | set(_packbits.__all__)
                 | set(_bitwise.__all__) | set(_predicates.__all__) | set(_vectorize.__all__) | set(_io.__all__)
                 | {"cross", "einsum_path", "from_dlpack", "matvec", "vecdot", "vecmat"})

_install(_sys.modules[__name__])
del _install

# numpy's own functions and ufuncs (np.sin(x), np.sum(x)) on funcgrad arrays run the ones above.
from funcgrad import _numpy_dispatch as _dispatch  # noqa: E402  (needs this module complete)
_dispatch.install()
del _dispatch
