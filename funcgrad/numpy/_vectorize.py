"""funcgrad.numpy: vectorize, apply_along_axis, apply_over_axes, kaiser, ufunc and frompyfunc."""
from __future__ import annotations

import builtins
import functools
import re
from typing import Any

import numpy as np

from funcgrad._core import Array, Tracer
from funcgrad._dtypes import describe
from funcgrad import lax
from funcgrad.numpy import _elementwise as _E
from funcgrad.numpy._base import arr, index_arg, promote_inexact
from funcgrad.numpy._creation import _window, as_array
from funcgrad.numpy._bitwise import bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift
from funcgrad.numpy._math import (_is_value, copysign, float_power, fmax, fmin, fmod, gcd, heaviside, hypot, i0, lcm,
                                  ldexp, logaddexp, logaddexp2, nextafter)
from funcgrad.typing import ArrayLike

__all__ = [
    "vectorize", "apply_along_axis", "apply_over_axes", "frompyfunc", "ufunc", "kaiser",
]


# ------------------------------------------------------------------ vectorize, apply_along_axis, apply_over_axes

_DIM = r"\w+"
_CORE = "(?:{0:}(?:,{0:})*)?".format(_DIM)
_ARG = rf"\({_CORE}\)"
_ARGS = "{0:}(?:,{0:})*".format(_ARG)
_SIGNATURE = "^{0:}->{0:}$".format(_ARGS)


def _parse_signature(signature: str) -> tuple[list, list]:
    if not isinstance(signature, str) or not re.match(_SIGNATURE, signature.replace(" ", "")):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r} (expected e.g. '(n),(n)->()')")
    ins, outs = ([tuple(re.findall(_DIM, a)) for a in re.findall(_ARG, part)]
                 for part in signature.replace(" ", "").split("->"))
    return ins, outs


def _core_sizes(sizes: dict, shape: tuple, core: tuple, context: str, is_input: bool) -> None:
    if is_input and len(shape) < len(core):
        raise ValueError(f"vectorize: an input of shape {shape} does not have enough dimensions for the core "
                         f"dimensions {core} {context}")
    if not is_input and len(shape) != len(core):
        raise ValueError(f"vectorize: an output of shape {shape} does not match the core dimensions {core} {context}")
    for dim, size in zip(core, shape[len(shape) - len(core):] if core else ()):
        if sizes.setdefault(dim, size) != size:
            raise ValueError(f"vectorize: inconsistent size for core dimension {dim!r}: {size} vs {sizes[dim]} "
                             f"{context}")


def vectorize(pyfunc: Any, *, excluded: Any = frozenset(), signature: str | None = None) -> Any:
    """``pyfunc`` vectorized with broadcasting, in the style of numpy's generalized ufuncs, built on
    :func:`funcgrad.vmap` (as ``jnp.vectorize``): ``pyfunc`` is written for one element (or one core
    block, with ``signature`` such as ``"(n),(n)->()"``) and is mapped over all leading dimensions.

    ``excluded``: positions (ints) or keyword names (strs) passed to ``pyfunc`` as they are. Other
    keyword arguments are vectorized like the positional ones without a ``signature`` (as numpy;
    ``jnp.vectorize`` drops them), and passed as they are with one.

    >>> dot = fnp.vectorize(lambda a, b: fnp.sum(a * b), signature="(n),(n)->()")
    >>> dot(fnp.ones((4, 3)), fnp.ones(3)).shape
    (4,)
    """
    from funcgrad.api import vmap
    from funcgrad.numpy._shape import expand_dims, squeeze
    if builtins.any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError(f"vectorize can only exclude integer or string arguments, but excluded={excluded!r}")
    if builtins.any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"vectorize: excluded={excluded!r} contains negative numbers")
    parsed = _parse_signature(signature) if signature is not None else None

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        context = f"(on a vectorized function with excluded={excluded!r} and signature={signature!r})"
        static = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int)) if i < len(args)]
        dynamic = [a for i, a in enumerate(args) if i not in excluded]
        # Keyword arguments not excluded are vectorized too (as numpy; jnp.vectorize drops them) when there
        # is no signature; with a signature they are passed as they are.
        mapped = [k for k in kwargs if k not in excluded] if parsed is None else []
        fixed = {k: v for k, v in kwargs.items() if k not in mapped}
        n_pos = len(dynamic)
        dynamic += [kwargs[k] for k in mapped]

        def call(*dyn: Any) -> Any:
            full = list(dyn[:n_pos])
            for i, a in static:
                full.insert(i, a)
            return pyfunc(*full, **fixed, **dict(zip(mapped, dyn[n_pos:])))

        if parsed is None:
            in_core, out_core = [()] * len(dynamic), None
        else:
            in_core, out_core = parsed
        nones = [i for i, a in enumerate(dynamic) if a is None]
        if nones:
            if builtins.any(in_core[i] != () for i in nones if i < len(in_core)):
                raise ValueError(f"vectorize: cannot pass None at positions {nones} with signature={signature!r}")
            inner, kept = call, dynamic

            def call(*dyn: Any) -> Any:  # noqa: F811 - the Nones put back
                it = iter(dyn)
                return inner(*[None if a is None else next(it) for a in kept])
            in_core = [c for i, c in enumerate(in_core) if i not in nones]
            dynamic = [a for a in dynamic if a is not None]
        dynamic = [arr(a) for a in dynamic]
        if len(dynamic) != len(in_core):
            raise TypeError(f"vectorize: wrong number of positional arguments: expected {len(in_core)}, got "
                            f"{len(dynamic)} {context}")
        sizes: dict = {}
        loop_shapes = []
        for a, core in zip(dynamic, in_core):
            _core_sizes(sizes, a.shape, core, context, True)
            loop_shapes.append(a.shape[:a.ndim - len(core)])
        try:
            loop = tuple(np.broadcast_shapes(*loop_shapes))
        except ValueError:
            raise ValueError(f"vectorize: the loop dimensions {loop_shapes} of the arguments cannot be broadcast "
                             f"together {context}") from None

        def checked(*dyn: Any) -> Any:
            out = call(*dyn)
            if out_core is None:
                return out
            if len(out_core) > 1 and not isinstance(out, tuple):
                raise TypeError(f"vectorize: the output must be a tuple when several outputs are expected "
                                f"{context}")
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) != len(out_core):
                raise TypeError(f"vectorize: wrong number of outputs: expected {len(out_core)}, got "
                                f"{len(outs)} {context}")
            own = dict(sizes)
            for o, core in zip(outs, out_core):
                _core_sizes(own, tuple(np.shape(o)), core, context, False)
            return out
        squeezed, rev_filled = [], []
        for a, core in zip(dynamic, in_core):
            noncore = a.shape[:a.ndim - len(core)]
            rev_filled.append(((1,) * (len(loop) - len(noncore)) + noncore)[::-1])
            ones = tuple(i for i, d in enumerate(noncore) if d == 1)
            squeezed.append(squeeze(a, ones) if ones else a)
        fn = checked
        expand = []
        for negdim, axis_sizes in enumerate(zip(*rev_filled)):
            in_axes = tuple(None if d == 1 else 0 for d in axis_sizes)
            if builtins.all(ax is None for ax in in_axes):
                expand.append(len(loop) - 1 - negdim)
            else:
                fn = vmap(fn, in_axes=in_axes)
        result = fn(*squeezed)
        if not expand:
            return result
        if isinstance(result, tuple):
            return tuple(expand_dims(r, tuple(sorted(expand))) for r in result)
        return expand_dims(result, tuple(sorted(expand)))
    return wrapped


def apply_along_axis(func1d: Any, axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Any:  # noqa: F811
    """``func1d`` applied to the 1-d slices of ``arr`` along ``axis`` (via vmap, as JAX); the
    slices' results take the place of that axis.

    >>> fnp.apply_along_axis(fnp.sum, 1, fnp.ones((2, 3)))
    Array([3., 3.], dtype=float32)
    """
    from funcgrad.api import vmap
    from funcgrad.numpy._base import normalize_axis
    x = _as_array(arr)
    axis = normalize_axis("apply_along_axis", axis, x.ndim, x)

    def func(v: Any) -> Any:
        return func1d(v, *args, **kwargs)
    for i in range(1, x.ndim - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(x)


def _as_array(x: Any) -> Any:
    from funcgrad.numpy._base import arr as _arr
    return _arr(x)


def apply_over_axes(func: Any, a: ArrayLike, axes: Any) -> Any:
    """``func(a, axis)`` applied for each axis in ``axes`` in turn; a result with one axis fewer
    gets it back as length 1 (so ``fnp.sum`` keeps dims).

    >>> fnp.apply_over_axes(fnp.sum, fnp.ones((2, 3, 4)), [0, 2]).shape
    (1, 3, 1)
    """
    from funcgrad.numpy._shape import expand_dims
    x = _as_array(a)
    for axis in (axes if isinstance(axes, (list, tuple)) else [axes]):
        b = func(x, axis)
        if b.ndim == x.ndim:
            x = b
        elif b.ndim == x.ndim - 1:
            x = expand_dims(b, axis)
        else:
            raise ValueError(f"apply_over_axes: function is not returning an array of the correct shape "
                             f"(got {describe(b)} from an input {describe(x)})")
    return x


def kaiser(M: int, beta: Any) -> Any:
    """The Kaiser window of ``M`` points with shape parameter ``beta``
    (``i0(beta * sqrt(1 - (2n/(M-1) - 1)**2)) / i0(beta)``); differentiable in ``beta``.

    >>> fnp.kaiser(4, 2.0)
    Array([0.4387, 0.9243 , 0.9243 , 0.4387], dtype=float32)
    """
    M = index_arg("kaiser", "M", M)
    if not isinstance(beta, (Array, Tracer)):
        return _window("kaiser", M, lambda m: np.kaiser(m, float(beta)))
    (beta,) = promote_inexact(beta)
    if M <= 1:
        return _window("kaiser", M, np.ones)
    n = np.arange(M, dtype=np.float64)
    r = np.sqrt(np.maximum(1.0 - (2.0 * n / (M - 1) - 1.0) ** 2, 0.0))
    return lax.div(i0(lax.mul(beta, lax.convert_element_type(as_array(r), beta.dtype))), i0(beta))


class ufunc:
    """A universal function made from a Python function on scalars (as ``jnp.ufunc``): calling it
    broadcasts and maps the function over its arguments (:func:`vectorize`), and for binary
    functions ``reduce``, ``accumulate``, ``outer`` and ``at`` work as numpy's ufunc methods (through
    ``lax.scan``, so under jit and grad too).

    >>> mul_add = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    >>> mul_add.reduce(fnp.array([1.0, 2.0, 3.0]))      # ((1*2+1)*3+1) = 10
    Array(10., dtype=float32)
    """

    def __init__(self, func: Any, /, nin: int, nout: int, *, name: str | None = None, nargs: int | None = None,
                 identity: Any = None, call: Any = None, reduce: Any = None, accumulate: Any = None,
                 at: Any = None, reduceat: Any = None) -> None:
        if reduceat is not None:
            raise NotImplementedError("ufunc: a custom reduceat= implementation is not supported")
        self._func = func
        self.nin, self.nout = index_arg("ufunc", "nin", nin), index_arg("ufunc", "nout", nout)
        self.nargs = self.nin if nargs is None else nargs
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        # call: an implementation that broadcasts by itself (else func is vectorized); reduce, accumulate,
        # at: faster implementations of those methods, with the methods' signatures (as jnp.ufunc).
        self._call = call if call is not None else vectorize(func)
        self._reduce, self._accumulate, self._at = reduce, accumulate, at

    def __repr__(self) -> str:
        return f"<fnp.ufunc '{self.__name__}'>"

    def __call__(self, *args: Any, out: None = None, where: None = None) -> Any:
        if out is not None or where is not None:
            raise NotImplementedError(f"{self.__name__}: out= and where= are not supported (as in JAX)")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} positional arguments, got {len(args)}")
        return self._call(*args)

    def _binary(self, method: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{method} only supported for binary ufuncs with a single output; "
                             f"{self.__name__} has nin={self.nin}, nout={self.nout}")

    def outer(self, A: Any, B: Any, /) -> Any:
        """``self(a, b)`` for every pair of elements: shape ``A.shape + B.shape``."""
        self._binary("outer")
        A, B = _as_array(A), _as_array(B)
        return self(lax.reshape(A, tuple(A.shape) + (1,) * B.ndim), B)

    def reduce(self, a: Any, axis: Any = 0, dtype: Any = None, out: None = None, keepdims: bool = False,
               initial: Any = None, where: Any = None) -> Any:
        """Fold the function along ``axis`` (None: all axes), from ``initial`` or the first element."""
        from funcgrad.lax import scan
        from funcgrad.numpy._base import normalize_axes
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError("reduce: out= is not supported (funcgrad arrays are immutable)")
        if self._reduce is not None:
            return self._reduce(a, axis, dtype, out, keepdims, initial, where)
        x = _as_array(a)
        if dtype is not None:
            x = lax.convert_element_type(x, dtype)
        axes = normalize_axes(f"{self.__name__}.reduce", axis, x.ndim, x)
        start = initial if initial is not None else self.identity
        if where is not None:
            if start is None:
                raise ValueError(f"reduction operation {self.__name__} does not have an identity, so to use a "
                                 "where mask one has to specify 'initial'")
            from funcgrad.numpy._reductions import _mask
            x = _E.where(_mask(f"{self.__name__}.reduce", where, x), x, start)
        kept = tuple(i for i in range(x.ndim) if i not in axes)
        flat = lax.reshape(lax.transpose(x, axes + kept) if x.ndim else x,
                           (int(np.prod([x.shape[i] for i in axes], dtype=np.int64)),)
                           + tuple(x.shape[i] for i in kept))
        if initial is None and flat.shape[0] == 0 and self.identity is None:
            raise ValueError(f"zero-size array to reduction operation {self.__name__} which has no identity")
        if initial is None:
            init, rest = (flat[0], flat[1:]) if flat.shape[0] else (None, flat)
            if init is None:
                init = lax.broadcast_to(lax.convert_element_type(_as_array(np.asarray(self.identity)), x.dtype),
                                        flat.shape[1:])
        else:
            init, rest = lax.broadcast_to(lax.convert_element_type(_as_array(np.asarray(initial))
                                                                   if not _is_value(initial) else initial, x.dtype),
                                          flat.shape[1:]), flat
        result, _ = scan(lambda c, v: (self(c, v), None), init, rest)
        if keepdims:
            result = lax.reshape(result, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
        return result

    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """The running fold along ``axis`` (``accumulate(add)`` is ``cumsum``)."""
        from funcgrad.lax import scan
        from funcgrad.numpy._base import normalize_axis
        from funcgrad.numpy._shape import concatenate, moveaxis
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError("accumulate: out= is not supported (funcgrad arrays are immutable)")
        if self._accumulate is not None:
            return self._accumulate(a, axis, dtype)
        x = _as_array(a)
        if dtype is not None:
            x = lax.convert_element_type(x, dtype)
        axis = normalize_axis(f"{self.__name__}.accumulate", axis, x.ndim, x)
        front = moveaxis(x, axis, 0)
        if front.shape[0] == 0:
            return x

        def step(c: Any, v: Any) -> tuple:
            c = self(c, v)
            return c, c
        _, ys = scan(step, front[0], front[1:])
        return moveaxis(concatenate([lax.reshape(front[0], (1,) + tuple(front.shape[1:])), ys]), 0, axis)

    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """A new array: ``a`` with ``self(a[indices], b)`` applied at each index in turn (repeated indices
        apply repeatedly).  ``inplace=False`` is required, as in JAX (arrays are immutable).  The
        indices must be concrete."""
        from funcgrad.lax import scan
        if inplace:
            raise NotImplementedError("ufunc.at: funcgrad arrays are immutable; pass inplace=False to get the "
                                      "result as a new array")
        if self.nout != 1 or self.nin != (1 if b is None else 2):
            raise ValueError(f"ufunc.at: {self.__name__} (nin={self.nin}, nout={self.nout}) does not match the "
                             "given arguments")
        if self._at is not None:
            return self._at(a, indices, b)
        x = _as_array(a)
        if isinstance(indices, Tracer):
            raise TypeError("ufunc.at: the indices must be concrete (not traced)")
        positions = np.arange(x.size).reshape(x.shape)[indices if not isinstance(indices, Array)
                                                       else np.asarray(indices)]
        pos = _as_array(np.ravel(positions).astype(np.int32))
        flat = lax.reshape(x, (x.size,))
        if b is None:
            def step(c: Any, p: Any) -> tuple:
                return c.at[p].set(self(c[p])), None
            out, _ = scan(step, flat, pos)
        else:
            vals = lax.broadcast_to(_as_array(b) if not isinstance(b, (bool, int, float)) else
                                    lax.convert_element_type(_as_array(np.asarray(b)), x.dtype), positions.shape)
            vals = lax.reshape(vals, (positions.size,))

            def step(c: Any, pv: Any) -> tuple:
                p, v = pv
                return c.at[p].set(self(c[p], v)), None
            out, _ = scan(step, flat, (pos, vals))
        return lax.reshape(out, x.shape)

    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """Not implemented (numpy's reduceat); raises NotImplementedError."""
        raise NotImplementedError("ufunc.reduceat is not implemented in funcgrad; use reduce on slices")


def _install_ufunc_methods() -> None:
    """numpy's ufunc methods on funcgrad.numpy's binary functions: ``fnp.add.reduce``,
    ``fnp.multiply.outer``, ``fnp.logaddexp.reduce``, ``fnp.add.at(x, i, v, inplace=False)``, ...
    (as ``jnp.add`` etc. are ``jnp.ufunc`` objects).  Sums, products, extremes and logsumexp reduce
    with their reductions; the others fold with ``lax.scan``."""
    from funcgrad.lax import cummax, cummin, cumprod
    from funcgrad.numpy import _reductions as R
    from funcgrad.numpy._base import normalize_axis

    def red(f: Any) -> Any:
        return lambda a, axis, dtype, out, keepdims, initial, where: f(
            a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def extreme(f: Any) -> Any:
        def r(a: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any, where: Any) -> Any:
            x = _as_array(a) if dtype is None else lax.convert_element_type(_as_array(a), dtype)
            return f(x, axis=axis, keepdims=keepdims, initial=initial, where=where)
        return r

    def boolean(f: Any) -> Any:
        def r(a: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any, where: Any) -> Any:
            if initial is not None:
                raise NotImplementedError(f"{f.__name__}.reduce: initial= is not supported")
            return f(a, axis=axis, keepdims=keepdims, where=where)
        return r

    def logsumexp_reduce(a: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any,
                         where: Any) -> Any:
        x = _as_array(a) if dtype is None else lax.convert_element_type(_as_array(a), dtype)
        result = R.logsumexp(x, axis=axis, keepdims=keepdims, where=where)
        return result if initial is None else logaddexp(result, initial)

    def scan_acc(f: Any, name: str) -> Any:
        def acc(a: Any, axis: int, dtype: Any) -> Any:
            x = _as_array(a) if dtype is None else lax.convert_element_type(_as_array(a), dtype)
            return f(x, axis=normalize_axis(f"{name}.accumulate", axis, x.ndim, x))
        return acc

    def at_add(a: Any, indices: Any, b: Any) -> Any:
        return _as_array(a).at[indices].add(b)

    fast = {
        _E.add: (0, red(R.sum), scan_acc(lambda x, axis: R.cumsum(x, axis), "add"), at_add),
        _E.multiply: (1, red(R.prod), scan_acc(cumprod, "multiply"), None),
        _E.maximum: (None, extreme(R.max), scan_acc(cummax, "maximum"), None),
        _E.minimum: (None, extreme(R.min), scan_acc(cummin, "minimum"), None),
        _E.logical_and: (True, boolean(R.all), None, None),
        _E.logical_or: (False, boolean(R.any), None, None),
        logaddexp: (-np.inf, logsumexp_reduce, None, None),
    }
    binaries = [_E.subtract, _E.divide, _E.floor_divide, _E.mod, _E.power, _E.arctan2, _E.logical_xor,
                _E.equal, _E.not_equal, _E.less, _E.less_equal, _E.greater, _E.greater_equal, fmax, fmin, fmod,
                hypot, copysign, heaviside, logaddexp2, nextafter, float_power, ldexp, gcd, lcm, bitwise_and,
                bitwise_or, bitwise_xor, left_shift, right_shift]
    identities = {bitwise_or: 0, bitwise_xor: 0, bitwise_and: -1, gcd: 0, _E.logical_xor: False}
    for f in list(fast) + binaries:
        identity, reduce, accumulate, at = fast.get(f, (identities.get(f), None, None, None))
        u = ufunc(f, 2, 1, name=f.__name__, identity=identity, call=f, reduce=reduce, accumulate=accumulate,
                  at=at)
        f.reduce, f.accumulate, f.outer, f.at, f.reduceat = u.reduce, u.accumulate, u.outer, u.at, u.reduceat
        f.nin, f.nout, f.nargs, f.identity = 2, 1, 2, identity


def frompyfunc(func: Any, /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A :class:`ufunc` from a Python function on scalars with ``nin`` inputs and ``nout`` outputs.

    >>> add = fnp.frompyfunc(lambda a, b: a + b, 2, 1, identity=0)
    >>> add.outer(fnp.arange(2.0), fnp.arange(3.0)).shape
    (2, 3)
    """
    return ufunc(func, nin, nout, identity=identity)


_install_ufunc_methods()
