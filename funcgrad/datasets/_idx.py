"""The idx file format (MNIST's): parse, load, serialise and save.

>>> from funcgrad.datasets import idx_bytes, parse_idx
>>> parse_idx(idx_bytes(np.arange(6, dtype=np.uint8).reshape(2, 3))).shape
(2, 3)
"""

from __future__ import annotations

import gzip
import os
import struct
import tempfile
from pathlib import Path

import numpy as np


class DatasetError(Exception):
    """Base class for every error raised by funcgrad.datasets.

    >>> try:
    ...     parse_idx(b"")
    ... except DatasetError as e:
    ...     print(e)
    <bytes>: truncated idx file (0 bytes, no header)
    """


class IdxFormatError(DatasetError, ValueError):
    """An idx file is malformed (bad magic, truncated, trailing bytes...).

    >>> parse_idx(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8]), "labels.idx")    # 3 entries announced, 2 present
    Traceback (most recent call last):
    funcgrad.datasets._idx.IdxFormatError: labels.idx: truncated idx file: shape (3,) needs 3 data bytes, found 2
    """



# --------------------------------------------------------------------------
# idx format
# --------------------------------------------------------------------------

# idx type codes (third magic byte) -> big-endian numpy dtype.
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {dt.newbyteorder("="): code for code, dt in _IDX_DTYPES.items()}


def _read_bytes(path) -> bytes:
    """Return the raw (decompressed if ``*.gz``) content of ``path``."""
    path = Path(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        # A truncated gzip stream raises EOFError, garbage raises
        # BadGzipFile; neither names the file, so wrap them.
        if isinstance(exc, FileNotFoundError):
            raise
        raise IdxFormatError(f"{path}: cannot read/decompress file ({exc})") from exc


def parse_idx(data: bytes, name: str = "<bytes>", expected_magic: int | None = None) -> np.ndarray:
    """Parse the bytes of an idx file into a numpy array (native byte order).

    Raises ``IdxFormatError`` naming ``name`` on a bad magic number, a
    truncated payload or trailing garbage.  The returned array may be a
    read-only view of ``data``.

    >>> parse_idx(bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9]))   # uint8 (code 8), 1 dimension of 3; then 7, 8, 9
    array([7, 8, 9], dtype=uint8)
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"parse_idx: data must be the bytes of an idx file, got {type(data).__name__}; "
                        "for a file on disk use load_idx(path)")
    data = bytes(data)
    if len(data) < 4:
        raise IdxFormatError(f"{name}: truncated idx file ({len(data)} bytes, no header)")
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    magic = struct.unpack(">I", data[:4])[0]
    if zero != 0 or code not in _IDX_DTYPES or ndim == 0:
        raise IdxFormatError(
            f"{name}: bad idx magic number {magic} (0x{magic:08x}); "
            "not an idx file (is it still compressed, or a different format?)"
        )
    if expected_magic is not None and magic != expected_magic:
        raise IdxFormatError(f"{name}: bad idx magic number {magic}, expected {expected_magic}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IdxFormatError(f"{name}: truncated idx header ({len(data)} bytes, need {header})")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(data) - header
    if got < expected:
        raise IdxFormatError(
            f"{name}: truncated idx file: shape {shape} needs {expected} data bytes, found {got}"
        )
    if got > expected:
        raise IdxFormatError(
            f"{name}: {got - expected} unexpected trailing bytes after idx data of shape {shape}"
        )
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    # uint8/int8 have no byte order; otherwise convert to native for callers.
    return arr if dtype.itemsize == 1 else arr.astype(dtype.newbyteorder("="))


def load_idx(path, expected_magic: int | None = None) -> np.ndarray:
    """Load an idx file (``.gz`` or plain, chosen by suffix) as a numpy array.

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = save_idx(pathlib.Path(d) / "x.idx.gz", np.arange(6, dtype=np.int32).reshape(2, 3))
    ...     load_idx(path)
    array([[0, 1, 2],
           [3, 4, 5]], dtype=int32)
    """
    return parse_idx(_read_bytes(path), str(path), expected_magic)


def idx_bytes(array) -> bytes:
    """Serialise ``array`` to the bytes of an idx file (big-endian).

    >>> list(idx_bytes(np.array([7, 8, 9], np.uint8)))     # magic (uint8, 1 dimension), the size 3, the data
    [0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9]
    """
    array = np.asarray(array)
    native = array.dtype.newbyteorder("=")
    if native not in _IDX_CODES:
        supported = ", ".join(str(dt.newbyteorder("=")) for dt in _IDX_DTYPES.values())
        raise TypeError(f"idx_bytes: idx cannot store dtype {array.dtype} (supported: {supported}); "
                        "convert with array.astype(...) first")
    if array.ndim == 0 or array.ndim > 255:
        raise ValueError(f"idx_bytes: idx needs 1..255 dimensions, got {array.ndim}")
    code = _IDX_CODES[native]
    header = struct.pack(">HBB", 0, code, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    payload = np.ascontiguousarray(array, dtype=_IDX_DTYPES[code]).tobytes()
    return header + payload


def save_idx(path, array, compress: bool | None = None) -> Path:
    """Write ``array`` as an idx file; gzip it when ``compress`` (default:
    when ``path`` ends with ``.gz``).  The write is atomic (temp + rename) so
    an interrupted write never leaves a half file in a cache directory.

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = save_idx(pathlib.Path(d) / "labels.idx", np.array([7, 8, 9], np.uint8))
    ...     path.name, path.read_bytes() == idx_bytes(np.array([7, 8, 9], np.uint8))
    ('labels.idx', True)
    """
    path = Path(path)
    if compress is None:
        compress = path.name.endswith(".gz")
    data = idx_bytes(array)
    if compress:
        # mtime=0 makes the gzip bytes reproducible.
        data = gzip.compress(data, compresslevel=6, mtime=0)
    _atomic_write(path, data)
    return path


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

