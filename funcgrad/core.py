"""funcgrad.core: the types a library built on funcgrad checks against.

The public face of the core, in the spirit of ``jax.core``: the concrete
array type, the tracer type that stands for a value inside ``grad``,
``jit`` or ``vmap``, abstract values, and the short ``f32[2,3]`` form
that funcgrad's error messages use.

>>> import funcgrad.core as core, funcgrad.numpy as fnp
>>> isinstance(fnp.ones(3), core.Array)          # a concrete array
True
>>> core.describe(fnp.ones((2, 3)))
'f32[2,3]'
>>> core.ShapedArray((2, 3), "float32")          # what a transform knows of a value
f32[2,3]

A traced value is a :class:`Tracer`, never an :class:`Array`: test both
(``isinstance(x, (core.Array, core.Tracer))``) for "a funcgrad value", or
:class:`Array` alone for "a value known now" (concrete, not traced).
"""
from __future__ import annotations

from funcgrad._config import config   # the process-wide switches (also ``fg.config``), for libraries to read
from funcgrad._array import host_numpy   # a concrete array's value as numpy, wherever it lives (GPU too)
from funcgrad._core import Array, Tracer
from funcgrad._dtypes import ShapedArray, describe

__all__ = ["Array", "ShapedArray", "Tracer", "config", "describe", "host_numpy"]
