"""No array handed to the caller aliases memory funcgrad reuses; buffer pools and creation are bounded.

Some libraries ignore numpy's read-only flag (``torch.from_numpy(np.asarray(g)).mul_(0)``).
``_writable_alias`` plays such a library: a writable ndarray over the same
memory, built from the raw address.  Writing through it must never change a
later result.
"""
from __future__ import annotations

import ctypes
import gc
import tracemalloc

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _grad
from funcgrad.compiler import program as program_mod
from conftest import config_set  # noqa: E402


def _writable_alias(a) -> np.ndarray:
    """A writable view of ``a``'s memory that numpy does not know is ``a``'s."""
    a = np.asarray(a)
    span = sum((n - 1) * abs(s) for n, s in zip(a.shape, a.strides)) + a.itemsize
    raw = (ctypes.c_char * span).from_address(a.__array_interface__["data"][0])
    return np.ndarray(a.shape, a.dtype, buffer=raw, strides=a.strides)


def _leaves(tree) -> list:
    return [np.asarray(leaf) for leaf in fg.tree_util.tree_leaves(tree)]


def _vandalise(results) -> None:
    for leaf in _leaves(results):
        if leaf.size:
            _writable_alias(leaf)[...] = -99


X = np.array([1.0, 2.0, 3.0], np.float32)
S = np.float32(2.0)
X64 = X.astype(np.float64)


def _jitted(f):
    j = fg.jit(f)
    return lambda: j(fnp.array(X))


# (name, call, float64 reference computed with numpy)
_CASES = [
    ("grad of identity", lambda: fg.grad(lambda a: a)(fnp.array(S)), lambda: np.float64(1.0)),
    ("grad of sum", lambda: fg.grad(fnp.sum)(fnp.array(X)), lambda: np.ones(3)),
    ("grad of mean", lambda: fg.grad(fnp.mean)(fnp.array(X)), lambda: np.full(3, 1 / 3)),
    ("grad of a constant", lambda: fg.grad(lambda a: fnp.sum(a * 0.0) + 1.0)(fnp.array(X)), lambda: np.zeros(3)),
    ("grad, unused input", lambda: fg.grad(lambda a, b: fnp.sum(b * b))(fnp.array(X), fnp.array(X)),
     lambda: np.zeros(3)),
    ("value_and_grad", lambda: fg.value_and_grad(lambda a: fnp.sum(a * 2.0))(fnp.array(X)),
     lambda: (X64.sum() * 2, np.full(3, 2.0))),
    ("jacrev of identity", lambda: fg.jacrev(lambda a: a)(fnp.array(X)), lambda: np.eye(3)),
    ("jacfwd of identity", lambda: fg.jacfwd(lambda a: a)(fnp.array(X)), lambda: np.eye(3)),
    ("custom_vjp passing the seed", lambda: fg.grad(_passthrough)(fnp.array(S)), lambda: np.float64(1.0)),
    ("jit returning a constant", _jitted(lambda a: fnp.ones(3)), lambda: np.ones(3)),
    ("jit returning a view of a constant", _jitted(lambda a: fnp.arange(6.0).reshape(2, 3)[1]),
     lambda: np.arange(3.0, 6.0)),
    ("jit broadcasting a constant scalar", _jitted(lambda a: fnp.broadcast_to(fnp.array(2.0), (3,))),
     lambda: np.full(3, 2.0)),
    ("jit of grad of identity", (lambda j=fg.jit(fg.grad(lambda a: a)): lambda: j(fnp.array(S)))(),
     lambda: np.float64(1.0)),
    ("jit of grad of sum", _jitted(fg.grad(fnp.sum)), lambda: np.ones(3)),
    ("jit of zeros_like", _jitted(lambda a: fnp.zeros_like(a)), lambda: np.zeros(3)),
    ("jit fused output (recycled)", _jitted(lambda a: a * 2.0 + 1.0), lambda: X64 * 2 + 1),
    ("jit matmul output (recycled)", _jitted(lambda a: fnp.outer(a, a) @ fnp.ones((3, 3))),
     lambda: np.outer(X64, X64) @ np.ones((3, 3))),
    ("jit returning a literal", _jitted(lambda a: 3.0), lambda: np.float64(3.0)),
]


@fg.custom_vjp
def _passthrough(x):
    return x


def _passthrough_fwd(x):
    return x, None


def _passthrough_bwd(_, g):
    return (g,)   # hands the incoming cotangent -- the seed -- back as the gradient


_passthrough.defvjp(_passthrough_fwd, _passthrough_bwd)


@pytest.mark.parametrize("name, call, reference", _CASES, ids=[c[0] for c in _CASES])
def test_writing_through_a_result_never_changes_later_results(name, call, reference):
    expected = [np.asarray(r, np.float64) for r in (reference() if isinstance(reference(), tuple) else
                                                     (reference(),))]
    first = call()
    for got, want in zip(_leaves(first), expected):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    _vandalise(first)      # a library ignoring the read-only flag
    second = call()        # the first result is still alive: nothing may be shared with it
    for got, want in zip(_leaves(second), expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
    for a in _leaves(first):
        for b in _leaves(second):
            assert not np.shares_memory(a, b), name
    del first
    gc.collect()
    third = call()         # the first result dropped: its buffer may be reused, with right values
    for got, want in zip(_leaves(third), expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
    for a in _leaves(second):
        for b in _leaves(third):
            assert not np.shares_memory(a, b), name


def test_gradients_never_alias_the_seed_cache():
    g = fg.grad(lambda a: a)(fnp.array(S))
    h = fg.grad(fnp.sum)(fnp.array(X))
    for unit in _grad._UNITS.values():
        assert not np.shares_memory(np.asarray(g), unit) and not np.shares_memory(np.asarray(h), unit)


def test_jit_returning_its_input_leaves_other_calls_alone():
    f = fg.jit(lambda a: a)
    x, y = fnp.array(X), fnp.array(X * 5)
    out_x = f(x)
    _vandalise(out_x)   # may be the caller's own x (as in eager mode): never anything of funcgrad's
    np.testing.assert_array_equal(np.asarray(f(y)), X * 5)
    assert not np.shares_memory(np.asarray(f(y)), np.asarray(out_x))
    z = fnp.array(X)
    np.testing.assert_array_equal(np.asarray(f(z)), X)


def test_a_live_view_of_a_result_keeps_its_buffer_from_reuse():
    f = fg.jit(lambda a: a * 2.0 + 1.0)
    view = np.asarray(f(fnp.array(X)))[1:]   # the Array is gone, a numpy view of it lives
    gc.collect()
    expected = (X64 * 2 + 1)[1:]
    for _ in range(3):
        out = f(fnp.array(X * 3))
        assert not np.shares_memory(np.asarray(out), view)
        np.testing.assert_allclose(view, expected, rtol=1e-6)


# ------------------------------------------------------------------ buffer budget


def _matmul_program(n: int):
    """Arguments for a jitted matmul whose (n, 256) float32 output is a recycled buffer (no numba compile)."""
    return fnp.ones((n, 64)), fnp.ones((64, 256))


@pytest.mark.filterwarnings("ignore::funcgrad.RetraceWarning")
def test_buffer_pool_bytes_stay_within_the_budget_after_results_are_dropped():
    budget = 8 << 20
    f = fg.jit(lambda a, b: a @ b)   # outputs of 1 MiB and more at each of 24 shapes: 24+ MiB unbounded
    with config_set("buffer_pool_max_bytes", budget):
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for i in range(24):
                a, b = _matmul_program(1024 + 8 * i)
                out = f(a, b)
                np.testing.assert_array_equal(np.asarray(out)[:2, :2], np.full((2, 2), 64.0))
                del out, a, b
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        assert program_mod.pool_bytes() <= budget
        assert held <= budget + (2 << 20), held   # what funcgrad still holds, measured by numpy's allocator
        f.clear_cache()
        assert program_mod.pool_bytes() == 0


def test_evicted_programs_give_their_buffers_back():
    f = fg.jit(lambda a, b: a @ b, cache_size=2)
    programs = []   # held here, so only an explicit release frees their buffers
    for n in (256, 264, 272, 280, 288):
        out = f(*_matmul_program(n))
        programs += [p for p, _ in f._cache.values() if p not in programs]
        del out
    kept = [p for p, _ in f._cache.values()]
    assert len(programs) == 5 and len(kept) == 2
    for p in programs:
        held = sum(buf.nbytes for pool in p.recycled.values() for buf in pool)
        counted = program_mod._POOL.held.get(id(p), [None, 0])[1]
        assert held == counted == ((p.jaxpr.outvars[0].aval.shape[0] * 256 * 4) if p in kept else 0)


def test_a_program_larger_than_the_budget_still_recycles_its_outputs():
    f = fg.jit(lambda a, b: a @ b)
    with config_set("buffer_pool_max_bytes", 1 << 20):   # smaller than the 2 MiB output
        out = f(*_matmul_program(2048))
        address = np.asarray(out).__array_interface__["data"][0]
        del out
        again = f(*_matmul_program(2048))
        assert np.asarray(again).__array_interface__["data"][0] == address
        np.testing.assert_array_equal(np.asarray(again)[-1, :3], np.full(3, 64.0))


# ------------------------------------------------------------------ creation builds in the final dtype

_N = 8 << 20   # 32 MiB of float32


@pytest.mark.parametrize("name, make, reference", [
    ("ones", lambda like: fnp.ones(_N), lambda: np.ones(_N)),
    ("zeros", lambda like: fnp.zeros(_N), lambda: np.zeros(_N)),
    ("full", lambda like: fnp.full(_N, 2.5), lambda: np.full(_N, 2.5)),
    ("full int32", lambda like: fnp.full(_N, 7, dtype=np.int32), lambda: np.full(_N, 7)),
    ("ones asked in float64", lambda like: fnp.ones(_N, dtype=np.float64), lambda: np.ones(_N)),
    ("ones_like", lambda like: fnp.ones_like(like), lambda: np.ones(_N)),
    ("zeros_like", lambda like: fnp.zeros_like(like), lambda: np.zeros(_N)),
    ("full_like", lambda like: fnp.full_like(like, -3.0), lambda: np.full(_N, -3.0)),
    ("arange int", lambda like: fnp.arange(_N), lambda: np.arange(_N)),
    ("eye", lambda like: fnp.eye(2896), lambda: np.eye(2896)),
], ids=["ones", "zeros", "full", "full-int32", "ones-float64", "ones_like", "zeros_like", "full_like",
        "arange-int", "eye"])
def test_creation_peaks_at_the_result_size(name, make, reference, x32):
    like = fnp.ones(_N) if name.endswith("_like") else None   # made before the measured window
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = make(like)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    value = np.asarray(out)
    assert peak <= 1.1 * value.nbytes, (name, peak / value.nbytes)
    want = reference()
    assert value.shape == want.shape and value.dtype.itemsize == 4
    np.testing.assert_array_equal(value[:5], want[:5].astype(value.dtype))
    np.testing.assert_array_equal(value[-5:], want[-5:].astype(value.dtype))
    del out, value


def test_creation_values_and_dtypes_match_numpy(x32):
    assert np.asarray(fnp.full(3, -0.0)).tobytes() == np.full(3, -0.0, np.float32).tobytes()
    np.testing.assert_array_equal(np.asarray(fnp.full((2, 2), [1.5, 2.5])), np.full((2, 2), [1.5, 2.5]))
    assert fnp.ones(2, dtype=bool).dtype == np.bool_ and np.asarray(fnp.ones(2, dtype=bool)).all()
    assert fnp.full(2, 3).dtype == np.int32 and fnp.zeros_like(fnp.ones(2, dtype=np.int32)).dtype == np.int32
    for args, kwargs in [((10,), {"step": 3}), ((2, 7), {}), ((5, 0, -2), {}), ((0,), {}), ((-3,), {})]:
        np.testing.assert_array_equal(np.asarray(fnp.arange(*args, **kwargs)), np.arange(*args, **kwargs))
    assert fnp.arange(5, dtype=np.uint8).dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(fnp.eye(3, 4, 1, dtype=np.int32)), np.eye(3, 4, 1))


def test_creation_values_that_do_not_fit_raise(x32):
    with pytest.raises(OverflowError, match=r"full: fill value 1099511627776 does not fit in int32"):
        fnp.full(3, 2 ** 40)
    with pytest.raises(OverflowError, match=r"arange.*do not fit in int32"):
        fnp.arange(0, 2 ** 40, 2 ** 38)
