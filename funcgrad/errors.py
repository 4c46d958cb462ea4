"""``fg.errors``: JAX's error class names (``jax.errors``), mapped onto funcgrad's classes so that
``except jax.errors.ConcretizationTypeError`` keeps working after the import change.

>>> try:
...     fg.jit(lambda x: int(x))(1.0)
... except fg.errors.ConcretizationTypeError as e:
...     print("needs static_argnums or lax.cond")
needs static_argnums or lax.cond
"""
from __future__ import annotations

from funcgrad._core import ConcretizationError, TracerArrayConversionError, TracerLeakError

__all__ = ["ConcretizationTypeError", "TracerBoolConversionError", "TracerIntegerConversionError",
           "TracerArrayConversionError", "NonConcreteBooleanIndexError", "UnexpectedTracerError", "JAXTypeError",
           "JAXIndexError", "JaxRuntimeError"]

# funcgrad raises one class where JAX distinguishes the conversion (bool/int/float all need a
# concrete value): each JAX name catches it. All are TypeErrors, as JAX's.
ConcretizationTypeError = ConcretizationError
TracerBoolConversionError = ConcretizationError
TracerIntegerConversionError = ConcretizationError
NonConcreteBooleanIndexError = ConcretizationError
UnexpectedTracerError = TracerLeakError
JAXTypeError = TypeError
JAXIndexError = IndexError
JaxRuntimeError = RuntimeError
