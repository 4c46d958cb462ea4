"""Generated numba kernels for fused groups, cached on disk across processes.

numba cannot cache functions built with ``exec``, so each kernel's source is
written to a file named by the hash of its content in the kernel cache
directory (``FUNCGRAD_CACHE_DIR`` or ``config.update("cache_dir", ...)``;
default ``~/.cache/funcgrad/kernels``) and run from there; numba's own
``cache=True`` then stores the machine code beside it.
:mod:`funcgrad.compiler.kernel_cache` keeps that directory safe to share
between concurrent processes, heals damaged entries, falls back when the
directory is unusable and caps its size.

A kernel iterates over a 2-d view ``(outer, inner)`` of the group's shape:
``prange`` over ``outer`` (when the work is large enough to pay for
threads), a plain loop over ``inner``, and no temporaries: intermediate
values live in registers.  A trailing reduction accumulates over ``inner``.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from funcgrad import _dtypes
from funcgrad.compiler import kernel_cache

_UNARY = {
    "neg": "-{0}", "exp": "np.exp({0})", "exp2": "np.exp2({0})", "log": "np.log({0})", "log2": "np.log2({0})",
    "log1p": "np.log1p({0})", "expm1": "np.expm1({0})", "sqrt": "np.sqrt({0})", "sin": "np.sin({0})",
    "cos": "np.cos({0})", "tan": "np.tan({0})", "tanh": "np.tanh({0})", "arcsin": "np.arcsin({0})",
    "arccos": "np.arccos({0})", "arctan": "np.arctan({0})", "sinh": "np.sinh({0})", "cosh": "np.cosh({0})",
    "abs": "np.abs({0})", "sign": "np.sign({0})", "floor": "np.floor({0})", "ceil": "np.ceil({0})",
    "isnan": "np.isnan({0})", "isfinite": "np.isfinite({0})", "logical_not": "(not {0})",
    "stop_gradient": "{0}", "logistic": "(np.tanh({0} * {half}) * {half} + {half})",
}
_BINARY = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}", "pow": "{0} ** {1}",
    "maximum": "np.maximum({0}, {1})", "minimum": "np.minimum({0}, {1})", "arctan2": "np.arctan2({0}, {1})",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
    "ge": "{0} >= {1}", "logical_and": "({0} and {1})", "logical_or": "({0} or {1})",
    "logical_xor": "({0} != {1})",
}
FUSIBLE = set(_UNARY) | set(_BINARY) | {"select", "convert_element_type"}
REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min"}

# Iteration sizes below this run serially: starting numba's threads costs
# more than the loop itself.
PARALLEL_MIN_ELEMENTS = 1 << 15


@dataclass
class Op:
    """One fused operation: ``out = prim(args)``; args are names or literal values."""

    out: str
    prim: str
    args: list
    dtype: np.dtype
    params: dict = field(default_factory=dict)


@dataclass
class KernelSpec:
    """Everything the source depends on (and nothing else: it is the cache key)."""

    inputs: list          # (name, index pattern "[i, j]" / "[0, j]" / "[i, 0]" / "[0, 0]", dtype)
    ops: list             # Op, in order
    outputs: list         # names written at [i, j]
    reduction: tuple | None  # (prim name, operand name, dtype, output name) or None
    parallel: bool


def _typed(value: Any, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return "True" if value else "False"
    if dtype.kind == "f" and not np.isfinite(value):
        return f"np.{dtype.name}({'np.nan' if np.isnan(value) else ('np.inf' if value > 0 else '-np.inf')})"
    return f"np.{dtype.name}({value!r})"


def _expr(op: Op, consts: dict, operand_dtype: Callable[[Any], np.dtype]) -> str:
    def ref(a: Any, other: Any = None) -> str:
        if isinstance(a, str):
            return a
        # A literal takes the dtype of the array operand beside it (weak typing),
        # unless it is of a higher kind (i32 * 2.5 computes in float, not in i32).
        dt = (_dtypes.canonicalize(np.result_type(operand_dtype(other), a))
              if other is not None and isinstance(other, str) else op.dtype)
        key = (type(a), a, dt)
        if key not in consts:
            consts[key] = (f"c{len(consts)}", _typed(a, dt))
        return consts[key][0]

    if op.prim == "exp" and op.dtype.name in ("float32", "float64"):
        # A vectorisable exp (funcgrad.backends.cpu._fastmath): ~1 ulp, several times libm's speed.
        return f"exp_{op.dtype.name[0]}{op.dtype.name[-2:]}({ref(op.args[0])})"
    if op.prim in _UNARY:
        half = ref(0.5) if op.prim == "logistic" else ""
        return _UNARY[op.prim].format(ref(op.args[0]), half=half)
    if op.prim in _BINARY:
        x, y = op.args
        return _BINARY[op.prim].format(ref(x, y), ref(y, x))
    if op.prim == "select":
        c, x, y = op.args
        return f"({ref(x, y)} if {ref(c)} else {ref(y, x)})"
    if op.prim == "convert_element_type":
        target = op.params["dtype"]
        return f"({ref(op.args[0])} != 0)" if target.kind == "b" else f"np.{target.name}({ref(op.args[0])})"
    raise KeyError(op.prim)


def _fastmath_flags(spec: KernelSpec) -> str:
    """Only ``reassoc``, and only where it pays: it lets the fast exp and the
    reductions vectorise (~10x on exp-heavy groups).  Never nnan/ninf (NaN and
    inf behave as in numpy) nor contract (no FMA): kernels without exp or a
    reduction give bit-for-bit numpy's results; sums may differ from numpy's
    by float reassociation."""
    if spec.reduction or any(op.prim == "exp" for op in spec.ops):
        return ", fastmath={'reassoc'}"
    return ""


def _cast(expr: str, dtype: np.dtype) -> str:
    # Keep numba's arithmetic in the dtype numpy would use (f32 stays f32).
    return f"np.{dtype.name}({expr})" if dtype.kind in "fiu" else expr


def generate_source(spec: KernelSpec) -> str:
    """The Python source of the kernel described by ``spec``."""
    dtypes = {name: dtype for name, _, dtype in spec.inputs}
    dtypes.update({op.out: op.dtype for op in spec.ops})
    consts: dict = {}
    body = [f"            {name} = a_{name}{pattern}" for name, pattern, _ in spec.inputs]
    for op in spec.ops:
        body.append(f"            {op.out} = {_cast(_expr(op, consts, lambda n: dtypes.get(n, op.dtype)), op.dtype)}")
    body += [f"            o_{name}[i, j] = {name}" for name in spec.outputs]
    loop = "numba.prange" if spec.parallel else "range"
    args = ["n0", "n1"] + [f"a_{n}" for n, _, _ in spec.inputs] + [f"o_{n}" for n in spec.outputs]
    lines = ["# Generated by funcgrad.compiler.codegen; do not edit.",
             f"# helpers: {_HELPERS_DIGEST}",   # a change in the helpers makes a new file (and cache entry)
             "import numba", "import numpy as np",
             "from funcgrad.backends.cpu._fastmath import exp_f32, exp_f64", "", "",
             "@numba.njit(parallel=%s, cache=True, error_model='numpy', nogil=True%s)"
             % (spec.parallel, _fastmath_flags(spec)),
             f"def kernel({', '.join(args + (['r_out'] if spec.reduction else []))}):"]
    lines += [f"    {name} = {value}" for name, value in consts.values()]
    lines.append(f"    for i in {loop}(n0):")
    if spec.reduction:
        prim, operand, dtype, _ = spec.reduction
        init = {"reduce_sum": 0, "reduce_max": -np.inf, "reduce_min": np.inf}[prim]
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            init = {"reduce_sum": 0, "reduce_max": info.min, "reduce_min": info.max}[prim]
        lines.append(f"        acc = {_typed(init, dtype)}")
    lines.append("        for j in range(n1):")
    lines += body
    if spec.reduction:
        prim, operand, dtype, _ = spec.reduction
        if prim == "reduce_sum":
            lines.append(f"            acc += {operand}")
        else:
            cmp = ">" if prim == "reduce_max" else "<"
            # NaN propagates, as in numpy's max/min.
            lines.append(f"            if {operand} {cmp} acc or {operand} != {operand}:")
            lines.append(f"                acc = {operand}")
        lines.append("        r_out[i] = acc")
    return "\n".join(lines) + "\n"


def _helpers_digest() -> str:
    from funcgrad.backends.cpu import _fastmath
    with open(_fastmath.__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


_HELPERS_DIGEST = _helpers_digest()
# Kernels loaded in this process, oldest first; bounded (programs hold their own
# kernels: a forgotten one is only loaded again from the disk cache if needed).
_loaded: OrderedDict[str, Callable] = OrderedDict()
MAX_LOADED = 1024
_load_lock = threading.Lock()


def compile_kernel(spec: KernelSpec) -> Callable:
    """The compiled kernel for ``spec``: from this process, the disk cache, or numba."""
    source = generate_source(spec)
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    kernel = _loaded.get(digest)
    if kernel is not None:
        return kernel
    with _load_lock:   # threads missing together load a kernel once
        kernel = _loaded.get(digest)
        if kernel is None:
            kernel = _load_kernel(spec, source, digest)
    return kernel


def _load_kernel(spec: KernelSpec, source: str, digest: str) -> Callable:
    """Load the kernel (disk cache or numba) and record it; the caller holds ``_load_lock``."""
    from funcgrad.backends.cpu import _threads  # (threading layer before first parallel use)
    kernel = kernel_cache.load_kernel(digest, source)
    kernel = _threads.guard(kernel) if spec.parallel else kernel
    _loaded[digest] = kernel
    while len(_loaded) > MAX_LOADED:
        sys.modules.pop(kernel_cache.module_name(_loaded.popitem(last=False)[0]), None)
    return kernel


def source_path(spec: KernelSpec) -> str:
    """Where the source of ``spec``'s kernel is cached (in the directory in use now)."""
    digest = hashlib.sha256(generate_source(spec).encode()).hexdigest()[:24]
    return os.path.join(kernel_cache.cache_dir() or "<memory>", f"fg_{digest}.py")
