"""Devices, transfers, the GPU array path (with a numpy stand-in for CuPy) and DLPack.

No GPU here: the GPU backend's logic (dispatch, device checks, fallback,
transfers, grad/jit on device arrays) runs against ``FakeCupy``, a numpy-
backed module whose device arrays are a distinct ndarray subclass. That
checks funcgrad's side, not CuPy; tests marked ``gpu`` repeat the core of
it on a real GPU when one is detected.
"""
from __future__ import annotations

import inspect
import types
import warnings

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _core
from funcgrad.backends.gpu import _detect
from funcgrad.backends.gpu import array as gpu_array
from funcgrad.backends.gpu.cupy_impls import UFUNC_PRIMITIVES, make_impls

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


class FakeDeviceArray(np.ndarray):
    """A "device" buffer: a distinct type, so host values leaking in show up."""


def _fake_cupy() -> types.SimpleNamespace:
    ns = {k: getattr(np, k) for k in dir(np) if not k.startswith("_")}

    def asarray(a, dtype=None):
        if isinstance(a, FakeDeviceArray) and (dtype is None or a.dtype == dtype):
            return a
        return np.array(a, dtype=dtype, copy=True).view(FakeDeviceArray)

    def array(a, dtype=None, copy=True):
        return np.array(a, dtype=dtype, copy=True).view(FakeDeviceArray)

    def asnumpy(a):
        assert isinstance(a, FakeDeviceArray), f"asnumpy of a host value {type(a)}"
        return np.array(a).view(np.ndarray)

    ns.update(ndarray=FakeDeviceArray, asarray=asarray, array=array, asnumpy=asnumpy)
    return types.SimpleNamespace(**ns)


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setattr(_detect, "gpu_available", lambda: True)
    gpu_array._use_array_module(_fake_cupy(), use_triton=False)
    yield
    gpu_array._use_array_module(None)


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


def test_fake_gpu_mixing_devices_is_an_error_naming_both(fake_gpu):
    g = fg.device_put(fnp.ones(3), "gpu")
    with pytest.raises(ValueError, match=r"add: arguments live on different devices: f32\[3\] on 'gpu' "
                                         r"and f32\[3\] on 'cpu'"):
        g + fnp.ones(3)
    with pytest.raises(ValueError, match="matmul: .*'gpu'.*'cpu'"):
        fnp.ones((2, 3)) @ fg.device_put(fnp.ones((3, 2)), "gpu")
    # user numpy arrays are host data too
    with pytest.raises(ValueError, match="different devices"):
        g + np.arange(3, dtype=np.float32)
    # Python scalars and 0-d host arrays travel along (as gradient seeds do)
    out = g * 2 + fnp.array(1.0) + fg.device_put(np.arange(3, dtype=np.float32), "gpu")
    assert out.device == "gpu"
    np.testing.assert_allclose(np.asarray(fg.device_put(out, "cpu")), [3, 4, 5])


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


def test_fake_gpu_missing_primitive_falls_back_to_host_with_one_warning(fake_gpu):
    g = fg.device_put(fnp.arange(6.0), "gpu")
    with pytest.warns(RuntimeWarning, match="'getitem' has no GPU implementation"):
        y = g[1:4]
    assert y.device == "gpu"
    np.testing.assert_array_equal(np.asarray(fg.device_put(y, "cpu")), [1, 2, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g[2:3]  # warned once per primitive


def test_fake_gpu_impl_errors_name_the_primitive(fake_gpu):
    g = fg.device_put(fnp.ones((2, 3)), "gpu")
    with pytest.raises(ValueError, match="matmul"):
        g @ g


# --------------------------------------------------------------------------
# the CuPy impl table, built over numpy, vs the reference implementations
# --------------------------------------------------------------------------


def _all_primitives() -> dict[str, _core.Primitive]:
    import importlib
    import pkgutil

    import funcgrad.primitives as pkg
    found = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"funcgrad.primitives.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, _core.Primitive):
                found[obj.name] = obj
    return found


def test_impl_table_names_real_primitives():
    prims = _all_primitives()
    table = make_impls(np)
    unknown = sorted(set(table) - set(prims))
    assert not unknown, f"impl table entries with no primitive of that name: {unknown}"
    for name, ufunc in UFUNC_PRIMITIVES.items():
        assert prims[name].impl is getattr(np, ufunc) or name in ("round",), name


_R = np.random.default_rng(0)
_X = _R.standard_normal((3, 4)).astype(np.float32)
_Y = _R.standard_normal((3, 4)).astype(np.float32)
_H = _R.standard_normal((5, 3)).astype(np.float16)
_L = np.array([0, 3, 1], np.int32)
_U = np.array([1, 2 ** 31, 7], np.uint32)
IMPL_CASES = [
    ("add", (_X, _Y), {}), ("pow", (np.abs(_X), _Y), {}), ("mod", (_X, 0.7), {}), ("logistic", (_X,), {}),
    ("round", (_X * 3,), {}), ("select", (_X > 0, _X, _Y), {}),
    ("convert_element_type", (_X, np.dtype(np.float16)), {}), ("stop_gradient", (_X,), {}),
    ("reduce_sum", (_X,), {"axes": (0,)}), ("reduce_sum", (_H,), {"axes": (0, 1)}),
    ("reduce_max", (_X,), {"axes": (1,)}), ("reduce_min", (_X,), {"axes": (0, 1)}),
    ("reduce_prod", (_X,), {"axes": (1,)}), ("argmax", (_X,), {"axis": 1}), ("argmin", (_X,), {"axis": 0}),
    ("cumsum", (_X,), {"axis": 1, "reverse": True}), ("cumsum", (_H,), {"axis": 0, "reverse": False}),
    ("matmul", (_X, _Y.T), {}), ("einsum", (_X, _Y), {"spec": "ij,ij->i"}),
    ("reshape", (_X,), {"shape": (4, 3)}), ("transpose", (_X,), {"perm": (1, 0)}),
    ("broadcast_to", (_X[0],), {"shape": (2, 4)}), ("concatenate", (_X, _Y), {"axis": 0}),
    ("pad", (_X,), {"widths": ((1, 0), (0, 2)), "value": 0.5}), ("flip", (_X,), {"axes": (1,)}),
    ("bitcast_convert_type", (_X,), {"dtype": np.dtype(np.uint32)}),
    ("shift_right_logical", (_U, np.uint32(3)), {}), ("shift_left", (_U, np.uint32(33)), {}),
    ("softmax", (_X,), {}), ("log_softmax", (_X,), {}), ("logsumexp", (_X,), {}),
    ("softmax_grad", (_X, _Y), {}), ("log_softmax_grad", (_X, _Y), {}),
    ("softmax_cross_entropy", (_X, _L), {}), ("softmax_cross_entropy_grad", (_X, _L, _Y[:, 0]), {}),
]


@pytest.mark.parametrize("name,args,params", IMPL_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(IMPL_CASES)])
def test_impl_table_matches_reference(name, args, params):
    prim = _all_primitives()[name]
    want = np.asarray(prim.impl(*args, **params))
    got = np.asarray(make_impls(np)[name](*args, **params))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-6, atol=1e-6)


def test_impl_table_covers_every_ufunc_primitive():
    prims = _all_primitives()
    ufunc_prims = {n for n, p in prims.items() if isinstance(p.impl, np.ufunc)}
    assert ufunc_prims <= set(make_impls(np)), sorted(ufunc_prims - set(make_impls(np)))


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
        gx + x
    back = np.from_dlpack(fg.device_put(fg.from_dlpack(gx), "cpu"), copy=False)
    np.testing.assert_array_equal(back, np.asarray(x))
