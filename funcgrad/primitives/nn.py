"""Neural-network primitives, each declared with all its rules.

* ``softmax``, ``log_softmax``, ``logsumexp`` over the last axis (callers
  move the axis there);
* ``softmax_cross_entropy(logits (N, C), labels int (N,)) -> loss (N,)``
  with a fused backward ``softmax_cross_entropy_grad``;
* ``conv2d`` (NCHW activations, OIHW weights) with its two gradient
  primitives ``conv2d_input_grad`` and ``conv2d_weight_grad``;
* ``max_pool2d`` and ``avg_pool2d`` with their gradient primitives.

(``erf``, used by the exact GELU, is declared in ``primitives/random_bits.py``.)

Implementations are the numba kernels of ``funcgrad.backends.cpu`` where
they exist and accept the dtype (float32/float64), a numpy reference
otherwise.

*Fused gradients, composite rules.*  A fused backward primitive (e.g.
``softmax_cross_entropy_grad``) runs one kernel on the first-order path.
Its own derivative rules come from a *composite*: the same function
written with differentiable primitives, differentiated by funcgrad itself
(:func:`_composite_rules`).  So the fast path stays fast and
``grad(grad(f))`` still works.  The conv and pooling gradient primitives
are linear in their cotangent input, so their rules are the other
primitives of the family (the adjoint of an adjoint is the operator).
"""
from funcgrad.primitives.conv import (avg_pool2d, avg_pool2d_grad_p, avg_pool2d_p, conv2d, conv2d_input_grad,
                                      conv2d_input_grad_p, conv2d_p, conv2d_weight_grad, conv2d_weight_grad_p,
                                      max_pool2d, max_pool2d_grad_p, max_pool2d_p)
from funcgrad.primitives.softmax import (log_softmax, log_softmax_grad_p, log_softmax_p, logsumexp, logsumexp_p,
                                         one_hot_like, softmax, softmax_cross_entropy, softmax_cross_entropy_grad_p,
                                         softmax_cross_entropy_p, softmax_grad_p, softmax_p)

__all__ = ["softmax", "log_softmax", "logsumexp", "softmax_cross_entropy", "conv2d", "conv2d_input_grad",
           "conv2d_weight_grad", "max_pool2d", "avg_pool2d", "softmax_p", "log_softmax_p", "logsumexp_p",
           "softmax_grad_p", "log_softmax_grad_p", "softmax_cross_entropy_p", "softmax_cross_entropy_grad_p",
           "conv2d_p", "conv2d_input_grad_p", "conv2d_weight_grad_p", "max_pool2d_p", "max_pool2d_grad_p",
           "avg_pool2d_p", "avg_pool2d_grad_p", "one_hot_like"]
