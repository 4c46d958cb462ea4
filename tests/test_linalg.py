"""funcgrad.numpy.linalg, funcgrad.scipy.linalg and funcgrad.lax.linalg beyond the op table: batching over
leading dimensions, gauge-invariant gradients of eigh/svd, closed-form gradients, keywords, JAX's
no-exception semantics for singular input, and errors. References: numpy/scipy in float64 and finite
differences (check_grads)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

import funcgrad as fg
import funcgrad.lax as lax
import funcgrad.numpy as fnp
import funcgrad.scipy.linalg as fsl
from funcgrad.testing import check_grads

L = fnp.linalg


@pytest.fixture
def r():
    return np.random.default_rng(1)


def spd(r, n, batch=()):
    a = r.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) / n + np.eye(n)


def sym_spread(r, n):
    q, _ = np.linalg.qr(r.standard_normal((n, n)))
    return (q * np.linspace(-2, 2, n)) @ q.T


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)

# ------------------------------------------------------------------ batching over leading dimensions


def test_solve_broadcasts_batch_dimensions(r, x64):
    a = 2 * np.eye(3) + 0.3 * r.standard_normal((2, 1, 3, 3))
    b = r.standard_normal((4, 3, 2))
    close(L.solve(a, b), np.linalg.solve(a, b))
    assert L.solve(a, b).shape == (2, 4, 3, 2)


def test_vmap_over_a_middle_axis_matches_a_loop(r, x64):
    a = np.stack([spd(r, 3) for _ in range(4)], axis=1)            # (3, 4, 3): batch on axis 1
    fns = [L.cholesky, L.inv, L.det, L.eigvalsh, L.svdvals, lambda m: L.qr(m).R, fsl.expm]
    for f in fns:
        out = fg.vmap(f, in_axes=1)(a)
        loop = np.stack([np.asarray(f(a[:, i])) for i in range(4)])
        close(out, loop, 1e-12)


def test_batched_decompositions_match_numpy(r, x64):
    a = r.standard_normal((2, 3, 4, 3))
    u, s, vh = L.svd(a, full_matrices=False)
    close(np.asarray(u) * np.asarray(s)[..., None, :] @ np.asarray(vh), a)
    close(s, np.linalg.svd(a, compute_uv=False))
    q, rr = L.qr(a)
    close(np.asarray(q) @ np.asarray(rr), a)
    s_ = spd(r, 3, (2, 2))
    close(L.cholesky(s_), np.linalg.cholesky(s_))
    close(L.slogdet(s_).logabsdet, np.linalg.slogdet(s_).logabsdet)


def test_jit_of_grad_of_batched_logdet(r, x64):
    a = spd(r, 3, (2,))
    g = fg.jit(fg.grad(lambda m: fnp.sum(L.slogdet(m).logabsdet)))(a)
    close(g, np.linalg.inv(a).swapaxes(-1, -2))

# ------------------------------------------------------------------ gradients: gauge invariance, closed forms


def test_eigh_gauge_invariant_functions_have_correct_gradients(r, x64):
    a = sym_spread(r, 4)
    m = r.standard_normal((4, 4))

    def projector_loss(x):          # trace(P M), P the projector on the two lowest eigenvectors
        w, v = L.eigh(x)
        p = v[:, :2] @ v[:, :2].T
        return fnp.sum(p * m)

    check_grads(projector_loss, (fnp.asarray(a),), order=2, modes=("fwd", "rev"))

    def reconstruct(x):             # v diag(w) v^T == sym(x)
        w, v = L.eigh(x)
        return (v * w) @ v.T

    close(reconstruct(a), a)
    check_grads(reconstruct, (fnp.asarray(a),), order=1, modes=("fwd", "rev"))


def test_svd_gauge_invariant_functions_have_correct_gradients(r, x64):
    for shape in [(4, 3), (3, 4), (3, 3)]:
        a = r.standard_normal(shape)

        def f(x):
            u, s, vh = L.svd(x, full_matrices=False)
            return (u[:, :1] @ vh[:1, :]) * s[0] + fnp.sum(s ** 3)

        check_grads(f, (fnp.asarray(a),), order=2, modes=("fwd", "rev"))


def test_closed_form_gradients(r, x64):
    a = 2 * np.eye(3) + 0.3 * r.standard_normal((3, 3))
    close(fg.grad(L.det)(a), np.linalg.det(a) * np.linalg.inv(a).T)
    close(fg.grad(lambda x: L.slogdet(x)[1])(a), np.linalg.inv(a).T)
    u, s, vh = np.linalg.svd(a)
    close(fg.grad(lambda x: L.norm(x, "nuc"))(a), u @ vh)
    close(fg.grad(lambda x: L.norm(x, 2))(a), np.outer(u[:, 0], vh[0]))
    b = spd(r, 3)
    w, v = np.linalg.eigh(b)
    close(fg.grad(lambda x: L.eigvalsh(x)[-1])(b), np.outer(v[:, -1], v[:, -1]))
    # d/dA sum(inv(A) * C) = -inv(A)^T C inv(A)^T
    c = r.standard_normal((3, 3))
    inv = np.linalg.inv(a)
    close(fg.grad(lambda x: fnp.sum(L.inv(x) * c))(a), -inv.T @ c @ inv.T)


def test_cholesky_gradient_is_symmetric_and_matches_finite_differences(r, x64):
    a = spd(r, 3)
    c = r.standard_normal((3, 3))
    g = np.asarray(fg.grad(lambda x: fnp.sum(L.cholesky(x) * c))(a))
    close(g, g.T)
    check_grads(lambda x: L.cholesky(x), (fnp.asarray(a),), order=2, modes=("fwd", "rev"))


def test_det_gradient_is_the_adjugate_at_singular_matrices(x64):
    # As JAX (cofactor solve): finite at rank n - 1, zero at lower rank.
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    cof = np.array([[-3.0, 6.0, -3.0], [6.0, -12.0, 6.0], [-3.0, 6.0, -3.0]])
    close(fg.grad(L.det)(a), cof)
    close(fg.jit(fg.grad(L.det))(a[[1, 0, 2]]), cof[[1, 0, 2]] * -1)
    close(fg.grad(L.det)(np.zeros((3, 3))), np.zeros((3, 3)))
    close(fg.vmap(fg.grad(L.det))(np.stack([a, np.eye(3)])), np.stack([cof, np.eye(3)]))


def test_scipy_cholesky_gradient_follows_jax(x64):
    # jax.scipy.linalg.cholesky reads one triangle without symmetrizing, and its rule differentiates the
    # full input: the gradient is Murray's L^-T Phi(L^T C) L^-1 (Phi: lower triangle, half diagonal),
    # unsymmetrized (for upper=True, of the transposed input). These are the values JAX 0.10.2 gives.
    a = np.array([[4.0, 2.0, 1.0], [2.0, 3.0, 0.5], [1.0, 0.5, 2.0]])
    c = np.arange(9.0).reshape(3, 3)
    low = np.linalg.cholesky(a)
    inv = np.linalg.inv(low)
    phi = np.tril(low.T @ c) - 0.5 * np.diag(np.diag(low.T @ c))
    close(fg.grad(lambda x: fnp.sum(fsl.cholesky(x, lower=True) * c))(a), inv.T @ phi @ inv)
    phi = np.tril(low.T @ c.T) - 0.5 * np.diag(np.diag(low.T @ c.T))
    close(fg.grad(lambda x: fnp.sum(fsl.cholesky(x) * c))(a), (inv.T @ phi @ inv).T)


def test_pinv_gradient_is_finite_and_correct_at_rank_deficient_matrices(r, x64):
    a = r.standard_normal((4, 2)) @ r.standard_normal((2, 3))          # rank 2
    c = r.standard_normal((3, 4))
    g = np.asarray(fg.grad(lambda x: fnp.sum(L.pinv(x) * c))(a))
    assert np.all(np.isfinite(g))
    # directional derivative along a rank-preserving direction, by central differences
    u, _, vt = np.linalg.svd(a, full_matrices=False)
    d = u[:, :2] @ r.standard_normal((2, 2)) @ vt[:2]
    h = 1e-6
    fd = (np.sum(np.linalg.pinv(a + h * d) * c) - np.sum(np.linalg.pinv(a - h * d) * c)) / (2 * h)
    np.testing.assert_allclose(np.sum(g * d), fd, rtol=1e-6)
    check_grads(L.pinv, (fnp.asarray(r.standard_normal((3, 2))),), order=2, modes=("fwd", "rev"))


def test_eigenvalue_gradients_stay_finite_at_repeated_eigenvalues(x64):
    # Eigenvalue sums are smooth; eigenvector gradients at repeated eigenvalues are not (NaN, as in JAX).
    eye = np.eye(3)
    close(fg.grad(lambda x: fnp.sum(L.eigvalsh(x) * np.arange(3.0)))(eye), np.diag([0.0, 1.0, 2.0]))
    with np.errstate(all="ignore"):
        g = fg.grad(lambda x: fnp.sum(L.eigh(x).eigenvectors))(eye)
    assert not np.all(np.isfinite(np.asarray(g)))


def test_higher_order_through_solve_and_expm(r, x64):
    a = 2 * np.eye(3) + 0.3 * r.standard_normal((3, 3))
    b = r.standard_normal((3,))
    check_grads(lambda x, y: L.solve(x, y), (fnp.asarray(a), fnp.asarray(b)), order=3, modes=("fwd", "rev"))
    check_grads(fsl.expm, (fnp.asarray(0.5 * r.standard_normal((3, 3))),), order=3, modes=("rev",))

# ------------------------------------------------------------------ JAX semantics: no exceptions on bad values


def test_singular_and_indefinite_inputs_give_inf_or_nan(x64):
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    with np.errstate(all="ignore"):
        assert not np.all(np.isfinite(np.asarray(L.inv(sing))))
        assert not np.all(np.isfinite(np.asarray(L.solve(sing, np.ones(2)))))
        assert float(L.det(sing)) == 0.0
        s, logdet = L.slogdet(sing)
        assert float(s) == 0.0 and float(logdet) == -np.inf
        assert np.all(np.isnan(np.asarray(L.cholesky(-np.eye(2)))))
        tri = fsl.solve_triangular(np.array([[0.0, 0.0], [1.0, 1.0]]), np.ones(2), lower=True)
        assert not np.all(np.isfinite(np.asarray(tri)))


def test_nan_input_gives_nan_not_an_exception(x64):
    x = np.full((3, 3), np.nan)
    for f in (L.eigvalsh, L.svdvals, L.inv):
        assert np.all(np.isnan(np.asarray(f(x))))

# ------------------------------------------------------------------ keywords and variants


def test_results_are_named_tuples(r, x64):
    a = spd(r, 3)
    e = L.eigh(a)
    close(e.eigenvalues, np.linalg.eigh(a).eigenvalues)
    s = L.svd(a)
    assert s.U.shape == (3, 3) and s.S.shape == (3,) and s.Vh.shape == (3, 3)
    assert L.qr(a).Q.shape == (3, 3) and L.slogdet(a).sign.shape == ()


def test_eigh_reads_the_requested_triangle_without_symmetrizing(r, x64):
    a = spd(r, 3)
    low, up = np.tril(a), np.triu(a)
    close(L.eigh(low, UPLO="L", symmetrize_input=False).eigenvalues, np.linalg.eigvalsh(a))
    close(L.eigh(up, UPLO="U", symmetrize_input=False).eigenvalues, np.linalg.eigvalsh(a))
    close(fsl.eigh(low, lower=True, eigvals_only=True), np.linalg.eigvalsh(a))
    close(fsl.eigh(up, lower=False, eigvals_only=True), np.linalg.eigvalsh(a))


def test_qr_modes_and_svd_shapes(r, x64):
    a = r.standard_normal((4, 3))
    q, rr = L.qr(a, mode="complete")
    assert q.shape == (4, 4) and rr.shape == (4, 3)
    close(np.asarray(q) @ np.asarray(rr), a)
    close(np.abs(np.asarray(L.qr(a, mode="r"))), np.abs(np.linalg.qr(a, mode="r")))
    q, rr = fsl.qr(a)
    assert q.shape == (4, 4)
    (rr_only,) = fsl.qr(a, mode="r")
    assert rr_only.shape == (4, 3)
    u, s, vh = L.svd(a)
    assert u.shape == (4, 4) and vh.shape == (3, 3)
    u, s, vh = fsl.svd(a, full_matrices=False)
    assert u.shape == (4, 3)


def test_lstsq_matches_numpy_including_rank_deficient(r, x64):
    a = r.standard_normal((5, 3))
    a[:, 2] = a[:, 0] + a[:, 1]
    b = r.standard_normal((5, 2))
    x, resid, rank, s = L.lstsq(a, b)
    xr, _, rank_r, sr = np.linalg.lstsq(a, b, rcond=None)
    close(x, xr, 1e-9)
    assert int(rank) == rank_r == 2
    close(s, sr)
    assert np.asarray(L.lstsq(a, b, numpy_resid=True)[1]).shape == (0,)
    full = r.standard_normal((5, 3))
    close(L.lstsq(full, b, numpy_resid=True)[1], np.linalg.lstsq(full, b, rcond=None)[1])


def test_pinv_and_matrix_rank_tolerances(r, x64):
    a = np.diag([1.0, 1e-3, 0.0])
    close(L.pinv(a, rtol=1e-2), np.linalg.pinv(a, rcond=1e-2))
    close(L.pinv(a, rcond=1e-4), np.linalg.pinv(a, rcond=1e-4))
    assert int(L.matrix_rank(a)) == 2
    assert int(L.matrix_rank(a, rtol=1e-2)) == 1           # an absolute threshold, as JAX
    assert int(L.matrix_rank(np.array([0.0, 2.0]))) == 1
    with pytest.raises(ValueError, match="only one"):
        L.pinv(a, rtol=1e-2, rcond=1e-2)
    with pytest.raises(ValueError, match="only one"):
        L.matrix_rank(a, rtol=1e-2, tol=1e-2)


def test_matrix_power_edge_exponents(r, x64):
    a = 2 * np.eye(2) + 0.3 * r.standard_normal((2, 2))
    close(L.matrix_power(a, 0), np.eye(2))
    close(L.matrix_power(a, 1), a)
    close(L.matrix_power(a, -1), np.linalg.inv(a))
    close(L.matrix_power(a, 5), np.linalg.matrix_power(a, 5))
    with pytest.raises(TypeError, match="integer"):
        L.matrix_power(a, 1.5)


def test_einsum_paths_and_ellipsis(r, x64):
    a, b, c = r.standard_normal((2, 3)), r.standard_normal((3, 4)), r.standard_normal((4, 5))
    path, report = fnp.einsum_path("ij,jk,kl->il", a, b, c, optimize="optimal")
    assert path == np.einsum_path("ij,jk,kl->il", a, b, c, optimize="optimal")[0]
    assert isinstance(report, str)
    for opt in (True, False, "greedy", "optimal", "auto", path, [(1, 2), (0, 1)]):
        close(fnp.einsum("ij,jk,kl->il", a, b, c, optimize=opt), a @ b @ c)
    x = r.standard_normal((2, 1, 3, 4))
    y = r.standard_normal((5, 4, 2))
    close(fnp.einsum("...ij,...jk->...ik", x, y), np.einsum("...ij,...jk->...ik", x, y))
    close(fnp.einsum("i...i", r.standard_normal((3, 2, 3)) * 0 + 1), np.einsum("i...i", np.ones((3, 2, 3))))
    with pytest.raises(NotImplementedError, match="out="):
        fnp.einsum("ij->ji", a, out=a)
    with pytest.raises(ValueError, match="subscripts"):
        fnp.einsum("i.j", a)


def test_scipy_special_matrices_match_scipy(r, x64):
    c, rr = r.standard_normal(3), r.standard_normal(4)
    close(fsl.toeplitz(c, rr), sl.toeplitz(c, rr))
    close(fsl.hankel(c, rr), sl.hankel(c, rr))
    batch = r.standard_normal((2, 3))
    close(fsl.toeplitz(batch), np.stack([sl.toeplitz(v) for v in batch]))
    close(fsl.circulant(batch), np.stack([sl.circulant(v) for v in batch]))
    close(fsl.block_diag(np.ones(2), 3.0, np.ones((2, 1))), sl.block_diag(np.ones(2), 3.0, np.ones((2, 1))))
    close(fsl.hilbert(4), sl.hilbert(4))
    close(fsl.invhilbert(4), sl.invhilbert(4))
    for kind in ("symmetric", "lower", "upper"):
        close(fsl.pascal(4, kind), sl.pascal(4, kind))
        close(fsl.invpascal(4, kind), sl.invpascal(4, kind))
    close(fsl.hadamard(4), sl.hadamard(4))
    close(fsl.helmert(4, full=True), sl.helmert(4, full=True))
    close(fsl.leslie(c, rr[:2]), sl.leslie(c, rr[:2]))
    close(fsl.fiedler(c), sl.fiedler(c))
    for n in (2, 3, 5):
        coeffs = np.r_[1.5, r.standard_normal(n - 1)]
        close(fsl.fiedler_companion(coeffs), sl.fiedler_companion(coeffs))
    for mode in ("full", "valid", "same"):
        close(fsl.convolution_matrix(c, 5, mode), sl.convolution_matrix(c, 5, mode))


def test_scipy_factorizations_reconstruct(r, x64):
    a = r.standard_normal((4, 4))
    t, z = fsl.schur(a)
    close(np.asarray(z) @ np.asarray(t) @ np.asarray(z).T, a)
    close(t, sl.schur(a)[0])
    h, q = fsl.hessenberg(a, calc_q=True)
    close(np.asarray(q) @ np.asarray(h) @ np.asarray(q).T, a)
    p, low, up = fsl.lu(a)
    close(np.asarray(p) @ np.asarray(low) @ np.asarray(up), a)
    u, pp = fsl.polar(a, side="left")
    close(np.asarray(pp) @ np.asarray(u), a)
    w = fsl.eigh_tridiagonal(np.arange(3.0), np.ones(2), eigvals_only=True)
    close(w, sl.eigh_tridiagonal(np.arange(3.0), np.ones(2), eigvals_only=True))
    w, v = fsl.eigh_tridiagonal(np.arange(3.0), np.ones(2))
    close(np.abs(np.asarray(v)), np.abs(sl.eigh_tridiagonal(np.arange(3.0), np.ones(2))[1]))
    e = r.standard_normal((4, 4))
    ea, frechet = fsl.expm_frechet(0.3 * a, e)
    ea_r, frechet_r = sl.expm_frechet(0.3 * a, e)
    close(ea, ea_r)
    close(frechet, frechet_r, 1e-9)


def test_qr_multiply_matches_scipy_and_differentiates(r, x64):
    for shape in [(4, 3), (3, 4)]:
        a = r.standard_normal(shape)
        k = min(shape)
        for mode, c_shape in [("left", (k, 2)), ("right", (2, shape[0])), ("left", (k,)), ("right", (shape[0],))]:
            c = r.standard_normal(c_shape)
            for got, want in zip(fsl.qr_multiply(a, c, mode), sl.qr_multiply(a, c, mode)):
                close(got, want)
    a, c = r.standard_normal((4, 3)), r.standard_normal((2, 4))
    check_grads(lambda x, y: fsl.qr_multiply(x, y)[0], (fnp.asarray(a), fnp.asarray(c)), order=2,
                modes=("fwd", "rev"))


def test_lu_solve_under_jit_and_vmap(r, x64):
    a = 2 * np.eye(3) + r.standard_normal((3, 3))
    a = a[[2, 0, 1]]
    b = r.standard_normal((4, 3))
    f = fg.jit(fg.vmap(lambda bb: fsl.lu_solve(fsl.lu_factor(a), bb), in_axes=0))
    close(f(b), np.linalg.solve(a, b.T).T)
    close(fsl.lu_factor(a)[1], sl.lu_factor(a)[1])


def test_lax_linalg_triangular_solve_sides(r, x64):
    a = np.tril(2 * np.eye(3) + r.standard_normal((3, 3)))
    b = r.standard_normal((2, 3))
    x = lax.linalg.triangular_solve(a, b, left_side=False, lower=True)
    close(np.asarray(x) @ a, b)
    x = lax.linalg.triangular_solve(a, b.T, left_side=True, lower=True, transpose_a=True)
    close(a.T @ np.asarray(x), b.T)
    close(lax.linalg.lu_pivots_to_permutation(np.array([2, 2, 2], np.int32), 3), [2, 0, 1])

def test_lax_tridiagonal_solve(r, x64):
    m = 4
    dl, d, du = r.standard_normal(m), 3 + r.standard_normal(m), r.standard_normal(m)
    b = r.standard_normal((m, 2))
    dense = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)     # dl[0], du[-1] are not used
    close(lax.linalg.tridiagonal_solve(dl, d, du, b), np.linalg.solve(dense, b))
    check_grads(lambda *v: lax.linalg.tridiagonal_solve(*v), [fnp.asarray(v) for v in (dl, d, du, b)], order=2,
                modes=("fwd", "rev"))
    batched = [np.stack([v, 2 * v]) for v in (dl, d, du, b)]
    out = fg.vmap(lax.linalg.tridiagonal_solve)(*batched)
    close(out[1], lax.linalg.tridiagonal_solve(*[v[1] for v in batched]))

# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("call,exc,words", [
    (lambda: L.inv(np.ones((2, 3))), ValueError, ["inv", "square", "f32[2,3]"]),
    (lambda: L.det(np.ones(3)), ValueError, ["det", "f32[3]"]),
    (lambda: L.cholesky(np.ones((3, 2))), ValueError, ["cholesky", "square"]),
    (lambda: L.svd(np.ones(3)), ValueError, ["svd", "2-d"]),
    (lambda: L.solve(np.eye(3), np.ones(2)), ValueError, ["solve", "f32[2]", "3"]),
    (lambda: L.solve(np.eye(3), np.ones((2, 2))), ValueError, ["solve", "(..., n, k)"]),
    (lambda: L.qr(np.ones((3, 3)), mode="raw"), NotImplementedError, ["raw"]),
    (lambda: L.qr(np.ones((3, 3)), mode="bad"), ValueError, ["mode"]),
    (lambda: L.slogdet(np.eye(2), method="qr"), NotImplementedError, ["method"]),
    (lambda: L.eigh(np.eye(2), UPLO="X"), ValueError, ["UPLO"]),
    (lambda: L.norm(np.ones((2, 2)), "bad"), ValueError, ["ord"]),
    (lambda: L.norm(np.ones((2, 2, 2)), 2), ValueError, ["axis"]),
    (lambda: L.outer(np.ones((2, 2)), np.ones(2)), ValueError, ["1-d"]),
    (lambda: L.tensorinv(np.ones((2, 3)), ind=1), ValueError, ["tensorinv"]),
    (lambda: L.multi_dot([np.ones((2, 2))]), ValueError, ["two"]),
    (lambda: L.cross(np.ones(4), np.ones(4)), ValueError, ["cross", "4"]),
    (lambda: fnp.matvec(np.ones((2, 3)), np.ones(2)), ValueError, ["matvec", "3", "2"]),
    (lambda: fnp.vecdot(np.ones(3), np.ones(2)), ValueError, ["vecdot"]),
    (lambda: lax.linalg.triangular_solve(np.eye(2, dtype=np.int32), np.ones((2, 2), np.int32), left_side=True),
     TypeError, ["triangular_solve", "float"]),
    (lambda: lax.linalg.triangular_solve(np.eye(2), np.ones((3, 2)), left_side=True), ValueError,
     ["triangular_solve", "(..., 2, k)"]),
    (lambda: fsl.solve_triangular(np.eye(2), np.ones(2), trans=3), ValueError, ["trans"]),
    (lambda: fsl.eigh(np.eye(2), np.eye(2)), NotImplementedError, ["b=None"]),
    (lambda: fsl.schur(np.eye(2), output="bad"), ValueError, ["output"]),
    (lambda: fsl.solve(np.eye(2), np.ones(2), assume_a="banded"), ValueError, ["assume_a"]),
    (lambda: fsl.lu(np.ones(3)), ValueError, ["lu", "matrix"]),
    (lambda: fsl.lu_solve(fsl.lu_factor(np.ones((3, 2))), np.ones(3)), ValueError, ["lu_solve", "square"]),
    (lambda: fsl.hadamard(3), ValueError, ["power of 2"]),
    (lambda: fg.grad(lambda a: fnp.sum(L.qr(a)[1]))(np.ones((2, 3))), NotImplementedError, ["qr", "m >= n"]),
    (lambda: fg.grad(lambda a: fnp.sum(L.svd(a)[0]))(np.eye(3, 2)), NotImplementedError, ["full_matrices"]),
    (lambda: fg.grad(lambda a: fnp.sum(fsl.schur(a)[0]))(np.eye(2)), NotImplementedError, ["schur"]),
])
def test_bad_input_errors(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_float16_is_computed_in_float32(r):
    a = (2 * np.eye(3) + 0.1 * r.standard_normal((3, 3))).astype(np.float16)
    s = spd(r, 3).astype(np.float16)
    for f, ref in [(L.inv, np.linalg.inv), (L.cholesky, np.linalg.cholesky), (L.svdvals, np.linalg.svdvals),
                   (L.eigvalsh, np.linalg.eigvalsh), (L.det, np.linalg.det)]:
        x = s if f in (L.cholesky, L.eigvalsh) else a
        out = f(x)
        assert out.dtype == np.float16
        np.testing.assert_allclose(np.asarray(out, np.float64), ref(x.astype(np.float64)), rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ eig / eigvals (general matrices, complex results)


def cclose(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a, np.complex128), np.asarray(b, np.complex128), rtol=tol, atol=tol)


def distinct_real(r, n, batch=()):
    s = 2 * np.eye(n) + 0.3 * r.standard_normal(batch + (n, n))
    return (s * np.linspace(-2, 2, n)) @ np.linalg.inv(s)


def conj_pair(r):
    s = 2 * np.eye(3) + 0.3 * r.standard_normal((3, 3))
    return s @ np.array([[0.2, 1.3, 0.0], [-1.3, 0.2, 0.0], [0.0, 0.0, 1.8]]) @ np.linalg.inv(s)


def _by_value(w):
    return np.sort_complex(np.asarray(w, np.complex128))


def test_eig_residuals_dtypes_and_batching(r, x64):
    a = r.standard_normal((2, 3, 4, 4))
    w, v = L.eig(a)
    assert w.dtype == v.dtype == np.complex128 and w.shape == (2, 3, 4) and v.shape == (2, 3, 4, 4)
    w, v = np.asarray(w), np.asarray(v)
    cclose(a @ v, v * w[..., None, :], 1e-10)
    cclose(np.linalg.norm(v, axis=-2), np.ones((2, 3, 4)))
    cclose(np.sort_complex(w.reshape(-1, 4)), np.sort_complex(np.linalg.eigvals(a).reshape(-1, 4)))
    cclose(L.eigvals(a), w)
    # left eigenvectors (lax): vl^H a = w vl^H
    w2, vl, vr = lax.linalg.eig(a[0, 0])
    vl = np.asarray(vl)
    cclose(vl.conj().T @ a[0, 0], np.asarray(w2)[:, None] * vl.conj().T, 1e-10)
    # complex input
    c = r.standard_normal((3, 3)) + 1j * r.standard_normal((3, 3))
    cclose(_by_value(L.eigvals(c)), _by_value(np.linalg.eigvals(c)), 1e-8)


def test_eig_dtypes_x32(r, x32):
    a = r.standard_normal((3, 3)).astype(np.float32)
    w, v = L.eig(a)
    assert w.dtype == v.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(a @ np.asarray(v)), np.asarray(v) * np.asarray(w), atol=1e-4)
    assert L.eigvals(fnp.zeros((0, 0))).shape == (0,)


def test_eigvals_jvp_matches_finite_differences(r, x64):
    eps = 1e-6
    for a in (distinct_real(r, 3), conj_pair(r), r.standard_normal((3, 3)) + 1j * r.standard_normal((3, 3))):
        t = r.standard_normal(a.shape) + (1j * r.standard_normal(a.shape) if a.dtype.kind == "c" else 0)
        w, dw = fg.jvp(L.eigvals, (fnp.asarray(a),), (fnp.asarray(t),))
        order = np.argsort(np.asarray(w).real + 1e-3 * np.asarray(w).imag)
        fd = (_by_value(np.linalg.eigvals(a + eps * t)) - _by_value(np.linalg.eigvals(a - eps * t))) / (2 * eps)
        cclose(np.asarray(dw)[order], fd, 1e-6)


def test_eigvals_reverse_mode_and_second_order(r, x64):
    a = conj_pair(r)
    # d/dA of sum(|w|^2) and of the imaginary part of the pair, vs finite differences (check_grads, order 2)
    check_grads(lambda x: fnp.sum(fnp.abs(L.eigvals(x)) ** 2), (a,), order=2, modes=("fwd", "rev"))
    check_grads(lambda x: fnp.max(fnp.imag(L.eigvals(x))), (a,), order=2, modes=("fwd", "rev"))
    # trace identity: sum(w) = trace(a), so its gradient is the identity
    close(fg.grad(lambda x: fnp.real(fnp.sum(L.eigvals(x))))(a), np.eye(3))
    b = r.standard_normal((2, 3, 3))
    g = fg.vmap(fg.grad(lambda x: fnp.sum(fnp.real(L.eigvals(x)) ** 3)))(b)
    close(g, np.stack([fg.grad(lambda x: fnp.sum(fnp.real(L.eigvals(x)) ** 3))(m) for m in b]))


def test_eig_vectors_derivatives_opt_in(r, x64):
    eps = 1e-6
    for left in (False, True):
        for a in (distinct_real(r, 3), r.standard_normal((3, 3)) + 1j * r.standard_normal((3, 3))):
            t = r.standard_normal(a.shape) + (1j * r.standard_normal(a.shape) if a.dtype.kind == "c" else 0)

            def f(x):
                return tuple(lax.linalg.eig(x, compute_left_eigenvectors=left, enable_eigvec_derivs=True))
            outs, tans = fg.jvp(f, (fnp.asarray(a),), (fnp.asarray(t),))
            # central differences of scipy's geev; LAPACK may flip a vector's sign under a tiny perturbation
            # (its normalisation fixes the phase only up to sign), so each column's sign is aligned first
            plus, minus = sl.eig(a + eps * t, left=True), sl.eig(a - eps * t, left=True)
            refs = [(plus[0], minus[0])] + ([(plus[1], minus[1])] if left else []) + [(plus[2], minus[2])]
            for o, d, (p_, m_) in zip(outs, tans, refs):
                if p_.ndim == 2:
                    o = np.asarray(o)
                    p_ = p_ * np.sign(np.real(np.sum(np.conj(o) * p_, axis=0)))
                    m_ = m_ * np.sign(np.real(np.sum(np.conj(o) * m_, axis=0)))
                cclose(d, (p_ - m_) / (2 * eps), 1e-5)
            # the eigen-equations hold to first order: d(A v) = d(v w), d(vl^H A) = d(w vl^H)
            w, dw = np.asarray(outs[0]), np.asarray(tans[0])
            v, dv = np.asarray(outs[-1]), np.asarray(tans[-1])
            cclose(t @ v + a @ dv, dv * w + v * dw, 1e-8)
            # reverse mode is the transpose of the tangent map: <jvp(t), g> = <t, vjp(g)> (Re sum, no conj)
            gs = [r.standard_normal(o.shape) + 1j * r.standard_normal(o.shape) for o in outs]
            _, pull = fg.vjp(f, fnp.asarray(a))
            (ca,) = pull(tuple(fnp.asarray(g) for g in gs))
            assert ca.dtype == a.dtype
            lhs = sum(np.real(np.sum(np.asarray(d) * g)) for d, g in zip(tans, gs))
            np.testing.assert_allclose(lhs, np.real(np.sum(np.asarray(ca) * t)), rtol=1e-9)


def test_eig_transforms(r, x32):
    a = distinct_real(r, 3, (2,)).astype(np.float32)
    w = fg.jit(L.eigvals)(a)
    np.testing.assert_allclose(np.asarray(w), np.asarray(L.eigvals(a)), rtol=1e-5, atol=1e-5)
    wv, vv = fg.vmap(L.eig)(a)
    np.testing.assert_allclose(np.asarray(vv), np.asarray(L.eig(a)[1]), rtol=1e-5, atol=1e-5)
    jac = fg.jit(fg.jacfwd(lambda x: fnp.real(L.eigvals(x))))(a[0])
    assert jac.shape == (3, 3, 3) and np.all(np.isfinite(np.asarray(jac)))


def test_eig_non_finite_input_gives_nan(x64):
    w, v = L.eig(np.array([[1.0, np.nan], [0.0, 1.0]]))
    assert np.all(np.isnan(np.asarray(w))) and np.all(np.isnan(np.asarray(v)))
    # in a stack, only the bad matrix is NaN (eigenvalues only, and with vectors)
    x = np.stack([np.array([[1.0, np.inf], [0.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])])
    for w in (L.eigvals(x), L.eig(x)[0], lax.linalg.eig(x)[0]):
        w = np.asarray(w)
        assert np.all(np.isnan(w[0]))
        cclose(np.sort_complex(w[1]), np.sort_complex(np.linalg.eigvals(x[1])))
    cclose(L.eig(np.array([[3.0]])).eigenvectors, [[1.0]])
    assert L.eig(np.zeros((2, 0, 0))).eigenvalues.shape == (2, 0)


# ------------------------------------------------------------------ sqrtm, funm, rsf2csf, schur(complex), dft


def test_sqrtm_matches_scipy_and_squares_back(r, x64):
    for a in (spd(r, 3), -spd(r, 3), r.standard_normal((4, 4)), r.standard_normal((3, 3)) + 1j):
        x = fsl.sqrtm(a)
        assert x.dtype == np.complex128
        cclose(x, sl.sqrtm(a), 1e-8)
        cclose(np.asarray(x) @ np.asarray(x), a, 1e-8)
    b = r.standard_normal((2, 3, 3))
    cclose(fsl.sqrtm(b), np.stack([sl.sqrtm(m) for m in b]), 1e-8)
    cclose(fg.jit(fsl.sqrtm)(b), fsl.sqrtm(b), 1e-12)


def test_sqrtm_without_a_square_root_is_nan(x64):
    assert np.all(np.isnan(np.asarray(fsl.sqrtm(np.array([[0.0, 1.0], [0.0, 0.0]])))))
    cclose(fsl.sqrtm(np.zeros((2, 2))), np.zeros((2, 2)))


def test_sqrtm_dtype_x32(r, x32):
    assert fsl.sqrtm(spd(r, 3).astype(np.float32)).dtype == np.complex64


def test_funm_matches_scipy_and_expm(r, x64):
    a = distinct_real(r, 3)
    cclose(fsl.funm(a, fnp.exp), sl.expm(a), 1e-9)
    cclose(fsl.funm(a, fnp.sin), sl.funm(a, np.sin), 1e-9)
    c = conj_pair(r)
    cclose(fsl.funm(c, lambda w: w ** 2 + 1.0), c @ c + np.eye(3), 1e-9)
    f, err = fsl.funm(a, fnp.exp, disp=False)
    cclose(f, sl.expm(a), 1e-9)
    assert 0 < float(err) < 1e-10
    cclose(fg.jit(lambda m: fsl.funm(m, fnp.cos))(a), sl.funm(a, np.cos), 1e-9)


def test_rsf2csf_matches_scipy(r, x64):
    for a in (conj_pair(r), r.standard_normal((4, 4)), distinct_real(r, 3)):
        t, z = sl.schur(a)
        t2, z2 = fsl.rsf2csf(t, z)
        rt, rz = sl.rsf2csf(t, z)
        cclose(t2, rt, 1e-10)
        cclose(z2, rz, 1e-10)
        t2, z2 = np.asarray(t2), np.asarray(z2)
        cclose(np.tril(t2, -1), np.zeros_like(t2))
        cclose(z2 @ t2 @ z2.conj().T, a, 1e-10)
    tb, zb = sl.schur(conj_pair(r))
    t2, z2 = fsl.rsf2csf(np.stack([tb, tb]), np.stack([zb, zb]))
    assert t2.shape == (2, 3, 3) and t2.dtype == np.complex128


def test_complex_schur(r, x64):
    a = conj_pair(r)
    t, z = fsl.schur(a, output="complex")
    assert t.dtype == z.dtype == np.complex128
    t, z = np.asarray(t), np.asarray(z)
    cclose(np.tril(t, -1), np.zeros_like(t))
    cclose(z @ z.conj().T, np.eye(3))
    cclose(z @ t @ z.conj().T, a)
    cclose(np.sort_complex(np.diag(t)), np.sort_complex(np.diag(sl.schur(a, output="complex")[0])), 1e-10)
    c = a + 1j * r.standard_normal((3, 3))
    t, z = fsl.schur(c)
    cclose(np.asarray(z) @ np.asarray(t) @ np.asarray(z).conj().T, c)


def test_dft(x64):
    x = np.arange(5.0) ** 2
    cclose(np.asarray(fsl.dft(5)) @ x, np.fft.fft(x))
    cclose(fsl.dft(5, "n"), sl.dft(5, "n"))
    cclose(fsl.dft(4, scale="sqrtn"), sl.dft(4, scale="sqrtn"))
    assert fsl.dft(3).dtype == np.complex128 and fsl.dft(3, dtype=np.complex64).dtype == np.complex64
    assert fsl.dft(0).shape == (0, 0)


def test_dft_x32_dtype(x32):
    assert fsl.dft(3).dtype == np.complex64


@pytest.mark.parametrize("call, exc, words", [
    (lambda: L.eig(np.ones((2, 3))), ValueError, ["eig", "square"]),
    (lambda: L.eigvals(np.ones(3)), ValueError, ["eigvals", "2-d"]),
    (lambda: fg.grad(lambda a: fnp.real(fnp.sum(L.eig(a)[0])))(np.eye(2)), NotImplementedError,
     ["eig", "enable_eigvec_derivs", "eigvals"]),
    (lambda: lax.linalg.eig(np.eye(2), implementation="x"), NotImplementedError, ["implementation"]),
    (lambda: lax.linalg.eig(np.eye(2, dtype=np.int32)), TypeError, ["eig", "float"]),
    (lambda: fsl.sqrtm(np.eye(2), blocksize=2), NotImplementedError, ["blocksize"]),
    (lambda: fsl.sqrtm(np.ones((2, 3))), ValueError, ["sqrtm", "square"]),
    (lambda: fg.grad(lambda a: fnp.real(fnp.sum(fsl.sqrtm(a))))(np.eye(2)), NotImplementedError, ["sqrtm"]),
    (lambda: fsl.funm(np.ones((2, 2, 2)), fnp.exp), ValueError, ["funm", "square"]),
    (lambda: fsl.funm(np.eye(2), 3), TypeError, ["funm", "callable"]),
    (lambda: fsl.funm(np.eye(2), lambda w: fnp.sum(w)), ValueError, ["funm", "(2,)"]),
    (lambda: fg.grad(lambda a: fnp.real(fnp.sum(fsl.funm(a, fnp.exp))))(np.eye(2)), NotImplementedError,
     ["funm", "derivatives"]),
    (lambda: fsl.rsf2csf(np.eye(2), np.eye(3)), ValueError, ["rsf2csf", "size"]),
    (lambda: fsl.rsf2csf(np.ones(2), np.eye(2)), ValueError, ["rsf2csf", "T"]),
    (lambda: fsl.dft(3, scale="bad"), ValueError, ["scale"]),
    (lambda: fsl.dft(3, dtype=np.float32), ValueError, ["complex"]),
    (lambda: fsl.dft(2.5), TypeError, ["integer"]),
])
def test_complex_linalg_errors(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_complex_solves_through_lu(r, x64):
    # lu / triangular_solve accept complex matrices (needed by eig's rules): solve, inv, det and the scipy
    # solvers then work on complex input too, with JAX's (unconjugated) cotangent convention.
    a = 2 * np.eye(3) + 0.3 * (r.standard_normal((3, 3)) + 1j * r.standard_normal((3, 3)))
    b = r.standard_normal((3, 2)) + 1j * r.standard_normal((3, 2))
    cclose(L.solve(a, b), np.linalg.solve(a, b))
    cclose(L.inv(a), np.linalg.inv(a))
    cclose(L.det(a), np.linalg.det(a))
    cclose(L.slogdet(a)[0], np.linalg.slogdet(a)[0])
    for trans in (0, 1, 2, "C"):
        cclose(fsl.solve_triangular(a, b, trans=trans, lower=True), sl.solve_triangular(a, b, trans=trans, lower=True))
    for trans in (0, 1, 2):
        cclose(fsl.lu_solve(fsl.lu_factor(a), b, trans=trans), sl.lu_solve(sl.lu_factor(a), b, trans=trans))
    x = lax.linalg.triangular_solve(np.triu(a), b.T, left_side=False, lower=False, conjugate_a=True, transpose_a=True)
    cclose(np.asarray(x) @ np.triu(a).conj().T, b.T)
    check_grads(lambda m: fnp.sum(fnp.abs(L.solve(m, b)) ** 2), (a,), order=2, modes=("fwd", "rev"))
    check_grads(lambda m: fnp.abs(L.det(m)), (a,), order=1, modes=("fwd", "rev"))
    with pytest.raises(TypeError, match="cholesky"):
        L.cholesky(a @ a.conj().T)
