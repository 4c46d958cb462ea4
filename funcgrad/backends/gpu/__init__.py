"""The GPU backend: CuPy arrays, CuPy and Triton implementations of the primitives.

Importing this package registers the backend (``backend``, a
:class:`~funcgrad.backends.gpu.array.GpuBackend` named ``"gpu"``) and the
primitives' GPU implementations, but imports neither Triton nor CuPy: CI
machines have neither a GPU nor (necessarily) those packages, and importing
funcgrad must stay cheap and side-effect free. The submodules:

* ``_detect.gpu_available()`` -- never raises.
* ``array`` -- ``GpuArray`` (an Array over a CuPy buffer), the backend
  object, host transfers, missing-implementation errors / host fallback
  (CuPy imported on use).
* ``impls`` -- the GPU implementations, registered as ``prim.impls["gpu"]``;
  ``impls_linalg`` those of linear algebra, FFT, callbacks and collectives.
* ``flash_attention`` -- Triton FlashAttention-2 forward/backward kernels,
  the GPU implementation of ``flash_attention_p`` / ``flash_attention_bwd_p``
  (importing it imports Triton).
* ``triton_kernels`` -- fused row kernels: softmax, log_softmax, softmax
  cross-entropy, layer norm (imports Triton).

Tested on the CPU with a numpy stand-in for CuPy and the Triton kernels in
Triton's interpreter; tests marked ``gpu`` run on a real GPU.
"""
from funcgrad.backends import register_backend
from funcgrad.backends.gpu import impls as _impls  # noqa: F401 -- registers the implementations
from funcgrad.backends.gpu import impls_linalg as _impls_linalg  # noqa: F401 -- linear algebra, fft, collectives
from funcgrad.backends.gpu.array import backend

register_backend(backend)

__all__ = ["backend"]
