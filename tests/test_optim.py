"""Tests for funcgrad.optim: optimizers against float64 numpy references, schedules,
jit, and checkpoints.

The references below are written from the published update rules (PyTorch's
SGD, Kingma & Ba's Adam, Loshchilov & Hutter's AdamW), independently of the
chain-of-transforms implementation.
"""
from __future__ import annotations

import math
import os
import zipfile

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import optim
from funcgrad.optim import serialization
from funcgrad.tree_util import tree_leaves, tree_map, tree_structure

STEPS = 5


def make_params(dtype=np.float32):
    rng = np.random.default_rng(0)
    return {"dense": {"w": fnp.asarray(rng.normal(size=(3, 2)).astype(dtype)),
                      "b": fnp.asarray(rng.normal(size=(2,)).astype(dtype))},
            "scale": [fnp.asarray(np.array(1.5, dtype))]}


def make_grads(params, step, dtype=np.float32):
    rng = np.random.default_rng(100 + step)
    return tree_map(lambda p: fnp.asarray(rng.normal(size=p.shape).astype(dtype) * 2.0), params)


def to_np(tree):
    return [np.asarray(x, np.float64) for x in tree_leaves(tree)]


# --------------------------------------------------------------------------
# float64 numpy references (flat lists of leaves)
# --------------------------------------------------------------------------


def reference_sgd(params, grads_seq, lr, momentum=0.0, nesterov=False, weight_decay=0.0):
    params = [p.copy() for p in params]
    bufs = [np.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_seq):
        rate = lr(t) if callable(lr) else lr
        for i, (p, g) in enumerate(zip(params, grads)):
            g = g + weight_decay * p
            if momentum:
                bufs[i] = momentum * bufs[i] + g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            params[i] = p - rate * g
    return params


def reference_adam(params, grads_seq, lr, b1=0.9, b2=0.999, eps=1e-8, decoupled_decay=0.0, clip=None):
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_seq, start=1):
        if clip is not None:
            norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
            grads = [g * min(1.0, clip / norm) for g in grads]
        rate = lr(t - 1) if callable(lr) else lr
        for i, (p, g) in enumerate(zip(params, grads)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat = m[i] / (1 - b1**t)
            v_hat = v[i] / (1 - b2**t)
            params[i] = p - rate * (m_hat / (np.sqrt(v_hat) + eps) + decoupled_decay * p)
    return params


def reference_clipped_sgd(params, grads_seq, lr, max_norm):
    out = [p.copy() for p in params]
    for grads in grads_seq:
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        scale = min(1.0, max_norm / norm)
        out = [p - lr * scale * g for p, g in zip(out, grads)]
    return out


def _sched(t):
    return 0.1 * 0.5 ** (t // 2)


# name -> (optimizer, reference(params, grads_seq))
CASES = {
    "sgd": (lambda: optim.sgd(0.1), lambda p, g: reference_sgd(p, g, 0.1)),
    "sgd_wd": (lambda: optim.sgd(0.1, weight_decay=0.05), lambda p, g: reference_sgd(p, g, 0.1, weight_decay=0.05)),
    "sgd_momentum": (lambda: optim.sgd(0.1, momentum=0.9), lambda p, g: reference_sgd(p, g, 0.1, 0.9)),
    "sgd_momentum_wd": (lambda: optim.sgd(0.05, momentum=0.8, weight_decay=0.1),
                        lambda p, g: reference_sgd(p, g, 0.05, 0.8, weight_decay=0.1)),
    "sgd_nesterov": (lambda: optim.sgd(0.1, momentum=0.9, nesterov=True),
                     lambda p, g: reference_sgd(p, g, 0.1, 0.9, nesterov=True)),
    "sgd_nesterov_wd": (lambda: optim.sgd(0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                        lambda p, g: reference_sgd(p, g, 0.1, 0.9, nesterov=True, weight_decay=0.01)),
    "sgd_schedule": (lambda: optim.sgd(optim.step_decay_schedule(0.1, 2, 0.5), momentum=0.5),
                     lambda p, g: reference_sgd(p, g, _sched, 0.5)),
    "adam": (lambda: optim.adam(0.01), lambda p, g: reference_adam(p, g, 0.01)),
    "adam_betas": (lambda: optim.adam(0.02, b1=0.5, b2=0.9, eps=1e-3),
                   lambda p, g: reference_adam(p, g, 0.02, 0.5, 0.9, 1e-3)),
    "adamw": (lambda: optim.adamw(0.01, weight_decay=0.1),
              lambda p, g: reference_adam(p, g, 0.01, decoupled_decay=0.1)),
    "adamw_schedule": (lambda: optim.adamw(optim.step_decay_schedule(0.1, 2, 0.5), weight_decay=0.1),
                       lambda p, g: reference_adam(p, g, _sched, decoupled_decay=0.1)),
    "clip_then_adam": (lambda: optim.chain(optim.clip_by_global_norm(1.0), optim.adam(0.01)),
                       lambda p, g: reference_adam(p, g, 0.01, clip=1.0)),
    "clip_then_sgd": (lambda: optim.chain(optim.clip_by_global_norm(0.5), optim.sgd(0.1)),
                      lambda p, g: reference_clipped_sgd(p, g, 0.1, 0.5)),
}


def run(opt, params, grads_seq, step=None):
    state = opt.init(params)
    step = step or (lambda p, s, g: _eager_step(opt, p, s, g))
    for grads in grads_seq:
        params, state = step(params, state, grads)
    return params, state


def _eager_step(opt, params, state, grads):
    updates, state = opt.update(grads, state, params)
    return optim.apply_updates(params, updates), state


@pytest.mark.parametrize("name", list(CASES))
def test_matches_float64_reference_in_float32(name):
    make, reference = CASES[name]
    params = make_params()
    grads_seq = [make_grads(params, t) for t in range(STEPS)]
    got, state = run(make(), params, grads_seq)
    expected = reference(to_np(params), [to_np(g) for g in grads_seq])
    assert tree_structure(got) == tree_structure(params)
    for g, e in zip(to_np(got), expected):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6)
    assert all(x.dtype == np.float32 for x in tree_leaves(got))


@pytest.mark.parametrize("name", list(CASES))
def test_matches_float64_reference_exactly_in_float64(name, x64):
    make, reference = CASES[name]
    params = make_params(np.float64)
    grads_seq = [make_grads(params, t, np.float64) for t in range(STEPS)]
    got, _ = run(make(), params, grads_seq)
    expected = reference(to_np(params), [to_np(g) for g in grads_seq])
    for g, e in zip(to_np(got), expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(CASES))
def test_jit_matches_eager(name):
    make, _ = CASES[name]
    opt = make()
    params = make_params()
    grads_seq = [make_grads(params, t) for t in range(STEPS)]
    eager_params, eager_state = run(opt, params, grads_seq)
    jitted = fg.jit(lambda p, s, g: _eager_step(opt, p, s, g))
    jit_params, jit_state = run(opt, params, grads_seq, step=jitted)
    assert jitted.cache_info()["misses"] == 1      # the state keeps its structure, shapes and dtypes
    assert tree_structure(jit_state) == tree_structure(eager_state)
    for a, b in zip(tree_leaves((jit_params, jit_state)), tree_leaves((eager_params, eager_state))):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


def test_states_are_immutable_values_with_an_int32_counter():
    opt = optim.adam(0.1)
    params = make_params()
    state = opt.init(params)
    adam_state = state[0]
    assert isinstance(adam_state, optim.ScaleByAdamState)
    assert adam_state.count.dtype == np.int32 and adam_state.count.shape == ()
    _, new_state = opt.update(make_grads(params, 0), state, params)
    assert int(new_state[0].count) == 1 and int(state[0].count) == 0   # the old state is untouched
    with pytest.raises(AttributeError):
        adam_state.count = 5


def test_training_loop_under_jit_reduces_a_loss():
    rng = np.random.default_rng(1)
    x = fnp.asarray(rng.normal(size=(64, 3)).astype(np.float32))
    y = x @ fnp.asarray(np.array([[1.0], [-2.0], [0.5]], np.float32))
    params = {"w": fnp.zeros((3, 1)), "b": fnp.zeros(1)}
    opt = optim.chain(optim.clip_by_global_norm(10.0),
                      optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 0.1, 5, 200), weight_decay=1e-4))

    def loss(p):
        return fnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    @fg.jit
    def step(p, s):
        updates, s = opt.update(fg.grad(loss)(p), s, p)
        return optim.apply_updates(p, updates), s

    state = opt.init(params)
    first = float(loss(params))
    for _ in range(200):
        params, state = step(params, state)
    assert float(loss(params)) < 1e-3 * first


def test_weight_decay_needs_params():
    opt = optim.sgd(0.1, weight_decay=0.1)
    params = make_params()
    with pytest.raises(ValueError, match="weight decay needs the parameters"):
        opt.update(make_grads(params, 0), opt.init(params))


def test_clip_leaves_small_gradients_alone():
    grads = {"a": fnp.asarray([0.3, 0.4])}          # norm 0.5
    clipped, _ = optim.clip_by_global_norm(1.0).update(grads, optim.EmptyState())
    np.testing.assert_array_equal(np.asarray(clipped["a"]), np.asarray(grads["a"]))
    clipped, _ = optim.clip_by_global_norm(0.25).update(grads, optim.EmptyState())
    np.testing.assert_allclose(np.asarray(clipped["a"]), [0.15, 0.2], rtol=1e-6)


# --------------------------------------------------------------------------
# Schedules at their key steps
# --------------------------------------------------------------------------


def test_constant_schedule():
    s = optim.constant_schedule(0.3)
    for step in (0, 1, 1000):
        assert float(s(step)) == pytest.approx(0.3)


def test_step_decay_schedule():
    s = optim.step_decay_schedule(2.0, step_size=10, decay_rate=0.1)
    for step, expected in [(0, 2.0), (9, 2.0), (10, 0.2), (19, 0.2), (20, 0.02), (35, 0.002)]:
        assert float(s(step)) == pytest.approx(expected, rel=1e-6), step
    assert float(s(fnp.asarray(20, dtype=fnp.int32))) == pytest.approx(0.02, rel=1e-6)


def test_warmup_cosine_decay_schedule():
    init, peak, end, warmup, total = 0.01, 1.0, 0.1, 10, 110
    s = optim.warmup_cosine_decay_schedule(init, peak, warmup, total, end_value=end)

    def expected(t):
        if t < warmup:
            return init + (peak - init) * t / warmup
        progress = min(t - warmup, total - warmup) / (total - warmup)
        return end + (peak - end) * 0.5 * (1 + math.cos(math.pi * progress))

    key_steps = {0: init, warmup: peak, warmup + (total - warmup) // 2: (peak + end) / 2, total: end, 500: end}
    for step, value in key_steps.items():
        assert float(s(step)) == pytest.approx(value, rel=1e-6), step
    for step in (3, 25, 77, 109):
        assert float(s(step)) == pytest.approx(expected(step), rel=1e-6), step
    # Under jit, with the step as the int32 counter.
    assert float(fg.jit(s)(fnp.asarray(warmup, dtype=fnp.int32))) == pytest.approx(peak, rel=1e-6)


def test_warmup_of_zero_steps_starts_at_the_peak():
    s = optim.warmup_cosine_decay_schedule(0.0, 1.0, 0, 100)
    assert float(s(0)) == pytest.approx(1.0) and float(s(100)) == pytest.approx(0.0, abs=1e-7)


# --------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------


def _trained(opt):
    params = make_params()
    return run(opt, params, [make_grads(params, t) for t in range(2)])


def assert_trees_equal(a, b):
    assert tree_structure(a) == tree_structure(b)
    for x, y in zip(tree_leaves(a), tree_leaves(b)):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("name", ["sgd_momentum_wd", "adamw_schedule", "clip_then_adam"])
def test_checkpoint_round_trip(tmp_path, name):
    opt = CASES[name][0]()
    params, state = _trained(opt)
    tree = {"params": params, "opt_state": state, "step": 7, "note": None}
    path = tmp_path / "ckpt.npz"
    assert serialization.save(path, tree) == str(path)
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]          # no temporary files left behind
    for restored in (serialization.load(path), serialization.load(path, like=tree)):
        assert_trees_equal(restored, tree)
        assert restored["step"] == 7 and type(restored["step"]) is int and restored["note"] is None
    # The restored state drives the optimizer exactly like the original.
    restored = serialization.load(path, like=tree)
    grads = make_grads(params, 9)
    assert_trees_equal(opt.update(grads, restored["opt_state"], restored["params"]),
                       opt.update(grads, state, params))


def test_checkpoint_keeps_containers_and_dtypes(tmp_path):
    tree = {"list": [fnp.arange(3), (fnp.ones(2, dtype=fnp.float16), True)],
            "ints": {3: fnp.asarray([1, 2], dtype=fnp.uint8)}, "empty": optim.EmptyState(), "flag": fnp.asarray([True, False])}
    serialization.save(tmp_path / "c.npz", tree)
    restored = serialization.load(tmp_path / "c.npz")
    assert isinstance(restored["list"], list) and isinstance(restored["list"][1], tuple)
    assert isinstance(restored["empty"], optim.EmptyState) and 3 in restored["ints"]
    assert_trees_equal(restored, tree)


def test_checkpoint_shape_mismatch_names_the_path(tmp_path):
    saved = {"params": {"w1": fnp.zeros((784, 512)), "b1": fnp.zeros(512)}}
    serialization.save(tmp_path / "c.npz", saved)
    like = {"params": {"w1": fnp.zeros((512, 784)), "b1": fnp.zeros(512)}}
    with pytest.raises(ValueError, match=r"params\['w1'\]: saved f32\[784,512\], expected f32\[512,784\]"):
        serialization.load(tmp_path / "c.npz", like=like)


@pytest.mark.parametrize("like,message", [
    ({"params": {"w": fnp.zeros(3, dtype=fnp.int32)}}, r"params\['w'\]: saved f32\[3\], expected i32\[3\]"),
    ({"params": {"w": fnp.zeros(3), "b": fnp.zeros(1)}}, r"params: saved a dict with keys \['w'\], expected a dict "
                                                         r"with keys \['b', 'w'\]"),
    ({"params": [fnp.zeros(3)]}, r"params: saved a dict .* expected a list of length 1"),
    ({"params": {"w": (fnp.zeros(3),)}}, r"params\['w'\]: saved f32\[3\], expected a tuple of length 1"),
    ([fnp.zeros(3)], r"<root>: saved a dict with keys \['params'\], expected a list"),
])
def test_checkpoint_structure_mismatch(tmp_path, like, message):
    serialization.save(tmp_path / "c.npz", {"params": {"w": fnp.zeros(3)}})
    with pytest.raises(ValueError, match=message):
        serialization.load(tmp_path / "c.npz", like=like)


def test_checkpoint_namedtuple_mismatch(tmp_path):
    params = make_params()
    serialization.save(tmp_path / "c.npz", optim.adam(0.1).init(params))
    with pytest.raises(ValueError, match=r"\[0\]: saved .*ScaleByAdamState.* expected TraceState"):
        serialization.load(tmp_path / "c.npz", like=optim.sgd(0.1, momentum=0.9).init(params)[1:])


def _warned_here(record) -> None:
    """Every warning recorded is the rename's DeprecationWarning, pointing at this file (the user's line)."""
    assert record and all(issubclass(w.category, DeprecationWarning) and "optim.serialization" in str(w.message)
                          and w.filename == __file__ for w in record), [(w.filename, str(w.message)) for w in record]


def test_old_checkpoint_name_still_works_with_a_deprecation_warning(tmp_path):
    import importlib
    import sys
    sys.modules.pop("funcgrad.optim.checkpoint", None)   # not imported as a module before: the attribute path
    vars(optim).pop("checkpoint", None)
    tree = {"w": fnp.arange(3.0), "n": 2}
    with pytest.warns(DeprecationWarning) as record:
        from funcgrad.optim import checkpoint as old
    _warned_here(record)
    old.save(tmp_path / "old.npz", tree)
    assert_trees_equal(serialization.load(tmp_path / "old.npz"), tree)
    with pytest.warns(DeprecationWarning) as record:
        attr = optim.checkpoint
    _warned_here(record)
    assert attr.load(tmp_path / "old.npz")["n"] == 2
    # The module path: a shim module, warned about when imported.
    sys.modules.pop("funcgrad.optim.checkpoint", None)
    try:
        with pytest.warns(DeprecationWarning) as record:
            shim = importlib.import_module("funcgrad.optim.checkpoint")
        assert shim.save is serialization.save and shim.load is serialization.load
        assert all("optim.serialization" in str(w.message) for w in record)
    finally:
        sys.modules.pop("funcgrad.optim.checkpoint", None)
        vars(optim).pop("checkpoint", None)   # the import set it; the next access must warn again
    with pytest.raises(AttributeError, match="no attribute 'checkpointz'"):
        optim.checkpointz  # noqa: B018 -- the attribute access is what raises


def test_foreign_and_corrupted_files_are_rejected(tmp_path):
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, a=np.zeros(3), b=np.ones(2))
    with pytest.raises(ValueError, match="not a valid funcgrad checkpoint: it has no __funcgrad_checkpoint__ record"):
        serialization.load(foreign)

    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, __funcgrad_checkpoint__=np.array([{"evil": 1}], dtype=object))
    with pytest.raises(ValueError, match="not a valid funcgrad checkpoint"):
        serialization.load(pickled)

    single = tmp_path / "single.npy"
    np.save(single, np.zeros(3))
    with pytest.raises(ValueError, match="single array"):
        serialization.load(single)

    text = tmp_path / "text.npz"
    text.write_text("hello, not an archive")
    with pytest.raises(ValueError, match="not a valid funcgrad checkpoint"):
        serialization.load(text)

    good = tmp_path / "good.npz"
    serialization.save(good, {"w": fnp.arange(1000.0)})
    data = bytearray(good.read_bytes())
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(bytes(data[:len(data) // 2]))
    with pytest.raises(ValueError, match="not a valid funcgrad checkpoint"):
        serialization.load(truncated)
    flipped = tmp_path / "flipped.npz"
    data[len(data) // 3] ^= 0xFF                           # inside the leaf's bytes: caught by the zip CRC
    flipped.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupted"):
        serialization.load(flipped)


def test_tampered_records_are_rejected(tmp_path):
    def write(record_bytes, **arrays):
        path = tmp_path / "t.npz"
        np.savez(path, __funcgrad_checkpoint__=np.frombuffer(record_bytes, np.uint8), **arrays)
        return path

    with pytest.raises(ValueError, match="structure record is corrupted"):
        serialization.load(write(b"{not json"))
    with pytest.raises(ValueError, match="unknown format"):
        serialization.load(write(b'{"format": "other", "tree": {}}'))
    record = b'{"format": "funcgrad.checkpoint", "version": 1, "tree": {"node": "leaf", "kind": "array", ' \
             b'"dtype": "<f4", "shape": [3]}}'
    with pytest.raises(ValueError, match="recorded as f32\\[3\\] but stored as f32\\[4\\]"):
        serialization.load(write(record, leaf_0=np.zeros(4, np.float32)))
    with pytest.raises(ValueError, match="holds 2 arrays but its structure names 1"):
        serialization.load(write(record, leaf_0=np.zeros(3, np.float32), leaf_1=np.zeros(1)))


def test_save_rejects_what_it_cannot_describe(tmp_path):
    with pytest.raises(TypeError, match=r"cannot store a str at params\['name'\]"):
        serialization.save(tmp_path / "c.npz", {"params": {"name": "w"}})
    with pytest.raises(TypeError, match="dict keys must be str or int"):
        serialization.save(tmp_path / "c.npz", {(1, 2): fnp.zeros(1)})
    assert not (tmp_path / "c.npz").exists()
    assert os.listdir(tmp_path) == []


def test_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        serialization.load(tmp_path / "nope.npz")


def test_zip_crc_really_protects_leaves(tmp_path):
    # Guard for the test above: the byte we flip must lie inside a stored member.
    good = tmp_path / "g.npz"
    serialization.save(good, {"w": fnp.arange(1000.0)})
    with zipfile.ZipFile(good) as z:
        info = z.getinfo("leaf_0.npy")
    size = good.stat().st_size
    assert info.header_offset < size // 3 < info.header_offset + info.file_size
