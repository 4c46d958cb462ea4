"""Array creation (concrete constants; under jit they become program constants)."""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from funcgrad import _dtypes
from funcgrad._core import Array, Tracer, _freeze, as_array, to_numpy_input
from funcgrad.numpy._base import index_arg, shape_tuple
from funcgrad.lax import convert_element_type as convert
from funcgrad.typing import ArrayLike, DTypeLike, ShapeLike


def _const(value: np.ndarray, dtype: Any) -> Array:
    return Array(_freeze(np.asarray(value, dtype=_dtypes.canonicalize(dtype, requested=True))))


def array(object: Any, dtype: DTypeLike | None = None, *args: Any, copy: bool = True, order: Any = "K",  # noqa: A002
          ndmin: int = 0, device: Any = None, out_sharding: Any = None) -> Any:
    """A new immutable array from a list, numpy array, scalar or Array (as ``jnp.array``).

    Python floats become float32 (float64 with x64 enabled); numpy float64
    arrays are stored as float32 unless x64 is enabled.  ``ndmin`` prepends
    length-1 axes.

    >>> fnp.array([[1.0, 2.0]], ndmin=3).shape
    (1, 1, 2)
    """
    if args:
        raise TypeError(f"array() takes at most 2 positional arguments (object, dtype), got {2 + len(args)}")
    if order not in (None, "K", "C", "A"):
        raise NotImplementedError(f"array: order={order!r} is not supported (funcgrad arrays have no memory layout); "
                                  "leave it 'K'")
    _no_sharding("array", out_sharding)
    out = _array(object, dtype)
    ndmin = index_arg("array", "ndmin", ndmin)
    if out.ndim < ndmin:
        from funcgrad.lax import reshape
        out = reshape(out, (1,) * (ndmin - out.ndim) + tuple(out.shape))
    return _place(out, device)


def _array(obj: Any, dtype: Any) -> Any:
    if isinstance(obj, (Array, Tracer)):
        return obj if dtype is None else convert(obj, dtype)
    if isinstance(obj, (list, tuple)) and any(isinstance(o, (Array, Tracer)) for o in obj):
        from funcgrad.numpy._shape import stack
        out = stack([_array(o, None) for o in obj])
        return out if dtype is None else convert(out, dtype)
    if dtype is not None:
        return _const(np.array(obj, dtype=_dtypes.canonicalize(dtype)), dtype)
    return as_array(obj) if isinstance(obj, (bool, int, float)) else Array(to_numpy_input(obj))


def asarray(a: Any, dtype: DTypeLike | None = None, order: Any = None, *, copy: Any = None, device: Any = None,
            out_sharding: Any = None) -> Any:
    """``a`` as a funcgrad array (the array itself when it already is one of ``dtype``).

    >>> fnp.asarray([1, 2]).dtype                          # int32
    dtype('int32')
    """
    if order not in (None, "K", "C", "A"):
        raise NotImplementedError(f"asarray: order={order!r} is not supported (funcgrad arrays have no memory "
                                  "layout); leave it None")
    _no_sharding("asarray", out_sharding)
    return _place(_array(a, dtype), device)


def _filled(op: str, shape: Any, fill_value: Any, dtype: Any) -> Array:
    """A new constant of ``shape`` holding ``fill_value``, built in its final
    dtype: no float64 temporary, so memory peaks at the result's size."""
    shape = shape_tuple(shape, op)
    dtype = _dtypes.canonicalize(dtype, requested=True)
    if op in ("zeros", "zeros_like", "ones", "ones_like"):
        value = (np.zeros if op.startswith("zeros") else np.ones)(shape, dtype)   # zeros: calloc's lazy pages
    else:
        try:
            value = np.full(shape, fill_value, dtype=dtype)
        except OverflowError:
            raise OverflowError(f"{op}: fill value {fill_value!r} does not fit in {dtype} (range "
                                f"{np.iinfo(dtype).min}..{np.iinfo(dtype).max}); pass a wider dtype (and enable x64 "
                                "for 64-bit ones)") from None
    return Array(_freeze(value))


def zeros(shape: ShapeLike, dtype: DTypeLike | None = None, *, device: Any = None, out_sharding: Any = None) -> Array:
    """Zeros of ``shape`` (the default float unless ``dtype``).

    >>> fnp.zeros((2, 3)).shape
    (2, 3)
    """
    _no_sharding("zeros", out_sharding)
    return _place(_filled("zeros", shape, 0, dtype or _dtypes.float_), device)


def ones(shape: ShapeLike, dtype: DTypeLike | None = None, *, device: Any = None, out_sharding: Any = None) -> Array:
    """Ones of ``shape`` (the default float unless ``dtype``).

    >>> fnp.ones(3, fnp.int32)
    Array([1, 1, 1], dtype=int32)
    """
    _no_sharding("ones", out_sharding)
    return _place(_filled("ones", shape, 1, dtype or _dtypes.float_), device)


def full(shape: ShapeLike, fill_value: ArrayLike, dtype: DTypeLike | None = None, *, device: Any = None,
         out_sharding: Any = None) -> Array:
    """``fill_value`` (a scalar, or an array broadcast to ``shape``) repeated over ``shape``.

    >>> fnp.full((2,), 7)                                  # [7, 7] (int32)
    Array([7, 7], dtype=int32)
    """
    _no_sharding("full", out_sharding)
    return _place(_full(shape, fill_value, dtype), device)


def _full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    if isinstance(fill_value, (Array, Tracer)):
        from funcgrad.lax import broadcast_to
        out = broadcast_to(fill_value, shape_tuple(shape, "full"))
        return out if dtype is None else convert(out, dtype)
    if dtype is None:
        dtype = _dtypes.result_type(fill_value) if isinstance(fill_value, (bool, int, float)) \
            else _dtypes.canonicalize(np.asarray(fill_value).dtype)
    return _filled("full", shape, fill_value, dtype)


def zeros_like(a: ArrayLike, dtype: DTypeLike | None = None, shape: ShapeLike | None = None, *, device: Any = None,
               out_sharding: Any = None) -> Array:
    """Zeros with ``a``'s shape (or ``shape``) and dtype (or ``dtype``).

    >>> fnp.zeros_like(fnp.ones((2, 2)))
    Array([[0., 0.],
           [0., 0.]], dtype=float32)
    """
    _no_sharding("zeros_like", out_sharding)
    out = _filled("zeros_like", _shape_of(a) if shape is None else shape, 0, dtype or _dtype_of(a))
    return _place(_on_device_of(a, out), device)


def ones_like(a: ArrayLike, dtype: DTypeLike | None = None, shape: ShapeLike | None = None, *, device: Any = None,
              out_sharding: Any = None) -> Array:
    """Ones with ``a``'s shape (or ``shape``) and dtype (or ``dtype``).

    >>> fnp.ones_like(fnp.zeros(2))
    Array([1., 1.], dtype=float32)
    """
    _no_sharding("ones_like", out_sharding)
    out = _filled("ones_like", _shape_of(a) if shape is None else shape, 1, dtype or _dtype_of(a))
    return _place(_on_device_of(a, out), device)


def full_like(a: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike | None = None, shape: ShapeLike | None = None, *,
              device: Any = None, out_sharding: Any = None) -> Array:
    """``fill_value`` with ``a``'s shape (or ``shape``) and dtype (or ``dtype``).

    >>> fnp.full_like(fnp.zeros(2), 2.5)
    Array([2.5, 2.5], dtype=float32)
    """
    _no_sharding("full_like", out_sharding)
    out = _full(_shape_of(a) if shape is None else shape, fill_value, dtype or _dtype_of(a))
    return _place(_on_device_of(a, out), device)


def _shape_of(x: Any) -> tuple:
    return x.shape if hasattr(x, "shape") else np.shape(x)


def _on_device_of(x: Any, out: Any) -> Any:
    # "Like" a device (GPU) array means on its device too: zero cotangents and
    # seeds made by the transforms must not mix devices with the values. A tracer of
    # grad/jvp (its primal) or vmap (its value) is looked through to the array it stands for.
    while isinstance(x, Tracer) and (hasattr(x, "primal") or hasattr(x, "value")):
        x = x.primal if hasattr(x, "primal") else x.value
    if isinstance(x, Array) and type(x) is not Array:
        from funcgrad.devices import device_put
        return device_put(out, x.device)
    return out


def _dtype_of(x: Any) -> np.dtype:
    if hasattr(x, "dtype"):
        return x.dtype
    return _dtypes.result_type(x)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: DTypeLike | None = None, *, device: Any = None,
           out_sharding: Any = None) -> Array:
    """Evenly spaced values in ``[start, stop)`` by ``step`` (concrete bounds), as ``jnp.arange``.

    >>> fnp.arange(2, 11, 3)
    Array([2, 5, 8], dtype=int32)
    """
    _no_sharding("arange", out_sharding)
    return _place(_arange(start, stop, step, dtype), device)


def _arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Array:
    direct = _int_range_dtype(start, stop, step, dtype)
    if direct is not None:   # exact in the final integer dtype: no int64 temporary
        return Array(_freeze(np.arange(start, stop, step, dtype=direct)))
    values = np.arange(start, stop, step)
    if dtype is None:
        dtype = _dtypes.canonicalize(values.dtype) if _dtypes.kind(values.dtype) != "f" else _dtypes.float_
    return _const(values, dtype)


def _int_range_dtype(start: Any, stop: Any, step: Any, dtype: Any) -> np.dtype | None:
    """The integer dtype to build ``arange(start, stop, step)`` in directly, given integer
    bounds and an integer result dtype (else None: computed by numpy, then cast).
    Raises OverflowError when the values do not fit in it."""
    bounds = [b for b in (start, stop, step) if b is not None]
    if not all(isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_)) for b in bounds):
        return None
    target = _dtypes.canonicalize(np.dtype(dtype) if dtype is not None else np.dtype(np.int64), requested=True)
    if target.kind not in "iu":
        return None
    lo, hi, by = (0, int(start), 1) if stop is None else (int(start), int(stop), 1)
    by = int(step) if step is not None else by
    if by == 0:
        return None   # numpy's error
    r = range(lo, hi, by)
    info = np.iinfo(target)
    if r and not (info.min <= min(r[0], r[-1]) and max(r[0], r[-1]) <= info.max):
        raise OverflowError(f"arange({start}, {stop}, {step}): values up to {max(r[0], r[-1])} do not fit in {target} "
                            f"(range {info.min}..{info.max}); pass a wider dtype (and enable x64 for 64-bit ones)")
    return target


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: DTypeLike | None = None, axis: int = 0, *, device: Any = None) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` (``stop`` excluded without
    ``endpoint``), as ``jnp.linspace``: ``start``/``stop`` may be arrays (broadcast together; the
    new axis is ``axis`` of the result) and traced values (the result is differentiable in them);
    ``retstep=True`` also returns the step.  Integer dtypes take the floor of the float values.

    >>> fnp.linspace(0.0, 1.0, 5)
    Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    >>> fnp.linspace(fnp.array([0.0, 1.0]), 2.0, 3, axis=1)
    Array([[0. , 1. , 2. ],
           [1. , 1.5, 2. ]], dtype=float32)
    """
    num = index_arg("linspace", "num", num)
    if num < 0:
        raise ValueError(f"linspace: num must be >= 0, got {num}")
    out, step = _linspace(start, stop, num, endpoint, axis, "linspace")
    out = _cast_space(out, dtype)
    out = _place(out, device)
    return (out, step) if retstep else out


def _cast_space(out: Any, dtype: Any) -> Any:
    if dtype is None:
        return out
    dtype = _dtypes.canonicalize(dtype, requested=True)
    if dtype.kind in "iu":
        from funcgrad.lax import floor
        return convert(floor(out), dtype)
    return convert(out, dtype)


def _linspace(start: Any, stop: Any, num: int, endpoint: bool, axis: int, name: str) -> tuple:
    """Differentiable linspace in the default float (or the arrays' float dtype)."""
    from funcgrad import lax
    from funcgrad.numpy._base import normalize_axis, promote_inexact
    from funcgrad.numpy._shape import moveaxis
    start, stop = promote_inexact(start, stop)
    start, stop = (v if isinstance(v, (Array, Tracer)) else as_array(v) for v in (start, stop))
    dtype = _dtypes.result_type(start, stop)
    start, stop = convert(start, dtype), convert(stop, dtype)
    shape = tuple(np.broadcast_shapes(start.shape, stop.shape))
    axis = normalize_axis(name, axis, len(shape) + 1)
    start, stop = lax.broadcast_to(start, shape), lax.broadcast_to(stop, shape)
    div = (num - 1) if endpoint else num
    delta = lax.sub(stop, start)
    grid = shape + (num,)
    if num == 0:
        return moveaxis(lax.full(grid, 0, dtype), -1, axis), lax.div(delta, float(div) if div else np.nan)
    steps = lax.broadcasted_iota(dtype, grid, len(shape))
    ex_start, ex_delta = lax.reshape(start, shape + (1,)), lax.reshape(delta, shape + (1,))
    if div > 0:
        out = lax.add(ex_start, lax.mul(steps, lax.div(ex_delta, float(div))))
        if endpoint and num > 1:   # the last value is stop exactly
            last = lax.eq(steps, float(num - 1))
            out = lax.select(last, lax.broadcast_to(lax.reshape(stop, shape + (1,)), grid), out)
        step = lax.div(delta, float(div))
    else:
        out = lax.broadcast_to(ex_start, grid)
        step = lax.mul(delta, np.nan)
    return moveaxis(out, -1, axis), step


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0,
             dtype: DTypeLike | None = None, axis: int = 0) -> Array:
    """``base ** linspace(start, stop, num)``, as ``jnp.logspace`` (arrays and traced values allowed).

    >>> fnp.logspace(0.0, 2.0, 3)
    Array([  1.,  10., 100.], dtype=float32)
    """
    from funcgrad import lax
    from funcgrad.numpy._base import promote_inexact
    num = index_arg("logspace", "num", num)
    if num < 0:
        raise ValueError(f"logspace: num must be >= 0, got {num}")
    lin, _ = _linspace(start, stop, num, endpoint, axis, "logspace")
    base, lin = promote_inexact(base, lin)
    if not isinstance(base, float):
        base = lax.expand_dims(base, (axis,)) if base.ndim else base
    return _cast_space(lax.pow(base, lin), dtype)


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: DTypeLike | None = None,
              axis: int = 0) -> Array:
    """A geometric progression from ``start`` to ``stop`` (same sign, nonzero), as ``jnp.geomspace``.

    >>> fnp.geomspace(1.0, 1000.0, 4)
    Array([   1.,   10.,  100., 1000.], dtype=float32)
    """
    from funcgrad import lax
    from funcgrad.numpy._base import promote_inexact
    num = index_arg("geomspace", "num", num)
    if num < 0:
        raise ValueError(f"geomspace: num must be >= 0, got {num}")
    start, stop = promote_inexact(start, stop)
    if not isinstance(start, (Array, Tracer)) and not isinstance(stop, (Array, Tracer)) and (start == 0 or stop == 0):
        raise ValueError("geomspace: start and stop must be nonzero")
    start, stop = (v if isinstance(v, (Array, Tracer)) else as_array(v) for v in (start, stop))
    sign = lax.sign(start)
    ln10 = float(np.log(10.0))
    lin, _ = _linspace(lax.div(lax.log(lax.abs(start)), ln10), lax.div(lax.log(lax.abs(stop)), ln10), num,
                       endpoint, axis, "geomspace")
    out = lax.pow(10.0, lin)
    s = lax.expand_dims(sign, (axis,)) if sign.ndim else sign
    return _cast_space(lax.mul(out, s), dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None, *, device: Any = None) -> Array:
    """The ``N x M`` matrix with ones on the ``k``-th diagonal.

    >>> fnp.eye(2, 3, k=1)
    Array([[0., 1., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    return _place(_eye(N, M, k, dtype), device)


def _eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Array:
    N, M = shape_tuple((N, N if M is None else M), "eye", "(N, M)")
    k = index_arg("eye", "k", k)
    return Array(_freeze(np.eye(N, M, k, dtype=_dtypes.canonicalize(dtype or _dtypes.float_, requested=True))))


def _place(out: Any, device: Any) -> Any:
    if device is None:
        return out
    from funcgrad.devices import device_put
    return device_put(out, device)


def _no_sharding(name: str, out_sharding: Any) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"{name}: out_sharding= is not supported (funcgrad has no sharding); leave it "
                                  "None")


def empty(shape: ShapeLike, dtype: DTypeLike | None = None, *, device: Any = None, out_sharding: Any = None) -> Array:
    """A new array of ``shape``: zeros, as in JAX (arrays are immutable, so there is no
    uninitialised memory to hand out).

    >>> fnp.empty((2, 3)).shape
    (2, 3)
    """
    _no_sharding("empty", out_sharding)
    return _place(_filled("empty", shape, 0, dtype or _dtypes.float_), device)


def empty_like(prototype: Any, dtype: DTypeLike | None = None, shape: ShapeLike | None = None, *,
               device: Any = None) -> Array:
    """Zeros with ``prototype``'s shape (or ``shape``) and dtype (or ``dtype``), as in JAX.

    >>> fnp.empty_like(fnp.ones((2, 2), fnp.int32)).dtype  # int32
    dtype('int32')
    """
    out = _filled("empty_like", _shape_of(prototype) if shape is None else shape, 0,
                  dtype or _dtype_of(prototype))
    return _place(_on_device_of(prototype, out), device)


def identity(n: Any, dtype: DTypeLike | None = None) -> Array:
    """The ``n x n`` identity matrix.

    >>> fnp.identity(2)
    Array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    n = index_arg("identity", "n", n)
    return _eye(n, dtype=dtype)


def tri(N: Any, M: Any = None, k: int = 0, dtype: DTypeLike | None = None) -> Array:
    """The ``N x M`` matrix with ones at and below the ``k``-th diagonal.

    >>> fnp.tri(3, 2, 1)
    Array([[1., 1.],
           [1., 1.],
           [1., 1.]], dtype=float32)
    """
    N, M = shape_tuple((N, N if M is None else M), "tri", "(N, M)")
    k = index_arg("tri", "k", k)
    return Array(_freeze(np.tri(N, M, k, dtype=_dtypes.canonicalize(dtype or _dtypes.float_, requested=True))))


def copy(a: ArrayLike, order: Any = None) -> Array:
    """A copy of ``a`` (funcgrad arrays are immutable, so this is ``a`` itself as an array).

    >>> fnp.copy(fnp.ones(2))
    Array([1., 1.], dtype=float32)
    """
    if order not in (None, "K", "C", "A"):
        raise NotImplementedError(f"copy: order={order!r} is not supported (funcgrad arrays have no memory "
                                  "layout); leave it None")
    return array(a)


def _default_dtype(dtype: Any) -> np.dtype:
    return _dtypes.canonicalize(np.dtype(dtype))


def frombuffer(buffer: Any, dtype: DTypeLike = float, count: int = -1, offset: int = 0) -> Array:
    """An array from the bytes of ``buffer`` read as ``dtype`` (numpy's ``frombuffer``; float64 data is
    stored as float32 without x64).

    >>> fnp.frombuffer(b"\\x01\\x02", dtype=fnp.uint8)
    Array([1, 2], dtype=uint8)
    """
    value = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    return _const(value, _default_dtype(value.dtype))


def fromstring(string: str, dtype: DTypeLike = float, count: int = -1, *, sep: str) -> Array:
    """An array from the numbers in ``string`` separated by ``sep`` (numpy's text mode of
    ``fromstring``).

    >>> fnp.fromstring("1 2 3", sep=" ")
    Array([1., 2., 3.], dtype=float32)
    """
    value = np.fromstring(string, dtype=dtype, count=count, sep=sep)
    return _const(value, _default_dtype(value.dtype))


def fromfile(*args: Any, **kwargs: Any) -> Array:
    """Not implemented, as in JAX: reading a file is a side effect (unsafe under jit). Use
    ``fnp.asarray(np.fromfile(...))``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.bin")
    >>> np.arange(3, dtype=np.float32).tofile(path)
    >>> fnp.asarray(np.fromfile(path, dtype=np.float32))    # instead of fnp.fromfile
    Array([0., 1., 2.], dtype=float32)
    """
    raise NotImplementedError("fromfile is not implemented because it may be non-pure and thus unsafe under jit "
                              "and the other transformations (as in JAX); use fnp.asarray(np.fromfile(...))")


def fromiter(*args: Any, **kwargs: Any) -> Array:
    """Not implemented, as in JAX: consuming an iterator is a side effect. Use
    ``fnp.asarray(np.fromiter(...))``.

    >>> fnp.asarray(np.fromiter(range(3), dtype=np.int32))        # instead of fnp.fromiter
    Array([0, 1, 2], dtype=int32)
    """
    raise NotImplementedError("fromiter is not implemented because it may be non-pure and thus unsafe under jit "
                              "and the other transformations (as in JAX); use fnp.asarray(np.fromiter(...))")


def fromfunction(function: Any, shape: Any, *, dtype: DTypeLike = float, **kwargs: Any) -> Any:
    """``function`` evaluated at every index of ``shape``; as in JAX it is vmapped, so it is called
    with scalar indices (numpy calls it once with index grids: the same for elementwise functions).

    >>> fnp.fromfunction(lambda i, j: i + j, (2, 3), dtype=int)
    Array([[0, 1, 2],
           [1, 2, 3]], dtype=int32)
    """
    from funcgrad.api import vmap
    shape = shape_tuple(shape, "fromfunction")
    fn = (lambda *idx: function(*idx, **kwargs)) if kwargs else function
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        fn = vmap(fn, in_axes=tuple(in_axes[::-1]))
    return fn(*(_arange(s, dtype=dtype) for s in shape))


def _window(name: str, M: Any, make: Any) -> Array:
    M = index_arg(name, "M", M)
    return _const(make(M) if M > 0 else np.zeros((0,)), _dtypes.float_)


def bartlett(M: int) -> Array:
    """The Bartlett (triangular) window of ``M`` points.

    >>> fnp.bartlett(5)
    Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    return _window("bartlett", M, np.bartlett)


def blackman(M: int) -> Array:
    """The Blackman window of ``M`` points.

    >>> fnp.blackman(3)                                    # [0, 1, 0] (to rounding)
    Array([-1.3877788e-17,  1.0000000e+00, -1.3877788e-17], dtype=float32)
    """
    return _window("blackman", M, np.blackman)


def hamming(M: int) -> Array:
    """The Hamming window of ``M`` points.

    >>> fnp.hamming(3)
    Array([0.08, 1.  , 0.08], dtype=float32)
    """
    return _window("hamming", M, np.hamming)


def hanning(M: int) -> Array:
    """The Hann window of ``M`` points.

    >>> fnp.hanning(3)
    Array([0., 1., 0.], dtype=float32)
    """
    return _window("hanning", M, np.hanning)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Array:
    """An Array from any DLPack producer (numpy, torch, CuPy, JAX), as ``jax.numpy.from_dlpack``; see
    ``funcgrad.from_dlpack``. ``device=`` moves the result there (``"cpu"``, ``"gpu"``).

    >>> from_dlpack(np.arange(3.0))      # f32[3] (f64 with x64)
    Array([0., 1., 2.], dtype=float32)
    """
    # funcgrad.devices (the transforms layer, below this one), found by module name: the package's
    # attribute ``devices`` is the function fg.devices().
    devices = importlib.import_module("funcgrad.devices")
    out = devices.from_dlpack(x, copy=copy)
    return out if device is None else devices.device_put(out, device)
