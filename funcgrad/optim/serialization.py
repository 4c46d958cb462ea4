"""Save and load pytrees of arrays (parameters, optimizer states) as one ``.npz`` file.

The file holds every leaf as an array (``leaf_0``, ``leaf_1``, ... in
flattening order) and a JSON record of the structure under
``__funcgrad_checkpoint__``.  Nothing is pickled, in either direction: the
structure is described with dicts (str/int keys), lists, tuples, None and
NamedTuples (by type name and field names), so loading a file never runs
code from it.

>>> import os, tempfile
>>> from funcgrad import optim
>>> from funcgrad.optim import serialization
>>> params = {"w": fnp.ones(2)}
>>> state = optim.adam(1e-3).init(params)
>>> path = os.path.join(tempfile.mkdtemp(), "ckpt.npz")
>>> _ = serialization.save(path, {"params": params, "opt_state": state})      # returns the path
>>> restored = serialization.load(path, like={"params": params, "opt_state": state})
>>> restored["params"]["w"]
Array([1., 1.], dtype=float32)

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

import funcgrad.numpy as fnp
from funcgrad.core import Array, ShapedArray, Tracer
from funcgrad.dtypes import canonicalize_dtype, result_type

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
            raise TypeError(f"serialization.save: dict keys must be str or int, got {keys!r:.80} at {_show(path)}")
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
        raise TypeError(f"serialization.save: {_show(path)} is a traced value; save concrete arrays, outside jit/grad")
    if isinstance(x, _SCALARS):
        kind = type(x).__name__
        value = np.asarray(x, dtype=result_type(x) if kind != "bool" else bool)
    elif isinstance(x, (Array, np.ndarray, np.generic)):
        kind, value = "array", np.asarray(x)
    else:
        raise TypeError(f"serialization.save: cannot store a {type(x).__name__} at {_show(path)}; leaves must be "
                        "arrays or Python numbers, containers dicts/lists/tuples/NamedTuples/None")
    if value.dtype.kind not in "biuf":
        raise TypeError(f"serialization.save: unsupported dtype {value.dtype} at {_show(path)}")
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
    if os.path.lexists(path) and not os.path.isfile(path):
        # The write is a rename over ``path``: it would replace a directory entry
        # such as /dev/null or a socket instead of writing through it.
        raise ValueError(f"serialization.save: {path} exists and is not a regular file; refusing to replace it "
                         "(save to a file path)")
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"serialization.save: the directory {directory} of {path} does not exist; create it "
                                "first (os.makedirs(..., exist_ok=True))")
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


_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"


class _Rejected(ValueError):
    """Raised by the readers below; ``load`` turns it into one message naming the file."""


def _reject(path: str, why: str) -> ValueError:
    return ValueError(f"serialization.load: {path} is not a valid funcgrad checkpoint: {why}")


def _read(path: str) -> tuple[dict, dict]:
    """The structure record and the arrays of a checkpoint, or a ValueError saying why not.

    Arrays are read with ``allow_pickle=False``: a file can never run code.
    """
    # We open the file ourselves so it is closed even when numpy gives up
    # half-way through a damaged archive.
    with open(path, "rb") as f:
        head = f.read(len(_NPY_MAGIC))
        f.seek(0)
        if not head:
            raise _reject(path, "the file is empty")
        if head.startswith(_NPY_MAGIC):
            raise _reject(path, "it holds a single array (.npy), not an .npz archive")
        if not head.startswith(_ZIP_MAGIC):
            raise _reject(path, "it is not an .npz (zip) archive")
        try:
            with np.load(f, allow_pickle=False) as npz:
                if _RECORD not in npz.files:
                    shown = ", ".join(npz.files[:5]) + (", ..." if len(npz.files) > 5 else "")
                    raise _Rejected(f"it has no {_RECORD} record (its arrays: {shown or 'none'})")
                arrays = {name: npz[name] for name in npz.files}
        except _Rejected as e:
            raise _reject(path, str(e)) from None
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError) as e:
            # A zip whose end (the central directory) is missing: a truncated copy or
            # an interrupted transfer; a CRC mismatch or object arrays: corrupted.
            if isinstance(e, (zipfile.BadZipFile, EOFError)):
                why = "truncated or corrupted .npz archive"
            elif isinstance(e, ValueError) and "pickle" in str(e):
                why = "it holds object arrays, which only pickle could read (never done on load)"
            else:
                why = "the archive is corrupted"
            raise _reject(path, f"{why} ({type(e).__name__}: {e})") from e
    try:
        record = json.loads(arrays.pop(_RECORD).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _reject(path, f"the structure record is corrupted ({e})") from e
    if not isinstance(record, dict) or record.get("format") != _FORMAT or "tree" not in record:
        raise _reject(path, "the structure record has an unknown format")
    if record.get("version") != _VERSION:
        raise _reject(path, f"format version {record.get('version')} is not supported (this funcgrad reads "
                            f"{_VERSION})")
    try:
        _validate(record["tree"], "")
    except _Rejected as e:
        raise _reject(path, f"the structure record is malformed: {e}") from None
    return record["tree"], arrays


# --------------------------------------------------------------------------
# The structure record is checked whole before anything is built, so a
# tampered or hand-written record gives one clear error, never a KeyError.
# --------------------------------------------------------------------------

_LEAF_KINDS = ("array", "bool", "int", "float")


def _field(spec: dict, name: str, kind: type | tuple, path: str) -> Any:
    if name not in spec:
        raise _Rejected(f"{_show(path)}: a {spec['node']!r} node without its {name!r} field")
    value = spec[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise _Rejected(f"{_show(path)}: field {name!r} of a {spec['node']!r} node is {value!r:.60}")
    return value


def _validate(spec: Any, path: str) -> None:
    if not isinstance(spec, dict) or not isinstance(spec.get("node"), str):
        raise _Rejected(f"{_show(path)}: expected a node description, got {spec!r:.60}")
    node = spec["node"]
    if node == "none":
        return
    if node == "leaf":
        _validate_leaf(spec, path)
        return
    if node not in ("dict", "namedtuple", "list", "tuple"):
        raise _Rejected(f"{_show(path)}: unknown node type {node!r}")
    children = _field(spec, "children", list, path)
    if node == "dict":
        keys = _field(spec, "keys", list, path)
        types = _field(spec, "key_types", list, path)
        if not len(keys) == len(types) == len(children):
            raise _Rejected(f"{_show(path)}: {len(keys)} keys, {len(types)} key types and {len(children)} children")
        for k, t in zip(keys, types):
            if (t, type(k)) not in (("str", str), ("int", int)):
                raise _Rejected(f"{_show(path)}: key {k!r:.40} of type {t!r:.20}")
        labels = [_key_path(path, k) for k in keys]
    elif node == "namedtuple":
        _field(spec, "type", str, path)
        fields = _field(spec, "fields", list, path)
        if len(fields) != len(children) or len(set(map(str, fields))) != len(fields) or not all(
                isinstance(f, str) and f.isidentifier() and not f.startswith("_") for f in fields):
            raise _Rejected(f"{_show(path)}: namedtuple fields {fields!r:.60} for {len(children)} children")
        labels = [f"{path}.{f}" for f in fields]
    else:
        labels = [f"{path}[{i}]" for i in range(len(children))]
    for label, child in zip(labels, children):
        _validate(child, label)


def _validate_leaf(spec: dict, path: str) -> None:
    kind = _field(spec, "kind", str, path)
    if kind not in _LEAF_KINDS:
        raise _Rejected(f"{_show(path)}: unknown leaf kind {kind!r:.20}")
    dtype = _field(spec, "dtype", str, path)
    try:
        ok = np.dtype(dtype).kind in "biuf"
    except TypeError:
        ok = False
    if not ok:
        raise _Rejected(f"{_show(path)}: unsupported dtype {dtype!r:.20}")
    shape = _field(spec, "shape", list, path)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise _Rejected(f"{_show(path)}: shape {shape!r:.40} is not a list of sizes")
    if kind != "array" and shape:
        raise _Rejected(f"{_show(path)}: a Python {kind} recorded with shape {shape}")


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
    """Rebuild the tree described by ``spec`` (already validated), checking it against ``like`` when given."""
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
    # "list" or "tuple": _validate admits no other node type.
    items = [_build(c, arrays, counter, f"{path}[{i}]", like[i] if has_like else None, has_like)
             for i, c in enumerate(children)]
    return items if node == "list" else tuple(items)


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
        raise ValueError(f"serialization.load: {_show(path)}: saved {_saved_kind(spec)}, expected {_like_kind(like)}")


def _leaf_aval(x: Any) -> ShapedArray | None:
    if isinstance(x, _SCALARS):
        return ShapedArray((), np.dtype(bool) if isinstance(x, bool) else result_type(x))
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return None
    return ShapedArray(tuple(shape), canonicalize_dtype(dtype))


def _build_leaf(spec: dict, arrays: dict, counter: list, path: str, like: Any, has_like: bool) -> Any:
    index = counter[0]
    counter[0] += 1
    value = arrays.get(f"leaf_{index}")
    if value is None:
        raise _Rejected(f"corrupted: the array for {_show(path)} is missing")
    if list(value.shape) != list(spec["shape"]) or value.dtype.str != spec["dtype"]:
        raise _Rejected(f"corrupted: {_show(path)} is recorded as {_aval_str(spec['dtype'], spec['shape'])} but "
                        f"stored as {_aval_str(value.dtype, value.shape)}")
    if has_like:
        expected = _leaf_aval(like)
        saved = ShapedArray(value.shape, canonicalize_dtype(value.dtype))
        if expected is None or saved != expected:
            raise ValueError(f"serialization.load: {_show(path)}: saved {saved.str_short()}, expected "
                             f"{_like_kind(like) if expected is None else expected.str_short()}")
    kind = spec.get("kind")
    if kind in ("bool", "int", "float"):
        return {"bool": bool, "int": int, "float": float}[kind](value.item())
    if has_like and isinstance(like, np.ndarray):
        return value      # a numpy template gets numpy leaves back
    return fnp.asarray(value)


def load(path: str | os.PathLike, like: Any = None) -> Any:
    """Read a tree written by :func:`save`; leaves come back as funcgrad arrays.

    ``like``: a template tree (arrays, or anything with ``.shape``/``.dtype``)
    to check the file against: same containers, keys, shapes and dtypes.
    Raises ``ValueError`` naming the first mismatching path, or naming the
    file and saying why it is not a funcgrad checkpoint: empty, not an
    ``.npz`` archive, truncated or corrupted, no structure record, a
    malformed record, or arrays that disagree with the record. Nothing is
    ever unpickled.
    """
    path = os.fspath(path)
    spec, arrays = _read(path)
    counter = [0]
    try:
        tree = _build(spec, arrays, counter, "", like, like is not None)
    except _Rejected as e:
        raise _reject(path, str(e)) from None
    if counter[0] != len(arrays):
        raise _reject(path, f"corrupted: it holds {len(arrays)} arrays but its structure names {counter[0]}")
    return tree
