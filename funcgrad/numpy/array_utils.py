"""funcgrad.numpy.array_utils: funcgrad.numpy's rules for ``axis`` and ``shape`` arguments.

For functions built on funcgrad that take axes or shapes (as
``numpy.lib.array_utils`` does for numpy): they accept exactly what
``funcgrad.numpy`` accepts, and their errors read the same, headed by the
name of the calling function.  Floats, bools and strings are refused,
never truncated; numpy integers and concrete 0-d integer arrays are taken.

>>> from funcgrad.numpy import array_utils
>>> array_utils.normalize_axis("my_op", -1, 3)
2
>>> array_utils.normalize_axes("my_op", (-1, 0), 3)
(0, 2)
>>> array_utils.shape_tuple(4, "my_op")
(4,)
>>> array_utils.shape_tuple((2, 2.5), "my_op")
Traceback (most recent call last):
TypeError: my_op: shape must be an int or a tuple of ints, got tuple (2, 2.5): entry 1 is float 2.5 ...
"""
from funcgrad.numpy._base import normalize_axes, normalize_axis, shape_tuple

__all__ = ["normalize_axes", "normalize_axis", "shape_tuple"]
