"""GPU backend for funcgrad.

Nothing here imports Triton or CuPy at import time: CI machines have neither
a GPU nor (necessarily) those packages, and importing funcgrad must stay cheap
and side-effect free. Import the submodules explicitly:

* ``funcgrad.backends.gpu._detect.gpu_available()`` -- never raises.
* ``funcgrad.backends.gpu.flash_attention`` -- Triton FlashAttention-2
  forward/backward kernels (importing it imports Triton).
* ``funcgrad.backends.gpu.triton_kernels`` -- fused row kernels: softmax,
  log_softmax, softmax cross-entropy, layer norm (imports Triton).
* ``funcgrad.backends.gpu.array`` -- ``GpuArray`` (an Array over a CuPy
  buffer), its primitive dispatch and host transfers (CuPy imported on use).
* ``funcgrad.backends.gpu.cupy_impls`` -- the primitive -> CuPy table.

The array type, dispatch and tables are untested on a real GPU so far.
"""
