"""conv2d and 2-d pooling primitives (NCHW), each with its gradient primitives and rules."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives import elementwise as E
from funcgrad.primitives.indexing import getitem
from funcgrad.primitives.shape import move_to_front, moveaxis, reshape, shape_of

from funcgrad.primitives._nn_rules import (_require_float, _fold_batch)

# --------------------------------------------------------------------------
# conv2d (NCHW x OIHW -> NOHW; cross-correlation, as PyTorch and JAX)
# --------------------------------------------------------------------------


def _pair(op: str, name: str, v: Any, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints -> ``(int, int)``, each ``>= minimum``, after refusing what is
    no integer: ``2.5`` would be truncated, ``"a"`` leak int()'s message. The one rule for these
    arguments: implementations and kernels take the pairs it returns as they are.

    >>> _pair("MaxPool2d", "kernel_size", 2, 1)
    (2, 2)
    """
    pair = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if not all(isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_)) for e in pair):
        raise TypeError(f"{op}: {name} must be an int or a pair of ints (each >= {minimum}), got "
                        f"{type(v).__name__} {v!r:.40}")
    if len(pair) != 2:
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    if min(pair) < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {v!r}")
    return int(pair[0]), int(pair[1])


def _conv_out_len(in_len: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (in_len + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _conv_geometry(name: str, x_shape, w_shape, stride, padding, dilation, groups,
                   x_what: str = "x", w_what: str = "w") -> tuple[int, int, int, int]:
    """Check a conv2d's shapes; return its output shape (N, O, OH, OW)."""
    if len(x_shape) != 4:
        raise ValueError(f"{name}: {x_what} must be 4-D (N, C, H, W), got shape {tuple(x_shape)}")
    if len(w_shape) != 4:
        raise ValueError(f"{name}: {w_what} must be 4-D (O, C/groups, KH, KW), got shape {tuple(w_shape)}")
    n, c, h, w = x_shape
    o, cg, kh, kw = w_shape
    if groups < 1 or c % groups or o % groups:
        raise ValueError(f"{name}: groups={groups} must divide the input channels ({x_what} {tuple(x_shape)}: "
                         f"C={c}) and the output channels ({w_what} {tuple(w_shape)}: O={o})")
    if cg != c // groups:
        raise ValueError(f"{name}: {x_what} {tuple(x_shape)} has C={c} channels, so with groups={groups} the "
                         f"weights (O, C/groups, KH, KW) need shape[1] == {c // groups}, got {w_what} "
                         f"{tuple(w_shape)}")
    if kh < 1 or kw < 1:
        raise ValueError(f"{name}: kernel size must be at least 1, got {w_what} {tuple(w_shape)}")
    oh = _conv_out_len(h, kh, stride[0], padding[0], dilation[0])
    ow = _conv_out_len(w, kw, stride[1], padding[1], dilation[1])
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{name}: output size {oh}x{ow} is empty for {x_what} {tuple(x_shape)}, {w_what} "
                         f"{tuple(w_shape)}, stride {stride}, padding {padding}, dilation {dilation}: the "
                         "(dilated) kernel is larger than the padded input")
    return (n, o, oh, ow)


def _check_conv_dtypes(name: str, a: Any, b: Any) -> None:
    _require_float(name, a, b)
    if a.dtype != b.dtype:
        raise TypeError(f"{name}: operands {describe(a)} and {describe(b)} must have the same dtype")


def _patch_slices(k: int, d: int, s: int, out_len: int) -> slice:
    start = k * d
    return slice(start, start + s * (out_len - 1) + 1, s)


def _np_conv_patches(xp, kh, kw, stride, dilation, oh, ow):
    """(N, C, KH, KW, OH, OW) patches of the padded input ``xp``."""
    n, c = xp.shape[:2]
    patches = np.empty((n, c, kh, kw, oh, ow), xp.dtype)
    for i in range(kh):
        for j in range(kw):
            patches[:, :, i, j] = xp[:, :, _patch_slices(i, dilation[0], stride[0], oh),
                                     _patch_slices(j, dilation[1], stride[1], ow)]
    return patches


def _np_conv(x, w, stride, padding, dilation, groups):
    n, o, oh, ow = _conv_geometry("conv2d", x.shape, w.shape, stride, padding, dilation, groups)
    _, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    patches = _np_conv_patches(xp, kh, kw, stride, dilation, oh, ow).reshape(n, groups, cg, kh, kw, oh, ow)
    y = np.einsum("ngckluv,gockl->ngouv", patches, w.reshape(groups, o // groups, cg, kh, kw))
    return y.reshape(n, o, oh, ow).astype(x.dtype, copy=False)


def _np_conv_input_grad(dy, w, in_hw, stride, padding, dilation, groups):
    n, o, oh, ow = dy.shape
    _, cg, kh, kw = w.shape
    h, wd = in_hw
    dpatches = np.einsum("ngouv,gockl->ngckluv", dy.reshape(n, groups, o // groups, oh, ow),
                         w.reshape(groups, o // groups, cg, kh, kw)).reshape(n, groups * cg, kh, kw, oh, ow)
    dxp = np.zeros((n, groups * cg, h + 2 * padding[0], wd + 2 * padding[1]), dy.dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[:, :, _patch_slices(i, dilation[0], stride[0], oh),
                _patch_slices(j, dilation[1], stride[1], ow)] += dpatches[:, :, i, j]
    return dxp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd]


def _np_conv_weight_grad(dy, x, kernel_hw, stride, padding, dilation, groups):
    n, o, oh, ow = dy.shape
    c = x.shape[1]
    kh, kw = kernel_hw
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    patches = _np_conv_patches(xp, kh, kw, stride, dilation, oh, ow).reshape(n, groups, c // groups, kh, kw, oh, ow)
    dw = np.einsum("ngouv,ngckluv->gockl", dy.reshape(n, groups, o // groups, oh, ow), patches)
    return dw.reshape(o, c // groups, kh, kw).astype(x.dtype, copy=False)


# The numpy references. They check shapes too: eager calls reach an implementation
# without abstract_eval. (The CPU backend registers numba kernels that check with
# the same functions, once, and fall back to these.)

def _conv_impl(x, w, stride, padding, dilation, groups):
    return _np_conv(x, w, stride, padding, dilation, groups)   # _np_conv checks the geometry


def _conv_input_grad_shapes(dy_shape, w_shape, in_hw, groups) -> tuple[int, int, int, int]:
    return (dy_shape[0], w_shape[1] * groups) + tuple(in_hw) if len(dy_shape) == 4 and len(w_shape) == 4 else ()


def _conv_input_grad_check(dy, w, in_hw, stride, padding, dilation, groups):
    name = "conv2d_input_grad"
    x_shape = _conv_input_grad_shapes(dy.shape, w.shape, in_hw, groups)
    if not x_shape:
        raise ValueError(f"{name}: dy {describe(dy)} and w {describe(w)} must both be 4-D")
    y_shape = _conv_geometry(name, x_shape, w.shape, stride, padding, dilation, groups, "dx", "w")
    if tuple(dy.shape) != y_shape:
        raise ValueError(f"{name}: dy {describe(dy)} does not match the conv2d output shape {y_shape} for "
                         f"input {x_shape} and w {describe(w)}")
    return x_shape


def _conv_weight_grad_check(dy, x, kernel_hw, stride, padding, dilation, groups):
    name = "conv2d_weight_grad"
    if len(dy.shape) != 4 or len(x.shape) != 4:
        raise ValueError(f"{name}: dy {describe(dy)} and x {describe(x)} must both be 4-D")
    w_shape = (dy.shape[1], x.shape[1] // groups) + tuple(kernel_hw)
    y_shape = _conv_geometry(name, x.shape, w_shape, stride, padding, dilation, groups, "x", "dw")
    if tuple(dy.shape) != y_shape:
        raise ValueError(f"{name}: dy {describe(dy)} does not match the conv2d output shape {y_shape} for "
                         f"x {describe(x)} and weights {w_shape}")
    return w_shape


def _conv_input_grad_impl(dy, w, in_hw, stride, padding, dilation, groups):
    _conv_input_grad_check(dy, w, in_hw, stride, padding, dilation, groups)
    return _np_conv_input_grad(dy, w, in_hw, stride, padding, dilation, groups)


def _conv_weight_grad_impl(dy, x, kernel_hw, stride, padding, dilation, groups):
    _conv_weight_grad_check(dy, x, kernel_hw, stride, padding, dilation, groups)
    return _np_conv_weight_grad(dy, x, kernel_hw, stride, padding, dilation, groups)


conv2d_p = Primitive("conv2d")
conv2d_input_grad_p = Primitive("conv2d_input_grad")
conv2d_weight_grad_p = Primitive("conv2d_weight_grad")


def _conv_aval(x, w, stride, padding, dilation, groups):
    _check_conv_dtypes("conv2d", x, w)
    return ShapedArray(_conv_geometry("conv2d", x.shape, w.shape, stride, padding, dilation, groups), x.dtype)


def _conv_input_grad_aval(dy, w, in_hw, stride, padding, dilation, groups):
    _check_conv_dtypes("conv2d_input_grad", dy, w)
    return ShapedArray(_conv_input_grad_check(dy, w, in_hw, stride, padding, dilation, groups), dy.dtype)


def _conv_weight_grad_aval(dy, x, kernel_hw, stride, padding, dilation, groups):
    _check_conv_dtypes("conv2d_weight_grad", dy, x)
    return ShapedArray(_conv_weight_grad_check(dy, x, kernel_hw, stride, padding, dilation, groups), dy.dtype)


conv2d_p.impl, conv2d_p.abstract_eval = _conv_impl, _conv_aval
conv2d_input_grad_p.impl, conv2d_input_grad_p.abstract_eval = _conv_input_grad_impl, _conv_input_grad_aval
conv2d_weight_grad_p.impl, conv2d_weight_grad_p.abstract_eval = _conv_weight_grad_impl, _conv_weight_grad_aval


def _spatial(x: Any) -> tuple[int, int]:
    return tuple(shape_of(x)[2:4])


def _add_terms(a: Any, b: Any) -> Any:
    return b if a is None else (a if b is None else E.add(a, b))


# y = conv(x, w) is bilinear: each rule below is one of the three primitives.
#   <conv_input_grad(dy, w), v>  = <dy, conv(v, w)>
#   <conv_weight_grad(dy, x), u> = <dy, conv(x, u)>

def _conv_vjp(ct, primals, y, needs, **geo):
    x, w = primals
    dx = conv2d_input_grad_p.bind(ct, w, in_hw=_spatial(x), **geo) if needs[0] else None
    dw = conv2d_weight_grad_p.bind(ct, x, kernel_hw=_spatial(w), **geo) if needs[1] else None
    return dx, dw


def _conv_input_grad_vjp(ct, primals, out, needs, in_hw, **geo):
    dy, w = primals  # ct has the input's shape (N, C, H, W)
    d_dy = conv2d_p.bind(ct, w, **geo) if needs[0] else None
    d_w = conv2d_weight_grad_p.bind(dy, ct, kernel_hw=_spatial(w), **geo) if needs[1] else None
    return d_dy, d_w


def _conv_weight_grad_vjp(ct, primals, out, needs, kernel_hw, **geo):
    dy, x = primals  # ct has the weights' shape (O, C/groups, KH, KW)
    d_dy = conv2d_p.bind(x, ct, **geo) if needs[0] else None
    d_x = conv2d_input_grad_p.bind(dy, ct, in_hw=_spatial(x), **geo) if needs[1] else None
    return d_dy, d_x


def _bilinear_jvp(p: Primitive):
    """jvp of a primitive bilinear in its two operands: p(ta, b) + p(a, tb)."""
    def jvp(primals, tangents, **params):
        (a, b), (ta, tb) = primals, tangents
        out = p.bind(a, b, **params)
        t = None if ta is None else p.bind(ta, b, **params)
        if tb is not None:
            t = _add_terms(t, p.bind(a, tb, **params))
        return out, t
    return jvp


conv2d_p.jvp, conv2d_p.vjp = _bilinear_jvp(conv2d_p), _conv_vjp
conv2d_input_grad_p.jvp, conv2d_input_grad_p.vjp = _bilinear_jvp(conv2d_input_grad_p), _conv_input_grad_vjp
conv2d_weight_grad_p.jvp, conv2d_weight_grad_p.vjp = _bilinear_jvp(conv2d_weight_grad_p), _conv_weight_grad_vjp


def _examples_into_n(v: Any, d: int, size: int) -> Any:
    """(..B.., N, C, H, W) with B at ``d`` -> (B*N, C, H, W)."""
    v = moveaxis(v, d, 0)
    shape = shape_of(v)
    return reshape(v, (shape[0] * shape[1],) + shape[2:])


def _batch_into_channels(v: Any, d: int | None, size: int) -> Any:
    """(N, C, H, W) mapped at ``d`` (or unmapped: broadcast) -> (N, B*C, H, W), batch-major channels."""
    from funcgrad.primitives.shape import transpose
    v = transpose(move_to_front(v, d, size), (1, 0, 2, 3, 4))
    n, b, c, h, w = shape_of(v)
    return reshape(v, (n, b * c, h, w))


def _batch_into_out_channels(w: Any, d: int | None, size: int) -> Any:
    """Weights (O, C/g, KH, KW) mapped at ``d`` -> (B*O, C/g, KH, KW)."""
    w = move_to_front(w, d, size)
    b, o, cg, kh, kw = shape_of(w)
    return reshape(w, (b * o, cg, kh, kw))


# vmap rules. A mapped x (or dy) alone folds into the example axis N. A
# mapped weight uses grouped convolution: example b's channels become group
# block b (groups * B groups), so one kernel call serves the whole batch, as
# JAX does; no case needs a per-example loop.

def _conv_batch(values, dims, size, groups, **geo):
    (x, w), (dx_, dw_) = values, dims
    if dw_ is None:
        out = conv2d_p.bind(_examples_into_n(x, dx_, size), w, groups=groups, **geo)
        return reshape(out, (size, shape_of(out)[0] // size) + shape_of(out)[1:]), 0
    out = conv2d_p.bind(_batch_into_channels(x, dx_, size), _batch_into_out_channels(w, dw_, size),
                        groups=groups * size, **geo)
    n, bo, oh, ow = shape_of(out)
    return reshape(out, (n, size, bo // size, oh, ow)), 1


def _conv_input_grad_batch(values, dims, size, groups, in_hw, **geo):
    (dy, w), (d_dy, d_w) = values, dims
    if d_w is None:
        out = conv2d_input_grad_p.bind(_examples_into_n(dy, d_dy, size), w, groups=groups, in_hw=in_hw, **geo)
        return reshape(out, (size, shape_of(out)[0] // size) + shape_of(out)[1:]), 0
    out = conv2d_input_grad_p.bind(_batch_into_channels(dy, d_dy, size), _batch_into_out_channels(w, d_w, size),
                                   groups=groups * size, in_hw=in_hw, **geo)
    n, bc, h, w_ = shape_of(out)
    return reshape(out, (n, size, bc // size, h, w_)), 1


def _conv_weight_grad_batch(values, dims, size, groups, kernel_hw, **geo):
    # dw sums over the examples N, so the batch cannot fold into N: groups it is.
    (dy, x), (d_dy, d_x) = values, dims
    out = conv2d_weight_grad_p.bind(_batch_into_channels(dy, d_dy, size), _batch_into_channels(x, d_x, size),
                                    groups=groups * size, kernel_hw=kernel_hw, **geo)
    bo, cg, kh, kw = shape_of(out)
    return reshape(out, (size, bo // size, cg, kh, kw)), 0


conv2d_p.batch = _conv_batch
conv2d_input_grad_p.batch = _conv_input_grad_batch
conv2d_weight_grad_p.batch = _conv_weight_grad_batch


def conv2d(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """2-D cross-correlation. x: f32[N, C, H, W], w: f32[O, C/groups, KH, KW] -> f32[N, O, OH, OW].

    ``OH = (H + 2*padding - dilation*(KH - 1) - 1) // stride + 1``; stride,
    padding and dilation are ints or (h, w) pairs.

    >>> nn.conv2d(fnp.ones((1, 3, 8, 8)), fnp.ones((4, 3, 3, 3)), padding=1).shape   # NCHW, OIHW
    (1, 4, 8, 8)
    """
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
    return conv2d_p.bind(x, w, **_conv_params(stride, padding, dilation, groups))


def _conv_params(stride: Any, padding: Any, dilation: Any, groups: Any) -> dict:
    """The normalised parameters shared by conv2d and its two gradient primitives."""
    return dict(stride=_pair("conv2d", "stride", stride, 1), padding=_pair("conv2d", "padding", padding, 0),
                dilation=_pair("conv2d", "dilation", dilation, 1), groups=int(groups))


def conv2d_input_grad(dy: Any, w: Any, in_hw: tuple[int, int], stride: Any = 1, padding: Any = 0,
                      dilation: Any = 1, groups: int = 1) -> Any:
    """The vjp of conv2d with respect to x (a transposed convolution). -> f32[N, C, *in_hw].

    >>> lax.conv2d_input_grad(fnp.ones((1, 2, 2, 2)), fnp.ones((2, 3, 3, 3)), (4, 4)).shape
    (1, 3, 4, 4)
    """
    return conv2d_input_grad_p.bind(dy, w, in_hw=tuple(int(s) for s in in_hw),
                                    **_conv_params(stride, padding, dilation, groups))


def conv2d_weight_grad(dy: Any, x: Any, kernel_hw: tuple[int, int], stride: Any = 1, padding: Any = 0,
                       dilation: Any = 1, groups: int = 1) -> Any:
    """The vjp of conv2d with respect to w. -> f32[O, C/groups, *kernel_hw].

    >>> lax.conv2d_weight_grad(fnp.ones((1, 2, 2, 2)), fnp.ones((1, 3, 4, 4)), (3, 3)).shape
    (2, 3, 3, 3)
    """
    return conv2d_weight_grad_p.bind(dy, x, kernel_hw=tuple(int(s) for s in kernel_hw),
                                     **_conv_params(stride, padding, dilation, groups))


# --------------------------------------------------------------------------
# Pooling (kernel, stride, padding: (h, w) pairs)
# --------------------------------------------------------------------------


def _pool_out_shape(name: str, x_shape, kernel, stride, padding) -> tuple[int, int, int, int]:
    if len(x_shape) != 4:
        raise ValueError(f"{name}: x must be 4-D (N, C, H, W), got shape {tuple(x_shape)}")
    if 2 * padding[0] > kernel[0] or 2 * padding[1] > kernel[1]:
        raise ValueError(f"{name}: padding {padding} must be at most half the kernel {kernel} (as in PyTorch)")
    n, c, h, w = x_shape
    oh = (h + 2 * padding[0] - kernel[0]) // stride[0] + 1
    ow = (w + 2 * padding[1] - kernel[1]) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{name}: output size {oh}x{ow} is empty for x shape {tuple(x_shape)}, kernel "
                         f"{kernel}, stride {stride}, padding {padding}")
    return (n, c, oh, ow)


def _np_pool_patches(x, kernel, stride, padding, fill):
    n, c, oh, ow = _pool_out_shape("pool2d", x.shape, kernel, stride, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=fill)
    return _np_conv_patches(xp, kernel[0], kernel[1], stride, (1, 1), oh, ow)


def _np_max_pool(x, kernel, stride, padding):
    patches = _np_pool_patches(x, kernel, stride, padding, -np.inf)
    n, c, kh, kw, oh, ow = patches.shape
    flat = patches.reshape(n, c, kh * kw, oh, ow)
    arg = np.argmax(flat, axis=2)
    y = np.take_along_axis(flat, arg[:, :, None], axis=2)[:, :, 0]
    # window offset -> flat h*W + w position in the unpadded input plane
    i, j = np.divmod(arg, kw)
    rows = np.arange(oh)[:, None] * stride[0] - padding[0] + i
    cols = np.arange(ow)[None, :] * stride[1] - padding[1] + j
    return y.astype(x.dtype, copy=False), (rows * x.shape[3] + cols).astype(np.int64)


def _np_max_pool_grad(dy, idx, in_hw):
    n, c = dy.shape[:2]
    dx = np.zeros((n, c, in_hw[0] * in_hw[1]), dy.dtype)
    np.add.at(dx, (np.arange(n)[:, None, None], np.arange(c)[None, :, None], idx.reshape(n, c, -1)),
              dy.reshape(n, c, -1))
    return dx.reshape(n, c, *in_hw)


def _np_avg_pool(x, kernel, stride, padding):
    patches = _np_pool_patches(x, kernel, stride, padding, 0)
    return patches.mean(axis=(2, 3)).astype(x.dtype, copy=False)


def _np_avg_pool_grad(dy, in_hw, kernel, stride, padding):
    n, c, oh, ow = dy.shape
    dxp = np.zeros((n, c, in_hw[0] + 2 * padding[0], in_hw[1] + 2 * padding[1]), dy.dtype)
    share = dy / (kernel[0] * kernel[1])
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            dxp[:, :, _patch_slices(i, 1, stride[0], oh), _patch_slices(j, 1, stride[1], ow)] += share
    return dxp[:, :, padding[0]:padding[0] + in_hw[0], padding[1]:padding[1] + in_hw[1]]


def _max_pool_grad_check(dy, indices, in_hw) -> tuple[int, int, int, int]:
    """Check max_pool2d_grad's operands; return the input's shape."""
    if tuple(indices.shape) != tuple(dy.shape) or len(dy.shape) != 4:
        raise ValueError(f"max_pool2d_grad: dy {describe(dy)} and indices {describe(indices)} must have the "
                         "same 4-D shape")
    return tuple(dy.shape[:2]) + tuple(in_hw)


def _avg_pool_grad_check(dy, in_hw, kernel, stride, padding) -> tuple[int, int, int, int]:
    """Check avg_pool2d_grad's operands; return the input's shape."""
    if len(dy.shape) != 4:
        raise ValueError(f"avg_pool2d_grad: dy {describe(dy)} must be 4-D (N, C, OH, OW)")
    x_shape = tuple(dy.shape[:2]) + tuple(in_hw)
    expected = _pool_out_shape("avg_pool2d_grad", x_shape, kernel, stride, padding)
    if tuple(dy.shape) != expected:
        raise ValueError(f"avg_pool2d_grad: dy {describe(dy)} does not match the pooling output shape {expected}")
    return x_shape


def _max_pool_impl(x, kernel, stride, padding):
    _pool_out_shape("max_pool2d", x.shape, kernel, stride, padding)
    return _np_max_pool(x, kernel, stride, padding)


def _max_pool_grad_impl(dy, indices, in_hw):
    _max_pool_grad_check(dy, indices, in_hw)
    return _np_max_pool_grad(dy, indices, in_hw)


def _avg_pool_impl(x, kernel, stride, padding):
    _pool_out_shape("avg_pool2d", x.shape, kernel, stride, padding)
    return _np_avg_pool(x, kernel, stride, padding)


def _avg_pool_grad_impl(dy, in_hw, kernel, stride, padding):
    _avg_pool_grad_check(dy, in_hw, kernel, stride, padding)
    return _np_avg_pool_grad(dy, in_hw, kernel, stride, padding)


def _max_pool_aval(x, kernel, stride, padding):
    _require_float("max_pool2d", x)
    shape = _pool_out_shape("max_pool2d", x.shape, kernel, stride, padding)
    return [ShapedArray(shape, x.dtype), ShapedArray(shape, _dtypes.canonicalize(np.int64))]


def _max_pool_grad_aval(dy, indices, in_hw):
    return ShapedArray(_max_pool_grad_check(dy, indices, in_hw), dy.dtype)


def _avg_pool_grad_aval(dy, in_hw, kernel, stride, padding):
    return ShapedArray(_avg_pool_grad_check(dy, in_hw, kernel, stride, padding), dy.dtype)


def _gather_plane(v: Any, indices: Any) -> Any:
    """out[n, c, p, q] = v[n, c].flat[indices[n, c, p, q]] (differentiable: getitem)."""
    n, c, h, w = shape_of(v)
    oh, ow = shape_of(indices)[2:]
    rows = (np.arange(n).reshape(n, 1, 1), np.arange(c).reshape(1, c, 1), reshape(indices, (n, c, oh * ow)))
    flat = getitem(reshape(v, (n, c, h * w)), rows)
    return reshape(flat, (n, c, oh, ow))


max_pool2d_p = Primitive("max_pool2d", multiple_results=True)  # (y, argmax indices)
max_pool2d_p.impl, max_pool2d_p.abstract_eval = _max_pool_impl, _max_pool_aval
max_pool2d_p.batch = _fold_batch(max_pool2d_p)

max_pool2d_grad_p = Primitive("max_pool2d_grad")  # linear in dy: route each dy to its argmax
max_pool2d_grad_p.impl, max_pool2d_grad_p.abstract_eval = _max_pool_grad_impl, _max_pool_grad_aval
max_pool2d_grad_p.batch = _fold_batch(max_pool2d_grad_p)


def _max_pool_jvp(primals, tangents, **params):
    y, idx = max_pool2d_p.bind(primals[0], **params)
    return [y, idx], [_gather_plane(tangents[0], idx), None]


def _max_pool_vjp(cts, primals, outs, needs, **params):
    ct = cts[0]
    if ct is None:
        return (None,)
    return (max_pool2d_grad_p.bind(ct, outs[1], in_hw=_spatial(primals[0])),)


max_pool2d_p.jvp, max_pool2d_p.vjp = _max_pool_jvp, _max_pool_vjp
max_pool2d_grad_p.jvp = lambda primals, tangents, in_hw: (
    max_pool2d_grad_p.bind(primals[0], primals[1], in_hw=in_hw),
    max_pool2d_grad_p.bind(tangents[0], primals[1], in_hw=in_hw))
# The adjoint of "route dy to the argmax" is "read at the argmax".
max_pool2d_grad_p.vjp = lambda ct, primals, out, needs, in_hw: (_gather_plane(ct, primals[1]), None)

avg_pool2d_p = Primitive("avg_pool2d")  # linear
avg_pool2d_grad_p = Primitive("avg_pool2d_grad")  # linear: its adjoint is avg_pool2d
avg_pool2d_p.impl, avg_pool2d_grad_p.impl = _avg_pool_impl, _avg_pool_grad_impl
avg_pool2d_p.abstract_eval = lambda x, kernel, stride, padding: ShapedArray(
    _pool_out_shape("avg_pool2d", x.shape, kernel, stride, padding), x.dtype)
avg_pool2d_grad_p.abstract_eval = _avg_pool_grad_aval
avg_pool2d_p.jvp = lambda primals, tangents, **params: (
    avg_pool2d_p.bind(primals[0], **params), avg_pool2d_p.bind(tangents[0], **params))
avg_pool2d_p.vjp = lambda ct, primals, out, needs, **params: (
    avg_pool2d_grad_p.bind(ct, in_hw=_spatial(primals[0]), **params),)
avg_pool2d_grad_p.jvp = lambda primals, tangents, **params: (
    avg_pool2d_grad_p.bind(primals[0], **params), avg_pool2d_grad_p.bind(tangents[0], **params))
avg_pool2d_grad_p.vjp = lambda ct, primals, out, needs, in_hw, **params: (avg_pool2d_p.bind(ct, **params),)
avg_pool2d_p.batch = _fold_batch(avg_pool2d_p)
avg_pool2d_grad_p.batch = _fold_batch(avg_pool2d_grad_p)


def _pool_params(name: str, kernel: Any, stride: Any, padding: Any) -> dict:
    kernel = _pair(name, "kernel", kernel, 1)
    return dict(kernel=kernel, stride=kernel if stride is None else _pair(name, "stride", stride, 1),
                padding=_pair(name, "padding", padding, 0))


def max_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Max over windows. x: f32[N, C, H, W] -> f32[N, C, OH, OW]; stride defaults to kernel.

    Padding counts as -inf. The gradient goes to the first maximum of each window.

    >>> nn.max_pool2d(fnp.arange(16.0).reshape(1, 1, 4, 4), 2)
    Array([[[[ 5.,  7.],
             [13., 15.]]]], dtype=float32)
    """
    return max_pool2d_p.bind(x, **_pool_params("max_pool2d", kernel, stride, padding))[0]


def avg_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Mean over windows (zero padding counted, as PyTorch's default). f32[N, C, H, W] -> f32[N, C, OH, OW].

    >>> nn.avg_pool2d(fnp.arange(16.0).reshape(1, 1, 4, 4), 2)
    Array([[[[ 2.5,  4.5],
             [10.5, 12.5]]]], dtype=float32)
    """
    return avg_pool2d_p.bind(x, **_pool_params("avg_pool2d", kernel, stride, padding))

