"""Checkpoints as .safetensors (and .npz): round trips, files of the reference library, damaged files, templates.

References: the arrays saved (numpy, compared exactly) and the ``safetensors`` package's own ``load_file`` and
``save_file`` for the file format in both directions.
"""
from __future__ import annotations

import json
import struct
from typing import NamedTuple

import numpy as np
import pytest
import safetensors
import safetensors.numpy as st

import funcgrad.numpy as fnp
from funcgrad import optim
from funcgrad.optim import serialization as S

# Every dtype safetensors and funcgrad both have (funcgrad has no bfloat16 array dtype).
DTYPES = [np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64,
          np.float16, np.float32, np.float64]


class Pair(NamedTuple):
    left: object
    right: object


def _tree():
    rng = np.random.default_rng(0)
    return {
        "layers": [{"w": rng.standard_normal((3, 4)).astype(np.float32), "b": np.zeros(4, np.float32)},
                   {"w": rng.standard_normal((4, 2)), "b": None}],
        "pair": Pair(np.arange(5, dtype=np.int16), (np.ones((2, 0, 3), np.float16), 7)),
        "scalars": (1.5, -3, True, np.array(2.25, np.float32)),
        3: np.array([[True, False]]),
    }


def _assert_same(a, b, path="tree"):
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b) or sorted(map(str, a)) == sorted(map(str, b)), path
        for k in a:
            _assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{path}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b, path


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_round_trip_nested_tree_with_numpy_template(tmp_path, suffix):
    tree = _tree()
    path = S.save(tmp_path / f"ckpt{suffix}", tree)
    _assert_same(S.load(path, like=tree), tree)


def test_round_trip_without_template_rebuilds_the_containers(tmp_path):
    tree = _tree()
    back = S.load(S.save(tmp_path / "ckpt.safetensors", tree))
    assert isinstance(back["pair"], Pair) and back["pair"].right[1] == 7 and back[3].shape == (1, 2)
    assert back["scalars"][:3] == (1.5, -3, True) and back["layers"][1]["b"] is None
    np.testing.assert_array_equal(np.asarray(back["layers"][0]["w"]), tree["layers"][0]["w"])


def _dtype_tree(dtype):
    values = (np.arange(-3, 9).reshape(3, 4) * 7).astype(dtype)
    return {"x": values, "scalar": np.asarray(values.flat[5])}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips(tmp_path, dtype):
    tree = _dtype_tree(dtype)
    _assert_same(S.load(S.save(tmp_path / "t.safetensors", tree), like=tree), tree)


def test_the_reference_library_reads_our_files(tmp_path):
    for dtype in DTYPES:
        tree = _dtype_tree(dtype)
        raw = st.load_file(S.save(tmp_path / f"{np.dtype(dtype).name}.safetensors", tree))
        # Leaves in flattening order (dict keys sorted): scalar, x.
        assert sorted(raw) == ["leaf_0", "leaf_1"]
        _assert_same(raw["leaf_0"], tree["scalar"])
        _assert_same(raw["leaf_1"], tree["x"])


def test_optimizer_state_round_trips(tmp_path):
    params = {"w": fnp.asarray(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)), "b": fnp.zeros(3)}
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-2))
    state = opt.init(params)
    grads = {"w": fnp.ones((2, 3)), "b": fnp.full(3, 0.5)}
    _, state = opt.update(grads, state, params)
    path = S.save(tmp_path / "opt.safetensors", {"params": params, "opt_state": state})
    back = S.load(path, like={"params": params, "opt_state": state})
    flat_saved = _leaves(state)
    flat_back = _leaves(back["opt_state"])
    assert len(flat_saved) == len(flat_back) > 0
    for a, b in zip(flat_saved, flat_back):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert type(back["opt_state"][1][0]) is type(state[1][0])
    # The restored state keeps training like the original.
    u1, _ = opt.update(grads, state, params)
    u2, _ = opt.update(grads, back["opt_state"], back["params"])
    np.testing.assert_array_equal(np.asarray(u1["w"]), np.asarray(u2["w"]))


def _leaves(tree):
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [x for t in tree for x in _leaves(t)]
    return [] if tree is None else [tree]


def test_save_format_by_suffix_and_load_by_content(tmp_path):
    tree = {"w": np.ones((2, 2), np.float32)}
    st_path = S.save(tmp_path / "a.safetensors", tree)
    npz_path = S.save(tmp_path / "a.ckpt", tree)                       # any other suffix: .npz
    assert open(st_path, "rb").read(16)[8:9] == b"{" and open(npz_path, "rb").read(4) == b"PK\x03\x04"
    # A safetensors file under a misleading name, and an .npz one: told apart by content.
    disguised = S.save(tmp_path / "b.npz", tree, format="safetensors")
    other = S.save(tmp_path / "b.safetensors", tree, format="npz")
    assert open(disguised, "rb").read(16)[8:9] == b"{" and open(other, "rb").read(4) == b"PK\x03\x04"
    for p in (st_path, npz_path, disguised, other):
        _assert_same(S.load(p, like=tree), tree)
    with pytest.raises(ValueError, match=r"format='h5'.*'safetensors', 'npz' or None"):
        S.save(tmp_path / "c.h5", tree, format="h5")


def test_file_written_by_the_reference_library_loads(tmp_path):
    tensors = {"embed.weight": np.arange(12, dtype=np.float32).reshape(3, 4), "mask": np.array([True, False]),
               "step": np.array(7, dtype=np.int64), "empty": np.zeros((0, 2), np.float16)}
    path = tmp_path / "model.safetensors"
    st.save_file(tensors, str(path), metadata={"producer": "someone else"})
    back = S.load(path)
    assert sorted(back) == sorted(tensors)
    for name, value in tensors.items():
        np.testing.assert_array_equal(np.asarray(back[name]), value)
    like = {name: value.copy() for name, value in tensors.items()}
    _assert_same(S.load(path, like=like), tensors)
    with pytest.raises(ValueError, match=r"\['embed.weight'\]: saved f32\[3,4\], expected f32\[4,3\]"):
        S.load(path, like=dict(like, **{"embed.weight": np.zeros((4, 3), np.float32)}))
    with pytest.raises(ValueError, match=r"holds tensors .*'mask'.* \(a flat dict, no funcgrad structure\), expected"):
        S.load(path, like={"embed.weight": like["embed.weight"]})


@pytest.mark.parametrize("dtype, itemsize", [("F8_E4M3", 1), ("C64", 8)])
def test_dtype_funcgrad_has_no_array_for_is_a_clear_error(tmp_path, dtype, itemsize):
    path = tmp_path / "other.safetensors"
    # A tensor funcgrad reads first (in name order), then one it has no dtype for: nothing is returned.
    header = {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
              "w": {"dtype": dtype, "shape": [2], "data_offsets": [4, 4 + 2 * itemsize]}}
    _write_raw(path, header, np.float32(1.0).tobytes() + b"\x3f" * (2 * itemsize))
    with pytest.raises(ValueError, match=rf"other.safetensors is not a valid funcgrad checkpoint: tensor 'w': dtype "
                                         rf"'{dtype}' is not supported \(funcgrad reads BOOL, U8.*convert it"):
        S.load(path)


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_views_and_foreign_byte_order_round_trip(tmp_path, suffix):
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    tree = {"t": base.T, "strided": base[::2, 1::3], "neg": base[::-1], "big": np.arange(5, dtype=">i4"),
            "scalar": np.float32(2.5)}
    back = S.load(S.save(tmp_path / f"v{suffix}", tree), like=tree)      # a numpy template: numpy leaves back
    for name, value in tree.items():
        got = back[name]
        assert got.shape == np.shape(value) and got.dtype == np.dtype(value.dtype).newbyteorder("="), name
        np.testing.assert_array_equal(got, value)
    if suffix == ".safetensors":      # the reference reader sees the same values
        raw = st.load_file(tmp_path / f"v{suffix}")
        np.testing.assert_array_equal(raw["leaf_4"], base.T)     # leaves in sorted-key order: big, neg, scalar, strided, t


def test_a_failed_write_leaves_no_file_and_says_why(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise safetensors.SafetensorError("Error while serializing: No space left on device (os error 28)")
    monkeypatch.setattr(st, "save_file", refuse)
    with pytest.raises(OSError, match=r"serialization.save: writing .*full.safetensors failed \(safetensors: .*No "
                                      r"space left.*check the disk space"):
        S.save(tmp_path / "full.safetensors", {"w": np.ones(3)})
    assert list(tmp_path.iterdir()) == []


def test_template_mismatch_is_a_clear_error(tmp_path):
    tree = {"w": np.ones((3, 4), np.float32), "opt": Pair(np.zeros(2), None)}
    path = S.save(tmp_path / "c.safetensors", tree)
    with pytest.raises(ValueError, match=r"w: saved f32\[3,4\], expected f32\[4,3\]"):
        S.load(path, like=dict(tree, w=np.ones((4, 3), np.float32)))
    with pytest.raises(ValueError, match=r"w: saved f32\[3,4\], expected i32\[3,4\]"):
        S.load(path, like=dict(tree, w=np.ones((3, 4), np.int32)))
    with pytest.raises(ValueError, match=r"<root>: saved a dict with keys \['opt', 'w'\], expected a dict with keys"):
        S.load(path, like={"w": tree["w"]})
    with pytest.raises(ValueError, match=r"opt: saved Pair\('left', 'right'\), expected a tuple of length 2"):
        S.load(path, like=dict(tree, opt=(np.zeros(2), None)))


# ---------------------------------------------------------------- damaged files


def _write_raw(path, header, data, size=None):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if size is None else size) + text + data)
    return path


def _good_bytes(tmp_path):
    tree = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [np.int64(4), 2.0]}
    S.save(tmp_path / "good.safetensors", tree)
    return (tmp_path / "good.safetensors").read_bytes()


@pytest.mark.parametrize("keep", [3, 8, 20, -1, -13])
def test_truncated_file_is_rejected_whole(tmp_path, keep):
    data = _good_bytes(tmp_path)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(data[:keep])
    with pytest.raises(ValueError, match=r"bad.safetensors is not a valid funcgrad checkpoint: .*"
                                         r"(truncated|not an .npz)"):
        S.load(bad)


def _header_of(data):
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


@pytest.mark.parametrize("damage, message", [
    (lambda h: h.__setitem__("leaf_0", {"dtype": "F32", "shape": [2, 3]}),
     r"header is not valid: expected UTF-8 JSON, an object of \{name: \{dtype, shape, data_offsets\}\}.*missing field "
     r"`data_offsets`"),
    (lambda h: h["leaf_0"].__setitem__("shape", [2, -3]), r"header is not valid.*integer `-3`, expected usize"),
    (lambda h: h["leaf_0"].__setitem__("dtype", "F7"), r"header is not valid.*unknown variant `F7`"),
    (lambda h: h["leaf_0"].__setitem__("shape", [3, 3]), r"a tensor's dtype, shape and data_offsets disagree"),
    (lambda h: h["leaf_0"].__setitem__("data_offsets", [o + 4 for o in h["leaf_0"]["data_offsets"]]),
     r"data_offsets disagree .*invalid offset for tensor `leaf_0`"),
    (lambda h: h.__setitem__("__metadata__", {"format": "funcgrad.checkpoint", "version": 1}),
     r"__metadata__ map of strings to strings.*integer `1`, expected a string"),
    (lambda h: h["__metadata__"].__setitem__("funcgrad.tree", '{"node": "dict", "keys"'),
     r"structure record in its metadata is corrupted"),
    (lambda h: h["__metadata__"].__setitem__("funcgrad.tree", '{"node": "set", "children": []}'),
     r"structure record is malformed: <root>: unknown node type 'set'"),
    (lambda h: h["__metadata__"].__setitem__("funcgrad.tree", h["__metadata__"]["funcgrad.tree"].replace(
        '"dtype":"<f4"', '"dtype":"01"', 1)), r"structure record is malformed: a: unsupported dtype '01'"),
    (lambda h: h["__metadata__"].__setitem__("version", "9"), r"format version '9' is not supported"),
    (lambda h: h["__metadata__"].__setitem__("format", "other"), r"'funcgrad.tree' but format 'other'"),
    (lambda h: h.pop("leaf_2"), r"unexpected bytes after the last tensor"),
    (lambda h: h.__setitem__("leaf_2", "x"), r"header is not valid.*expected struct TensorInfo"),
])
def test_bad_header_or_metadata_is_a_clear_error(tmp_path, damage, message):
    header, data = _header_of(_good_bytes(tmp_path))
    damage(header)
    path = _write_raw(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(ValueError, match=r"bad.safetensors is not a valid funcgrad checkpoint: (?s:.*)" + message):
        S.load(path)


def test_header_that_is_not_json_or_too_long(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", 12) + b"{not json}  " + b"\0" * 8)
    with pytest.raises(ValueError, match=r"safetensors header is not valid: expected UTF-8 JSON"):
        S.load(path)
    path.write_bytes(struct.pack("<Q", 1000) + b'{"a": 1}')
    with pytest.raises(ValueError, match=r"truncated safetensors file: the header says 1000 bytes"):
        S.load(path)
    data = bytearray(_good_bytes(tmp_path))
    data[20] = 0xFF                       # inside the header: not UTF-8
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"safetensors header is not valid: expected UTF-8 JSON.*invalid UTF-8"):
        S.load(path)
    path.write_bytes(struct.pack("<Q", 2) + b"[]")
    with pytest.raises(ValueError, match=r"not an .npz"):
        S.load(path)


def test_extra_bytes_after_the_tensors_are_rejected(tmp_path):
    data = _good_bytes(tmp_path)
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data + b"\0" * 8)
    with pytest.raises(ValueError, match=r"truncated safetensors file, or unexpected bytes after the last tensor.*"
                                         r"save it anew"):
        S.load(path)


def test_damaged_header_bytes_give_our_error_or_load(tmp_path):
    """Random byte changes in a header: every outcome is a load or a ValueError from funcgrad (never one of the
    library's exceptions, a KeyError, a SyntaxError ...)."""
    data = _good_bytes(tmp_path)
    n = struct.unpack("<Q", data[:8])[0]
    rng = np.random.default_rng(1)
    path = tmp_path / "bad.safetensors"
    rejected = 0
    for _ in range(300):
        damaged = bytearray(data)
        for pos in rng.integers(0, 8 + n, size=rng.integers(1, 4)):
            damaged[pos] = rng.choice(list(b'{}[]",:0123456789 ax\xff'))
        path.write_bytes(bytes(damaged))
        try:
            S.load(path)
        except ValueError as e:
            assert str(e).startswith(f"serialization.load: {path}"), str(e)
            rejected += 1
    assert rejected > 250
