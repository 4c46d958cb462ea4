"""funcgrad.numpy: io and printing (numpy's, on concrete arrays)."""
from __future__ import annotations

from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad.numpy._base import concrete_value
from funcgrad.numpy._vectorize import _as_array

__all__ = [
    "load", "save", "savez", "array_repr", "array_str", "get_printoptions", "set_printoptions", "printoptions",
]


# ------------------------------------------------------------------ io and printing (numpy's, on concrete arrays)

save, savez = np.save, np.savez
get_printoptions, set_printoptions, printoptions = np.get_printoptions, np.set_printoptions, np.printoptions


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """numpy's ``load``; an array read back becomes a funcgrad array (``.npz`` archives and pickles
    come back as numpy returns them). numpy saves bfloat16 as raw 2-byte records (``V2``): those are read
    back as bfloat16, as ``jnp.load`` does.

    >>> fnp.save("/tmp/x.npy", fnp.arange(3.0)); fnp.load("/tmp/x.npy")
    Array([0., 1., 2.], dtype=float32)
    """
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == np.dtype("V2"):
            out = out.view(_dtypes.bfloat16)
        try:
            return _as_array(out)
        except TypeError:   # a dtype funcgrad does not hold (strings, objects): numpy's array
            return out
    return out


def _concrete(name: str, x: Any) -> np.ndarray:
    return concrete_value(x, f"{name}: needs a concrete array, got a traced value {{x}} (inside jit, grad or "
                             "vmap); print it with funcgrad.debug / outside the transformation",
                          error=TypeError, any_tracer=True)


def array_repr(arr: Any, max_line_width: Any = None, precision: Any = None, suppress_small: Any = None) -> str:
    """numpy's ``array_repr`` of a concrete array, with ``Array(`` for ``array(``.

    >>> fnp.array_repr(fnp.array([1.0, 2.0]))     # 'Array([1., 2.], dtype=float32)'
    'Array([1., 2.], dtype=float32)'
    """
    text = np.array_repr(_concrete("array_repr", arr), max_line_width, precision, suppress_small)
    body = text[len("array("):] if text.startswith("array(") else text
    if "dtype=" not in body:
        body = body[:-1] + f", dtype={np.asarray(arr).dtype.name})"
    return "Array(" + body.replace("\n      ", "\n      ")


def array_str(a: Any, max_line_width: Any = None, precision: Any = None, suppress_small: Any = None) -> str:
    """numpy's ``array_str`` of a concrete array.

    >>> fnp.array_str(fnp.array([1.0, 2.0]))      # '[1. 2.]'
    '[1. 2.]'
    """
    return np.array_str(_concrete("array_str", a), max_line_width, precision, suppress_small)
