"""Threefry-2x32 counter-based PRNG core, in pure numpy.

This is the hash behind JAX's default PRNG (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC'11; the Random123 library).  A key is a
pair of uint32 words; random numbers are produced by hashing counters under
the key, so there is no hidden state: the same (key, counter) always gives
the same bits, and independent streams come from deriving new keys.

The key-derivation functions follow JAX's two schemes, selected by the
``partitionable`` argument: ``True`` is JAX's default since 0.5
(``jax_threefry_partitionable=True``: element ``i`` of any draw hashes the
64-bit counter ``i`` as the pair ``(i >> 32, i & 0xffffffff)`` and a 32-bit
output word is the XOR of the two hash words), ``False`` the classic scheme
(the counters ``0..n-1`` paired first half with second half):

* ``seed_key(seed)``   ~ ``jax.random.PRNGKey(seed)``
* ``split(key, num)``  ~ ``jax.random.split(key, num)``
* ``fold_in(key, d)``  ~ ``jax.random.fold_in(key, d)``
* ``random_bits(key, shape)`` ~ ``jax.random.bits(key, shape, uint32)``

All arithmetic is done on ``np.uint32`` arrays, where numpy wraps modulo
2**32 silently and without warnings (array ops never overflow-check);
Python ints are converted to uint32 *before* entering arithmetic so numpy
never has to promote or raise on out-of-range scalars.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["threefry2x32", "seed_key", "split", "fold_in", "random_bits"]

_U32 = np.uint32
_MASK32 = 0xFFFFFFFF

# Rotation constants for Threefry-2x32 (Random123's R_32x2_*), in groups of
# four rounds; the two groups alternate.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))

# Key-schedule parity constant: the third key word is k0 ^ k1 ^ this, so the
# schedule never degenerates even for an all-zero key.
_KS_PARITY = 0x1BD11BDA


def _as_u32(x) -> np.ndarray:
    """Convert ints / arrays to uint32, rejecting values that do not fit
    (rather than letting them wrap silently)."""
    if isinstance(x, np.ndarray) and x.dtype == _U32:
        return x
    arr = np.asarray(x)
    if arr.dtype == _U32:
        return arr
    if arr.dtype.kind not in "iub" and arr.dtype != object:
        raise TypeError(f"threefry needs unsigned 32-bit integers, got dtype {arr.dtype}")
    if arr.size and (np.min(arr) < 0 or np.max(arr) > _MASK32):
        raise ValueError("threefry inputs must lie in [0, 2**32)")
    return arr.astype(_U32)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    """Rotate uint32 words left by r (0 < r < 32).  Shifts on uint32 arrays
    drop the bits pushed out, which is exactly what the rotation needs."""
    return (x << _U32(r)) | (x >> _U32(32 - r))


def _four_rounds(x0, x1, rotations):
    """Four MIX rounds: x0 += x1; x1 = rotl(x1, r) ^ x0."""
    for r in rotations:
        x0 = x0 + x1
        x1 = _rotl(x1, r) ^ x0
    return x0, x1


def threefry2x32(key0, key1, x0, x1):
    """Threefry-2x32 with 20 rounds: hash counters (x0, x1) under the key
    (key0, key1).  All four inputs broadcast together; returns (y0, y1) as
    uint32 arrays of the broadcast shape.

    Known answer (Random123): key (0, 0), counter (0, 0) -> (0x6b200159, 0x99ba4efe).
    """
    k0, k1, x0, x1 = np.broadcast_arrays(_as_u32(key0), _as_u32(key1), _as_u32(x0), _as_u32(x1))
    shape = x0.shape
    # Work on 1-d arrays: arithmetic on 0-d arrays yields numpy *scalars*,
    # which (unlike arrays) warn on uint32 overflow; wraparound is intended.
    k0, k1, x0, x1 = (a.reshape(-1) for a in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ _U32(_KS_PARITY))

    # Key injection before round 1 and after every 4 rounds; the injection
    # number s is added to the second word so each injection differs.
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for s in range(1, 6):
        x0, x1 = _four_rounds(x0, x1, _ROTATIONS[(s - 1) % 2])
        x0 = x0 + ks[s % 3]
        x1 = x1 + ks[(s + 1) % 3] + _U32(s)
    return x0.reshape(shape), x1.reshape(shape)


def _hash_counts(key, counts: np.ndarray) -> np.ndarray:
    """JAX's ``threefry_2x32(keypair, count)``: hash a flat array of counter
    words by pairing its first half with its second half (padding an odd
    length with one zero) and concatenating the two output halves."""
    key = _check_key(key)
    counts = _as_u32(counts).ravel()
    n = counts.size
    if n % 2:
        counts = np.concatenate([counts, np.zeros(1, _U32)])
    half = counts.size // 2
    y0, y1 = threefry2x32(key[0], key[1], counts[:half], counts[half:])
    return np.concatenate([y0, y1])[:n]


def _check_key(key) -> np.ndarray:
    key = _as_u32(key)
    if key.shape != (2,):
        raise ValueError(f"a threefry key is a uint32 array of shape (2,), got shape {key.shape}")
    return key


def seed_key(seed: int) -> np.ndarray:
    """Key from an integer seed, like ``jax.random.PRNGKey(seed)``: the high
    and low 32 bits of the seed taken as a 64-bit integer (negative seeds in
    two's complement)."""
    seed = int(seed)
    if not -(2**63) <= seed < 2**64:
        # seed_key is random.key's core: its errors are random.key's.
        raise ValueError(f"random.key: seed {seed} does not fit in 64 bits: expected an integer in "
                         f"[-2**63, 2**64); reduce it first, e.g. seed % 2**64")
    seed &= (1 << 64) - 1
    return np.array([seed >> 32, seed & _MASK32], dtype=_U32)


def _iota_2x32(size: int) -> tuple[np.ndarray, np.ndarray]:
    """The counters 0..size-1 as 64-bit numbers split in (high, low) uint32 words."""
    counts = np.arange(size, dtype=np.uint64)
    return (counts >> np.uint64(32)).astype(_U32), (counts & np.uint64(_MASK32)).astype(_U32)


def split(key, num: int = 2, partitionable: bool = False) -> np.ndarray:
    """Derive ``num`` new keys, shape (num, 2).

    Classic: hash the counters 0 .. 2*num-1 under ``key`` (JAX's
    ``_threefry_split_original``); partitionable: key ``i`` is the hash pair
    of the counter ``i`` (``_threefry_split_foldlike``)."""
    num = int(num)
    if num < 0:
        raise ValueError(f"num must be non-negative, got {num}")
    if partitionable:
        key = _check_key(key)
        hi, lo = _iota_2x32(num)
        y0, y1 = threefry2x32(key[0], key[1], hi, lo)
        return np.stack([y0, y1], axis=-1)
    counts = np.arange(2 * num, dtype=_U32)
    return _hash_counts(key, counts).reshape(num, 2)


def fold_in(key, data: int) -> np.ndarray:
    """Mix a 32-bit integer into ``key`` (JAX's ``_threefry_fold_in``): hash
    the counter pair (0, data), i.e. ``seed_key(data)``, under ``key``."""
    data = int(data)
    if not 0 <= data <= _MASK32:
        # JAX takes data as uint32; refuse rather than wrap silently.
        raise ValueError(f"fold_in data must lie in [0, 2**32), got {data}")
    return _hash_counts(key, np.array([0, data], dtype=_U32))


def random_bits(key, shape=(), partitionable: bool = False) -> np.ndarray:
    """Uniform random uint32 words of the given shape (JAX's
    ``_threefry_random_bits`` for 32-bit output).

    Classic: hash the counters 0 .. size-1 under ``key``; partitionable:
    word ``i`` is the XOR of the two hash words of the 64-bit counter ``i``."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
    size = math.prod(shape)
    if partitionable:
        key = _check_key(key)
        hi, lo = _iota_2x32(size)
        y0, y1 = threefry2x32(key[0], key[1], hi, lo)
        return (y0 ^ y1).reshape(shape)
    if size > _MASK32:
        # JAX then hashes blocks under fold_in-derived keys; not needed here.
        raise ValueError(f"random_bits supports at most 2**32 - 1 words, got {size}")
    counts = np.arange(size, dtype=_U32)
    return _hash_counts(key, counts).reshape(shape)
