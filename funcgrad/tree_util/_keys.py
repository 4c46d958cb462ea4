"""Key paths: the entries that name a child in a path (``SequenceKey``, ``DictKey``, ``GetAttrKey``,
``FlattenedIndexKey``) and ``keystr``. The node registry that produces them is in ``_registry``; the
functions that flatten with paths in ``_paths``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Hashable


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
