"""Tests for the pure-numpy Threefry-2x32 PRNG core."""

import warnings

import numpy as np
import pytest

from funcgrad import _threefry as T

# Known-answer vectors from Random123 (kat_vectors, threefry2x32_20), also
# used by JAX's tests: (key0, key1), (x0, x1) -> (y0, y1).
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key,count,expected", KAT)
def test_known_answers_scalar(key, count, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # wraparound must not warn
        y0, y1 = T.threefry2x32(*key, *count)
    assert y0.dtype == np.uint32 and y1.dtype == np.uint32
    assert (int(y0), int(y1)) == expected


def test_known_answers_vectorised():
    keys = np.array([k for k, _, _ in KAT], dtype=np.uint32)
    counts = np.array([c for _, c, _ in KAT], dtype=np.uint32)
    expected = np.array([e for _, _, e in KAT], dtype=np.uint32)
    y0, y1 = T.threefry2x32(keys[:, 0], keys[:, 1], counts[:, 0], counts[:, 1])
    np.testing.assert_array_equal(np.stack([y0, y1], axis=1), expected)


def test_broadcasting_scalar_key_against_counters():
    x0 = np.arange(12, dtype=np.uint32).reshape(3, 4)
    x1 = np.uint32(7)
    y0, y1 = T.threefry2x32(5, 9, x0, x1)
    assert y0.shape == y1.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            a, b = T.threefry2x32(5, 9, int(x0[i, j]), 7)
            assert (int(y0[i, j]), int(y1[i, j])) == (int(a), int(b))


def test_rejects_out_of_range_and_floats():
    with pytest.raises(ValueError):
        T.threefry2x32(0, 0, -1, 0)
    with pytest.raises(ValueError):
        T.threefry2x32(0, 2**32, 0, 0)
    with pytest.raises(TypeError):
        T.threefry2x32(0, 0, np.array([1.5]), 0)


# Values produced by jax 0.10.2 (threefry2x32 PRNG with
# jax_threefry_partitionable=False, i.e. JAX's classic key derivation).
def test_matches_jax_split():
    assert T.split(T.seed_key(0)).tolist() == [[4146024105, 967050713], [2718843009, 1272950319]]
    assert T.split(T.seed_key(42), 5).tolist() == [
        [2765691542, 1385194879],
        [831049250, 3807460095],
        [3616728933, 824333390],
        [1482326074, 1083977345],
        [2713995981, 2812206153],
    ]


def test_matches_jax_fold_in_and_bits():
    assert T.fold_in(T.seed_key(7), 12345).tolist() == [3187294848, 248916179]
    assert T.random_bits(T.seed_key(3), (3, 5)).tolist() == [
        [4100602816, 3613404234, 599341005, 2254168283, 3540432922],
        [3424789543, 1950876613, 2698995800, 3247721740, 2394163672],
        [875198212, 1557795597, 1705241915, 718559640, 1270737429],
    ]
    assert T.random_bits(T.seed_key(3), (1,)).tolist() == [3716834203]  # odd-size padding


# Values produced by jax 0.10.2 with its default jax_threefry_partitionable=True (key i of a split and word i of
# a draw both hash the 64-bit counter i; a word is the XOR of the two hash outputs).
def test_matches_jax_partitionable_split_and_bits():
    assert T.split(T.seed_key(42), 5, partitionable=True).tolist() == [
        [1832780943, 270669613],
        [64467757, 2916123636],
        [2465931498, 255383827],
        [3134548294, 894150801],
        [2954079971, 3276725750],
    ]
    assert T.random_bits(T.seed_key(3), (3, 5), partitionable=True).tolist() == [
        [318053758, 4029299397, 2787249374, 4190260272, 1195623854],
        [2503700069, 457437726, 1638813999, 905869004, 549593947],
        [3165009412, 670569004, 1292405167, 1103515456, 4161414791],
    ]
    # No padding in this scheme: one number is the first number of any longer draw.
    assert T.random_bits(T.seed_key(3), (1,), partitionable=True).tolist() == [318053758]
    assert T.split(T.seed_key(0), 0, partitionable=True).shape == (0, 2)


def test_seed_key():
    assert T.seed_key(0).tolist() == [0, 0]
    assert T.seed_key(-1).tolist() == [0xFFFFFFFF, 0xFFFFFFFF]
    assert T.seed_key(2**40 + 5).tolist() == [256, 5]
    assert T.seed_key(3).dtype == np.uint32


def test_determinism():
    key = T.seed_key(1234)
    np.testing.assert_array_equal(T.random_bits(key, (100,)), T.random_bits(key, (100,)))
    np.testing.assert_array_equal(T.split(key, 4), T.split(key, 4))
    np.testing.assert_array_equal(T.fold_in(key, 3), T.fold_in(key, 3))
    # The input key is not mutated.
    assert key.tolist() == [0, 1234]


def test_random_bits_shapes():
    key = T.seed_key(0)
    assert T.random_bits(key, ()).shape == ()
    assert T.random_bits(key, 5).shape == (5,)
    assert T.random_bits(key, (2, 0, 3)).shape == (2, 0, 3)
    bits = T.random_bits(key, (4, 6))
    assert bits.shape == (4, 6) and bits.dtype == np.uint32


def test_split_keys_differ():
    key = T.seed_key(0)
    keys = T.split(key, 1000)
    assert keys.shape == (1000, 2) and keys.dtype == np.uint32
    pairs = {tuple(k) for k in keys.tolist()}
    assert len(pairs) == 1000
    assert tuple(key.tolist()) not in pairs
    assert T.split(key, 0).shape == (0, 2)
    # Sub-keys produce different streams.
    a, b = T.split(key)
    assert not np.array_equal(T.random_bits(a, (8,)), T.random_bits(b, (8,)))


def test_fold_in_differs_by_data():
    key = T.seed_key(99)
    folded = {tuple(T.fold_in(key, d).tolist()) for d in range(200)}
    assert len(folded) == 200
    assert T.fold_in(key, 0).tolist() != key.tolist()
    assert T.fold_in(T.seed_key(1), 5).tolist() != T.fold_in(T.seed_key(2), 5).tolist()
    with pytest.raises(ValueError):
        T.fold_in(key, -1)


def test_bad_key_shape_rejected():
    with pytest.raises(ValueError, match="shape"):
        T.split(np.zeros(3, np.uint32))


def test_bits_roughly_uniform():
    bits = T.random_bits(T.seed_key(2024), (100_000,))
    # Byte histogram: chi-square with 255 degrees of freedom has mean 255 and
    # standard deviation ~22.6; 400 is a > 6 sigma bound, so no flakiness
    # (the stream is deterministic anyway).
    counts = np.bincount(bits.view(np.uint8), minlength=256)
    expected = bits.size * 4 / 256
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 400, chi2
    # Every bit position is set about half the time.
    per_bit = ((bits[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(axis=0)
    assert np.all(np.abs(per_bit - 0.5) < 0.01), per_bit


def test_consecutive_counters_decorrelated():
    # Counter-based generators must not leak the counter's structure:
    # outputs for counters i and i+1 should be uncorrelated.
    bits = T.random_bits(T.seed_key(5), (50_000,)).astype(np.float64)
    r = np.corrcoef(bits[:-1], bits[1:])[0, 1]
    assert abs(r) < 0.02, r
