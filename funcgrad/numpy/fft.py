"""``funcgrad.numpy.fft``: discrete Fourier transforms."""
from __future__ import annotations

__all__: list[str] = []
