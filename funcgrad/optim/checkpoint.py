"""Save and load pytrees of arrays (parameters, optimizer states) as one ``.npz`` file.

The file holds every leaf as an array (``leaf_0``, ``leaf_1``, ... in
flattening order) and a JSON record of the structure under
``__funcgrad_checkpoint__``.  Nothing is pickled, in either direction: the
structure is described with dicts (str/int keys), lists, tuples, None and
NamedTuples (by type name and field names), so loading a file never runs
code from it.

>>> from funcgrad.optim import checkpoint
>>> checkpoint.save("ckpt.npz", {"params": params, "opt_state": state})
>>> restored = checkpoint.load("ckpt.npz", like={"params": params, "opt_state": state})

With ``like=`` (a tree of the same structure, e.g. freshly initialised
parameters) the file is checked against it first and the result uses the
template's container types; a mismatch raises ``ValueError`` naming the
first differing path, e.g. ``params['w1']: saved f32[784,512], expected
f32[512,784]``.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import zipfile
from collections import namedtuple
from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer, as_array
from funcgrad._dtypes import ShapedArray

__all__ = ["save", "load"]

_RECORD = "__funcgrad_checkpoint__"
_FORMAT = "funcgrad.checkpoint"
_VERSION = 1
_SCALARS = (bool, int, float)


# --------------------------------------------------------------------------
# Paths (for error messages): params['w1'], state[0].mu, ...
# --------------------------------------------------------------------------


def _key_path(path: str, key: Any) -> str:
    if not path and isinstance(key, str) and key.isidentifier():
        return key   # a top-level name reads as a variable: params['w1']
    return f"{path}[{key!r}]"


def _show(path: str) -> str:
    return path or "<root>"


# --------------------------------------------------------------------------
# Structure <-> JSON description
# --------------------------------------------------------------------------


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _describe(tree: Any, leaves: list, path: str) -> dict:
    """JSON-able description of ``tree``; appends its leaves (numpy arrays) in order."""
    if tree is None:
        return {"node": "none"}
    if isinstance(tree, dict):
        keys = list(tree)
        if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in keys):
            raise TypeError(f"checkpoint.save: dict keys must be str or int, got {keys!r:.80} at {_show(path)}")
        keys = sorted(keys, key=lambda k: (isinstance(k, str), k))
        return {"node": "dict", "keys": keys, "key_types": ["int" if isinstance(k, int) else "str" for k in keys],
                "children": [_describe(tree[k], leaves, _key_path(path, k)) for k in keys]}
    if _is_namedtuple(tree):
        cls = type(tree)
        return {"node": "namedtuple", "type": f"{cls.__module__}:{cls.__qualname__}", "fields": list(cls._fields),
                "children": [_describe(v, leaves, f"{path}.{f}") for f, v in zip(cls._fields, tree)]}
    if isinstance(tree, (list, tuple)):
        return {"node": type(tree).__name__,
                "children": [_describe(v, leaves, f"{path}[{i}]") for i, v in enumerate(tree)]}
    return _describe_leaf(tree, leaves, path)


def _describe_leaf(x: Any, leaves: list, path: str) -> dict:
    if isinstance(x, Tracer):
        raise TypeError(f"checkpoint.save: {_show(path)} is a traced value; save concrete arrays, outside jit/grad")
    if isinstance(x, _SCALARS):
        kind = type(x).__name__
        value = np.asarray(x, dtype=_dtypes.result_type(x) if kind != "bool" else bool)
    elif isinstance(x, (Array, np.ndarray, np.generic)):
        kind, value = "array", np.asarray(x)
    else:
        raise TypeError(f"checkpoint.save: cannot store a {type(x).__name__} at {_show(path)}; leaves must be "
                        "arrays or Python numbers, containers dicts/lists/tuples/NamedTuples/None")
    if value.dtype.kind not in "biuf":
        raise TypeError(f"checkpoint.save: unsupported dtype {value.dtype} at {_show(path)}")
    leaves.append(value)
    return {"node": "leaf", "kind": kind, "dtype": value.dtype.str, "shape": list(value.shape)}


def _aval_str(dtype: Any, shape: Any) -> str:
    return ShapedArray(tuple(shape), np.dtype(dtype)).str_short()


# --------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------


def save(path: str | os.PathLike, tree: Any) -> str:
    """Write ``tree`` (a pytree of arrays) to ``path`` as one ``.npz`` file; returns the path.

    The file is written to a temporary name and renamed, so an interrupted
    save never leaves a half-written checkpoint under ``path``.
    """
    path = os.fspath(path)
    leaves: list[np.ndarray] = []
    record = {"format": _FORMAT, "version": _VERSION, "tree": _describe(tree, leaves, "")}
    arrays = {f"leaf_{i}": leaf for i, leaf in enumerate(leaves)}
    arrays[_RECORD] = np.frombuffer(json.dumps(record).encode("utf-8"), dtype=np.uint8)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-ckpt-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)   # a file object: numpy does not append ".npz"
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


# --------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------


def _read(path: str) -> tuple[dict, dict]:
    """The structure record and the arrays of a checkpoint, or a ValueError saying why not."""
    def reject(why: str) -> ValueError:
        return ValueError(f"checkpoint.load: {path} is not a valid funcgrad checkpoint: {why}")

    # We open the file ourselves so it is closed even when numpy gives up
    # half-way through a damaged archive.
    with open(path, "rb") as f:
        try:
            loaded = np.load(f, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
            # Not an .npy/.npz at all, or one that would need pickle to read.
            raise reject(f"numpy cannot read it without pickle ({type(e).__name__}: {e})") from e
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise reject("it holds a single array, not an .npz archive")
        try:
            with loaded as npz:
                if _RECORD not in npz.files:
                    shown = ", ".join(npz.files[:5]) + (", ..." if len(npz.files) > 5 else "")
                    raise reject(f"it has no {_RECORD} record (its arrays: {shown or 'none'})")
                arrays = {name: npz[name] for name in npz.files}
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError) as e:
            if str(e).startswith("checkpoint.load"):
                raise
            raise reject(f"the archive is corrupted ({type(e).__name__}: {e})") from e
    try:
        record = json.loads(arrays.pop(_RECORD).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise reject(f"the structure record is corrupted ({e})") from e
    if not isinstance(record, dict) or record.get("format") != _FORMAT or "tree" not in record:
        raise reject("the structure record has an unknown format")
    if record.get("version") != _VERSION:
        raise reject(f"format version {record.get('version')} is not supported (this funcgrad reads {_VERSION})")
    return record["tree"], arrays


def _namedtuple_type(spec: dict) -> type:
    """The NamedTuple class named in the file if it is already imported (never import on load),
    with the same fields; otherwise a stand-in namedtuple of that name."""
    module, _, qualname = spec["type"].partition(":")
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, tuple) and tuple(getattr(obj, "_fields", ())) == \
            tuple(spec["fields"]):
        return obj
    name = qualname.rsplit(".", 1)[-1]
    return namedtuple(name if name.isidentifier() else "Restored", spec["fields"])


def _build(spec: Any, arrays: dict, counter: list, path: str, like: Any, has_like: bool) -> Any:
    """Rebuild the tree described by ``spec``, checking it against ``like`` when given."""
    if not isinstance(spec, dict) or "node" not in spec:
        raise ValueError(f"checkpoint.load: corrupted structure record at {_show(path)}")
    node = spec["node"]
    if node == "leaf":
        return _build_leaf(spec, arrays, counter, path, like, has_like)
    if has_like:
        _check_container(spec, like, path)
    if node == "none":
        return None
    children = spec["children"]
    if node == "dict":
        keys = [int(k) if t == "int" else k for k, t in zip(spec["keys"], spec["key_types"])]
        return {k: _build(c, arrays, counter, _key_path(path, k), like[k] if has_like else None, has_like)
                for k, c in zip(keys, children)}
    if node == "namedtuple":
        cls = type(like) if has_like else _namedtuple_type(spec)
        return cls(*[_build(c, arrays, counter, f"{path}.{f}", like[i] if has_like else None, has_like)
                     for i, (f, c) in enumerate(zip(spec["fields"], children))])
    if node in ("list", "tuple"):
        items = [_build(c, arrays, counter, f"{path}[{i}]", like[i] if has_like else None, has_like)
                 for i, c in enumerate(children)]
        return items if node == "list" else tuple(items)
    raise ValueError(f"checkpoint.load: unknown node type {node!r} at {_show(path)}")


def _saved_kind(spec: dict) -> str:
    node = spec["node"]
    if node == "dict":
        return f"a dict with keys {spec['keys']}"
    if node == "namedtuple":
        return f"{spec['type'].partition(':')[2]}{tuple(spec['fields'])}"
    if node in ("list", "tuple"):
        return f"a {node} of length {len(spec['children'])}"
    if node == "none":
        return "None"
    return f"an array {_aval_str(spec['dtype'], spec['shape'])}"


def _like_kind(like: Any) -> str:
    if like is None:
        return "None"
    if isinstance(like, dict):
        return f"a dict with keys {sorted(like, key=lambda k: (isinstance(k, str), k))}"
    if _is_namedtuple(like):
        return f"{type(like).__qualname__}{tuple(type(like)._fields)}"
    if isinstance(like, (list, tuple)):
        return f"a {type(like).__name__} of length {len(like)}"
    aval = _leaf_aval(like)
    return f"an array {aval.str_short()}" if aval is not None else f"a {type(like).__name__}"


def _check_container(spec: dict, like: Any, path: str) -> None:
    node = spec["node"]
    ok = {
        "none": like is None,
        "dict": isinstance(like, dict) and sorted(like, key=lambda k: (isinstance(k, str), k)) ==
        [int(k) if t == "int" else k for k, t in zip(spec.get("keys", []), spec.get("key_types", []))],
        "namedtuple": _is_namedtuple(like) and list(type(like)._fields) == spec.get("fields"),
        "list": isinstance(like, list) and len(like) == len(spec.get("children", [])),
        "tuple": isinstance(like, tuple) and not _is_namedtuple(like) and
        len(like) == len(spec.get("children", [])),
    }.get(node, False)
    if not ok:
        raise ValueError(f"checkpoint.load: {_show(path)}: saved {_saved_kind(spec)}, expected {_like_kind(like)}")


def _leaf_aval(x: Any) -> ShapedArray | None:
    if isinstance(x, _SCALARS):
        return ShapedArray((), np.dtype(bool) if isinstance(x, bool) else _dtypes.result_type(x))
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return None
    return ShapedArray(tuple(shape), _dtypes.canonicalize(dtype))


def _build_leaf(spec: dict, arrays: dict, counter: list, path: str, like: Any, has_like: bool) -> Any:
    index = counter[0]
    counter[0] += 1
    value = arrays.get(f"leaf_{index}")
    if value is None:
        raise ValueError(f"checkpoint.load: corrupted checkpoint: the array for {_show(path)} is missing")
    if list(value.shape) != list(spec["shape"]) or value.dtype.str != spec["dtype"]:
        raise ValueError(f"checkpoint.load: corrupted checkpoint: {_show(path)} is recorded as "
                         f"{_aval_str(spec['dtype'], spec['shape'])} but stored as "
                         f"{_aval_str(value.dtype, value.shape)}")
    if has_like:
        expected = _leaf_aval(like)
        saved = ShapedArray(value.shape, _dtypes.canonicalize(value.dtype))
        if expected is None or saved != expected:
            raise ValueError(f"checkpoint.load: {_show(path)}: saved {saved.str_short()}, expected "
                             f"{_like_kind(like) if expected is None else expected.str_short()}")
    kind = spec.get("kind")
    if kind in ("bool", "int", "float"):
        return {"bool": bool, "int": int, "float": float}[kind](value.item())
    if has_like and isinstance(like, np.ndarray):
        return value      # a numpy template gets numpy leaves back
    return as_array(value)


def load(path: str | os.PathLike, like: Any = None) -> Any:
    """Read a tree written by :func:`save`; leaves come back as funcgrad arrays.

    ``like``: a template tree (arrays, or anything with ``.shape``/``.dtype``)
    to check the file against: same containers, keys, shapes and dtypes.
    Raises ``ValueError`` naming the first mismatching path, or saying why
    the file is not a funcgrad checkpoint (missing record, corrupted or
    foreign archive).
    """
    path = os.fspath(path)
    spec, arrays = _read(path)
    counter = [0]
    tree = _build(spec, arrays, counter, "", like, like is not None)
    if counter[0] != len(arrays):
        raise ValueError(f"checkpoint.load: {path} holds {len(arrays)} arrays but its structure names "
                         f"{counter[0]}: the file is corrupted")
    return tree
