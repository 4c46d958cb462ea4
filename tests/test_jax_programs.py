"""Real JAX programs with only the imports changed: each must run on funcgrad and agree with numpy.

The programs follow examples from JAX's documentation (Gaussian-process regression, an HMM's forward
algorithm, a finite-horizon LQR, PCA, the autodiff cookbook and its complex-number section, a training
loop, numpy-style utilities, JAX's out-of-bounds indexing, jit on a method).  Their bodies are written
exactly as for JAX; only the import block below differs.  References are float64 numpy/scipy
computations written independently, and finite differences.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import scipy.linalg

# -- the only lines that differ from the JAX originals -------------------------------------------
import funcgrad as jax
import funcgrad.numpy as jnp
from funcgrad import lax, random
from funcgrad.scipy.linalg import cho_factor, cho_solve, solve_triangular
from funcgrad.scipy.special import logsumexp
# -------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _x64():
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


def _fd_grad(f, x, eps=1e-6):
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


# 1. Gaussian-process regression: Cholesky, triangular solves, the marginal likelihood and its gradient.
def _rbf(x1, x2, log_ell, xp):
    d = x1[:, None, :] - x2[None, :, :]
    return xp.exp(-0.5 * xp.sum(d * d, axis=-1) / xp.exp(2 * log_ell))


def _gp_nll(log_ell, x, y, xp, chol, tri):
    k = _rbf(x, x, log_ell, xp) + 1e-2 * xp.eye(x.shape[0])
    L = chol(k)
    alpha = tri(L.T, tri(L, y, lower=True), lower=False)
    return 0.5 * y @ alpha + xp.sum(xp.log(xp.diag(L))) + 0.5 * x.shape[0] * xp.log(2 * xp.pi)


def test_gaussian_process_regression():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (12, 1))
    y = np.sin(2 * x[:, 0]) + 0.05 * rng.standard_normal(12)

    def nll(log_ell):
        return _gp_nll(log_ell, jnp.asarray(x), jnp.asarray(y), jnp, jnp.linalg.cholesky, solve_triangular)

    def nll_np(log_ell):
        return _gp_nll(log_ell, x, y, np, np.linalg.cholesky, scipy.linalg.solve_triangular)

    value, g = jax.value_and_grad(nll)(0.1)
    assert abs(float(value) - nll_np(0.1)) < 1e-9
    assert abs(float(g) - _fd_grad(nll_np, 0.1)) < 1e-6
    # The posterior mean through cho_factor/cho_solve, jitted.
    xs = np.linspace(-2, 2, 7)[:, None]

    @jax.jit
    def posterior_mean(x, y, xs):
        c = cho_factor(_rbf(x, x, 0.1, jnp) + 1e-2 * jnp.eye(x.shape[0]))
        return _rbf(xs, x, 0.1, jnp) @ cho_solve(c, y)

    k = _rbf(x, x, 0.1, np) + 1e-2 * np.eye(12)
    want = _rbf(xs, x, 0.1, np) @ np.linalg.solve(k, y)
    np.testing.assert_allclose(np.asarray(posterior_mean(x, y, xs)), want, rtol=1e-9, atol=1e-9)


# 2. An HMM's forward algorithm with lax.scan and logsumexp, against enumerating every path.
def test_hmm_forward_algorithm():
    rng = np.random.default_rng(1)
    n_states, n_obs, T = 3, 4, 5
    log_a = np.log(rng.dirichlet(np.ones(n_states), n_states))
    log_b = np.log(rng.dirichlet(np.ones(n_obs), n_states))
    log_pi = np.log(rng.dirichlet(np.ones(n_states)))
    obs = rng.integers(0, n_obs, T)

    def log_likelihood(log_a, log_b, log_pi, obs):
        log_a, log_b = jnp.asarray(log_a), jnp.asarray(log_b)

        def step(log_alpha, o):
            log_alpha = logsumexp(log_alpha[:, None] + log_a, axis=0) + log_b[:, o]
            return log_alpha, log_alpha
        init = log_pi + log_b[:, obs[0]]
        final, _ = lax.scan(step, init, obs[1:])
        return logsumexp(final)

    total = 0.0
    for path in itertools.product(range(n_states), repeat=T):
        lp = log_pi[path[0]] + log_b[path[0], obs[0]]
        for t in range(1, T):
            lp += log_a[path[t - 1], path[t]] + log_b[path[t], obs[t]]
        total += np.exp(lp)
    got = jax.jit(log_likelihood)(log_a, log_b, log_pi, obs)
    assert abs(float(got) - np.log(total)) < 1e-10
    g = jax.grad(log_likelihood, argnums=2)(log_a, log_b, log_pi, obs)
    want = _fd_grad(lambda p: float(log_likelihood(log_a, log_b, p, obs)), log_pi)
    np.testing.assert_allclose(np.asarray(g), want, atol=1e-6)


# 3. Finite-horizon LQR: a backward Riccati recursion with scan(reverse=True) and linalg.solve.
def test_lqr_riccati_recursion():
    rng = np.random.default_rng(2)
    n, m, T = 3, 2, 6
    A = np.eye(n) + 0.1 * rng.standard_normal((n, n))
    B = rng.standard_normal((n, m))
    Q, R = np.eye(n), 0.5 * np.eye(m)

    def gains(A, B, Q, R):
        def step(P, _):
            K = jnp.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
            P = Q + A.T @ P @ (A - B @ K)
            return P, K
        _, Ks = lax.scan(step, Q, None, length=T, reverse=True)
        return Ks

    P, want = Q, []
    for _ in range(T):
        K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
        P = Q + A.T @ P @ (A - B @ K)
        want.append(K)
    np.testing.assert_allclose(np.asarray(gains(A, B, Q, R)), np.stack(want[::-1]), rtol=1e-9, atol=1e-12)

    def cost(x0):
        Ks = gains(A, B, Q, R)

        def roll(x, K):
            u = -K @ x
            return A @ x + B @ u, x @ Q @ x + u @ R @ u
        _, c = lax.scan(roll, x0, Ks)
        return jnp.sum(c)

    x0 = rng.standard_normal(n)
    g = jax.grad(cost)(x0)
    np.testing.assert_allclose(np.asarray(g), _fd_grad(lambda x: float(cost(x)), x0), rtol=1e-6, atol=1e-7)


# 4. PCA through the SVD, against the eigendecomposition of the covariance.
def test_pca():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 4)) @ np.diag([3.0, 2.0, 1.0, 0.5])

    def pca(x, k):
        xc = x - jnp.mean(x, axis=0)
        u, s, vt = jnp.linalg.svd(xc, full_matrices=False)
        explained = s ** 2 / (x.shape[0] - 1)
        return xc @ vt[:k].T, explained[:k]

    proj, var = pca(jnp.asarray(x), 2)
    w, v = np.linalg.eigh(np.cov(x, rowvar=False))
    order = np.argsort(w)[::-1][:2]
    np.testing.assert_allclose(np.asarray(var), w[order], rtol=1e-9)
    want = (x - x.mean(0)) @ v[:, order]
    np.testing.assert_allclose(np.abs(np.asarray(proj)), np.abs(want), rtol=1e-7, atol=1e-9)


# 5. The autodiff cookbook's logistic-regression example: grad, jacfwd, jacrev, hessian, vmap, jvp, vjp.
def test_autodiff_cookbook():
    rng = np.random.default_rng(4)
    inputs = rng.standard_normal((4, 3))
    targets = np.array([True, True, False, True])
    W, b = rng.standard_normal(3), 0.3

    def predict(W, b, inputs):
        return jax.nn.sigmoid(jnp.dot(inputs, W) + b)

    def loss(W, b):
        preds = predict(W, b, inputs)
        label_probs = preds * targets + (1 - preds) * (1 - targets)
        return -jnp.sum(jnp.log(label_probs))

    def loss_np(W, b=b):
        p = 1 / (1 + np.exp(-(inputs @ W + b)))
        return -np.sum(np.log(p * targets + (1 - p) * (1 - targets)))

    W_grad, b_grad = jax.grad(loss, (0, 1))(W, b)
    np.testing.assert_allclose(np.asarray(W_grad), _fd_grad(loss_np, W), atol=1e-6)
    assert abs(float(b_grad) - _fd_grad(lambda bb: loss_np(W, bb), b)) < 1e-6
    J_fwd = jax.jacfwd(predict, argnums=0)(W, b, inputs)
    J_rev = jax.jacrev(predict, argnums=0)(W, b, inputs)
    p = 1 / (1 + np.exp(-(inputs @ W + b)))
    np.testing.assert_allclose(np.asarray(J_fwd), (p * (1 - p))[:, None] * inputs, atol=1e-12)
    np.testing.assert_allclose(np.asarray(J_rev), np.asarray(J_fwd), atol=1e-12)
    H = jax.hessian(loss)(W, b)
    H_fd = np.stack([_fd_grad(lambda w: _fd_grad(loss_np, w, 1e-5)[i], W, 1e-4) for i in range(3)])
    np.testing.assert_allclose(np.asarray(H), H_fd, atol=1e-4)
    per_example = jax.vmap(jax.grad(lambda W, x: jnp.sum(predict(W, b, x))), in_axes=(None, 0))(W, inputs)
    np.testing.assert_allclose(np.asarray(per_example), (p * (1 - p))[:, None] * inputs, atol=1e-12)
    v = rng.standard_normal(3)
    _, tangent = jax.jvp(lambda W: loss(W, b), (W,), (v,))
    assert abs(float(tangent) - _fd_grad(loss_np, W) @ v) < 1e-6
    _, pullback = jax.vjp(lambda W: predict(W, b, inputs), W)
    ct = rng.standard_normal(4)
    np.testing.assert_allclose(np.asarray(pullback(ct)[0]), ct @ np.asarray(J_rev), atol=1e-12)


# 6. The cookbook's complex-number section.
def test_complex_differentiation():
    def f(z):
        return jnp.abs(z) ** 2
    assert complex(jax.grad(f)(3.0 + 4.0j)) == pytest.approx(6.0 - 8.0j)
    assert complex(jax.grad(jnp.sin, holomorphic=True)(1.0 + 2.0j)) == pytest.approx(np.cos(1.0 + 2.0j))

    def g(z):
        x, y = jnp.real(z), jnp.imag(z)
        return x ** 2 + y ** 2
    z = 3.0 + 4.0j
    assert complex(jax.grad(g)(z)) == pytest.approx(complex(jax.grad(f)(z)))
    A = np.array([[5.0, 2.0 + 3.0j], [2.0 - 3.0j, 7.0]])
    tr = jax.grad(lambda X: jnp.real(jnp.trace(X @ X)))(A)
    # JAX's convention for a real function of complex inputs: df/dx - i df/dy, by finite differences here.
    def f_np(re, im):
        X = re + 1j * im
        return np.real(np.trace(X @ X))
    want = _fd_grad(lambda re: f_np(re, A.imag), A.real) - 1j * _fd_grad(lambda im: f_np(A.real, im), A.imag)
    np.testing.assert_allclose(np.asarray(tr), want, atol=1e-6)


# 7. A training loop in the style of JAX's tutorials: jax.tree, typed keys, shuffling, f-strings.
def test_training_loop():
    key = random.key(0)
    key, k1, k2 = random.split(key, 3)
    X = np.asarray(random.normal(k1, (64, 3)), np.float64)
    true_w = np.array([1.0, -2.0, 0.5])
    y = X @ true_w + 0.7
    params = {"w": jnp.zeros(3), "b": jnp.zeros(())}

    def loss(params, x, y):
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    @jax.jit
    def update(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    lines = []
    for epoch in range(40):
        key, sub = random.split(key)
        perm = random.permutation(sub, 64)
        for i in range(0, 64, 16):
            idx = perm[i:i + 16]
            params = update(params, X[idx], y[idx])
        lines.append(f"epoch {epoch}: loss {loss(params, X, y):.4f}")
    assert lines[-1].startswith("epoch 39: loss ") and float(lines[-1].split()[-1]) < 1e-3
    w_ls = np.linalg.lstsq(np.c_[X, np.ones(64)], y, rcond=None)[0]
    np.testing.assert_allclose(np.asarray(params["w"]), w_ls[:3], atol=1e-2)
    assert jax.tree.structure(params) == jax.tree.structure({"w": 0, "b": 0})
    shapes = jax.tree.map(lambda p: tuple(p.shape), params, is_leaf=lambda p: hasattr(p, "shape"))
    assert shapes == {"w": (3,), "b": ()}


# 8. numpy utilities a real program reaches for.
def test_numpy_utilities():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 5))
    checks = [
        (jnp.sort(x, axis=1), np.sort(x, axis=1)),
        (jnp.argsort(x[0]), np.argsort(x[0])),
        (jnp.cumprod(x, axis=0), np.cumprod(x, axis=0)),
        (jnp.diff(x, axis=1), np.diff(x, axis=1)),
        (jnp.meshgrid(jnp.arange(3), jnp.arange(2))[0], np.meshgrid(np.arange(3), np.arange(2))[0]),
        (jnp.interp(0.3, jnp.array([0.0, 1.0]), jnp.array([1.0, 3.0])), np.interp(0.3, [0.0, 1.0], [1.0, 3.0])),
        (jnp.vstack([x, x]), np.vstack([x, x])), (jnp.hstack([x, x]), np.hstack([x, x])),
        (jnp.all(x > -10), np.all(x > -10)), (jnp.any(x > 10), np.any(x > 10)),
        (jnp.diag(x[:, :4]), np.diag(x[:, :4])), (jnp.trace(x), np.trace(x)),
        (jnp.roll(x, 2, axis=1), np.roll(x, 2, axis=1)),
        (jnp.logaddexp(x, 1.0), np.logaddexp(x, 1.0)),
        (jnp.isinf(jnp.array([1.0, jnp.inf])), np.isinf([1.0, np.inf])),
        (jnp.linalg.det(x[:, :4]), np.linalg.det(x[:, :4])),
        (jnp.linalg.inv(x[:, :4] + 4 * np.eye(4)), np.linalg.inv(x[:, :4] + 4 * np.eye(4))),
    ]
    for got, want in checks:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)
    assert bool(jnp.allclose(x, x + 1e-12))


# 9. JAX's out-of-bounds indexing: gathers clamp, scatters drop, explicit modes.
def test_out_of_bounds_indexing():
    x = jnp.arange(5.0)

    @jax.jit
    def get(x, i):
        return x[i]

    assert float(get(x, 10)) == 4.0
    assert float(get(x, -1)) == 4.0
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: x.at[10].set(9.0))(x)), np.arange(5.0))
    assert float(x.at[10].get(mode="fill", fill_value=-1.0)) == -1.0
    np.testing.assert_array_equal(np.asarray(jnp.take(x, jnp.array([1, 7]), mode="clip")), [1.0, 4.0])


# 10. jit on a method, the way JAX's FAQ shows it.
class Scaler:
    def __init__(self, factor):
        self.factor = factor

    @functools.partial(jax.jit, static_argnums=0)
    def apply(self, x):
        return x * self.factor

    def __hash__(self):
        return hash(self.factor)

    def __eq__(self, other):
        return isinstance(other, Scaler) and other.factor == self.factor


def test_jit_on_a_method():
    np.testing.assert_allclose(np.asarray(Scaler(3.0).apply(jnp.arange(3.0))), [0.0, 3.0, 6.0])
    np.testing.assert_allclose(np.asarray(Scaler(2.0).apply(jnp.arange(3.0))), [0.0, 2.0, 4.0])
