"""Devices, transfers, the GPU array path (with a numpy stand-in for CuPy) and DLPack.

No GPU here: the GPU backend's logic (dispatch, device checks, missing
implementations and host fallback, transfers, grad/jit on device arrays)
runs against a numpy stand-in for CuPy (``tests/gpu_standin.py``) whose
device arrays are a distinct ndarray subclass. That
checks funcgrad's side, not CuPy; tests marked ``gpu`` repeat the core of
it on a real GPU when one is detected.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _config, _core, _dtypes
from funcgrad.backends.gpu import _detect
from funcgrad.backends.gpu.impls import UFUNCS
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import indexing as I
from funcgrad.primitives import linalg as L
from funcgrad.primitives import random_bits as RB
from funcgrad.primitives import reduce as R
from funcgrad.primitives import shape as S
from funcgrad.primitives import softmax as SM
from funcgrad.primitives.indexing import getitem_p
from gpu_standin import FakeDeviceArray, gpu_standin

NO_GPU = not _detect.gpu_available()

# --------------------------------------------------------------------------
# devices without a GPU
# --------------------------------------------------------------------------


@pytest.mark.skipif(not NO_GPU, reason="a GPU is present")
def test_devices_without_gpu(monkeypatch):
    monkeypatch.delenv("FUNCGRAD_DEVICE", raising=False)
    assert fg.devices() == ["cpu"]
    assert fg.default_device() == "cpu"
    x = fnp.arange(3.0)
    assert x.device == "cpu"
    with pytest.raises(RuntimeError, match="no usable GPU: ") as info:
        fg.device_put(x, "gpu")
    assert _detect.gpu_unavailable_reason() in str(info.value)
    with pytest.raises(RuntimeError, match="no usable GPU"):
        fg.set_default_device("gpu")
    monkeypatch.setenv("FUNCGRAD_DEVICE", "gpu")
    with pytest.raises(RuntimeError, match="no usable GPU.*FUNCGRAD_DEVICE=gpu"):
        fg.default_device()
    monkeypatch.setenv("FUNCGRAD_DEVICE", "tpu")
    with pytest.raises(ValueError, match="FUNCGRAD_DEVICE: unknown device 'tpu'"):
        fg.default_device()


def test_device_put_to_cpu_and_errors():
    x = fnp.arange(3.0)
    assert fg.device_put(x, "cpu") is x
    tree = fg.device_put({"a": np.ones(2), "b": [1.5]}, "cpu")
    assert tree["a"].device == "cpu" and tree["a"].dtype == np.float32
    with pytest.raises(ValueError, match="unknown device"):
        fg.device_put(x, "tpu")
    with pytest.raises(TypeError, match="inside a transform"):
        fg.jit(lambda v: fg.device_put(v, "cpu"))(x)
    with pytest.raises(TypeError, match="inside a transform"):
        fg.grad(lambda v: fnp.sum(fg.device_put(v, "cpu")))(x)


def test_detection_never_raises_and_reason_is_text():
    assert isinstance(_detect.gpu_available(), bool)
    assert isinstance(_detect.gpu_unavailable_reason(), str)


# --------------------------------------------------------------------------
# the GPU path with a numpy stand-in for CuPy
# --------------------------------------------------------------------------


@pytest.fixture
def fake_gpu():
    with gpu_standin(use_triton=False):
        yield


def test_fake_gpu_round_trip_and_ops_stay_on_device(fake_gpu):
    assert fg.devices() == ["cpu", "gpu"]
    x = fnp.array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    g = fg.device_put(x, "gpu")
    assert g.device == "gpu" and isinstance(g._value, FakeDeviceArray) and g.shape == (2, 3)
    y = fnp.sum(fnp.sin(g) * 2.0, axis=1)
    assert y.device == "gpu" and isinstance(y._value, FakeDeviceArray)
    np.testing.assert_allclose(np.asarray(fg.device_put(y, "cpu")), np.sum(np.sin(np.asarray(x)) * 2, 1), rtol=1e-6)
    back = fg.device_put(g, "cpu")
    assert type(back) is fg.Array and not back._value.flags.writeable
    assert "device='gpu'" in repr(g) and float(fnp.sum(g)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(TypeError, match="implicit transfer"):
        np.asarray(g)


def test_fake_gpu_uncommitted_host_data_moves_and_committed_raises(fake_gpu):
    g = fg.device_put(fnp.array([1.0, 2.0, 3.0]), "gpu")
    # host data nobody placed (funcgrad arrays, numpy arrays, scalars) moves to the GPU, as in JAX
    for host in (fnp.array([10.0, 20.0, 30.0]), np.array([10.0, 20.0, 30.0], np.float32)):
        out = g + host
        assert out.device == "gpu" and isinstance(out._value, FakeDeviceArray)
        np.testing.assert_array_equal(np.asarray(fg.device_put(out, "cpu")), [11.0, 22.0, 33.0])
    out = fnp.ones((2, 3)) @ fg.device_put(fnp.ones((3, 2)), "gpu")
    assert out.device == "gpu"
    np.testing.assert_array_equal(np.asarray(fg.device_put(out, "cpu")), np.full((2, 2), 3.0))
    # arrays placed on the CPU with device_put are committed there: mixing raises, naming both
    c = fg.device_put(fnp.ones(3), "cpu")
    with pytest.raises(ValueError, match=r"add: arguments live on different devices: f32\[3\] on 'gpu' "
                                         r"and f32\[3\] on 'cpu' \(placed there with fg.device_put\)"):
        g + c
    with pytest.raises(ValueError, match="matmul: .*'gpu'.*'cpu'"):
        fg.device_put(fnp.ones((2, 3)), "cpu") @ fg.device_put(fnp.ones((3, 2)), "gpu")
    back = fg.device_put(g, "cpu")             # a transfer back is committed too
    with pytest.raises(ValueError, match="different devices"):
        back * g
    # the commitment belongs to the buffer device_put returned, not to results computed from it
    np.testing.assert_array_equal(np.asarray(fg.device_put(g + c * 1.0, "cpu")), [2.0, 3.0, 4.0])


def test_fake_gpu_grad_vmap_and_jit(fake_gpu):
    x = fnp.array(np.linspace(0.1, 2, 5, dtype=np.float32))
    f = lambda v: fnp.sum(fnp.tanh(v) * v ** 2)  # noqa: E731
    g_cpu = fg.grad(f)(x)
    gx = fg.device_put(x, "gpu")
    g_gpu = fg.grad(f)(gx)
    assert g_gpu.device == "gpu"
    np.testing.assert_allclose(np.asarray(fg.device_put(g_gpu, "cpu")), np.asarray(g_cpu), rtol=1e-6)
    j = fg.jit(fg.grad(f))(gx)
    assert j.device == "gpu"
    np.testing.assert_allclose(np.asarray(fg.device_put(j, "cpu")), np.asarray(g_cpu), rtol=1e-6)
    v = fg.vmap(lambda r: fnp.sum(r * r))(fg.device_put(fnp.ones((2, 3)), "gpu"))
    assert v.device == "gpu"


@pytest.fixture
def no_gpu_getitem(monkeypatch):
    """getitem without its GPU implementation: the example of a primitive that has none."""
    monkeypatch.delitem(getitem_p.impls, "gpu")


def test_fake_gpu_missing_primitive_is_an_error_naming_it_and_the_fixes(fake_gpu, no_gpu_getitem):
    assert "gpu" not in getitem_p.impls   # (a primitive with no GPU implementation)
    g = fg.device_put(fnp.arange(6.0), "gpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no silent host copy, and no warning either: an error
        with pytest.raises(NotImplementedError, match=r"getitem: no GPU implementation for \(f32\[6\]") as info:
            g[1:4]
    message = str(info.value)
    assert "fg.device_put(x, 'cpu')" in message and "gpu_host_fallback" in message
    assert "FUNCGRAD_GPU_HOST_FALLBACK=1" in message


def test_fake_gpu_host_fallback_runs_on_host_copies_with_one_warning(fake_gpu, no_gpu_getitem):
    g = fg.device_put(fnp.arange(6.0), "gpu")
    fg.config.update("gpu_host_fallback", True)
    try:
        with pytest.warns(RuntimeWarning, match="'getitem' has no GPU implementation"):
            y = g[1:4]
        assert y.device == "gpu" and isinstance(y._value, FakeDeviceArray)
        np.testing.assert_array_equal(np.asarray(fg.device_put(y, "cpu")), [1, 2, 3])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            g[2:3]  # warned once per primitive
    finally:
        fg.config.update("gpu_host_fallback", False)
    with pytest.raises(NotImplementedError, match="getitem"):
        g[2:3]   # switched off again: an error


def test_gpu_host_fallback_reads_its_environment_variable(monkeypatch):
    monkeypatch.setenv("FUNCGRAD_GPU_HOST_FALLBACK", "1")
    assert _config._Config().gpu_host_fallback is True
    monkeypatch.delenv("FUNCGRAD_GPU_HOST_FALLBACK")
    assert _config._Config().gpu_host_fallback is False


def test_fake_gpu_impl_errors_name_the_primitive(fake_gpu):
    g = fg.device_put(fnp.ones((2, 3)), "gpu")
    with pytest.raises(ValueError, match="matmul"):
        g @ g


def test_fake_gpu_dlpack_export_and_import(fake_gpu):
    g = fg.device_put(fnp.arange(4.0), "gpu")
    exported = np.from_dlpack(g)   # zero-copy through the device library
    assert np.shares_memory(exported, g._value)
    cuda_buffer = _CudaProducer(np.arange(3, dtype=np.float32))
    imported = fg.from_dlpack(cuda_buffer)
    assert imported.device == "gpu" and isinstance(imported._value, FakeDeviceArray)
    np.testing.assert_array_equal(np.asarray(fg.device_put(imported, "cpu")), [0, 1, 2])


def test_from_dlpack_of_a_gpu_buffer_needs_a_gpu_and_unknown_devices_are_refused(monkeypatch):
    monkeypatch.setattr(_detect, "gpu_available", lambda: False)
    with pytest.raises(RuntimeError, match="no usable GPU"):
        fg.from_dlpack(_CudaProducer(np.arange(3, dtype=np.float32)))
    with pytest.raises(BufferError, match="device type 4 is not supported"):
        fg.from_dlpack(_CudaProducer(np.arange(3, dtype=np.float32), device_type=4))


class _CudaProducer:
    """A DLPack producer that reports CUDA memory (its capsule is numpy's)."""

    def __init__(self, host, device_type=2):
        self.host, self.device_type = host, device_type

    def __dlpack__(self, **kw):
        return self.host.__dlpack__(**kw)

    def __dlpack_device__(self):
        return (self.device_type, 0)


# --------------------------------------------------------------------------
# the GPU implementations, over the stand-in, vs the reference implementations
# --------------------------------------------------------------------------


def _all_primitives() -> list[_core.Primitive]:
    import importlib
    import pkgutil

    import funcgrad.primitives as pkg
    found = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"funcgrad.primitives.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, _core.Primitive):
                found[id(obj)] = obj
    return list(found.values())


def _reference(prim: _core.Primitive):
    return prim.impls.get("reference", prim.impl)


def test_ufunc_implementations_are_the_references_ufuncs():
    for prim, name in UFUNCS.items():
        assert _reference(prim) is getattr(np, name), prim.name


def test_every_ufunc_primitive_has_a_gpu_implementation():
    fg.devices()   # discovers the backends
    ufunc_prims = [p for p in _all_primitives() if isinstance(_reference(p), np.ufunc)]
    assert len(ufunc_prims) > 10 and sorted(p.name for p in ufunc_prims if "gpu" not in p.impls) == []


_R = np.random.default_rng(0)
_X = _R.standard_normal((3, 4)).astype(np.float32)
_Y = _R.standard_normal((3, 4)).astype(np.float32)
_H = _R.standard_normal((5, 3)).astype(np.float16)
_L = np.array([0, 3, 1], np.int32)
_U = np.array([1, 2 ** 31, 7], np.uint32)
IMPL_CASES = [
    (E.add_p, (_X, _Y), {}), (E.pow_p, (np.abs(_X), _Y), {}), (E.mod_p, (_X, 0.7), {}), (E.logistic_p, (_X,), {}),
    (E.round_p, (_X * 3,), {}), (E.select_p, (_X > 0, _X, _Y), {}),
    (E.convert_p, (_X,), {"dtype": np.dtype(np.float16)}), (E.stop_gradient_p, (_X,), {}),
    (S.reduce_sum_p, (_X,), {"axes": (0,)}), (S.reduce_sum_p, (_H,), {"axes": (0, 1)}),
    (R.reduce_max_p, (_X,), {"axes": (1,)}), (R.reduce_min_p, (_X,), {"axes": (0, 1)}),
    (R.reduce_prod_p, (_X,), {"axes": (1,)}), (R.argmax_p, (_X,), {"axis": 1}), (R.argmin_p, (_X,), {"axis": 0}),
    (R.cumsum_p, (_X,), {"axis": 1, "reverse": True}), (R.cumsum_p, (_H,), {"axis": 0, "reverse": False}),
    (L.matmul_p, (_X, _Y.T), {}), (L.einsum_p, (_X, _Y), {"spec": "ij,ij->i"}),
    (S.reshape_p, (_X,), {"shape": (4, 3)}), (S.transpose_p, (_X,), {"perm": (1, 0)}),
    (S.broadcast_to_p, (_X[0],), {"shape": (2, 4)}), (I.concatenate_p, (_X, _Y), {"axis": 0}),
    (I.pad_p, (_X,), {"widths": ((1, 0), (0, 2)), "value": 0.5}), (I.flip_p, (_X,), {"axes": (1,)}),
    (RB.bitcast_convert_type_p, (_X,), {"dtype": np.dtype(np.uint32)}),
    (RB.shift_right_logical_p, (_U, np.uint32(3)), {}), (RB.shift_left_p, (_U, np.uint32(33)), {}),
    (SM.softmax_p, (_X,), {}), (SM.log_softmax_p, (_X,), {}), (SM.logsumexp_p, (_X,), {}),
    (SM.softmax_grad_p, (_X, _Y), {}), (SM.log_softmax_grad_p, (_X, _Y), {}),
    (SM.softmax_cross_entropy_p, (_X, _L), {}), (SM.softmax_cross_entropy_grad_p, (_X, _L, _Y[:, 0]), {}),
]


@pytest.mark.parametrize("prim,args,params", IMPL_CASES, ids=[f"{c[0].name}-{i}" for i, c in enumerate(IMPL_CASES)])
def test_gpu_implementation_matches_reference(fake_gpu, prim, args, params):
    want = np.asarray(_reference(prim)(*args, **params))
    want = want.astype(_dtypes.canonicalize(want.dtype))   # as eager evaluation stores it
    device_args = [fg.device_put(a, "gpu") if isinstance(a, np.ndarray) and a.ndim else a for a in args]
    got = _core.apply_primitive(prim, device_args, params)   # the GPU implementation, on device buffers
    assert got.device == "gpu" and isinstance(got._value, FakeDeviceArray)
    got = np.asarray(fg.device_put(got, "cpu"))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-6, atol=1e-6)


# --------------------------------------------------------------------------
# DLPack on the CPU
# --------------------------------------------------------------------------


def test_dlpack_export_to_numpy_without_copy_is_zero_copy_and_read_only():
    x = fnp.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.__dlpack_device__() == (1, 0)
    y = np.from_dlpack(x, copy=False)
    assert np.shares_memory(y, x._value) and not y.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        y[0, 0] = 1.0
    np.testing.assert_array_equal(y, np.asarray(x))


def test_dlpack_default_export_is_a_private_copy():
    x = fnp.arange(4.0)
    y = np.from_dlpack(x)
    assert not np.shares_memory(y, x._value)
    np.testing.assert_array_equal(y, np.asarray(x))


class _LegacyConsumerView:
    """A producer wrapper that drops max_version: what a pre-DLPack-1.0 consumer asks for."""

    def __init__(self, x, copy=None):
        self.x, self.copy = x, copy

    def __dlpack__(self, **kw):
        return self.x.__dlpack__(copy=self.copy) if self.copy is not None else self.x.__dlpack__()

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_dlpack_legacy_consumer_gets_a_copy_and_cannot_refuse_one():
    x = fnp.arange(4.0)
    y = np.from_dlpack(_LegacyConsumerView(x))
    assert not np.shares_memory(y, x._value)
    np.testing.assert_array_equal(y, [0, 1, 2, 3])
    with pytest.raises(BufferError, match="read-only"):
        np.from_dlpack(_LegacyConsumerView(x, copy=False))


def test_from_dlpack_numpy_round_trip_shares_memory():
    src = np.arange(6, dtype=np.float32).reshape(3, 2)
    x = fg.from_dlpack(src)
    assert x.shape == (3, 2) and x.dtype == np.float32 and x.device == "cpu"
    assert np.shares_memory(x._value, src) and not x._value.flags.writeable
    assert src.flags.writeable  # the producer's own array is not changed
    back = np.from_dlpack(x, copy=False)
    assert np.shares_memory(back, src) and not back.flags.writeable
    assert float(fnp.sum(x * 2)) == 30.0
    copied = fg.from_dlpack(src, copy=True)
    assert not np.shares_memory(copied._value, src)


def test_from_dlpack_narrows_64_bit_and_rejects_non_producers():
    x = fg.from_dlpack(np.arange(3, dtype=np.float64))
    assert x.dtype == np.float32
    with pytest.raises(BufferError, match="copy=False"):
        fg.from_dlpack(np.arange(3, dtype=np.float64), copy=False)
    with pytest.raises(TypeError, match="DLPack protocol"):
        fg.from_dlpack([1, 2, 3])


def test_array_dlpack_signature_follows_the_standard():
    params = inspect.signature(fg.Array.__dlpack__).parameters
    assert [p for p in params if p != "self"] == ["stream", "max_version", "dl_device", "copy"]


def test_torch_dlpack_exchange():
    torch = pytest.importorskip("torch")
    x = fnp.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    t = torch.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), np.asarray(x))
    t[0, 0] = 100.0  # torch ignores DLPack's read-only flag: funcgrad must have exported a copy
    assert float(x[0, 0]) == 0.0
    src = torch.arange(4, dtype=torch.float32)
    y = fg.from_dlpack(src)
    assert y.dtype == np.float32 and np.asarray(y).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert y._value.ctypes.data == src.data_ptr()  # zero-copy import


# --------------------------------------------------------------------------
# real GPU
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(NO_GPU, reason="no usable GPU detected")
def test_real_gpu_round_trip_grad_and_mixing():
    x = fnp.array(np.linspace(0.1, 2, 7, dtype=np.float32))
    f = lambda v: fnp.sum(fnp.tanh(v) * v ** 2)  # noqa: E731
    gx = fg.device_put(x, "gpu")
    assert fg.devices() == ["cpu", "gpu"] and gx.device == "gpu"
    g = fg.grad(f)(gx)
    np.testing.assert_allclose(np.asarray(fg.device_put(g, "cpu")), np.asarray(fg.grad(f)(x)), rtol=1e-5)
    with pytest.raises(ValueError, match="different devices"):
        gx + fg.device_put(x, "cpu")
    np.testing.assert_allclose(np.asarray(fg.device_put(gx + x, "cpu")), 2 * np.asarray(x))
    back = np.from_dlpack(fg.device_put(fg.from_dlpack(gx), "cpu"), copy=False)
    np.testing.assert_array_equal(back, np.asarray(x))
