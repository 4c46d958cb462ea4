# pyright: standard
"""Typical user code: it must type-check clean (tests/test_static_checks.py runs the type checker on it).

It is also run by the tests, so every line is real, working funcgrad code.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import funcgrad as fg
import funcgrad.nn as nn
import funcgrad.numpy as fnp
from funcgrad import optim, random
from funcgrad.typing import Array, ArrayLike, DTypeLike, PyTree, Shape


def predict(w: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    return fnp.tanh(fnp.dot(x, w) + b)


def loss(params: PyTree, x: ArrayLike, y: ArrayLike) -> Array:
    w, b = params
    err = predict(w, b, x) - fnp.asarray(y)
    return fnp.mean(err ** 2)


def first_steps() -> float:
    x = fnp.ones((4, 3))
    y = fnp.zeros(4)
    params = (fnp.ones(3) * 0.1, fnp.zeros(()))
    grads = fg.grad(loss)(params, x, y)
    value, _ = fg.value_and_grad(loss)(params, x, y)
    fast = fg.jit(loss)
    batched = fg.vmap(lambda row: fnp.sum(row * 2.0))(x)
    jac = fg.jacrev(fnp.sin)(fnp.arange(3.0))
    out, tangent = fg.jvp(fnp.exp, (1.0,), (1.0,))
    new_w: Array = params[0] - 0.1 * grads[0]
    total = fast(params, x, y) + batched.sum() + jac.sum() + out * tangent + new_w.mean()
    return float(value) + float(total)


def array_code(dtype: DTypeLike = fnp.float32) -> Shape:
    a = fnp.arange(6.0).reshape(2, 3).astype(dtype)
    b = fnp.zeros((3, 2), dtype=dtype)
    c = a @ b + 1.0
    d = fnp.concatenate([c, c], axis=0)
    e = fnp.where(d > 0, fnp.sqrt(fnp.where(d > 0, d, 1.0)), 0.0)
    f = e.at[0, 0].set(5.0)
    g = fnp.max(f, axis=(0, 1), keepdims=True)
    h = fnp.linalg.norm(f - g) + fnp.sum(f, axis=0)[0] + f.T[0, 1] - abs(-f)[1, 1]
    i = fnp.asarray(np.ones(3, np.float32)) * h
    return tuple(int(s) for s in i.shape) + f.shape


def model_code() -> float:
    model = nn.Sequential(nn.Linear(8), nn.ReLU(), nn.Linear(2))
    key, data_key = random.split(random.key(0))
    params, _ = model.init(key, (-1, 4))
    x = random.normal(data_key, (5, 4))
    labels = fnp.asarray([0, 1, 0, 1, 1])

    def objective(p: PyTree) -> Array:
        return nn.cross_entropy(model.apply(p, x), labels)

    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-2))
    state = opt.init(params)

    @fg.jit
    def step(p: PyTree, s: Any) -> tuple[PyTree, Any, Array]:
        value, grads = fg.value_and_grad(objective)(p)
        updates, s = opt.update(grads, s, p)
        return optim.apply_updates(p, updates), s, value

    first = last = 0.0
    for n in range(3):
        params, state, value = step(params, state)
        last = float(value)
        first = last if n == 0 else first
    return first - last


if __name__ == "__main__":
    print(first_steps(), array_code(), model_code())
