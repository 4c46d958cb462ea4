"""Numerics checks: derivatives against finite differences, functions against numpy.

:func:`check_grads` is what funcgrad's own tests use for every rule:

* forward mode: ``jvp(f, x, v)`` against central differences
  ``(f(x + eps v) - f(x - eps v)) / 2 eps``, computed in float64;
* reverse mode: the inner-product identity ``<u, J v> == <J^T u, v>``
  with the jvp (itself checked against differences) and a random ``u``;
* recursively to ``order``: the derivative maps are checked the same way.

Complex values are pairs of reals: directions are random in both the real
and the imaginary part, and the reverse-mode identity uses JAX's pairing of
a cotangent ``u`` with a tangent ``v``, ``real(sum(u * v))`` (no conjugate:
a vjp is the transpose of the jvp, not its adjoint).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import dtypes as _dtypes
from funcgrad.api import jvp, vjp   # fg.jvp, fg.vjp (a library does not import the package root)
from funcgrad.dtypes import canonicalize_dtype, default_float_dtype
from funcgrad.tree_util import tree_flatten, tree_map

# Default tolerances per dtype (as JAX's and HIPS autograd's test utilities; bfloat16's as JAX's gradient
# tolerance for it).
_DEFAULT_EPS = {_dtypes.bfloat16: 1e-1, np.dtype("float16"): 1e-1, np.dtype("float32"): 1e-2,
                np.dtype("float64"): 1e-5}
_DEFAULT_TOL = {_dtypes.bfloat16: 1e-1, np.dtype("float16"): 1e-1, np.dtype("float32"): 2e-2,
                np.dtype("float64"): 1e-5}


def _as64(x: Any) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128) if x.dtype.kind == "c" else x.astype(np.float64)


def _leaves_np(tree: Any) -> list[np.ndarray]:
    return [_as64(x) for x in tree_flatten(tree)[0]]


def _vdot(a: Any, b: Any) -> float:
    # real(sum(u * v)): a complex cotangent u is the real-linear functional v -> real(u . v) (JAX's convention)
    return float(sum(np.real(np.sum(x * y)) for x, y in zip(_leaves_np(a), _leaves_np(b))))


def _computed_dtype(args: Sequence[Any], out: Any) -> np.dtype:
    """The float dtype funcgrad actually computes in, which sets the tolerances.

    Inputs count as funcgrad stores them (a float64 numpy input is float32
    unless x64 is enabled), outputs as they come out; the least precise of
    them limits the accuracy of both the derivative and the differences.
    """
    ins = [canonicalize_dtype(_leaf_dtype(x)) for x in tree_flatten(args)[0]]
    outs = [_leaf_dtype(o) for o in tree_flatten(out)[0]]
    floats = [np.dtype(f"f{d.itemsize // 2}") if d.kind == "c" else d for d in ins + outs if _dtypes.kind(d) in "fc"]
    return min(floats, key=lambda d: _dtypes.finfo(d).nmant) if floats else default_float_dtype()


def _leaf_dtype(x: Any) -> np.dtype:
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def _random_like(tree: Any, rng: np.random.Generator) -> Any:
    def draw(x: Any) -> np.ndarray:
        dtype = np.asarray(x).dtype
        v = rng.standard_normal(np.shape(x))
        if dtype.kind == "c":   # both directions: real and imaginary
            v = v + 1j * rng.standard_normal(np.shape(x))
        return v.astype(dtype)
    return tree_map(draw, tree)


def _scaled_add(tree: Any, direction: Any, eps: float) -> Any:
    return tree_map(lambda x, v: (_as64(x) + eps * _as64(v)).astype(_difference_dtype(np.asarray(x).dtype)),
                    tree, direction)


def _difference_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype finite differences evaluate a function in: the argument's, but float32 for bfloat16 (whose
    8-bit steps ``x +- eps v`` and values would leave differences with no correct digit)."""
    return np.dtype(np.float32) if dtype == _dtypes.bfloat16 else dtype


def _assert_close(actual: Any, expected: Any, atol: float, rtol: float, what: str) -> None:
    a_leaves, e_leaves = _leaves_np(actual), _leaves_np(expected)
    if len(a_leaves) != len(e_leaves):
        raise AssertionError(f"{what}: {len(a_leaves)} outputs vs {len(e_leaves)} expected")
    for a, e in zip(a_leaves, e_leaves):
        if a.shape != e.shape:
            raise AssertionError(f"{what}: shape {a.shape} vs expected {e.shape}")
        if not np.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True):
            err = np.max(np.abs(a - e)) if a.size else 0.0
            raise AssertionError(f"{what}: max abs error {err:.3g} exceeds atol={atol:g}, rtol={rtol:g}\n"
                                 f"actual:   {a.ravel()[:8]}\nexpected: {e.ravel()[:8]}")


def numerical_jvp(f: Callable, args: tuple, tangents: tuple, eps: float) -> Any:
    """Central finite differences of ``f`` at ``args`` along ``tangents`` (float64 arithmetic).

    >>> from funcgrad import testing
    >>> testing.numerical_jvp(lambda x: x ** 2, (np.array([3.0]),), (np.array([1.0]),), eps=1e-6)     # 2 x
    array([6.])
    """
    plus = f(*_scaled_add(args, tangents, eps))
    minus = f(*_scaled_add(args, tangents, -eps))
    return tree_map(lambda p, m: (_as64(p) - _as64(m)) / (2 * eps), plus, minus)


def check_jvp(f: Callable, args: tuple, atol: float, rtol: float, eps: float, rng: np.random.Generator) -> None:
    """Assert that ``jvp(f)`` at ``args`` matches central finite differences along random tangents.

    >>> from funcgrad import testing
    >>> testing.check_jvp(fnp.sin, (np.array([0.5, 1.0]),), atol=1e-2, rtol=1e-2, eps=1e-3, rng=np.random.default_rng(0))
    """
    tangents = _random_like(args, rng)
    _, tangent_out = jvp(f, args, tangents)
    expected = numerical_jvp(f, args, tangents, eps)
    _assert_close(tangent_out, expected, atol, rtol, "jvp vs finite differences")


def check_vjp(f: Callable, args: tuple, atol: float, rtol: float, eps: float, rng: np.random.Generator) -> None:
    """Assert that ``vjp(f)`` at ``args`` is the transpose of ``jvp(f)`` (``<ct, J t> == <J^T ct, t>``) for random ``t``, ``ct``.

    >>> from funcgrad import testing
    >>> testing.check_vjp(fnp.sin, (np.array([0.5, 1.0]),), atol=1e-2, rtol=1e-2, eps=1e-3, rng=np.random.default_rng(0))
    """
    out, pullback = vjp(f, *args)
    v = _random_like(args, rng)
    u = _random_like(out, rng)
    (Jv,) = [numerical_jvp(f, args, v, eps)]
    JTu = pullback(u)
    lhs, rhs = _vdot(u, Jv), _vdot(JTu, v)
    scale = max(1.0, abs(lhs), abs(rhs))
    if not abs(lhs - rhs) <= atol * scale + rtol * scale:
        raise AssertionError(f"vjp: <u, J v> = {lhs:.6g} (finite differences) but <J^T u, v> = {rhs:.6g} "
                             f"(tolerance {atol:g}, rtol {rtol:g})")


def check_grads(f: Callable, args: Sequence[Any], order: int = 2, modes: Sequence[str] = ("fwd", "rev"),
                eps: float | None = None, atol: float | None = None, rtol: float | None = None,
                seed: int = 0) -> None:
    """Check ``f``'s derivatives at ``args`` against finite differences, to ``order``.

    >>> check_grads(lambda x: fnp.sin(x) * x, (fnp.array([0.3, 1.2]),), order=2)

    Differences are taken in float64 where x64 is enabled; where funcgrad
    computes in float32 (float32 inputs, or float64 numpy inputs without x64)
    the default tolerances are loose (2e-2), as in JAX's tests. bfloat16
    arguments are differenced in float32 (a bfloat16 difference quotient has
    no correct digit), so the check compares the derivatives funcgrad
    computes in bfloat16 with the float32 function's, within 1e-1 (JAX's
    gradient tolerance for bfloat16): it catches wrong rules, not rounding.
    """
    args = tuple(args)
    out = f(*args)
    dtype = _computed_dtype(args, out)
    eps = eps or _DEFAULT_EPS.get(dtype, 1e-5)
    atol = atol if atol is not None else _DEFAULT_TOL.get(dtype, 1e-5)
    rtol = rtol if rtol is not None else atol
    rng = np.random.default_rng(seed)
    unknown = set(modes) - {"fwd", "rev"}
    if unknown:
        raise ValueError(f"check_grads: unknown modes {unknown}; use 'fwd' and/or 'rev'")

    if "fwd" in modes:
        check_jvp(f, args, atol, rtol, eps, rng)
        if order > 1:
            tangents = _random_like(args, rng)
            check_grads(lambda *xs: jvp(f, xs, _cast_like(tangents, xs))[1], args, order - 1, ("fwd",), eps, atol,
                        rtol, seed + 1)
    if "rev" in modes:
        check_vjp(f, args, atol, rtol, eps, rng)
        if order > 1:
            u = _random_like(out, rng)
            check_grads(lambda *xs: _pull(f, xs, u), args, order - 1, ("rev",), eps, atol, rtol, seed + 1)


def _cast_like(tree: Any, like: Any) -> Any:
    """The numpy leaves of ``tree`` in the dtypes of ``like``'s (a bfloat16 direction at the float32 points
    where finite differences evaluate a bfloat16 function)."""
    return tree_map(lambda t, x: np.asarray(t).astype(_leaf_dtype(x)), tree, like)


def _pull(f: Callable, xs: tuple, u: Any) -> Any:
    out, pullback = vjp(f, *xs)
    return pullback(_cast_like(u, out))


def check_close(actual: Any, expected: Any, atol: float = 1e-6, rtol: float = 1e-6, what: str = "value") -> None:
    """Assert two pytrees of arrays are close (compared in float64).

    >>> from funcgrad import testing
    >>> testing.check_close({"w": fnp.ones(2)}, {"w": np.ones(2) + 1e-8})     # raises AssertionError if not
    """
    _assert_close(actual, expected, atol, rtol, what)


def check_against_numpy(f: Callable, reference: Callable, args: Sequence[Any], atol: float | None = None,
                        rtol: float | None = None) -> None:
    """Compare ``f(*args)`` with a numpy ``reference`` evaluated in float64.

    >>> from funcgrad import testing
    >>> testing.check_against_numpy(fnp.sin, np.sin, [np.array([0.5, 1.0])])     # raises if they differ
    """
    out = f(*args)
    dtype = _computed_dtype(args, out)
    tol = {np.dtype("float32"): 1e-5, np.dtype("float64"): 1e-12}.get(dtype, 1e-5)
    args64 = tree_map(lambda x: _as64(x) if _dtypes.kind(np.asarray(x).dtype) in "fc" else np.asarray(x), args)
    _assert_close(out, reference(*args64), atol if atol is not None else tol, rtol if rtol is not None else tol,
                  "function vs numpy reference")


def x64_enabled() -> bool:
    """Whether 64-bit dtypes are kept (``config.enable_x64``).

    >>> from funcgrad import testing
    >>> testing.x64_enabled()
    False
    """
    return default_float_dtype() == np.float64   # fg.config.enable_x64


# --------------------------------------------------------------------------
# Memory measurement (Linux /proc), for memory tests and benchmarks
# --------------------------------------------------------------------------


def process_memory(field: str) -> int | None:
    """A ``/proc/self/status`` field in bytes (``"VmRSS"``, ``"VmHWM"`` peak); None where unavailable.

    >>> from funcgrad import testing
    >>> rss = testing.process_memory("VmRSS")     # bytes, or None off Linux
    >>> rss is None or rss > 0
    True
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def reset_peak_memory() -> bool:
    """Reset the process' peak RSS (VmHWM := VmRSS; Linux >= 4.0). False where unsupported.

    >>> from funcgrad import testing
    >>> testing.reset_peak_memory() in (True, False)     # False where the kernel cannot
    True
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return process_memory("VmHWM") is not None
    except OSError:
        return False
