"""GPU implementations of the linear algebra, FFT, callback and collective primitives.

Registered at import (see :mod:`funcgrad.backends.gpu.impls`, which imports this module), each
written against the binding's array module ``xp`` (CuPy, or the tests' numpy stand-in) and
``cupyx.scipy.linalg`` (:func:`~funcgrad.backends.gpu.array.scipy_module`):

* on the device: ``cholesky``, ``eigh``, ``qr``, ``svd`` (``cupy.linalg``, batched by cuSOLVER),
  ``triangular_solve`` (``cupyx.scipy.linalg.solve_triangular``, batched trsm), ``lu`` and ``expm``
  (``cupyx.scipy.linalg.lu_factor`` / ``expm``, one call per matrix of a stack), ``fft`` (cuFFT;
  complex64 stays complex64). Each computes what the CPU implementation computes: the same output
  dtypes (float16 and bfloat16 in float32, returned in their dtype), empty stacks, and NaN where a factorization
  fails (``cholesky`` of a matrix that is not positive definite).
* on the host, deliberately (copy to the host, the CPU implementation, copy back), as JAX's GPU
  backend also runs them on the host or has no GPU kernel for them: ``eig``, ``schur``,
  ``hessenberg``, ``rsf2csf``, ``sqrtm`` and ``parlett``.
* callbacks: ``debug_callback`` and ``pure_callback`` hand the Python function host numpy values,
  as on the CPU; ``pure_callback``'s results go back to the device.
* collectives (``psum`` ... ``pvary``, ``allreduce_start`` / ``allreduce_done``,
  ``gradient_bucket``): in a one-process world they run on the device; across MPI processes a
  ``psum`` of a float array goes through NCCL once the world's NCCL averager is made
  (``funcgrad.distributed._nccl.averager()``, as data-parallel training on the GPU makes it); the
  others are copied to the host, go through the process world's MPI transport (the CPU
  implementation), and the result is copied back. Under ``vmap(axis_name=...)`` the batching
  rules carry them out on device arrays.

``lu``'s permutation is computed on the host from the pivots (one small copy, and a sync, per call).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import ShapedArray
from funcgrad.backends.gpu import array as gpu_array
from funcgrad.backends.gpu.impls import _register, _simple
from funcgrad.primitives import collectives as CL
from funcgrad.primitives import collectives_async as CA
from funcgrad.primitives import debug as DB
from funcgrad.primitives import decompositions as DC
from funcgrad.primitives import eigen as EG
from funcgrad.primitives import fft as FFT
from funcgrad.primitives import matrix_functions as MF

__all__: list[str] = []

# float16 and bfloat16: the solvers and cuFFT have neither, so both compute in float32 (as on the CPU).
_HALF = (np.dtype(np.float16), _dtypes.bfloat16)


def _up(xp: Any, a: Any) -> Any:
    """float16 / bfloat16 computed in float32 (the solvers have no half precision), as on the CPU."""
    return a.astype(xp.float32) if a.dtype in _HALF else a


def _batch_of(a: Any) -> tuple:
    return tuple(a.shape[:-2])


def _empty(shape: tuple) -> bool:
    return any(d == 0 for d in shape)


def _matrices(xp: Any, a: Any) -> Any:
    """(..., m, n) -> (b, m, n) (a contiguous stack to loop over)."""
    return xp.ascontiguousarray(a).reshape((-1,) + tuple(a.shape[-2:]))


# ---------------------------------------------------------------- cholesky


def _chol_loop(xp: Any, a: Any) -> Any:
    """Each matrix on its own, NaN for those that fail (numpy raises for the whole stack)."""
    out = []
    for m in _matrices(xp, a):
        try:
            out.append(xp.linalg.cholesky(m))
        except np.linalg.LinAlgError:
            out.append(xp.full(m.shape, np.nan, m.dtype))
    return xp.stack(out).reshape(a.shape)


def _chol_ok(xp: Any, a: Any, low: Any) -> Any:
    """Per matrix: did the factorization succeed? cuSOLVER flags no failure (CuPy reads no status
    by default), so check the factor: a positive finite diagonal and ``L L^H`` equal to ``A`` (lower
    triangle, which is all that is read) within Cholesky's backward error bound ``(n + 1) eps max a_ii``."""
    n = a.shape[-1]
    diag = xp.diagonal(low, axis1=-2, axis2=-1)
    ok = xp.all(diag > 0, axis=-1) & xp.all(xp.isfinite(low), axis=(-2, -1))
    resid = xp.tril(xp.matmul(low, xp.conj(xp.swapaxes(low, -1, -2))) - a)
    scale = xp.max(xp.abs(xp.diagonal(a, axis1=-2, axis2=-1)), axis=-1)
    tol = 8.0 * (n + 1) * float(np.finfo(low.dtype).eps)
    return ok & (xp.max(xp.abs(resid), axis=(-2, -1)) <= tol * scale)


@_simple(DC.cholesky_p)
def _cholesky(xp):
    def impl(a):
        if _empty(a.shape):
            return xp.zeros(a.shape, a.dtype)
        x = _up(xp, a)
        try:
            low = xp.linalg.cholesky(x)
        except np.linalg.LinAlgError:   # (numpy, in the tests' stand-in; CuPy raises only under cupyx.errstate)
            low = _chol_loop(xp, x)
        low = xp.where(_chol_ok(xp, x, low)[..., None, None], xp.tril(low), np.nan)
        return low.astype(a.dtype)
    return impl


# ---------------------------------------------------------------- triangular_solve


def _triangular_solve(b: gpu_array.Binding) -> Callable[..., Any]:
    xp, sla = b.xp, gpu_array.scipy_module(b, "linalg")

    def impl(a, rhs, *, lower, transpose_a, unit_diagonal):
        dtype = _dtypes.result_type(a, rhs)
        batch = tuple(np.broadcast_shapes(_batch_of(a), _batch_of(rhs)))
        shape = batch + tuple(rhs.shape[-2:])
        if _empty(shape) or a.shape[-1] == 0:
            return xp.zeros(shape, dtype)
        work = np.dtype(np.float32) if dtype in _HALF else dtype
        a = xp.broadcast_to(a.astype(work), batch + tuple(a.shape[-2:]))
        rhs = xp.broadcast_to(rhs.astype(work), shape)
        # (solve_triangular's batched path wants one batch shape for both operands)
        x = sla.solve_triangular(xp.ascontiguousarray(a), xp.ascontiguousarray(rhs), trans=1 if transpose_a else 0,
                                 lower=bool(lower), unit_diagonal=bool(unit_diagonal), check_finite=False)
        return xp.asarray(x).astype(dtype)
    return impl


_register(DC.triangular_solve_p, _triangular_solve)

# ---------------------------------------------------------------- lu


def _perm_from_pivots(piv: np.ndarray, m: int) -> np.ndarray:
    """(b, k) LAPACK row swaps (0-based) -> (b, m) permutations with ``a[perm] = L U``."""
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), piv.shape[:-1] + (m,)).copy()
    rows = np.arange(piv.shape[0])
    for i in range(piv.shape[-1]):
        p = piv[:, i]
        perm[rows, i], perm[rows, p] = perm[rows, p], perm[rows, i].copy()
    return perm


def _batched_getrf(xp: Any) -> Any:
    """CuPy's batched LU of square stacks (``cupy.linalg._decomposition._lu_factor``: getrfBatched, no
    host sync), or None where the array module has none (the tests' stand-in, other CuPy versions)."""
    return getattr(getattr(getattr(xp, "linalg", None), "_decomposition", None), "_lu_factor", None)


def _lu_factors(xp: Any, sla: Any, x: Any) -> tuple[Any, Any]:
    """(lu, 0-based int32 pivots) of the (..., m, n) stack ``x``."""
    getrf = _batched_getrf(xp)
    if getrf is not None and x.shape[-1] == x.shape[-2]:
        # It factors column-major matrices: hand it A^T in C order (= A column-major), and transpose back.
        lu_t, piv, _ = getrf(xp.swapaxes(x, -1, -2), np.dtype(x.dtype))
        return xp.swapaxes(lu_t, -1, -2), (piv - 1).astype(xp.int32)
    lus, pivs = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a singular matrix gives inf/NaN later, as on the CPU
        for mat in _matrices(xp, x):
            lu_, piv = sla.lu_factor(mat, check_finite=False)
            lus.append(xp.ascontiguousarray(lu_))
            pivs.append(xp.asarray(piv).astype(xp.int32))
    batch = _batch_of(x)
    return (xp.stack(lus).reshape(x.shape),
            xp.asarray(xp.stack(pivs)).reshape(batch + (min(x.shape[-2:]),)))


def _lu(b: gpu_array.Binding) -> Callable[..., Any]:
    xp, sla = b.xp, gpu_array.scipy_module(b, "linalg")

    def impl(a):
        batch, (m, n) = _batch_of(a), tuple(a.shape[-2:])
        k = min(m, n)
        if _empty(batch) or k == 0:
            perm = xp.broadcast_to(xp.arange(m, dtype=xp.int32), batch + (m,))
            return [xp.array(a, copy=True), xp.zeros(batch + (k,), xp.int32), xp.array(perm, copy=True)]
        lu_, piv = _lu_factors(xp, sla, _up(xp, a))
        perm = _perm_from_pivots(xp.asnumpy(piv).reshape(-1, k), m)
        return [xp.ascontiguousarray(lu_.astype(a.dtype)), xp.asarray(piv), xp.asarray(perm).reshape(batch + (m,))]
    return impl


_register(DC.lu_p, _lu)

# ---------------------------------------------------------------- qr, svd, eigh


@_simple(DC.qr_p)
def _qr(xp):
    def impl(a, *, full_matrices):
        q_shape, r_shape = DC._qr_shapes(tuple(a.shape), full_matrices)
        if _empty(a.shape):
            q = xp.zeros(q_shape, a.dtype)
            if q_shape[-1] == q_shape[-2] and not _empty(q_shape[:-2]):
                q = xp.array(xp.broadcast_to(xp.eye(q_shape[-1], dtype=a.dtype), q_shape), copy=True)
            return [q, xp.zeros(r_shape, a.dtype)]
        q, r = xp.linalg.qr(_up(xp, a), mode="complete" if full_matrices else "reduced")
        return [q.astype(a.dtype), r.astype(a.dtype)]
    return impl


@_simple(EG.svd_p)
def _svd(xp):
    def impl(a, *, full_matrices, compute_uv):
        shapes = EG._svd_shapes(tuple(a.shape), full_matrices, compute_uv)
        if _empty(a.shape):
            outs = [xp.zeros(s, a.dtype) for s in shapes]
            if compute_uv and full_matrices:   # identity factors for an empty matrix's missing part
                for i in (1, 2):
                    s = shapes[i]
                    if s[-1] == s[-2] and not _empty(s[:-2]):
                        outs[i] = xp.array(xp.broadcast_to(xp.eye(s[-1], dtype=a.dtype), s), copy=True)
            return outs
        x = _up(xp, a)
        if not compute_uv:
            return [xp.linalg.svd(x, full_matrices=False, compute_uv=False).astype(a.dtype)]
        u, s, vt = xp.linalg.svd(x, full_matrices=full_matrices, compute_uv=True)
        return [s.astype(a.dtype), u.astype(a.dtype), vt.astype(a.dtype)]
    return impl


@_simple(EG.eigh_p)
def _eigh(xp):
    def impl(a):
        batch, n = _batch_of(a), a.shape[-1]
        if _empty(batch) or n == 0:
            return [xp.zeros(batch + (n,), a.dtype), xp.zeros(a.shape, a.dtype)]
        w, v = xp.linalg.eigh(_up(xp, a), UPLO="L")
        return [w.astype(a.dtype), v.astype(a.dtype)]
    return impl


# ---------------------------------------------------------------- expm


# Higham (2005): the [13/13] Pade approximant's coefficients and the 1-norm up to which it is accurate
# to double precision without scaling.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0,
           1.0)
_THETA13 = 5.371920351148152


def _expm_stack(xp: Any, a: Any) -> Any:
    """expm of a (b, n, n) stack, all matrices at once: scaling (each by its own power of 2), the [13/13]
    Pade approximant, and squaring (one host read: the largest number of squarings)."""
    n = a.shape[-1]
    norm = xp.max(xp.sum(xp.abs(a), axis=-2), axis=-1)                      # 1-norms
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.ceil(xp.log2(norm / _THETA13))
    s = xp.where(xp.isfinite(s) & (s > 0), s, 0).astype(xp.int32)          # (NaN/inf input: NaN out, unscaled)
    x = a * xp.exp2(-s.astype(a.real.dtype))[:, None, None].astype(a.dtype)
    eye = xp.eye(n, dtype=a.dtype)
    x2 = xp.matmul(x, x)
    x4 = xp.matmul(x2, x2)
    x6 = xp.matmul(x4, x2)
    c = _PADE13
    u = xp.matmul(x6, c[13] * x6 + c[11] * x4 + c[9] * x2) + c[7] * x6 + c[5] * x4 + c[3] * x2 + c[1] * eye
    u = xp.matmul(x, u)
    v = xp.matmul(x6, c[12] * x6 + c[10] * x4 + c[8] * x2) + c[6] * x6 + c[4] * x4 + c[2] * x2 + c[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for i in range(int(xp.max(s)) if s.size else 0):
        r = xp.where((s > i)[:, None, None], xp.matmul(r, r), r)
    return r


def _expm(b: gpu_array.Binding) -> Callable[..., Any]:
    xp = b.xp

    def impl(a):
        if _empty(a.shape):
            return xp.zeros(a.shape, a.dtype)
        return _expm_stack(xp, _matrices(xp, _up(xp, a))).astype(a.dtype).reshape(a.shape)
    return impl


_register(MF.expm_p, _expm)

# ---------------------------------------------------------------- host implementations (as JAX's GPU eig)


def _on_host(prim: Any) -> Callable[[gpu_array.Binding], Callable[..., Any]]:
    """``prim``'s CPU implementation on host copies; results copied back to the device."""
    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        xp = b.xp

        def impl(*values, **params):
            host = [v if isinstance(v, (bool, int, float)) else xp.asnumpy(v) for v in values]
            out = prim.impl(*host, **params)
            if prim.multiple_results:
                return [xp.asarray(np.asarray(o)) for o in out]
            return xp.asarray(np.asarray(out))
        return impl
    return make


HOST_PRIMITIVES = (EG.eig_p, EG.schur_p, EG.hessenberg_p, MF.rsf2csf_p, MF.sqrtm_p, MF.parlett_p)
for _prim in HOST_PRIMITIVES:
    _register(_prim, _on_host(_prim))

# ---------------------------------------------------------------- fft


@_simple(FFT.fft_p)
def _fft(xp):
    def impl(x, fft_type, fft_lengths):
        aval = FFT._fft_aval(ShapedArray(tuple(x.shape), np.dtype(x.dtype)), fft_type, fft_lengths)  # the checks
        axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
        if x.dtype in _HALF:   # (cuFFT has no general half-precision transform; the CPU computes in float32 too)
            x = x.astype(xp.float32)
        if fft_type == "fft":
            out = xp.fft.fftn(x, axes=axes)
        elif fft_type == "ifft":
            out = xp.fft.ifftn(x, axes=axes)
        elif fft_type == "rfft":
            out = xp.fft.rfftn(x, axes=axes)
        else:
            out = xp.fft.irfftn(x, s=tuple(fft_lengths), axes=axes)
        return out.astype(aval.dtype)
    return impl


# ---------------------------------------------------------------- callbacks


@_simple(DB.debug_callback_p)
def _debug_callback(xp):
    def impl(*values, callback):
        callback.fn(*[np.asarray(v) if isinstance(v, (bool, int, float)) else xp.asnumpy(v) for v in values])
        return xp.zeros((), xp.int32)
    return impl


@_simple(DB.pure_callback_p)
def _pure_callback(xp):
    def impl(*values, callback, results, vmap_method):
        host = [v if isinstance(v, (bool, int, float)) else xp.asnumpy(v) for v in values]
        outs = DB.pure_callback_p.impl(*host, callback=callback, results=results, vmap_method=vmap_method)
        return [xp.asarray(o) for o in outs]
    return impl


# ---------------------------------------------------------------- collectives


def _size_one(xp: Any, kind: str, x: Any, params: dict) -> Any:
    """The collective over an axis of size 1 on a device buffer (a fresh buffer: a compiled program
    may reuse ``x``'s once this step has run)."""
    if kind == "psum" and x.dtype.kind == "b":
        return x.astype(CL.sum_dtype(x.dtype))
    if kind == "all_gather" and not params["tiled"]:
        return xp.expand_dims(x, params["axis"]).copy()
    if kind == "psum_scatter":
        out = x if params["tiled"] else xp.squeeze(x, params["scatter_dimension"])
        return out.astype(CL.sum_dtype(x.dtype)) if x.dtype.kind == "b" else out.copy()
    if kind == "ppermute" and (0, 0) not in params["perm"]:
        return xp.zeros_like(x)
    if kind == "all_to_all" and not params["tiled"]:
        return xp.expand_dims(xp.squeeze(x, params["split_axis"]), params["concat_axis"]).copy()
    return x.copy()


def _collective(prim: Any) -> Callable[[gpu_array.Binding], Callable[..., Any]]:
    kind = prim.name

    def make(b: gpu_array.Binding) -> Callable[..., Any]:
        xp = b.xp

        def impl(x, *, axes, check=None, **params):
            world = CL.process_world()
            if world.size() > 1:
                on_device = getattr(world, "run_on_device", None)   # NCCL, where the world has it
                if on_device is not None:
                    _check(x, axes, check, params, world.size())
                    out = on_device(prim, x, params, check)
                    if out is not None:
                        return out
                # MPI on a host copy (the host implementation runs every check)
                return xp.asarray(prim.impl(xp.asnumpy(x), axes=axes, check=check, **params))
            x = xp.asarray(x)
            _check(x, axes, check, params, 1)
            return _size_one(xp, kind, x, params)

        def _check(x, axes, check, params, size):
            """The host implementation's checks: bound names, the permutation, shapes."""
            for name in axes:
                if name != CL.PROCESS_AXIS:   # the host implementation's error for an unbound name
                    prim.impl(np.zeros(()), axes=axes, check=check, **params)   # raises NameError
            if kind == "ppermute":
                CL._check_perm(params["perm"], size)
            CL.out_aval(kind, ShapedArray(tuple(x.shape), np.dtype(x.dtype)), size, params)
        return impl
    return make


for _prim in (CL.psum_p, CL.pmax_p, CL.pmin_p, CL.all_gather_p, CL.psum_scatter_p, CL.ppermute_p,
              CL.all_to_all_p, CL.pbroadcast_p, CL.pvary_p):
    _register(_prim, _collective(_prim))


# allreduce_start / allreduce_done: with MPI, the sum runs on a host copy (the CPU implementation's
# non-blocking Iallreduce); the device buffer handed out in the meantime is a placeholder that
# allreduce_done swaps for the summed copy, uploaded. Keyed by the placeholder's device address.
_in_flight: dict[int, tuple] = {}


def _device_address(buf: Any) -> int:
    ptr = getattr(getattr(buf, "data", None), "ptr", None)
    return int(ptr) if ptr is not None else int(buf.ctypes.data)


@_simple(CA.allreduce_start_p)
def _allreduce_start(xp):
    def impl(*xs, scale):
        dtype = CA._common_dtype("allreduce_start", xs)
        if CA._comm() is None:   # a one-process world: the scaled, flattened copy on the device
            if not xs:
                return xp.zeros((0,), dtype)
            return xp.concatenate([xp.ravel(x) * xp.asarray(scale, dtype=dtype) for x in xs]).astype(dtype)
        host = CA.allreduce_start_p.impl(*[xp.asnumpy(x) for x in xs], scale=scale)
        placeholder = xp.asarray(xp.empty(host.shape, host.dtype))   # (asarray: the stand-in's empty is a host array)
        _in_flight[_device_address(placeholder)] = (placeholder, host)
        return placeholder
    return impl


@_simple(CA.allreduce_done_p)
def _allreduce_done(xp):
    def impl(buf):
        entry = _in_flight.pop(_device_address(buf), None)
        if entry is None:   # no sum was started for it (see the CPU implementation), or a one-process world
            return buf
        return xp.asarray(CA.allreduce_done_p.impl(entry[1]))
    return impl


_simple(CA.bucket_p)(lambda xp: lambda *xs_and_slot, scale: [x.copy() for x in xs_and_slot[:-1]])
