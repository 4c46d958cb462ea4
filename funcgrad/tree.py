"""``fg.tree``: JAX's short names for the pytree utilities (``jax.tree``).

>>> import funcgrad as fg
>>> fg.tree.map(lambda x: x * 2, {"a": 1, "b": (2, 3)})
{'a': 2, 'b': (4, 6)}
>>> fg.tree.leaves({"b": 2, "a": [1]})
[1, 2]
"""
from __future__ import annotations

import dataclasses
from typing import Any

from funcgrad.tree_util import (tree_all as all, tree_broadcast as broadcast, tree_flatten as flatten,  # noqa: A001
                                tree_flatten_with_path as flatten_with_path, tree_leaves as leaves,
                                tree_leaves_with_path as leaves_with_path, tree_map as map,  # noqa: A001
                                tree_map_with_path as map_with_path, tree_reduce as reduce,
                                tree_reduce_associative as reduce_associative, tree_structure as structure,
                                tree_transpose as transpose, tree_unflatten as unflatten)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map", "map_with_path",
           "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]


def static(**kwargs: Any) -> Any:
    """A dataclass field that ``register_dataclass`` keeps static (part of the structure, not a leaf).

    Takes ``dataclasses.field``'s arguments:

    >>> import dataclasses
    >>> @fg.tree_util.register_dataclass
    ... @dataclasses.dataclass
    ... class Op:
    ...     x: float
    ...     kind: str = fg.tree.static(default="add")
    >>> fg.tree_util.tree_leaves(Op(1.0))
    [1.0]
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)
