"""What the property-based tests (``test_properties*.py``) share: Hypothesis strategies for values in a
domain, shapes and batches (``Domain``, ``arrays``, ``batch_for``), the float64 numpy reference and the
dtype funcgrad documents for it (``reference``, ``expected_dtype``), and ``check_transforms``, which
compares ``f`` with numpy, ``jit(f)`` with ``f`` and ``vmap(f)`` with a loop.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import funcgrad as fg
import funcgrad.numpy as fnp
from conftest import config_set

F32, F64, I32, BOOL = (np.dtype(t) for t in ("float32", "float64", "int32", "bool"))

# Small shapes: 0-d, size-0 and size-1 sides, up to 4 dims (at most 81 elements).
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3)


def _examples(n: int) -> settings:
    """``n`` examples under the default profile, scaled up by the ``thorough`` one."""
    return settings(max_examples=max(1, n * settings.default.max_examples // 30))


# ----------------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Domain:
    """Where an argument's values lie: ``lo <= x <= hi`` and ``|x| >= gap``.

    Float values are exactly representable in float32 (``width=32``), so a
    float64 input narrowed without x64 keeps its value, and so do weak
    Python float scalars.
    """

    lo: float = -10.0
    hi: float = 10.0
    gap: float = 0.0

    def _intervals(self, lo: float, hi: float, gap: float) -> list[tuple]:
        """[lo, hi] without the open interval (-gap, gap)."""
        if gap <= 0:
            return [(lo, hi)]
        parts = [(max(lo, gap), hi), (lo, min(hi, -gap))]
        return [(a, b) for a, b in parts if a <= b]

    def floats(self, width: int = 32) -> st.SearchStrategy:
        return st.one_of(*[st.floats(a, b, width=width, allow_subnormal=False)
                           for a, b in self._intervals(self.lo, self.hi, self.gap)])

    def ints(self) -> st.SearchStrategy:
        lo, hi = max(math.ceil(self.lo), -50), min(math.floor(self.hi), 50)
        return st.one_of(*[st.integers(a, b) for a, b in self._intervals(lo, hi, math.ceil(self.gap))])

    def bools(self) -> st.SearchStrategy:
        return st.just(True) if self.gap > 0 or self.lo > 0 else st.booleans()

    def elements(self, dtype: np.dtype) -> st.SearchStrategy:
        return {"f": self.floats, "i": self.ints, "b": self.bools}[dtype.kind]()


ANY = Domain()


def arrays(dtype: np.dtype, shape: tuple, domain: Domain = ANY, unique: bool = False) -> st.SearchStrategy:
    return hnp.arrays(dtype, shape, elements=domain.elements(dtype), unique=unique)


def dtypes_for(kinds: str) -> list[np.dtype]:
    """Input dtypes for an op accepting dtype kinds ``kinds`` ("f", "i", "b")."""
    return [d for d in (F32, F64, I32, BOOL) if d.kind in kinds]


# ----------------------------------------------------------------------------
# References and comparisons
# ----------------------------------------------------------------------------


def _is_array(a: Any) -> bool:
    return isinstance(a, np.ndarray)


def expected_dtype(np_fn: Callable, args: list) -> np.dtype:
    """The dtype funcgrad documents for ``np_fn(*args)``: numpy's (NEP 50, weak
    Python scalars), with 64-bit types narrowed to 32 bits unless x64 is on,
    and the default float where numpy would pick float16 for bools."""
    probe = [np.ones(a.shape, a.dtype) if _is_array(a) else a for a in args]
    with np.errstate(all="ignore"):
        dt = np.asarray(np_fn(*probe)).dtype
    if dt == np.float16:
        dt = F64
    if not fg.config.enable_x64:
        dt = {F64: F32, np.dtype("int64"): I32, np.dtype("uint64"): np.dtype("uint32")}.get(dt, dt)
    return dt


def reference(np_fn: Callable, args: list) -> np.ndarray:
    """``np_fn`` in float64 (float arrays widened; ints, bools and Python scalars as they are)."""
    wide = [a.astype(F64) if _is_array(a) and a.dtype.kind == "f" else a for a in args]
    with np.errstate(all="ignore"):
        out = np.asarray(np_fn(*wide))
        if out.dtype == np.float16:   # numpy's float16 for bools: funcgrad computes in the default float
            out = np.asarray(np_fn(*[a.astype(F64) if _is_array(a) else a for a in args]))
    return out


def _tolerance(dtype: np.dtype, ulps: float) -> float:
    return ulps * float(np.finfo(dtype).eps) if dtype.kind == "f" else 0.0


def assert_matches(actual: Any, expected: np.ndarray, dtype: np.dtype, what: str, ulps: float = 64,
                   scale: float = 1.0) -> None:
    """``actual`` has ``dtype`` and ``expected``'s shape and values (floats: ``ulps`` of
    ``dtype`` relative, and absolute on the scale ``scale``; others exactly)."""
    assert isinstance(actual, fg.Array), f"{what}: returned {type(actual).__name__}, not an Array"
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype}, expected {dtype}"
    got = np.asarray(actual)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    if dtype.kind == "f":
        tol = _tolerance(dtype, ulps)
        np.testing.assert_allclose(got.astype(F64), expected.astype(F64), rtol=tol, atol=tol * scale,
                                   equal_nan=False, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def _same(actual: Any, expected: Any, what: str, scale: float = 1.0) -> None:
    """Two funcgrad results agree to a few ulps (jit vs eager, vmap vs loop)."""
    dt = np.dtype(expected.dtype)
    assert_matches(actual, np.asarray(expected), dt, what, ulps=4, scale=scale)


@dataclasses.dataclass
class Batch:
    """``vmap`` inputs: ``args`` with a batch of ``size`` along ``in_axes`` (None: not batched)."""

    in_axes: tuple
    args: list
    size: int

    def slices(self, i: int) -> list:
        return [a if ax is None else np.asarray(np.take(a, i, axis=ax)) for a, ax in zip(self.args, self.in_axes)]


def _to_fg(args: list) -> list:
    """numpy arrays as funcgrad Arrays (narrowed without x64); Python scalars as they are."""
    return [fnp.asarray(a) if _is_array(a) else a for a in args]


def check_transforms(fg_fn: Callable, np_fn: Callable, args: list, x64: bool, batch: Batch | None,
                     ulps: float = 64, scale: float = 1.0) -> None:
    """``fg_fn(*args)`` vs numpy, ``jit(fg_fn)`` vs eager, ``vmap(fg_fn)`` vs a loop."""
    with config_set("enable_x64", x64), config_set("jit_fusion", False):
        out = fg_fn(*_to_fg(args))
        assert_matches(out, reference(np_fn, args), expected_dtype(np_fn, args), "eager vs numpy", ulps, scale)
        # Python scalars are closed over, not passed: jit traces a scalar *argument* as
        # a strongly typed array of the default dtype, not as a weak scalar.
        where = [i for i, a in enumerate(args) if _is_array(a)]

        def on_arrays(*arrays):
            full = list(args)
            for i, a in zip(where, arrays):
                full[i] = a
            return fg_fn(*full)

        _same(fg.jit(on_arrays)(*_to_fg([args[i] for i in where])), out, "jit(f) vs f", scale)
        if batch is not None:
            loop = [fg_fn(*_to_fg(batch.slices(i))) for i in range(batch.size)]
            stacked = np.stack([np.asarray(o) for o in loop])
            got = fg.vmap(fg_fn, in_axes=batch.in_axes)(*_to_fg(batch.args))
            assert_matches(got, stacked, loop[0].dtype, f"vmap(f, in_axes={batch.in_axes}) vs loop", 4, scale)


def _random_axis_form(draw, axis: int, ndim: int) -> int:
    """``axis`` (in range(ndim)) written as itself or as its negative form."""
    return axis - ndim if draw(st.booleans()) else axis


@st.composite
def batch_for(draw, args: list, domains: list) -> Batch:
    """A batch of fresh values shaped like ``args``, batched along random axes
    (given or negative); Python scalars are never batched."""
    size = draw(st.integers(1, 3))
    in_axes, out = [], []
    arrays_at = [i for i, a in enumerate(args) if _is_array(a)]
    must = draw(st.sampled_from(arrays_at))
    for i, (a, dom) in enumerate(zip(args, domains)):
        if not _is_array(a) or (i != must and not draw(st.booleans())):
            in_axes.append(None)
            out.append(a)
            continue
        pos = draw(st.integers(0, a.ndim))
        shape = a.shape[:pos] + (size,) + a.shape[pos:]
        in_axes.append(_random_axis_form(draw, pos, a.ndim + 1))
        out.append(draw(arrays(a.dtype, shape, dom)))
    return Batch(tuple(in_axes), out, size)


def _names(table: dict, smooth_only: bool = False) -> list[str]:
    return sorted(n for n, op in table.items() if op.smooth or not smooth_only)
