"""The documentation site builds without a warning, and the Python snippets of the README and of every page
under docs/ run as pasted.

On a page, the ```python blocks run in order in one namespace (as a reader pastes them one after the other). A
block that cannot run in CI (it needs a GPU, mpiexec, a download or minutes of training) has the marker
``<!-- no-run: <reason> -->`` on the line before its fence: it is only compiled.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_docs_site_builds_strictly(tmp_path):
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONWARNINGS="ignore::DeprecationWarning")
    r = subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(tmp_path / "site")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "numpy" / "index.html").read_text()
    assert 'id="funcgrad.numpy.sum"' in api        # the reference is generated from the package


def _python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_python_blocks(ROOT / "README.md"))))
def test_readme_snippet_runs(index):
    code = _python_blocks(ROOT / "README.md")[index]
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"README snippet {index} failed:\n{code}\n{r.stderr[-3000:]}"


NO_RUN = "<!-- no-run:"
_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def _page_blocks(path: pathlib.Path) -> list[tuple[int, str, bool]]:
    """``(line, source, runs)`` for every ```python block of a markdown page."""
    text = path.read_text()
    blocks = []
    for m in _BLOCK.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        blocks.append((text.count("\n", 0, m.start()) + 1, m.group(1), not before.strip().startswith(NO_RUN)))
    return blocks


PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md") if _page_blocks(p))


@pytest.mark.parametrize("page", PAGES)
def test_docs_page_snippets_run(page, monkeypatch, tmp_path):
    """The page's blocks run in order in one fresh namespace, in this process (funcgrad imported once), in an
    empty working directory (files a snippet writes never land in the repository)."""
    import funcgrad as fg
    monkeypatch.chdir(tmp_path)
    saved = {name: getattr(fg.config, name) for name in ("enable_x64", "debug_nans", "disable_jit")}
    namespace = {"__name__": "__main__"}
    try:
        for line, src, runs in _page_blocks(ROOT / page):
            code = compile(src, f"{page}:{line}", "exec")      # a no-run block must still be valid Python
            if runs:
                try:
                    exec(code, namespace)
                except Exception as e:
                    raise AssertionError(f"{page}: the block at line {line} failed: {type(e).__name__}: {e}") from e
    finally:
        for name, value in saved.items():
            fg.config.update(name, value)


def test_no_run_marker_is_found():
    blocks = _page_blocks_from_text("<!-- no-run: needs a GPU -->\n```python\nx = 1\n```\n```python\ny = 2\n```\n")
    assert [runs for _, _, runs in blocks] == [False, True]


def _page_blocks_from_text(text: str) -> list[tuple[int, str, bool]]:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "page.md"
        path.write_text(text)
        return _page_blocks(path)
