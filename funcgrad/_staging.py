"""Looking at a function without running it: ``make_jaxpr``, ``eval_shape`` (with
``ShapeDtypeStruct``), and ``block_until_ready`` for asynchronous device arrays."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from funcgrad import _core, _dtypes
from funcgrad._argspec import ArgSpec, as_leaf, fun_name as _fun_name
from funcgrad._core import Array, Tracer
from funcgrad._ir import Jaxpr
from funcgrad.interpreters.tracing import trace_to_jaxpr
from funcgrad.tree_util import flatten_fun, tree_flatten, tree_leaves, tree_unflatten


# ------------------------------------------------------------ make_jaxpr


def make_jaxpr(f: Callable, static_argnums: int | Sequence[int] = ()) -> Callable:
    """``make_jaxpr(f)(*args)`` traces ``f`` and returns its IR (print it).

    >>> print(make_jaxpr(lambda x: fnp.sum(fnp.sin(x) * x))(fnp.ones(3)))
    { lambda ; a:f32[3] . let
        b:f32[3] = sin a
        c:f32[3] = mul b a
        d:f32[] = reduce_sum[axes=(0,)] c
      in ( d ) }
    """
    spec = ArgSpec("make_jaxpr", "static_argnums", static_argnums, static=True, fun=f,
                   purpose="positions of the arguments to hold static")

    def wrapped(*args: Any) -> Jaxpr:
        split = spec.split(args, {})
        leaves, in_tree = tree_flatten(split.dynamic)
        avals = [_core.get_aval(as_leaf(x, "make_jaxpr")) for x in leaves]
        return trace_to_jaxpr(flatten_fun(split.bind(f), in_tree)[0], avals)[0]

    return wrapped


# ------------------------------------------------------------ eval_shape


class ShapeDtypeStruct:
    """The shape and dtype of an array, without its values: what :func:`eval_shape` returns
    and takes (as an argument standing for an array).

    >>> s = ShapeDtypeStruct((2, 3), fnp.float32)
    >>> s.ndim, s.size, s
    (2, 6, ShapeDtypeStruct(shape=(2, 3), dtype=float32))
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Sequence[int], dtype: Any):
        try:
            shape = tuple(int(d) for d in shape)
        except TypeError:
            raise TypeError(f"ShapeDtypeStruct: shape must be a tuple of ints, got {shape!r:.60}") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"ShapeDtypeStruct: shape {shape} has a negative dimension")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(dtype))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ShapeDtypeStruct is immutable: make a new one")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d ShapeDtypeStruct")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeDtypeStruct) and self.shape == other.shape and self.dtype == other.dtype

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __reduce__(self) -> Any:
        return (ShapeDtypeStruct, (self.shape, self.dtype))


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes ``fun(*args, **kwargs)`` would return, found by tracing it without
    computing anything: a pytree of :class:`ShapeDtypeStruct`.

    Argument leaves may be arrays, numpy arrays, Python scalars or ShapeDtypeStructs (all are
    traced abstractly, as jit traces: only their shapes and dtypes count).

    >>> eval_shape(lambda x, w: fnp.tanh(x @ w), ShapeDtypeStruct((8, 3), fnp.float32), fnp.ones((3, 2)))
    ShapeDtypeStruct(shape=(8, 2), dtype=float32)
    """
    name = _fun_name(fun)
    leaves, in_tree = tree_flatten((args, kwargs))
    avals = [_abstract_leaf(x, i, name) for i, x in enumerate(leaves)]
    flat_fun, out_tree = flatten_fun(lambda a, k: fun(*a, **k), in_tree)

    def checked(*xs: Any) -> list:
        return [as_leaf(o, f"eval_shape({name})", i) for i, o in enumerate(flat_fun(*xs))]

    jaxpr, _ = trace_to_jaxpr(checked, avals)
    return tree_unflatten(out_tree(), [ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in jaxpr.outvars])


def _abstract_leaf(x: Any, i: int, name: str) -> Any:
    """The abstract value an argument leaf of :func:`eval_shape` stands for."""
    if isinstance(x, ShapeDtypeStruct):
        return _dtypes.ShapedArray(x.shape, _dtypes.canonicalize(x.dtype))
    if isinstance(x, (Array, Tracer, bool, int, float, np.ndarray, np.generic)):
        return _core.get_aval(x)
    raise TypeError(f"eval_shape({name}): argument leaf {i} is {type(x).__name__} {x!r:.60}; every leaf must be an "
                    "array, a Python scalar or a ShapeDtypeStruct. Bind other arguments first, e.g. "
                    f"eval_shape(functools.partial({name}, option), x)")


# ------------------------------------------------------ block_until_ready


def block_until_ready(x: Any) -> Any:
    """``x`` (a pytree), once every array in it has been computed.

    Device (GPU) computations run asynchronously: wait for them before reading a clock.
    Host arrays are always ready, and leaves that are not arrays are left alone.

    >>> fg.block_until_ready({"y": fnp.ones(2) * 2})   # wait before reading a clock
    {'y': Array([2., 2.], dtype=float32)}
    """
    for leaf in tree_leaves(x):
        wait = getattr(leaf, "block_until_ready", None)
        if callable(wait):
            wait()
    return x
