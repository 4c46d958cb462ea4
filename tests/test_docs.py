"""The documentation site builds without a warning, and the README's Python snippets run as pasted."""
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
