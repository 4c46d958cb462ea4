"""Types for annotating code that uses funcgrad (as ``jax.typing``).

* :data:`ArrayLike` -- what funcgrad functions accept as an array: a funcgrad :class:`Array`, a numpy array
  or numpy scalar, or a Python ``bool``/``int``/``float``/``complex``.
* :data:`DTypeLike` -- what a ``dtype=`` argument accepts: ``np.float32``, ``"float32"``, ``np.dtype(...)``,
  ``float``, or anything with a ``.dtype``.
* :data:`Shape` -- a tuple of ints.
* :data:`PyTree` -- a nested structure of lists, tuples, dicts (and registered nodes) with arrays at the leaves.
* :class:`Array` -- funcgrad's array (re-exported).

Use ``ArrayLike`` for inputs and ``Array`` for outputs: inside ``grad``, ``jit`` and ``vmap`` a function
receives tracers that behave as arrays, and annotating them ``Array`` is right for the type checker::

    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad.typing import Array, ArrayLike

    def loss(w: ArrayLike, x: ArrayLike) -> Array:
        return fnp.sum(fnp.tanh(fnp.asarray(x) @ w) ** 2)

    g: Array = fg.grad(loss)(fnp.ones(3), fnp.ones((2, 3)))

>>> import numpy as np, funcgrad.numpy as fnp
>>> from funcgrad.typing import Array, ArrayLike
>>> def double(x: ArrayLike) -> Array:
...     return fnp.asarray(x) * 2
>>> double(np.float32(1.5)).item()
3.0
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence, Tuple, Union

import numpy as np

from funcgrad._array import Array
from funcgrad._core import Tracer

__all__ = ["Array", "ArrayLike", "DTypeLike", "PyTree", "Shape"]

ArrayLike = Union[Array, Tracer, np.ndarray, np.bool_, np.number, bool, int, float, complex]
"""An array input: a funcgrad Array (or the tracer standing for one inside a transform), a numpy array or
scalar, or a Python scalar. Nested lists are accepted at run time but, as in JAX, not by the type: wrap them
with ``fnp.asarray``."""

class _SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


DTypeLike = Union[str, type, np.dtype, _SupportsDType]
"""A ``dtype=`` argument: anything ``np.dtype`` accepts (``np.float32``, ``"int32"``, ``float``)."""

Shape = Tuple[int, ...]
"""An array's shape: a tuple of non-negative ints."""

ShapeLike = Union[int, Sequence[int]]
"""A shape argument: an int or a sequence of ints (``fnp.zeros(3)``, ``fnp.zeros((2, 3))``)."""

PyTree = Any
"""A nested structure of lists, tuples, dicts, None and registered nodes, with arrays (or other leaves) at
the leaves (see ``funcgrad.tree_util``). An alias of ``Any``: a type checker cannot express the recursion
over registered node types; it documents intent."""
