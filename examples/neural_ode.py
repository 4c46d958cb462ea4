"""A neural ODE learns a damped pendulum: an adaptive-step solver inside ``lax.while_loop``, trained by
``fg.grad`` through the loop.

    python examples/neural_ode.py                        # under a minute on 2 cores
    python examples/neural_ode.py --steps 600 --rtol 1e-4
    python examples/neural_ode.py --steps 3 --trajectories 16 --no-jit --memory-rtols 1e-2 1e-3   # smoke test

The model is a vector field ``dy/dt = f_theta(y)`` (an MLP over the state
``y = (angle, angular velocity)``), fitted so that its solutions pass through
observed states of a damped pendulum (``angle'' = -sin(angle) - 0.2 angle'``)
at times 0.5, 1.0, ..., 4.0 from many starting points.

The solver is Bogacki-Shampine 3(2) with error control (``ode23``): each
step makes a third- and a second-order estimate, accepts the step when
their difference is within ``atol + rtol * |y|``, and rescales ``dt``
either way. How many steps that takes depends on the values (the state, the
model's parameters, the tolerance), so the loop is a ``lax.while_loop``;
one ``lax.scan`` over the observation times calls it once per interval.

``fg.grad`` differentiates straight through the loop: the gradient of the
discrete solution that was computed, step for step (the step-size
controller sits behind ``fg.stop_gradient``, so the sequence of steps is
taken as given). JAX refuses reverse-mode derivatives of ``while_loop``;
here the backward pass replays the loop from kept carries. By default it
keeps every carry, so memory grows with the trip count; ``--checkpoints k``
keeps at most ``2k`` and recomputes the rest. At the end the example
measures this: the backward pass's peak memory (``tracemalloc``) and time
against the trip count (tighter tolerances, more steps), with and without
checkpoints.
"""
from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from typing import Any, Callable, Sequence

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import lax, nn, optim, random

DAMPING = 0.2

# --------------------------------------------------------------------------
# Data: a damped pendulum, integrated accurately in float64 with numpy
# --------------------------------------------------------------------------


def pendulum(y: np.ndarray) -> np.ndarray:
    """The true vector field: ``y[..., 0]`` the angle, ``y[..., 1]`` the angular velocity."""
    angle, velocity = y[..., 0], y[..., 1]
    return np.stack([velocity, -np.sin(angle) - DAMPING * velocity], axis=-1)


def reference_states(y0: np.ndarray, times: np.ndarray, substeps: int = 200) -> np.ndarray:
    """float64 states f64[len(times), B, 2] at ``times`` (``times[0]`` is the start), by classical RK4
    with ``substeps`` fixed steps per interval."""
    out, y = [y0.astype(np.float64)], y0.astype(np.float64)
    for t0, t1 in zip(times[:-1], times[1:]):
        h = (t1 - t0) / substeps
        for _ in range(substeps):
            k1 = pendulum(y)
            k2 = pendulum(y + h / 2 * k1)
            k3 = pendulum(y + h / 2 * k2)
            k4 = pendulum(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return np.stack(out)


def initial_states(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` starting states, angle in [-2, 2] and velocity in [-1.5, 1.5] (f32[n, 2])."""
    return np.stack([rng.uniform(-2, 2, n), rng.uniform(-1.5, 1.5, n)], axis=-1).astype(np.float32)


# --------------------------------------------------------------------------
# The solver: Bogacki-Shampine 3(2) in a while_loop
# --------------------------------------------------------------------------


def bogacki_shampine_step(f: Callable, y: Any, dt: Any) -> tuple[Any, Any]:
    """One step of size ``dt``: (the third-order solution, its error estimate against the second-order one)."""
    k1 = f(y)
    k2 = f(y + (0.5 * dt) * k1)
    k3 = f(y + (0.75 * dt) * k2)
    y_new = y + dt * ((2 / 9) * k1 + (1 / 3) * k2 + (4 / 9) * k3)
    k4 = f(y_new)
    error = dt * ((-5 / 72) * k1 + (1 / 12) * k2 + (1 / 9) * k3 - (1 / 8) * k4)
    return y_new, error


def odeint(f: Callable, y0: Any, t0: Any, t1: Any, dt0: Any, *, rtol: float, atol: float,
           checkpoints: int | None = None, max_steps: int = 20_000) -> tuple[Any, Any, Any]:
    """Integrate ``dy/dt = f(y)`` from ``t0`` to ``t1`` with adaptive steps: (y at t1, the next step size,
    the number of steps tried, accepted or not).

    The trip count depends on the values, so this is a ``lax.while_loop``
    (``checkpoints`` as there: bounds the memory of its backward pass).

    >>> y1, dt, steps = odeint(lambda y: -y, fnp.ones(3), 0.0, 1.0, 0.1, rtol=1e-4, atol=1e-6)   # y1 ~ exp(-1)
    """
    done_within = 1e-6 * (t1 - t0)            # float32 time: stop within a hair of t1

    def going(carry):
        t, _, _, steps = carry
        return fnp.logical_and(t1 - t > done_within, steps < max_steps)

    def step(carry):
        t, y, dt, steps = carry
        dt = fnp.minimum(dt, t1 - t)
        y_new, error = bogacki_shampine_step(f, y, dt)
        scale = atol + rtol * fnp.maximum(fnp.abs(y), fnp.abs(y_new))
        # The controller picks the steps; the gradient is that of the solution along those steps.
        error_norm = fg.stop_gradient(fnp.sqrt(fnp.mean((error / scale) ** 2)))
        accept = error_norm <= 1.0
        factor = fnp.clip(0.9 * fnp.maximum(error_norm, 1e-10) ** (-1 / 3), 0.2, 5.0)
        return (fnp.where(accept, t + dt, t), fnp.where(accept, y_new, y), dt * factor, steps + 1)

    carry = (fnp.asarray(t0, dtype=fnp.float32), y0, fnp.asarray(dt0, dtype=fnp.float32), fnp.int32(0))
    _, y1, dt, steps = lax.while_loop(going, step, carry, checkpoints=checkpoints)
    return y1, dt, steps


def solve_at(f: Callable, y0: Any, times: Any, *, rtol: float, atol: float,
             checkpoints: int | None = None) -> tuple[Any, Any]:
    """States at ``times[1:]`` (f32[K, B, 2]) from ``y0`` at ``times[0]``, and the total number of solver
    steps: a ``lax.scan`` over the observation times, one adaptive ``odeint`` per interval."""

    def interval(carry, t_next):
        t, y, dt, total = carry
        y, dt, steps = odeint(f, y, t, t_next, dt, rtol=rtol, atol=atol, checkpoints=checkpoints)
        return (t_next, y, dt, total + steps), y

    start = (times[0], y0, fnp.float32(0.1), fnp.int32(0))
    (_, _, _, total), ys = lax.scan(interval, start, times[1:])
    return ys, total


# --------------------------------------------------------------------------
# Model and training
# --------------------------------------------------------------------------


def make_model(hidden: int) -> nn.Sequential:
    """The vector field: 2 -> hidden -> hidden -> 2, tanh; the last layer starts at zero (f = 0: the state
    stays where it starts, a reasonable first guess)."""
    return nn.Sequential(nn.Linear(hidden), nn.Tanh(), nn.Linear(hidden), nn.Tanh(),
                         nn.Linear(2, w_init=nn.initializers.zeros))


def make_loss(model: nn.Sequential, times: np.ndarray, rtol: float, atol: float,
              checkpoints: int | None) -> Callable:
    """``loss(params, y0, targets) -> (mean squared error over the observations, solver steps)``."""
    times = fnp.asarray(times, dtype=fnp.float32)
    # Tolerances as arrays, not Python floats: then they are inputs of the compiled kernels rather than
    # constants written into them, and the memory table below reuses these kernels.
    rtol, atol = np.asarray(rtol, np.float32), np.asarray(atol, np.float32)

    def loss(params, y0, targets):
        ys, steps = solve_at(lambda y: model.apply(params, y), y0, times, rtol=rtol, atol=atol,
                             checkpoints=checkpoints)
        return fnp.mean((ys - targets) ** 2), steps

    return loss


def train(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict:
    """Fit the model for ``args.steps`` Adam steps; returns the losses, solver step counts, test errors,
    the parameters and the memory table's rows."""
    rng = np.random.default_rng(args.seed)
    times = np.arange(0.0, args.horizon + 1e-9, args.interval)
    y_train, y_test = initial_states(rng, args.trajectories), initial_states(rng, args.test_trajectories)
    targets_train = reference_states(y_train, times)[1:].astype(np.float32)
    targets_test = reference_states(y_test, times)[1:].astype(np.float32)

    model = make_model(args.hidden)
    params, _ = model.init(random.key(args.seed), (-1, 2))
    opt = optim.adam(optim.warmup_cosine_decay_schedule(args.lr, args.lr, 0, args.steps, end_value=args.lr / 10))
    opt_state = opt.init(params)
    loss = make_loss(model, times, args.rtol, args.atol, args.checkpoints)
    compile_ = fg.jit if args.jit else (lambda f: f)

    @compile_
    def train_step(params, opt_state, y0, targets):
        (value, steps), grads = fg.value_and_grad(loss, has_aux=True)(params, y0, targets)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, value, steps

    test_loss = compile_(loss)
    initial_test, _ = test_loss(params, y_test, targets_test)
    log(f"{args.trajectories} training / {args.test_trajectories} test trajectories, observed at t = "
        f"{', '.join(f'{t:g}' for t in times[1:])}; MLP 2-{args.hidden}-{args.hidden}-2; rtol {args.rtol:g}, "
        f"checkpoints {args.checkpoints}")
    log(f"initial test error {float(initial_test):.4f} (mean squared, the states staying where they start)")

    history: dict[str, list] = {"loss": [], "solver_steps": []}
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        batch = rng.choice(args.trajectories, size=min(args.batch_size, args.trajectories), replace=False)
        params, opt_state, value, steps = train_step(params, opt_state, y_train[batch], targets_train[:, batch])
        history["loss"].append(float(value))
        history["solver_steps"].append(int(steps))
        if step == 1 or step % args.log_every == 0 or step == args.steps:
            log(f"step {step}: loss {float(value):.5f}, {int(steps)} solver steps over "
                f"{len(times) - 1} intervals ({time.perf_counter() - start:.1f} s)")
    final_test, _ = test_loss(params, y_test, targets_test)
    log(f"test error {float(initial_test):.4f} -> {float(final_test):.5f} after {args.steps} steps "
        f"({time.perf_counter() - start:.1f} s)")
    rows = memory_table(model, params, args, log) if args.memory_rtols else []
    return dict(history, initial_test=float(initial_test), final_test=float(final_test), params=params,
                memory_rows=rows)


# --------------------------------------------------------------------------
# Backward-pass memory against the trip count
# --------------------------------------------------------------------------


def _seconds(f: Callable, *args: Any) -> float:
    start = time.perf_counter()
    fg.tree_util.tree_map(np.asarray, f(*args))
    return time.perf_counter() - start


def _peak_bytes(f: Callable, *args: Any) -> tuple[int, Any]:
    """tracemalloc's peak over one call of ``f`` (compiled already): the most bytes it held at once; and
    the call's result."""
    tracemalloc.start()
    try:
        out = fg.tree_util.tree_map(np.asarray, f(*args))
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def memory_table(model: nn.Sequential, params: Any, args: argparse.Namespace,
                 log: Callable[[str], None] = print) -> list[dict]:
    """For each tolerance in ``args.memory_rtols``: integrate the trained model from
    ``args.memory_trajectories`` starting points over the whole horizon (one ``while_loop``) and take the
    gradient of the final states' mean square, keeping every carry or ``args.memory_checkpoints``.
    Measures the peak memory (a call under tracemalloc) and the time (the best of two calls without) of
    that gradient."""
    y0 = initial_states(np.random.default_rng(args.seed + 1), args.memory_trajectories)
    horizon = float(args.horizon)

    def gradient(checkpoints: int | None) -> Callable:
        def final_square(params, y0, rtol, atol):   # tolerances as arguments: one compilation for every row
            y1, _, steps = odeint(lambda y: model.apply(params, y), y0, 0.0, horizon, 0.1, rtol=rtol,
                                  atol=atol, checkpoints=checkpoints)
            return fnp.mean(y1 ** 2), steps

        grad = fg.grad(final_square, has_aux=True)
        return fg.jit(grad) if args.jit else grad

    variants = {"all": gradient(None), "checkpointed": gradient(args.memory_checkpoints)}
    rows: list[dict] = []
    for rtol in args.memory_rtols:
        row: dict[str, Any] = {"rtol": rtol}
        for label, grad in variants.items():
            call_args = (params, y0, np.float32(rtol), np.float32(rtol * 1e-2))
            if not rows:
                grad(*call_args)                                 # compiles, outside the measurements
            peak, (grads, steps) = _peak_bytes(grad, *call_args)
            row.update({"steps": int(steps), f"{label}_grads": grads, f"{label}_bytes": peak,
                        f"{label}_s": min(_seconds(grad, *call_args) for _ in range(2))})
        rows.append(row)
    log(f"\nBackward pass through the while_loop ({'jit' if args.jit else 'eager'}): {len(y0)} trajectories "
        f"(a {y0.nbytes / 1024:.1f} KiB state), t = 0..{horizon:g}: peak memory (tracemalloc) and time of the "
        "gradient")
    log(f"{'rtol':>7} {'steps':>6} | {'every carry kept':>22} | {f'checkpoints={args.memory_checkpoints}':>22}")
    for r in rows:
        log(f"{r['rtol']:>7g} {r['steps']:>6} | {_mib(r['all_bytes']):>10} {r['all_s'] * 1e3:>8.0f} ms | "
            f"{_mib(r['checkpointed_bytes']):>10} {r['checkpointed_s'] * 1e3:>8.0f} ms")
    return rows


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:.2f} MiB"


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every default; options whose default depends on others say so in their help instead."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None:
            return action.help or ""
        return super()._get_help_string(action)


# --quick: a run of seconds that exercises everything (few steps, small batches, a one-row memory table).
QUICK = dict(steps=10, trajectories=32, test_trajectories=16, batch_size=16, hidden=16, horizon=2.0,
             memory_rtols=[1e-3], memory_trajectories=64, log_every=5)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=_HelpFormatter)
    ap.add_argument("--steps", type=int, default=300, help="Adam steps")
    ap.add_argument("--trajectories", type=int, default=256, help="training starting points")
    ap.add_argument("--test-trajectories", type=int, default=64, help="held-out starting points")
    ap.add_argument("--batch-size", type=int, default=64, help="trajectories per step")
    ap.add_argument("--hidden", type=int, default=32, help="width of the vector field's MLP")
    ap.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate")
    ap.add_argument("--horizon", type=float, default=4.0, help="the last observation time")
    ap.add_argument("--interval", type=float, default=0.5, help="time between observations")
    ap.add_argument("--rtol", type=float, default=1e-3, help="the solver's relative tolerance while training")
    ap.add_argument("--atol", type=float, default=1e-5, help="the solver's absolute tolerance")
    ap.add_argument("--checkpoints", type=int, default=None,
                    help="while_loop checkpoints while training (default: keep every carry)")
    ap.add_argument("--memory-rtols", type=float, nargs="*", default=[1e-2, 1e-3, 1e-4, 1e-5, 1e-6],
                    help="tolerances for the memory table (none: skip it)")
    ap.add_argument("--memory-checkpoints", type=int, default=8, help="checkpoints in the memory table's last column")
    ap.add_argument("--memory-trajectories", type=int, default=1024, help="batch size of the memory table")
    ap.add_argument("--log-every", type=int, default=50, help="steps between progress lines")
    ap.add_argument("--seed", type=int, default=0, help="data, initialisation and batches")
    ap.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                    help="compile the step (--no-jit: run eagerly, no compile wait)")
    ap.add_argument("--quick", action="store_true",
                    help="seconds: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    args = ap.parse_args(argv)
    if args.quick:                       # tiny defaults; options given explicitly still win
        ap.set_defaults(**QUICK)
        args = ap.parse_args(argv)
    if args.lr <= 0:
        ap.error(f"--lr must be positive, got {args.lr}")
    if min(args.steps, args.trajectories, args.test_trajectories, args.batch_size, args.hidden,
           args.log_every, args.memory_trajectories) < 1:
        ap.error("--steps, --trajectories, --test-trajectories, --batch-size, --hidden, --log-every and "
                 "--memory-trajectories must be positive")
    if args.memory_checkpoints < 2 or (args.checkpoints is not None and args.checkpoints < 2):
        ap.error("--checkpoints and --memory-checkpoints must be at least 2")
    if not 0 < args.interval <= args.horizon:
        ap.error(f"--interval {args.interval} must be in (0, --horizon {args.horizon}]")
    if args.rtol <= 0 or args.atol <= 0 or any(r <= 0 for r in args.memory_rtols):
        ap.error("tolerances must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    return train(parse_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
