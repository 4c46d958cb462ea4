"""Pytrees: nested containers of arrays that transforms flatten and rebuild.

Containers: tuple, list, dict (keys sorted; keys of mixed types, such as
``1`` and ``"a"``, sort by type name first), OrderedDict (keys in insertion
order), defaultdict (keys sorted; keeps its ``default_factory``), None (no
leaves), namedtuple, :class:`Partial`, dataclasses registered with
:func:`register_dataclass`, and any type registered with
:func:`register_pytree_node` / :func:`register_pytree_with_keys` /
:func:`register_static`.  Everything else is a leaf.

Key paths (``tree_flatten_with_path``, ``tree_map_with_path``, ``keystr``)
name each leaf's place as JAX does: ``SequenceKey`` (tuple/list index),
``DictKey`` (dict key), ``GetAttrKey`` (namedtuple/dataclass field) and
``FlattenedIndexKey`` (the child's position, for types registered without keys).

>>> leaves, tree = tree_flatten({"b": (1, 2), "a": [3]})
>>> leaves
[3, 1, 2]
>>> tree_unflatten(tree, [x * 10 for x in leaves])
{'a': [30], 'b': (10, 20)}

The implementation is in ``_registry`` (node types, the register functions, ``Partial``), ``_keys``
(key entries, ``keystr``), ``_treedef`` (``PyTreeDef``, flatten/unflatten, ``tree_map``, and the
transforms' ``flatten_fun``/``broadcast_prefix``) and ``_paths`` (the key-path functions and the rest
of JAX's tree_util).
"""
from __future__ import annotations

from funcgrad.tree_util._keys import DictKey, FlattenedIndexKey, GetAttrKey, KeyEntry, KeyPath, SequenceKey, keystr
from funcgrad.tree_util._paths import (flatten_one_level, flatten_one_level_with_keys, tree_all, tree_broadcast,
                                       tree_flatten_with_path, tree_leaves_with_path, tree_map_with_path,
                                       tree_reduce_associative, tree_transpose, treedef_children, treedef_is_leaf,
                                       treedef_tuple)
from funcgrad.tree_util._registry import (Partial, default_registry, is_tree_node, register_dataclass,
                                          register_pytree_node, register_pytree_node_class, register_pytree_with_keys,
                                          register_pytree_with_keys_class, register_static)
from funcgrad.tree_util._treedef import (PyTreeDef, all_leaves, broadcast_prefix, flatten_fun, tree_flatten,
                                         tree_leaves, tree_map, tree_reduce, tree_structure, tree_unflatten)

__all__ = ["PyTreeDef", "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
           "register_pytree_with_keys_class", "register_dataclass", "register_static", "tree_flatten",
           "tree_unflatten", "tree_leaves", "tree_structure", "tree_map", "tree_reduce", "tree_all", "all_leaves",
           "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path", "tree_broadcast",
           "tree_transpose", "tree_reduce_associative", "treedef_children", "treedef_is_leaf", "treedef_tuple",
           "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node", "keystr", "Partial", "SequenceKey",
           "DictKey", "GetAttrKey", "FlattenedIndexKey", "KeyEntry", "KeyPath", "default_registry"]
