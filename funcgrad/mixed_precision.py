"""Mixed precision: float16 / bfloat16 helpers, cast policies, loss scaling.

**float16** is a regular funcgrad dtype (``fnp.float16``). Sums and matmuls
of float16 arrays accumulate in float32 and round once at the end:
``reduce_sum`` and ``cumsum`` upcast explicitly (numpy itself accumulates
float16 in float16 when reducing over a non-contiguous axis, or in
``cumsum``); numpy's float16 ``matmul``/``einsum`` already accumulate in
float32 (checked by ``tests/test_mixed_precision.py``).

**bfloat16** is a regular funcgrad dtype too (``fnp.bfloat16``, the
``ml_dtypes`` dtype JAX and CuPy use): ``x.astype(fnp.bfloat16)`` rounds to
nearest even, elementwise operations compute in float32 and round each
result, sums and matmuls accumulate in float32 and round once, and
gradients with respect to bfloat16 inputs are bfloat16. A :class:`Policy`
with compute dtype ``"bfloat16"`` casts to it, on the CPU and on GPU arrays
(where matmuls compute in float32, on TF32 tensor cores when
``CUPY_TF32=1``, which hold bf16 values exactly).

Raw bits, for code that exchanges bf16 data as ``uint16`` (file formats,
kernels of other libraries): :func:`to_bfloat16` rounds to nearest even and
returns the bits, :func:`from_bfloat16` widens them back to float32 exactly;
:func:`round_to_bfloat16` gives float32 values rounded to bf16 precision
with a straight-through gradient (an emulation for code that must stay in
float32).

>>> import funcgrad.numpy as fnp
>>> bits = to_bfloat16(fnp.array([1.0, 3.14159]))   # u16[2]: [0x3F80, 0x4049]
>>> from_bfloat16(bits)                              # f32[2]: [1.0, 3.140625]
Array([1.      , 3.1406], dtype=float32)
>>> policy = Policy("float32", "float16", "float32")
>>> half = policy.cast_to_compute({"w": fnp.ones((2, 2))})   # float16 leaves
>>> Policy(compute_dtype="bfloat16").cast_to_compute(fnp.ones(2)).dtype
dtype(bfloat16)

Dynamic loss scaling for float16 training (:class:`DynamicLossScale`) is a
pure value: pass it through ``jit`` like an optimizer state.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import Array, Tracer
from funcgrad.dtypes import default_float_dtype
from funcgrad.lax import (bitcast_convert_type, bitwise_and, bitwise_or, convert_element_type as convert, shift_left,
                          shift_right_logical)
from funcgrad.tree_util import register_dataclass, tree_leaves, tree_map

__all__ = ["BFLOAT16", "DynamicLossScale", "Policy", "all_finite", "from_bfloat16", "round_to_bfloat16",
           "select_tree", "to_bfloat16"]

BFLOAT16 = _dtypes.bfloat16  # what a Policy's "bfloat16" / "bf16" means: funcgrad's bfloat16 dtype
_U16, _U32, _F32 = np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.float32)


def _arr(x: Any) -> Any:
    return fnp.asarray(x)


# --------------------------------------------------------------------------
# bfloat16 as uint16 bit patterns
# --------------------------------------------------------------------------


def to_bfloat16(x: Any) -> Any:
    """Round to bfloat16 (nearest, ties to even); return the ``uint16`` bits.

    The rounding of ``x.astype(fnp.bfloat16)``, as ``uint16`` bits: for
    exchanging bf16 data as raw bits. To compute in bfloat16, cast to
    ``fnp.bfloat16`` instead.

    ``x`` is first converted to float32 (float16 exactly; float64 under x64
    is rounded to float32 first, which can differ from a direct rounding in
    one ulp on exact ties). NaN stays NaN (quiet, sign kept); values past
    the bf16 range round to +-inf as IEEE rounding does. Built from
    primitives, so it works under ``jit`` and ``vmap``; it has no gradient
    (its output is integer).

    >>> to_bfloat16(fnp.array([1.0, -2.5, 1e-3]))   # u16[3]
    Array([16256, 49184, 14979], dtype=uint16)
    """
    x = convert(_arr(x), _F32)
    bits = bitcast_convert_type(x, _U32)
    # Round to nearest even on the 16 dropped bits: add 0x7FFF plus the
    # lowest kept bit, then truncate (carries propagate into the exponent,
    # which is exactly how rounding up to the next binade or to inf works).
    lsb = bitwise_and(shift_right_logical(bits, 16), 1)
    rounded = shift_right_logical(lax.add(bits, lax.add(lsb, 0x7FFF)), 16)
    # A NaN with payload only in the low bits would round to inf: force the
    # quiet bit instead.
    quiet_nan = bitwise_or(shift_right_logical(bits, 16), 0x0040)
    return convert(lax.select(lax.isnan(x), quiet_nan, rounded), _U16)


def from_bfloat16(bits: Any) -> Any:
    """bfloat16 bits (``uint16``) -> float32, exactly.

    >>> from_bfloat16(to_bfloat16(fnp.array([3.14159])))   # f32[1]: [3.140625]
    Array([3.1406], dtype=float32)
    """
    bits = _arr(bits)
    if bits.dtype != _U16:
        raise TypeError(f"from_bfloat16: expected uint16 bit patterns (from to_bfloat16), got {bits.dtype}")
    return bitcast_convert_type(shift_left(convert(bits, _U32), 16), _F32)


def round_to_bfloat16(x: Any) -> Any:
    """Float32 values rounded to bfloat16 precision, kept as float32.

    The gradient passes straight through (identity), as for a cast. An
    emulation of bf16 for code that must stay in float32; a bf16 compute
    dtype (``x.astype(fnp.bfloat16)``, a :class:`Policy`) uses real bf16
    arrays.

    >>> round_to_bfloat16(fnp.array([1.00390625]))   # f32[1]: [1.0] (tie -> even)
    Array([1.], dtype=float32)
    """
    x = convert(_arr(x), _F32)
    rounded = from_bfloat16(to_bfloat16(lax.stop_gradient(x)))
    # x + stop_gradient(rounded - x): value of `rounded`, derivative of x.
    return lax.add(x, lax.stop_gradient(lax.sub(rounded, x)))


# --------------------------------------------------------------------------
# Policy: which dtype params, computation and outputs use
# --------------------------------------------------------------------------


def _dtype_spec(d: Any) -> np.dtype:
    """A float dtype (``"bfloat16"`` and ``"bf16"`` name :data:`BFLOAT16`)."""
    if isinstance(d, str) and d.lower() in ("bfloat16", "bf16"):
        return BFLOAT16
    dt = np.dtype(d)
    if _dtypes.kind(dt) != "f":
        raise TypeError(f"Policy dtypes must be floating (float16/32/64 or 'bfloat16'), got {dt}")
    return dt


def _cast_leaf(x: Any, dtype: Any) -> Any:
    """Cast one floating leaf; integers, bools and non-arrays pass unchanged."""
    if isinstance(x, (bool, int)) or not hasattr(x, "dtype") and not isinstance(x, float):
        return x
    x = _arr(x)
    if _dtypes.kind(x.dtype) != "f":
        return x
    return convert(x, dtype)


@dataclasses.dataclass(frozen=True)
class Policy:
    """Dtypes for mixed-precision training (as in DeepMind's ``jmp``).

    Typical fp16 setup: float32 master parameters, float16 compute, float32
    outputs (the loss)::

        policy = Policy("float32", "float16", "float32")
        def loss(params, x, y):
            params, x = policy.cast_to_compute((params, x))
            return policy.cast_to_output(model(params, x, y))

    Only floating leaves are cast; integer leaves (labels) pass unchanged.
    ``"bfloat16"`` (or ``"bf16"``) is funcgrad's bfloat16 dtype: a bf16
    compute dtype casts to real bfloat16 arrays, with float32 accumulation
    in sums and matmuls, and no loss scaling needed (bf16 has float32's
    exponent range).

    >>> from funcgrad import mixed_precision as mp
    >>> policy = mp.Policy("float32", "float16", "float32")
    >>> policy.cast_to_compute({"w": fnp.ones(2)})["w"].dtype
    dtype('float16')
    """

    param_dtype: Any = "float32"
    compute_dtype: Any = "float32"
    output_dtype: Any = "float32"

    def __post_init__(self) -> None:
        for name in ("param_dtype", "compute_dtype", "output_dtype"):
            object.__setattr__(self, name, _dtype_spec(getattr(self, name)))

    def cast_to_compute(self, tree: Any) -> Any:
        """Every floating leaf of ``tree`` in the compute dtype."""
        return tree_map(lambda x: _cast_leaf(x, self.compute_dtype), tree)

    def cast_to_param(self, tree: Any) -> Any:
        """Every floating leaf in the parameter dtype (e.g. grads -> float32)."""
        return tree_map(lambda x: _cast_leaf(x, self.param_dtype), tree)

    def cast_to_output(self, tree: Any) -> Any:
        """Every floating leaf in the output dtype."""
        return tree_map(lambda x: _cast_leaf(x, self.output_dtype), tree)


# --------------------------------------------------------------------------
# Dynamic loss scaling
# --------------------------------------------------------------------------


def all_finite(tree: Any) -> Any:
    """A bool scalar array: True iff no floating leaf holds an inf or NaN.

    >>> all_finite({"w": fnp.array([1.0, fnp.inf])})   # Array(False)
    Array(False, dtype=bool)
    """
    ok = fnp.asarray(True)
    for leaf in tree_leaves(tree):
        leaf = _arr(leaf)
        if _dtypes.kind(leaf.dtype) != "f":
            continue
        n_bad = lax.reduce_sum(convert(lax.logical_not(lax.is_finite(leaf)), np.int32),
                           tuple(range(leaf.ndim)))
        ok = lax.logical_and(ok, lax.eq(n_bad, 0))
    return ok


def select_tree(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Leafwise ``where(pred, on_true, on_false)`` for a scalar bool ``pred``.

    Skipping an optimizer step when the gradients overflowed, under jit::

        finite = all_finite(grads)
        params = select_tree(finite, new_params, params)
        opt_state = select_tree(finite, new_opt_state, opt_state)

    >>> from funcgrad import mixed_precision as mp
    >>> mp.select_tree(fnp.asarray(False), {"w": fnp.ones(2)}, {"w": fnp.zeros(2)})
    {'w': Array([0., 0.], dtype=float32)}
    """
    return tree_map(lambda a, b: lax.select(pred, _arr(a), _arr(b)), on_true, on_false)


@register_dataclass(static_fields=("growth_interval", "factor", "min_scale"))
@dataclasses.dataclass(frozen=True)
class DynamicLossScale:
    """Loss scaling for float16 training: a pure value (a pytree).

    Multiply the loss by ``scale`` before differentiating so that small
    float16 gradients do not flush to zero; divide the gradients by it
    afterwards. When the gradients overflow (inf/NaN), skip the step and
    halve the scale; after ``growth_interval`` finite steps in a row, double
    it. ``scale`` (float32) and ``counter`` (int32) are arrays, the rest are
    static settings, so a ``jit``-ed step can take and return the state.

    >>> ls = DynamicLossScale(scale=2.0 ** 15, growth_interval=2000, factor=2)
    >>> def step(params, ls, x):
    ...     grads = fg.grad(lambda p: ls.scale_loss(loss(p, x)))(params)
    ...     grads = ls.unscale_grads(grads)
    ...     finite = all_finite(grads)
    ...     new = sgd_update(params, grads)
    ...     return select_tree(finite, new, params), ls.adjust(finite)
    """

    scale: Any = 2.0 ** 15
    counter: Any = 0
    growth_interval: int = 2000
    factor: int = 2
    min_scale: float = 1.0

    def __post_init__(self) -> None:
        # Python numbers become arrays (so jit traces them); tracers and
        # arrays pass through unchanged (unflattening under jit).
        if not isinstance(self.scale, (Array, Tracer)):
            object.__setattr__(self, "scale", fnp.asarray(np.float32(self.scale)))
        if not isinstance(self.counter, (Array, Tracer)):
            object.__setattr__(self, "counter", fnp.asarray(np.int32(self.counter)))
        if int(self.growth_interval) < 1 or float(self.factor) <= 1:
            raise ValueError(f"DynamicLossScale: growth_interval must be >= 1 and factor > 1, got "
                             f"{self.growth_interval} and {self.factor}")

    def scale_loss(self, loss: Any) -> Any:
        """``loss * scale`` in float32 (a float16 loss is upcast first: 2**15
        times a loss of 2 already overflows float16)."""
        loss = _arr(loss)
        dtype = np.result_type(loss.dtype, np.float32) if _dtypes.kind(loss.dtype) == "f" else default_float_dtype()
        return lax.mul(convert(loss, dtype), convert(self.scale, dtype))

    def unscale_grads(self, grads: Any) -> Any:
        """Each floating gradient divided by ``scale``, computed in float32 and
        returned in the gradient's own dtype (cast float16 grads to the
        float32 parameter dtype first, e.g. ``policy.cast_to_param``, to keep
        small values)."""
        def unscale(g: Any) -> Any:
            g = _arr(g)
            if _dtypes.kind(g.dtype) != "f":
                return g
            wide = np.result_type(g.dtype, np.float32)
            return convert(lax.div(convert(g, wide), convert(self.scale, wide)), g.dtype)
        return tree_map(unscale, grads)

    def adjust(self, grads_finite: Any) -> "DynamicLossScale":
        """The next state: on overflow (``grads_finite`` False) divide the scale
        by ``factor`` (not below ``min_scale``) and reset the counter; after
        ``growth_interval`` finite steps in a row multiply it by ``factor``.
        Growth stops where it would overflow float32."""
        finite = convert(_arr(grads_finite), np.dtype(bool))
        counter = lax.add(self.counter, 1)
        grow = lax.eq(counter, int(self.growth_interval))
        grown = lax.mul(self.scale, float(self.factor))
        grown = lax.select(lax.is_finite(grown), grown, self.scale)
        shrunk = lax.max(lax.div(self.scale, float(self.factor)), float(self.min_scale))
        scale = lax.select(finite, lax.select(grow, grown, self.scale), shrunk)
        counter = lax.select(lax.logical_and(finite, lax.logical_not(grow)), counter, 0)
        return dataclasses.replace(self, scale=scale, counter=convert(counter, np.int32))
