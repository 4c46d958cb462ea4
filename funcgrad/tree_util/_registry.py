"""The pytree node registry: ``register_pytree_node`` and its variants (with keys, class decorators,
``register_static``, ``register_dataclass``), the built-in containers (tuple, list, dict, OrderedDict,
defaultdict, None), ``Partial``, and how a value finds its node type. ``PyTreeDef`` and flattening are in
``_treedef``; key entries in ``_keys``; path-aware functions and the rest of the API in ``_paths``.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, Hashable, Iterable, NamedTuple

from funcgrad.tree_util._keys import DictKey, GetAttrKey, SequenceKey


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
