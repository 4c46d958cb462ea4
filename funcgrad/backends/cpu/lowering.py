"""How primitives become code inside the CPU's fused numba kernels.

Each lowering is registered against the primitive object for the numba
compiler (:mod:`funcgrad.compiler.codegen`); a primitive without one is
never fused. Registered here, on import of the CPU backend, together with
the runtime the generated kernels run with (the fast ``exp`` helpers and
the numba threading hooks). For example, after this module has run::

    >>> from funcgrad.compiler.codegen import lowering
    >>> from funcgrad.primitives.elementwise import sin_p
    >>> isinstance(lowering(sin_p), Elementwise)
    True

Adding a fusible elementwise primitive is one line in the tables below: the
template of its expression, ``{0}`` (and ``{1}``) standing for the operands.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from funcgrad import _core
from funcgrad.backends.cpu import _fastmath, _threads
from funcgrad.compiler import codegen
from funcgrad.compiler.codegen import COMPILER, Elementwise, Op, Reduction, Ref, binary, unary
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import elementwise_more as EM
from funcgrad.primitives import reduce as R
from funcgrad.primitives import shape as S

_UNARY = {
    E.neg_p: "-{0}", E.exp2_p: "np.exp2({0})", E.log_p: "np.log({0})", E.log2_p: "np.log2({0})",
    E.log1p_p: "np.log1p({0})", E.expm1_p: "np.expm1({0})", E.sqrt_p: "np.sqrt({0})", E.sin_p: "np.sin({0})",
    E.cos_p: "np.cos({0})", E.tan_p: "np.tan({0})", E.arcsin_p: "np.arcsin({0})",
    E.arccos_p: "np.arccos({0})", E.arctan_p: "np.arctan({0})", E.sinh_p: "np.sinh({0})",
    E.cosh_p: "np.cosh({0})", E.abs_p: "np.abs({0})", E.sign_p: "np.sign({0})", E.floor_p: "np.floor({0})",
    E.ceil_p: "np.ceil({0})", E.isnan_p: "np.isnan({0})", E.isfinite_p: "np.isfinite({0})",
    E.logical_not_p: "(not {0})", E.stop_gradient_p: "{0}", E.name_p: "{0}",
    EM.arcsinh_p: "np.arcsinh({0})", EM.arccosh_p: "np.arccosh({0})", EM.arctanh_p: "np.arctanh({0})",
    EM.cbrt_p: "np.cbrt({0})",
}
_BINARY = {
    E.add_p: "{0} + {1}", E.sub_p: "{0} - {1}", E.mul_p: "{0} * {1}", E.div_p: "{0} / {1}",
    E.pow_p: "{0} ** {1}", E.maximum_p: "np.maximum({0}, {1})", E.minimum_p: "np.minimum({0}, {1})",
    E.arctan2_p: "np.arctan2({0}, {1})", E.eq_p: "{0} == {1}", E.ne_p: "{0} != {1}", E.lt_p: "{0} < {1}",
    E.le_p: "{0} <= {1}", E.gt_p: "{0} > {1}", E.ge_p: "{0} >= {1}", E.and_p: "({0} and {1})",
    E.or_p: "({0} or {1})", E.xor_p: "({0} != {1})",
    EM.logaddexp_p: "np.logaddexp({0}, {1})", EM.fmod_p: "np.fmod({0}, {1})",
}

# The helpers generated kernels import (``exp_f32``/``exp_f64`` below).
_HELPERS = ("from funcgrad.backends.cpu._fastmath import exp_f32, exp_f64, tanh_f32, bf16_round, "
            "bf16_round_opaque, bf16_bits, bf16_widen")


def _exp(op: Op, ref: Ref) -> str:
    # A vectorisable exp (_fastmath): ~1 ulp, several times libm's speed.
    x = ref(op.args[0])
    if op.dtype == codegen.BF16:   # computed in float32 (then rounded)
        return f"exp_f32({x})"
    if op.dtype.name in ("float32", "float64"):
        return f"exp_{op.dtype.name[0]}{op.dtype.name[-2:]}({x})"
    return f"np.exp({x})"


def _tanh_of(x: str, dtype: np.dtype) -> str:
    # float32: a vectorisable tanh (_fastmath); numba's np.tanh is a scalar libm call.
    return f"tanh_f32({x})" if dtype in (np.float32, codegen.BF16) else f"np.tanh({x})"


def _tanh(op: Op, ref: Ref) -> str:
    return _tanh_of(ref(op.args[0]), op.dtype)


def _logistic(op: Op, ref: Ref) -> str:
    half = ref(0.5)   # first: the constants are numbered in the order they are met
    return f"({_tanh_of(f'{ref(op.args[0])} * {half}', op.dtype)} * {half} + {half})"


def _select(op: Op, ref: Ref) -> str:
    c, x, y = op.args
    return f"({ref(x, y)} if {ref(c)} else {ref(y, x)})"


def _convert(op: Op, ref: Ref) -> str:
    target = op.params["dtype"]
    x = ref(op.args[0])
    if target == codegen.BF16:   # to float32, then rounded (codegen: every bfloat16 result is)
        return f"np.float32({x})"
    return f"({x} != 0)" if target.kind == "b" else f"np.{target.name}({x})"


def _lowest(dtype: np.dtype) -> Any:
    if dtype.kind == "b":
        return False
    return int(np.iinfo(dtype).min) if dtype.kind in "iu" else -np.inf


def _highest(dtype: np.dtype) -> Any:
    if dtype.kind == "b":
        return True
    return int(np.iinfo(dtype).max) if dtype.kind in "iu" else np.inf


def _keep(cmp: str) -> tuple[str, ...]:
    # NaN propagates, as in numpy's max/min.
    return (f"if {{x}} {cmp} acc or {{x}} != {{x}}:", "    acc = {x}")


def _helpers_digest() -> str:
    with open(_fastmath.__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


# Lowerings giving bit-for-bit numpy's result (IEEE arithmetic, comparisons, selection):
# a group of these may run on numpy until its kernel is compiled (codegen.is_exact).
_EXACT = {E.neg_p, E.abs_p, E.floor_p, E.ceil_p, E.sqrt_p, E.isnan_p, E.isfinite_p, E.logical_not_p,
          E.stop_gradient_p, E.name_p, E.add_p, E.sub_p, E.mul_p, E.eq_p, E.ne_p, E.lt_p, E.le_p, E.gt_p, E.ge_p,
          E.and_p, E.or_p, E.xor_p}


def register() -> None:
    """Register the numba lowerings and install the kernels' runtime (idempotent)."""
    for prim, template in _UNARY.items():
        _core.register_lowering(prim, COMPILER, unary(template, exact=prim in _EXACT))
    for prim, template in _BINARY.items():
        _core.register_lowering(prim, COMPILER, binary(template, exact=prim in _EXACT))
    _core.register_lowering(E.exp_p, COMPILER, Elementwise(_exp, reassoc=True))
    _core.register_lowering(E.tanh_p, COMPILER, Elementwise(_tanh, reassoc=True))
    _core.register_lowering(E.logistic_p, COMPILER, Elementwise(_logistic, reassoc=True))
    _core.register_lowering(E.select_p, COMPILER, Elementwise(_select, exact=True))
    _core.register_lowering(E.convert_p, COMPILER, Elementwise(_convert))
    # The kernel's index patterns do the broadcasting: the value passes through.
    _core.register_lowering(S.broadcast_to_p, COMPILER, unary("{0}", free=True, exact=True))
    _core.register_lowering(R.reduce_sum_p, COMPILER, Reduction(lambda dtype: 0, ("acc += {x}",)))
    _core.register_lowering(R.reduce_max_p, COMPILER, Reduction(_lowest, _keep(">")))
    _core.register_lowering(R.reduce_min_p, COMPILER, Reduction(_highest, _keep("<")))
    codegen.set_runtime(codegen.Runtime(imports=_HELPERS, helpers_digest=_helpers_digest(),
                                        prepare=_threads.prepare, guard=_threads.guard))
