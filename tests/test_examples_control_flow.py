"""The control-flow examples run and learn: ``examples/char_rnn.py`` (a GRU over time with ``lax.scan``)
and ``examples/neural_ode.py`` (an adaptive solver in ``lax.while_loop``, differentiated in reverse).

Tiny configurations, eager (``--no-jit``) so that nothing waits for numba
to compile; the examples themselves run jitted, and the jitted loops are
tested in ``tests/test_control_flow.py``.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.testing import check_close

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, "examples")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def char_rnn():
    return _load("char_rnn")


@pytest.fixture(scope="module")
def neural_ode():
    return _load("neural_ode")


# ----------------------------------------------------------------------------- char_rnn


def test_char_rnn_corpus(char_rnn):
    text = char_rnn.make_text(50, seed=3)
    assert text == char_rnn.make_text(50, seed=3) and text != char_rnn.make_text(50, seed=4)
    corpus = char_rnn.make_corpus(text, val_fraction=0.2)
    assert len(corpus.train) + len(corpus.val) == len(text)
    assert corpus.decode(corpus.train[:30].tolist()) == text[:30]
    assert corpus.decode(corpus.encode("the keeper").tolist()) == "the keeper"


def test_gru_scan_matches_a_python_loop(char_rnn):
    # The scanned GRU against the same cell stepped by hand in float64 numpy.
    from funcgrad import random
    params = char_rnn.init_params(random.key(1), vocab_size=7, hidden=5)
    tokens = np.random.default_rng(0).integers(0, 7, size=(3, 6)).astype(np.int32)
    h0 = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    logits, h_last = char_rnn.logits_over_time(params, tokens, h0)
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    sig = lambda x: 1 / (1 + np.exp(-x))   # noqa: E731
    h, want = h0.astype(np.float64), []
    for t in range(tokens.shape[1]):
        x, hr = p["inputs"][tokens[:, t]] + p["bias"], h @ p["recurrent"]
        z, r = sig(x[:, :5] + hr[:, :5]), sig(x[:, 5:10] + hr[:, 5:10])
        h = (1 - z) * np.tanh(x[:, 10:] + r * hr[:, 10:]) + z * h
        want.append(h @ p["out_w"] + p["out_b"])
    check_close(logits, np.stack(want), atol=1e-5, what="scanned GRU logits")
    check_close(h_last, h, atol=1e-5, what="last hidden state")


def test_char_rnn_trains(char_rnn):
    lines: list[str] = []
    args = char_rnn.parse_args(["--steps", "40", "--hidden", "24", "--seq-len", "16", "--batch-size", "16",
                                "--lr", "3e-2", "--eval-every", "20", "--eval-batches", "2", "--sample-chars", "12",
                                "--no-jit"])
    result = char_rnn.train(args, char_rnn.make_corpus(char_rnn.make_text(300)), log=lines.append)
    initial, final = result["val_loss"][0], result["val_loss"][-1]
    assert final < initial - 0.5, lines
    assert np.mean(result["train_loss"][-5:]) < np.mean(result["train_loss"][:5]) - 0.5, lines
    assert final < result["unigram_entropy"], lines        # it uses the context
    assert len(result["sample"]) == len("The ") + 12
    assert any(line.startswith("step 40: train") for line in lines), lines


# ----------------------------------------------------------------------------- neural_ode


def test_adaptive_solver_against_a_float64_reference(neural_ode):
    # The while_loop solver on the true pendulum against fixed-step float64 RK4.
    def pendulum(y):
        return fnp.stack([y[:, 1], -fnp.sin(y[:, 0]) - neural_ode.DAMPING * y[:, 1]], axis=-1)

    y0 = neural_ode.initial_states(np.random.default_rng(0), 5)
    want = neural_ode.reference_states(y0, np.array([0.0, 3.0]))[-1]
    counts = []
    for rtol in (1e-3, 1e-5):
        y1, _, steps = neural_ode.odeint(pendulum, y0, 0.0, 3.0, 0.1, rtol=rtol, atol=rtol * 1e-2)
        check_close(y1, want, atol=30 * rtol, what=f"pendulum at t=3, rtol={rtol}")
        counts.append(int(steps))
    assert counts[1] > 2 * counts[0], f"a tighter tolerance should take more steps: {counts}"


def test_gradient_through_the_adaptive_loop(neural_ode):
    # dy/dt = -a y: y(2) = y0 exp(-2a), so d sum(y(2)) / da = -2 sum(y0) exp(-2a); checkpointed or not.
    y0 = fnp.array([0.5, 1.0, 2.0])

    def final(a, checkpoints):
        y1, _, _ = neural_ode.odeint(lambda y: -a * y, y0, 0.0, 2.0, 0.1, rtol=1e-5, atol=1e-7,
                                     checkpoints=checkpoints)
        return fnp.sum(y1)

    a = 0.7
    want = -2 * 3.5 * np.exp(-2 * a)
    for checkpoints in (None, 2):
        check_close(fg.grad(final)(fnp.float32(a), checkpoints), want, rtol=1e-3,
                    what=f"d y(2)/da, checkpoints={checkpoints}")


def test_neural_ode_trains_and_measures_memory(neural_ode):
    lines: list[str] = []
    args = neural_ode.parse_args(["--steps", "15", "--trajectories", "16", "--test-trajectories", "16",
                                  "--hidden", "16", "--lr", "3e-2", "--horizon", "2", "--log-every", "5",
                                  "--memory-rtols", "1e-2", "1e-4", "--memory-trajectories", "32",
                                  "--memory-checkpoints", "2", "--no-jit"])
    result = neural_ode.train(args, log=lines.append)
    assert result["final_test"] < 0.5 * result["initial_test"], lines
    assert all(n >= 4 for n in result["solver_steps"]), result["solver_steps"]   # 4 intervals, >= 1 step each
    loose, tight = result["memory_rows"]
    assert tight["steps"] > 2 * loose["steps"], lines
    for row in (loose, tight):
        # Recomputing from checkpoints gives the gradient that keeping every carry gives.
        for got, want in zip(fg.tree_util.tree_leaves(row["checkpointed_grads"]),
                             fg.tree_util.tree_leaves(row["all_grads"])):
            check_close(got, want, atol=1e-6, rtol=1e-4, what=f"checkpointed gradient, rtol={row['rtol']}")
    table = [line for line in lines if line.count("MiB") == 2]
    assert len(table) == 2 and table[1].split()[:2] == ["0.0001", str(tight["steps"])], lines
