"""``Jitted.lower(...).memory_analysis()``: the bytes a call needs, read off the buffer plan, checked against the
arrays' sizes and against what a call really allocates (tracemalloc sees numpy's allocations)."""
import pathlib
import sys
import tracemalloc

import numpy as np

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad.compiler.codegen import wait_for_kernels

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
from dispatch import mlp_data  # noqa: E402
from mlp_step import funcgrad_step  # noqa: E402


def _mlp_step():
    """The benchmarks' jitted SGD step (``mlp_step.funcgrad_step``) on a small 64-48-32-10 MLP, and its arguments."""
    p, x, y = mlp_data(16, (64, 48, 32, 10))
    args = ({k: fnp.array(v) for k, v in p.items()}, fnp.array(x), fnp.array(y))
    return fg.jit(funcgrad_step()), args


def _leaves_bytes(tree) -> int:
    return sum(np.asarray(a).nbytes for a in fg.tree_util.tree_leaves(tree))


def _call_peak(f, args, keep: list) -> int:
    """Bytes newly allocated at the busiest moment of one call (tracemalloc); the results go into ``keep``
    (held, so that the program cannot recycle their buffers on the next call)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = f(*args)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    keep.append(out)
    return peak


def test_sizes_of_arguments_and_outputs():
    f, args = _mlp_step()
    m = f.lower(*args).memory_analysis()
    assert m.argument_bytes == _leaves_bytes(args)
    assert m.output_bytes == _leaves_bytes(f(*args))   # the new parameters
    assert m.constant_bytes >= 0
    assert m.planned_bytes <= m.temp_bytes
    assert m.peak_bytes >= m.argument_bytes + m.constant_bytes + m.temp_bytes
    assert m.peak_bytes >= m.argument_bytes + m.output_bytes
    text = str(m)
    assert "peak of a call" in text and "planned buffers" in text


def test_peak_bounds_what_a_call_allocates():
    f, args = _mlp_step()
    m = f.lower(*args).memory_analysis()
    held: list = []
    program_first = _call_peak(f, args, held)   # the first call allocates the planned buffers too
    wait_for_kernels()   # until then fused groups may run on numpy (the tiered start), allocating as they go
    steady = min(_call_peak(f, args, held) for _ in range(3))
    # A steady call allocates its outputs and the unplanned intermediates, never more than the analysis'
    # peak less what already existed (arguments, constants, planned buffers); 16 KiB for Python objects.
    assert steady <= m.peak_bytes - m.argument_bytes - m.constant_bytes - m.planned_bytes + 16384
    assert steady >= m.output_bytes * 0.9
    # The first call also allocates the planned buffers, which the analysis counts.
    assert program_first >= m.planned_bytes * 0.9


def test_a_bigger_intermediate_raises_the_peak():
    x = fnp.ones((32, 32), np.float32)
    small = fg.jit(lambda x: fnp.sum(fnp.sin(x) * 2.0)).lower(x).memory_analysis()
    outer = fg.jit(lambda x: fnp.sum(fnp.sort(fnp.outer(x.ravel(), x.ravel()), axis=1))).lower(x).memory_analysis()
    n = 32 * 32
    # The outer product's n x n float32 values (4 MiB) must be alive at once in the second program.
    assert outer.temp_bytes >= n * n * 4
    assert small.temp_bytes < n * n * 4
    assert outer.peak_bytes >= outer.argument_bytes + n * n * 4
