"""Structures and flattening: ``PyTreeDef``, ``tree_flatten``/``tree_unflatten``, ``tree_leaves``,
``tree_structure``, ``tree_map``, ``tree_reduce``, ``all_leaves``, and the transforms' helpers
``flatten_fun`` and ``broadcast_prefix``. The node registry is in ``_registry``; path-aware functions and
the rest of the API in ``_paths``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, Iterable

from funcgrad.tree_util._registry import _node_type, _registry


class PyTreeDef:
    """The structure of a pytree (hashable; compared structurally).

    >>> treedef = fg.tree_util.tree_structure({"a": 1, "b": 2})
    >>> treedef.num_leaves, treedef.unflatten([10, 20])
    (2, {'a': 10, 'b': 20})
    """

    __slots__ = ("node_type", "aux", "children", "num_leaves", "_hash")

    def __init__(self, node_type: type | None, aux: Hashable, children: tuple["PyTreeDef", ...]):
        self.node_type = node_type   # None marks a leaf
        self.aux = aux
        self.children = children
        self.num_leaves = 1 if node_type is None else sum(c.num_leaves for c in children)
        self._hash = hash((node_type, aux, children))

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self.children)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """``tree_unflatten(self, leaves)``."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree: Any) -> list:
        """The subtrees of ``tree`` at this structure's leaves (``tree`` must have this structure on top)."""
        out: list = []
        _flatten_up_to(self, tree, out, "")
        return out

    def node_data(self) -> tuple | None:
        return None if self.node_type is None else (self.node_type, self.aux)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PyTreeDef) and self.node_type is other.node_type and self.aux == other.aux
                and self.children == other.children)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        if self.node_type is None:
            return "*"
        inner = ", ".join(map(repr, self.children))
        if self.node_type is dict:
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.aux, self.children))
            return "{" + inner + "}"
        if self.node_type is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        if self.node_type is list:
            return f"[{inner}]"
        if self.node_type is type(None):
            return "None"
        return f"{self.node_type.__name__}({inner})"


_LEAF = PyTreeDef(None, None, ())


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    """Leaves in a fixed order (dict keys sorted) and the structure.

    >>> leaves, treedef = fg.tree_util.tree_flatten({"a": 1, "b": (2, 3)})
    >>> leaves
    [1, 2, 3]
    """
    leaves: list = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def _flatten(x: Any, leaves: list, is_leaf: Callable | None) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    found = _node_type(x)
    if found is None:
        leaves.append(x)
        return _LEAF
    t, node = found
    children, aux = node.flatten(x)
    return PyTreeDef(t, aux, tuple(_flatten(c, leaves, is_leaf) for c in children))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuild a tree of structure ``treedef`` from ``leaves``.

    >>> leaves, tree = tree_flatten([1, (2, 3)])
    >>> tree_unflatten(tree, [4, 5, 6])
    [4, (5, 6)]
    """
    if not isinstance(treedef, PyTreeDef):
        raise TypeError(f"tree_unflatten: the first argument must be a structure (PyTreeDef) from tree_flatten or "
                        f"tree_structure, got {type(treedef).__name__} {treedef!r:.60}; call it as "
                        "tree_unflatten(treedef, leaves)")
    try:
        leaves = list(leaves)
    except TypeError:
        raise TypeError(f"tree_unflatten: leaves must be a list (or other iterable) of {treedef.num_leaves} leaves "
                        f"for the structure {treedef!r:.80}, got {type(leaves).__name__}") from None
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"tree_unflatten: the structure {treedef} has {treedef.num_leaves} leaves, "
                         f"got {len(leaves)}; pass exactly one leaf per * of the structure")
    it = iter(leaves)
    return _unflatten(treedef, it)


def _unflatten(treedef: PyTreeDef, it: Any) -> Any:
    if treedef.node_type is None:
        return next(it)
    children = [_unflatten(c, it) for c in treedef.children]
    t = treedef.node_type
    node = _registry.get(t)
    if node is None:  # namedtuple
        return t(*children)
    return node.unflatten(treedef.aux, children)


def tree_leaves(tree: Any, is_leaf: Callable | None = None) -> list:
    """The leaves of ``tree``, in flattening order (dict keys sorted).

    >>> fg.tree_util.tree_leaves({"a": 1, "b": (2, 3)})
    [1, 2, 3]
    """
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable | None = None) -> PyTreeDef:
    """The structure of ``tree`` (a :class:`PyTreeDef`), without its leaves.

    >>> fg.tree_util.tree_structure({"a": 1, "b": (2, 3)}).num_leaves
    3
    """
    return tree_flatten(tree, is_leaf)[1]


def all_leaves(iterable: Iterable[Any], is_leaf: Callable | None = None) -> bool:
    """Whether every item is a leaf.

    >>> fg.tree_util.all_leaves([1, 2.0, fnp.ones(2)])
    True
    """
    return all(tree_structure(x, is_leaf) == _LEAF for x in iterable)


def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None) -> Any:
    """Apply ``f`` leafwise over one or more trees of the same structure.

    >>> fg.tree_util.tree_map(lambda x: x * 10, {"a": 1, "b": (2, 3)})
    {'a': 10, 'b': (20, 30)}
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r, is_leaf)
        if r_def != treedef:
            try:   # as JAX: the others may have the first tree as a prefix (subtrees go to f whole)
                r_leaves = treedef.flatten_up_to(r)
            except ValueError:
                raise ValueError(f"tree_map: trees have different structures: {treedef} and {r_def}") from None
        others.append(r_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def flatten_fun(f: Callable, in_tree: PyTreeDef, *, has_aux: bool = False,
                where: str = "has_aux=True: the function") -> tuple[Callable, Callable[[], PyTreeDef]]:
    """``f`` on flat leaves, as the transforms run it: ``(flat_f, out_tree)``.

    ``flat_f(*leaves)`` rebuilds ``f``'s positional arguments from ``leaves``
    (``in_tree`` is the structure of the tuple of arguments), calls ``f`` and
    returns the leaves of its output; ``out_tree()`` is the output's
    structure once ``flat_f`` has run (its latest run's; ask only after a run).  With
    ``has_aux``, ``f`` returns ``(output, aux)`` and ``flat_f`` returns
    ``(output leaves, aux)``, ``aux`` untouched; anything else is an error
    that starts with ``where`` (e.g. ``"grad(has_aux=True): loss"``).

    >>> flat_f, out_tree = flatten_fun(lambda p, x: {"y": p["w"] * x}, tree_structure(({"w": 2}, 3)))
    >>> flat_f(2, 3), out_tree()
    ([6], {'y': *})
    """
    # This runs on every transformed call: a slotted object and two bound methods cost less than
    # closures. Arguments that are all leaves (grad of arrays, the common case) need no rebuilding;
    # num_leaves rules out most others before count, which finds the one _LEAF by identity.
    if has_aux:
        flat = _FlatWithAux()
        flat.where = where
    else:
        flat = _Flat()
    children = in_tree.children
    direct = (in_tree.node_type is tuple and in_tree.num_leaves == len(children)
              and children.count(_LEAF) == len(children))
    flat.f, flat.in_tree, flat.tree = f, None if direct else in_tree, None
    return flat.run, flat.out_tree


class _Flat:
    """``f`` on leaves, returning its output's leaves (see :func:`flatten_fun`).

    ``in_tree``: the arguments' structure (None: the leaves are the arguments); ``tree``: the
    output's structure, set by each run.
    """

    __slots__ = ("f", "in_tree", "tree")

    def run(self, *leaves: Any) -> Any:
        out = self.f(*leaves) if self.in_tree is None else self.f(*tree_unflatten(self.in_tree, leaves))
        if type(out) not in _registry and not isinstance(out, tuple):   # a leaf: the usual single array
            self.tree = _LEAF
            return [out]
        out_leaves, self.tree = tree_flatten(out)
        return out_leaves

    def out_tree(self) -> PyTreeDef:
        return self.tree   # type: ignore[return-value]   (set by the run that comes first)


class _FlatWithAux(_Flat):
    """``f`` returning ``(output, aux)``: ``run`` gives ``(output leaves, aux)``; ``where`` starts the error
    for anything else."""

    __slots__ = ("where",)

    def run(self, *leaves: Any) -> Any:
        out = self.f(*leaves) if self.in_tree is None else self.f(*tree_unflatten(self.in_tree, leaves))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"{self.where} must return a pair (output, aux), got {_describe_output(out)}")
        out_leaves, self.tree = tree_flatten(out[0])
        return out_leaves, out[1]


def _describe_output(out: Any) -> str:
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of {len(out)} items"
    from funcgrad._dtypes import describe   # a lower layer; imported here, where an error is being built
    return describe(out)


def tree_reduce(function: Callable, tree: Any, initializer: Any = None, is_leaf: Callable | None = None) -> Any:
    """``functools.reduce(function, leaves[, initializer])``.

    >>> fg.tree_util.tree_reduce(lambda a, b: a + b, {"a": 1, "b": (2, 3)})
    6
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is None or initializer is _UNSPECIFIED:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def broadcast_prefix(prefix: Any, tree: Any, name: str) -> list:
    """Flat list: each leaf of ``prefix`` repeated over the subtree of ``tree`` it covers.

    Used for ``vmap(in_axes=...)`` where an int covers a whole subtree.
    """
    out: list = []

    def walk(p: Any, t: Any, path: str) -> None:
        if _node_type(p) is None or p is None and t is not None:
            out.extend([p] * len(tree_leaves(t)))
            return
        p_t, p_node = _node_type(p)
        t_found = _node_type(t)
        p_children, p_aux = p_node.flatten(p)
        if t_found is None or t_found[0] is not p_t:
            raise ValueError(f"{name}: the structure {tree_structure(p)} does not match the arguments' "
                             f"structure {tree_structure(t)} at {path or 'the top'}")
        t_children, t_aux = t_found[1].flatten(t)
        if p_aux != t_aux or len(list(p_children)) != len(list(t_children)):
            raise ValueError(f"{name}: the structure {tree_structure(p)} does not match the arguments' "
                             f"structure {tree_structure(t)} at {path or 'the top'}")
        for i, (pc, tc) in enumerate(zip(p_children, t_children)):
            walk(pc, tc, f"{path}[{i}]")

    walk(prefix, tree, "")
    return out

def _flatten_up_to(treedef: PyTreeDef, tree: Any, out: list, path: str) -> None:
    if treedef.node_type is None:
        out.append(tree)
        return
    found = _node_type(tree)
    if found is None or found[0] is not treedef.node_type:
        raise ValueError(f"flatten_up_to: expected a {treedef.node_type.__name__} at {path or 'the top'} (structure "
                         f"{treedef}), got {type(tree).__name__}")
    children, aux = found[1].flatten(tree)
    children = list(children)
    if aux != treedef.aux or len(children) != len(treedef.children):
        raise ValueError(f"flatten_up_to: the tree does not match the structure {treedef} at {path or 'the top'}")
    for i, (c, td) in enumerate(zip(children, treedef.children)):
        _flatten_up_to(td, c, out, f"{path}[{i}]")

class _Unspecified:
    def __repr__(self) -> str:
        return "<unspecified>"


_UNSPECIFIED = _Unspecified()
