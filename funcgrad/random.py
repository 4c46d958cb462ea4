"""Splittable, functional pseudo-random numbers (Threefry-2x32, JAX's scheme).

A *key* names a stream of random bits.  Nothing is stateful: the same key
always gives the same numbers (on every run, machine and thread count, and
under ``jit`` and ``vmap``), and new independent streams come from
:func:`split` or :func:`fold_in`.  Never use one key twice for numbers that
should be independent; split it instead.  Code written for ``jax.random``
runs unchanged and draws the same numbers as JAX 0.10.2 from the same seed.

>>> import funcgrad as fg
>>> from funcgrad import random
>>> key = random.key(0)                          # a typed key, shape ()
>>> key, sub = random.split(key)                 # each shape ()
>>> x = random.normal(sub, (3, 4))               # f32[3,4]
>>> keys = random.split(key, 8)                  # typed keys, shape (8,)
>>> ys = fg.vmap(lambda k: random.uniform(k, (5,)))(keys)   # f32[8,5]
>>> raw = random.PRNGKey(0)                      # the raw u32[2] form works everywhere too

Keys come in two kinds, as in JAX: the raw ``uint32[2]`` array of
:func:`PRNGKey` (and ``split`` of it: ``uint32[n, 2]``), and the typed key
of :func:`key` (a :class:`PRNGKeyArray` of shape ``()``, whose words
:func:`key_data` returns).  Every function takes either kind and returns
keys of the kind it was given.  Typed keys are pytrees over their words, so
they pass through ``jit`` and ``vmap`` (``vmap`` maps the key axes, never the
word axis).

How numbers are made (the algorithms of ``jax.random`` 0.10.2, matched bit
for bit for keys, raw bits, ``uniform`` and everything built on them;
``normal`` to the last bit or so, because XLA's ``erf_inv`` is a different
polynomial from scipy's, which we use):

* the stream: by default JAX's "partitionable" Threefry scheme (JAX's
  default since 0.5): number ``i`` of a draw hashes the 64-bit counter ``i``
  under the key and XORs the two output words; ``split(key, n)`` gives key
  ``i`` = the hash of counter ``i``.  ``fg.config.update("threefry_partitionable",
  False)`` (or ``"jax_threefry_partitionable"``) switches to the classic
  scheme of JAX before 0.5, where the counters are paired first half with
  second half.  The same seed gives different numbers in the two schemes;
* ``uniform``: the top mantissa bits of a word OR-ed into the bit pattern of
  1.0 give a float in [1, 2); minus 1 gives [0, 1) with every value equally
  spaced (2**-23 apart for float32), then scaled to [minval, maxval);
* ``normal``: the inverse-erf method, ``sqrt(2) * erf_inv(u)`` with ``u``
  uniform on (-1, 1) (not Box-Muller: one uniform per normal, and no
  branch);
* ``truncated_normal``: inverse-erf on the uniform interval
  ``[erf(lower/sqrt2), erf(upper/sqrt2))``;
* ``categorical``: the Gumbel-max trick; ``permutation``: sorting by random
  bits (stable argsort), repeated enough rounds to make ties negligible;
* ``gamma`` (and ``beta``, ``dirichlet``, ``chisquare``, ``f``, ``t``,
  ``loggamma``, ``generalized_normal``, ``ball``): Marsaglia-Tsang rejection
  with one key per element, as JAX; ``poisson`` (Knuth below 10, Hormann's
  transformed rejection above) and ``binomial`` (inversion / BTRS) are JAX's
  loops too.

Differences from JAX: ``uniform`` also clamps below ``maxval`` (JAX can
round up to ``maxval`` itself in rare cases); typed keys are a funcgrad
class, not an array dtype, so ``funcgrad.numpy`` functions do not take them
(use :func:`key_data` / :func:`wrap_key_data`); sharding
(``out_sharding``) is not implemented; gamma samples have first and
second derivatives in ``a`` (third derivatives raise); ``multivariate_normal`` and ``orthogonal`` use
``funcgrad.numpy.linalg`` (``cholesky``/``eigh``/``svd``/``qr``).

None of the bit-level primitives has a derivative; the samplers are
differentiable in their float parameters where the sample is a smooth
function of them (``uniform``'s bounds, ``truncated_normal``'s bounds, the
scales and locations), and ``gamma`` (so ``beta``, ``dirichlet``, ...) in
its shape ``a`` by implicit reparameterization, as JAX.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import funcgrad.lax as lax
from funcgrad.api import custom_jvp as _fg_custom_jvp, vmap as _fg_vmap
import funcgrad.numpy as fnp
from funcgrad.core import Array, Tracer, config, describe
from funcgrad.dtypes import canonicalize_dtype, default_float_dtype, default_int_dtype
from funcgrad.lax import convert_element_type as convert
from funcgrad.numpy.array_utils import shape_tuple
from funcgrad.tree_util import register_pytree_node

__all__ = ["key", "PRNGKey", "PRNGKeyArray", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
           "split", "fold_in", "bits", "uniform", "normal", "bernoulli", "randint", "permutation", "choice",
           "categorical", "gumbel", "truncated_normal", "exponential", "laplace", "logistic", "cauchy",
           "rademacher", "pareto", "rayleigh", "maxwell", "double_sided_maxwell", "weibull_min", "lognormal",
           "triangular", "wald", "geometric", "gamma", "loggamma", "beta", "dirichlet", "chisquare", "f", "t",
           "generalized_normal", "ball", "poisson", "binomial", "multinomial", "multivariate_normal",
           "orthogonal"]

_U32 = np.dtype(np.uint32)
_SQRT2 = math.sqrt(2.0)

# --------------------------------------------------------------------------
# Argument checking
# --------------------------------------------------------------------------


_IMPL = "threefry2x32"


class KeyDtype:
    """The dtype of typed keys (``key<fry>``): names the PRNG implementation.

    >>> key_dtype()
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

    >>> keys = split(key(0), 4)      # PRNGKeyArray of shape (4,)
    >>> keys[1].shape, key_data(keys).shape
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
        if raw is None or raw.dtype.kind not in "biuf":
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
    if isinstance(dtype, str) and dtype.lower() in ("bfloat16", "bf16"):
        # bfloat16 has no numpy dtype (see funcgrad.mixed_precision).
        raise TypeError(f"random.{name}: bfloat16 is not an array dtype in funcgrad; draw float32 numbers and "
                        "round them with mixed_precision.round_to_bfloat16 (or to_bfloat16 for the bits)")
    try:
        dtype = default_float_dtype() if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.{name}: dtype must be a float type (float16/32/64), got {dtype!r:.40}: {e}") \
            from None
    if dtype.kind != "f":
        raise TypeError(f"random.{name}: dtype must be a float type (float16/32/64), got {dtype}")
    return dtype


def _as(x: Any, dtype: np.dtype, name: str, arg: str) -> Any:
    """``x`` (a parameter such as ``minval``) as an array (or tracer) of ``dtype``.

    Only numbers: ``np.asarray(None, float)`` would be NaN, a string a numpy error.
    """
    if not isinstance(x, (Array, Tracer)):
        raw = np.asarray(x) if isinstance(x, (int, float, np.number, np.ndarray, list, tuple)) else None
        if raw is None or raw.dtype.kind not in "biuf":
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

    >>> k = key(0)
    >>> k.shape, key_data(k)
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

    >>> PRNGKey(0)
    Array([0, 0], dtype=uint32)
    >>> PRNGKey(2**32 + 5)
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

    >>> key_data(key(42))
    Array([ 0, 42], dtype=uint32)
    """
    words, _ = _key_words(keys, "key_data")
    return words


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """Typed keys from their ``uint32[..., 2]`` words (the inverse of :func:`key_data`).

    >>> wrap_key_data(PRNGKey(7)).shape
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

    >>> key_impl(key(0))
    'threefry2x32'
    """
    _key_words(keys, "key_impl")
    return _IMPL


def key_dtype(impl_spec: Any = None) -> KeyDtype:
    """The dtype of typed keys of the given implementation (only threefry2x32: ``key<fry>``).

    >>> key(0).dtype == key_dtype()
    True
    """
    _impl_check(impl_spec, "key_dtype")
    return KeyDtype()


def clone(key: Any) -> Any:
    """A copy of ``key`` (JAX uses it to mark deliberate reuse; funcgrad has no reuse checker, so the key itself).

    >>> clone(key(0)).shape
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

    >>> k1, k2 = split(key(0))            # two typed keys
    >>> split(PRNGKey(0), 4).shape
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

    >>> fold_in(key(0), 7).shape
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

    >>> bits(key(0), (4,)).dtype
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


# --------------------------------------------------------------------------
# Continuous distributions
# --------------------------------------------------------------------------


def _unit_floats(k: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Floats uniform on [0, 1): random mantissa bits under the exponent of 1.0, minus 1."""
    info = np.finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    word = _random_bits(k, nbits, _numel(shape))
    one_bits = int(np.array(1.0, dtype).view(f"uint{nbits}"))
    mantissa = lax.shift_right_logical(word, nbits - nmant)
    floats = lax.bitcast_convert_type(lax.bitwise_or(mantissa, one_bits), dtype) - 1.0
    return fnp.reshape(floats, shape)


def uniform(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, minval: Any = 0.0,
            maxval: Any = 1.0, *, out_sharding: Any = None) -> Any:
    """Floats uniform on ``[minval, maxval)`` (``minval``/``maxval`` broadcast into ``shape``).

    >>> x = uniform(key(0), (1000,), minval=-1.0, maxval=1.0)   # f32[1000] in [-1, 1)
    """
    k = _check_key(key, "uniform")
    _no_sharding(out_sharding, "uniform")
    shape = _shape(shape, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    minval, maxval = _as(minval, dtype, "uniform", "minval"), _as(maxval, dtype, "uniform", "maxval")
    _check_broadcast("uniform", shape, minval, maxval)
    out = _unit_floats(k, shape, dtype) * (maxval - minval) + minval
    # Rounding in the line above can reach maxval itself; keep the interval
    # half-open, and never go below minval (the product can round down).
    top = lax.nextafter(fnp.stop_gradient(maxval), -np.inf)
    out = fnp.maximum(minval, fnp.minimum(out, top))
    return fnp.broadcast_to(out, shape)


def normal(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard normal floats (inverse-erf method: ``sqrt(2) * erf_inv(u)``, ``u`` uniform on (-1, 1)).

    >>> z = normal(key(0), (2, 3))        # f32[2,3]
    """
    k = _check_key(key, "normal")
    _no_sharding(out_sharding, "normal")
    shape = _shape(shape, "normal")
    dtype = _float_dtype(dtype, "normal")
    # Just above -1, so erf_inv never sees -1 (which would give -inf).
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = uniform(k, shape, dtype, lo, 1.0)
    # erf_inv computes float16 in float32: round back to the requested dtype.
    return convert(lax.erf_inv(u) * _SQRT2, dtype)


def truncated_normal(key: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None,
                     dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard normals conditioned on ``lower < x < upper`` (bounds broadcast; may be +-inf).

    Sampled exactly by inverting the CDF on the sub-interval (no rejection
    loop); bounds deep in one tail (|bound| > ~5 in float32) lose precision
    because ``erf`` rounds to +-1 there.

    >>> x = truncated_normal(key(0), -1.0, 2.0, (1000,))     # f32[1000] in (-1, 2)
    """
    k = _check_key(key, "truncated_normal")
    _no_sharding(out_sharding, "truncated_normal")
    dtype = _float_dtype(dtype, "truncated_normal")
    lower = _as(lower, dtype, "truncated_normal", "lower")
    upper = _as(upper, dtype, "truncated_normal", "upper")
    if shape is None:
        shape = tuple(np.broadcast_shapes(lower.shape, upper.shape))
    shape = _shape(shape, "truncated_normal")
    _check_broadcast("truncated_normal", shape, lower, upper)
    a = lax.erf(lower * (1.0 / _SQRT2))
    b = lax.erf(upper * (1.0 / _SQRT2))
    u = uniform(k, shape, dtype, a, b)
    out = lax.erf_inv(u) * _SQRT2
    # erf/erf_inv round-trips can step just outside the bounds: clamp inside.
    lo = lax.nextafter(fnp.stop_gradient(lower), np.inf)
    hi = lax.nextafter(fnp.stop_gradient(upper), -np.inf)
    # erf/erf_inv compute float16 in float32: clamp and round in the requested dtype.
    return fnp.minimum(fnp.maximum(convert(out, dtype), lo), hi)


def _no_sharding(out_sharding: Any, name: str) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"random.{name}: out_sharding={out_sharding!r}: funcgrad has no sharding; "
                                  "leave it None")


def gumbel(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, mode: str | None = None, *,
           out_sharding: Any = None) -> Any:
    """Standard Gumbel floats, ``-log(-log(u))`` with ``u`` uniform on [tiny, 1) (JAX's ``mode="low"``).

    ``mode="high"`` builds ``u`` from two uniforms (finer near 0, for
    probabilities below ~1e-7 in float32), and ``"highest"`` (float32; other
    dtypes use ``"high"``) from 64 random bits, as JAX.

    >>> g = gumbel(key(0), (5,))          # f32[5]
    """
    k = _check_key(key, "gumbel")
    _no_sharding(out_sharding, "gumbel")
    shape = _shape(shape, "gumbel")
    dtype = _float_dtype(dtype, "gumbel")
    mode = "low" if mode is None else mode
    if mode not in ("low", "high", "highest"):
        raise ValueError(f"random.gumbel: mode must be 'low', 'high' or 'highest', got {mode!r}")
    info = np.finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        return _gumbel_highest(k, shape)
    if mode in ("high", "highest"):
        both = uniform(k, (2,) + shape, dtype)
        high, low = both[0], both[1]
        x = fnp.where(high >= 0.5, high, high + 2.0 ** -info.nmant * low + float(info.tiny))
        return -fnp.log(-fnp.log1p(-x))
    u = uniform(k, shape, dtype, float(info.tiny), 1.0)
    return -fnp.log(-fnp.log(u))


# --------------------------------------------------------------------------
# Discrete distributions
# --------------------------------------------------------------------------


def _clz32(x: Any) -> Any:
    """Count leading zero bits of uint32 words (32 for 0), by a branch-free binary search."""
    n = fnp.zeros(x.shape, _U32)
    y = x
    for step in (16, 8, 4, 2, 1):
        top_clear = y < np.uint32(1 << (32 - step))
        n = fnp.where(top_clear, n + np.uint32(step), n)
        y = fnp.where(top_clear, lax.shift_left(y, np.uint32(step)), y)
    return fnp.where(x == 0, np.uint32(32), n)


def _pair_to_float32(hi: Any, lo: Any) -> Any:
    """The 64-bit fixed-point fraction ``(hi, lo) / 2**64`` rounded down to float32 (JAX's ``_safe_int_to_float``)."""
    hiclz, loclz = _clz32(hi), _clz32(lo)
    mantissa = lax.bitwise_or(lax.shift_left(hi, hiclz),
                              fnp.where(hiclz == 32, lax.shift_left(lo, loclz),
                                        lax.shift_right_logical(lo, np.uint32(32) - hiclz)))
    mantissa = lax.bitwise_and(lax.shift_right_logical(mantissa, np.uint32(8)), np.uint32((1 << 23) - 1))
    lead = fnp.where(hiclz == 32, np.uint32(32) + loclz, hiclz)
    exp = lax.shift_left(np.uint32(126) - lead, np.uint32(23))    # wraps like JAX's uint32 arithmetic
    exp = lax.bitwise_and(exp, np.uint32((1 << 30) - (1 << 22)))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.float32)


def _gumbel_highest(k: Any, shape: tuple[int, ...]) -> Any:
    """JAX's ``mode="highest"`` float32 Gumbel: a uniform from 64 random bits, log1p on the lower half."""
    words = fnp.reshape(_random_bits(k, 32, 2 * _numel(shape)), (2,) + shape)
    neg = lax.bitwise_not(words)
    lo_neg = neg[1]
    carry = fnp.stack([convert(lo_neg == np.uint32(0xFFFFFFFF), _U32), fnp.ones(shape, _U32)])
    neg = neg + carry                        # the 64-bit two's complement: 1 - u in fixed point
    flip = words[0] < np.uint32(1 << 31)
    chosen = fnp.where(flip, words, neg)
    x = _pair_to_float32(chosen[0], chosen[1])
    return fnp.where(flip, -fnp.log(-fnp.log1p(-x)), -fnp.log(-fnp.log(x)))


def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None, mode: str = "low", *,
              out_sharding: Any = None) -> Any:
    """Booleans that are True with probability ``p`` (``p`` broadcasts into ``shape``).

    ``mode="high"`` compares against two uniforms (resolution 2**-46 in
    float32 instead of 2**-23), as JAX.

    >>> b = bernoulli(key(0), 0.3, (100,))     # bool[100], about 30 True
    """
    k = _check_key(key, "bernoulli")
    _no_sharding(out_sharding, "bernoulli")
    if mode not in ("high", "low"):
        raise ValueError(f"random.bernoulli: got mode={mode!r}, expected 'high' or 'low'")
    if isinstance(p, (Array, Tracer)) and p.dtype.kind != "f":
        raise TypeError(f"random.bernoulli: the probability p must have a floating dtype, got {describe(p)}")
    p = p if isinstance(p, (Array, Tracer)) else _as(p, default_float_dtype(), "bernoulli", "p")
    shape = tuple(p.shape) if shape is None else _shape(shape, "bernoulli")
    _check_broadcast("bernoulli", shape, p)
    if mode == "high":
        both = uniform(k, (2,) + shape, p.dtype)
        u1, u2 = both[0], both[1] * 2.0 ** -np.finfo(p.dtype).nmant
        return u2 < p - u1
    return uniform(k, shape, p.dtype) < p


def _int_bound(value: Any, dtype: np.dtype, info: np.iinfo) -> Any:
    if isinstance(value, (Array, Tracer)):
        if value.dtype.kind not in "iub":
            raise TypeError(f"random.randint: bounds must be integers, got {describe(value)}")
        return convert(value, dtype)
    value = np.asarray(value)
    if value.dtype.kind not in "iub":
        raise TypeError(f"random.randint: bounds must be integers, got {value.dtype}")
    # Clip in Python/int64 first so out-of-range bounds saturate instead of wrapping.
    return fnp.asarray(np.array(np.clip(value.astype(object), info.min, info.max), dtype=object).astype(dtype))


def randint(key: Any, shape: Sequence[int] | int, minval: Any, maxval: Any, dtype: Any = None, *,
            out_sharding: Any = None) -> Any:
    """Integers uniform on ``[minval, maxval)`` (bounds broadcast into ``shape``; JAX's algorithm).

    Two random words per number are combined modulo the span, so the bias
    is below 2**-32 relative even for spans near 2**32.  ``maxval`` one past
    the dtype's largest value (e.g. ``randint(k, s, 0, 256, uint8)``) covers
    the whole range when given as a Python int.

    >>> d = randint(key(0), (10,), 1, 7)   # i32[10], dice rolls in 1..6
    """
    k = _check_key(key, "randint")
    _no_sharding(out_sharding, "randint")
    shape = _shape(shape, "randint")
    try:
        dtype = default_int_dtype() if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.randint: dtype must be an integer type, got {dtype!r:.40}: {e}") from None
    if dtype.kind not in "iu":
        raise TypeError(f"random.randint: dtype must be an integer type, got {dtype}")
    info = np.iinfo(dtype)
    nbits = info.bits
    unsigned = np.dtype(f"uint{nbits}")
    # Known only for concrete bounds: maxval beyond the dtype, i.e. the span
    # includes the largest value.
    past_top = not isinstance(maxval, (Array, Tracer)) and bool(np.any(np.asarray(maxval) > info.max))
    lo, hi = _int_bound(minval, dtype, info), _int_bound(maxval, dtype, info)
    _check_broadcast("randint", shape, lo, hi)
    k1, k2 = _split2(k)
    n = _numel(shape)
    higher = fnp.reshape(_random_bits(k1, nbits, n), shape)
    lower = fnp.reshape(_random_bits(k2, nbits, n), shape)

    # span = hi - lo as an unsigned number (exact even when hi - lo overflows
    # the signed type); an empty range returns lo, like JAX.
    span = convert(hi - lo, unsigned)
    span = fnp.where(hi <= lo, np.array(1, unsigned), span)
    if past_top:
        span = fnp.where(hi > lo, span + np.array(1, unsigned), span)
        # The full range wraps the span to 0: every bit pattern is a sample.
        full = fnp.broadcast_to(span == 0, shape)
        span = fnp.where(span == 0, np.array(1, unsigned), span)
    # offset = (higher * 2**nbits + lower) mod span, without 2*nbits-bit integers.
    multiplier = fnp.mod(np.array(2 ** (nbits // 2), unsigned), span)
    multiplier = fnp.mod(multiplier * multiplier, span)
    offset = fnp.mod(fnp.mod(higher, span) * multiplier + fnp.mod(lower, span), span)
    if past_top:
        offset = fnp.where(full, lower, offset)   # as XLA: rem by 0 keeps the value, so JAX returns the low word
    return fnp.broadcast_to(lo + convert(offset, dtype), shape)


def _shuffle(k: Any, x: Any, axis: int) -> Any:
    """Shuffle ``x`` along ``axis`` (each slice independently) by sorting random keys.

    With 32-bit sort keys, ties (which a stable sort leaves in order, a tiny
    bias) get likely for long axes, so JAX's rule re-sorts enough rounds to
    make the bias negligible: ceil(3 * ln(n) / ln(2**32 - 1)) rounds.
    """
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(2.0**32 - 1)))
    for _ in range(rounds):
        k, sub = _split2(k)
        order = lax.argsort(bits(sub, x.shape), axis)
        x = fnp.take_along_axis(x, order, axis)
    return x


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False, *,
                out_sharding: Any = None) -> Any:
    """A random permutation of ``range(x)`` (int ``x``) or of ``x`` along ``axis``.

    With ``independent=True`` every slice along the other axes is shuffled
    on its own; otherwise whole slices are moved together.

    >>> permutation(key(0), 5)               # i32[5], e.g. [3, 0, 4, 1, 2]
    >>> permutation(key(0), x2d).shape == x2d.shape   # rows shuffled
    """
    k = _check_key(key, "permutation")
    _no_sharding(out_sharding, "permutation")
    if isinstance(x, (int, np.integer)) or (not isinstance(x, (Array, Tracer)) and np.ndim(x) == 0):
        n = _count(x.item() if isinstance(x, np.ndarray) else x, "permutation", "n")
        return _shuffle(k, fnp.arange(n), 0)
    x = fnp.asarray(x)
    if x.ndim == 0:
        raise ValueError(f"random.permutation: x must be an int or an array of rank >= 1, got {describe(x)}")
    axis = _axis(axis, x.ndim, "permutation", describe(x))
    if independent or x.ndim == 1:
        return _shuffle(k, x, axis)
    order = _shuffle(k, fnp.arange(x.shape[axis]), 0)
    return fnp.take(x, order, axis=axis)


def categorical(key: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None, replace: bool = True,
                mode: str | None = None, *, out_sharding: Any = None) -> Any:
    """Indices drawn with probabilities ``softmax(logits, axis)`` (Gumbel-max trick).

    The result has the shape of ``logits`` without ``axis``; with ``shape``
    (which must end with that batch shape) extra leading samples are drawn.
    ``replace=False`` draws the leading samples without replacement (Gumbel
    top-k), so their number may not exceed the number of categories.

    >>> logits = fnp.log(fnp.array([0.2, 0.5, 0.3]))
    >>> categorical(key(0), logits, shape=(1000,))    # i32[1000] in {0, 1, 2}
    """
    k = _check_key(key, "categorical")
    _no_sharding(out_sharding, "categorical")
    logits = fnp.asarray(logits)
    if logits.dtype.kind != "f":
        logits = convert(logits, default_float_dtype())
    axis = _axis(axis, logits.ndim, "categorical", f"logits {describe(logits)}")
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch_shape if shape is None else _shape(shape, "categorical")
    if len(shape) < len(batch_shape) or \
            tuple(np.broadcast_shapes(shape[len(shape) - len(batch_shape):], batch_shape)) != \
            shape[len(shape) - len(batch_shape):]:
        raise ValueError(f"random.categorical: shape {shape} must end with the logits' batch shape {batch_shape}")
    prefix = shape[:len(shape) - len(batch_shape)]
    if not replace:
        n_draws = _numel(prefix)
        if n_draws > logits.shape[axis]:
            raise ValueError(f"random.categorical: the number of samples without replacement ({n_draws}) cannot "
                             f"exceed the number of categories ({logits.shape[axis]})")
        noisy = logits + gumbel(k, logits.shape, logits.dtype, mode=mode)
        _, idx = lax.top_k(fnp.moveaxis(noisy, axis, -1), n_draws)      # batch_shape + (n_draws,)
        idx = fnp.moveaxis(idx, -1, 0)                                  # (n_draws,) + batch_shape
        return fnp.reshape(idx, shape).astype(default_int_dtype())
    noise_shape = list(shape[len(prefix):])
    noise_shape.insert(axis, logits.shape[axis])
    noise = gumbel(k, prefix + tuple(noise_shape), logits.dtype, mode=mode)
    # Counting the axis from the end keeps it right after the prefix is added.
    return fnp.argmax(noise + logits, axis=axis - logits.ndim)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0,
           mode: str | None = None) -> Any:
    """Random samples from ``a`` (an array along ``axis``, or ``arange(a)`` for an int), JAX's algorithm.

    With ``replace=False`` no element is drawn twice (a permutation's
    prefix, or Gumbel top-k with ``p``); ``p`` gives the probabilities of
    the entries (1-d, length ``a.shape[axis]``; normalized by its sum).

    >>> choice(key(0), 10, (3,))                     # i32[3] in 0..9
    >>> choice(key(0), fnp.arange(5.0), (2,), replace=False, p=fnp.array([.1, .2, .3, .2, .2]))
    """
    k = _check_key(key, "choice")
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"random.choice: shape must be a sequence (a tuple), got {shape!r:.40}")
    shape = _shape(tuple(shape), "choice")
    if isinstance(a, (Array, Tracer)):
        arr = a
    elif _is_int(a) or (isinstance(a, np.ndarray) and a.ndim == 0):
        arr = None
    else:
        arr = fnp.asarray(a)
    if arr is not None and arr.ndim == 0:
        if isinstance(arr, Tracer):
            raise TypeError("random.choice: an int a must be concrete (a Python int), not traced: the number of "
                            "entries decides the output's values' range statically")
        a, arr = int(np.asarray(arr)), None
    if arr is None:
        n_inputs = int(a)
        out_dtype = default_int_dtype()
    else:
        axis = _axis(axis, arr.ndim, "choice", describe(arr))
        n_inputs = arr.shape[axis]
        out_dtype = arr.dtype
    n_draws = _numel(shape)
    if n_draws == 0:
        return fnp.zeros(shape if arr is None else arr.shape[:axis] + shape + arr.shape[axis + 1:], out_dtype)
    if n_inputs <= 0:
        raise ValueError("random.choice: a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"random.choice: cannot take a larger sample (size {n_draws}) than the population "
                         f"(size {n_inputs}) when replace=False")
    if p is None:
        if replace:
            ind = randint(k, shape, 0, n_inputs)
            result = ind if arr is None else fnp.take(arr, ind, axis=axis)
        else:
            perm = permutation(k, n_inputs if arr is None else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=0 if arr is None else axis)
    else:
        p_arr = fnp.asarray(p)
        if p_arr.dtype.kind != "f":
            p_arr = convert(p_arr, default_float_dtype())
        if p_arr.shape != (n_inputs,):
            raise ValueError(f"random.choice: p must be None or a 1-d vector with the same size as a.shape[axis]; "
                             f"p has shape {p_arr.shape} and a.shape[axis] is {n_inputs}")
        if replace:
            p_cuml = fnp.cumsum(p_arr)
            r = p_cuml[-1] * (1 - uniform(k, shape, dtype=p_cuml.dtype))
            # searchsorted(p_cuml, r), side="left": how many cumulative sums lie below r.
            ind = fnp.sum(fnp.reshape(p_cuml, (1,) * len(shape) + (n_inputs,)) < r[..., None], axis=-1)
            ind = convert(ind, default_int_dtype())
        else:
            g = gumbel(k, (n_inputs,), dtype=p_arr.dtype, mode=mode) + fnp.log(p_arr)
            ind = convert(lax.top_k(g, n_draws)[1], default_int_dtype())
        result = ind if arr is None else fnp.take(arr, ind, axis=axis)
    if arr is None:
        return fnp.reshape(result, shape)
    return fnp.reshape(result, arr.shape[:axis] + shape + arr.shape[axis + 1:])


# --------------------------------------------------------------------------
# More continuous distributions (JAX's algorithms: the same numbers)
# --------------------------------------------------------------------------


def _params(name: str, shape: Any, dtype: np.dtype, **params: Any) -> tuple[tuple[int, ...], list]:
    """The float parameters as arrays of ``dtype``, and the output shape: ``shape``, or their broadcast shape."""
    arrays = [_as(v, dtype, name, arg) for arg, v in params.items()]
    if shape is None:
        try:
            shape = tuple(np.broadcast_shapes(*(tuple(x.shape) for x in arrays)))
        except ValueError:
            raise ValueError(f"random.{name}: the parameter shapes "
                             f"{', '.join(str(tuple(x.shape)) for x in arrays)} do not broadcast together") from None
    else:
        shape = _shape(shape, name)
        _check_broadcast(name, shape, *arrays)
    return shape, arrays


def exponential(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard exponential floats (rate 1): ``-log1p(-u)``.

    >>> e = exponential(key(0), (3,))          # f32[3], mean 1
    """
    k = _check_key(key, "exponential")
    _no_sharding(out_sharding, "exponential")
    u = uniform(k, _shape(shape, "exponential"), _float_dtype(dtype, "exponential"))
    return -fnp.log1p(-u)


def laplace(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard Laplace floats (density ``exp(-|x|) / 2``).

    >>> x = laplace(key(0), (3,))
    """
    k = _check_key(key, "laplace")
    _no_sharding(out_sharding, "laplace")
    dtype = _float_dtype(dtype, "laplace")
    u = uniform(k, _shape(shape, "laplace"), dtype, -1.0 + float(np.finfo(dtype).epsneg), 1.0)
    return fnp.sign(u) * fnp.log1p(-fnp.abs(u))


def logistic(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard logistic floats: ``log(u) - log1p(-u)``.

    >>> x = logistic(key(0), (3,))
    """
    k = _check_key(key, "logistic")
    _no_sharding(out_sharding, "logistic")
    dtype = _float_dtype(dtype, "logistic")
    x = uniform(k, _shape(shape, "logistic"), dtype, float(np.finfo(dtype).tiny), 1.0)
    return fnp.log(x) - fnp.log1p(-x)


def cauchy(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard Cauchy floats: ``tan(pi * (u - 1/2))``.

    >>> x = cauchy(key(0), (3,))
    """
    k = _check_key(key, "cauchy")
    _no_sharding(out_sharding, "cauchy")
    dtype = _float_dtype(dtype, "cauchy")
    u = uniform(k, _shape(shape, "cauchy"), dtype, float(np.finfo(dtype).eps), 1.0)
    return fnp.tan(np.pi * (u - 0.5))


def _int_dtype(dtype: Any, name: str) -> np.dtype:
    try:
        dtype = default_int_dtype() if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.{name}: dtype must be an integer type, got {dtype!r:.40}: {e}") from None
    if dtype.kind not in "iu":
        raise ValueError(f"random.{name}: dtype must be an integer type, got {dtype}")
    return dtype


def rademacher(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Random signs: -1 or +1 with probability 1/2 each (integers by default).

    >>> rademacher(key(0), (4,))                # i32[4] of +-1
    """
    k = _check_key(key, "rademacher")
    _no_sharding(out_sharding, "rademacher")
    try:
        dtype = default_int_dtype() if dtype is None else canonicalize_dtype(dtype)
    except TypeError as e:
        raise TypeError(f"random.rademacher: bad dtype {dtype!r:.40}: {e}") from None
    b = convert(bernoulli(k, 0.5, _shape(shape, "rademacher")), dtype)
    return convert(2 * b - 1, dtype)


def pareto(key: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
           out_sharding: Any = None) -> Any:
    """Pareto floats with shape ``b`` (support ``[1, inf)``): ``exp(e / b)``, ``e`` exponential.

    >>> x = pareto(key(0), 3.0, (4,))
    """
    k = _check_key(key, "pareto")
    _no_sharding(out_sharding, "pareto")
    dtype = _float_dtype(dtype, "pareto")
    shape, (b,) = _params("pareto", shape, dtype, b=b)
    return fnp.exp(exponential(k, shape, dtype) / b)


def rayleigh(key: Any, scale: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
             out_sharding: Any = None) -> Any:
    """Rayleigh floats: ``scale * sqrt(-2 log u)``.

    >>> x = rayleigh(key(0), 2.0, (4,))
    """
    k = _check_key(key, "rayleigh")
    _no_sharding(out_sharding, "rayleigh")
    dtype = _float_dtype(dtype, "rayleigh")
    shape, (scale,) = _params("rayleigh", shape, dtype, scale=scale)
    u = uniform(k, shape, dtype)
    return scale * fnp.sqrt(fnp.log(u) * -2.0)


def maxwell(key: Any, shape: Sequence[int] | int = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Maxwell floats: the length of a standard normal 3-vector.

    >>> x = maxwell(key(0), (4,))
    """
    k = _check_key(key, "maxwell")
    _no_sharding(out_sharding, "maxwell")
    dtype = _float_dtype(dtype, "maxwell")
    z = normal(k, _shape(shape, "maxwell") + (3,), dtype)
    return fnp.sqrt(fnp.sum(z * z, axis=-1))


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Sequence[int] | int = (), dtype: Any = None) -> Any:
    """Double-sided Maxwell floats: a random sign times a Maxwell sample, times ``scale``, plus ``loc``.

    As in JAX the output shape is ``shape + broadcast(loc, scale).shape``
    (``shape`` is a prefix), or the parameters' shape when ``shape`` is ``()``.

    >>> x = double_sided_maxwell(key(0), 0.0, 1.0, (4,))
    """
    k = _check_key(key, "double_sided_maxwell")
    dtype = _float_dtype(dtype, "double_sided_maxwell")
    loc, scale = _as(loc, dtype, "double_sided_maxwell", "loc"), _as(scale, dtype, "double_sided_maxwell", "scale")
    params_shape = tuple(np.broadcast_shapes(tuple(loc.shape), tuple(scale.shape)))
    shape = _shape(shape, "double_sided_maxwell")
    shape = (shape or params_shape) + params_shape if shape else params_shape + params_shape
    k1, k2 = _split2(k)
    return rademacher(k2, shape, dtype) * maxwell(k1, shape, dtype) * scale + loc


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Sequence[int] | int = (), dtype: Any = None) -> Any:
    """Weibull floats (inverse CDF): ``scale * (-log1p(-u)) ** (1 / concentration)``.

    >>> x = weibull_min(key(0), 1.0, 2.0, (4,))
    """
    k = _check_key(key, "weibull_min")
    dtype = _float_dtype(dtype, "weibull_min")
    scale = _as(scale, dtype, "weibull_min", "scale")
    concentration = _as(concentration, dtype, "weibull_min", "concentration")
    u = uniform(k, _shape(shape, "weibull_min"), dtype)
    return fnp.power(-fnp.log1p(-u), 1.0 / concentration) * scale


def lognormal(key: Any, sigma: Any = 1.0, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Log-normal floats: ``exp(sigma * z)``, ``z`` standard normal.

    >>> x = lognormal(key(0), 0.5, (4,))
    """
    k = _check_key(key, "lognormal")
    _no_sharding(out_sharding, "lognormal")
    dtype = _float_dtype(dtype, "lognormal")
    shape, (sigma,) = _params("lognormal", shape, dtype, sigma=sigma)
    return fnp.exp(normal(k, shape, dtype) * sigma)


def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
               out_sharding: Any = None) -> Any:
    """Triangular floats on ``[left, right]`` with peak at ``mode`` (inverse CDF).

    >>> x = triangular(key(0), 0.0, 0.3, 1.0, (4,))
    """
    k = _check_key(key, "triangular")
    _no_sharding(out_sharding, "triangular")
    dtype = _float_dtype(dtype, "triangular")
    shape, (left, mode, right) = _params("triangular", shape, dtype, left=left, mode=mode, right=right)
    fc = (mode - left) / (right - left)
    u = uniform(k, shape, dtype)
    out1 = left + fnp.sqrt(u * (right - left) * (mode - left))
    out2 = right - fnp.sqrt((1 - u) * (right - left) * (right - mode))
    return fnp.where(u < fc, out1, out2)


def wald(key: Any, mean: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
         out_sharding: Any = None) -> Any:
    """Wald (inverse Gaussian, scale 1) floats with the given ``mean`` (Michael-Schucany-Haas).

    >>> x = wald(key(0), 2.0, (4,))
    """
    k = _check_key(key, "wald")
    _no_sharding(out_sharding, "wald")
    dtype = _float_dtype(dtype, "wald")
    shape, (mean,) = _params("wald", shape, dtype, mean=mean)
    k1, k2 = _split2(k)
    mean = fnp.broadcast_to(mean, shape)
    v = normal(k1, shape, dtype)
    z = uniform(k2, shape, dtype)
    y = v * v
    mean_sq = mean * mean
    sqrt_term = fnp.sqrt(4 * mean * y + mean_sq * (y * y))
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return fnp.where(z <= mean / (mean + x), x, mean_sq / x)


def geometric(key: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Geometric integers: the number of Bernoulli(``p``) trials up to the first success (support 1, 2, ...).

    >>> n = geometric(key(0), 0.25, (4,))       # i32[4], mean 4
    """
    k = _check_key(key, "geometric")
    _no_sharding(out_sharding, "geometric")
    dtype = _int_dtype(dtype, "geometric")
    fdtype = p.dtype if isinstance(p, (Array, Tracer)) and p.dtype.kind == "f" else default_float_dtype()
    shape, (p,) = _params("geometric", shape, fdtype, p=p)
    u = uniform(k, shape, fdtype)
    u = fnp.where(u == 0, np.array(1, fdtype), u)   # as JAX: u = 0 read as 1
    g = fnp.floor(fnp.log(u) / fnp.log1p(-p)) + 1
    return convert(fnp.broadcast_to(g, shape), dtype)


# --------------------------------------------------------------------------
# Gamma and the laws built on it
# --------------------------------------------------------------------------


def _gamma_one(k: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha) sample (or its log) from the key words ``k``: Marsaglia-Tsang, JAX's ``_gamma_one``.

    ``alpha < 1`` is boosted to ``alpha + 1`` and multiplied by ``u ** (1/alpha)`` (added in log space).
    """
    dtype = alpha.dtype
    zero, one = np.array(0, dtype), np.array(1, dtype)
    boost_mask = alpha >= one
    alpha_orig = alpha
    alpha = fnp.where(boost_mask, alpha, alpha + one)
    d = alpha - 1.0 / 3.0
    c = (1.0 / 3.0) / fnp.sqrt(d)

    def cond_fn(state):
        _, X, V, U = state
        return fnp.logical_and(U >= 1 - 0.0331 * (X * X), fnp.log(U) >= X * 0.5 + d * (1 - V + fnp.log(V)))

    def body_fn(state):
        def next_kxv(kxv):
            key_, _, _ = kxv
            key_, sub = _split2(key_)
            x = normal(sub, (), dtype)
            return key_, x, 1 + x * c

        key_ = state[0]
        key_, x_key, u_key = _splitn(key_, 3)
        _, x, v = lax.while_loop(lambda kxv: kxv[2] <= zero, next_kxv, (x_key, zero, -one))
        return key_, x * x, v * v * v, uniform(u_key, (), dtype)

    k, sub = _split2(k)
    _, _, V, _ = lax.while_loop(cond_fn, body_fn, (k, zero, one, np.array(2, dtype)))
    if log_space:
        log_samples = -exponential(sub, (), dtype)
        log_boost = fnp.where(fnp.logical_or(boost_mask, log_samples == 0), zero, log_samples * (one / alpha_orig))
        return convert(fnp.log(d) + fnp.log(V) + log_boost, dtype)   # (float16 math may widen)
    samples = 1 - uniform(sub, (), dtype)
    boost = fnp.where(boost_mask, one, fnp.power(samples, one / alpha_orig))
    return convert(d * V * boost, dtype)


def _gamma_samples(k: Any, a: Any, log_space: bool) -> Any:
    """Gamma(a) samples of ``a``'s shape: element ``i`` from key ``split(k, a.size)[i]``, as JAX."""
    n = _numel(tuple(a.shape))
    if n == 0:
        return fnp.zeros(a.shape, a.dtype)
    keys = _split_words(k, n)
    samples = _fg_vmap(lambda kk, aa: _gamma_one(kk, aa, log_space))(keys, fnp.reshape(a, (n,)))
    return fnp.reshape(samples, a.shape)


def _gamma_sample_rule(log_space: bool):
    """``a -> sample`` with JAX's implicit reparameterization derivative: ``dx/da = random_gamma_grad(a, x)``."""
    def sample(k, a):
        return _gamma_samples(k, a, log_space)

    sample = _fg_custom_jvp(sample, nondiff_argnums=(0,))

    @sample.defjvp
    def _(k, primals, tangents):
        (a,), (da,) = primals, tangents
        out = sample(k, a)
        if log_space:
            # d log(x) = dx / x; x = exp(log x) may round to 0: use the smallest normal float then.
            x = fnp.exp(out)
            x = fnp.where(x == 0, np.array(np.finfo(a.dtype).tiny, a.dtype), x)
            g = lax.random_gamma_grad(a, x) / x
        else:
            g = lax.random_gamma_grad(a, out)
        return out, da * g

    return sample


def _gamma(name: str, key: Any, a: Any, shape: Any, dtype: Any, log_space: bool) -> Any:
    k = _check_key(key, name)
    dtype = _float_dtype(dtype, name)
    shape, (a,) = _params(name, shape, dtype, a=a)
    a = fnp.broadcast_to(a, shape)
    return _GAMMA_RULES[log_space](k, a)


def gamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Gamma(``a``, scale 1) floats (Marsaglia-Tsang rejection, one key per element, as JAX).

    Differentiable in ``a`` (implicit reparameterization, as JAX): the
    derivative of the sample at a fixed uniform; first and second derivatives
    (third derivatives raise ``NotImplementedError``).  Very small ``a`` underflows to 0; use :func:`loggamma`.

    >>> x = gamma(key(0), 2.5, (4,))              # f32[4], mean 2.5
    """
    _no_sharding(out_sharding, "gamma")
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
             out_sharding: Any = None) -> Any:
    """``log`` of Gamma(``a``) samples, computed in log space (accurate for tiny ``a``, where gamma underflows).

    >>> x = loggamma(key(0), 0.01, (4,))          # f32[4], large negative numbers
    """
    _no_sharding(out_sharding, "loggamma")
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key: Any, a: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
         out_sharding: Any = None) -> Any:
    """Beta(``a``, ``b``) floats on [0, 1]: ``Ga / (Ga + Gb)`` from two log-gamma draws.

    >>> x = beta(key(0), 2.0, 5.0, (4,))          # f32[4], mean 2/7
    """
    k = _check_key(key, "beta")
    _no_sharding(out_sharding, "beta")
    dtype = _float_dtype(dtype, "beta")
    shape, (a, b) = _params("beta", shape, dtype, a=a, b=b)
    key_a, key_b = _split2(k)
    log_a = loggamma(key_a, fnp.broadcast_to(a, shape), shape, dtype)
    log_b = loggamma(key_b, fnp.broadcast_to(b, shape), shape, dtype)
    log_max = fnp.maximum(log_a, log_b)
    ga, gb = fnp.exp(log_a - log_max), fnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key: Any, alpha: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Dirichlet(``alpha``) vectors (last axis of ``alpha``): normalized log-gamma draws.

    ``shape`` is the batch shape; the result has shape ``shape + alpha.shape[-1:]``.

    >>> x = dirichlet(key(0), fnp.array([1.0, 2.0, 3.0]), (5,))    # f32[5,3], rows sum to 1
    """
    k = _check_key(key, "dirichlet")
    _no_sharding(out_sharding, "dirichlet")
    dtype = _float_dtype(dtype, "dirichlet")
    alpha = _as(alpha, dtype, "dirichlet", "alpha")
    if alpha.ndim < 1:
        raise ValueError(f"random.dirichlet: alpha must have at least 1 dimension (the categories), got "
                         f"{describe(alpha)}")
    if shape is None:
        shape = tuple(alpha.shape[:-1])
    else:
        shape = _shape(shape, "dirichlet")
        _check_broadcast("dirichlet", shape, alpha[..., 0])
    log_g = loggamma(k, fnp.broadcast_to(alpha, shape + tuple(alpha.shape[-1:])), shape + tuple(alpha.shape[-1:]),
                     dtype)
    log_g = log_g - fnp.max(fnp.stop_gradient(log_g), axis=-1, keepdims=True)
    e = fnp.exp(log_g)
    return e / fnp.sum(e, axis=-1, keepdims=True)


def chisquare(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
              out_sharding: Any = None) -> Any:
    """Chi-square floats with ``df`` degrees of freedom: ``2 * Gamma(df / 2)``.

    >>> x = chisquare(key(0), 3.0, (4,))          # f32[4], mean 3
    """
    k = _check_key(key, "chisquare")
    _no_sharding(out_sharding, "chisquare")
    dtype = _float_dtype(dtype, "chisquare")
    shape, (df,) = _params("chisquare", shape, dtype, df=df)
    return fnp.exp(loggamma(k, df / 2, shape, dtype)) * 2


def f(key: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
      out_sharding: Any = None) -> Any:
    """F-distributed floats: ``(chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)``.

    >>> x = f(key(0), 5.0, 10.0, (4,))
    """
    k = _check_key(key, "f")
    _no_sharding(out_sharding, "f")
    dtype = _float_dtype(dtype, "f")
    shape, (dfnum, dfden) = _params("f", shape, dtype, dfnum=dfnum, dfden=dfden)
    key_dfd, key_dfn = _split2(k)
    num = chisquare(key_dfn, dfnum, shape, dtype) / dfnum
    den = chisquare(key_dfd, dfden, shape, dtype) / dfden
    return num / den


def t(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Student's t floats with ``df`` degrees of freedom: ``z * sqrt((df/2) / Gamma(df/2))``.

    >>> x = t(key(0), 4.0, (4,))
    """
    k = _check_key(key, "t")
    _no_sharding(out_sharding, "t")
    dtype = _float_dtype(dtype, "t")
    shape, (df,) = _params("t", shape, dtype, df=df)
    key_n, key_g = _split2(k)
    n = normal(key_n, shape, dtype)
    half_df = df / 2
    g = gamma(key_g, fnp.broadcast_to(half_df, shape), shape, dtype)
    return n * fnp.sqrt(half_df / g)


def generalized_normal(key: Any, p: float, shape: Sequence[int] | int = (), dtype: Any = None, *,
                       out_sharding: Any = None) -> Any:
    """Generalized normal floats (density ``∝ exp(-|x|**p)``): a random sign times ``Gamma(1/p) ** (1/p)``.

    >>> x = generalized_normal(key(0), 1.5, (4,))
    """
    k = _check_key(key, "generalized_normal")
    _no_sharding(out_sharding, "generalized_normal")
    dtype = _float_dtype(dtype, "generalized_normal")
    shape = _shape(shape, "generalized_normal")
    k1, k2 = _split2(k)
    g = gamma(k1, fnp.full(shape, 1 / _as(p, dtype, "generalized_normal", "p"), dtype), shape, dtype)
    r = rademacher(k2, shape, dtype)
    return r * g ** (1 / p)


def ball(key: Any, d: int, p: float = 2, shape: Sequence[int] | int = (), dtype: Any = None, *,
         out_sharding: Any = None) -> Any:
    """Points uniform in the ``d``-dimensional unit ``p``-norm ball, shape ``shape + (d,)``.

    >>> x = ball(key(0), 3, shape=(5,))          # f32[5,3], every row's 2-norm below 1
    """
    k = _check_key(key, "ball")
    _no_sharding(out_sharding, "ball")
    d = _count(d, "ball", "d")
    dtype = _float_dtype(dtype, "ball")
    shape = _shape(shape, "ball")
    k1, k2 = _split2(k)
    g = generalized_normal(k1, p, shape + (d,), dtype)
    e = exponential(k2, shape, dtype)
    return g / ((fnp.sum(fnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]



# --------------------------------------------------------------------------
# Poisson, binomial, multinomial (JAX's loops over the whole array)
# --------------------------------------------------------------------------


def _any(x: Any) -> Any:
    """Whether any element of the boolean array ``x`` is True (a 0-d bool)."""
    return fnp.sum(convert(x, np.int32)) > 0


def _poisson_knuth(k: Any, lam: Any, shape: tuple[int, ...]) -> Any:
    """Knuth: count uniforms until their product drops below exp(-lam) (lam < 10)."""
    def body(carry):
        n, key_, log_prod = carry
        key_, sub = _split2(key_)
        n = fnp.where(log_prod > -lam, n + 1, n)
        return n, key_, log_prod + fnp.log(uniform(sub, shape, lam.dtype))

    def cond(carry):
        return _any(carry[2] > -lam)

    n, _, _ = lax.while_loop(cond, body, (fnp.zeros(shape, lam.dtype), k, fnp.zeros(shape, lam.dtype)))
    return n - 1


def _log_factorial(n: Any) -> Any:
    """log(n!) for integer-valued float ``n >= 0``: Stirling's series with its tabulated tail below 10."""
    return 0.5 * math.log(2 * math.pi) + (n + 0.5) * fnp.log(n + 1) - (n + 1) + _stirling_tail(n)


_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                           0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                           0.00925546218271273, 0.00833056343336287])


def _stirling_tail(n: Any) -> Any:
    """log(n!) - [(n + 1/2) log(n + 1) - (n + 1) + log(sqrt(2 pi))] (JAX's ``_stirling_approx_tail``)."""
    small = n <= 9
    n = fnp.clip(n, 0.0, None)
    kp1sq = (n + 1) * (n + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (n + 1)
    table = fnp.asarray(_STIRLING_TAIL.astype(n.dtype))
    idx = convert(fnp.floor(fnp.clip(fnp.where(n == n, n, 0.0), 0.0, 9.0)), np.int32)   # (NaN: any row)
    return fnp.where(small, fnp.take(table, idx), approx)


def _poisson_rejection(k: Any, lam: Any, shape: tuple[int, ...]) -> Any:
    """Hormann's transformed rejection (PTRS), lam >= 10."""
    log_lam = fnp.log(lam)
    b = 0.931 + 2.53 * fnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        k_out, accepted, key_ = carry
        key_, sub0, sub1 = _splitn(key_, 3)
        u = uniform(sub0, shape, lam.dtype) - 0.5
        v = uniform(sub1, shape, lam.dtype)
        u_shifted = 0.5 - fnp.abs(u)
        kk = fnp.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = fnp.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t_ = -lam + kk * log_lam - _log_factorial(fnp.maximum(kk, 0.0))
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (kk < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t_))
        return fnp.where(accept, kk, k_out), accepted | accept, key_

    init = (fnp.full(shape, -1, lam.dtype), fnp.zeros(shape, bool), k)
    return lax.while_loop(lambda c: _any(~c[1]), body, init)[0]


def poisson(key: Any, lam: Any, shape: Sequence[int] | None = None, dtype: Any = None, *,
            out_sharding: Any = None) -> Any:
    """Poisson(``lam``) integers (Knuth below 10, transformed rejection above; computed in float32, as JAX).

    >>> n = poisson(key(0), 3.5, (4,))          # i32[4], mean 3.5
    """
    k = _check_key(key, "poisson")
    _no_sharding(out_sharding, "poisson")
    dtype = _int_dtype(dtype, "poisson")
    shape, (lam,) = _params("poisson", shape, np.dtype(np.float32), lam=lam)
    lam = fnp.broadcast_to(fnp.stop_gradient(lam), shape)
    use_knuth = fnp.isnan(lam) | (lam < 10)
    lam_knuth = fnp.where(use_knuth, lam, np.float32(0))
    lam_rejection = fnp.where(use_knuth | (lam == np.inf), np.float32(1e5), lam)
    result = fnp.where(use_knuth, _poisson_knuth(k, lam_knuth, shape), _poisson_rejection(k, lam_rejection, shape))
    # lam = inf gives 0, as JAX does (an integer cannot hold inf).
    return convert(fnp.where((lam == 0) | (lam == np.inf), np.float32(0), result), dtype)


def _binomial_inversion(k: Any, count: Any, prob: Any, shape: tuple[int, ...]) -> Any:
    log1mp = fnp.log1p(-prob)
    certain = log1mp == 0        # q = 0 (e.g. a last multinomial category): every geometric draw is inf
    log1mp = fnp.where(certain, np.array(-1, prob.dtype), log1mp)

    def body(carry):
        num_geom, geom_sum, key_ = carry
        sub, key_ = _split2(key_)
        num_geom = fnp.where(geom_sum <= count, num_geom + 1, num_geom)
        geom = fnp.ceil(fnp.log(uniform(sub, shape, prob.dtype)) / log1mp)
        geom = fnp.where(certain, np.array(np.inf, prob.dtype), geom)
        return num_geom, geom_sum + geom, key_

    init = (fnp.zeros(shape, prob.dtype), fnp.zeros(shape, prob.dtype), k)
    return lax.while_loop(lambda c: _any(c[1] <= count), body, init)[0] - 1


def _btrs(k: Any, count: Any, prob: Any, shape: tuple[int, ...]) -> Any:
    """Hormann's BTRS transformed rejection (count * prob > 10)."""
    stddev = fnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = fnp.floor((count + 1) * prob)

    def body(carry):
        k_out, accepted, key_ = carry
        key_, sub0, sub1 = _splitn(key_, 3)
        u = uniform(sub0, shape, prob.dtype) - 0.5
        v = uniform(sub1, shape, prob.dtype)
        us = 0.5 - fnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        kk = fnp.floor((2 * a / us + b) * u + c)
        reject = (kk < 0) | (kk > count)
        kc = fnp.clip(kk, 0.0, count)   # (rejected anyway outside; keeps the logs finite)
        v = fnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * fnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * fnp.log((count - m + 1) / (count - kc + 1))
              + (kc + 0.5) * fnp.log(r * (count - kc + 1) / (kc + 1))
              + _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(kc) - _stirling_tail(count - kc))
        accept = accept1 | (~reject & (v <= ub))
        return fnp.where(accept, kk, k_out), accepted | accept, key_

    init = (fnp.full(shape, -1, prob.dtype), fnp.zeros(shape, bool), k)
    return lax.while_loop(lambda cc: _any(~cc[1]), body, init)[0]


def binomial(key: Any, n: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Binomial(``n``, ``p``) counts as floats (inversion when ``n * min(p, 1-p) <= 10``, else BTRS; JAX's rules).

    NaN or negative ``n``, or ``p`` outside [0, 1] or NaN, give NaN; ``n = inf`` gives inf.

    >>> x = binomial(key(0), 20.0, 0.3, (4,))   # f32[4], mean 6
    """
    k = _check_key(key, "binomial")
    dtype = _float_dtype(dtype, "binomial")
    fdtype = p.dtype if isinstance(p, (Array, Tracer)) and p.dtype.kind == "f" else default_float_dtype()
    shape, (count, prob) = _params("binomial", shape, fdtype, n=n, p=p)
    count = fnp.broadcast_to(fnp.stop_gradient(count), shape)
    prob = fnp.broadcast_to(fnp.stop_gradient(prob), shape)
    p_lt_half = prob < 0.5
    q = fnp.where(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = fnp.isnan(count) | (count < 0.0)
    count_inf = fnp.abs(count) == np.inf
    q_is_nan = fnp.isnan(q)
    q_l_0 = q < 0.0
    q = fnp.where(q_is_nan | q_l_0, np.array(0.01, fdtype), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = fnp.floor(count)
    count_inv = fnp.where(use_inversion, count, np.array(0.0, fdtype))
    count_btrs = fnp.where(use_inversion | count_inf, np.array(1e4, fdtype), count)   # (inf: set below)
    q_btrs = fnp.where(use_inversion, np.array(0.5, fdtype), q)
    samples = fnp.where(use_inversion, _binomial_inversion(k, count_inv, q, shape),
                        _btrs(k, count_btrs, q_btrs, shape))
    samples = convert(samples, dtype)
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = fnp.where(invalid, np.array(np.nan, dtype), samples)
    samples = fnp.where(count_inf & ~invalid, np.array(np.inf, dtype), samples)
    finite_count = convert(fnp.where(count_inf, np.array(0, fdtype), count), dtype)
    return fnp.where(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples, finite_count - samples)


def multinomial(key: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None, dtype: Any = None,
                unroll: int | bool = 1) -> Any:
    """Multinomial counts (as floats): ``n`` trials over the categories on ``p``'s last axis.

    Drawn category by category with binomials of the remaining count, as JAX;
    ``shape`` (ending with the number of categories) batches the draws.

    >>> c = multinomial(key(0), 10.0, fnp.array([0.2, 0.3, 0.5]))    # f32[3], sums to 10
    """
    k = _check_key(key, "multinomial")
    dtype = _float_dtype(dtype, "multinomial")
    fdtype = default_float_dtype()
    p = _as(p, fdtype, "multinomial", "p")
    n = _as(n, fdtype, "multinomial", "n")
    if p.ndim < 1:
        raise ValueError(f"random.multinomial: p must have at least 1 dimension (the categories), got {describe(p)}")
    shape = tuple(p.shape) if shape is None else _shape(shape, "multinomial")
    if not shape or shape[-1] != p.shape[-1]:
        raise ValueError(f"random.multinomial: shape {shape} must end with the number of categories {p.shape[-1]}")
    n = fnp.broadcast_to(fnp.stop_gradient(n), shape[:-1])
    p = fnp.moveaxis(fnp.broadcast_to(fnp.stop_gradient(p), shape), -1, 0)
    remaining = fnp.flip(fnp.cumsum(fnp.flip(p, 0), axis=0), 0)
    ratios = p / fnp.where(remaining == 0, np.array(1, fdtype), remaining)
    keys = _split_words(k, int(ratios.shape[0]))

    def step(remainder, ratio_key):
        ratio, key_ = ratio_key
        count = binomial(key_, remainder, fnp.clip(ratio, 0.0, 1.0), dtype=fdtype)
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return convert(fnp.moveaxis(counts, 0, -1), dtype)



# --------------------------------------------------------------------------
# Laws that need a matrix factorization (funcgrad.numpy.linalg)
# --------------------------------------------------------------------------


def _linalg(name: str, fn: str) -> Any:
    func = getattr(fnp.linalg, fn, None)
    if func is None:
        raise NotImplementedError(f"random.{name} needs funcgrad.numpy.linalg.{fn}, which this build lacks")
    return func


def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None, dtype: Any = None,
                        method: str = "cholesky", *, out_sharding: Any = None) -> Any:
    """Normal vectors with the given ``mean`` (``[..., n]``) and covariance ``cov`` (``[..., n, n]``).

    ``mean + factor @ z`` with ``z`` standard normal and ``factor`` the
    Cholesky factor (``method="cholesky"``), or ``U sqrt(S)`` from ``svd`` /
    ``eigh``.  ``shape`` is the batch shape (broadcast with the parameters').

    >>> x = multivariate_normal(key(0), fnp.zeros(2), fnp.eye(2), (5,))    # f32[5,2]
    """
    k = _check_key(key, "multivariate_normal")
    _no_sharding(out_sharding, "multivariate_normal")
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"random.multivariate_normal: method must be one of 'svd', 'eigh', 'cholesky', "
                         f"got {method!r}")
    mean, cov = fnp.asarray(mean), fnp.asarray(cov)
    fdtype = np.result_type(mean.dtype, cov.dtype)
    fdtype = fdtype if fdtype.kind == "f" else default_float_dtype()
    dtype = fdtype if dtype is None else _float_dtype(dtype, "multivariate_normal")
    mean, cov = convert(mean, fdtype), convert(cov, fdtype)
    if mean.ndim < 1:
        raise ValueError(f"random.multivariate_normal: mean must have ndim >= 1, got {describe(mean)}")
    if cov.ndim < 2:
        raise ValueError(f"random.multivariate_normal: cov must have ndim >= 2, got {describe(cov)}")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"random.multivariate_normal: cov must have shape (..., {n}, {n}) for a mean of length "
                         f"{n}, got {describe(cov)}")
    batch = tuple(np.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2])))
    if shape is None:
        shape = batch
    else:
        shape = _shape(shape, "multivariate_normal")
        _check_broadcast("multivariate_normal", shape, mean[..., 0], cov[..., 0, 0])
    if method == "svd":
        u, s_, _ = _linalg("multivariate_normal", "svd")(cov)
        factor = u * fnp.sqrt(s_)[..., None, :]
    elif method == "eigh":
        w, v = _linalg("multivariate_normal", "eigh")(cov)
        factor = v * fnp.sqrt(w)[..., None, :]
    else:
        factor = _linalg("multivariate_normal", "cholesky")(cov)
    z = normal(k, shape + (n,), dtype)
    return mean + fnp.sum(factor * z[..., None, :], axis=-1)


def orthogonal(key: Any, n: int, shape: Sequence[int] | int = (), dtype: Any = None, m: int | None = None, *,
               out_sharding: Any = None) -> Any:
    """Random ``n x m`` matrices with orthonormal columns (or rows, when ``n < m``), Haar-distributed.

    The QR factorization of a Gaussian matrix with the signs of ``R``'s
    diagonal moved into ``Q``, as JAX; ``m`` defaults to ``n``.

    >>> q = orthogonal(key(0), 3)                # f32[3,3], q @ q.T = I
    """
    k = _check_key(key, "orthogonal")
    _no_sharding(out_sharding, "orthogonal")
    n = _count(n, "orthogonal", "n")
    m_ = n if m is None else _count(m, "orthogonal", "m")
    dtype = _float_dtype(dtype, "orthogonal")
    shape = _shape(shape, "orthogonal")
    z = normal(k, shape + (max(n, m_), min(n, m_)), dtype)
    q, r = _linalg("orthogonal", "qr")(z)
    d = fnp.sum(r * fnp.eye(r.shape[-1], dtype=r.dtype), axis=-2)    # R's diagonal
    x = q * fnp.sign(d)[..., None, :]
    return fnp.swapaxes(x, -1, -2) if n < m_ else x


_GAMMA_RULES = {False: _gamma_sample_rule(False), True: _gamma_sample_rule(True)}
