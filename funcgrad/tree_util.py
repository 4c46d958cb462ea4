"""Pytrees: nested containers of arrays that transforms flatten and rebuild.

Containers: tuple, list, dict (keys sorted; keys of mixed types, such as
``1`` and ``"a"``, sort by type name first), None (no leaves), namedtuple,
dataclasses registered with :func:`register_dataclass`, and any type
registered with :func:`register_pytree_node`.  Everything else is a leaf.

>>> leaves, tree = tree_flatten({"b": (1, 2), "a": [3]})
>>> leaves
[3, 1, 2]
>>> tree_unflatten(tree, [x * 10 for x in leaves])
{'a': [30], 'b': (10, 20)}
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable, Iterable, NamedTuple

__all__ = ["PyTreeDef", "register_pytree_node", "register_dataclass", "tree_flatten", "tree_unflatten",
           "tree_leaves", "tree_structure", "tree_map", "tree_reduce", "all_leaves"]


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Iterable[Any], Hashable]]
    unflatten: Callable[[Hashable, list], Any]


_registry: dict[type, _NodeType] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """Register ``cls`` as a container.

    ``flatten(obj) -> (children, aux)`` where ``aux`` is hashable static data;
    ``unflatten(aux, children) -> obj``.
    """
    _registry[cls] = _NodeType(flatten, unflatten)


def register_dataclass(cls: type | None = None, *, static_fields: Iterable[str] = ()) -> Any:
    """Class decorator: a dataclass whose fields (except ``static_fields``) are children.

    >>> @register_dataclass
    ... @dataclasses.dataclass(frozen=True)
    ... class Linear:
    ...     w: Any
    ...     b: Any
    """
    def wrap(klass: type) -> type:
        if not dataclasses.is_dataclass(klass):
            raise TypeError(f"register_dataclass: {klass.__name__} is not a dataclass")
        static = tuple(static_fields)
        names = tuple(f.name for f in dataclasses.fields(klass) if f.name not in static)

        def flatten(obj):
            return [getattr(obj, n) for n in names], tuple(getattr(obj, n) for n in static)

        def unflatten(aux, children):
            kwargs = dict(zip(names, children))
            kwargs.update(zip(static, aux))
            return klass(**kwargs)

        register_pytree_node(klass, flatten, unflatten)
        return klass
    return wrap if cls is None else wrap(cls)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))
register_pytree_node(list, lambda t: (t, None), lambda _, c: list(c))
def _sorted_keys(d: dict) -> tuple:
    """A dict's keys in a fixed order: sorted, as in JAX.  Keys that Python cannot
    compare (``1`` and ``"a"``) sort by their type's name first, then by value, so
    the order is still the same for every dict with the same keys."""
    try:
        return tuple(sorted(d))
    except TypeError:
        pass
    try:
        return tuple(sorted(d, key=lambda k: (type(k).__name__, k)))
    except TypeError:
        raise TypeError(f"tree_flatten: the keys of a dict must be sortable, to flatten it in a fixed order; "
                        f"got keys {list(d)!r:.80} of types {sorted({type(k).__name__ for k in d})}, some of "
                        "which do not compare with each other. Use keys of one type (e.g. str).") from None


def _flatten_dict(d: dict) -> tuple[list, tuple]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


register_pytree_node(dict, _flatten_dict, lambda keys, c: dict(zip(keys, c)))
register_pytree_node(type(None), lambda n: ((), None), lambda _, c: None)


def _node_type(x: Any) -> tuple[type, _NodeType] | None:
    t = type(x)
    node = _registry.get(t)
    if node is not None:
        return t, node
    if isinstance(x, tuple) and hasattr(t, "_fields"):  # namedtuple
        return t, _NodeType(lambda nt: (tuple(nt), None), lambda _, c, t=t: t(*c))
    return None


class PyTreeDef:
    """The structure of a pytree (hashable; compared structurally)."""

    __slots__ = ("node_type", "aux", "children", "num_leaves", "_hash")

    def __init__(self, node_type: type | None, aux: Hashable, children: tuple["PyTreeDef", ...]):
        self.node_type = node_type   # None marks a leaf
        self.aux = aux
        self.children = children
        self.num_leaves = 1 if node_type is None else sum(c.num_leaves for c in children)
        self._hash = hash((node_type, aux, children))

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
    """Leaves in a fixed order (dict keys sorted) and the structure."""
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
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def all_leaves(iterable: Iterable[Any]) -> bool:
    return all(tree_structure(x) == _LEAF for x in iterable)


def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None) -> Any:
    """Apply ``f`` leafwise over one or more trees of the same structure."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r, is_leaf)
        if r_def != treedef:
            raise ValueError(f"tree_map: trees have different structures: {treedef} and {r_def}")
        others.append(r_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def flatten_fun(f: Callable, in_tree: PyTreeDef, *, has_aux: bool = False,
                where: str = "has_aux=True: the function") -> tuple[Callable, Callable[[], PyTreeDef | None]]:
    """``f`` on flat leaves, as the transforms run it: ``(flat_f, out_tree)``.

    ``flat_f(*leaves)`` rebuilds ``f``'s positional arguments from ``leaves``
    (``in_tree`` is the structure of the tuple of arguments), calls ``f`` and
    returns the leaves of its output; ``out_tree()`` is the output's
    structure once ``flat_f`` has run (its latest run's; None before).  With
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

    def out_tree(self) -> PyTreeDef | None:
        return self.tree


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


def tree_reduce(f: Callable, tree: Any, initializer: Any = None) -> Any:
    import functools
    leaves = tree_leaves(tree)
    return functools.reduce(f, leaves) if initializer is None else functools.reduce(f, leaves, initializer)


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
