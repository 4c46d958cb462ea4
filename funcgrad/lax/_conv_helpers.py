"""Convolution helpers as ``jax.lax``'s: ``conv_transpose``, ``conv_with_general_padding``,
``conv_general_dilated_patches``/``_local``, ``conv_dimension_numbers``, ``padtype_to_pads`` and the
``*_shape_tuple`` functions.
"""
from __future__ import annotations

import builtins
from typing import Any, NamedTuple, Sequence

import numpy as np

from funcgrad._core import bind
from funcgrad._dtypes import describe
from funcgrad.primitives import indexing as _I, shape as _S
from funcgrad.primitives.linalg import einsum
from funcgrad.primitives.shape import shape_of
from funcgrad.lax import _more
from funcgrad.lax._gather_scatter import _ints, _range

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers",
           "conv_dimension_numbers", "conv_general_dilated_local", "conv_general_dilated_patches",
           "conv_general_permutations", "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose",
           "conv_transpose_shape_tuple", "conv_with_general_padding", "padtype_to_pads", "reduce_window_shape_tuple"]

Array = Any
# ------------------------------------------------------------------ convolution helpers


class ConvDimensionNumbers(NamedTuple):
    """A convolution's layouts as index permutations, as ``jax.lax.ConvDimensionNumbers``: ``lhs_spec``
    (batch, feature, spatial...), ``rhs_spec`` (out feature, in feature, spatial...), ``out_spec``.

    >>> lax.conv_dimension_numbers((1, 3, 8, 8), (4, 3, 3, 3), ("NCHW", "OIHW", "NCHW"))
    ConvDimensionNumbers(lhs_spec=(0, 1, 2, 3), rhs_spec=(0, 1, 2, 3), out_spec=(0, 1, 2, 3))
    """
    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


ConvGeneralDilatedDimensionNumbers = Any      # None | (str, str, str) | ConvDimensionNumbers, as JAX's alias
DotDimensionNumbers = tuple    # ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), as JAX's alias


def conv_general_permutations(dimension_numbers: Any) -> tuple:
    """The permutations ``(lhs, rhs, out)`` of the string form ``("NHWC", "HWIO", "NHWC")``, as JAX's.

    >>> conv_general_permutations(("NHWC", "HWIO", "NHWC"))
    ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    """
    specs = tuple(dimension_numbers)
    if len(specs) != 3 or not all(isinstance(s, str) for s in specs):
        raise TypeError(f"conv_general_permutations: needs three layout strings, got {dimension_numbers!r}")
    return _more._conv_dims(specs, len(specs[0]))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None, three layout strings, or a ConvDimensionNumbers) as a
    :class:`ConvDimensionNumbers`, as ``jax.lax.conv_dimension_numbers``.

    >>> conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got {len(lhs_shape)} and "
                        f"{len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(_range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)) or len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers must be None or a length-3 tuple/list, got "
                        f"{dimension_numbers!r}")
    if all(isinstance(s, str) for s in dimension_numbers):
        for s in dimension_numbers:
            if len(s) != len(lhs_shape):
                raise TypeError(f"convolution dimension_numbers {dimension_numbers!r} must have len equal to the "
                                f"ndim of lhs and rhs ({len(lhs_shape)})")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    return ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in dimension_numbers))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: Any) -> list:
    """``"SAME"`` / ``"SAME_LOWER"`` / ``"VALID"`` as explicit ``(low, high)`` pads per dimension, as
    ``jax.lax.padtype_to_pads``.

    >>> padtype_to_pads((5,), (3,), (2,), "SAME")
    [(1, 1)]
    """
    name = str(getattr(padding, "name", padding)).upper()
    if name not in ("SAME", "SAME_LOWER", "VALID"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', got {padding}.")
    if name == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-int(n) // int(s))
        total = builtins.max((out - 1) * int(s) + int(w) - int(n), 0)
        pads.append((total // 2, total - total // 2) if name == "SAME" else (total - total // 2, total // 2))
    return pads


def _stride_dim(n: int, w: int, s: int) -> int:
    return builtins.max(0, (n - w) // s + 1) if n >= w else 0


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple:
    """The output shape of a convolution in (N, C, spatial...) / (O, I, spatial...) layouts, as
    ``jax.lax.conv_shape_tuple``.

    >>> conv_shape_tuple((2, 3, 7, 7), (4, 3, 3, 3), (2, 2), "SAME")
    (2, 4, 4, 4)
    """
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, got "
                        f"{len(pads)}.")
    padded = [int(n) + int(lo) + int(hi) for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding dimension: got "
                         f"padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    space = tuple(_stride_dim(p, int(w), int(s)) for p, w, s in zip(padded, rhs_shape[2:], strides))
    n0 = int(lhs_shape[0]) // batch_group_count if batch_group_count > 1 else int(lhs_shape[0])
    return (n0, int(rhs_shape[0])) + space


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: Any, dimension_numbers: Any) -> tuple:
    """The output shape of ``conv_general_dilated`` (no dilation) for string layouts, as JAX's.

    >>> conv_general_shape_tuple((2, 7, 7, 3), (3, 3, 3, 4), (1, 1), "VALID", ("NHWC", "HWIO", "NHWC"))
    (2, 5, 5, 4)
    """
    lp, rp, op = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple([lhs_shape[i] for i in lp], [rhs_shape[i] for i in rp], window_strides, padding)
    return tuple(out[i] for i in np.argsort(op))


def _conv_transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    # JAX's _conv_transpose_padding.
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + builtins.max(k - s, 0)
        pad_a = k - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or explicit pairs, got {padding!r}")
    return pad_a, pad_len - pad_a


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: Any, dimension_numbers: Any) -> tuple:
    """The output shape of ``conv_transpose`` for string layouts, as JAX's.

    >>> conv_transpose_shape_tuple((1, 3, 2), (2, 2, 4), (2,), "SAME", ("NHC", "HIO", "NHC"))
    (1, 6, 4)
    """
    lp, rp, op = conv_general_permutations(dimension_numbers)
    lt, rt = [lhs_shape[i] for i in lp], [rhs_shape[i] for i in rp]
    if isinstance(padding, str):
        padding = [_conv_transpose_pads(int(k), int(s), padding) for k, s in zip(rt[2:], window_strides)]
    total = [int(lo) + int(hi) for lo, hi in padding]
    space = [(int(i) - 1) * int(s) - int(k) + 2 + p for i, k, s, p in zip(lt[2:], rt[2:], window_strides, total)]
    out = (int(lt[0]), int(rt[0])) + tuple(space)
    return tuple(out[i] for i in np.argsort(op))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple:
    """The output shape of ``reduce_window``, as ``jax.lax.reduce_window_shape_tuple``.

    >>> reduce_window_shape_tuple((4, 6), (2, 3), (2, 1), [(0, 0), (1, 1)])
    (2, 6)
    """
    def dilate(shape: Sequence[int], d: Sequence[int]) -> list:
        return [0 if n == 0 else 1 + int(k) * (int(n) - 1) for n, k in zip(shape, d)]
    if base_dilation is not None:
        operand_shape = dilate(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = dilate(window_dimensions, window_dilation)
    padded = [int(d) + int(lo) + int(hi) for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(_stride_dim(p, int(w), int(s)) for p, w, s in zip(padded, window_dimensions, window_strides))


def conv_with_general_padding(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
                              precision: Any = None, preferred_element_type: Any = None) -> Array:
    """``conv_general_dilated`` in NCHW / OIHW layouts, as ``jax.lax.conv_with_general_padding``.

    >>> conv_with_general_padding(fnp.ones((1, 1, 4, 4)), fnp.ones((2, 1, 3, 3)), (1, 1), [(1, 1), (0, 0)],
    ...                           None, None).shape     # (1, 2, 4, 2)
    (1, 2, 4, 2)
    """
    return _more.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                      rhs_dilation=rhs_dilation, precision=precision,
                                      preferred_element_type=preferred_element_type)


def conv_transpose(lhs: Array, rhs: Array, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Array:
    """The transposed convolution (fractionally strided), as ``jax.lax.conv_transpose``: a
    ``conv_general_dilated`` with ``lhs_dilation=strides``. ``dimension_numbers`` default to
    channels last, ``("NHC", "HIO", "NHC")`` / ``("NHWC", "HWIO", "NHWC")``, as JAX;
    ``transpose_kernel=True`` flips the spatial axes and swaps the kernel's I and O (the gradient of a
    strided conv).

    >>> conv_transpose(fnp.ones((1, 3, 1)), fnp.ones((2, 1, 1)), (2,), "VALID").shape
    (1, 6, 1)
    """
    if use_consistent_padding:
        raise NotImplementedError("lax.conv_transpose: use_consistent_padding=True is not supported")
    lhs_shape, rhs_shape = tuple(shape_of(lhs)), tuple(shape_of(rhs))
    nd = len(lhs_shape)
    if len(rhs_shape) != nd or nd < 3:
        raise ValueError(f"lax.conv_transpose: lhs and rhs need equal rank >= 3, got {describe(lhs)} and "
                         f"{describe(rhs)}")
    if dimension_numbers is None:      # JAX's defaults: channels last
        if nd > 5:
            raise ValueError("lax.conv_transpose: No 4+ dimensional dimension_number defaults.")
        sp = "HWD"[:nd - 2]
        dimension_numbers = ("N" + sp + "C", sp + "IO", "N" + sp + "C")
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    k_sdims = [rhs_shape[i] for i in dn.rhs_spec[2:]]
    if rhs_dilation is None:
        rhs_dilation = (1,) * (nd - 2)
    eff_k = [(k - 1) * int(d) + 1 for k, d in zip(k_sdims, rhs_dilation)]
    if isinstance(padding, str):
        pads = [_conv_transpose_pads(k, int(s), padding.upper()) for k, s in zip(eff_k, strides)]
    else:
        pads = [(int(lo), int(hi)) for lo, hi in padding]
    if transpose_kernel:
        rhs = bind(_I.flip_p, (rhs,), {"axes": tuple(int(a) for a in dn.rhs_spec[2:])})
        spec = list(dn.rhs_spec)
        spec[0], spec[1] = spec[1], spec[0]
        dn = ConvDimensionNumbers(dn.lhs_spec, tuple(spec), dn.out_spec)
    # lhs_dilation = strides, as interior padding, with the pads around it (negative pads crop).
    config = [(0, 0, 0)] * nd
    for j, (s, (lo, hi)) in enumerate(zip(strides, pads)):
        config[dn.lhs_spec[2 + j]] = (lo, hi, int(s) - 1)
    x = _more.pad(lhs, _more.lax.full((), 0, _more.dtype(lhs)), config)
    return _more.conv_general_dilated(x, rhs, (1,) * (nd - 2), [(0, 0)] * (nd - 2), rhs_dilation=rhs_dilation,
                                      dimension_numbers=dn, precision=precision,
                                      preferred_element_type=preferred_element_type)




def conv_general_dilated_patches(lhs: Array, filter_shape: Sequence[int], window_strides: Sequence[int],
                                 padding: Any, lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                                 precision: Any = None, preferred_element_type: Any = None) -> Array:
    """The patches a convolution with a ``filter_shape`` window would see, as
    ``jax.lax.conv_general_dilated_patches``: the output's feature dimension has size
    ``C * prod(filter_shape)`` (channel-major), the rest is a convolution's output layout.

    >>> conv_general_dilated_patches(fnp.ones((1, 2, 4, 4)), (2, 2), (1, 1), "VALID").shape
    (1, 8, 3, 3)
    """
    from funcgrad._core import Array as _Concrete, _freeze
    filter_shape = _ints(filter_shape)
    lhs_shape = tuple(shape_of(lhs))
    dn = conv_dimension_numbers(lhs_shape, (1, 1) + filter_shape, dimension_numbers)
    size = int(np.prod(filter_shape))
    channels = lhs_shape[dn.lhs_spec[1]]
    eye = np.broadcast_to(np.eye(size), (channels, size, size)).reshape((channels * size, 1) + filter_shape)
    rhs = np.moveaxis(eye, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    rhs = _Concrete(_freeze(np.ascontiguousarray(rhs, dtype=np.dtype(_more.dtype(lhs)))))
    return _more.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                      rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                      feature_group_count=channels, precision=precision,
                                      preferred_element_type=preferred_element_type)


def _dot_general(x: Array, y: Array, dimension_numbers: Any) -> Array:
    # funcgrad.lax.dot_general's contraction (this module cannot import the package it is part of).
    (xc, yc), (xb, yb) = dimension_numbers
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    xs = [next(letters) for _ in shape_of(x)]
    ys = [next(letters) for _ in shape_of(y)]
    for i, j in zip(tuple(xc) + tuple(xb), tuple(yc) + tuple(yb)):
        ys[j] = xs[i]
    batch = [xs[i] for i in xb]
    free_x = [c for i, c in enumerate(xs) if i not in xc and i not in xb]
    free_y = [c for j, c in enumerate(ys) if j not in yc and j not in yb]
    return einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(batch + free_x + free_y)}", x, y)


def conv_general_dilated_local(lhs: Array, rhs: Array, window_strides: Sequence[int], padding: Any,
                               filter_shape: Sequence[int], lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                               precision: Any = None) -> Array:
    """A locally connected (unshared) convolution, as ``jax.lax.conv_general_dilated_local``: every output
    position has its own kernel; ``rhs``'s spatial axes are the output's, its ``I`` axis the input
    channels times the ``filter_shape`` window (channel-major), as in :func:`conv_general_dilated_patches`.

    >>> conv_general_dilated_local(fnp.ones((1, 1, 3, 3)), fnp.ones((2, 4, 2, 2)), (1, 1), "VALID", (2, 2)).shape
    (1, 2, 2, 2)
    """
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=lhs_dilation,
                                           rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers)
    _, rhs_spec, out_spec = conv_dimension_numbers(tuple(shape_of(lhs)), (1, 1) + _ints(filter_shape),
                                                   dimension_numbers)
    lhs_b, rhs_b = list(out_spec[2:]), list(rhs_spec[2:])
    rhs_b = [rhs_b[i] for i in sorted(_range(len(rhs_b)), key=lambda k: lhs_b[k])]
    lhs_b = sorted(lhs_b)
    out = _dot_general(patches, rhs, (([out_spec[1]], [rhs_spec[1]]), (lhs_b, rhs_b)))
    nd = len(shape_of(out))           # (spatial..., N, O) -> out_spec's layout (numpy's moveaxis of two axes)
    perm: list = [None] * nd
    perm[out_spec[0]], perm[out_spec[1]] = nd - 2, nd - 1
    others = iter(_range(nd - 2))
    perm = [next(others) if p is None else p for p in perm]
    return _S.transpose(out, tuple(perm)) if perm != list(_range(nd)) else out
