"""The discrete Fourier transform primitive (``jax.lax.fft``), on numpy's pocketfft.

``fft_p`` transforms the trailing ``len(fft_lengths)`` axes of its operand;
``fft_type`` is one of

* ``"fft"``:   complex -> complex, ``numpy.fft.fftn``;
* ``"ifft"``:  complex -> complex, ``numpy.fft.ifftn`` (scaled by 1/N);
* ``"rfft"``:  real -> complex, the last axis becomes ``n // 2 + 1``;
* ``"irfft"``: complex -> real, the last axis ``n // 2 + 1`` becomes ``n`` (scaled by 1/N).

It is linear: the jvp is the same transform of the tangent. The vjps are the
transposes (JAX's convention for complex values, as in jax/_src/lax/fft.py):
the DFT matrix is symmetric, so ``fft`` and ``ifft`` are their own
transposes; ``rfft``'s transpose pads the cotangent back to ``n`` entries,
takes the full ``fft`` and keeps the real part; ``irfft``'s is ``rfft`` of the
cotangent with the Hermitian weights (1, 2, ..., 2, 1) / N, conjugated.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Primitive, bind
from funcgrad._dtypes import ShapedArray, describe
from funcgrad.primitives.elementwise import conj, convert_p, mul, real
from funcgrad.primitives.indexing import pad_p
from funcgrad.primitives.shape import moveaxis, shape_of

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")

fft_p = Primitive("fft")


def _out_dtype(dtype: np.dtype, fft_type: str) -> np.dtype:
    if fft_type == "irfft":
        return _dtypes.real_dtype(dtype)
    return _dtypes.complex_dtype(dtype)


def _fft_impl(x, fft_type, fft_lengths):
    x = np.asarray(x)
    _fft_aval(x, fft_type, fft_lengths)   # the eager path runs the impl only: the checks too
    k = len(fft_lengths)
    axes = tuple(range(x.ndim - k, x.ndim))
    if fft_type == "fft":
        out = np.fft.fftn(x, axes=axes)
    elif fft_type == "ifft":
        out = np.fft.ifftn(x, axes=axes)
    elif fft_type == "rfft":
        out = np.fft.rfftn(x, axes=axes)
    else:
        out = np.fft.irfftn(x, s=fft_lengths, axes=axes)
    return np.asarray(out, dtype=_out_dtype(x.dtype, fft_type))


def _fft_aval(x, fft_type, fft_lengths):
    shape, dtype = tuple(shape_of(x)), np.dtype(x.dtype)
    k = len(fft_lengths)
    if fft_type not in FFT_TYPES:
        raise ValueError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    if not 1 <= k <= 3 or k > len(shape):
        raise ValueError(f"fft: fft_lengths {fft_lengths} must name 1 to 3 trailing axes of the operand "
                         f"{describe(x)}")
    if any(n < 1 for n in fft_lengths):
        raise ValueError(f"fft: fft_lengths {fft_lengths} must be positive")
    want_kind = "f" if fft_type == "rfft" else "c"
    if _dtypes.kind(dtype) != want_kind:
        raise TypeError(f"fft: {fft_type} expects a {'float' if want_kind == 'f' else 'complex'} operand, got "
                        f"{describe(x)}")
    lead, tail = shape[:len(shape) - k], shape[len(shape) - k:]
    lengths = tuple(fft_lengths)
    if fft_type == "irfft":
        expected = lengths[:-1] + (lengths[-1] // 2 + 1,)
        out_tail = lengths
    else:
        expected = lengths
        out_tail = lengths[:-1] + (lengths[-1] // 2 + 1,) if fft_type == "rfft" else lengths
    if tail != expected:
        raise ValueError(f"fft: {fft_type} with fft_lengths {lengths} expects trailing axes {expected}, got "
                         f"{describe(x)}")
    return ShapedArray(lead + out_tail, _out_dtype(dtype, fft_type))


def fft(x: Any, fft_type: str, fft_lengths: tuple) -> Any:
    return bind(fft_p, (x,), {"fft_type": fft_type, "fft_lengths": tuple(int(n) for n in fft_lengths)})


def _fft_jvp(primals, tangents, fft_type, fft_lengths):
    return fft(primals[0], fft_type, fft_lengths), fft(tangents[0], fft_type, fft_lengths)


def _irfft_weights(fft_lengths: tuple, dtype: np.dtype) -> np.ndarray:
    """(1, 2, ..., 2, 1) / N along the half-spectrum axis: each kept frequency stands for itself and its
    mirror image, except 0 and (for even n) n / 2."""
    n = fft_lengths[-1]
    m = n // 2 + 1
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return (w / float(np.prod(fft_lengths))).astype(_dtypes.real_dtype(dtype))


def _fft_vjp(ct, primals, out, needs, fft_type, fft_lengths):
    x = primals[0]
    if fft_type in ("fft", "ifft"):
        return (fft(ct, fft_type, fft_lengths),)
    if fft_type == "rfft":
        # rfft(x) = fft(complex(x))[..., :n//2+1]: pad, full fft, real part.
        n = fft_lengths[-1]
        nd = len(shape_of(ct))
        widths = ((0, 0),) * (nd - 1) + ((0, n - (n // 2 + 1)),)
        full = pad_p.bind(ct, widths=widths, value=0)
        return (real(fft(full, "fft", fft_lengths)),)
    # irfft
    spectrum = fft(ct, "rfft", fft_lengths)
    weighted = mul(spectrum, _irfft_weights(fft_lengths, spectrum.dtype))
    return (convert_p.bind(conj(weighted), dtype=np.dtype(x.dtype)) if weighted.dtype != x.dtype
            else conj(weighted),)


def _fft_batch(values, dims, size, fft_type, fft_lengths):
    # The transform acts on trailing axes: the batch axis goes in front.
    return fft(moveaxis(values[0], dims[0], 0), fft_type, fft_lengths), 0


fft_p.impl = _fft_impl
fft_p.abstract_eval = _fft_aval
fft_p.jvp = _fft_jvp
fft_p.vjp = _fft_vjp
fft_p.batch = _fft_batch
