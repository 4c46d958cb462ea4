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
"""
from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, Hashable, Iterable, NamedTuple

__all__ = ["PyTreeDef", "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
           "register_pytree_with_keys_class", "register_dataclass", "register_static", "tree_flatten",
           "tree_unflatten", "tree_leaves", "tree_structure", "tree_map", "tree_reduce", "tree_all", "all_leaves",
           "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path", "tree_broadcast",
           "tree_transpose", "tree_reduce_associative", "treedef_children", "treedef_is_leaf", "treedef_tuple",
           "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node", "keystr", "Partial", "SequenceKey",
           "DictKey", "GetAttrKey", "FlattenedIndexKey", "KeyEntry", "KeyPath", "default_registry"]


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Iterable[Any], Hashable]]
    unflatten: Callable[[Hashable, list], Any]


_registry: dict[type, _NodeType] = {}
# Node types whose children have key entries: type -> obj -> (list of (key, child), aux).
_key_registry: dict[type, Callable] = {}
default_registry = _registry   # (JAX's name; funcgrad has one registry)


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Register ``nodetype`` as a container.

    ``flatten_func(obj) -> (children, aux)`` where ``aux`` is hashable static data;
    ``unflatten_func(aux, children) -> obj``; ``flatten_with_keys_func(obj) -> ((key, child)
    pairs, aux)`` names the children in key paths (default: ``FlattenedIndexKey(i)``).

    >>> class Point:
    ...     def __init__(self, x, y): self.x, self.y = x, y
    >>> fg.tree_util.register_pytree_node(Point, lambda p: ((p.x, p.y), None), lambda aux, c: Point(*c))
    >>> fg.tree_util.tree_leaves(Point(1.0, 2.0))
    [1.0, 2.0]
    """
    _registry[nodetype] = _NodeType(flatten_func, unflatten_func)
    if flatten_with_keys_func is not None:
        _key_registry[nodetype] = flatten_with_keys_func


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Register ``nodetype`` with named children: ``flatten_with_keys(obj) -> ([(key, child), ...], aux)``.

    >>> from funcgrad.tree_util import GetAttrKey, register_pytree_with_keys, tree_leaves
    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree_with_keys(Pair, lambda p: (((GetAttrKey("a"), p.a), (GetAttrKey("b"), p.b)), None),
    ...                           lambda aux, c: Pair(*c))
    >>> tree_leaves(Pair(1, 2))
    [1, 2]
    """
    if flatten_func is None:
        def flatten_func(obj):
            pairs, aux = flatten_with_keys(obj)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: ``cls.tree_flatten(self) -> (children, aux)`` and the classmethod
    ``cls.tree_unflatten(aux, children)`` make it a container.

    >>> @fg.tree_util.register_pytree_node_class
    ... class Box:
    ...     def __init__(self, v): self.v = v
    ...     def tree_flatten(self): return (self.v,), None
    ...     @classmethod
    ...     def tree_unflatten(cls, aux, children): return cls(*children)
    >>> fg.tree_util.tree_map(lambda v: v + 1, Box(1)).v
    2
    """
    register_pytree_node(cls, lambda obj: obj.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: ``cls.tree_flatten_with_keys(self)`` and ``cls.tree_unflatten(aux, children)``
    (and ``tree_flatten`` if the class defines it).

    >>> @fg.tree_util.register_pytree_with_keys_class
    ... class Named:
    ...     def __init__(self, w): self.w = w
    ...     def tree_flatten_with_keys(self): return ((fg.tree_util.GetAttrKey("w"), self.w),), None
    ...     @classmethod
    ...     def tree_unflatten(cls, aux, children): return cls(*children)
    >>> fg.tree_util.tree_leaves_with_path(Named(3))
    [((GetAttrKey(name='w'),), 3)]
    """
    flat = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(cls, lambda obj: obj.tree_flatten_with_keys(), cls.tree_unflatten,
                              (lambda obj: obj.tree_flatten()) if flat is not None else None)
    return cls


def register_static(cls: type) -> type:
    """Register ``cls`` as a node without children: its (hashable) instances become part of the
    structure (static under jit), never leaves.

    >>> @register_static
    ... class Config: ...
    """
    register_pytree_node(cls, lambda obj: ((), obj), lambda obj, _: obj)
    return cls


def is_tree_node(typ: type) -> bool:
    """Whether instances of ``typ`` are containers (registered, or a namedtuple), not leaves.

    >>> fg.tree_util.is_tree_node(list), fg.tree_util.is_tree_node(float)
    (True, False)
    """
    return typ in _registry or (issubclass(typ, tuple) and hasattr(typ, "_fields"))


# ------------------------------------------------------------------ key paths


class _KeyEntry:
    """Shared by the key-path entries: ``str`` shows the one field through the class's ``_format``."""
    _format = "[{!r}]"

    def __str__(self) -> str:
        return self._format.format(getattr(self, dataclasses.fields(self)[0].name))


@dataclasses.dataclass(frozen=True)
class SequenceKey(_KeyEntry):
    """A tuple/list child's index in a key path: ``[0]``.

    >>> fg.tree_util.tree_leaves_with_path([5])[0][0]
    (SequenceKey(idx=0),)
    """
    idx: int


@dataclasses.dataclass(frozen=True)
class DictKey(_KeyEntry):
    """A dict child's key in a key path: ``['a']``.

    >>> fg.tree_util.tree_leaves_with_path({"a": 5})[0][0]
    (DictKey(key='a'),)
    """
    key: Hashable


@dataclasses.dataclass(frozen=True)
class GetAttrKey(_KeyEntry):
    """A namedtuple/dataclass field in a key path: ``.name``.

    >>> fg.tree_util.GetAttrKey("w")
    GetAttrKey(name='w')
    """
    name: str
    _format = ".{}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey(_KeyEntry):
    """The child's position, for node types registered without keys: ``[0]``.

    >>> fg.tree_util.FlattenedIndexKey(0)
    FlattenedIndexKey(key=0)
    """
    key: int


KeyEntry = Any
KeyPath = tuple


def keystr(keys: tuple, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``"['a'][0].b"``; ``simple=True``: the bare keys joined by ``separator``.

    >>> keystr((DictKey("a"), SequenceKey(0)))
    "['a'][0]"
    >>> keystr((DictKey("a"), SequenceKey(0)), simple=True, separator="/")
    'a/0'
    """
    if not simple:
        return separator.join(str(k) for k in keys)

    def bare(k: Any) -> str:
        for attr in ("idx", "key", "name"):
            if hasattr(k, attr):
                return str(getattr(k, attr))
        return str(k)
    return separator.join(bare(k) for k in keys)


def register_dataclass(nodetype: type | None = None, data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None, drop_fields: Iterable[str] = (), *,
                       static_fields: Iterable[str] = ()) -> Any:
    """Register a dataclass: its ``data_fields`` are children, its ``meta_fields`` static (part of
    the structure). Without either list, every field is data except those declared with
    ``field(metadata={"static": True})`` (``tree.static()``) or named in ``static_fields``.

    >>> @register_dataclass
    ... @dataclasses.dataclass(frozen=True)
    ... class Linear:
    ...     w: Any
    ...     b: Any
    """
    def wrap(klass: type) -> type:
        if data_fields is None and meta_fields is None and not dataclasses.is_dataclass(klass):
            raise TypeError(f"register_dataclass: {klass.__name__} is not a dataclass; make it one or pass "
                            "data_fields and meta_fields")
        dropped = set(drop_fields)
        if data_fields is None and meta_fields is None:
            fields = [f for f in dataclasses.fields(klass) if f.init and f.name not in dropped]
            static_names = set(static_fields)
            static = tuple(f.name for f in fields if f.name in static_names or f.metadata.get("static", False))
            names = tuple(f.name for f in fields if f.name not in static)
        else:
            names = tuple(data_fields or ())
            static = tuple(meta_fields or ()) + tuple(n for n in static_fields if n not in (meta_fields or ()))

        def flatten(obj):
            return [getattr(obj, n) for n in names], tuple(getattr(obj, n) for n in static)

        def flatten_with_keys(obj):
            return [(GetAttrKey(n), getattr(obj, n)) for n in names], tuple(getattr(obj, n) for n in static)

        def unflatten(aux, children):
            kwargs = dict(zip(names, children))
            kwargs.update(zip(static, aux))
            return klass(**kwargs)

        register_pytree_node(klass, flatten, unflatten, flatten_with_keys)
        return klass
    return wrap if nodetype is None else wrap(nodetype)


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
register_pytree_node(collections.OrderedDict, lambda d: (list(d.values()), tuple(d)),
                     lambda keys, c: collections.OrderedDict(zip(keys, c)))


def _flatten_defaultdict(d: collections.defaultdict) -> tuple[list, tuple]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


register_pytree_node(collections.defaultdict, _flatten_defaultdict,
                     lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)))
_key_registry[tuple] = _key_registry[list] = lambda t: ([(SequenceKey(i), c) for i, c in enumerate(t)], None)
_key_registry[dict] = lambda d: ([(DictKey(k), d[k]) for k in _sorted_keys(d)], _sorted_keys(d))
_key_registry[collections.OrderedDict] = lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d))
_key_registry[collections.defaultdict] = lambda d: (
    [(DictKey(k), d[k]) for k in _sorted_keys(d)], (d.default_factory, _sorted_keys(d)))


class Partial(functools.partial):
    """``functools.partial`` that is a pytree: the bound arguments are children, the function static,
    so it can be passed through jit/vmap/grad as an argument.

    >>> add_one = Partial(fnp.add, 1.0)
    >>> jit(lambda f, x: f(x))(add_one, fnp.ones(2))
    Array([2., 2.], dtype=float32)
    """

    def __new__(klass, func: Callable, *args: Any, **kw: Any) -> "Partial":
        if isinstance(func, functools.partial):   # as JAX: unwrap so the function stays hashable
            original = func
            func = func.func
            args = original.args + args
            kw = {**original.keywords, **kw}
        return super().__new__(klass, func, *args, **kw)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, c: Partial(func, *c[0], **c[1]))


def _node_type(x: Any) -> tuple[type, _NodeType] | None:
    t = type(x)
    node = _registry.get(t)
    if node is not None:
        return t, node
    if isinstance(x, tuple) and hasattr(t, "_fields"):  # namedtuple
        return t, _NodeType(lambda nt: (tuple(nt), None), lambda _, c, t=t: t(*c))
    return None


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


# ------------------------------------------------------------ paths and the rest of JAX's tree_util


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

    >>> tree_map_with_path(lambda p, x: keystr(p), {"a": 1, "b": (2,)})
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


class _Unspecified:
    def __repr__(self) -> str:
        return "<unspecified>"


_UNSPECIFIED = _Unspecified()


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
