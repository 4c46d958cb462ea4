"""The kernel cache heals, falls back and stays bounded; jit warns about endless retracing.

Tests that compile or damage kernel caches run in child processes with their
own cache directories (``tmp_path``), so nobody else's cache is touched.  One
tiny kernel serves them all: each numba compile costs ~0.5 s.
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import funcgrad as fg
import funcgrad.numpy as fnp
from funcgrad._config import _bytes
from funcgrad.compiler import codegen, kernel_cache
from conftest import config_set  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A child process: for each cache directory given, load the tiny kernel from it
# (or compile it), check its result against numpy in float64, and report the
# CacheWarnings it saw, as JSON.
_CHILD = textwrap.dedent("""
    import json, os, sys, warnings
    sys.path.insert(0, {repo!r})
    import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
    from funcgrad.compiler import codegen, kernel_cache
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    expected = x.astype(np.float64) * 2 + 1
    report = {{}}
    for directory in json.loads(sys.argv[1]):
        fg.config.update("cache_dir", directory)
        codegen._loaded.clear()   # load from this directory, not from this process
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fg.jit(lambda v: v * 2.0 + 1.0)(x)
            codegen.wait_for_kernels()   # a kernel compiled in the background heals and warns all the same
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)
        report[directory] = [str(w.message) for w in caught if issubclass(w.category, fg.CacheWarning)]
    print(json.dumps(report))
""")


_HAND_WRITTEN = textwrap.dedent("""
    import json, sys, warnings
    sys.path.insert(0, {repo!r})
    import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
    c = (np.arange(8192) % 3) == 0
    x = np.linspace(-1, 1, 8192, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        both = np.asarray(fnp.where(c, x, -x))      # funcgrad.backends.cpu.kernels_select, cached by numba
        scalar = np.asarray(fnp.where(c, x, 0.5))
    assert np.array_equal(both, np.where(c, x, -x)) and np.array_equal(scalar, np.where(c, x, np.float32(0.5)))
    print(json.dumps({{"": [str(w.message) for w in caught if issubclass(w.category, fg.CacheWarning)]}}))
""")


def _child(dirs: list, env: dict | None = None, script: str = _CHILD, umask: int | None = None) -> subprocess.Popen:
    full_env = dict(os.environ)
    full_env.pop("NUMBA_CACHE_DIR", None)
    full_env.update(env or {})
    return subprocess.Popen([sys.executable, "-c", script.format(repo=REPO), json.dumps([str(d) for d in dirs])],
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def _report(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _files(directory) -> dict:
    """name -> path of the kernel cache files under ``directory`` (source and numba's)."""
    found = {}
    for root, _, names in os.walk(directory):
        for name in names:
            found[name] = os.path.join(root, name)
    return found


def _one(files: dict, suffix: str) -> str:
    paths = [p for name, p in files.items() if name.endswith(suffix)]
    assert len(paths) == 1, (suffix, sorted(files))
    return paths[0]


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A kernel cache holding the tiny kernel and its numba files, written under umask 002
    (and, at the same time in a second process, numba's files for two hand-written kernels)."""
    directory = tmp_path_factory.mktemp("warm") / "kernels"
    hand = tmp_path_factory.mktemp("hand")
    hand_env = {"NUMBA_CACHE_DIR": str(hand / "numba"), "FUNCGRAD_CACHE_DIR": str(hand / "kernels")}
    children = [_child([directory], umask=0o002), _child([], hand_env, _HAND_WRITTEN)]
    assert _report(children[0]) == {str(directory): []}
    assert _report(children[1]) == {"": []}
    return directory, hand, hand_env


def _copy(src, dst) -> dict:
    import shutil
    shutil.copytree(src, dst)
    return _files(dst)


def _truncate(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


def _write(data: bytes):
    def damage(path: str) -> None:
        with open(path, "wb") as f:
            f.write(data)
    return damage


# (file damaged, how): every one of these broke every later process before.
_DAMAGE = {
    "py-truncated": (".py", _truncate),
    "py-empty": (".py", _write(b"")),
    "py-garbage": (".py", _write(b"garbage = (\n")),
    "py-other-kernel": (".py", _write(b"def kernel(*args):\n    pass\n")),   # valid Python, wrong content
    "nbi-truncated": (".nbi", _truncate),
    "nbi-empty": (".nbi", _write(b"")),
    "nbc-truncated": (".nbc", _truncate),
    "nbc-empty": (".nbc", _write(b"")),
    "nbc-garbage": (".nbc", _write(bytes(range(256)) * 64)),
}


def test_files_get_the_users_umask(warm):
    files = _files(warm[0])
    assert {name[-4:] for name in files} >= {".nbi", ".nbc"} and any(n.endswith(".py") for n in files)
    for path in files.values():   # written with umask 002: group-writable, as a shared cache needs
        assert os.stat(path).st_mode & 0o777 == 0o664, (path, oct(os.stat(path).st_mode))


def test_damaged_entries_heal_and_warn_once_and_the_cap_holds(warm, tmp_path):
    dirs = {}
    for name, (suffix, damage) in _DAMAGE.items():
        files = _copy(warm[0], tmp_path / name)
        damage(_one(files, suffix))
        dirs[name] = tmp_path / name
    report = _report(_child(list(dirs.values())))
    for name, directory in dirs.items():
        messages = report[str(directory)]
        assert len(messages) == 1 and str(directory) in messages[0] and "discarded" in messages[0], (name, messages)

    # Healed for good: a later process sees no damage and loads the numba files
    # the healing process wrote (it does not compile and write them again).
    stamps = {d: {p: os.stat(p).st_mtime_ns for p in _files(d).values() if not p.endswith(".py")}
              for d in dirs.values()}
    py = {d: _one(_files(d), ".py") for d in dirs.values()}
    for path in py.values():
        os.utime(path, (1_000_000, os.stat(path).st_mtime))   # an old access time
    capped = _capped_cache(tmp_path / "capped")   # meanwhile, another process checks the size cap
    children = [_child(list(dirs.values())), _child([capped[0]], {"FUNCGRAD_CACHE_MAX_BYTES": str(60_000)})]
    report = _report(children[0])
    for name, directory in dirs.items():
        assert report[str(directory)] == [], (name, report[str(directory)])
        assert {p: os.stat(p).st_mtime_ns for p in _files(directory).values() if not p.endswith(".py")} \
            == stamps[directory], name
        assert os.stat(py[directory]).st_atime > 1_000_000 + 1e6, name   # use is recorded (LRU eviction)
    _check_capped(*capped, _report(children[1]))


def test_hand_written_kernels_heal_too(warm):
    # NUMBA_CACHE_DIR put numba's files for the package's kernels in a temporary
    # directory instead of the package's __pycache__, which this test must not damage.
    _, hand, env = warm
    files = _files(hand / "numba")
    index = next(p for n, p in files.items() if "_select_aa" in n and n.endswith(".nbi"))
    data = next(p for n, p in files.items() if "_select_as" in n and n.endswith(".nbc"))
    _truncate(index)
    _truncate(data)
    messages = _report(_child([], env, _HAND_WRITTEN))[""]
    assert len(messages) == 2 and all("discarded" in m for m in messages), messages
    assert any("_select_aa" in m for m in messages) and any("_select_as" in m for m in messages)
    # The rewritten files are whole again.
    with open(index, "rb") as f:
        assert pickle.load(f) is not None and pickle.loads(f.read())
    with open(data, "rb") as f:
        assert pickle.loads(f.read())


_UNWRITABLE = textwrap.dedent("""
    import json, os, shutil, sys, warnings
    sys.path.insert(0, {repo!r})
    import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
    from funcgrad.compiler import codegen, kernel_cache
    under_file, denied = json.loads(sys.argv[1])
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    x64 = x.astype(np.float64)
    report = {{}}

    def run(tag):
        codegen._loaded.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = fg.jit(lambda v: v * 2.0 + 1.0)(x)
            b = fg.jit(lambda v: v * 3.0 - 1.0)(x)     # a second kernel: still one warning
            codegen.wait_for_kernels()                 # compiled in the background: within the block
        np.testing.assert_allclose(np.asarray(a), x64 * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(b), x64 * 3 - 1, rtol=1e-5)
        report[tag] = {{"dir": kernel_cache.cache_dir(),
                        "warnings": [str(w.message) for w in caught if issubclass(w.category, fg.CacheWarning)]}}

    run("home")                                   # HOME is a regular file: no default directory
    fg.config.update("cache_dir", under_file)     # a path under a regular file
    run("under_file")
    fg.config.update("cache_dir", denied)         # a directory that refuses writes
    real_open = open
    def refusing_open(path, mode="r", *args, **kwargs):
        if str(path).startswith(denied) and any(c in mode for c in "wxa+"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, mode, *args, **kwargs)
    kernel_cache.open = refusing_open
    run("denied")
    del kernel_cache.open
    private = kernel_cache.cache_dir()
    shutil.rmtree(private)
    real_open(private, "w").close()               # the private directory gone, a file in its place
    run("memory")
    report["private"] = private
    print(json.dumps(report))
""")


def test_unwritable_directories_fall_back_with_one_warning(tmp_path):
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    env = {"HOME": str(home), "FUNCGRAD_CACHE_DIR": ""}
    env_without_xdg = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    p = subprocess.Popen([sys.executable, "-c", _UNWRITABLE.format(repo=REPO),
                          json.dumps([str(home / "kernels"), str(tmp_path / "denied")])],
                         env=dict(env_without_xdg, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    report = _report(p)
    private = report.pop("private")
    try:
        for tag, expected_name in [("home", str(home)), ("under_file", str(home / "kernels")),
                                   ("denied", str(tmp_path / "denied"))]:
            messages = report[tag]["warnings"]
            assert len(messages) == 1 and expected_name in messages[0] and "not usable" in messages[0], (tag, messages)
            assert report[tag]["dir"] == private
        assert report["memory"]["dir"] is None and len(report["memory"]["warnings"]) == 1
        assert "memory" in report["memory"]["warnings"][0]
    finally:
        if os.path.isfile(private):
            os.unlink(private)
    assert not os.path.exists(private) and not os.listdir(tmp_path / "denied")


def test_read_only_install_and_home_still_cache_hand_written_kernels(tmp_path):
    # A copy of the package whose __pycache__ directories cannot be made (a file
    # holds each name) and a HOME that is a file: numba alone refuses to define
    # the package's cached kernels ("no locator available").
    import shutil
    package = tmp_path / "site" / "funcgrad"
    shutil.copytree(os.path.join(REPO, "funcgrad"), package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder, _, _ in os.walk(package):
        open(os.path.join(folder, "__pycache__"), "w").close()
    home = tmp_path / "home"
    home.write_text("")
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(tmp_path / "site"),
               FUNCGRAD_CACHE_DIR=str(tmp_path / "kernels"))
    for name in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR"):
        env.pop(name, None)
    script = textwrap.dedent(f"""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:   # the kernels are defined at import
            warnings.simplefilter("always")
            import numpy as np, funcgrad as fg, funcgrad.numpy as fnp
            assert fg.__file__.startswith({str(package)!r}), fg.__file__
            c = (np.arange(8192) % 3) == 0
            x = np.linspace(-1, 1, 8192, dtype=np.float32)
            assert np.array_equal(np.asarray(fnp.where(c, x, -x)), np.where(c, x, -x))
        print(json.dumps({{"": [str(w.message) for w in caught if issubclass(w.category, fg.CacheWarning)]}}))
    """)
    p = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    messages = _report(p)[""]
    assert len(messages) == 1 and "private temporary directory" in messages[0] and "NUMBA_CACHE_DIR" in messages[0]


# ------------------------------------------------------------------ size cap


def _fake_entry(directory, digest: str, used: float, sizes=(1000, 500, 20000)) -> list:
    """An entry shaped like a real one (source, numba index and data), last used at ``used``."""
    os.makedirs(directory / "__pycache__", exist_ok=True)
    paths = [directory / f"fg_{digest}.py", directory / "__pycache__" / f"fg_{digest}.kernel-8.py311.nbi",
             directory / "__pycache__" / f"fg_{digest}.kernel-8.py311.1.nbc"]
    for path, size in zip(paths, sizes):
        path.write_bytes(b"x" * size)
        os.utime(path, (used, used))
    return paths


def test_eviction_deletes_least_recently_used_whole_entries(tmp_path):
    now = time.time()
    entries = {f"{i:024x}": _fake_entry(tmp_path, f"{i:024x}", now - 1000 * (10 - i)) for i in range(5)}
    entry_bytes = 21500
    with config_set("cache_max_bytes", 3 * entry_bytes):   # 5 entries: evict down to 80% of 3
        freed = kernel_cache.evict(str(tmp_path), keep=f"{0:024x}")
    # Oldest first, whole entries, never `keep` (the oldest here): 1, 2 and 3 go.
    gone = [d for d, paths in entries.items() if not any(p.exists() for p in paths)]
    kept = [d for d, paths in entries.items() if all(p.exists() for p in paths)]
    assert gone == [f"{i:024x}" for i in (1, 2, 3)] and kept == [f"{i:024x}" for i in (0, 4)]
    assert freed == 3 * entry_bytes
    with config_set("cache_max_bytes", 0):   # 0: no cap
        assert kernel_cache.evict(str(tmp_path)) == 0


def _capped_cache(directory) -> tuple:
    """Five old entries of 21.5 kB; with a 60 kB cap, writing one more must evict the three oldest."""
    now = time.time()
    return directory, [_fake_entry(directory, f"{i:024x}", now - 1000 * (10 - i)) for i in range(5)]


def _check_capped(directory, fakes: list, report: dict) -> None:
    assert report == {str(directory): []}
    assert [all(p.exists() for p in paths) for paths in fakes] == [False, False, False, True, True]
    assert not any(p.exists() for paths in fakes[:3] for p in paths)
    real = [n for n in _files(directory) if n.startswith("fg_") and not n.startswith("fg_0000")]
    assert any(n.endswith(".py") for n in real) and any(n.endswith(".nbc") for n in real)


def test_cache_options_parse_byte_counts():
    assert [_bytes(v, "t") for v in (0, 123, "512M", "2G", "1GiB", np.int64(7))] == [0, 123, 512 << 20, 2 << 30,
                                                                                     1 << 30, 7]
    for bad in (-1, 1.5, "lots", True, ""):
        with pytest.raises(ValueError, match="byte count"):
            _bytes(bad, "t")
    with config_set("cache_max_bytes", "64M"):
        assert fg.config.cache_max_bytes == 64 << 20
    with pytest.raises(ValueError, match="cache_max_bytes"):
        fg.config.update("cache_max_bytes", -5)


def test_source_writes_are_atomic_and_detect_damage(tmp_path):
    path = str(tmp_path / "fg_0123.py")
    source = "def kernel():\n    return 1\n"
    assert kernel_cache._ensure_source(path, source) is True
    assert kernel_cache._ensure_source(path, source) is False      # present and right: untouched
    with open(path, "w") as f:
        f.write(source[:5])
    with pytest.warns(fg.CacheWarning, match="damaged"):
        assert kernel_cache._ensure_source(path, source) is True
    with open(path) as f:
        assert f.read() == source
    assert os.listdir(tmp_path) == ["fg_0123.py"]                  # no temporary left behind


def test_in_process_kernel_table_is_bounded(monkeypatch):
    from funcgrad.compiler.codegen import KernelSpec, Op
    from funcgrad.primitives.elementwise import add_p
    codegen.wait_for_kernels()   # no background load of an earlier test's kernel meets the fake loader below
    monkeypatch.setattr(codegen, "_loaded", type(codegen._loaded)())
    monkeypatch.setattr(codegen, "MAX_LOADED", 4)
    monkeypatch.setattr(kernel_cache, "load_kernel", lambda digest, source: (lambda *a: digest))
    f32 = np.dtype(np.float32)
    for c in range(10):
        spec = KernelSpec([("a", "[i, j]", f32)], [Op("b", add_p, ["a", float(c)], f32)], ["b"], None, False)
        codegen.compile_kernel(spec)
    assert len(codegen._loaded) == 4


# ------------------------------------------------------------------ jit tables and retracing


@pytest.mark.filterwarnings("ignore::funcgrad.RetraceWarning")
def test_jit_signature_tables_stay_bounded_and_fast():
    with config_set("jit_fusion", False):
        f = fg.jit(lambda a: a * 2.0, cache_size=3)
        for n in range(1, 11):
            np.testing.assert_allclose(np.asarray(f(fnp.ones(n))), np.full(n, 2.0))
        assert len(f._cache) == 3 and len(f._fast) == 3
        # The kept signatures stay on the fast path after evictions.
        kept = {tuple(k[1]) for k in f._cache}
        # fast keys: (debug_nans, jit_fusion, threefry_partitionable, (shape, dtype) per argument...)
        assert {tuple(k[3:]) for k in f._fast} == {tuple((s, d) for s, d in sig) for sig in kept}
        hits = f.hits
        f(fnp.ones(10))
        assert f.hits == hits + 1 and f.misses == 10


def _misses_warnings(f, calls) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args, kwargs in calls:
            f(*args, **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, fg.RetraceWarning)]


def test_retrace_warning_names_a_changing_static_argument():
    with config_set("jit_fusion", False):
        f = fg.jit(lambda x, scale: x * scale, static_argnums=1)
        x = fnp.ones(3)
        assert _misses_warnings(f, [((x, 0.5 + i), {}) for i in range(8)]) == []     # 8 retraces: fine
        messages = _misses_warnings(f, [((x, 10.5 + i), {}) for i in range(10)])
        assert len(messages) == 1 and "argument 1" in messages[0] and "static value" in messages[0]
        assert "argument 0" not in messages[0]
        assert _misses_warnings(f, [((x, 100.5 + i), {}) for i in range(10)]) == []  # once per function
    assert issubclass(fg.RetraceWarning, UserWarning)


def test_retrace_warning_names_shape_and_dtype_changes():
    with config_set("jit_fusion", False):
        f = fg.jit(lambda w, x: x + w)
        w = fnp.ones(())
        messages = _misses_warnings(f, [((w, fnp.ones(n)), {}) for n in range(1, 11)])
        assert len(messages) == 1 and "argument 1 (shape" in messages[0] and "argument 0" not in messages[0]
        g = fg.jit(lambda x, *, scale: x * scale, static_argnames="scale")
        messages = _misses_warnings(g, [((fnp.ones(2),), {"scale": s}) for s in range(10)])
        assert len(messages) == 1 and "keyword argument 'scale' (static value" in messages[0]
        d = fg.jit(lambda x: x + 1)
        dtypes = ["float32", "int32", "uint32", "bool", "float16", "int8", "uint8", "int16", "uint16"]
        messages = _misses_warnings(d, [((fnp.ones(2, dtype=t),), {}) for t in dtypes])
        assert len(messages) == 1 and "argument 0 (dtype: float32[2], int32[2]" in messages[0]
        h = fg.jit(lambda x: x + 1, cache_size=2)
        messages = _misses_warnings(h, [((fnp.ones(n),), {}) for _ in range(4) for n in (1, 2, 3)])
        assert len(messages) == 1 and "cache_size=2" in messages[0]
