"""Generated Triton kernels for fused elementwise groups (the GPU side of ``jit``).

A fused group (found by :func:`funcgrad.compiler.fusion.fuse`, with this
module's :func:`rule`) becomes one ``@triton.jit`` kernel over the group's
elements, flattened: each program instance handles ``BLOCK`` consecutive
elements (int64 offsets, a masked tail), loads every input once, computes
the whole chain in registers and stores the values the rest of the program
uses. Broadcasting: an input of the group's shape is read at ``offs``, a
one-element input at offset 0 (broadcast in registers), and any other
broadcast input is materialised to the group's shape (contiguous) before
the launch.

A ``reduce_sum``/``reduce_max``/``reduce_min`` over trailing axes that ends
a group (rows of at most :data:`MAX_ROW` elements) is the kernel's row
epilogue: one program instance per row walks it ``BLOCK`` elements at a time,
accumulating in the compute dtype (float32 for float16 and bfloat16), and stores one value
per row; a NaN anywhere in a row makes its max/min NaN, as in numpy.

dtypes: float32, float16 and bfloat16 compute in float32 (Triton's math
functions take float32). float16 values are rounded once, when stored (a
``convert`` to float16 inside the group rounds where it stands); bfloat16
values are rounded (to nearest even) after every operation, giving eager's
per-operation values (as XLA does) up to the last bit of a transcendental
function;
int32 computes in int32 (wrapping, as CuPy); bool is stored as one byte
(``uint8``) and computed as Triton's ``int1``. float64/int64 values (with
``enable_x64``) and primitives without a Triton lowering here stay outside
kernels and run through the GPU implementations.

Kernels are cached in this process by the hash of their source (the source
is written to a per-process directory so that ``triton.jit`` can read it);
compiled binaries are cached on disk by Triton itself (``~/.triton/cache``,
or ``TRITON_CACHE_DIR``), keyed by source and target.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import math
import os
import shutil
import tempfile
import threading
from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._dtypes import ShapedArray
from funcgrad._ir import Eqn, Literal, Var
from funcgrad.compiler.codegen import Elementwise, Op, Reduction
from funcgrad.primitives import elementwise as E
from funcgrad.primitives import reduce as R
from funcgrad.primitives import shape as S

__all__ = ["rule", "emit", "TritonFused", "kernel_count", "kernel_source"]

BLOCK = 1024
NUM_WARPS = 4
# The longest row a fused reduction takes (one program instance sums a row, BLOCK elements at a time).
MAX_ROW = 32 * BLOCK

_F32, _F16, _I32, _BOOL = (np.dtype(t) for t in ("float32", "float16", "int32", "bool"))
_BF16 = _dtypes.bfloat16
_DTYPES = {_F32, _F16, _BF16, _I32, _BOOL}
# What each dtype is computed as inside a kernel, and stored as.
_COMPUTE = {_F32: "tl.float32", _F16: "tl.float32", _BF16: "tl.float32", _I32: "tl.int32", _BOOL: "tl.int1"}
_STORE = {_F32: "tl.float32", _F16: "tl.float16", _BF16: "tl.bfloat16", _I32: "tl.int32", _BOOL: "tl.uint8"}
# The element type Triton's launcher is told for each buffer (bool buffers are passed as uint8 views).
_POINTER = {_F32: "float32", _F16: "float16", _BF16: "bfloat16", _I32: "int32", _BOOL: "uint8"}


def _tanh(x: str) -> str:
    # Odd polynomial near 0 (where 1 - 2/(e^2x + 1) cancels), the exp form elsewhere; saturates to +-1.
    small = f"{x} * (1.0 + {x} * {x} * (-0.3333333333 + {x} * {x} * (0.1333333333 + {x} * {x} * " \
            f"(-0.0539682540 + {x} * {x} * 0.0218694885))))"
    return f"tl.where(tl.abs({x}) < 0.1, {small}, 1.0 - 2.0 / (tl.exp(2.0 * {x}) + 1.0))"


_FLOAT_UNARY = {
    E.exp_p: "tl.exp({0})", E.exp2_p: "tl.exp2({0})", E.log_p: "tl.log({0})", E.log2_p: "tl.log2({0})",
    E.sqrt_p: "tl.sqrt({0})", E.sin_p: "tl.sin({0})", E.cos_p: "tl.cos({0})", E.floor_p: "tl.floor({0})",
    E.ceil_p: "tl.ceil({0})", E.logistic_p: "(1.0 / (1.0 + tl.exp(-{0})))", E.isnan_p: "({0} != {0})",
    E.isfinite_p: "(({0} - {0}) == 0.0)",
}
_FLOAT_BINARY = {E.div_p: "{0} / {1}"}
_NUMBER_UNARY = {E.neg_p: "-{0}", E.abs_p: "tl.abs({0})",
                 E.sign_p: "tl.where({0} > 0, 1, tl.where({0} < 0, -1, {0}))"}
_NUMBER_BINARY = {E.add_p: "{0} + {1}", E.sub_p: "{0} - {1}", E.mul_p: "{0} * {1}"}
_EQUALITY = {E.eq_p: "{0} == {1}", E.ne_p: "{0} != {1}"}
# (orderings of bools stay unfused: numpy orders False < True, an int1 may compare as signed)
_COMPARE = {E.lt_p: "{0} < {1}", E.le_p: "{0} <= {1}", E.gt_p: "{0} > {1}", E.ge_p: "{0} >= {1}"}
_LOGICAL = {E.and_p: "{0} & {1}", E.or_p: "{0} | {1}", E.xor_p: "{0} ^ {1}"}


def _unary(template: str) -> Elementwise:
    return Elementwise(lambda op, ref: template.format(ref(op.args[0])))


def _binary(template: str) -> Elementwise:
    return Elementwise(lambda op, ref: template.format(ref(op.args[0]), ref(op.args[1])))


def _extreme(name: str) -> Elementwise:
    def emit_(op: Op, ref: Any) -> str:
        nan = ", propagate_nan=tl.PropagateNan.ALL" if _dtypes.kind(op.dtype) == "f" else ""   # NaN wins, as in numpy
        return f"tl.{name}({ref(op.args[0])}, {ref(op.args[1])}{nan})"
    return Elementwise(emit_)


def _select(op: Op, ref: Any) -> str:
    c, x, y = op.args
    return f"tl.where({ref(c)} != 0, {ref(x)}, {ref(y)})"


def _convert(op: Op, ref: Any) -> str:
    target = op.params["dtype"]
    x = ref(op.args[0])
    if target == _BOOL:
        return f"({x} != 0)"
    if target == _F16:   # rounds here, as the eager conversion does (an int32 through float32)
        return f"{x}.to(tl.float32).to(tl.float16).to(tl.float32)"
    if target == _BF16:
        return f"_bf16({x}.to(tl.float32))"
    return f"{x}.to({_COMPUTE[target]})"


# (lowering, the dtypes its operands and result may have)
_NUMBERS, _FLOATS = {_F32, _F16, _BF16, _I32}, {_F32, _F16, _BF16}
_RULES: dict = {}
for _table, _make, _ok in ((_FLOAT_UNARY, _unary, _FLOATS), (_FLOAT_BINARY, _binary, _FLOATS),
                           (_NUMBER_UNARY, _unary, _NUMBERS), (_NUMBER_BINARY, _binary, _NUMBERS),
                           (_EQUALITY, _binary, _DTYPES), (_COMPARE, _binary, _NUMBERS), (_LOGICAL, _binary, {_BOOL})):
    for _prim, _template in _table.items():
        _RULES[_prim] = (_make(_template), _ok)   # (a bool result is allowed besides: comparisons, isnan)
_RULES[E.tanh_p] = (Elementwise(lambda op, ref: _tanh(ref(op.args[0]))), _FLOATS)
_RULES[E.maximum_p] = (_extreme("maximum"), _NUMBERS)
_RULES[E.minimum_p] = (_extreme("minimum"), _NUMBERS)
_RULES[E.logical_not_p] = (_unary("({0} == 0)"), {_BOOL})
_RULES[E.select_p] = (Elementwise(_select), _DTYPES)
_RULES[E.convert_p] = (Elementwise(_convert), _DTYPES)
# bool -> number: 0 or 1 by a select, never an int1 cast (Triton 3.6 sign-extends an int1 true to -1 on the
# GPU; its interpreter and later Triton versions give 1)
_BOOL_TO_NUMBER = Elementwise(lambda op, ref: f"tl.where({ref(op.args[0])} != 0, 1, 0).to({_COMPUTE[op.params['dtype']]})")
_RULES[E.stop_gradient_p] = (_unary("{0}"), _DTYPES)
# Inputs are brought to the group's shape when loaded (see the module docstring): the value passes through.
_RULES[S.broadcast_to_p] = (Elementwise(lambda op, ref: ref(op.args[0]), free=True), _DTYPES)


# A trailing reduction may end a group (the row epilogue): its accumulation and its final combine.
_REDUCTIONS = {R.reduce_sum_p: Reduction(lambda dtype: 0, ("acc + {x}", "tl.sum(acc, 0)")),
               R.reduce_max_p: Reduction(lambda dtype: "-inf", ("tl.maximum(acc, {x})", "tl.max(acc, 0)")),
               R.reduce_min_p: Reduction(lambda dtype: "inf", ("tl.minimum(acc, {x})", "tl.min(acc, 0)"))}


def _small_power(eqn: Eqn) -> bool:
    """``x ** k`` for a literal k in 1..4 (or -1, -2 for floats): a product of ``x``."""
    x, k = eqn.inputs
    if not isinstance(x, Var) or not isinstance(k, Literal) or x.aval.dtype not in _NUMBERS \
            or eqn.outvars[0].aval.dtype != x.aval.dtype:
        return False
    k = k.value.item() if isinstance(k.value, (np.ndarray, np.generic)) else k.value
    if isinstance(k, bool) or not isinstance(k, (int, float)) or k != int(k):
        return False
    return int(k) in (1, 2, 3, 4) or (int(k) in (-1, -2) and _dtypes.kind(x.aval.dtype) == "f")


def _power(op: Op, ref: Any) -> str:
    x, k = ref(op.args[0]), int(float(_ref(op.args[1])))
    product = " * ".join([x] * abs(k))
    return f"({product})" if k > 0 else f"(1.0 / ({product}))"


_POW = Elementwise(_power)


def _identity(prim: Any, dtype: np.dtype) -> str:
    value = _REDUCTIONS[prim].identity(dtype)
    if value == 0:
        return "0"
    if _dtypes.kind(dtype) == "f":
        return f"float('{value}')"
    return str(-2 ** 31) if value == "-inf" else str(2 ** 31 - 1)


def _literal_ok(x: Any) -> bool:
    v = x.value
    if isinstance(v, np.ndarray):
        if v.shape != ():
            return False
        v = v.item()
    if isinstance(v, (bool, np.bool_)):
        return True
    if isinstance(v, (int, np.integer)):
        return -2 ** 31 <= int(v) < 2 ** 31
    return isinstance(v, (float, np.floating)) and math.isfinite(float(v))


def rule(eqn: Eqn) -> Any:
    """The Triton lowering of ``eqn`` when it may join a fused group, else None.

    It may when its primitive has one here, every operand and its result has
    a dtype that lowering takes, at least one operand is an array, and its
    literals are finite scalars (in int32 range for integers).
    """
    if eqn.prim in _REDUCTIONS:
        x = eqn.inputs[0]
        if not isinstance(x, Var) or x.aval.dtype not in _NUMBERS or eqn.outvars[0].aval.dtype != x.aval.dtype:
            return None
        # One program instance reduces one row: long rows stay with the GPU implementation's parallel reduction.
        row = math.prod(x.aval.shape[len(x.aval.shape) - len(eqn.params["axes"]):])
        return _REDUCTIONS[eqn.prim] if row <= MAX_ROW else None
    if eqn.prim is E.pow_p:
        return _POW if _small_power(eqn) else None
    entry = _RULES.get(eqn.prim)
    if entry is None or len(eqn.outvars) != 1:
        return None
    lowering, dtypes = entry
    vars_ = [x for x in eqn.inputs if isinstance(x, Var)]
    if not vars_ or not all(_literal_ok(x) for x in eqn.inputs if isinstance(x, Literal)):
        return None
    if eqn.prim is E.convert_p:   # any supported dtype to any supported dtype
        ok = eqn.outvars[0].aval.dtype in _DTYPES and vars_[0].aval.dtype in _DTYPES
        if ok and vars_[0].aval.dtype == _BOOL and eqn.outvars[0].aval.dtype != _BOOL:
            return _BOOL_TO_NUMBER
    else:
        ok = all(v.aval.dtype in dtypes for v in vars_) and (
            eqn.outvars[0].aval.dtype in dtypes or eqn.outvars[0].aval.dtype == _BOOL)
    return lowering if ok else None


def _ref(a: Any) -> str:
    if isinstance(a, str):
        return a
    v = a.item() if isinstance(a, (np.ndarray, np.generic)) else a
    if isinstance(v, bool):
        return "1" if v else "0"
    return repr(float(v)) if isinstance(v, float) else repr(int(v))


def kernel_source(inputs: list, ops: list, outputs: list, reduction: tuple | None = None) -> str:
    """The kernel's Python source: ``inputs`` (name, dtype, "full" or "one"), ``ops`` (:class:`Op`, in
    order), ``outputs`` (name, dtype), ``reduction`` (primitive, operand name, dtype) or None.

    Without a reduction, each program instance handles ``BLOCK`` elements of the ``n``; with one,
    a row of ``cols`` elements (in ``BLOCK`` chunks) and stores its reduced value in ``r_out``.
    """
    params = [f"{n}_ptr" for n, _, _ in inputs] + [f"{n}_out" for n, _ in outputs]
    dtypes = [d for _, d, _ in inputs] + [d for _, d in outputs] + [op.dtype for op in ops] + (
        [reduction[2]] if reduction is not None else [])
    head = ["import triton", "import triton.language as tl", "", ""]
    head += (_bf16_helper() if _BF16 in dtypes or any(op.prim is E.convert_p and op.params["dtype"] == _BF16
                                                    for op in ops) else []) + ["@triton.jit"]
    if reduction is None:
        lines = head + [f"def kernel({', '.join(params + ['n', 'BLOCK: tl.constexpr'])}):",
                        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
                        "    mask = offs < n"]
        return "\n".join(lines + _body(inputs, ops, outputs, "    ")) + "\n"
    prim, operand, dtype = reduction
    compute, ident = _COMPUTE[dtype], _identity(prim, dtype)
    update, combine = _REDUCTIONS[prim].update
    track_nan = prim is not R.reduce_sum_p and _dtypes.kind(dtype) == "f"   # NaN wins, as in numpy's max/min
    lines = head + [f"def kernel({', '.join(params + ['r_out', 'cols', 'BLOCK: tl.constexpr'])}):",
                    "    row = tl.program_id(0).to(tl.int64)",
                    f"    acc = tl.full((BLOCK,), {ident}, {compute})",
                    "    nan = tl.zeros((BLOCK,), tl.int32)",
                    "    for start in range(0, cols, BLOCK):",
                    "        col = start + tl.arange(0, BLOCK)",
                    "        mask = col < cols",
                    "        offs = row * cols + col"]
    lines += _body(inputs, ops, outputs, "        ")
    lines += [f"        x = tl.where(mask, {operand}, {ident}).to({compute})",
              f"        acc = {update.format(x='x')}"]
    if track_nan:
        lines.append("        nan = nan | (x != x).to(tl.int32)")
    lines.append(f"    total = {combine}")
    if track_nan:
        lines.append("    total = tl.where(tl.max(nan, 0) != 0, float('nan'), total)")
    total = "_bf16(total)" if dtype == _BF16 else "total"
    lines.append(f"    tl.store(r_out + row, {total}.to({_STORE[dtype]}))")
    return "\n".join(lines) + "\n"


def _body(inputs: list, ops: list, outputs: list, indent: str) -> list:
    lines = []
    for name, dtype, where in inputs:
        index = "offs" if where == "full" else "offs * 0"
        load = f"tl.load({name}_ptr + {index}, mask=mask)"
        lines.append(f"{indent}{name} = " + (f"{load} != 0" if dtype == _BOOL else f"{load}.to({_COMPUTE[dtype]})"))
    for op in ops:
        value = f"({op.prim_lowering.emit(op, lambda a, *_: _ref(a))})"
        # A bfloat16 result is rounded where it stands (kept in float32): eager's per-operation values.
        lines.append(f"{indent}{op.out} = " + (f"_bf16({value}.to(tl.float32))" if op.dtype == _BF16
                                               else f"{value}.to({_COMPUTE[op.dtype]})"))
    for name, dtype in outputs:   # (bfloat16 values are exact by now: the store only narrows them)
        lines.append(f"{indent}tl.store({name}_out + offs, {name}.to({_STORE[dtype]}), mask=mask)")
    return lines


# float32 -> the nearest bfloat16 (ties to even), kept in float32; NaN stays NaN: eager's rounding (ml_dtypes).
# On a GPU, the conversion instruction (cvt.rn.bf16.f32 and back: two instructions); in Triton's interpreter,
# whose float32 -> bfloat16 conversion truncates, integer arithmetic on the bits (the same values).
_BF16_HELPER_GPU = [
    "@triton.jit",
    "def _bf16(x):",
    "    return x.to(tl.bfloat16, fp_downcast_rounding='rtne').to(tl.float32)",
    "",
    "",
]
_BF16_HELPER_INTERPRETED = [
    "@triton.jit",
    "def _bf16(x):",
    "    bits = x.to(tl.uint32, bitcast=True)",
    "    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16",
    "    return tl.where(x != x, x, bits.to(tl.float32, bitcast=True))",
    "",
    "",
]


def _bf16_helper() -> list:
    from funcgrad.backends.gpu import _triton_host  # noqa: PLC0415
    return _BF16_HELPER_INTERPRETED if _triton_host.interpret_mode() else _BF16_HELPER_GPU


# ---- the in-process kernel cache

_lock = threading.Lock()
_kernels: dict[str, Any] = {}
_directory: list[str] = []


def _source_dir() -> str:
    if not _directory:
        path = tempfile.mkdtemp(prefix="funcgrad-triton-")
        atexit.register(shutil.rmtree, path, True)
        _directory.append(path)
    return _directory[0]


def _load(source: str) -> Any:
    """The ``@triton.jit`` kernel of ``source``, made once per process."""
    key = hashlib.sha256(source.encode()).hexdigest()[:24]
    with _lock:
        kernel = _kernels.get(key)
        if kernel is None:
            path = os.path.join(_source_dir(), f"fused_{key}.py")
            with open(path, "w") as f:
                f.write(source)
            spec = importlib.util.spec_from_file_location(f"funcgrad_triton_fused_{key}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            kernel = _kernels[key] = module.kernel
    return kernel


def kernel_count() -> int:
    """How many distinct fused kernels this process has generated."""
    return len(_kernels)


class _LoweredOp(Op):
    """An :class:`Op` that carries its Triton lowering."""

    def __init__(self, out: str, prim: Any, args: list, dtype: np.dtype, params: dict, lowering: Any):
        super().__init__(out, prim, args, dtype, params)
        self.prim_lowering = lowering


class TritonFused:
    """A fused group standing in the optimised IR where a primitive would; ``run(xp, inputs)``
    launches its kernel on device buffers and returns new device buffers."""

    multiple_results = True
    name = "triton_fused"
    lowerings: dict = {}
    traits: frozenset = frozenset()

    def __init__(self, inputs: list, ops: list, outputs: list, shape: tuple, summary: str,
                 reduction: tuple | None = None, split: int = 0):
        self.inputs = inputs      # (name, dtype, "full" / "one")
        self.outputs = outputs    # (name, dtype)
        self.shape = shape
        self.summary = summary
        self.reduction = reduction   # (primitive, operand name, dtype) over the axes from ``split`` on, or None
        self.rows, self.cols = math.prod(shape[:split]), math.prod(shape[split:])
        self.block = BLOCK if reduction is None else min(BLOCK, max(16, 1 << (self.cols - 1).bit_length()))
        self.out_avals = [ShapedArray(shape, d) for _, d in outputs]
        if reduction is not None:
            self.out_avals.append(ShapedArray(shape[:split], reduction[2]))
        self.source = kernel_source(inputs, ops, outputs, reduction)
        self.kernel = _load(self.source)

    def __repr__(self) -> str:
        return f"triton_fused[{self.summary}]"

    def run(self, xp: Any, values: list) -> list:
        from funcgrad.backends.gpu import _triton_host  # noqa: PLC0415
        n = math.prod(self.shape)
        outs = [xp.empty(a.shape, dtype=a.dtype) for a in self.out_avals]
        if n == 0:
            return outs
        args = [_triton_host.as_kernel_arg(self._operand(xp, x, dtype, where), _POINTER[dtype])
                for x, (_, dtype, where) in zip(values, self.inputs)]
        args += [_triton_host.as_kernel_arg(o.view(xp.uint8) if o.dtype == _BOOL else o, _POINTER[o.dtype])
                 for o in outs]
        if self.reduction is None:
            grid, sizes = (-(-n // BLOCK),), [n]
        else:
            grid, sizes = (self.rows,), [self.cols]
        meta = {"BLOCK": self.block, "num_warps": NUM_WARPS}
        if isinstance(outs[0], np.ndarray):
            # Triton's interpreter computes with numpy, masked lanes included: NaN and inf pass silently,
            # as on a GPU.
            with np.errstate(all="ignore"):
                _triton_host.launch(self.kernel, grid, [*args, *sizes], meta, like=outs[0])
        else:
            _triton_host.launch(self.kernel, grid, [*args, *sizes], meta, like=outs[0])
        return outs

    def _operand(self, xp: Any, x: Any, dtype: np.dtype, where: str) -> Any:
        x = xp.asarray(x, dtype=dtype)   # (a no-op for a device array of the traced dtype)
        if where == "full" and x.shape != self.shape:   # a broadcast input: materialised
            x = xp.broadcast_to(x, self.shape)
        x = xp.ascontiguousarray(x)
        return x.view(xp.uint8) if x.dtype == _BOOL else x


def _bf16_literal(a: Any) -> Any:
    """A number literal beside a bfloat16 operand, rounded to bfloat16 first (a weakly typed scalar takes the
    operand's dtype, as eagerly: ``x * 0.1`` multiplies by 0.10009765625, ``x * 257`` by 256); names and bools
    as they are."""
    v = a.item() if isinstance(a, (np.ndarray, np.generic)) else a
    return float(_BF16.type(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else a


def _worth_fusing(eqns: list) -> bool:
    # One operation is one kernel either way (CuPy's): only a chain saves launches and memory traffic.
    return sum(1 for e in eqns if not getattr(rule(e), "free", False)) >= 2


def emit(group: Any, consumers: dict, outputs: set, position: dict) -> list[Eqn]:
    """The equations standing for a sealed fusion group (:func:`funcgrad.compiler.fusion.fuse`'s
    ``emit``): one :class:`TritonFused` equation, or the group's own equations when it is not worth a kernel."""
    eqns = sorted(group.eqns, key=lambda e: position[id(e)])
    shape = group.shape
    reduction = group.reduction
    split = len(shape) - len(reduction.params["axes"]) if reduction is not None else 0
    if not _worth_fusing(eqns) or (reduction is not None and math.prod(shape[split:]) == 0):
        return eqns   # (an empty reduction: its identity, or numpy's error, from the GPU implementation)
    names: dict[int, str] = {}
    inputs: list = []
    in_specs: list = []
    ops: list = []

    def name_of(x: Any) -> Any:
        if isinstance(x, Literal):
            return x.value
        if id(x) not in names:   # an input from outside the group
            names[id(x)] = f"x{len(inputs)}"
            inputs.append(x)
            where = "one" if math.prod(x.aval.shape) == 1 and x.aval.shape != shape else "full"
            in_specs.append((names[id(x)], x.aval.dtype, where))
        return names[id(x)]

    internal: dict[int, int] = {}
    for eqn in eqns:
        for x in eqn.inputs:
            if isinstance(x, Var):
                internal[id(x)] = internal.get(id(x), 0) + 1
    for eqn in eqns:
        if eqn is reduction:
            break
        args = [name_of(x) for x in eqn.inputs]
        if any(isinstance(x, Var) and x.aval.dtype == _BF16 for x in eqn.inputs):
            args = [_bf16_literal(a) for a in args]
        out = eqn.outvars[0]
        names[id(out)] = f"v{len(ops)}"
        ops.append(_LoweredOp(names[id(out)], eqn.prim, args, out.aval.dtype, dict(eqn.params), rule(eqn)))
    escaping = [e.outvars[0] for e in eqns if e is not reduction and (
        id(e.outvars[0]) in outputs or consumers.get(id(e.outvars[0]), 0) > internal.get(id(e.outvars[0]), 0))]
    red = None
    if reduction is not None:
        red = (reduction.prim, name_of(reduction.inputs[0]), reduction.outvars[0].aval.dtype)
    fused = TritonFused(in_specs, ops, [(names[id(v)], v.aval.dtype) for v in escaping], shape,
                        ",".join(e.prim.name for e in eqns), red, split)
    outvars = escaping + ([reduction.outvars[0]] if reduction is not None else [])
    return [Eqn(fused, inputs, {}, outvars)]
