"""The GPU implementations of funcgrad's primitives, registered against the primitive objects.

Each implementation is written against an *array module* ``xp`` (CuPy on a
GPU; its API follows numpy's for everything used here) and registered at
import as ``prim.impls["gpu"]`` through :func:`funcgrad._core.register_impl`.
Importing this module imports neither CuPy nor Triton: what is registered
is a :class:`LazyImpl`, which builds the real implementation for the
current :func:`~funcgrad.backends.gpu.array.binding` on its first call (and
again if the tests swap in a numpy stand-in for CuPy). So which primitives
have a GPU implementation is known without CuPy (see
``tests/test_backend_slots.py``).

Triton kernels serve FlashAttention (:mod:`.flash_attention`) and the row
primitives softmax / log_softmax / cross-entropy in float32, float16 and
bfloat16 (:mod:`.triton_kernels`; other dtypes use the CuPy expressions). The rest
of the primitives are registered by :mod:`.impls_index` (indexing,
scatters, sorting, convolution, pooling), :mod:`.impls_special` (special
functions, complex parts, random bits) and :mod:`.impls_linalg` (linear
algebra, FFT, callbacks, collectives). A primitive without a GPU
implementation is an error on GPU arrays, or runs on host copies when the
user allows host fallback (see :mod:`.array`); today every primitive has
one (``GPU_MISSING`` in ``tests/test_backend_slots.py`` is empty).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive, register_impl
from funcgrad.backends.gpu import array as gpu_array
from funcgrad.primitives import attention as A
from funcgrad.primitives import control_flow as CF
from funcgrad.primitives import dynamic as D
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import elementwise_more as EM
from funcgrad.primitives import indexing as I
from funcgrad.primitives import linalg as L
from funcgrad.primitives import random_bits as RB
from funcgrad.primitives import reduce as R
from funcgrad.primitives import shape as S
from funcgrad.primitives import softmax as SM

__all__ = ["LazyImpl", "UFUNCS"]

Maker = Callable[[gpu_array.Binding], Callable[..., Any]]

_F16, _F32, _BF16 = np.dtype(np.float16), np.dtype(np.float32), _dtypes.bfloat16
_NARROW_FLOATS = (_F16, _BF16)


class LazyImpl:
    """A GPU implementation built by ``make(binding)`` when first called under that binding."""

    __slots__ = ("make", "binding", "impl")

    def __init__(self, make: Maker):
        self.make = make
        self.binding: gpu_array.Binding | None = None
        self.impl: Callable[..., Any] | None = None

    def __call__(self, *values: Any, **params: Any) -> Any:
        current = gpu_array.binding()
        if current is not self.binding:
            self.impl, self.binding = self.make(current), current
        return self.impl(*values, **params)


def _register(prim: Primitive, make: Maker) -> None:
    register_impl(prim, "gpu", LazyImpl(make))


# Primitives whose host reference is the numpy ufunc of this name; CuPy has a
# ufunc of the same name and semantics for each.
UFUNCS: dict[Primitive, str] = {
    E.add_p: "add", E.sub_p: "subtract", E.mul_p: "multiply", E.div_p: "true_divide", E.neg_p: "negative",
    E.exp_p: "exp", E.exp2_p: "exp2", E.log_p: "log", E.log2_p: "log2", E.log1p_p: "log1p",
    E.expm1_p: "expm1", E.sqrt_p: "sqrt", E.sin_p: "sin", E.cos_p: "cos", E.tan_p: "tan", E.tanh_p: "tanh",
    E.arcsin_p: "arcsin", E.arccos_p: "arccos", E.arctan_p: "arctan", E.sinh_p: "sinh", E.cosh_p: "cosh",
    E.abs_p: "absolute", E.sign_p: "sign", E.floor_p: "floor", E.ceil_p: "ceil", E.isfinite_p: "isfinite",
    E.isnan_p: "isnan", E.logical_not_p: "logical_not", E.maximum_p: "maximum", E.minimum_p: "minimum",
    E.pow_p: "power", E.arctan2_p: "arctan2", E.mod_p: "remainder", E.floor_divide_p: "floor_divide",
    E.eq_p: "equal", E.ne_p: "not_equal", E.lt_p: "less", E.le_p: "less_equal", E.gt_p: "greater",
    E.ge_p: "greater_equal", E.and_p: "logical_and", E.or_p: "logical_or", E.xor_p: "logical_xor",
    RB.bitwise_and_p: "bitwise_and", RB.bitwise_or_p: "bitwise_or", RB.nextafter_p: "nextafter",
    EM.arcsinh_p: "arcsinh", EM.arccosh_p: "arccosh", EM.arctanh_p: "arctanh", EM.cbrt_p: "cbrt",
    EM.logaddexp_p: "logaddexp", EM.fmod_p: "fmod", EM.gcd_p: "gcd", EM.lcm_p: "lcm",
}


def _ufunc(name: str) -> Maker:
    """The array module's ufunc ``name``; with a bfloat16 operand, Python float scalars become
    bfloat16 scalars first (JAX's weak typing: numpy would compute ``bf16 * 0.5`` in float32)."""
    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        f = getattr(b.xp, name)

        def impl(*xs: Any) -> Any:
            for x in xs:   # (the common case, no Python float, costs a type check per operand)
                if type(x) is float:
                    break
            else:
                return f(*xs)
            if any(getattr(x, "dtype", None) == _BF16 for x in xs):
                xs = tuple(_BF16.type(x) if type(x) is float else x for x in xs)
            return f(*xs)
        return impl
    return make


for _prim, _name in UFUNCS.items():
    _register(_prim, _ufunc(_name))


def _simple(prim: Primitive) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``fn(xp) -> impl`` (the implementation needs only the array module)."""
    def decorate(fn: Callable[[Any], Callable[..., Any]]) -> Callable[..., Any]:
        _register(prim, lambda b: fn(b.xp))
        return fn
    return decorate


# ---------------------------------------------------------------- bfloat16 through float32


def _wide(x: Any) -> Any:
    """``x`` as float32 if it is bfloat16, else as it is."""
    return x.astype(_F32) if getattr(x, "dtype", None) == _BF16 else x


def _via_float32(xp: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` on bfloat16 operands widened to float32, its float32 results rounded back to bfloat16
    (other dtypes run ``fn`` as they are)."""
    def impl(*xs: Any, **params: Any) -> Any:
        if not any(getattr(x, "dtype", None) == _BF16 for x in xs):
            return fn(*xs, **params)
        out = xp.asarray(fn(*(_wide(x) for x in xs), **params))
        return out.astype(_dtypes.result_type(*xs), copy=False)
    return impl


# ---------------------------------------------------------------- elementwise

# (CuPy 14.2's round has no bfloat16 loop: it would compute in float32 and return float32)
_simple(E.round_p)(lambda xp: _via_float32(xp, xp.around))
_simple(E.logistic_p)(lambda xp: lambda x: (xp.tanh(x * 0.5) * 0.5 + 0.5).astype(x.dtype, copy=False))


def _select(xp: Any, c: Any, x: Any, y: Any) -> Any:
    """``where(c, x, y)``; a Python float beside a bfloat16 array stays bfloat16 (weak typing)."""
    out = xp.where(c, x, y)
    for a, b in ((x, y), (y, x)):
        if getattr(a, "dtype", None) == _BF16 and isinstance(b, (bool, int, float)):
            return out.astype(_BF16, copy=False)
    return out


_simple(E.select_p)(lambda xp: lambda c, x, y: _select(xp, c, x, y))
_simple(E.convert_p)(lambda xp: lambda x, dtype: xp.asarray(x).astype(dtype))
_simple(E.stop_gradient_p)(lambda xp: lambda x: x)
_simple(E.name_p)(lambda xp: lambda x, name: x)
_simple(RB.bitcast_convert_type_p)(
    lambda xp: lambda x, dtype: xp.ascontiguousarray(x).view(dtype).reshape(x.shape))


def _shift(op_name: str) -> Callable[[Any], Callable[..., Any]]:
    def make(xp: Any) -> Callable[..., Any]:
        op = getattr(xp, op_name)

        def impl(x, s):
            x = xp.asarray(x)
            bits = x.dtype.itemsize * 8
            s = xp.asarray(s, dtype=x.dtype)
            # Shifts by >= the bit width are 0 (XLA's definition, as on the CPU).
            return xp.where(s < bits, op(x, xp.minimum(s, bits - 1).astype(x.dtype)), 0).astype(x.dtype)
        return impl
    return make


_simple(RB.shift_right_logical_p)(_shift("right_shift"))
_simple(RB.shift_left_p)(_shift("left_shift"))

# ---------------------------------------------------------------- reductions
# float16 and bfloat16 accumulate in float32 and round once, as on the CPU: ``dtype=float32`` (CuPy
# reads the 16-bit values and adds in float32, without a float32 copy).


@_simple(S.reduce_sum_p)
def _sum(xp):
    def impl(x, axes):
        if x.dtype in _NARROW_FLOATS:
            return xp.sum(x, axis=axes, dtype=xp.float32).astype(x.dtype)
        return xp.sum(x, axis=axes)
    return impl


@_simple(R.cumsum_p)
def _cumsum(xp):
    def impl(x, axis, reverse):
        acc = xp.float32 if x.dtype in _NARROW_FLOATS else None
        out = xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=acc), axis) if reverse \
            else xp.cumsum(x, axis=axis, dtype=acc)
        return out if acc is None else out.astype(x.dtype)
    return impl


_simple(R.reduce_max_p)(lambda xp: lambda x, axes: xp.max(x, axis=axes))
_simple(R.reduce_min_p)(lambda xp: lambda x, axes: xp.min(x, axis=axes))


@_simple(R.reduce_prod_p)
def _prod(xp):
    def impl(x, axes):
        # bfloat16 products accumulate in float32 too (as JAX's prod); max/min pick a value, exact in any dtype.
        if x.dtype == _BF16:
            return xp.prod(x, axis=axes, dtype=xp.float32).astype(x.dtype)
        return xp.prod(x, axis=axes)
    return impl


# (CuPy 14.2's argmax/argmin have no bfloat16 loop: float32 holds every bfloat16 value, in order)
_simple(R.argmax_p)(lambda xp: lambda x, axis: xp.argmax(_wide(x), axis=axis))
_simple(R.argmin_p)(lambda xp: lambda x, axis: xp.argmin(_wide(x), axis=axis))

# ---------------------------------------------------------------- linear algebra and shapes

# float16 matmul: CuPy calls cuBLAS with CUBLAS_COMPUTE_32F on tensor cores (float32 accumulation,
# one rounding), as numpy's float16 matmul accumulates in float32 on the CPU. bfloat16: CuPy 14 does the
# same for a product of two matrices (cublasGemmEx, CUDA_R_16BF, CUBLAS_COMPUTE_32F), so a matrix
# product -- or a stack of rows times a matrix, folded into one (an MLP's ``x @ w``) -- goes there;
# CuPy's batched bfloat16 matmul runs its integer kernel and its vector products sum elementwise, so
# everything else computes in float32 and rounds once (correct, at float32 matmul speed).
BF16_CUBLAS = True   # (the switch for a CuPy whose 2-D bfloat16 matmul misbehaves)


def _bf16_matrix_product(xp: Any, a: Any, b: Any) -> Any:
    """``a @ b`` through CuPy's 2-D bfloat16 matmul, or None where it does not apply."""
    if not BF16_CUBLAS or a.dtype != _BF16 or b.dtype != _BF16 or b.ndim != 2 or a.ndim < 2:
        return None
    rows = math.prod(a.shape[:-1])
    if rows * b.shape[1] <= 1 or a.shape[-1] == 0:   # (one output: CuPy's elementwise dot path)
        return None
    if a.ndim == 2:   # (a transposed operand stays a view: cuBLAS transposes it)
        return xp.matmul(a, b)
    out = xp.matmul(xp.ascontiguousarray(a).reshape(rows, a.shape[-1]), b)
    return out.reshape(a.shape[:-1] + (b.shape[1],))


@_simple(L.matmul_p)
def _matmul(xp):
    general = _via_float32(xp, xp.matmul)

    def impl(a, b):
        out = _bf16_matrix_product(xp, a, b)
        return general(a, b) if out is None else out
    return impl


@_simple(L.einsum_p)
def _einsum(xp):
    def impl(*xs, spec):
        # float16 and bfloat16 compute in float32 and round once, as the CPU's einsum (CuPy's own
        # float16 einsum sums the axes of a single operand in float16).
        dtypes = [x.dtype for x in xs]
        if not any(d in _NARROW_FLOATS for d in dtypes):
            return xp.einsum(spec, *xs)
        out = _dtypes.result_type(*xs)
        acc = xp.float32 if out in _NARROW_FLOATS else None
        return xp.einsum(spec, *(_wide(x) for x in xs), dtype=acc).astype(out, copy=False)
    return impl


_simple(S.reshape_p)(lambda xp: lambda x, shape: xp.reshape(x, shape))
_simple(S.transpose_p)(lambda xp: lambda x, perm: xp.transpose(x, perm))
_simple(S.broadcast_to_p)(lambda xp: lambda x, shape: xp.broadcast_to(xp.asarray(x), shape))
_simple(I.concatenate_p)(lambda xp: lambda *xs, axis: xp.concatenate(xs, axis=axis))
_simple(I.pad_p)(lambda xp: lambda x, widths, value: xp.pad(x, widths, mode="constant", constant_values=value))
_simple(I.flip_p)(lambda xp: lambda x, axes: xp.flip(x, axes))
# Basic indexing and x.copy(): the host implementations run on CuPy buffers as they are (each
# start index is read to the host, one scalar per axis).
_simple(D.dynamic_slice_p)(lambda xp: D.dynamic_slice_impl)
_simple(D.dynamic_update_slice_p)(lambda xp: D.dynamic_update_slice_impl)

# ---------------------------------------------------------------- softmax family
# CuPy expressions for every dtype; with Triton, float32/float16/bfloat16 rows run the fused kernels.


def _softmax_rows(xp, x, log):
    m = xp.max(x, axis=-1, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    z = x - m
    if log:
        return z - xp.log(xp.sum(xp.exp(z), axis=-1, keepdims=True))
    e = xp.exp(z)
    return e / xp.sum(e, axis=-1, keepdims=True)


def _logsumexp(xp, x):
    m = xp.max(x, axis=-1, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    return (xp.log(xp.sum(xp.exp(x - m), axis=-1, keepdims=True)) + m)[..., 0]


# Labels outside [0, C) raise ValueError, but on the GPU without a host read: the range is a deferred
# check (gpu_array.defer_check), read at the next point the host waits for the GPU. The loss and
# gradient kernels share one check per labels buffer (its key), and never index outside a row.


def _labels_key(logits, labels) -> tuple:
    return ("labels in range", id(labels), logits.shape[1])


def _defer_labels_check(name, logits, labels, flag) -> None:
    n_classes = logits.shape[1]

    def make_error() -> ValueError:   # (keeps ``labels`` alive, so its id stays the key's)
        from funcgrad.backends.gpu import triton_kernels as tk  # noqa: PLC0415 -- the message, when raised
        return tk.labels_error(name, n_classes, labels)
    gpu_array.defer_check(flag, make_error, _labels_key(logits, labels))


def _in_range_labels(xp, name, logits, labels):
    """``labels`` clipped into [0, C) for indexing; a label outside it fails the deferred check."""
    clipped = xp.clip(labels, 0, logits.shape[1] - 1)
    if labels.size and gpu_array.pending_check(_labels_key(logits, labels)) is None:
        _defer_labels_check(name, logits, labels, xp.any(clipped != labels, keepdims=True))
    return clipped


def _labels_flag(xp, name, logits, labels):
    """The (1,) int32 device flag the cross-entropy kernels set for a label outside [0, C)."""
    flag = gpu_array.pending_check(_labels_key(logits, labels))
    if flag is None or getattr(flag, "dtype", None) != np.int32:
        flag = xp.zeros((1,), dtype=xp.int32)
        if labels.size:
            _defer_labels_check(name, logits, labels, flag)
    return flag


def _xent(xp, logits, labels):
    rows = xp.arange(logits.shape[0])
    return _logsumexp(xp, logits) - logits[rows, _in_range_labels(xp, "softmax_cross_entropy", logits, labels)]


def _xent_grad(xp, logits, labels, g):
    labels = _in_range_labels(xp, "softmax_cross_entropy_grad", logits, labels)
    d = _softmax_rows(xp, logits, False)
    d[xp.arange(logits.shape[0]), labels] -= 1
    return (d * g[:, None]).astype(logits.dtype, copy=False)


_FAST_ROW_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), _dtypes.bfloat16)


def _triton_xent(tk, logits, labels):
    xp = tk.host.array_module(logits)
    bad = _labels_flag(xp, "softmax_cross_entropy", logits, labels)
    return tk.softmax_cross_entropy(logits, labels, bad=bad)[0].astype(logits.dtype)


def _triton_xent_grad(tk, logits, labels, g):
    # The primitive does not carry the forward's lse: the backward kernel computes it from the row
    # in the same launch.
    xp = tk.host.array_module(logits)
    bad = _labels_flag(xp, "softmax_cross_entropy_grad", logits, labels)
    return tk.softmax_cross_entropy_backward(logits, labels, None, g, bad=bad)


def _row_primitive(prim: Primitive, expression: Callable[..., Any], kernel: Callable[..., Any],
                   n_float: int = 1) -> None:
    """Register ``expression(xp, *xs)``, routed to ``kernel(tk, *xs)`` when Triton may run and the
    first ``n_float`` arguments share a float32/float16/bfloat16 dtype."""
    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        xp = b.xp
        if not b.use_triton:
            return lambda *xs: expression(xp, *xs)
        from funcgrad.backends.gpu import triton_kernels as tk  # noqa: PLC0415 -- imports triton

        def impl(*xs):
            dtypes = {np.dtype(x.dtype) for x in xs[:n_float]}
            if len(dtypes) == 1 and dtypes <= set(_FAST_ROW_DTYPES) and xs[0].size:
                return kernel(tk, *xs)
            return expression(xp, *xs)
        return impl
    _register(prim, make)


_row_primitive(SM.softmax_p, lambda xp, x: _softmax_rows(xp, x, False), lambda tk, x: tk.softmax(x))
_row_primitive(SM.log_softmax_p, lambda xp, x: _softmax_rows(xp, x, True), lambda tk, x: tk.log_softmax(x))
_row_primitive(SM.softmax_grad_p, lambda xp, y, g: y * (g - xp.sum(g * y, axis=-1, keepdims=True)),
               lambda tk, y, g: tk.softmax_backward(y, g), 2)
_row_primitive(SM.log_softmax_grad_p, lambda xp, y, g: g - xp.exp(y) * xp.sum(g, axis=-1, keepdims=True),
               lambda tk, y, g: tk.log_softmax_backward(y, g), 2)
_simple(SM.logsumexp_p)(lambda xp: lambda x: _logsumexp(xp, x))
_row_primitive(SM.softmax_cross_entropy_p, _xent, _triton_xent)
_row_primitive(SM.softmax_cross_entropy_grad_p, _xent_grad, _triton_xent_grad)

# ---------------------------------------------------------------- FlashAttention (Triton)

# The Triton kernels take float32, float16 and bfloat16 (all matmuls accumulate in float32). Head dims up
# to 256 (padded to a power of two >= 16; the tile configs keep each kernel within an H100's shared memory).
_FLASH_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), _dtypes.bfloat16)
_FLASH_MAX_HEAD_DIM = 256


def _flash(prim: Primitive, run: Callable[..., Any]) -> None:
    """Register ``run(fa, *values, causal, scale)`` (``fa``: the Triton kernel module) for ``prim``.

    Without Triton, or for what the kernels do not take (float64 under x64,
    head dims over 256), the backend's missing-implementation path decides:
    an error naming the primitive, or host fallback when the user allowed it.
    """
    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        if not b.use_triton:
            return lambda *values, **params: _missing(prim, "it needs Triton, which is not available",
                                                      values, params)
        from funcgrad.backends.gpu import flash_attention as fa  # noqa: PLC0415 -- imports triton

        def impl(*values, causal, scale):
            A._check(prim.name, *values[:3])
            params = {"causal": causal, "scale": scale}
            if np.dtype(values[0].dtype) not in _FLASH_DTYPES:
                return _missing(prim, "the Triton kernels take float32, float16 and bfloat16", values, params)
            if values[0].shape[-1] > _FLASH_MAX_HEAD_DIM:
                return _missing(prim, f"the Triton kernels take head dims up to {_FLASH_MAX_HEAD_DIM}, got "
                                      f"{values[0].shape[-1]}", values, params)
            return run(fa, *values, causal=causal, scale=scale)
        return impl
    _register(prim, make)


def _missing(prim: Primitive, reason: str, values: Any, params: dict) -> Any:
    # Asked at call time: the user may switch gpu_host_fallback on and off.
    return gpu_array.backend.missing_impl(prim, reason)(*values, **params)


def _flash_forward(fa, q, k, v, *, causal, scale):
    o, lse = fa.flash_attention_forward(q, k, v, causal=causal, scale=scale)
    return [o, lse.astype(A.lse_dtype(q.dtype), copy=False)]   # float32 for half q (the kernels' own), as on the CPU


def _flash_backward(fa, q, k, v, o, lse, do, *, causal, scale):
    return list(fa.flash_attention_backward(q, k, v, o, lse, do, causal=causal, scale=scale))


_flash(A.flash_attention_p, _flash_forward)
_flash(A.flash_attention_bwd_p, _flash_backward)


def _control_flow(prim: Primitive) -> Maker:
    """The loops of :mod:`funcgrad.primitives.control_flow` on device buffers: each sub-program
    runs equation by equation on device arrays (nothing leaves the device but the loop's
    predicate, read each step)."""
    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        backend = gpu_array.backend

        def run(sub: Any, values: Any) -> list:
            if hasattr(sub.program, "run_on_device"):   # compiled by jit for the GPU (fused kernels)
                return sub.program.run_on_device(values)
            outs = sub(*[v if isinstance(v, (bool, int, float)) else backend.wrap(v) for v in values])
            return [backend.device_value(o) for o in outs]

        return CF.make_impls(run, b.xp.empty)[prim]
    return make


for _prim in (CF.cond_p, CF.scan_p, CF.while_p, CF.while_grad_p, CF.custom_call_p):
    _register(_prim, _control_flow(_prim))

# The special functions, complex parts, random-gamma derivatives and threefry2x32.
from funcgrad.backends.gpu import impls_special  # noqa: E402

for _prim, _make in impls_special.MAKERS:
    _register(_prim, _make)

# Indexing, scatters, sorting, convolution, pooling and bit primitives (a table of makers: no import circle).
from funcgrad.backends.gpu import impls_index  # noqa: E402

for _prim, _make in impls_index.MAKERS.items():
    _register(_prim, _make)
