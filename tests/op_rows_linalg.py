"""Op-table rows for funcgrad.numpy.linalg, the top-level linalg helpers (cross, vecdot, matvec, vecmat,
einsum_path, einsum with ``...``) and a few funcgrad.scipy.linalg functions (rows named ``scipy.linalg.*``
are checked like the others but are not in PUBLIC: the coverage check resolves names in funcgrad.numpy).

Inputs are well conditioned: SPD matrices for cholesky, symmetric matrices with separated eigenvalues for
eigh, matrices with separated singular values for svd/pinv/norms, ``2 I + noise`` for solves/inverses.
Functions of eigen/singular vectors and of Q are gauge-normalised (column signs fixed by their first row,
or by R's diagonal) so float32 and float64, loops and vmap, compare the same vectors.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sl

import funcgrad.numpy as fnp
import funcgrad.scipy.linalg as fsl
from op_table import Op, normal

# ----------------------------------------------------------------- generators


def _orthogonal(rng, batch, n, k):
    q, r = np.linalg.qr(rng.standard_normal(batch + (n, k)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


def spd(rng, shape):
    a = rng.standard_normal(shape)
    n = shape[-1]
    return a @ np.swapaxes(a, -1, -2) / n + np.eye(n)


def wellcond(rng, shape):
    return 2.0 * np.eye(*shape[-2:]) + 0.3 * rng.standard_normal(shape)


def permuted(rng, shape):
    """Well conditioned, rows shuffled: LU pivots (row swaps) happen."""
    return wellcond(rng, shape)[..., rng.permutation(shape[-2]), :]


def sym(rng, shape):
    """Symmetric with eigenvalues spread over [-2, 2] (gaps >= 4 / (n - 1))."""
    batch, n = shape[:-2], shape[-1]
    q = _orthogonal(rng, batch, n, n)
    w = np.linspace(-2.0, 2.0, n) + 0.1 * rng.uniform(-1, 1, batch + (n,))
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


def separated(rng, shape):
    """(..., m, n) with singular values spread over [1, 3]."""
    batch, (m, n) = shape[:-2], shape[-2:]
    k = min(m, n)
    u, v = _orthogonal(rng, batch, m, k), _orthogonal(rng, batch, n, k)
    s = np.linspace(3.0, 1.0, k) if k > 1 else np.array([2.0])
    return (u * s) @ np.swapaxes(v, -1, -2)


def lower_tri(rng, shape):
    return np.tril(wellcond(rng, shape))


def low_rank(rng, shape):
    """Permuted diagonal matrices with zeros on the diagonal: exact rank in float32 too."""
    n = shape[-1]
    d = rng.uniform(1.0, 2.0, shape[:-2] + (n,)) * (rng.random(shape[:-2] + (n,)) > 0.4)
    return (d[..., :, None] * np.eye(n))[..., rng.permutation(n), :]


def distinct_real(rng, shape):
    """Non-symmetric, with distinct real eigenvalues spread over [-2, 2] (S diag(w) S^-1, S well conditioned)."""
    batch, n = shape[:-2], shape[-1]
    s = wellcond(rng, shape)
    w = np.linspace(-2.0, 2.0, n) + 0.1 * rng.uniform(-1, 1, batch + (n,))
    return (s * w[..., None, :]) @ np.linalg.inv(s)


def conj_pairs(rng, shape):
    """(..., 3, 3) real, eigenvalues a +- b i (b in [1, 1.5]) and one real c far from a: S B S^-1."""
    batch = shape[:-2]
    s = wellcond(rng, shape)
    a, b, c = rng.uniform(-0.5, 0.5, batch), rng.uniform(1.0, 1.5, batch), rng.uniform(1.5, 2.0, batch)
    blk = np.zeros(shape)
    blk[..., 0, 0] = blk[..., 1, 1] = a
    blk[..., 0, 1], blk[..., 1, 0], blk[..., 2, 2] = b, -b, c
    return s @ blk @ np.linalg.inv(s)


def quasi_tri(rng, shape):
    """A real Schur form: upper triangular but for one 2x2 block [[a, b], [c, a]] with b c < 0."""
    t = np.triu(rng.standard_normal(shape))
    t[..., 1, 0] = -rng.uniform(0.5, 1.0, shape[:-2])
    t[..., 0, 1] = rng.uniform(0.5, 1.0, shape[:-2])
    t[..., 1, 1] = t[..., 0, 0]
    return t


def orthogonal(rng, shape):
    return _orthogonal(rng, shape[:-2], shape[-1], shape[-1])


def small(rng, shape):
    return 0.5 * rng.standard_normal(shape)


# ----------------------------------------------------------------- gauge normalisation


def _sign_cols(v, ref, mod):
    s = mod.sign(ref[..., :1, :])
    s = mod.where(s == 0, 1.0, s)
    return v * s


def _eigh_fixed(mod):
    def f(a):
        w, v = mod.linalg.eigh(a)
        return w, _sign_cols(v, v, mod)
    return f


def _svd_fixed(mod):
    def f(a):
        u, s, vh = mod.linalg.svd(a, full_matrices=False)
        sg = mod.sign(u[..., :1, :])
        return u * sg, s, vh * mod.swapaxes(sg, -1, -2)
    return f


def _qr_fixed(mod, mode="reduced"):
    def f(a):
        q, r = mod.linalg.qr(a, mode=mode)
        d = mod.sign(mod.diagonal(r, axis1=-2, axis2=-1) if mod is np else fnp.linalg.diagonal(r))
        return q * d[..., None, :], r * d[..., :, None]
    return f


def _eig_sorted(mod):
    """Eigenvalues sorted by real part (real and imaginary parts) and the |entries| of the matching vectors."""
    def f(a):
        w, v = mod.linalg.eig(a)
        order = mod.argsort(mod.real(w), axis=-1)
        w = mod.take_along_axis(w, order, axis=-1)
        v = mod.take_along_axis(mod.abs(v), order[..., None, :], axis=-1)
        return mod.real(w), mod.imag(w), v
    return f


def _eigvals_parts(mod):
    def f(a):
        w = mod.linalg.eigvals(a)
        return mod.sort(mod.real(w), axis=-1), mod.sort(mod.imag(w), axis=-1)
    return f


def _per_matrix(fn):
    """A 2-d scipy function over leading dimensions, as complex."""
    def f(a):
        if a.ndim == 2:
            return np.asarray(fn(a), np.complex128)
        return np.stack([f(x) for x in a])
    return f


def _np_cross(a, b):
    return np.cross(a, b)


# ----------------------------------------------------------------- rows

F = dict(rtol=2e-4, atol=2e-4)     # float32 tolerance of the decompositions
SQ = [((3, 3),), ((2, 3, 3),)]


def _rows():
    L, nL = fnp.linalg, np.linalg
    return [
        Op("linalg.cholesky", L.cholesky, nL.cholesky, SQ, spd, **F),
        Op("linalg.cholesky[upper]", lambda a: L.cholesky(a, upper=True), lambda a: nL.cholesky(a, upper=True),
           [((3, 3),)], spd, **F),
        Op("linalg.det", L.det, nL.det, SQ, permuted, **F),
        Op("linalg.slogdet", lambda a: tuple(L.slogdet(a)), lambda a: tuple(nL.slogdet(a)), SQ, permuted, **F),
        Op("linalg.inv", L.inv, nL.inv, SQ, permuted, **F),
        Op("linalg.solve[vector]", L.solve, nL.solve, [((3, 3), (3,))], [wellcond, normal], **F),
        Op("linalg.solve[matrix]", L.solve, nL.solve, [((3, 3), (3, 2)), ((2, 3, 3), (3, 2))], [permuted, normal], **F),
        Op("linalg.eigh", _eigh_fixed(fnp), _eigh_fixed(np), SQ, sym, **F),
        Op("linalg.eigvalsh", L.eigvalsh, nL.eigvalsh, SQ, sym, **F),
        Op("linalg.eig", _eig_sorted(fnp), _eig_sorted(np), SQ, distinct_real, diff=False, **F),
        Op("linalg.eigvals", lambda a: fnp.sort(fnp.real(L.eigvals(a)), axis=-1),
           lambda a: np.sort(np.real(nL.eigvals(a)), axis=-1), SQ, distinct_real, **F),
        Op("linalg.eigvals[conjugate pairs]", _eigvals_parts(fnp), _eigvals_parts(np), [((3, 3),), ((2, 3, 3),)],
           conj_pairs, **F),
        Op("linalg.svd", _svd_fixed(fnp), _svd_fixed(np), [((3, 2),), ((2, 3),), ((2, 3, 3),)], separated, **F),
        Op("linalg.svd[compute_uv=False]", lambda a: L.svd(a, compute_uv=False),
           lambda a: nL.svd(a, compute_uv=False), [((3, 2),)], separated, **F),
        Op("linalg.svdvals", L.svdvals, nL.svdvals, [((2, 3),), ((2, 3, 3),)], separated, **F),
        Op("linalg.qr", _qr_fixed(fnp), _qr_fixed(np), [((4, 3),), ((2, 3, 3),)], wellcond, **F),
        Op("linalg.qr[r]", lambda a: fnp.abs(L.qr(a, mode="r")), lambda a: np.abs(nL.qr(a, mode="r")),
           [((4, 3),)], wellcond, **F),
        Op("linalg.norm[ord=2]", lambda a: L.norm(a, 2), lambda a: nL.norm(a, 2), [((3, 2),)], separated, **F),
        Op("linalg.norm[ord=-2]", lambda a: L.norm(a, -2), lambda a: nL.norm(a, -2), [((3, 3),)], separated, **F),
        Op("linalg.norm[ord=nuc,axis=(2,0)]", lambda a: L.norm(a, "nuc", axis=(2, 0)),
           lambda a: nL.norm(a, "nuc", axis=(2, 0)), [((3, 2, 2),)], normal, **F),
        Op("linalg.norm[ord=fro,keepdims]", lambda a: L.norm(a, "fro", axis=(0, 1), keepdims=True),
           lambda a: nL.norm(a, "fro", axis=(0, 1), keepdims=True), [((3, 4),)]),
        Op("linalg.matrix_norm", lambda a: L.matrix_norm(a, ord=1), lambda a: nL.matrix_norm(a, ord=1),
           [((2, 3, 4),)], **F),
        Op("linalg.vector_norm", lambda a: L.vector_norm(a, ord=3, axis=(0, 2)),
           lambda a: nL.vector_norm(a, ord=3, axis=(0, 2)), [((2, 3, 2),)], **F),
        Op("linalg.vector_norm[axis=None]", L.vector_norm, nL.vector_norm, [((3, 4),)]),
        Op("linalg.pinv", L.pinv, nL.pinv, [((3, 2),), ((2, 3),)], separated, **F),
        Op("linalg.lstsq", lambda a, b: L.lstsq(a, b)[:2] + (L.lstsq(a, b)[3],),
           lambda a, b: (lambda r: (r[0], r[1], r[3]))(nL.lstsq(a, b, rcond=None)), [((4, 2), (4, 3))],
           [separated, normal], **F),
        Op("linalg.matrix_power[3]", lambda a: L.matrix_power(a, 3), lambda a: nL.matrix_power(a, 3), SQ,
           wellcond, **F),
        Op("linalg.matrix_power[-2]", lambda a: L.matrix_power(a, -2), lambda a: nL.matrix_power(a, -2),
           [((3, 3),)], wellcond, **F),
        Op("linalg.matrix_rank", L.matrix_rank, nL.matrix_rank, [((4, 4),), ((2, 3, 3),)], low_rank, diff=False,
           out="int"),
        Op("linalg.matrix_transpose", L.matrix_transpose, nL.matrix_transpose, [((2, 3, 4),)]),
        Op("linalg.diagonal", lambda a: L.diagonal(a, offset=1), lambda a: nL.diagonal(a, offset=1),
           [((3, 4),), ((2, 4, 3),)]),
        Op("linalg.trace", lambda a: L.trace(a, offset=-1), lambda a: nL.trace(a, offset=-1), [((2, 3, 4),)]),
        Op("linalg.multi_dot", lambda a, b, c: L.multi_dot([a, b, c]), lambda a, b, c: nL.multi_dot([a, b, c]),
           [((3,), (3, 4), (4, 2)), ((2, 3), (3, 4), (4,))]),
        Op("linalg.outer", L.outer, nL.outer, [((3,), (4,))]),
        Op("linalg.cross", L.cross, nL.cross, [((3,), (3,)), ((2, 3), (3,))]),
        Op("linalg.vecdot", L.vecdot, nL.vecdot, [((2, 3), (3,))]),
        Op("linalg.matmul", L.matmul, nL.matmul, [((2, 3, 4), (4, 2))]),
        Op("linalg.tensordot", lambda a, b: L.tensordot(a, b, axes=1), lambda a, b: nL.tensordot(a, b, axes=1),
           [((2, 3), (3, 2))]),
        Op("linalg.tensorinv", lambda a: L.tensorinv(a, ind=1), lambda a: nL.tensorinv(a, ind=1), [((4, 2, 2),)],
           lambda rng, s: wellcond(rng, (4, 4)).reshape(s), **F),
        Op("linalg.tensorsolve", L.tensorsolve, nL.tensorsolve, [((2, 3, 6), (2, 3))],
           [lambda rng, s: wellcond(rng, (6, 6)).reshape(s), normal], **F),
        Op("linalg.cond", L.cond, nL.cond, [((3, 3),), ((2, 3, 2),)], separated, **F),
        Op("linalg.cond[p=1]", lambda a: L.cond(a, 1), lambda a: nL.cond(a, 1), [((3, 3),)], wellcond, **F),
        # top level
        Op("cross", fnp.cross, _np_cross, [((3,), (3,)), ((2, 3), (3,))]),
        Op("cross[2-d vectors]", fnp.cross, lambda a, b: a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
           [((3, 2), (3, 2))]),
        Op("cross[axis=0]", lambda a, b: fnp.cross(a, b, axis=0), lambda a, b: np.cross(a, b, axis=0),
           [((3, 2), (3, 2))]),
        Op("vecdot", lambda a, b: fnp.vecdot(a, b, axis=0), lambda a, b: np.vecdot(a, b, axis=0),
           [((3, 2), (3, 1))]),
        Op("matvec", fnp.matvec, np.matvec, [((2, 3, 4), (4,)), ((3, 4), (2, 4))]),
        Op("vecmat", fnp.vecmat, np.vecmat, [((3,), (2, 3, 4)), ((2, 3), (3, 4))]),
        Op("einsum_path", lambda a, b, c: fnp.einsum("ij,jk,kl->il", a, b, c,
                                                      optimize=fnp.einsum_path("ij,jk,kl->il", a, b, c)[0]),
           lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c), [((2, 3), (3, 4), (4, 2))]),
        Op("einsum[ellipsis ...ij,...jk]", lambda a, b: fnp.einsum("...ij,...jk", a, b),
           lambda a, b: np.einsum("...ij,...jk", a, b), [((2, 2, 3), (3, 4)), ((3, 4), (2, 4, 2))]),
        Op("einsum[ellipsis i...->...]", lambda a: fnp.einsum("i...->...", a), lambda a: np.einsum("i...->...", a),
           [((3, 2, 2),)]),
        Op("einsum[diagonal ii->i]", lambda a: fnp.einsum("ii->i", a), lambda a: np.einsum("ii->i", a), [((3, 3),)]),
        Op("einsum[trace bii]", lambda a: fnp.einsum("bii->b", a), lambda a: np.einsum("bii->b", a), [((2, 3, 3),)]),
        Op("einsum[optimal 4 operands]", lambda a, b, c, d: fnp.einsum("ij,jk,kl,l->i", a, b, c, d, optimize="optimal"),
           lambda a, b, c, d: np.einsum("ij,jk,kl,l->i", a, b, c, d), [((2, 3), (3, 4), (4, 2), (2,))]),
        # funcgrad.scipy.linalg
        Op("scipy.linalg.solve_triangular", lambda a, b: fsl.solve_triangular(a, b, lower=True),
           lambda a, b: sl.solve_triangular(a, b, lower=True), [((3, 3), (3, 2))], [lower_tri, normal], **F),
        Op("scipy.linalg.solve_triangular[trans=T]", lambda a, b: fsl.solve_triangular(a, b, trans="T"),
           lambda a, b: sl.solve_triangular(a, b, trans="T"), [((3, 3), (3,))],
           [lambda rng, s: np.swapaxes(lower_tri(rng, s), -1, -2), normal], **F),
        # scipy's cholesky reads one triangle and (as JAX) does not symmetrize: the row does, so finite
        # differences see the same function as the derivative rules.
        Op("scipy.linalg.cho_solve", lambda a, b: fsl.cho_solve(fsl.cho_factor((a + a.T) / 2), b),
           lambda a, b: sl.cho_solve(sl.cho_factor((a + a.T) / 2), b), [((3, 3), (3, 2))], [spd, normal], **F),
        Op("scipy.linalg.lu", fsl.lu, sl.lu, [((3, 3),), ((4, 2),), ((2, 3),)], permuted, **F),
        Op("scipy.linalg.lu_solve", lambda a, b: fsl.lu_solve(fsl.lu_factor(a), b, trans=1),
           lambda a, b: sl.lu_solve(sl.lu_factor(a), b, trans=1), [((3, 3), (3,))], [permuted, normal], **F),
        Op("scipy.linalg.expm", fsl.expm, sl.expm, [((3, 3),), ((2, 2, 2),)], small, **F),
        Op("scipy.linalg.expm_frechet", lambda a, e: fsl.expm_frechet(a, e), lambda a, e: sl.expm_frechet(a, e),
           [((2, 2), (2, 2))], small, **F),
        Op("scipy.linalg.polar", fsl.polar, sl.polar, [((3, 3),)], separated, **F),
        Op("scipy.linalg.solve_sylvester", fsl.solve_sylvester, sl.solve_sylvester, [((2, 2), (3, 3), (2, 3))],
           [spd, spd, normal], **F),
        Op("scipy.linalg.sqrtm", fsl.sqrtm, _per_matrix(sl.sqrtm), SQ, wellcond, diff=False, out="complex", **F),
        Op("scipy.linalg.sqrtm[negative eigenvalues]", fsl.sqrtm, _per_matrix(sl.sqrtm), [((3, 3),)],
           lambda rng, s: -spd(rng, s), diff=False, out="complex", **F),
        Op("scipy.linalg.funm", lambda a: fsl.funm(a, fnp.sin), _per_matrix(lambda a: sl.funm(a, np.sin)),
           [((3, 3),)], distinct_real, diff=False, out="complex", **F),
        Op("scipy.linalg.rsf2csf", fsl.rsf2csf, lambda t, z: tuple(np.asarray(x, np.complex128)
                                                                   for x in sl.rsf2csf(t, z)),
           [((3, 3), (3, 3))], [quasi_tri, orthogonal], diff=False, out="complex", **F),
        Op("scipy.linalg.dft", lambda: fsl.dft(4, scale="sqrtn"), lambda: sl.dft(4, scale="sqrtn"), [()],
           diff=False, out="complex", **F),
        Op("scipy.linalg.block_diag", lambda a, b: fsl.block_diag(a, b), lambda a, b: sl.block_diag(a, b),
           [((2, 3), (2,))]),
        Op("scipy.linalg.toeplitz", fsl.toeplitz, sl.toeplitz, [((3,), (4,))]),
        Op("scipy.linalg.hankel", fsl.hankel, sl.hankel, [((3,), (2,))]),
        Op("scipy.linalg.circulant", fsl.circulant, sl.circulant, [((4,),)]),
        Op("scipy.linalg.companion", fsl.companion, sl.companion, [((4,),)], lambda rng, s: rng.uniform(1, 2, s)),
    ]


OPS: list = _rows()
PUBLIC: list[str] = [f"linalg.{n}" for n in (
    "cholesky cond cross det diagonal eig eigh eigvals eigvalsh inv lstsq matmul matrix_norm matrix_power matrix_rank "
    "matrix_transpose multi_dot outer pinv qr slogdet solve svd svdvals tensordot tensorinv tensorsolve trace "
    "vecdot vector_norm").split()] + ["cross", "vecdot", "matvec", "vecmat", "einsum_path"]
