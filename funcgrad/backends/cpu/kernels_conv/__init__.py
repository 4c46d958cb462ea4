"""2-D convolution and pooling on the CPU (NCHW activations, OIHW weights).

Convolution is im2col + BLAS, with the batch split into contiguous sample
ranges, one per worker thread, and BLAS held to one thread while they run.
Convolutions with few taps per output (C/groups * KH * KW <= 9: a first
layer on one channel, a depthwise layer) skip im2col: direct numba kernels,
parallel over samples, sum shifted copies of each zero-padded input plane
(``path_counts`` counts which path each call took). Pooling kernels are
direct loops, parallel over (sample, channel) planes. Every kernel can
write into a given ``out`` buffer (a compiled program's planned one).

* ``_conv.py``: the conv2d entry points (forward, input and weight
  gradients), their geometry and ``path_counts``;
* ``_gemm.py``: the im2col/col2im kernels, the per-thread workspace and the
  worker pool with BLAS on one thread;
* ``_direct.py``: the direct convolution kernels;
* ``_pooling.py``: max and average pooling, forward and backward;
* ``_common.py``: the numba options and small array helpers they share.

Every name is importable from here, as ``kernels_conv.<name>``.

Example::

    x = np.random.rand(128, 1, 28, 28).astype(np.float32)
    w = np.random.rand(32, 1, 3, 3).astype(np.float32)
    y = conv2d_forward(x, w, stride=1, padding=1)          # (128, 32, 28, 28)
    dx = conv2d_backward_input(np.ones_like(y), w, x.shape, padding=1)
    dw = conv2d_backward_weight(np.ones_like(y), x, w.shape, padding=1)
    p, idx = max_pool2d_forward(y, kernel=2)               # (128, 32, 14, 14)
    dy = max_pool2d_backward(np.ones_like(p), idx, y.shape)
"""

from __future__ import annotations

from funcgrad.backends.cpu import _threads  # noqa: F401 -- first: selects numba's threading layer
from funcgrad.backends.cpu.kernels_conv._conv import (conv2d_backward_input, conv2d_backward_weight, conv2d_forward,
                                                      path_counts)
from funcgrad.backends.cpu.kernels_conv._gemm import _blas_one_thread  # noqa: F401
from funcgrad.backends.cpu.kernels_conv._pooling import (avg_pool2d_backward, avg_pool2d_forward,
                                                         max_pool2d_backward, max_pool2d_forward)

__all__ = ["conv2d_forward", "conv2d_backward_input", "conv2d_backward_weight",
           "max_pool2d_forward", "max_pool2d_backward",
           "avg_pool2d_forward", "avg_pool2d_backward"]
