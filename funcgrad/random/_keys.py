"""Keys (raw and typed), argument checking, split/fold_in and the raw bits."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import funcgrad.lax as lax
import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import Array, Tracer, config, describe
from funcgrad.dtypes import canonicalize_dtype, default_float_dtype, default_int_dtype
from funcgrad.lax import convert_element_type as convert
from funcgrad.numpy.array_utils import shape_tuple
from funcgrad.tree_util import register_pytree_node


_U32 = np.dtype(np.uint32)
_SQRT2 = math.sqrt(2.0)

# --------------------------------------------------------------------------
# Argument checking
# --------------------------------------------------------------------------


_IMPL = "threefry2x32"


class KeyDtype:
    """The dtype of typed keys (``key<fry>``): names the PRNG implementation.

    >>> random.key_dtype()
    key<fry>
    """
    __slots__ = ("name",)

    def __init__(self, name: str = _IMPL) -> None:
        self.name = name

    def __repr__(self) -> str:
        return "key<fry>"

    __str__ = __repr__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, KeyDtype) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("KeyDtype", self.name))


class PRNGKeyArray:
    """An array of typed PRNG keys (``random.key``): shape ``S`` over ``uint32`` words of shape ``S + (2,)``.

    Indexing, iteration, ``len`` and ``reshape`` act on the key axes only.  It is a pytree whose one
    leaf is the words, so it passes through ``jit``, ``vmap`` (which maps a key axis) and ``grad``'s
    other arguments.  Not an ``Array``: numpy functions do not take it; use :func:`key_data`.

    >>> keys = random.split(random.key(0), 4)      # PRNGKeyArray of shape (4,)
    >>> keys[1].shape, random.key_data(keys).shape
    ((), (4, 2))
    """
    __slots__ = ("_data",)

    def __init__(self, data: Any) -> None:
        self._data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> KeyDtype:
        return KeyDtype()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a single key (shape ())")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a single key (shape ())")
        return (PRNGKeyArray(self._data[i]) for i in range(self.shape[0]))

    def __getitem__(self, idx: Any) -> "PRNGKeyArray":
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx):
            idx = idx + (slice(None),)   # the word axis is never indexed
        return PRNGKeyArray(self._data[idx])

    def reshape(self, *shape: Any) -> "PRNGKeyArray":
        shape = shape[0] if len(shape) == 1 and not _is_int(shape[0]) else shape
        return PRNGKeyArray(fnp.reshape(self._data, tuple(shape) + (2,)))

    def ravel(self) -> "PRNGKeyArray":
        return self.reshape(self.size)

    flatten = ravel

    def __repr__(self) -> str:
        if isinstance(self._data, Array):
            return f"Array({self.shape}, dtype=key<fry>) overlaying:\n{np.asarray(self._data)}"
        return f"PRNGKeyArray(shape={self.shape}, dtype=key<fry>)"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("a typed key array (random.key) cannot be converted to a numpy array; use "
                        "random.key_data(keys) for its uint32 words")

    def __eq__(self, other: Any) -> Any:
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return fnp.min(convert(self._data == other._data, np.int32), axis=-1) == 1

    __hash__ = None  # type: ignore[assignment]


register_pytree_node(PRNGKeyArray, lambda k: ((k._data,), None), lambda _, children: PRNGKeyArray(children[0]))


def _key_words(k: Any, name: str) -> tuple[Any, bool]:
    """``(words, typed)``: the ``uint32[..., 2]`` words of a typed or raw key array (any key shape)."""
    if isinstance(k, PRNGKeyArray):
        return k._data, True
    if not isinstance(k, (Array, Tracer)):
        raw = np.asarray(k) if isinstance(k, (np.ndarray, list, tuple)) else None
        if raw is None or _dtypes.kind(raw.dtype) not in "biuf":
            raise TypeError(f"random.{name}: expected a key (random.key(seed), or u32[2] from random.PRNGKey), "
                            f"got {type(k).__name__}: {k!r:.40}")
        k = fnp.asarray(raw)
    if k.dtype != _U32 or not k.shape or k.shape[-1] != 2:
        raise TypeError(f"random.{name}: expected a key (random.key(seed), or u32[2] from random.PRNGKey), got "
                        f"{describe(k)}")
    return k, False


def _check_key(k: Any, name: str) -> Any:
    """The words ``u32[2]`` of one key (typed of shape ``()``, or raw ``u32[2]``)."""
    words, typed = _key_words(k, name)
    if words.shape != (2,):
        shape = tuple(words.shape[:-1]) if typed else tuple(words.shape)
        what = f"a typed key array of shape {shape}" if typed else describe(words)
        raise TypeError(f"random.{name}: expected a single key (random.key(seed) of shape (), or u32[2] from "
                        f"random.PRNGKey), got {what}. For a batch of keys, map over them: "
                        f"vmap(lambda k: random.{name}(k, ...))(keys), or index one key out (keys[0]).")
    return words


def _rewrap(words: Any, typed: bool) -> Any:
    return PRNGKeyArray(words) if typed else words


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _shape(shape: Any, name: str, prefix: str = "random.") -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints (an int is a 1-d shape); ``2.5`` is refused, not truncated.

    Errors name ``prefix + name`` (``nn.initializers`` shares this check); the rule is
    funcgrad.numpy's, so ``random.normal(k, s)`` takes exactly the shapes ``fnp.zeros(s)`` does."""
    return shape_tuple(shape, prefix + name)


def _count(value: Any, name: str, arg: str) -> int:
    """A non-negative Python/numpy integer argument (``split``'s ``num``, ``permutation``'s ``n``)."""
    if not _is_int(value):
        raise TypeError(f"random.{name}: {arg} must be an int, got {type(value).__name__}: {value!r:.40}")
    if value < 0:
        raise ValueError(f"random.{name}: {arg} must be non-negative, got {value}")
    return int(value)


def _float_dtype(dtype: Any, name: str) -> np.dtype:
    try:
        dtype = default_float_dtype() if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.{name}: dtype must be a float type (bfloat16, float16/32/64), got {dtype!r:.40}: {e}") \
            from None
    if _dtypes.kind(dtype) != "f":
        raise TypeError(f"random.{name}: dtype must be a float type (bfloat16, float16/32/64), got {dtype}")
    return dtype


def _int_dtype(dtype: Any, name: str, error: type = ValueError) -> np.dtype:
    """The integer dtype (default: the default int); a TypeError for a non-dtype, ``error`` for a non-integer one."""
    try:
        dtype = default_int_dtype() if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.{name}: dtype must be an integer type, got {dtype!r:.40}: {e}") from None
    if dtype.kind not in "iu":
        raise error(f"random.{name}: dtype must be an integer type, got {dtype}")
    return dtype


def _as(x: Any, dtype: np.dtype, name: str, arg: str) -> Any:
    """``x`` (a parameter such as ``minval``) as an array (or tracer) of ``dtype``.

    Only numbers: ``np.asarray(None, float)`` would be NaN, a string a numpy error.
    """
    if not isinstance(x, (Array, Tracer)):
        raw = np.asarray(x) if isinstance(x, (int, float, np.generic, np.ndarray, list, tuple)) else None
        if raw is None or _dtypes.kind(raw.dtype) not in "biuf":
            raise TypeError(f"random.{name}: {arg} must be a number or an array of numbers, got "
                            f"{type(x).__name__}: {x!r:.40}")
        x = fnp.asarray(raw.astype(dtype))
    return convert(x, dtype)


def _axis(axis: Any, ndim: int, name: str, what: str) -> int:
    """``axis`` in ``[0, ndim)``, from an int in ``[-ndim, ndim)``."""
    if not _is_int(axis):
        raise TypeError(f"random.{name}: axis must be an int, got {type(axis).__name__}: {axis!r:.40}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"random.{name}: axis {axis} is out of range for {what}")
    return int(axis) % ndim


def _check_broadcast(name: str, shape: tuple[int, ...], *params: Any) -> None:
    # Like JAX: parameters broadcast *into* the requested shape; they never
    # enlarge it (which would silently change how many numbers are drawn).
    shapes = [tuple(p.shape) for p in params]
    try:
        ok = tuple(np.broadcast_shapes(shape, *shapes)) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"random.{name}: shape {shape} is not compatible with the parameter shapes "
                         f"{', '.join(map(str, shapes))} (they must broadcast to {shape})")


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


# --------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------


def _impl_check(impl: Any, name: str) -> None:
    if impl is not None and str(impl) not in (_IMPL, "threefry"):
        raise NotImplementedError(f"random.{name}: impl={impl!r}: only the threefry2x32 PRNG is implemented")


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """A typed key (shape ``()``, dtype ``key<fry>``) from an integer seed, like ``jax.random.key``.

    Its words (:func:`key_data`) are the high and low 32 bits of the seed as
    a 64-bit integer (negative seeds in two's complement), as for
    :func:`PRNGKey`.  ``seed`` may be a traced 0-d integer array.  Only the
    threefry2x32 implementation exists (``impl``/``dtype`` naming another
    raise ``NotImplementedError``).

    >>> k = random.key(0)
    >>> k.shape, random.key_data(k)
    ((), Array([0, 0], dtype=uint32))
    """
    _impl_check(impl, "key")
    if dtype is not None and not isinstance(dtype, KeyDtype):
        raise NotImplementedError(f"random.key: dtype={dtype!r}: only key_dtype() (key<fry>) is supported")
    return PRNGKeyArray(_seed_key(seed, "key"))


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:
    """A raw key (``u32[2]``) from an integer seed, like ``jax.random.PRNGKey``.

    The words are the high and low 32 bits of the seed as a 64-bit integer
    (negative seeds in two's complement).  ``seed`` may be a traced 0-d
    integer array (e.g. inside ``jit`` or ``vmap``).

    >>> random.PRNGKey(0)
    Array([0, 0], dtype=uint32)
    >>> random.PRNGKey(2**32 + 5)
    Array([1, 5], dtype=uint32)
    """
    _impl_check(impl, "PRNGKey")
    return _seed_key(seed, "PRNGKey")


def _seed_key(seed: Any, name: str) -> Any:
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"random.{name}: the seed must be an integer, got a typed key; it is already a key")
    if isinstance(seed, (Array, Tracer)):
        return _key_from_array(seed)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        if isinstance(seed, np.ndarray) and seed.ndim == 0 and seed.dtype.kind in "iu":
            seed = int(seed)
        else:
            raise TypeError(f"random.{name}: the seed must be an integer, got {type(seed).__name__}: {seed!r:.40}")
    return fnp.asarray(_seed_words(int(seed)))


def key_data(keys: Any) -> Any:
    """The ``uint32`` words of a key array: shape ``keys.shape + (2,)`` (a raw key is returned as is).

    >>> random.key_data(random.key(42))
    Array([ 0, 42], dtype=uint32)
    """
    words, _ = _key_words(keys, "key_data")
    return words


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """Typed keys from their ``uint32[..., 2]`` words (the inverse of :func:`key_data`).

    >>> random.wrap_key_data(random.PRNGKey(7)).shape
    ()
    """
    _impl_check(impl, "wrap_key_data")
    if dtype is not None and not isinstance(dtype, KeyDtype):
        raise NotImplementedError(f"random.wrap_key_data: dtype={dtype!r}: only key_dtype() (key<fry>) is supported")
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError("random.wrap_key_data: expected uint32 words of shape (..., 2), got a typed key array "
                        "(it is already wrapped)")
    words, _ = _key_words(key_bits_array, "wrap_key_data")
    return PRNGKeyArray(words)


def key_impl(keys: Any) -> str:
    """The name of the PRNG implementation of ``keys``: always ``"threefry2x32"`` here.

    >>> random.key_impl(random.key(0))
    'threefry2x32'
    """
    _key_words(keys, "key_impl")
    return _IMPL


def key_dtype(impl_spec: Any = None) -> KeyDtype:
    """The dtype of typed keys of the given implementation (only threefry2x32: ``key<fry>``).

    >>> random.key(0).dtype == random.key_dtype()
    True
    """
    _impl_check(impl_spec, "key_dtype")
    return KeyDtype()


def clone(key: Any) -> Any:
    """A copy of ``key`` (JAX uses it to mark deliberate reuse; funcgrad has no reuse checker, so the key itself).

    >>> random.clone(random.key(0)).shape
    ()
    """
    _key_words(key, "clone")
    return key


def _seed_words(seed: int) -> np.ndarray:
    """The high and low 32 bits of ``seed`` as a 64-bit integer (two's complement), as ``u32[2]``."""
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"random.key: seed {seed} does not fit in 64 bits: expected an integer in "
                         f"[-2**63, 2**64); reduce it first, e.g. seed % 2**64")
    seed &= (1 << 64) - 1
    return np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=_U32)


def _key_from_array(seed: Any) -> Any:
    if seed.shape != () or seed.dtype.kind not in "iu":
        raise TypeError(f"random.key: the seed must be a 0-d integer array, got {describe(seed)}")
    low = convert(seed, _U32)   # astype keeps the low 32 bits (two's complement)
    if seed.dtype.itemsize <= 4:
        # Sign-extend to 64 bits, as the Python-int path does.
        high = fnp.where(seed < 0, np.uint32(0xFFFFFFFF), np.uint32(0)) if seed.dtype.kind == "i" \
            else fnp.zeros((), _U32)
        high = convert(high, _U32)
    else:
        high = convert(fnp.floor_divide(seed, 2**32), _U32)
    return fnp.stack([high, low])


def _hash_counters(k: Any, n: int) -> Any:
    """``u32[n]``: the counters 0..n-1 hashed under ``k`` (JAX's classic ``threefry_random_bits``).

    The counters are paired first half with second half (an odd count is
    padded with one zero counter), and the two output halves concatenated.
    """
    if n == 0:
        return fnp.zeros((0,), _U32)
    if n > 0xFFFFFFFF:
        raise ValueError(f"random: at most 2**32 - 1 words can be drawn from one key, asked for {n}")
    half = (n + 1) // 2
    counters = np.zeros(2 * half, _U32)
    counters[:n] = np.arange(n, dtype=_U32)
    y0, y1 = lax.threefry2x32(k[0], k[1], fnp.asarray(counters[:half]), fnp.asarray(counters[half:]))
    out = fnp.concatenate([y0, y1])
    return out[:n] if n % 2 else out


def _hash_iota(k: Any, n: int) -> tuple[Any, Any]:
    """The two hash words of the 64-bit counters 0..n-1 (JAX's partitionable scheme), each ``u32[n]``."""
    if n >= 2**32:
        raise ValueError(f"random: at most 2**32 - 1 numbers can be drawn from one key at once, asked for {n}")
    y0, y1 = lax.threefry2x32(k[0], k[1], fnp.zeros((n,), _U32), fnp.arange(n, dtype=_U32))
    return y0, y1


def _split_words(k: Any, num: int) -> Any:
    """``u32[num, 2]``: ``num`` keys derived from the words ``k`` (the scheme of the config)."""
    if config.threefry_partitionable:
        y0, y1 = _hash_iota(k, num)
        return fnp.stack([y0, y1], axis=-1)
    return fnp.reshape(_hash_counters(k, 2 * num), (num, 2))


def split(key: Any, num: Any = 2) -> Any:
    """``num`` new independent keys (``jax.random.split``); ``num`` may be a shape tuple.

    Typed keys give a typed key array of shape ``num``; a raw key ``u32[2]`` gives ``u32[num, 2]``.

    >>> k1, k2 = random.split(random.key(0))            # two typed keys
    >>> random.split(random.PRNGKey(0), 4).shape
    (4, 2)
    """
    words, typed = _key_words(key, "split")
    k = _check_key(key, "split")
    if isinstance(num, tuple):
        shape = _shape(num, "split")
    else:
        shape = (_count(num, "split", "num"),)
    out = fnp.reshape(_split_words(k, _numel(shape)), shape + (2,))
    return _rewrap(out, typed)


def _split2(k: Any) -> tuple[Any, Any]:
    keys = _split_words(k, 2)
    return keys[0], keys[1]


def _splitn(k: Any, n: int) -> list:
    keys = _split_words(k, n)
    return [keys[i] for i in range(n)]


def fold_in(key: Any, data: Any) -> Any:
    """A new key from ``key`` and a 32-bit integer ``data`` (``jax.random.fold_in``).

    Useful to derive per-step keys: ``fold_in(key, step)``; ``data`` may be a
    traced 0-d integer array.  The same in both Threefry schemes.

    >>> random.fold_in(random.key(0), 7).shape
    ()
    """
    _, typed = _key_words(key, "fold_in")
    k = _check_key(key, "fold_in")
    if isinstance(data, (Array, Tracer)):
        if data.shape != () or data.dtype.kind not in "iub":
            raise TypeError(f"random.fold_in: data must be a 0-d integer array, got {describe(data)}")
        word = fnp.reshape(convert(data, _U32), (1,))
    else:
        if not _is_int(data) and not (isinstance(data, np.ndarray) and data.ndim == 0 and data.dtype.kind in "iu"):
            raise TypeError(f"random.fold_in: data must be an int, got {type(data).__name__}: {data!r:.40}")
        value = int(data)
        if not 0 <= value <= 0xFFFFFFFF:
            raise ValueError(f"random.fold_in: data must lie in [0, 2**32), got {value}")
        word = fnp.asarray(np.array([value], _U32))
    y0, y1 = lax.threefry2x32(k[0], k[1], fnp.asarray(np.zeros(1, _U32)), word)
    return _rewrap(fnp.concatenate([y0, y1]), typed)


# --------------------------------------------------------------------------
# Raw bits
# --------------------------------------------------------------------------


def _random_bits(k: Any, nbits: int, n: int) -> Any:
    """A flat array of ``n`` random unsigned ``nbits``-bit integers (JAX's layout in the config's scheme)."""
    if nbits not in (8, 16, 32, 64):
        raise ValueError(f"random: unsupported bit width {nbits}")
    unsigned = np.dtype(f"uint{nbits}")
    if config.threefry_partitionable:
        y0, y1 = _hash_iota(k, n)
        if nbits == 64:
            high, low = convert(y0, unsigned), convert(y1, unsigned)
            return lax.bitwise_or(lax.shift_left(high, np.uint64(32)), low)
        word = lax.bitwise_xor(y0, y1)
        return word if nbits == 32 else convert(word, unsigned)   # the low bits
    if nbits == 32:
        return _hash_counters(k, n)
    if nbits == 64:
        # Two words per number: the first half of the words are the high parts.
        words = _hash_counters(k, 2 * n)
        high, low = (convert(w, np.uint64) for w in (words[:n], words[n:]))
        return lax.bitwise_or(lax.shift_left(high, 32), low)
    # 8 or 16 bits: each word gives 32 // nbits numbers, lowest bits first.
    per_word = 32 // nbits
    words = _hash_counters(k, -(-n // per_word))
    shifts = fnp.asarray((np.arange(per_word, dtype=_U32) * nbits).reshape(per_word, 1))
    pieces = lax.bitwise_and(lax.shift_right_logical(fnp.reshape(words, (1, -1)), shifts), (1 << nbits) - 1)
    flat = fnp.reshape(fnp.transpose(pieces), (-1,))
    return convert(flat, unsigned)[:n]


def bits(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Uniform random unsigned integers (all bits random), like ``jax.random.bits`` (default ``uint32``).

    >>> random.bits(random.key(0), (4,)).dtype
    dtype('uint32')
    """
    k = _check_key(key, "bits")
    _no_sharding(out_sharding, "bits")
    shape = _shape(shape, "bits")
    try:
        dtype = np.dtype(np.uint32) if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.bits: dtype must be an unsigned integer type, got {dtype!r:.40}: {e}") from None
    if dtype.kind != "u":
        raise TypeError(f"random.bits: dtype must be an unsigned integer type, got {dtype}")
    return fnp.reshape(_random_bits(k, dtype.itemsize * 8, _numel(shape)), shape)


def _no_sharding(out_sharding: Any, name: str) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"random.{name}: out_sharding={out_sharding!r}: funcgrad has no sharding; "
                                  "leave it None")


def _start(name: str, key: Any, dtype: Any, out_sharding: Any = None, integer: bool = False) -> tuple[Any, np.dtype]:
    """What a sampler checks first: the key's words, no ``out_sharding``, and the float (or integer) dtype."""
    k = _check_key(key, name)
    _no_sharding(out_sharding, name)
    return k, (_int_dtype if integer else _float_dtype)(dtype, name)
