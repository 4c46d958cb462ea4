"""Save and load pytrees of arrays (parameters, optimizer states) as one ``.safetensors`` or ``.npz`` file.

Two formats, chosen by ``save`` from the file name's suffix (or ``format=``):

* ``.safetensors`` (the `safetensors <https://github.com/huggingface/safetensors>`_
  format, readable by PyTorch, JAX/Flax and Hugging Face tools): every leaf
  is a tensor ``leaf_0``, ``leaf_1``, ... (flattening order) and the
  structure is a JSON string in the header's ``__metadata__``
  (``funcgrad.tree``).  funcgrad reads and writes it with the
  ``safetensors`` library.
* ``.npz`` (the default for any other suffix): the same leaves as arrays
  and the JSON record under ``__funcgrad_checkpoint__``.

``load`` tells the two apart by content, not by suffix.  Nothing is pickled,
in either direction: the structure is described with dicts (str/int keys),
lists, tuples, None and NamedTuples (by type name and field names), so
loading a file never runs code from it.  A ``.safetensors`` file written by
another program (no funcgrad structure) loads as a flat ``{name: array}``
dict.

>>> import os, tempfile
>>> from funcgrad import optim
>>> from funcgrad.optim import serialization
>>> params = {"w": fnp.ones(2)}
>>> state = optim.adam(1e-3).init(params)
>>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
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
import safetensors
import safetensors.numpy

import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import Array, ShapedArray, Tracer, host_numpy
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
        kind, value = "array", host_numpy(x)   # a GPU array is copied to the host
    else:
        raise TypeError(f"serialization.save: cannot store a {type(x).__name__} at {_show(path)}; leaves must be "
                        "arrays or Python numbers, containers dicts/lists/tuples/NamedTuples/None")
    if _dtypes.kind(value.dtype) not in "biuf":
        raise TypeError(f"serialization.save: unsupported dtype {value.dtype} at {_show(path)}; checkpoints hold "
                        "bool, int, uint and float arrays")
    if not value.dtype.isnative:
        value = value.astype(value.dtype.newbyteorder("="))
    leaves.append(value)
    return {"node": "leaf", "kind": kind, "dtype": _dtype_str(value.dtype), "shape": list(value.shape)}


def _dtype_str(dtype: np.dtype) -> str:
    """How a leaf's dtype is recorded: numpy's ``dtype.str`` (``"<f4"``), ``"bfloat16"`` for bfloat16 (whose
    ``str`` is a raw ``"<V2"``)."""
    return "bfloat16" if dtype == _dtypes.bfloat16 else dtype.str


def _npz_leaf(leaf: np.ndarray) -> np.ndarray:
    """An array as .npz stores it: bfloat16 as its uint16 bits (numpy would write raw "V2" records)."""
    return leaf.view(np.uint16) if leaf.dtype == _dtypes.bfloat16 else leaf


def _aval_str(dtype: Any, shape: Any) -> str:
    return ShapedArray(tuple(shape), np.dtype(dtype)).str_short()


# --------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------


_FORMATS = ("safetensors", "npz")


def _save_format(path: str, format: str | None) -> str:
    if format is None:
        return "safetensors" if path.endswith(".safetensors") else "npz"
    if format not in _FORMATS:
        raise ValueError(f"serialization.save: format={format!r:.40}; use 'safetensors', 'npz' or None (by suffix: "
                         "'.safetensors' files are safetensors, any other name .npz)")
    return format


def save(path: str | os.PathLike, tree: Any, format: str | None = None) -> str:
    """Write ``tree`` (a pytree of arrays) to ``path`` as one file; returns the path.

    ``format``: ``"safetensors"`` or ``"npz"``; by default a path ending in
    ``.safetensors`` gets safetensors and any other path ``.npz`` (no suffix
    is added).  Leaves: arrays of bool, int, uint or float dtypes (bfloat16 included), and Python
    numbers; containers: dicts (str/int keys), lists, tuples, NamedTuples,
    None. The file is written to a temporary name and renamed, so an
    interrupted save never leaves a half-written checkpoint under ``path``.

    >>> save("params.safetensors", {"w": fnp.ones((2, 3)), "b": fnp.zeros(3)})   # doctest: +SKIP
    'params.safetensors'
    """
    path = os.fspath(path)
    kind = _save_format(path, format)
    leaves: list[np.ndarray] = []
    record = {"format": _FORMAT, "version": _VERSION, "tree": _describe(tree, leaves, "")}
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
    os.close(fd)
    try:
        if kind == "safetensors":
            _write_safetensors(tmp, path, record, leaves)
        else:
            arrays = {f"leaf_{i}": _npz_leaf(leaf) for i, leaf in enumerate(leaves)}
            arrays[_RECORD] = np.frombuffer(json.dumps(record).encode("utf-8"), dtype=np.uint8)
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)   # a file object: numpy does not append ".npz"
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


# --------------------------------------------------------------------------
# safetensors files, through the safetensors library: leaves are tensors
# leaf_0, leaf_1, ... and the structure is a JSON string in __metadata__.
# --------------------------------------------------------------------------

# The safetensors dtypes funcgrad has arrays for (not F8_*, F4, C64).
_ST_DTYPES = ("BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "BF16", "F16", "F32", "F64")
_ST_META_TREE = "funcgrad.tree"
_ST_MAX_HEADER = 100 * 2**20      # the library's limit


def _write_safetensors(tmp: str, path: str, record: dict, leaves: list) -> None:
    metadata = {"format": _FORMAT, "version": str(_VERSION),
                _ST_META_TREE: json.dumps(record["tree"], separators=(",", ":"))}
    # The library writes each array's memory as it lies: views (a transpose, a
    # slice) are made contiguous first; order="C" keeps 0-d shapes.
    tensors = {f"leaf_{i}": np.asarray(leaf, order="C") for i, leaf in enumerate(leaves)}
    try:
        safetensors.numpy.save_file(tensors, tmp, metadata=metadata)
    except safetensors.SafetensorError as e:     # the disk is full, the file system refuses, ...
        raise OSError(f"serialization.save: writing {path} failed (safetensors: {e}); check the disk space and "
                      "the permissions of its directory") from None


def _looks_like_safetensors(head: bytes) -> bool:
    """An 8-byte little-endian header size, then a JSON object: how a safetensors file starts."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return 2 <= n <= _ST_MAX_HEADER and head[8:9] == b"{"


def _library_error(path: str, head: bytes, file_size: int, e: Exception) -> ValueError:
    """The library's complaint about a damaged file, said in terms of the file."""
    said = str(e).removeprefix("Error while deserializing header: ")
    n = int.from_bytes(head[:8], "little")
    if "header length" in said and 8 + n > file_size:
        why = f"truncated safetensors file: the header says {n} bytes, the file has {file_size - 8} after the size field"
    elif "not fully covered" in said:
        why = ("truncated safetensors file, or unexpected bytes after the last tensor: the tensors' data_offsets do "
               "not cover the data exactly")
    elif "invalid JSON" in said or "UTF-8" in said or "header length" in said:
        why = ("the safetensors header is not valid: expected UTF-8 JSON, an object of {name: {dtype, shape, data_offsets}} "
               "and an optional __metadata__ map of strings to strings")
    elif "offset" in said:
        why = "a tensor's dtype, shape and data_offsets disagree (its bytes are not where the header says)"
    else:
        why = "the safetensors library cannot read it"
    return _reject(path, f"{why} (safetensors: {said}); the file is damaged: copy it again, or save it anew")


def _read_safetensors(path: str, head: bytes, file_size: int) -> tuple[dict | None, dict]:
    """The structure (None for a file without funcgrad's) and the tensors of a safetensors file.

    The library checks the header whole (dtypes, shapes, offsets covering the
    data exactly, metadata strings) when it opens the file; every tensor's
    dtype is checked before any tensor is read.
    """
    try:
        with safetensors.safe_open(path, framework="numpy") as f:
            metadata = f.metadata()
            names = list(f.keys())
            for name in names:
                dtype = f.get_slice(name).get_dtype()
                if dtype not in _ST_DTYPES:
                    raise _reject(path, f"tensor {name!r}: dtype {dtype!r:.20} is not supported (funcgrad reads "
                                        f"{', '.join(_ST_DTYPES)}; convert it, e.g. to F32, where it is written)")
            arrays = {name: f.get_tensor(name) for name in names}   # copies: the file is closed after
    except safetensors.SafetensorError as e:
        raise _library_error(path, head, file_size, e) from None
    return _safetensors_tree(path, metadata), arrays


def _safetensors_tree(path: str, metadata: dict | None) -> dict | None:
    """funcgrad's structure from the metadata; None when the file has none (written by another program)."""
    if not metadata or metadata.get("format") != _FORMAT:
        if metadata and _ST_META_TREE in metadata:
            raise _reject(path, f"its metadata has {_ST_META_TREE!r} but format {metadata.get('format')!r:.40}, not "
                                f"{_FORMAT!r}")
        return None
    if metadata.get("version") != str(_VERSION):
        raise _reject(path, f"format version {metadata.get('version')!r:.20} is not supported (this funcgrad reads "
                            f"{_VERSION})")
    if _ST_META_TREE not in metadata:
        raise _reject(path, f"its metadata has no {_ST_META_TREE!r} structure record")
    try:
        tree = json.loads(metadata[_ST_META_TREE])
    except json.JSONDecodeError as e:
        raise _reject(path, f"the structure record in its metadata is corrupted ({e})") from e
    return tree


# --------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------


_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"


class _Rejected(ValueError):
    """Raised by the readers below; ``load`` turns it into one message naming the file."""


def _reject(path: str, why: str) -> ValueError:
    return ValueError(f"serialization.load: {path} is not a valid funcgrad checkpoint: {why}")


def _read(path: str) -> tuple[dict | None, dict]:
    """The structure record and the arrays of a checkpoint, or a ValueError saying why not.

    The format is told by content: a zip archive is ``.npz``, an 8-byte size
    followed by a JSON object is safetensors.  Arrays are read with
    ``allow_pickle=False``: a file can never run code.
    """
    # We open the file ourselves so it is closed even when numpy gives up
    # half-way through a damaged archive.
    with open(path, "rb") as f:
        head = f.read(9)
        f.seek(0)
        if not head:
            raise _reject(path, "the file is empty")
        if head.startswith(_NPY_MAGIC):
            raise _reject(path, "it holds a single array (.npy), not an .npz archive")
        if _looks_like_safetensors(head):
            tree, arrays = _read_safetensors(path, head, os.fstat(f.fileno()).st_size)
            if tree is not None:
                _validate_record_tree(path, tree)
            return tree, arrays
        if not head.startswith(_ZIP_MAGIC):
            raise _reject(path, "it is not an .npz (zip) archive, nor a .safetensors file")
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
    _validate_record_tree(path, record["tree"])
    return record["tree"], arrays


def _validate_record_tree(path: str, tree: Any) -> None:
    try:
        _validate(tree, "")
    except _Rejected as e:
        raise _reject(path, f"the structure record is malformed: {e}") from None


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
        ok = _dtypes.kind(np.dtype(dtype)) in "biuf"
    except (TypeError, ValueError, SyntaxError):    # numpy parses some dtype strings as Python literals
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
    # A big-endian template (">i4") describes the same array as a native one.
    return ShapedArray(tuple(shape), canonicalize_dtype(np.dtype(dtype).newbyteorder("=")))


def _build_leaf(spec: dict, arrays: dict, counter: list, path: str, like: Any, has_like: bool) -> Any:
    index = counter[0]
    counter[0] += 1
    value = arrays.get(f"leaf_{index}")
    if value is None:
        raise _Rejected(f"corrupted: the array for {_show(path)} is missing")
    if spec["dtype"] == "bfloat16" and value.dtype == np.uint16:   # an .npz holds bfloat16 as its bits
        value = value.view(_dtypes.bfloat16)
    if list(value.shape) != list(spec["shape"]) or _dtype_str(value.dtype) != spec["dtype"]:
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


def _load_plain(path: str, arrays: dict, like: Any) -> dict:
    """A safetensors file without funcgrad's structure: a flat ``{name: array}`` dict."""
    if like is not None:
        if not isinstance(like, dict) or sorted(like) != sorted(arrays):
            raise ValueError(f"serialization.load: {path} holds tensors {sorted(arrays)!r:.200} (a flat dict, no "
                             f"funcgrad structure), expected {_like_kind(like)}")
        for name in sorted(arrays):
            saved = ShapedArray(arrays[name].shape, canonicalize_dtype(arrays[name].dtype))
            expected = _leaf_aval(like[name])
            if expected is None or saved != expected:
                raise ValueError(f"serialization.load: [{name!r}]: saved {saved.str_short()}, expected "
                                 f"{_like_kind(like[name]) if expected is None else expected.str_short()}")
    return {name: arrays[name] if isinstance(like, dict) and isinstance(like[name], np.ndarray)
            else fnp.asarray(arrays[name]) for name in arrays}


def load(path: str | os.PathLike, like: Any = None) -> Any:
    """Read a tree written by :func:`save` (``.safetensors`` or ``.npz``, told apart by content).

    Leaves come back as funcgrad arrays (numpy arrays where ``like`` has
    numpy leaves). A safetensors file written by another program (no
    funcgrad structure in its metadata) comes back as a flat
    ``{name: array}`` dict.

    >>> params = load("params.safetensors", like=params)      # doctest: +SKIP

    ``like``: a template tree (arrays, or anything with ``.shape``/``.dtype``)
    to check the file against: same containers, keys, shapes and dtypes.
    Raises ``ValueError`` naming the first mismatching path, or naming the
    file and saying why it is not a funcgrad checkpoint: empty, neither
    format, truncated or corrupted, a bad safetensors header, no structure
    record, a malformed record, or arrays that disagree with the record.
    Nothing is returned before the whole file has been checked, and nothing
    is ever unpickled.
    """
    path = os.fspath(path)
    spec, arrays = _read(path)
    if spec is None:       # a safetensors file written by another program
        return _load_plain(path, arrays, like)
    counter = [0]
    try:
        tree = _build(spec, arrays, counter, "", like, like is not None)
    except _Rejected as e:
        raise _reject(path, str(e)) from None
    if counter[0] != len(arrays):
        raise _reject(path, f"corrupted: it holds {len(arrays)} arrays but its structure names {counter[0]}")
    return tree
