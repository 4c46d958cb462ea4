"""The CPU's implementations: numba kernels where they beat the numpy reference.

Each primitive's own block (``funcgrad/primitives``) holds its numpy
reference implementation and its argument rules. This module registers,
against the primitive objects, the host implementations that pick a numba
kernel where one applies (float32/float64, non-empty, suitable layout) and
run the reference otherwise; the reference stays reachable as
``prim.impls["reference"]``. Arguments are validated once, by the
primitive's rules, before a kernel runs: the kernels trust them.

It also declares the traits of host implementations that the compiled
programs rely on (``"view"``, ``"writes_out"``; see
:mod:`funcgrad.compiler.program`).

    >>> from funcgrad.primitives.softmax import softmax_p
    >>> softmax_p.impl is softmax_p.impls["cpu"]          # after import funcgrad
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from funcgrad import _core
from funcgrad import _dtypes
from funcgrad.backends.cpu import kernels_conv as _kconv
from funcgrad.backends.cpu import kernels_select as _kselect
from funcgrad.backends.cpu import kernels_softmax as _ksoftmax
from funcgrad.compiler import codegen
from funcgrad.primitives import attention as A
from funcgrad.primitives import conv as C
from funcgrad.primitives import dynamic as D
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import indexing as I
from funcgrad.primitives import linalg as L
from funcgrad.primitives import shape as S
from funcgrad.primitives import softmax as SM

BACKEND = "cpu"
_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

Impl = Callable[..., Any]


def _kernel_ok(*arrays: np.ndarray) -> bool:
    """Whether the numba kernels take these arrays: float32/float64 and none empty."""
    return all(a.dtype in _KERNEL_DTYPES for a in arrays) and all(a.size for a in arrays)


def _rows(x: np.ndarray) -> np.ndarray:
    """``x`` (..., C) as a C-contiguous (N, C) array (a view when possible)."""
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


# --------------------------------------------------------------------------
# conv2d and pooling (kernels_conv)
# --------------------------------------------------------------------------


def _into(out: Any, result: Any) -> Any:
    """``result`` written into ``out`` (a compiled program's buffer, or a list of them), when given."""
    if out is None:
        return result
    if isinstance(out, list):
        return [_into(o, r) for o, r in zip(out, result)]
    if result is not out:
        np.copyto(out, result)
    return out


def _conv2d(reference: Impl) -> Impl:
    def impl(x, w, stride, padding, dilation, groups, out=None):
        if not (_kernel_ok(x, w) and x.dtype == w.dtype):
            return _into(out, reference(x, w, stride, padding, dilation, groups))
        C._conv_geometry("conv2d", x.shape, w.shape, stride, padding, dilation, groups)
        return _into(out, _kconv.conv2d_forward(x, w, stride, padding, dilation, groups, out=out))
    return impl


def _conv2d_grad(check: Callable[..., Any], kernel: Callable[..., Any]) -> Callable[[Impl], Impl]:
    """The input or weight gradient: ``check`` gives the result's shape, ``kernel`` computes it."""
    def make(reference: Impl) -> Impl:
        def impl(dy, other, stride, padding, dilation, groups, out=None, **hw):   # hw: in_hw or kernel_hw
            if not (_kernel_ok(dy, other) and dy.dtype == other.dtype):
                return _into(out, reference(dy, other, stride=stride, padding=padding, dilation=dilation,
                                            groups=groups, **hw))
            shape = check(dy, other, *hw.values(), stride, padding, dilation, groups)
            return _into(out, kernel(dy, other, shape, stride, padding, dilation, groups, out=out))
        return impl
    return make


def _weight_grad_kernel(dy, x, shape, stride, padding, dilation, groups, out=None):
    return _kconv.conv2d_backward_weight(dy, x, shape, stride, padding, dilation, groups)   # small: copied


_conv2d_input_grad = _conv2d_grad(C._conv_input_grad_check, _kconv.conv2d_backward_input)
_conv2d_weight_grad = _conv2d_grad(C._conv_weight_grad_check, _weight_grad_kernel)


def _pool2d(name: str, kernel_fn: Callable[..., Any]) -> Callable[[Impl], Impl]:
    """Max or average pooling forward: the kernel for float arrays it suits, else the reference."""
    def make(reference: Impl) -> Impl:
        def impl(x, kernel, stride, padding, out=None):
            if not _kernel_ok(x):
                return _into(out, reference(x, kernel, stride, padding))
            C._pool_out_shape(name, x.shape, kernel, stride, padding)
            return _into(out, kernel_fn(x, kernel, stride, padding, out=out))
        return impl
    return make


def _max_pool2d_forward(x, kernel, stride, padding, out=None):
    # Indices in the dtype the result is stored in (int32 unless x64): no conversion pass.
    return _kconv.max_pool2d_forward(x, kernel, stride, padding, index_dtype=_dtypes.canonicalize(np.int64),
                                     out=out)


_max_pool2d = _pool2d("max_pool2d", _max_pool2d_forward)
_avg_pool2d = _pool2d("avg_pool2d", _kconv.avg_pool2d_forward)


def _max_pool2d_grad(reference: Impl) -> Impl:
    def impl(dy, indices, in_hw, out=None):
        if not _kernel_ok(dy):
            return _into(out, reference(dy, indices, in_hw))
        C._max_pool_grad_check(dy, indices, in_hw)
        return _into(out, _kconv.max_pool2d_backward(dy, indices, tuple(dy.shape[:2]) + tuple(in_hw), out=out))
    return impl


def _avg_pool2d_grad(reference: Impl) -> Impl:
    def impl(dy, in_hw, kernel, stride, padding, out=None):
        if not _kernel_ok(dy):
            return _into(out, reference(dy, in_hw, kernel, stride, padding))
        x_shape = C._avg_pool_grad_check(dy, in_hw, kernel, stride, padding)
        return _into(out, _kconv.avg_pool2d_backward(dy, x_shape, kernel, stride, padding, out=out))
    return impl


# All of them take ``out=``: a compiled program hands them its planned buffers (warm memory).
_CONV_WRITES_OUT = (C.conv2d_p, C.conv2d_input_grad_p, C.conv2d_weight_grad_p, C.max_pool2d_p, C.max_pool2d_grad_p,
                    C.avg_pool2d_p, C.avg_pool2d_grad_p)


# --------------------------------------------------------------------------
# softmax family (kernels_softmax)
# --------------------------------------------------------------------------


def _row_kernel(kernel: Callable) -> Callable[[Impl], Impl]:
    """impl running ``kernel(rows, out)`` over the last axis of (..., C)."""
    def make(reference: Impl) -> Impl:
        def impl(x):
            if not _kernel_ok(x):
                return reference(x)
            rows = _rows(x)
            out = np.empty_like(rows)
            kernel(rows, out)
            return out.reshape(x.shape)
        return impl
    return make


def _row_grad_kernel(kernel: Callable) -> Callable[[Impl], Impl]:
    """impl running ``kernel(y_rows, g_rows, out)`` over the last axis of (..., C) pairs."""
    def make(reference: Impl) -> Impl:
        def impl(y, g):
            if not _kernel_ok(y, g) or y.dtype != g.dtype:
                return reference(y, g)
            out = np.empty(y.shape, y.dtype)
            kernel(_rows(y), _rows(g), out.reshape(-1, y.shape[-1]))
            return out
        return impl
    return make


def _logsumexp(reference: Impl) -> Impl:
    def impl(x):
        if not _kernel_ok(x):
            return reference(x)
        out = np.empty(x.shape[:-1], x.dtype)
        _ksoftmax.logsumexp_rows(_rows(x), out.reshape(-1))
        return out
    return impl


def _softmax_cross_entropy(reference: Impl) -> Impl:
    def impl(logits, labels):
        if not _kernel_ok(logits):
            return reference(logits, labels)
        SM._check_labels("softmax_cross_entropy", logits, labels)
        loss = np.empty(logits.shape[0], logits.dtype)
        lse = np.empty_like(loss)
        _ksoftmax.softmax_xent_fwd(np.ascontiguousarray(logits), np.ascontiguousarray(labels), loss, lse)
        return loss
    return impl


def _softmax_cross_entropy_grad(reference: Impl) -> Impl:
    def impl(logits, labels, g):
        if not _kernel_ok(logits) or g.dtype != logits.dtype:
            return reference(logits, labels, g)
        SM._check_labels("softmax_cross_entropy_grad", logits, labels)
        logits = np.ascontiguousarray(logits)
        out = np.empty_like(logits)
        _ksoftmax.softmax_xent_grad(logits, np.ascontiguousarray(labels), np.ascontiguousarray(g), out)
        return out
    return impl


def _tiered(make: Callable[[Impl], Impl]) -> Callable[[Impl], Impl]:
    """``make``'s kernel impl, with a tiered start: for argument types (dtype, rank, size
    class) whose numba kernels are not compiled yet, the call runs ``reference`` (numpy)
    and the kernel impl runs once on copies of the arguments on the background compiler
    thread, compiling (or loading from the disk cache) what it needs; later calls run the
    kernels.  Only under ``FUNCGRAD_JIT_BACKGROUND_COMPILE=all`` (numpy's results differ
    from the kernels' in the last bits); otherwise the kernels compile on first use."""
    def tiered_make(reference: Impl) -> Impl:
        kernel_impl = make(reference)
        ready: set = set()
        queued: set = set()

        def impl(*args: Any) -> Any:
            key = tuple((a.dtype, a.ndim, a.size >= _ksoftmax._PARALLEL_MIN_SIZE) if isinstance(a, np.ndarray)
                        else type(a) for a in args)
            if key in ready or codegen.BACKGROUND_COMPILE != "all":
                return kernel_impl(*args)
            if key not in queued:
                queued.add(key)
                copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]

                def job() -> None:
                    try:
                        kernel_impl(*copies)
                    except BaseException:
                        queued.discard(key)   # e.g. bad labels: a later call queues it again
                        raise
                    ready.add(key)
                codegen.compile_in_background(job)
            return reference(*args)
        return impl
    return tiered_make


# --------------------------------------------------------------------------
# flash attention (flash_attention: imported on first use, it is large)
# --------------------------------------------------------------------------


def _kernel_inputs(*xs: np.ndarray) -> list[np.ndarray]:
    """C-contiguous float32/float64 copies (or the arrays): the kernels compute in those;
    half precision goes through float32."""
    dt = xs[0].dtype if xs[0].dtype in _KERNEL_DTYPES else np.dtype(np.float32)
    return [np.ascontiguousarray(x, dtype=dt) for x in xs]


def _flash_attention(reference: Impl) -> Impl:
    def impl(q, k, v, *, causal, scale):
        from funcgrad.backends.cpu.flash_attention import flash_attention_forward
        A._check("flash_attention", q, k, v)
        o, lse = flash_attention_forward(*_kernel_inputs(q, k, v), causal=causal, scale=scale)
        return [o.astype(q.dtype, copy=False), lse.astype(A.lse_dtype(q.dtype), copy=False)]
    return impl


def _flash_attention_bwd(reference: Impl) -> Impl:
    def impl(q, k, v, o, lse, do, *, causal, scale):
        from funcgrad.backends.cpu.flash_attention import flash_attention_backward
        A._check_bwd(q, k, v, o, lse, do)
        dq, dk, dv = flash_attention_backward(*_kernel_inputs(q, k, v, o, lse, do), causal=causal, scale=scale)
        return [g.astype(q.dtype, copy=False) for g in (dq, dk, dv)]
    return impl


# --------------------------------------------------------------------------
# select (kernels_select) and the row scatter-add (kernels_scatter)
# --------------------------------------------------------------------------


def select_large(c: np.ndarray, x: Any, y: Any) -> np.ndarray | None:
    """where(c, x, y) through the CPU select loops, or None when the layout does not suit them.

    They take ``x`` and ``y`` of ``c``'s shape, C-contiguous and of the result
    dtype, or 0-d (a scalar); anything else (broadcasting, views) goes to np.where.
    """
    try:
        dtype = np.result_type(x, y)   # numpy's own rule, as np.where applies it (scalars weak)
    except (TypeError, ValueError, OverflowError):
        return None                    # the reference reports it
    if dtype == np.float16:
        return None                    # numba has no float16 scalars: np.where
    ops = []
    for v in (x, y):
        v = np.asarray(v)
        if v.ndim == 0:
            v = v.astype(dtype)
        elif v.shape != c.shape or v.dtype != dtype or not v.flags.c_contiguous:
            return None
        ops.append(v)
    if not (ops[0].ndim or ops[1].ndim):
        return None
    return _kselect.select_into(np.empty(c.shape, dtype), c, ops[0], ops[1])


def _select(reference: Impl) -> Impl:
    def impl(c, x, y):
        if type(c) is np.ndarray and c.dtype == np.bool_ and c.size >= _kselect.MIN_SIZE and c.flags.c_contiguous:
            out = select_large(c, x, y)
            if out is not None:
                return out
        return reference(c, x, y)
    return impl


def _is_row_scatter(template: tuple, arrays: tuple, x: np.ndarray, y: Any) -> bool:
    """``x[idx] += y`` / ``x[idx, :, ...] += y`` with one 1-d index array into a float
    array: the embedding/take gradient."""
    return (len(arrays) == 1 and template[0] == ("a", 0) and np.ndim(arrays[0]) == 1 and np.ndim(x) >= 1
            and np.result_type(x, y).kind == "f" and all(t == ("s", None, None, None) for t in template[1:]))


def _scatter_add(reference: Impl) -> Impl:
    def impl(x, y, *arrays, template):
        if not _is_row_scatter(template, arrays, x, y):
            return reference(x, y, *arrays, template=template)
        out = np.array(x, dtype=np.result_type(x, y), copy=True)
        idx = arrays[0]
        inner = int(np.prod(out.shape[1:], dtype=np.int64))
        if len(idx) == 0 or inner == 0:   # nothing to add (and reshape(-1) is ambiguous at size 0)
            return out
        from funcgrad.backends.cpu.kernels_scatter import scatter_add_rows
        # Deterministic and ~10x faster than np.add.at.
        rows = out.reshape(out.shape[0], inner)
        src = np.broadcast_to(np.asarray(y, out.dtype), (len(idx),) + out.shape[1:]).reshape(len(idx), inner)
        scatter_add_rows(rows, np.asarray(idx), src)
        return out
    return impl


# --------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------

_IMPLS: dict = {
    C.conv2d_p: _conv2d, C.conv2d_input_grad_p: _conv2d_input_grad, C.conv2d_weight_grad_p: _conv2d_weight_grad,
    C.max_pool2d_p: _max_pool2d, C.max_pool2d_grad_p: _max_pool2d_grad,
    C.avg_pool2d_p: _avg_pool2d, C.avg_pool2d_grad_p: _avg_pool2d_grad,
    SM.softmax_p: _tiered(_row_kernel(_ksoftmax.softmax)),
    SM.log_softmax_p: _tiered(_row_kernel(_ksoftmax.log_softmax)),
    SM.softmax_grad_p: _tiered(_row_grad_kernel(_ksoftmax.softmax_bwd)),
    SM.log_softmax_grad_p: _tiered(_row_grad_kernel(_ksoftmax.log_softmax_bwd)),
    SM.logsumexp_p: _tiered(_logsumexp),
    SM.softmax_cross_entropy_p: _tiered(_softmax_cross_entropy),
    SM.softmax_cross_entropy_grad_p: _tiered(_softmax_cross_entropy_grad),
    A.flash_attention_p: _flash_attention, A.flash_attention_bwd_p: _flash_attention_bwd,
    E.select_p: _select,
    I.scatter_add_p: _scatter_add,
}

# Host implementations that may return a view of their first input.
_VIEWS = (S.reshape_p, S.transpose_p, S.broadcast_to_p, I.getitem_p, E.stop_gradient_p, I.flip_p,
          D.dynamic_slice_p)
# Host implementations that take ``out=`` (a compiled program's planned buffer).
_WRITES_OUT = (L.matmul_p,) + _CONV_WRITES_OUT


def register() -> None:
    """Register the CPU implementations and traits (idempotent: references are kept once)."""
    for prim, make in _IMPLS.items():
        reference = prim.impls.get("reference", prim.impl)
        _core.register_impl(prim, BACKEND, make(reference))
    for prim in _VIEWS:
        _core.add_traits(prim, "view")
    for prim in _WRITES_OUT:
        _core.add_traits(prim, "writes_out")
