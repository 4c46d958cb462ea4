"""Linear algebra, FFT, callbacks and collectives on GPU arrays (funcgrad/backends/gpu/impls_linalg.py).

CI has no GPU: each check runs over the numpy stand-in for CuPy (``gpu_standin``), through the
public functions and through grad/vjp, against float64 numpy/scipy references and finite
differences of those references. ``test_real_gpu`` runs the same checks on real CuPy.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.numpy as fnp
from funcgrad import lax
from funcgrad.backends.gpu import _detect
from funcgrad.primitives import collectives_async as CA
from funcgrad.primitives import matrix_functions as MF
from gpu_standin import gpu_standin

rng = np.random.default_rng(7)


def dev(x):
    return fg.device_put(fnp.asarray(x), "gpu")


def host(y):
    assert y.device == "gpu", f"expected a GPU array, got {type(y)}"
    return np.asarray(fg.device_put(y, "cpu"))


def close(y, ref, rtol=2e-4, atol=2e-5, dtype=None):
    got = host(y)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind == "c" else np.float64), ref,
                               rtol=rtol, atol=atol)


def fd_check(f_dev, f_ref, x, rtol=2e-3):
    """grad of ``f_dev`` on the GPU (float32) against central differences of the float64 reference
    ``f_ref`` along two random directions."""
    g = host(fg.grad(f_dev)(dev(x.astype(np.float32)))).astype(np.float64)
    for _ in range(2):
        v = rng.standard_normal(x.shape)
        h = 1e-6
        fd = (f_ref(x + h * v) - f_ref(x - h * v)) / (2 * h)
        np.testing.assert_allclose(np.sum(g * v), fd, rtol=rtol, atol=rtol)


def spd(*batch, n=3):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def host_fallback():
    """Primitives of other modules that a few backward rules bind (getitem) may lack a GPU
    implementation: let those run on host copies, without the warning."""
    class Ctx:
        def __enter__(self):
            self.saved = fg.config.gpu_host_fallback
            fg.config.update("gpu_host_fallback", True)
            self.w = warnings.catch_warnings()
            self.w.__enter__()
            warnings.simplefilter("ignore", RuntimeWarning)

        def __exit__(self, *exc):
            self.w.__exit__(*exc)
            fg.config.update("gpu_host_fallback", self.saved)
    return Ctx()


# ---------------------------------------------------------------- checks (shared by the stand-in and the GPU)


def check_cholesky():
    a = spd(2)
    close(lax.linalg.cholesky(dev(a.astype(np.float32))), np.linalg.cholesky(a), dtype=np.float32)
    bad = a.copy()
    bad[1] = -np.eye(3)                          # not positive definite: NaN for that matrix alone
    out = host(lax.linalg.cholesky(dev(bad.astype(np.float32))))
    assert np.isnan(out[1]).all() and np.allclose(out[0], np.linalg.cholesky(a[0]), rtol=1e-4, atol=1e-5)
    close(lax.linalg.cholesky(dev(np.zeros((0, 2, 2), np.float32))), np.zeros((0, 2, 2)))
    w = rng.standard_normal((3, 3))
    fd_check(lambda x: fnp.sum(lax.linalg.cholesky(x) * dev(w)),
             lambda x: np.sum(np.linalg.cholesky((x + x.T) / 2) * w), spd())


def check_triangular_solve():
    a = np.tril(rng.standard_normal((3, 3))) + 3 * np.eye(3)
    b = rng.standard_normal((2, 3, 2))
    for lower, trans, unit in ((True, False, False), (False, True, False), (True, True, True)):
        m = np.tril(a) if lower else np.triu(a.T)
        if unit:
            m = m - np.diag(np.diag(m)) + np.eye(3)
        ref = np.linalg.solve(m.T if trans else m, b)
        src = a if lower else a.T
        out = lax.linalg.triangular_solve(dev(src.astype(np.float32)), dev(b.astype(np.float32)), left_side=True,
                                          lower=lower, transpose_a=trans, unit_diagonal=unit)
        close(out, ref, dtype=np.float32)
    bb = b[0]
    fd_check(lambda x: fnp.sum(lax.linalg.triangular_solve(x, dev(bb.astype(np.float32)), left_side=True,
                                                           lower=True) ** 2),
             lambda x: np.sum(np.linalg.solve(np.tril(x), bb) ** 2), a)


def check_lu():
    a = rng.standard_normal((2, 4, 4))
    lu_, piv, perm = lax.linalg.lu(dev(a.astype(np.float32)))
    for i in range(2):
        ref_lu, ref_piv = scipy.linalg.lu_factor(a[i])
        np.testing.assert_allclose(host(lu_)[i], ref_lu, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(host(piv)[i], ref_piv)
        p, low, up = scipy.linalg.lu(a[i])           # a = P L U, so a[perm] = L U
        np.testing.assert_allclose(a[i][host(perm)[i]], low @ up, rtol=1e-10, atol=1e-12)
    assert host(piv).dtype == np.int32 and host(perm).dtype == np.int32
    wide = rng.standard_normal((3, 5))
    np.testing.assert_allclose(host(lax.linalg.lu(dev(wide.astype(np.float32)))[0]),
                               scipy.linalg.lu_factor(wide)[0], rtol=1e-4, atol=1e-5)
    w = rng.standard_normal((4, 4))
    with host_fallback():
        fd_check(lambda x: fnp.sum(lax.linalg.lu(x)[0] * dev(w)), lambda x: np.sum(scipy.linalg.lu_factor(x)[0] * w),
                 a[0])


def check_qr():
    a = rng.standard_normal((2, 4, 3))
    for full in (False, True):
        q, r = lax.linalg.qr(dev(a.astype(np.float32)), full_matrices=full)
        q, r = host(q).astype(np.float64), host(r).astype(np.float64)
        k = 4 if full else 3
        assert q.shape == (2, 4, k) and r.shape == (2, k, 3)
        np.testing.assert_allclose(q @ r, a, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(k), (2, k, k)), atol=1e-5)
        np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-6)
        np.testing.assert_allclose(np.abs(r[:, :3]), np.abs(np.linalg.qr(a)[1]), rtol=1e-4, atol=1e-5)
    c1, c2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 3))
    # Q**2 and R**2 do not depend on the signs the solver picks for each column of Q / row of R.
    fd_check(lambda x: (lambda q, r: fnp.sum(q * q * dev(c1)) + fnp.sum(r * r * dev(c2)))(*lax.linalg.qr(x, full_matrices=False)),
             lambda x: (lambda q, r: np.sum(q * q * c1) + np.sum(r * r * c2))(*np.linalg.qr(x)), a[0])


def check_svd():
    a = rng.standard_normal((2, 4, 3))
    u, s, vt = lax.linalg.svd(dev(a.astype(np.float32)), full_matrices=False)
    ru, rs, rvt = np.linalg.svd(a, full_matrices=False)
    close(s, rs, dtype=np.float32)
    np.testing.assert_allclose(np.abs(host(u)), np.abs(ru), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose((host(u) * host(s)[:, None, :]) @ host(vt), a, rtol=1e-4, atol=1e-5)
    u, s, vt = lax.linalg.svd(dev(a.astype(np.float32)), full_matrices=True)
    assert host(u).shape == (2, 4, 4) and host(vt).shape == (2, 3, 3)
    close(lax.linalg.svd(dev(a.astype(np.float32)), compute_uv=False), rs)
    c = rng.standard_normal((4, 3))
    fd_check(lambda x: (lambda u, s, vt: fnp.sum(s) + fnp.sum(u * u * dev(c)))(*lax.linalg.svd(x, full_matrices=False)),
             lambda x: (lambda u, s, vt: np.sum(s) + np.sum(u * u * c))(*np.linalg.svd(x, full_matrices=False)),
             a[0])


def check_eigh():
    a = spd(2, n=4) - 2 * np.eye(4)
    v, w = lax.linalg.eigh(dev(a.astype(np.float32)))
    rw, rv = np.linalg.eigh(a)
    close(w, rw, dtype=np.float32)
    np.testing.assert_allclose(np.abs(host(v)), np.abs(rv), rtol=1e-3, atol=1e-4)
    c = rng.standard_normal((4, 4))
    fd_check(lambda x: (lambda v, w: fnp.sum(w * w) + fnp.sum(v * v * dev(c)))(*lax.linalg.eigh(x)),
             lambda x: (lambda w, v: np.sum(w * w) + np.sum(v * v * c))(*np.linalg.eigh((x + x.T) / 2)), a[0])


def check_expm():
    a = 0.5 * rng.standard_normal((2, 3, 3))
    close(lax.linalg.expm(dev(a.astype(np.float32))), scipy.linalg.expm(a), dtype=np.float32)
    # each matrix of a stack scaled and squared its own number of times (1-norms 0 to about 40)
    big = rng.standard_normal((3, 4, 4)) * np.array([0.0, 1.0, 8.0])[:, None, None]
    got, ref = host(lax.linalg.expm(dev(big.astype(np.float32)))), scipy.linalg.expm(big)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * np.abs(r).max())
    w = rng.standard_normal((3, 3))
    with host_fallback():
        fd_check(lambda x: fnp.sum(lax.linalg.expm(x) * dev(w)), lambda x: np.sum(scipy.linalg.expm(x) * w), a[0])


def check_host_decompositions():
    a = rng.standard_normal((2, 3, 3))
    w = host(fnp.linalg.eigvals(dev(a.astype(np.float32))))
    assert w.dtype == np.complex64
    for i in range(2):
        np.testing.assert_allclose(np.sort_complex(w[i]), np.sort_complex(np.linalg.eigvals(a[i])), rtol=1e-4,
                                   atol=1e-5)
    t, z = lax.linalg.schur(dev(a[0].astype(np.float32)))
    np.testing.assert_allclose(host(z) @ host(t) @ host(z).T, a[0], rtol=1e-4, atol=1e-5)
    h, q = fg.scipy.linalg.hessenberg(dev(a[0].astype(np.float32)), calc_q=True)
    np.testing.assert_allclose(host(q) @ host(h) @ host(q).T, a[0], rtol=1e-4, atol=1e-5)
    s = spd()
    close(fg.scipy.linalg.sqrtm(dev(s.astype(np.float32))), scipy.linalg.sqrtm(s), rtol=1e-3, atol=1e-4)
    tc, zc = fg.scipy.linalg.rsf2csf(t, z)
    np.testing.assert_allclose(host(zc) @ host(tc) @ host(zc).conj().T, a[0], rtol=1e-4, atol=1e-4)
    # Parlett's recurrence: exp of an upper-triangular matrix from the exp of its diagonal
    tri = np.triu(rng.standard_normal((3, 3))) + np.diag([0.0, 1.0, 2.0])
    f, _ = MF.parlett(dev(np.diag(np.exp(np.diag(tri))).astype(np.float32)), dev(tri.astype(np.float32)))
    close(f, scipy.linalg.expm(tri), rtol=1e-3, atol=1e-4)


def check_fft():
    z = (rng.standard_normal((2, 8)) + 1j * rng.standard_normal((2, 8))).astype(np.complex64)
    close(fnp.fft.fft(dev(z)), np.fft.fft(z.astype(np.complex128)), rtol=1e-4, atol=1e-4, dtype=np.complex64)
    close(fnp.fft.ifft(dev(z)), np.fft.ifft(z.astype(np.complex128)), rtol=1e-4, atol=1e-5, dtype=np.complex64)
    x = rng.standard_normal((3, 4, 6))
    close(fnp.fft.rfft2(dev(x.astype(np.float32))), np.fft.rfft2(x), rtol=1e-4, atol=1e-4, dtype=np.complex64)
    spec = np.fft.rfft(x)
    close(fnp.fft.irfft(dev(spec.astype(np.complex64)), n=6), x, rtol=1e-4, atol=1e-5, dtype=np.float32)
    ct = (rng.standard_normal((2, 8)) + 1j * rng.standard_normal((2, 8))).astype(np.complex64)
    _, back = fg.vjp(lambda v: lax.fft(v, "fft", (8,)), dev(z))
    close(back(dev(ct))[0], np.fft.fft(ct.astype(np.complex128)), rtol=1e-4, atol=1e-4)   # the DFT is symmetric


def check_callbacks():
    seen = []
    fg.debug.callback(lambda v: seen.append(v), dev(np.arange(3.0, dtype=np.float32)))
    assert len(seen) == 1 and type(seen[0]) is np.ndarray
    np.testing.assert_array_equal(seen[0], np.arange(3.0))
    out = fg.pure_callback(lambda v: np.sin(np.asarray(v, np.float64)).astype(np.float32),
                           fg.ShapeDtypeStruct((3,), np.float32), dev(np.arange(3.0, dtype=np.float32)))
    close(out, np.sin(np.arange(3.0)), dtype=np.float32)
    batched = fg.vmap(lambda v: fg.pure_callback(lambda u: np.asarray(u) * 2, fg.ShapeDtypeStruct((2,), np.float32),
                                                 v, vmap_method="expand_dims"))(dev(np.ones((3, 2), np.float32)))
    close(batched, np.full((3, 2), 2.0))
    close(fg.jit(lambda v: fg.pure_callback(np.cos, fg.ShapeDtypeStruct((3,), np.float32), v))(
        dev(np.arange(3.0, dtype=np.float32))), np.cos(np.arange(3.0)))


def check_collectives():
    x = rng.standard_normal((2, 3)).astype(np.float32)
    gx = dev(x)
    close(dist.psum(gx), x)
    close(dist.pmax(gx), x)
    close(dist.pmin(gx), x)
    close(dist.all_gather(gx), x[None])
    close(dist.all_gather(gx, tiled=True), x)
    close(dist.psum_scatter(dev(x[:1])), x[0])
    close(dist.all_to_all(dev(x[:1]), 0, 1), x[0][:, None])
    close(dist.ppermute(gx, [(0, 0)]), x)
    close(dist.broadcast(gx), x)
    close(fg.grad(lambda v: fnp.sum(dist.psum(v * v)))(gx), 2 * x)
    # vmap's named axis: the examples stand in for the devices (the batching rules, on device arrays)
    close(fg.vmap(lambda v: lax.psum(v, "i"), axis_name="i")(gx), np.broadcast_to(x.sum(0), x.shape))
    close(fg.vmap(lambda v: lax.all_gather(v, "i"), axis_name="i")(gx), np.broadcast_to(x, (2, 2, 3)))
    with pytest.raises(NameError, match="unbound axis name"):
        lax.psum(gx, "nope")
    # the data-parallel pieces: the scaled flat buffer, its completion, the bucket's cotangent
    buf = CA.allreduce_start_p.bind(gx, dev(x[0]), scale=0.5)
    close(CA.allreduce_done_p.bind(buf), 0.5 * np.concatenate([x.ravel(), x[0]]))
    _, back = fg.vjp(lambda v, slot: CA.bucket_p.bind(v, slot, scale=0.25)[0], gx, dev(np.zeros(6, np.float32)))
    close(back(gx)[1], 0.25 * x.ravel())


def check_empty():
    e = np.zeros((3, 0), np.float32)
    for full in (False, True):
        for got, ref in zip(lax.linalg.qr(dev(e), full_matrices=full), np.linalg.qr(e.astype(np.float64),
                                                                                 "complete" if full else "reduced")):
            close(got, ref)
        u, s, vt = lax.linalg.svd(dev(e), full_matrices=full)
        ru, rs, rvt = np.linalg.svd(e.astype(np.float64), full_matrices=full)
        close(u, ru), close(s, rs), close(vt, rvt)
    lu_, piv, perm = lax.linalg.lu(dev(np.zeros((2, 0, 3), np.float32)))
    assert host(lu_).shape == (2, 0, 3) and host(piv).shape == (2, 0) and host(perm).shape == (2, 0)
    w, v = fnp.linalg.eigh(dev(np.zeros((0, 0), np.float32)))
    assert host(w).shape == (0,) and host(v).shape == (0, 0)
    close(lax.linalg.triangular_solve(dev(np.eye(2, dtype=np.float32)), dev(np.zeros((2, 0), np.float32)),
                                      left_side=True, lower=True), np.zeros((2, 0)))


CHECKS = [check_empty, check_cholesky, check_triangular_solve, check_lu, check_qr, check_svd, check_eigh, check_expm,
          check_host_decompositions, check_fft, check_callbacks, check_collectives]


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__[6:] for c in CHECKS])
def test_on_the_standin(check):
    with gpu_standin(use_triton=False):
        check()


def test_fft_rejects_bad_input_on_the_gpu():
    with gpu_standin(use_triton=False):
        with pytest.raises(TypeError, match="fft: fft expects a complex operand"):
            lax.fft(dev(np.ones(4, np.float32)), "fft", (4,))


@pytest.mark.gpu
@pytest.mark.skipif(not _detect.gpu_available(), reason="no usable GPU detected")
def test_real_gpu():
    for check in CHECKS:
        check()


class _TwoProcesses:
    """A process world of two, seen from rank 0: the other rank holds the same values."""

    def __init__(self):
        self.seen = []

    def size(self):
        return 2

    def rank(self):
        return 0

    def run(self, prim, x, params, check):
        self.seen.append((prim.name, type(x)))
        return x + x if prim.name == "psum" else np.stack([x, x]) if prim.name == "all_gather" else x


class _FakeRequest:
    def __init__(self, buf):
        self.buf = buf

    def Test(self):
        return False

    def Wait(self):
        self.buf *= 3.0   # three processes with the same values


class _FakeComm:
    def Iallreduce(self, send, buf, op):
        return _FakeRequest(buf)


def test_collectives_across_processes_go_through_host_copies(monkeypatch):
    from funcgrad.primitives import collectives as CL
    world = _TwoProcesses()
    monkeypatch.setattr(CL, "_world", [world])
    monkeypatch.setattr(CA, "_communicator", [lambda: _FakeComm(), lambda request, what: request.Wait()])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    with gpu_standin(use_triton=False):
        close(dist.psum(dev(x)), 2 * x)
        close(dist.all_gather(dev(x)), np.stack([x, x]))
        assert world.seen == [("psum", np.ndarray), ("all_gather", np.ndarray)]   # the transport got host copies
        buf = CA.allreduce_start_p.bind(dev(x), scale=0.5)
        assert CA.pending_count() == 1
        close(CA.allreduce_done_p.bind(buf), 1.5 * x.ravel())
        assert CA.pending_count() == 0


def _fake_getrf(a_t, dtype):
    """CuPy's batched getrf as it works: it factors the column-major matrices of ``a_t``'s memory (the
    transposes of its C-order matrices) and returns the factors the same way, 1-based pivots, status."""
    a = np.swapaxes(np.asarray(a_t, dtype), -1, -2)
    lu_, piv = scipy.linalg.lu_factor(a, check_finite=False)
    return np.swapaxes(lu_, -1, -2).view(type(a_t)), (piv + 1).astype(np.int32).view(type(a_t)), None


def test_lu_through_the_batched_factorization(monkeypatch):
    import types

    from funcgrad.backends.gpu import array as gpu_array
    calls = []

    def getrf(a_t, dtype):
        calls.append(a_t.shape)
        return _fake_getrf(a_t, dtype)

    a = rng.standard_normal((2, 3, 4, 4))
    with gpu_standin(use_triton=False):
        namespace = types.SimpleNamespace(_decomposition=types.SimpleNamespace(_lu_factor=getrf))
        monkeypatch.setattr(gpu_array.binding().xp, "linalg", namespace)
        lu_, piv, perm = lax.linalg.lu(dev(a.astype(np.float32)))
        assert calls == [(2, 3, 4, 4)]   # one call for the stack
        ref_lu, ref_piv = scipy.linalg.lu_factor(a)
        np.testing.assert_allclose(host(lu_), ref_lu, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(host(piv), ref_piv)
        for idx in np.ndindex(2, 3):
            p, low, up = scipy.linalg.lu(a[idx])
            np.testing.assert_allclose(a[idx][host(perm)[idx]], low @ up, rtol=1e-10, atol=1e-12)


class _FakeNccl:
    """An NCCL communicator of two processes holding the same values (allReduce doubles the buffer)."""

    def __init__(self):
        self.calls = []

    def allReduce(self, send, recv, count, dtype, op, stream):   # noqa: N802 (NCCL's name)
        import ctypes
        assert send == recv
        self.calls.append(count)
        np.ctypeslib.as_array(ctypes.cast(recv, ctypes.POINTER(ctypes.c_float)), (count,))[:] *= 2


class _FakeMpi:
    def Dup(self):   # noqa: N802 (MPI's name)
        return self


def test_process_psum_of_gpu_arrays_goes_through_nccl(monkeypatch):
    import types

    from funcgrad.backends.gpu import array as gpu_array
    from funcgrad.distributed import _nccl, _runtime
    w = _runtime._World(_FakeMpi(), 1, 2, 5.0)
    monkeypatch.setattr(_runtime, "world", lambda: w)
    nccl = _FakeNccl()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    with gpu_standin(use_triton=False):
        # (before the averager is made, a psum of GPU buffers goes through host copies)
        assert _nccl.device_averager(gpu_array.binding().xp.zeros(3, np.float32)) is None
        avg = _nccl.NcclAverager.from_parts(xp=gpu_array.binding().xp, comm=None, size=2, communicator=nccl,
                                            nccl=types.SimpleNamespace(NCCL_FLOAT32=7, NCCL_SUM=0))
        monkeypatch.setitem(_nccl._cache, "averager", avg)
        monkeypatch.setitem(_nccl._cache, "world", w)
        gx = dev(x)
        close(dist.psum(gx), 2 * x)
        close(gx, x)                 # the operand is left as it was
        assert nccl.calls == [6]
