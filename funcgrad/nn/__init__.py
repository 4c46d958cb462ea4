"""``funcgrad.nn``: activations, losses, initializers and layers as pure functions.

>>> import funcgrad as fg, funcgrad.nn as nn, funcgrad.numpy as fnp
>>> from funcgrad import random
>>> model = nn.Sequential(nn.Linear(512), nn.ReLU(), nn.Linear(10))
>>> params, _ = model.init(random.key(0), (-1, 784))
>>> def loss(params, x, y):                     # x f32[B,784], y i32[B]
...     return nn.cross_entropy(model.apply(params, x), y)
>>> x, y = fnp.ones((4, 784)), fnp.array([0, 1, 2, 3])
>>> grads = fg.grad(loss)(params, x, y)         # same pytree as params
>>> fg.tree.structure(grads) == fg.tree.structure(params)
True

Layers follow one convention (see ``funcgrad/nn/_layers.py``):
``init(key, input_shape) -> (params, output_shape)`` and
``apply(params, x, *, key=None, train=False) -> y``.
"""
from funcgrad.lax import avg_pool2d, conv2d, max_pool2d
from funcgrad.nn import initializers
from funcgrad.nn import _activations
from funcgrad.nn._activations import *  # noqa: F401,F403  (its __all__: the rest of jax.nn's activations)
from funcgrad.nn._functions import (gelu, leaky_relu, log_softmax, logsumexp, one_hot, relu, sigmoid, silu, softmax,
                                    softplus, swish, tanh)
from funcgrad.nn._layers import (Activation, AvgPool2d, Conv2d, Dropout, Embedding, Flatten, GELU, Layer, LayerNorm,
                                 Linear, LogSoftmax, MaxPool2d, ReLU, Sequential, SiLU, Sigmoid, Softmax, Softplus,
                                 Tanh, serial)
from funcgrad.nn._losses import binary_cross_entropy_with_logits, cross_entropy, mse
from funcgrad.nn.attention import MultiHeadAttention, dot_product_attention

__all__ = ["initializers", "relu", "leaky_relu", "gelu", "sigmoid", "softplus", "silu", "swish", "tanh", "softmax",
           "log_softmax", "logsumexp", "one_hot", "cross_entropy", "mse", "binary_cross_entropy_with_logits",
           "conv2d", "max_pool2d", "avg_pool2d", "Layer", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "Flatten",
           "Dropout", "LayerNorm", "Embedding", "Sequential", "serial", "Activation", "ReLU", "GELU", "Sigmoid",
           "Tanh", "SiLU", "Softplus", "Softmax", "LogSoftmax", "dot_product_attention", "MultiHeadAttention",
           *_activations.__all__]
