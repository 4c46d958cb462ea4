"""Collectives over named axes: vmap(axis_name=...) in one process, and MPI across two processes.

In one process the examples of a named vmap are the devices: every collective is checked against
numpy on the stacked operands, with its derivatives (shard_map's convention: each device
differentiates its own program), under jit, nested names and control flow. Across processes
``mpiexec -n 2`` runs the scripts in ``tests/mpi/`` (two launches).
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.distributed as dist
import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad.testing import check_grads

HERE = pathlib.Path(__file__).resolve().parent
N = 4   # devices simulated by the named vmap


def per_device(f, *xs, name="i"):
    """``f`` on each row of ``xs`` as a device of axis ``name``."""
    return fg.vmap(f, axis_name=name)(*xs)


def operand(dtype, shape=(N, 4, 2), seed=0):
    rng = np.random.default_rng(seed)
    v = rng.integers(-5, 6, size=shape)
    if np.dtype(dtype).kind == "b":
        return v > 0
    if np.dtype(dtype).kind == "c":
        return (v + 1j * rng.integers(-5, 6, size=shape)).astype(dtype)
    return v.astype(dtype)


def broadcast_rows(r):
    return np.broadcast_to(r, (N,) + np.shape(r))


DTYPES = [np.float32, np.int32, np.complex64, np.bool_]


# ------------------------------------------------------------------ values against numpy


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reductions_match_numpy(dtype):
    x = operand(dtype)
    total = x.sum(axis=0)
    np.testing.assert_array_equal(per_device(lambda v: lax.psum(v, "i"), x), broadcast_rows(total))
    if dtype is not np.complex64:
        np.testing.assert_array_equal(per_device(lambda v: lax.pmax(v, "i"), x), broadcast_rows(x.max(axis=0)))
        np.testing.assert_array_equal(per_device(lambda v: lax.pmin(v, "i"), x), broadcast_rows(x.min(axis=0)))
    if dtype is not np.bool_:
        np.testing.assert_allclose(per_device(lambda v: lax.pmean(v, "i"), x), broadcast_rows(x.mean(axis=0)),
                                   rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_data_movement_matches_numpy(dtype):
    x = operand(dtype)                                           # device k holds x[k], shape (4, 2)
    gathered = per_device(lambda v: lax.all_gather(v, "i"), x)
    np.testing.assert_array_equal(gathered, broadcast_rows(x))
    tiled = per_device(lambda v: lax.all_gather(v, "i", axis=1, tiled=True), x)
    np.testing.assert_array_equal(tiled, broadcast_rows(np.concatenate(list(x), axis=1)))
    ring = [(k, (k + 1) % N) for k in range(N)]
    np.testing.assert_array_equal(per_device(lambda v: lax.ppermute(v, "i", ring), x), np.roll(x, 1, axis=0))
    partial = per_device(lambda v: lax.ppermute(v, "i", [(0, 2)]), x)
    expected = np.zeros_like(x)
    expected[2] = x[0]
    np.testing.assert_array_equal(partial, expected)
    np.testing.assert_array_equal(per_device(lambda v: lax.pshuffle(v, "i", [3, 0, 1, 2]), x), x[[3, 0, 1, 2]])
    np.testing.assert_array_equal(per_device(lambda v: lax.pbroadcast(v, "i", 2), x), broadcast_rows(x[2]))
    # all_to_all, non-tiled: device k receives row k of every device, stacked along concat_axis
    np.testing.assert_array_equal(per_device(lambda v: lax.all_to_all(v, "i", 0, 1), x),
                                  np.stack([x[:, k].T for k in range(N)]))
    # tiled: device k receives chunk k (of split_axis 0) of every device, concatenated along axis 1
    np.testing.assert_array_equal(per_device(lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True), x),
                                  np.stack([np.concatenate([x[j, k:k + 1] for j in range(N)], axis=1)
                                            for k in range(N)]))
    if dtype is not np.bool_:
        total = x.sum(axis=0)
        np.testing.assert_array_equal(per_device(lambda v: lax.psum_scatter(v, "i"), x), total)
        y = operand(dtype, (N, 2, 8))
        np.testing.assert_array_equal(
            per_device(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True), y),
            np.stack([y.sum(axis=0)[:, 2 * k:2 * k + 2] for k in range(N)]))


def test_axis_index_size_and_unmapped_operands():
    x = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(per_device(lambda v: lax.axis_index("i"), x), np.arange(N))
    np.testing.assert_array_equal(per_device(lambda v: v * lax.axis_size("i"), x), x * N)
    # a value the vmap does not map is the same on every device: psum multiplies it by the size
    np.testing.assert_array_equal(per_device(lambda v: lax.psum(fnp.float32(3.0), "i"), x), np.full(N, 3.0 * N))
    np.testing.assert_array_equal(per_device(lambda v: lax.all_gather(fnp.arange(2.0), "i"), x),
                                  np.tile(np.arange(2.0), (N, N, 1)))


def test_pytrees():
    x = operand(np.float32)
    out = per_device(lambda v: lax.psum({"a": v, "b": (2 * v, [v[0]])}, "i"), x)
    np.testing.assert_array_equal(out["a"], broadcast_rows(x.sum(0)))
    np.testing.assert_array_equal(out["b"][0], broadcast_rows(2 * x.sum(0)))
    np.testing.assert_array_equal(out["b"][1][0], broadcast_rows(x[:, 0].sum(0)))


# ------------------------------------------------------------------ derivatives


def test_gradient_convention_psum():
    # The documented example: on each device, grad of sum(psum(x * x)) w.r.t. its own x is 2 x.
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    g = per_device(fg.grad(lambda v: lax.psum(v * v, "i").sum()), x)
    np.testing.assert_allclose(g, 2 * x)
    # The same on the process axis in a one-process world
    np.testing.assert_allclose(fg.grad(lambda v: dist.psum(v * v).sum())(x), 2 * x)
    # Differentiating the whole vmapped function is plain calculus: the loss counts every device's copy
    whole = fg.grad(lambda xs: fg.vmap(lambda v: lax.psum(v * v, "i"), axis_name="i")(xs).sum())(x)
    np.testing.assert_allclose(whole, N * 2 * x)


def test_gradient_convention_others():
    x = np.array([1.0, 3.0, 3.0, 2.0], np.float32)
    np.testing.assert_allclose(per_device(fg.grad(lambda v: lax.pmean(v * v, "i")), x), 2 * x / N)
    # pmax: the devices holding the maximum share the derivative
    np.testing.assert_allclose(per_device(fg.grad(lambda v: lax.pmax(v, "i")), x), [0, 0.5, 0.5, 0])
    np.testing.assert_allclose(per_device(fg.grad(lambda v: lax.pmin(v, "i")), x), [1, 0, 0, 0])
    # pbroadcast: only the source made the value
    np.testing.assert_allclose(per_device(fg.grad(lambda v: lax.pbroadcast(v * v, "i", 1)), x), [0, 6, 0, 0])


LINEAR = {
    "all_gather": lambda v: lax.all_gather(v, "i"),
    "all_gather_tiled": lambda v: lax.all_gather(v, "i", axis=1, tiled=True),
    "psum_scatter": lambda v: lax.psum_scatter(v, "i", scatter_dimension=1),
    "psum_scatter_tiled": lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True),
    "ppermute": lambda v: lax.ppermute(v, "i", [(0, 1), (1, 3), (3, 0)]),
    "all_to_all": lambda v: lax.all_to_all(v, "i", 1, 0),
    "all_to_all_tiled": lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True),
}


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_linear_collectives_transpose(name):
    # Each device's gradient of <w_k, C(x)_k> is the k-th slice of the transpose of C applied to w:
    # the gradient of the summed loss, whose derivative finite differences check.
    collective = LINEAR[name]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, 3, N)).astype(np.float32)
    w = rng.standard_normal(np.shape(per_device(collective, x))).astype(np.float32)

    def local_loss(v, wk):
        return (collective(v) * wk).sum()

    per_dev = fg.vmap(fg.grad(local_loss), axis_name="i")(x, w)
    summed = fg.grad(lambda xs: fg.vmap(local_loss, axis_name="i")(xs, w).sum())(x)
    np.testing.assert_allclose(per_dev, summed, rtol=1e-5, atol=1e-6)
    # and the jvp (forward mode, the collective's jvp rule inside the vmap) agrees with the vjp
    t = rng.standard_normal(x.shape).astype(np.float32)
    tangent = fg.vmap(lambda v, tv, wk: fg.jvp(lambda u: local_loss(u, wk), (v,), (tv,))[1], axis_name="i")(x, t, w)
    np.testing.assert_allclose(np.sum(tangent), np.sum(per_dev * t), rtol=1e-4)


@pytest.mark.parametrize("name", ["psum", "pmean", "all_gather", "psum_scatter", "all_to_all"])
def test_check_grads_order_two(x64, name):
    f = {"psum": lambda v: lax.psum(v * v, "i") * v,
         "pmean": lambda v: fnp.sin(lax.pmean(v, "i")) * v,
         "all_gather": lambda v: fnp.sin(lax.all_gather(v, "i")).sum(0) * v,
         "psum_scatter": lambda v: lax.psum_scatter(v * v, "i", scatter_dimension=0),
         "all_to_all": lambda v: lax.all_to_all(v * v, "i", 0, 0) * v}[name]
    x = np.random.default_rng(2).standard_normal((N, N))
    check_grads(fg.vmap(f, axis_name="i"), (x,), order=2)


def test_second_order_inside_the_vmap():
    x = np.array([0.5, 1.0, -2.0, 3.0])
    second = per_device(fg.grad(lambda v: fg.grad(lambda u: lax.psum(u ** 3, "i"))(v)), x)
    np.testing.assert_allclose(second, 6 * x, rtol=1e-6)


# ------------------------------------------------------------------ jit, names, control flow


def test_jit_through_collectives():
    x = operand(np.float32)
    expected = broadcast_rows(x.sum(0))
    np.testing.assert_array_equal(fg.jit(fg.vmap(lambda v: lax.psum(v, "i"), axis_name="i"))(x), expected)
    np.testing.assert_array_equal(fg.vmap(fg.jit(lambda v: lax.psum(v, "i")), axis_name="i")(x), expected)
    g = fg.jit(fg.vmap(fg.grad(lambda v: lax.psum(v * v, "i").sum()), axis_name="i"))(x)
    np.testing.assert_allclose(g, 2 * x)


def test_compiled_program_keeps_collectives_in_order():
    def f(x):
        dist.psum(x)                      # unused here, but the other processes wait for it
        y = dist.all_gather(x * 2)
        return dist.pmax(y.sum(0))

    program = fg.jit(f).lower(fnp.ones(3))
    names = [e.prim.name for e in program.jaxpr.eqns] if hasattr(program, "jaxpr") else None
    text = str(program)
    order = [text.index(f" {n}[") for n in ("psum", "all_gather", "pmax")]
    assert order == sorted(order), text
    if names is not None:
        assert [n for n in names if n in ("psum", "all_gather", "pmax")] == ["psum", "all_gather", "pmax"]
    np.testing.assert_array_equal(fg.jit(f)(fnp.ones(3)), np.full(3, 2.0))


def test_nested_names():
    x = np.arange(6.0).reshape(2, 3)
    both = fg.vmap(fg.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"), axis_name="i")(x)
    np.testing.assert_array_equal(both, np.full((2, 3), x.sum()))
    inner = fg.vmap(fg.vmap(lambda v: lax.psum(v, "j"), axis_name="j"), axis_name="i")(x)
    np.testing.assert_array_equal(inner, np.repeat(x.sum(1, keepdims=True), 3, axis=1))
    outer = fg.vmap(fg.vmap(lambda v: lax.psum(v, "i"), axis_name="j"), axis_name="i")(x)
    np.testing.assert_array_equal(outer, np.tile(x.sum(0), (2, 1)))
    index = fg.vmap(fg.vmap(lambda v: lax.axis_index(("i", "j")), axis_name="j"), axis_name="i")(x)
    np.testing.assert_array_equal(index, np.arange(6).reshape(2, 3))
    # an unnamed vmap in between maps over its own axis only
    mid = fg.vmap(fg.vmap(lambda v: lax.psum(v, "i")), axis_name="i")(x)
    np.testing.assert_array_equal(mid, np.tile(x.sum(0), (2, 1)))
    # the inner vmap of the same name shadows the outer one
    shadow = fg.vmap(fg.vmap(lambda v: lax.psum(v, "i"), axis_name="i"), axis_name="i")(x)
    np.testing.assert_array_equal(shadow, np.repeat(x.sum(1, keepdims=True), 3, axis=1))


def test_collectives_inside_control_flow():
    x = np.arange(1.0, 5.0, dtype=np.float32)

    def body(carry, v):
        return carry + lax.psum(v, "i"), carry

    scanned = per_device(lambda v: lax.scan(body, fnp.float32(0.0), fnp.stack([v, 2 * v]))[0], x)
    np.testing.assert_allclose(scanned, np.full(N, 3 * x.sum()))
    branch = per_device(lambda v: lax.cond(v > 2, lambda u: lax.psum(u, "i"), lambda u: -lax.psum(u, "i"), v), x)
    np.testing.assert_allclose(branch, np.where(x > 2, x.sum(), -x.sum()))


def test_unbound_names():
    x = np.ones(3, np.float32)
    with pytest.raises(NameError, match="unbound axis name: 'j'"):
        per_device(lambda v: lax.psum(v, "j"), x)
    with pytest.raises(NameError, match="unbound axis name: 'i'"):
        lax.all_gather(x, "i")
    with pytest.raises(NameError, match="unbound axis name"):
        fg.jit(lambda v: lax.psum(v, "i"))(x)
    with pytest.raises(NameError, match="unbound axis name"):
        lax.axis_index("i")
    # the process axis is always bound: a one-process world
    np.testing.assert_array_equal(lax.psum(x, dist.PROCESS_AXIS), x)
    assert lax.axis_size(dist.PROCESS_AXIS) == 1


def test_process_axis_in_one_process():
    x = fnp.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(dist.all_gather(x), np.asarray(x)[None])
    np.testing.assert_array_equal(dist.all_gather(x, axis=1, tiled=True), x)
    np.testing.assert_array_equal(dist.psum_scatter(x[:1]), np.asarray(x)[0])
    np.testing.assert_array_equal(dist.ppermute(x, [(0, 0)]), x)
    np.testing.assert_array_equal(dist.all_to_all(x[:1], 0, 1), np.asarray(x)[0][:, None])
    np.testing.assert_array_equal(dist.broadcast({"w": x})["w"], x)
    np.testing.assert_array_equal(fg.jit(dist.pmean)(x), x)
    assert int(dist.axis_index()) == 0 and dist.axis_size() == 1
    # simulated processes: vmap over PROCESS_AXIS stands in for the world
    sim = fg.vmap(lambda v: dist.psum(v), axis_name=dist.PROCESS_AXIS)(x)
    np.testing.assert_array_equal(sim, np.tile(np.asarray(x).sum(0), (2, 1)))


def test_bad_input_messages():
    x = operand(np.float32)
    with pytest.raises(ValueError, match="psum_scatter: dimension 0 .* must equal the axis size 4"):
        per_device(lambda v: lax.psum_scatter(v, "i"), x[:, :3])
    with pytest.raises(ValueError, match="divisible by the axis size 4"):
        per_device(lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True), x)
    with pytest.raises(ValueError, match="ppermute: perm .* twice"):
        per_device(lambda v: lax.ppermute(v, "i", [(0, 1), (2, 1)]), x)
    with pytest.raises(ValueError, match="outside the axis of size 4"):
        per_device(lambda v: lax.ppermute(v, "i", [(0, 7)]), x)
    with pytest.raises(ValueError, match="pshuffle: perm"):
        per_device(lambda v: lax.pshuffle(v, "i", [0, 0, 1, 2]), x)
    with pytest.raises(TypeError, match="pmax: not defined for complex"):
        per_device(lambda v: lax.pmax(v, "i"), operand(np.complex64))
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        per_device(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]), x)
    with pytest.raises(TypeError, match="single name"):
        fg.vmap(lambda v: v, axis_name=("i", "j"))(x)
    with pytest.raises(NotImplementedError, match="spmd_axis_name"):
        fg.vmap(lambda v: v, spmd_axis_name="i")(x)


def test_distributed_config_and_timeout():
    assert fg.config.distributed_debug is False
    fg.config.update("distributed_debug", True)
    try:
        np.testing.assert_array_equal(dist.psum(fnp.ones(2)), [1.0, 1.0])   # one process: nothing to check
    finally:
        fg.config.update("distributed_debug", False)
    assert dist.timeout() > 0
    with pytest.raises(ValueError, match="positive number of seconds"):
        dist.initialize(timeout=-1)


# ------------------------------------------------------------------ across two processes (MPI)


def _mpiexec() -> str | None:
    candidate = pathlib.Path(sys.executable).parent / "mpiexec"
    if candidate.exists():
        return str(candidate)
    return shutil.which("mpiexec")


def _launch(script: str, out: pathlib.Path, timeout: float) -> tuple[int, list[dict], str]:
    """Run ``tests/mpi/<script>`` on two processes; each writes JSON lines to ``out/rank<r>.jsonl``."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install mpi4py mpich)")
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec next to the Python executable or on PATH")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
               NUMBA_NUM_THREADS="1", FUNCGRAD_DISTRIBUTED_TIMEOUT="20")
    proc = subprocess.run([mpiexec, "-n", "2", sys.executable, str(HERE / "mpi" / script), str(out)],
                          capture_output=True, text=True, timeout=timeout, env=env)
    lines = [json.loads(line) for path in sorted(out.glob("rank*.jsonl")) for line in path.read_text().splitlines()
             if line.strip()]
    return proc.returncode, lines, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_mpi_collectives_against_numpy(tmp_path):
    rc, lines, output = _launch("collectives_basic.py", tmp_path, timeout=120)
    assert sorted(line["rank"] for line in lines) == [0, 1], output
    for line in lines:
        assert line["size"] == 2 and line["checks"] > 100, line
        assert line["failures"] == [], line["failures"]
    assert rc == 0, output


def test_mpi_errors_on_every_rank_within_the_timeout(tmp_path):
    rc, lines, output = _launch("collectives_errors.py", tmp_path, timeout=120)
    assert rc != 0
    by_case: dict[str, dict[int, dict]] = {}
    for line in lines:
        by_case.setdefault(line["case"], {})[line["rank"]] = line
    for case in ("jit shape mismatch", "eager dtype mismatch"):
        for rank in (0, 1):
            line = by_case[case][rank]
            assert line["error"] == "ValueError", (case, line, output)
            assert "rank(s) 0:" in line["message"] and "rank(s) 1:" in line["message"], line
    assert "float32[3]" in by_case["jit shape mismatch"][0]["message"]
    assert "float32[4]" in by_case["jit shape mismatch"][0]["message"]
    assert "int32[2]" in by_case["eager dtype mismatch"][1]["message"]
    assert [by_case["still works"][r]["error"] for r in (0, 1)] == [None, None], output
    failing = by_case["failing rank"]
    assert failing[1]["error"] == "RuntimeError", output
    assert failing[0]["error"] == "TimeoutError", output
    assert "rank(s) 1 did not arrive" in failing[0]["message"]
    assert failing[0]["seconds"] < 3.0 + 5.0


def test_pswapaxes_is_all_to_all_over_one_axis():
    x = operand(np.float32, (N, 2, N))
    np.testing.assert_array_equal(per_device(lambda v: lax.pswapaxes(v, "i", 1), x),
                                  per_device(lambda v: lax.all_to_all(v, "i", 1, 1), x))
    # device k receives column k of every device, the devices' axis taking the place of axis 1
    np.testing.assert_array_equal(per_device(lambda v: lax.pswapaxes(v, "i", 1), x), np.transpose(x, (2, 1, 0)))


def test_collectives_in_loops_custom_rules_and_checkpoint():
    x = np.arange(4.0, dtype=np.float32)
    looped = per_device(lambda v: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + lax.psum(v, "i")),
                                                 (0, fnp.float32(0.0)))[1], x)
    np.testing.assert_allclose(looped, np.full(N, 3 * x.sum()))

    @fg.custom_vjp
    def doubled_total(v):
        return lax.psum(v, "i") * 2

    doubled_total.defvjp(lambda v: (doubled_total(v), None), lambda _, ct: (ct * 5,))
    np.testing.assert_allclose(per_device(doubled_total, x), np.full(N, 2 * x.sum()))
    np.testing.assert_allclose(per_device(fg.grad(doubled_total), x), np.full(N, 5.0))
    remat = fg.checkpoint(lambda v: lax.psum(v * v, "i"))
    np.testing.assert_allclose(per_device(fg.grad(remat), x), 2 * x)


def test_forward_mode_convention():
    # jvp perturbs every device at once (shard_map's convention): the tangent of psum(x * x) with a
    # tangent of ones everywhere is the sum over the devices of 2 x; reverse mode keeps each device's own.
    x = np.arange(4.0, dtype=np.float32)
    tangent = per_device(lambda v: fg.jvp(lambda u: lax.psum(u * u, "i"), (v,), (fnp.ones_like(v),))[1], x)
    np.testing.assert_allclose(tangent, np.full(N, 2 * x.sum()))
    np.testing.assert_allclose(per_device(fg.hessian(lambda u: lax.psum(u ** 3, "i")), x), 6 * x)


def test_one_process_results_are_not_views_of_their_operands():
    # A compiled program may reuse an operand's buffer after its last use: a collective's result must
    # own its memory.
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    for f in (dist.psum, dist.pmax, lambda v: dist.all_gather(v, tiled=True), lambda v: dist.ppermute(v, [(0, 0)]),
              lambda v: dist.broadcast(v)):
        operand_ = fnp.asarray(x)
        assert not np.may_share_memory(np.asarray(f(operand_)), np.asarray(operand_))
    step = fg.jit(lambda v: (dist.psum(v * 2) + 1, dist.pmin(v * 2) * 3))
    a, b = step(fnp.asarray(x))
    np.testing.assert_array_equal(a, 2 * x + 1)
    np.testing.assert_array_equal(b, 6 * x)


def test_handshake_messages_compare_long_signatures_whole():
    from funcgrad.distributed import _runtime
    x = np.zeros(3, np.float32)
    long_a = _runtime._signature("ppermute", x, {"perm": tuple((i, i) for i in range(400))})
    long_b = _runtime._signature("ppermute", x, {"perm": tuple((i, i) for i in range(399)) + ((399, 0),)})
    assert len(long_a) > 1024
    (shown_a, key_a), (shown_b, key_b) = _runtime._decode(_runtime._encode(long_a)), \
        _runtime._decode(_runtime._encode(long_b))
    assert key_a != key_b and shown_a == shown_b          # same start, told apart by the digest
    short = _runtime._signature("psum", x, {})
    assert _runtime._describe_signature(_runtime._decode(_runtime._encode(short))[0]) == "psum(float32[3])"


def test_unmapped_values_inside_grad_stay_with_the_vmap():
    # A grad inside the vmap evaluates the collective's primal on a value the vmap does not map:
    # the named vmap still carries it out (3 * w * w), and the gradient is each device's own.
    w = np.array([1.0, 2.0], np.float32)
    value_and_grad = fg.vmap(fg.value_and_grad(lambda v: lax.psum(v * v, "i").sum()), in_axes=None, axis_size=3,
                             axis_name="i")(w)
    np.testing.assert_allclose(value_and_grad[0], np.full(3, 3 * (w * w).sum()))
    np.testing.assert_allclose(value_and_grad[1], np.tile(2 * w, (3, 1)))
    tangent = fg.vmap(lambda v: fg.jvp(lambda u: lax.psum(u, "i"), (v,), (fnp.ones(2),))[1], in_axes=None,
                      axis_size=3, axis_name="i")(w)
    np.testing.assert_allclose(tangent, np.full((3, 2), 3.0))


def test_pcast_to_varying_sums_the_gradients_of_replicated_values():
    w = np.ones(2, np.float32)
    xs = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    cast = fg.vmap(fg.grad(lambda v, x: (lax.pcast(v, "i", to="varying") * x).sum()), in_axes=(None, 0),
                   axis_name="i")(w, xs)
    np.testing.assert_allclose(cast, np.tile(xs.sum(0), (3, 1)))
    own = fg.vmap(fg.grad(lambda v, x: (v * x).sum()), in_axes=(None, 0), axis_name="i")(w, xs)
    np.testing.assert_allclose(own, xs)
    np.testing.assert_array_equal(per_device(lambda v: lax.pcast(v, "i", to="varying"), xs), xs)
    with pytest.raises(NotImplementedError, match="to='reduced'"):
        per_device(lambda v: lax.pcast(v, "i", to="reduced"), xs)
