"""GPU backend for funcgrad.

Nothing here imports Triton or CuPy at import time: CI machines have neither
a GPU nor (necessarily) those packages, and importing funcgrad must stay cheap
and side-effect free. Import the submodules explicitly:

* ``funcgrad.backends.gpu._detect.gpu_available()`` -- never raises.
* ``funcgrad.backends.gpu.flash_attention`` -- Triton FlashAttention-2
  forward/backward kernels (importing it imports Triton).
"""
