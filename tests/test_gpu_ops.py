"""The op table (tests/op_table.py and op_rows_*.py, as tests/test_ops.py drives it) on GPU arrays.

Every row runs on ``fg.device_put(x, "gpu")`` arguments in four modes:

* ``forward``: the public function vs numpy evaluated in float64, with the
  float32 tolerances of tests/test_ops.py and the row's documented dtype;
* ``grad``: ``fg.grad`` of a random weighting of the outputs vs the same
  ``fg.grad`` on the CPU in float64 (tests/test_ops.py checks the CPU
  gradients against finite differences), with float32 tolerances;
* ``vmap``: ``fg.vmap`` over a batch of 3 vs numpy applied to each example;
* ``jit``: ``fg.jit`` (fused Triton kernels on a real GPU) vs eager on the
  GPU and vs numpy, twice (the cached program), float32, one shape per row.

Every output must be a GPU array (``.device == "gpu"``). A row that binds a
primitive without a GPU implementation (``"gpu" not in prim.impls``) must
instead raise funcgrad's missing-implementation error naming one of those
primitives (``gpu_host_fallback`` off); which primitives a row binds is
found by running it on the CPU with every primitive recorded (the grad and
vmap modes record their own CPU runs; jit records the optimised traced
program). So as GPU implementations land, the rows become real checks by
themselves; each expected error is also reported as a ``GpuMissingWarning``
naming the primitive (pytest's warnings summary groups them). The row then
runs again with ``gpu_host_fallback`` on and is checked as any other: the
rest of its GPU path (and the fallback) must work. Likewise a
row whose own function closes over numpy data (``x[_IDX]``,
``sum(x, where=_MASK)``: host data, which needs a ``device_put``) may raise
the different-devices error instead (a ``HostDataWarning``); constants
that library functions make must live on their arguments' device.
Outputs computed from shapes alone (``tril_indices_from``) may be host
arrays, as creation functions' are.

Two devices share one checking function:

* ``standin`` (CI): the numpy stand-in for CuPy (tests/gpu_standin.py,
  without Triton), on a small deterministic sample of rows;
* ``gpu`` (marked ``gpu``): real CuPy and Triton, on the whole table;
  skipped with the reason when no GPU is usable. Run it in its own process
  (``pytest -m gpu tests/test_gpu_ops.py -n 8 --dist load``): other GPU test
  modules set ``TRITON_INTERPRET=1`` for Triton's interpreter. With
  ``FUNCGRAD_GPU_OPS_SUMMARY=1``, one more test runs the table again and
  reports the outcomes grouped by missing primitive and by error.

Rows without arguments (``zeros((2, 3))``, ``arange(5)``) create arrays on
the CPU and have nothing to put on the GPU: they are not run here
(:func:`test_every_row_is_accounted_for` counts them).
"""
from __future__ import annotations

import collections
import contextlib
import dis
import os
import re
import types
import warnings
import zlib

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad import _core
from funcgrad._ir import Jaxpr, SubProgram, Var
from funcgrad.backends.gpu import _detect
from funcgrad.backends.gpu.array import GpuArray
from funcgrad.compiler import passes
from funcgrad.tree_util import tree_leaves
from conftest import config_set
from gpu_standin import gpu_standin
import test_ops as T

fg.devices()   # discovers the backends: the GPU implementations are registered before rows are classified

MODES = ("forward", "grad", "vmap", "jit")


class GpuMissingWarning(UserWarning):
    """A row raised the expected error for a primitive without a GPU implementation."""


class HostDataWarning(UserWarning):
    """A row whose function closes over numpy data raised the different-devices error."""


# ----------------------------------------------------------------------------
# Which rows run in which mode
# ----------------------------------------------------------------------------


def _row_id(op, shapes, i):
    return f"{op.name}-{'x'.join(map(str, shapes)) or 'noargs'}-{i}"


def _all_rows():
    """(op, shapes, id) for every case of the table, in table order."""
    return [(op, shapes, _row_id(op, shapes, i)) for op in T.OPS for i, shapes in enumerate(op.shapes)]


def _applies(op, shapes, mode, first_of_op):
    if not shapes:
        return False                       # no arguments: nothing to put on the GPU
    if mode == "grad":
        return op.diff
    if mode == "vmap":
        return op.transforms
    if mode == "jit":
        return op.transforms and first_of_op
    return True


def _mode_rows(mode):
    seen, out = set(), []
    for op, shapes, rid in _all_rows():
        first = op.name not in seen
        seen.add(op.name)
        if _applies(op, shapes, mode, first):
            out.append((op, shapes, rid))
    return out


# The CI sample: about 1 row in SAMPLE_EVERY (1 in JIT_SAMPLE_EVERY for jit), chosen by a hash of the
# row's id, so that rows added to the table leave the others' choice alone; plus the first rows of
# SAMPLE_EXTRA, whose primitives (argsort, cholesky) have no GPU implementation yet: the
# expected-error path runs in CI too (and they become real checks when they get one).
SAMPLE_EVERY = 57
JIT_SAMPLE_EVERY = 160
SAMPLE_EXTRA = ("argsort", "linalg.cholesky")

# Rows of the sample that fail on GPU arrays today, kept out of the CI sample (the -m gpu run has
# them): the function makes a host constant (an index array, a mask, a grid) and a primitive
# meets it with a GPU array ("arguments live on different devices"), or reads a GPU array into
# numpy (implicit transfer); nanquantile does so after its argsort (run with host fallback).
# test_known_gpu_failures_still_fail pins them: fixed, they go.
KNOWN_GPU_FAILURES: tuple[str, ...] = ()   # row ids kept out of the CI sample while they fail on GPU arrays


def _in_sample(rid, every):
    return zlib.crc32(rid.encode()) % every == 0


def _sample(mode, rows):
    every = JIT_SAMPLE_EVERY if mode == "jit" else SAMPLE_EVERY
    picked = [row for row in rows if _in_sample(row[2], every)]
    names = {op.name.split("[")[0] for op, _, _ in picked}
    if mode != "jit":
        for want in SAMPLE_EXTRA:
            first = next((row for row in rows if row[0].name.split("[")[0] == want), None)
            if first is not None and want not in names:
                picked.append(first)
                names.add(want)
    return [row for row in picked if row[2] not in KNOWN_GPU_FAILURES]


NO_GPU = not _detect.gpu_available()
_GPU_MARKS = [pytest.mark.gpu,
              pytest.mark.skipif(NO_GPU, reason=f"no usable GPU detected: {_detect.gpu_unavailable_reason()}")]


def _params():
    """The CI sample on the stand-in; with a usable GPU, every row on it. Without one, each mode's
    GPU rows are one skipped placeholder (thousands of skipped tests would cost CI seconds)."""
    out = []
    for mode in MODES:
        rows = _mode_rows(mode)
        out += [pytest.param("standin", mode, op, shapes, id=f"standin-{mode}-{rid}")
                for op, shapes, rid in _sample(mode, rows)]
        if NO_GPU:
            out.append(pytest.param("gpu", mode, None, None, id=f"gpu-{mode}-all-{len(rows)}-rows", marks=_GPU_MARKS))
        else:
            out += [pytest.param("gpu", mode, op, shapes, id=f"gpu-{mode}-{rid}", marks=_GPU_MARKS)
                    for op, shapes, rid in rows]
    return out


# ----------------------------------------------------------------------------
# Recording the primitives a row binds (on the CPU)
# ----------------------------------------------------------------------------


class Bound:
    """The primitives a row binds: ``run``, evaluated (or equations of the traced program), and
    ``inside``, in the sub-programs they carry (loop bodies, branches), which may not run."""

    def __init__(self):
        self.run, self.inside = set(), set()

    def add_subprograms(self, value):
        if isinstance(value, SubProgram):
            value = value.jaxpr
        if isinstance(value, Jaxpr):
            for eqn in value.eqns:
                self.inside.add(eqn.prim)
                for v in eqn.params.values():
                    self.add_subprograms(v)
        elif isinstance(value, (tuple, list)):
            for v in value:
                self.add_subprograms(v)

    def add_jaxpr(self, jaxpr):
        for eqn in jaxpr.eqns:
            self.run.add(eqn.prim)
            for v in eqn.params.values():
                self.add_subprograms(v)

    def missing(self):
        """(every primitive without a GPU implementation, those of them that surely run)."""
        def lacking(prims):
            return sorted({p.name for p in prims if "gpu" not in p.impls})
        return lacking(self.run | self.inside), lacking(self.run)


@contextlib.contextmanager
def _recording(bound):
    """Every primitive evaluated in the block (the eager fast path off) goes into ``bound``, with
    the primitives of the sub-programs it carries."""
    general = _core.apply_primitive

    def record(prim, args, params):
        bound.run.add(prim)
        for v in params.values():
            bound.add_subprograms(v)
        return general(prim, args, params)

    previous = _core.set_fast_path(False)
    _core.apply_primitive = record
    try:
        yield
    finally:
        _core.apply_primitive = general
        _core.set_fast_path(previous)


# ----------------------------------------------------------------------------
# Running on the GPU
# ----------------------------------------------------------------------------


def _gpu(a):
    return fg.device_put(fnp.asarray(a), "gpu")


def _constant_outputs(fn, host_args):
    """Positions of the output leaves whose values do not depend on the arguments' values (computed
    from shapes and dtypes alone, like ``tril_indices_from``): those may be host arrays, as
    creation functions' results are. Empty when ``fn`` cannot be traced (value-dependent shapes)."""
    try:
        jaxpr = fg.make_jaxpr(fn)(*host_args)
    except Exception:   # noqa: BLE001 -- untraceable: every output must be on the GPU
        return set()
    depends = {id(v) for v in jaxpr.invars}
    for eqn in jaxpr.eqns:
        if any(id(x) in depends for x in eqn.inputs if isinstance(x, Var)):
            depends.update(id(v) for v in eqn.outvars)
    return {i for i, v in enumerate(jaxpr.outvars) if not (isinstance(v, Var) and id(v) in depends)}


def _host_leaves(out, what, constant=frozenset()):
    """The output's leaves as numpy arrays, after checking each is a GPU array (except the
    ``constant`` positions, see :func:`_constant_outputs`)."""
    leaves = []
    for i, leaf in enumerate(tree_leaves(out)):
        if i not in constant:
            assert isinstance(leaf, GpuArray) and leaf.device == "gpu", \
                f"{what}: output {i} is {type(leaf).__name__} on {getattr(leaf, 'device', 'the host')}, " \
                "not a GPU array"
        if isinstance(leaf, GpuArray):
            leaf = fg.device_put(leaf, "cpu")
        leaves.append(np.asarray(leaf))
    return leaves


_FALLBACK_WARNING = "funcgrad: primitive .* has no GPU implementation"


def _run(run, missing, what, host_data=()):
    """``run()``, or the error the row must raise instead (then None).

    ``missing``: (the primitives without a GPU implementation the row binds, those of them that
    surely run; see :meth:`Bound.missing`): an error must name one of the first (then the row
    runs again with ``gpu_host_fallback``, whose result is returned and checked); the row may run
    without error only if none of the second. ``host_data``: the numpy arrays the row's function closes over
    (see :func:`_host_data`): host data meeting GPU arrays is an error (transfers are explicit),
    so the row may raise it.
    """
    bound, surely = missing
    if not bound and not host_data:
        return run()
    try:
        out = run()
    except NotImplementedError as e:
        named = str(e).split(":")[0]
        assert bound and "no GPU implementation" in str(e), f"{what}: {e}"
        assert named in bound, f"{what}: the error names {named!r}, expected one of {bound}: {e}"
        warnings.warn(GpuMissingWarning(f"{named}: no GPU implementation (the row raised the expected error)"),
                      stacklevel=2)
        # The rest of the row's GPU path still runs: with host fallback for the missing primitives.
        with config_set("gpu_host_fallback", True), warnings.catch_warnings():
            warnings.filterwarnings("ignore", _FALLBACK_WARNING, RuntimeWarning)
            return run()
    except ValueError as e:
        if not host_data or "arguments live on different devices" not in str(e):
            raise
        warnings.warn(HostDataWarning(f"the row's function closes over host data ({', '.join(host_data)}), which "
                                      "meets GPU arrays: the expected different-devices error"), stacklevel=2)
        return None
    assert not surely, f"{what} ran, but binds primitives without a GPU implementation: {surely}"
    return out


_CONSTRUCTORS = {"array", "asarray", "arange", "ones", "zeros", "full", "eye", "linspace", "tri", "triu", "tril",
                 "ones_like", "zeros_like", "full_like", "identity", "diag", "indices", "ix_"}
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def _host_data(fn):
    """The numpy arrays a row's function (defined in the tests) closes over or builds: module
    constants such as ``_IDX``, closure cells, ``np.array([...])`` calls. Library functions
    (``fnp.diag``) make their own constants, which must then live on the arguments' device."""
    found: list = []
    _scan(fn, found, set())
    return tuple(dict.fromkeys(found))


def _scan(fn, found, seen):
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen or not os.path.abspath(code.co_filename).startswith(_TESTS_DIR):
        return
    seen.add(id(fn))
    cells = dict(zip(code.co_freevars, [c.cell_contents for c in fn.__closure__ or ()]))
    _scan_code(code, fn.__globals__, cells, found, seen)


def _scan_code(code, globals_, cells, found, seen):
    previous = None
    for ins in dis.get_instructions(code):
        value = None
        if ins.opname == "LOAD_GLOBAL":
            value = globals_.get(ins.argval)
        elif ins.opname == "LOAD_DEREF":
            value = cells.get(ins.argval)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and previous == "np" and ins.argval in _CONSTRUCTORS:
            found.append(f"np.{ins.argval}(...)")
        if isinstance(value, np.ndarray):
            found.append(ins.argval)
        elif callable(value):
            _scan(value, found, seen)
        previous = "np" if ins.opname == "LOAD_GLOBAL" and value is np else None
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _scan_code(const, globals_, cells, found, seen)


def _check_dtypes(op, args, out, what):
    want = T.expected_dtype(op, args, np.float32)
    if want is not None:
        for leaf in tree_leaves(out):
            assert leaf.dtype == want, f"{what}: output dtype {leaf.dtype}, expected {want}"


def _reference(op, args64):
    with np.errstate(all="ignore"):
        return op.ref(*args64)


# ----------------------------------------------------------------------------
# The four modes
# ----------------------------------------------------------------------------


def check_forward(op, shapes, rng):
    args = T.make_args(op, shapes, rng, np.float32)
    expected = _reference(op, T.as_float64(args))
    bound = Bound()
    with _recording(bound):
        op.fn(*T.to_fg(args))
    what = f"{op.name} on the GPU vs numpy"
    out = _run(lambda: op.fn(*[_gpu(a) for a in args]), bound.missing(), what, _host_data(op.fn))
    if out is None:
        return
    constant = _constant_outputs(op.fn, T.to_fg(args))
    T.assert_tree_close(_host_leaves(out, what, constant), tree_leaves(expected), op.rtol, op.atol, what)
    _check_dtypes(op, args, out, what)


def _weighted_loss(op, rebuild, weights):
    """A scalar from every float/complex output leaf: sum(leaf * w) (complex: real and imaginary parts)."""
    def loss(*float_vals):
        total = 0.0
        leaves = [leaf for leaf in tree_leaves(op.fn(*rebuild(float_vals))) if leaf.dtype.kind in "fc"]
        for leaf, (w_re, w_im) in zip(leaves, weights):
            if leaf.dtype.kind == "c":
                total = total + fnp.sum(fnp.real(leaf) * w_re) + fnp.sum(fnp.imag(leaf) * w_im)
            else:
                total = total + fnp.sum(leaf * w_re)
        return total
    return loss


def _grad_tolerance(op, expected):
    tol = max(10 * op.rtol, 1e-4)
    scale = max([float(np.max(np.abs(e))) for e in expected if e.size] + [1.0])
    return tol, tol * scale


def check_grad(op, shapes, rng):
    args = T.make_args(op, shapes, rng, np.float32)
    float_idx, _ = T._split_float(args)
    assert float_idx, f"{op.name} is marked differentiable but has no float argument"
    args64 = T.as_float64(args)
    with config_set("enable_x64", True):
        out_shapes = [leaf.shape for leaf in tree_leaves(op.fn(*T.to_fg(args64))) if leaf.dtype.kind in "fc"]
    weights = [(rng.standard_normal(s), rng.standard_normal(s)) for s in out_shapes]
    argnums = tuple(range(len(float_idx)))

    def grad_on(device_args, put):
        rebuild = T._split_float(device_args)[1]
        w = [(put(a), put(b)) for a, b in weights]
        loss = _weighted_loss(op, lambda vals: rebuild(list(vals)), w)
        return fg.grad(loss, argnums=argnums)(*[device_args[i] for i in float_idx])

    bound = Bound()
    with config_set("enable_x64", True), _recording(bound):
        expected = [np.asarray(g) for g in tree_leaves(grad_on(T.to_fg(args64), fnp.asarray))]
    what = f"grad({op.name}) on the GPU vs the CPU grad in float64"
    gargs = [_gpu(a) for a in args]
    out = _run(lambda: grad_on(gargs, lambda w: _gpu(w.astype(np.float32))), bound.missing(), what,
               _host_data(op.fn))
    if out is None:
        return
    rtol, atol = _grad_tolerance(op, expected)
    T.assert_tree_close(_host_leaves(out, what), expected, rtol, atol, what)
    for leaf, i in zip(tree_leaves(out), float_idx):
        assert leaf.dtype == args[i].dtype, f"{what}: gradient dtype {leaf.dtype}, argument {args[i].dtype}"


def check_vmap(op, shapes, rng):
    batched, loop_args, axes = T._vmap_case(op, shapes, rng, "all0")
    per_example = [tree_leaves(_reference(op, T.as_float64(a))) for a in loop_args]
    expected = [np.stack([np.asarray(ex[k]) for ex in per_example]) for k in range(len(per_example[0]))]
    bound = Bound()
    with _recording(bound):
        fg.vmap(op.fn, in_axes=axes)(*T.to_fg(batched))
    what = f"vmap({op.name}) on the GPU vs numpy per example"
    out = _run(lambda: fg.vmap(op.fn, in_axes=axes)(*[_gpu(a) for a in batched]), bound.missing(), what,
               _host_data(op.fn))
    if out is None:
        return
    constant = _constant_outputs(fg.vmap(op.fn, in_axes=axes), T.to_fg(batched))
    T.assert_tree_close(_host_leaves(out, what, constant), expected, op.rtol, op.atol, what)


def check_jit(op, shapes, rng):
    args = T.make_args(op, shapes, rng, np.float32)
    expected = tree_leaves(_reference(op, T.as_float64(args)))
    bound = Bound()
    bound.add_jaxpr(passes.optimize(fg.make_jaxpr(op.fn)(*T.to_fg(args))))
    gargs = [_gpu(a) for a in args]
    jitted = fg.jit(op.fn)
    what = f"jit({op.name}) on the GPU"
    # twice: the second call runs the cached program
    outs = _run(lambda: (jitted(*gargs), jitted(*gargs)), bound.missing(), what, _host_data(op.fn))
    if outs is None:
        return
    out, again = outs
    constant = _constant_outputs(op.fn, T.to_fg(args))
    T.assert_tree_close(_host_leaves(out, what, constant), expected, op.rtol, op.atol, f"{what} vs numpy")
    T.assert_tree_close(_host_leaves(again, what, constant), expected, op.rtol, op.atol,
                        f"{what}, second call, vs numpy")
    _check_dtypes(op, args, out, what)
    try:
        with config_set("gpu_host_fallback", True), warnings.catch_warnings():
            warnings.filterwarnings("ignore", _FALLBACK_WARNING, RuntimeWarning)
            eager = op.fn(*gargs)
    except Exception:   # noqa: BLE001 -- the row's forward test reports eager failures
        return
    T.assert_tree_close(_host_leaves(out, what, constant), _host_leaves(eager, what, constant), op.rtol, op.atol,
                        f"{what} vs eager")
    for a, e in zip(tree_leaves(out), tree_leaves(eager)):
        assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} vs eager {e.dtype}"


CHECKS = {"forward": check_forward, "grad": check_grad, "vmap": check_vmap, "jit": check_jit}


@contextlib.contextmanager
def _device(device, mode):
    """The GPU backend for the block: the stand-in, or the real GPU."""
    with config_set("enable_x64", False), config_set("gpu_host_fallback", False):
        if device == "standin":
            with gpu_standin(use_triton=False):
                yield
            return
        if os.environ.get("TRITON_INTERPRET") == "1":
            pytest.skip("TRITON_INTERPRET=1 is set (another GPU test module sets it for Triton's interpreter): "
                        "run tests/test_gpu_ops.py in a pytest process of its own for real Triton kernels")
        yield


@pytest.mark.parametrize("device,mode,op,shapes", _params())
def test_op_table_on_gpu(device, mode, op, shapes, rng):
    with _device(device, mode):
        CHECKS[mode](op, shapes, rng)


# ----------------------------------------------------------------------------
# Bookkeeping
# ----------------------------------------------------------------------------


def test_every_row_is_accounted_for():
    # Each mode runs every row it applies to on a real GPU; the rest are rows without arguments
    # (forward) or rows the mode does not apply to (not differentiable, value-dependent shapes,
    # jit's one shape per row).
    rows = _all_rows()
    no_args = [rid for op, shapes, rid in rows if not shapes]
    counts = {mode: len(_mode_rows(mode)) for mode in MODES}
    print(f"\nop table: {len(rows)} rows, {len(no_args)} without arguments (not run): {counts}")
    assert counts["forward"] == len(rows) - len(no_args)
    assert counts["grad"] == sum(1 for op, shapes, _ in rows if shapes and op.diff)
    assert counts["vmap"] == sum(1 for op, shapes, _ in rows if shapes and op.transforms)
    assert counts["jit"] <= len({op.name for op, _, _ in rows})
    assert all(op.fn() is not None for op, shapes, _ in rows if not shapes)


def _outcome(device, mode, op, shapes):
    """How a row fares in a mode: ("ok", ""), ("missing", primitive), ("host data", ""), or
    ("fail", the error's first line)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with _device(device, mode):
                CHECKS[mode](op, shapes, np.random.default_rng(1234))
        except Exception as e:   # noqa: BLE001 -- classified below
            return "fail", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]
    for w in caught:
        if issubclass(w.category, GpuMissingWarning):
            return "missing", str(w.message).split(":")[0]
        if issubclass(w.category, HostDataWarning):
            return "host data", ""
    return "ok", ""


def _error_kind(detail):
    """An error line without its shapes and details: what failures are grouped by."""
    kind = re.sub(r"[a-z0-9]+\[[0-9,]*\]", "T", detail)
    return kind.split(". ")[0].split(": use ")[0][:120]


def _summary(device):
    """The whole table's outcomes on ``device``, grouped by primitive and by error."""
    lines = []
    by_prim = collections.defaultdict(collections.Counter)
    fails = collections.defaultdict(lambda: (collections.Counter(), {}))
    for mode in MODES:
        counts = collections.Counter()
        for op, shapes, rid in _mode_rows(mode):
            kind, detail = _outcome(device, mode, op, shapes)
            counts[kind] += 1
            if kind == "missing":
                by_prim[detail][mode] += 1
            elif kind == "fail":
                per_mode, names = fails[_error_kind(detail)]
                per_mode[mode] += 1
                names[op.name.split("[")[0]] = None
        lines.append(f"{mode}: {sum(counts.values())} rows: {counts['ok']} pass, {counts['missing']} raise the "
                     f"missing-implementation error (then pass with host fallback), {counts['host data']} close over "
                     f"host data (the different-devices error), {counts['fail']} fail")
    lines.append("primitives without a GPU implementation: rows raising their error (forward/grad/vmap/jit):")
    lines += [f"  {name}: {'/'.join(str(by_prim[name][m]) for m in MODES)}"
              for name in sorted(by_prim, key=lambda n: -sum(by_prim[n].values()))]
    lines.append("failures by error: rows (forward/grad/vmap/jit) and functions:")
    for kind, (per_mode, names) in sorted(fails.items(), key=lambda kv: -sum(kv[1][0].values())):
        lines.append(f"  {kind}: {'/'.join(str(per_mode[m]) for m in MODES)}: {', '.join(names)}")
    return "\n".join(lines)


@pytest.mark.gpu
@pytest.mark.skipif(NO_GPU, reason="no usable GPU detected (a report for the -m gpu run)")
@pytest.mark.skipif(os.environ.get("FUNCGRAD_GPU_OPS_SUMMARY") != "1",
                    reason="a report, not a check: FUNCGRAD_GPU_OPS_SUMMARY=1 runs it (minutes on one worker)")
def test_summary_of_the_table_on_the_gpu():
    # Not a check (test_op_table_on_gpu is): the whole table once more on the GPU, its outcomes
    # grouped by missing primitive and by error, shown in the warnings summary of the -m gpu run
    # (and printed, with -s). One test, so it runs the table again on one worker: asked for.
    text = _summary("gpu")
    print("\n" + text)
    warnings.warn(UserWarning("op table on GPU arrays:\n" + text), stacklevel=1)
    assert "forward:" in text


def test_the_summary_groups_outcomes(monkeypatch):
    # The summary's grouping on stand-in rows: one passes; a failure is grouped without its shapes.
    rows = {rid: (op, shapes) for op, shapes, rid in _all_rows()}
    assert _outcome("standin", "forward", *rows["add-(3, 4)x(3, 4)-0"]) == ("ok", "")

    def failing(op, shapes, rng):
        raise ValueError("add: arguments live on different devices: f32[3,4] on 'gpu' and f32[4] on 'cpu'. "
                         "Move one")
    monkeypatch.setitem(CHECKS, "forward", failing)
    kind, detail = _outcome("standin", "forward", *rows["add-(3, 4)x(3, 4)-0"])
    assert kind == "fail" and "different devices" in _error_kind(detail) and "f32[" not in _error_kind(detail)


def test_the_recorder_sees_primitives_inside_loops_and_branches():
    # A primitive only inside a loop body or an untaken branch is seen, as one that may not run.
    bound = Bound()
    with _recording(bound):
        fg.lax.fori_loop(0, 2, lambda i, c: fnp.sin(c), fnp.ones(3))
        fg.lax.cond(True, fnp.tanh, fnp.cosh, fnp.ones(3))
    run, inside = {p.name for p in bound.run}, {p.name for p in bound.inside}
    assert "sin" in run | inside and "tanh" in run | inside
    assert "cosh" in inside and "cosh" not in run


def test_full_like_follows_its_argument_to_the_gpu():
    # lax.full_like (zeros of a cotangent, masks' fill values) makes its constant on the argument's
    # device, also through grad and vmap tracers.
    with _device("standin", "forward"):
        x = _gpu(np.arange(6.0).reshape(2, 3))
        assert fg.lax.full_like(x, 0).device == "gpu"
        seen = []
        fg.grad(lambda v: seen.append(fg.lax.full_like(v, 1.0).device) or fnp.sum(v * fg.lax.full_like(v, 2.0)))(x)
        fg.vmap(lambda v: seen.append(fg.lax.full_like(v, 1.0).device) or v)(x)
        assert seen == ["gpu", "gpu"]
        np.testing.assert_array_equal(np.asarray(fg.device_put(fnp.iscomplex(x), "cpu")), np.zeros((2, 3), bool))


def _raise(error):
    raise error


def test_the_expected_errors_are_checked():
    # A row binding a missing primitive fails when it runs, or when the error names another primitive;
    # the different-devices error passes only for rows closing over host data.
    with pytest.raises(AssertionError, match="binds primitives without a GPU implementation"):
        _run(lambda: 1.0, (["erf"], ["erf"]), "ran")
    assert _run(lambda: 1.0, (["erf"], []), "erf in a branch not taken") == 1.0
    with pytest.raises(AssertionError, match="names 'erfc'"):
        _run(lambda: _raise(NotImplementedError("erfc: no GPU implementation")), (["erf"], []), "other")
    devices = ValueError("mul: arguments live on different devices: f32[3] on 'gpu' and f32[3] on 'cpu'")
    with pytest.raises(ValueError, match="different devices"):
        _run(lambda: _raise(devices), ([], []), "library constant")
    with pytest.warns(HostDataWarning, match="_IDX"):
        assert _run(lambda: _raise(devices), ([], []), "host data", ("_IDX",)) is None
    assert _run(lambda: 2.0, ([], []), "host data that ran", ("_IDX",)) == 2.0


def test_host_data_is_found_in_the_rows_functions_only():
    by_name = {op.name: op for op in T.OPS}
    assert _host_data(by_name["x[int array]"].fn) == ("_IDX",)
    assert _host_data(by_name["take"].fn) == ("np.array(...)",)
    assert _host_data(by_name["sum[where]"].fn) == ("_MASK",)
    assert _host_data(by_name["diag"].fn) == ()          # fnp.diag itself: its constants are its own
    assert _host_data(by_name["add"].fn) == ()
