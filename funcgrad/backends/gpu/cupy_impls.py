"""GPU implementations of funcgrad's primitives, written against CuPy.

Not yet run on a GPU. The table is built by
:func:`make_impls` from an *array module* ``xp``; the tests build it with
``xp = numpy`` and compare every entry with the primitive's reference
implementation (``tests/test_devices.py``), which checks names, parameters
and semantics but not CuPy itself. On a GPU, ``xp`` is ``cupy``, whose API
follows numpy's for everything used here.

A primitive missing from the table runs its numpy reference implementation
on host copies (see ``funcgrad.backends.gpu.array``): correct, with two
transfers, and a one-time warning naming it.

Keyed by primitive name (``prim.name``), values ``impl(*values, **params)``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["make_impls", "UFUNC_PRIMITIVES"]

# Primitives whose reference impl is the numpy ufunc of this name; CuPy has
# a ufunc of the same name for each.
UFUNC_PRIMITIVES = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "neg": "negative",
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log1p": "log1p", "expm1": "expm1",
    "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "arcsin": "arcsin",
    "arccos": "arccos", "arctan": "arctan", "sinh": "sinh", "cosh": "cosh", "abs": "absolute", "sign": "sign",
    "floor": "floor", "ceil": "ceil", "isfinite": "isfinite", "isnan": "isnan", "logical_not": "logical_not",
    "maximum": "maximum", "minimum": "minimum", "pow": "power", "arctan2": "arctan2", "mod": "remainder",
    "floor_divide": "floor_divide", "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
    "gt": "greater", "ge": "greater_equal", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_xor": "logical_xor", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "nextafter": "nextafter",
}


def make_impls(xp: Any, *, use_triton: bool = False) -> dict[str, Callable[..., Any]]:
    """The primitive-name -> implementation table for array module ``xp``.

    ``use_triton`` routes softmax / log_softmax / cross-entropy (float32,
    float16) to the Triton kernels of ``triton_kernels`` (only with CuPy on a
    GPU, or numpy under ``TRITON_INTERPRET=1``).
    """
    impls: dict[str, Callable[..., Any]] = {name: getattr(xp, uf) for name, uf in UFUNC_PRIMITIVES.items()}

    def sum_(x, axes):
        # float16 accumulates in float32, as on the CPU (funcgrad.primitives.reduce).
        if x.dtype == np.float16:
            return xp.sum(x, axis=axes, dtype=xp.float32).astype(xp.float16)
        return xp.sum(x, axis=axes)

    def cumsum(x, axis, reverse):
        acc = xp.float32 if x.dtype == np.float16 else None
        out = xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=acc), axis) if reverse \
            else xp.cumsum(x, axis=axis, dtype=acc)
        return out if acc is None else out.astype(xp.float16)

    def shift(op):
        def impl(x, s):
            x = xp.asarray(x)
            bits = x.dtype.itemsize * 8
            s = xp.asarray(s, dtype=x.dtype)
            # Shifts by >= the bit width are 0 (XLA's definition, as on the CPU).
            return xp.where(s < bits, op(x, xp.minimum(s, bits - 1).astype(x.dtype)), 0).astype(x.dtype)
        return impl

    def softmax_rows(x, log):
        m = xp.max(x, axis=-1, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        z = x - m
        if log:
            return z - xp.log(xp.sum(xp.exp(z), axis=-1, keepdims=True))
        e = xp.exp(z)
        return e / xp.sum(e, axis=-1, keepdims=True)

    def logsumexp(x):
        m = xp.max(x, axis=-1, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        return (xp.log(xp.sum(xp.exp(x - m), axis=-1, keepdims=True)) + m)[..., 0]

    def check_labels(name, logits, labels):
        if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= logits.shape[1]):
            raise ValueError(f"{name}: labels must be in [0, {logits.shape[1]}), got values in "
                             f"[{int(labels.min())}, {int(labels.max())}]")

    def xent(logits, labels):
        check_labels("softmax_cross_entropy", logits, labels)
        rows = xp.arange(logits.shape[0])
        return logsumexp(logits) - logits[rows, labels]

    def xent_grad(logits, labels, g):
        check_labels("softmax_cross_entropy_grad", logits, labels)
        d = softmax_rows(logits, False)
        d[xp.arange(logits.shape[0]), labels] -= 1
        return (d * g[:, None]).astype(logits.dtype, copy=False)

    impls.update({
        "round": xp.around,
        "logistic": lambda x: xp.tanh(x * 0.5) * 0.5 + 0.5,
        "select": lambda c, x, y: xp.where(c, x, y),
        "convert_element_type": lambda x, dtype: xp.asarray(x).astype(dtype),
        "stop_gradient": lambda x: x,
        "reduce_sum": sum_,
        "reduce_max": lambda x, axes: xp.max(x, axis=axes),
        "reduce_min": lambda x, axes: xp.min(x, axis=axes),
        "reduce_prod": lambda x, axes: xp.prod(x, axis=axes),
        "argmax": lambda x, axis: xp.argmax(x, axis=axis),
        "argmin": lambda x, axis: xp.argmin(x, axis=axis),
        "cumsum": cumsum,
        "matmul": xp.matmul,
        "einsum": lambda *xs, spec: xp.einsum(spec, *xs),
        "reshape": lambda x, shape: xp.reshape(x, shape),
        "transpose": lambda x, perm: xp.transpose(x, perm),
        "broadcast_to": lambda x, shape: xp.broadcast_to(xp.asarray(x), shape),
        "concatenate": lambda *xs, axis: xp.concatenate(xs, axis=axis),
        "pad": lambda x, widths, value: xp.pad(x, widths, mode="constant", constant_values=value),
        "flip": lambda x, axes: xp.flip(x, axes),
        "bitcast_convert_type": lambda x, dtype: xp.ascontiguousarray(x).view(dtype),
        "shift_right_logical": shift(xp.right_shift),
        "shift_left": shift(xp.left_shift),
        "softmax": lambda x: softmax_rows(x, False),
        "log_softmax": lambda x: softmax_rows(x, True),
        "softmax_grad": lambda y, g: y * (g - xp.sum(g * y, axis=-1, keepdims=True)),
        "log_softmax_grad": lambda y, g: g - xp.exp(y) * xp.sum(g, axis=-1, keepdims=True),
        "logsumexp": logsumexp,
        "softmax_cross_entropy": xent,
        "softmax_cross_entropy_grad": xent_grad,
    })
    if use_triton:
        impls.update(_triton_impls(impls))
    return impls


def _triton_impls(fallback: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Fused Triton kernels for the row primitives, float32/float16 only
    (other dtypes, e.g. float64 under x64, use the CuPy expressions)."""
    from funcgrad.backends.gpu import triton_kernels as tk  # imports triton

    fast = (np.dtype(np.float32), np.dtype(np.float16))

    def routed(name: str, kernel: Callable[..., Any], n_float: int = 1) -> Callable[..., Any]:
        # The first n_float arguments must share a float32/float16 dtype.
        def impl(*xs):
            dtypes = {np.dtype(x.dtype) for x in xs[:n_float]}
            if len(dtypes) == 1 and dtypes <= fast and xs[0].size:
                return kernel(*xs)
            return fallback[name](*xs)
        return impl

    def xent(logits, labels):
        return tk.softmax_cross_entropy(logits, labels)[0].astype(logits.dtype)

    def xent_grad(logits, labels, g):
        _, lse = tk.softmax_cross_entropy(logits, labels)  # recompute lse: the primitive does not carry it
        return tk.softmax_cross_entropy_backward(logits, labels, lse, g)

    return {
        "softmax": routed("softmax", tk.softmax),
        "log_softmax": routed("log_softmax", tk.log_softmax),
        "softmax_grad": routed("softmax_grad", tk.softmax_backward, 2),
        "log_softmax_grad": routed("log_softmax_grad", tk.log_softmax_backward, 2),
        "softmax_cross_entropy": routed("softmax_cross_entropy", xent),
        "softmax_cross_entropy_grad": routed("softmax_cross_entropy_grad", xent_grad),
    }
