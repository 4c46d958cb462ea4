"""Key paths and the rest of JAX's tree_util: ``tree_flatten_with_path``, ``tree_leaves_with_path``,
``tree_map_with_path``, ``tree_all``, ``tree_broadcast``, ``tree_transpose``, ``tree_reduce_associative``,
the ``treedef_*`` helpers and ``flatten_one_level``(``_with_keys``). Built on ``_treedef`` (flattening),
``_registry`` (node types) and ``_keys`` (key entries).
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable

from funcgrad.tree_util._keys import FlattenedIndexKey, GetAttrKey
from funcgrad.tree_util._registry import _key_registry, _node_type, _NodeType, _registry
from funcgrad.tree_util._treedef import (_LEAF, _UNSPECIFIED, PyTreeDef, tree_leaves, tree_map, tree_structure,
                                         tree_unflatten)


def _children_with_keys(x: Any, t: type, node: _NodeType) -> tuple[list, Hashable]:
    with_keys = _key_registry.get(t)
    if with_keys is not None:
        pairs, aux = with_keys(x)
        return list(pairs), aux
    if t not in _registry:   # namedtuple
        return [(GetAttrKey(f), c) for f, c in zip(t._fields, x)], None
    children, aux = node.flatten(x)
    return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux


def tree_flatten_with_path(tree: Any, is_leaf: Callable | None = None,
                           is_leaf_takes_path: bool = False) -> tuple[list, PyTreeDef]:
    """``([(key path, leaf), ...], structure)``: the leaves in ``tree_flatten``'s order with their paths.

    >>> tree_flatten_with_path({"a": [1, 2]})[0]
    [((DictKey(key='a'), SequenceKey(idx=0)), 1), ((DictKey(key='a'), SequenceKey(idx=1)), 2)]
    """
    pairs: list = []

    def walk(x: Any, path: tuple) -> PyTreeDef:
        if is_leaf is not None and (is_leaf(path, x) if is_leaf_takes_path else is_leaf(x)):
            pairs.append((path, x))
            return _LEAF
        found = _node_type(x)
        if found is None:
            pairs.append((path, x))
            return _LEAF
        t, node = found
        keyed, aux = _children_with_keys(x, t, node)
        return PyTreeDef(t, aux, tuple(walk(c, path + (k,)) for k, c in keyed))

    treedef = walk(tree, ())
    return pairs, treedef


def tree_leaves_with_path(tree: Any, is_leaf: Callable | None = None, is_leaf_takes_path: bool = False) -> list:
    """``[(key path, leaf), ...]`` (see :func:`tree_flatten_with_path`).

    >>> fg.tree_util.tree_leaves_with_path({"a": 1, "b": (2, 3)})
    [((DictKey(key='a'),), 1), ((DictKey(key='b'), SequenceKey(idx=0)), 2), ((DictKey(key='b'), SequenceKey(idx=1)), 3)]
    """
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """``f(path, leaf, *other_leaves)`` over trees of the same structure.

    >>> tree_map_with_path(lambda p, x: fg.tree_util.keystr(p), {"a": 1, "b": (2,)})
    {'a': "['a']", 'b': ("['b'][0]",)}
    """
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [treedef.flatten_up_to(r) for r in rest]
    return tree_unflatten(treedef, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


def tree_all(tree: Any, *, is_leaf: Callable | None = None) -> bool:
    """Whether every leaf is truthy.

    >>> fg.tree_util.tree_all({"a": True, "b": [True, 1]})
    True
    """
    return all(tree_leaves(tree, is_leaf))


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: Callable | None = None) -> Any:
    """``prefix_tree`` with each leaf repeated over the subtree of ``full_tree`` it covers.

    >>> tree_broadcast([1, {"a": 2}], [(1, 2), {"a": [3, 4]}])
    [(1, 1), {'a': [2, 2]}]
    """
    prefix_def = tree_structure(prefix_tree, is_leaf)
    subtrees = prefix_def.flatten_up_to(full_tree)
    leaves = tree_leaves(prefix_tree, is_leaf)
    return tree_unflatten(prefix_def, [tree_map(lambda _, v=v: v, sub, is_leaf=is_leaf)
                                       for v, sub in zip(leaves, subtrees)])


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any) -> Any:
    """Turn a tree of structure outer(inner) into one of structure inner(outer).

    >>> tree_transpose(tree_structure([0, 0]), tree_structure((0, 0, 0)), [(1, 2, 3), (4, 5, 6)])
    ([1, 4], [2, 5], [3, 6])
    """
    outer_parts = outer_treedef.flatten_up_to(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_parts[0]) if outer_parts else _LEAF
    inner_leaves = [inner_treedef.flatten_up_to(part) for part in outer_parts]
    columns = [tree_unflatten(outer_treedef, [row[j] for row in inner_leaves])
               for j in range(inner_treedef.num_leaves)]
    return tree_unflatten(inner_treedef, columns)


def tree_reduce_associative(operation: Callable, tree: Any, *, identity: Any = _UNSPECIFIED,
                            is_leaf: Callable | None = None) -> Any:
    """Reduce the leaves with an associative ``operation``, pairwise (a balanced tree of calls).

    >>> fg.tree_util.tree_reduce_associative(lambda a, b: a + b, [1, 2, 3, 4])
    10
    """
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _UNSPECIFIED:
            raise TypeError("tree_reduce_associative: the tree has no leaves and no identity was given")
        return identity
    while len(leaves) > 1:
        leaves = [operation(leaves[i], leaves[i + 1]) if i + 1 < len(leaves) else leaves[i]
                  for i in range(0, len(leaves), 2)]
    return leaves[0]


def treedef_children(treedef: PyTreeDef) -> list:
    """The structures of a node's children.

    >>> fg.tree_util.treedef_children(fg.tree_util.tree_structure({"a": 1, "b": (2, 3)}))
    [*, (*, *)]
    """
    return list(treedef.children)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether the structure is a single leaf (``*``).

    >>> fg.tree_util.treedef_is_leaf(fg.tree_util.tree_structure(1.0))
    True
    """
    return treedef.node_type is None


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple of trees with the given structures.

    >>> t = fg.tree_util.treedef_tuple([fg.tree_util.tree_structure(1), fg.tree_util.tree_structure([1, 2])])
    >>> t.unflatten([1, 2, 3])
    (1, [2, 3])
    """
    return PyTreeDef(tuple, None, tuple(treedefs))


def flatten_one_level(tree: Any) -> tuple[tuple, Hashable]:
    """``(children, aux)`` of a container (one level down; the children as a tuple, as JAX); a leaf raises
    ValueError.

    >>> fg.tree_util.flatten_one_level({"a": 1, "b": (2, 3)})
    ((1, (2, 3)), ('a', 'b'))
    """
    found = _node_type(tree)
    if found is None:
        raise ValueError(f"flatten_one_level: can't tree-flatten type {type(tree)} (a leaf)")
    children, aux = found[1].flatten(tree)
    return tuple(children), aux


def flatten_one_level_with_keys(tree: Any) -> tuple[list, Hashable]:
    """``([(key, child), ...], aux)`` of a container; a leaf raises ValueError.

    >>> fg.tree_util.flatten_one_level_with_keys({"a": 1, "b": 2})
    ([(DictKey(key='a'), 1), (DictKey(key='b'), 2)], ('a', 'b'))
    """
    found = _node_type(tree)
    if found is None:
        raise ValueError(f"flatten_one_level_with_keys: can't tree-flatten type {type(tree)} (a leaf)")
    return _children_with_keys(tree, *found)
