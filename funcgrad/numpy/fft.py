"""``funcgrad.numpy.fft``: discrete Fourier transforms (numpy's and JAX's API), differentiable.

Every transform is one ``lax.fft`` (numpy's pocketfft on the CPU) with a
linear jvp and JAX's transpose rules, so grad, vmap and jit work through it.
Real inputs become complex64 (complex128 with x64); ``irfft``/``hfft`` return
floats. ``norm`` is ``"backward"`` (the default, ``None``), ``"ortho"`` or
``"forward"``, as in numpy.

>>> import funcgrad.numpy as fnp
>>> fnp.fft.fft(fnp.array([1.0, 0.0, 0.0, 0.0]))    # [1, 1, 1, 1] (complex64)
Array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from funcgrad import _dtypes, lax
from funcgrad._dtypes import describe
from funcgrad.numpy._base import arr, index_arg, normalize_axis
from funcgrad.typing import Array, ArrayLike, DTypeLike

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _check_norm(name: str, norm: Any) -> None:
    if norm not in _NORMS:
        raise ValueError(f'{name}: invalid norm value {norm!r}; should be "backward", "ortho" or "forward" '
                         "(or None, the same as \"backward\")")


def _operand(name: str, a: Any, fft_type: str) -> Any:
    """``a`` in the dtype the transform takes: float for rfft, complex for the others."""
    a = arr(a)
    dtype = a.dtype
    if fft_type == "rfft":
        if dtype.kind == "c":
            raise TypeError(f"{name}: expects real input, got {describe(a)}; use fft for complex input (or take "
                            "fnp.real of it first)")
        return a if _dtypes.kind(dtype) == "f" else lax.convert_element_type(a, _dtypes.float_)
    target = _dtypes.canonicalize(_dtypes.complex_dtype(dtype))   # int8 -> complex64, int64 -> complex128 (x64)
    return a if dtype == target else lax.convert_element_type(a, target)


def _axes_and_sizes(name: str, a: Any, s: Any, axes: Any, fft_type: str) -> tuple[list, list]:
    ndim = a.ndim
    if s is not None:
        s = [index_arg(name, "s", n) for n in (s if isinstance(s, (tuple, list)) else [s])]
    if axes is None:
        if s is None:
            axes = list(range(ndim))
        else:
            if len(s) > ndim:
                raise ValueError(f"{name}: s={tuple(s)} has more entries than {describe(a)} has axes")
            axes = list(range(ndim - len(s), ndim))
    else:
        axes = [normalize_axis(name, ax, ndim, a) for ax in (axes if isinstance(axes, (tuple, list)) else [axes])]
        if ndim == 0:
            raise ValueError(f"{name}: axis out of range for a 0-d array {describe(a)}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axes are not supported, got axes {tuple(axes)}")
    if not axes:
        if fft_type in ("rfft", "irfft"):
            raise ValueError(f"{name}: needs at least one axis to transform")
        return [], []
    if s is None:
        s = [a.shape[ax] for ax in axes]
        if fft_type == "irfft":
            s[-1] = 2 * (a.shape[axes[-1]] - 1)
    elif len(s) != len(axes):
        raise ValueError(f"{name}: s={tuple(s)} and axes={tuple(axes)} must have the same length")
    if any(n < 1 for n in s):
        raise ValueError(f"{name}: invalid number of FFT data points {tuple(s)} for {describe(a)}: every length "
                         "must be at least 1")
    return axes, s


def _resize(a: Any, axis: int, n: int) -> Any:
    """``a`` cut or zero-padded to ``n`` entries along ``axis`` (numpy's ``n=``/``s=``)."""
    size = a.shape[axis]
    if size > n:
        return lax.slice_in_dim(a, 0, n, 1, axis)
    if size < n:
        config = [(0, 0, 0)] * a.ndim
        config[axis] = (0, n - size, 0)
        return lax.pad(a, 0, config)
    return a


def _transform(a: Any, axes: list, lengths: list, fft_type: str) -> Any:
    """One lax.fft over ``axes`` (moved to the end and back), at most 3 at a time."""
    ndim = a.ndim
    rest = [d for d in range(ndim) if d not in axes]
    perm = rest + list(axes)
    x = a if perm == list(range(ndim)) else lax.transpose(a, perm)
    x = lax.fft(x, fft_type, tuple(lengths))
    inverse = [0] * ndim
    for i, p in enumerate(perm):
        inverse[p] = i
    return x if perm == list(range(ndim)) else lax.transpose(x, inverse)


def _scale(x: Any, n: int, norm: Any, inverse: bool) -> Any:
    # The primitive computes numpy's "backward" convention: no factor forward, 1/n inverse.
    if norm in (None, "backward"):
        return x
    if norm == "ortho":
        factor = math.sqrt(n) if inverse else 1.0 / math.sqrt(n)
    else:   # "forward"
        factor = float(n) if inverse else 1.0 / n
    return lax.mul(x, factor)


def _fftn(name: str, fft_type: str, a: Any, s: Any, axes: Any, norm: Any) -> Any:
    _check_norm(name, norm)
    a = arr(a)
    axes, lengths = _axes_and_sizes(name, a, s, axes, fft_type)
    x = _operand(name, a, fft_type)
    if not axes:
        return x
    for i, (ax, n) in enumerate(zip(axes, lengths)):
        last = i == len(axes) - 1
        x = _resize(x, ax, n // 2 + 1 if fft_type == "irfft" and last else n)
    n_total = int(np.prod(lengths))
    inverse = fft_type in ("ifft", "irfft")
    # Groups of at most 3 axes; the real transform takes the group with the last axis.
    groups = [list(range(i, min(i + 3, len(axes)))) for i in range(0, len(axes), 3)]
    if fft_type in ("fft", "ifft"):
        for g in groups:
            x = _transform(x, [axes[i] for i in g], [lengths[i] for i in g], fft_type)
    elif fft_type == "rfft":
        x = _transform(x, [axes[i] for i in groups[-1]], [lengths[i] for i in groups[-1]], "rfft")
        for g in groups[:-1]:
            x = _transform(x, [axes[i] for i in g], [lengths[i] for i in g], "fft")
    else:
        for g in groups[:-1]:
            x = _transform(x, [axes[i] for i in g], [lengths[i] for i in g], "ifft")
        x = _transform(x, [axes[i] for i in groups[-1]], [lengths[i] for i in groups[-1]], "irfft")
    return _scale(x, n_total, norm, inverse)


def _one_axis(name: str, fft_type: str, a: Any, n: Any, axis: Any, norm: Any) -> Any:
    a = arr(a)
    if a.ndim == 0:
        raise ValueError(f"{name}: expects an array of at least 1 dimension, got {describe(a)}")
    s = None if n is None else [index_arg(name, "n", n)]
    return _fftn(name, fft_type, a, s, [axis], norm)


# ------------------------------------------------------------------ 1-d


def fft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The 1-d discrete Fourier transform along ``axis`` (cut or zero-padded to ``n``); complex result.

    >>> fnp.fft.fft(fnp.array([1.0, 2.0, 3.0, 4.0]))
    Array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j], dtype=complex64)
    """
    return _one_axis("fft", "fft", a, n, axis, norm)


def ifft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The inverse of :func:`fft` (scaled by 1/n with the default norm); complex result.

    >>> fnp.fft.ifft(fnp.fft.fft(fnp.array([1.0, 2.0])))   # [1, 2] (complex)
    Array([1.+0.j, 2.+0.j], dtype=complex64)
    """
    return _one_axis("ifft", "ifft", a, n, axis, norm)


def rfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The DFT of real input: the ``n // 2 + 1`` non-negative frequencies along ``axis``.

    >>> fnp.fft.rfft(fnp.array([1.0, 2.0, 3.0, 4.0]))
    Array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
    """
    return _one_axis("rfft", "rfft", a, n, axis, norm)


def irfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The inverse of :func:`rfft`: ``n`` real values (default ``2 * (m - 1)`` for ``m`` input frequencies).

    >>> fnp.fft.irfft(fnp.fft.rfft(fnp.array([1.0, 2.0, 3.0, 4.0])))
    Array([1., 2., 3., 4.], dtype=float32)
    """
    return _one_axis("irfft", "irfft", a, n, axis, norm)


def hfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The FFT of a signal with Hermitian symmetry given by its first half ``a``: ``n`` real values.

    ``hfft(a, n) == irfft(conj(a), n) * n`` with the default norm, as numpy.

    >>> fnp.fft.hfft(fnp.array([1.0, 2.0, 3.0]))           # f32[4]
    Array([ 8., -2.,  0., -2.], dtype=float32)
    """
    _check_norm("hfft", norm)
    a = arr(a)
    if a.ndim == 0:
        raise ValueError(f"hfft: expects an array of at least 1 dimension, got {describe(a)}")
    a = _operand("hfft", a, "fft")
    return _one_axis("hfft", "irfft", lax.conj(a), n, axis, _SWAP[norm])


def ihfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The inverse of :func:`hfft`: the first ``n // 2 + 1`` entries of the Hermitian spectrum of real ``a``.

    >>> fnp.fft.ihfft(fnp.array([1.0, 2.0, 3.0, 4.0]))     # c64[3]
    Array([ 2.5-0.j , -0.5-0.5j, -0.5-0.j ], dtype=complex64)
    """
    _check_norm("ihfft", norm)
    return lax.conj(_one_axis("ihfft", "rfft", a, n, axis, _SWAP[norm]))


# ------------------------------------------------------------------ 2-d and n-d


def fft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Array:
    """The 2-d DFT over ``axes`` (default the last two); ``s`` cuts or zero-pads them.

    >>> fnp.fft.fft2(fnp.ones((2, 2)))
    Array([[4.+0.j, 0.+0.j],
           [0.+0.j, 0.+0.j]], dtype=complex64)
    """
    return _fftn("fft2", "fft", a, s, axes, norm)


def ifft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Array:
    """The inverse of :func:`fft2`.

    >>> fnp.fft.ifft2(fnp.fft.fft2(fnp.ones((2, 2))))      # ones (complex)
    Array([[1.+0.j, 1.+0.j],
           [1.+0.j, 1.+0.j]], dtype=complex64)
    """
    return _fftn("ifft2", "ifft", a, s, axes, norm)


def rfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Array:
    """The 2-d DFT of real input (the last of ``axes`` keeps ``n // 2 + 1`` frequencies).

    >>> fnp.fft.rfft2(fnp.ones((2, 4))).shape
    (2, 3)
    """
    return _fftn("rfft2", "rfft", a, s, axes, norm)


def irfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Array:
    """The inverse of :func:`rfft2` (real result).

    >>> fnp.fft.irfft2(fnp.fft.rfft2(fnp.ones((2, 4)))).shape
    (2, 4)
    """
    return _fftn("irfft2", "irfft", a, s, axes, norm)


def fftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Array:
    """The n-d DFT over ``axes`` (default all, or the last ``len(s)``); ``s`` cuts or zero-pads them.

    >>> fnp.fft.fftn(fnp.ones((2, 3))).shape
    (2, 3)
    """
    return _fftn("fftn", "fft", a, s, axes, norm)


def ifftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    """The inverse of :func:`fftn`.

    >>> fnp.fft.ifftn(fnp.fft.fftn(fnp.ones((2, 3)))).shape
    (2, 3)
    """
    return _fftn("ifftn", "ifft", a, s, axes, norm)


def rfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    """The n-d DFT of real input (the last of ``axes`` keeps ``n // 2 + 1`` frequencies).

    >>> fnp.fft.rfftn(fnp.ones((2, 3, 4))).shape
    (2, 3, 3)
    """
    return _fftn("rfftn", "rfft", a, s, axes, norm)


def irfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Array:
    """The inverse of :func:`rfftn` (real result; the last axis defaults to ``2 * (m - 1)``).

    >>> fnp.fft.irfftn(fnp.fft.rfftn(fnp.ones((2, 4)))).shape
    (2, 4)
    """
    return _fftn("irfftn", "irfft", a, s, axes, norm)


# ------------------------------------------------------------------ frequencies and shifts


def _freq_dtype(name: str, dtype: Any, device: Any) -> np.dtype:
    if device is not None:
        raise NotImplementedError(f"{name}: device={device!r} is not supported; funcgrad makes the array on the "
                                  "CPU (move it with fg.device_put afterwards)")
    dtype = _dtypes.float_ if dtype is None else _dtypes.canonicalize(dtype, requested=True)
    if _dtypes.kind(dtype) not in "fc":
        raise ValueError(f"{name}: dtype must be a float (or complex) dtype, got {dtype}")
    return dtype


def _freqs(name: str, base: np.ndarray, n: int, d: Any, dtype: np.dtype) -> Any:
    k = arr(base.astype(dtype))
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return lax.mul(k, 1.0 / (d * n)) if n else k
    d = arr(d)
    if d.shape != ():
        raise ValueError(f"{name}: the sample spacing d must be a scalar, got {describe(d)}")
    return lax.div(k, lax.mul(lax.convert_element_type(d, dtype), float(n))) if n else k


def fftfreq(n: int, d: Any = 1.0, *, dtype: DTypeLike | None = None, device: Any = None) -> Any:
    """The DFT sample frequencies for ``n`` samples spaced ``d`` apart: ``[0, 1, ..., -1] / (d * n)``.

    >>> fnp.fft.fftfreq(4)
    Array([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    n = index_arg("fftfreq", "n", n)
    if n < 0:
        raise ValueError(f"fftfreq: n must be non-negative, got {n}")
    dtype = _freq_dtype("fftfreq", dtype, device)
    base = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)]).astype(np.float64)
    return _freqs("fftfreq", base, n, d, dtype)


def rfftfreq(n: int, d: Any = 1.0, *, dtype: DTypeLike | None = None, device: Any = None) -> Any:
    """The sample frequencies of :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``.

    >>> fnp.fft.rfftfreq(4)
    Array([0.  , 0.25, 0.5 ], dtype=float32)
    """
    n = index_arg("rfftfreq", "n", n)
    if n < 0:
        raise ValueError(f"rfftfreq: n must be non-negative, got {n}")
    dtype = _freq_dtype("rfftfreq", dtype, device)
    return _freqs("rfftfreq", np.arange(0, n // 2 + 1, dtype=np.float64), n, d, dtype)


def _roll(name: str, x: Any, axes: Any, inverse: bool) -> Any:
    x = arr(x)
    if axes is None:
        axes = list(range(x.ndim))
    elif isinstance(axes, (tuple, list)):
        axes = [normalize_axis(name, ax, x.ndim, x) for ax in axes]
    else:
        axes = [normalize_axis(name, axes, x.ndim, x)]
    for ax in axes:
        size = x.shape[ax]
        if size < 2:
            continue
        shift = -(size // 2) if inverse else size // 2   # roll by shift: out[i] = x[i - shift]
        cut = (size - shift) % size
        if cut:
            x = lax.concatenate([lax.slice_in_dim(x, cut, size, 1, ax), lax.slice_in_dim(x, 0, cut, 1, ax)], ax)
    return x


def fftshift(x: ArrayLike, axes: None | int | Sequence[int] = None) -> Array:
    """The zero frequency moved to the centre: roll each of ``axes`` (default all) by half its size.

    >>> fnp.fft.fftshift(fnp.arange(5))
    Array([3, 4, 0, 1, 2], dtype=int32)
    """
    return _roll("fftshift", x, axes, inverse=False)


def ifftshift(x: ArrayLike, axes: None | int | Sequence[int] = None) -> Array:
    """The inverse of :func:`fftshift` (they differ for odd sizes).

    >>> fnp.fft.ifftshift(fnp.arange(5))
    Array([2, 3, 4, 0, 1], dtype=int32)
    """
    return _roll("ifftshift", x, axes, inverse=True)
