"""Static checks: ruff (the rules in pyproject.toml's [tool.ruff]) and the pyright type checker.

* ``ruff check funcgrad tests benchmarks examples`` is clean;
* pyright ([tool.pyright]) is clean on typical user code (tests/typing/user_code.py, standard mode) and on
  the public modules it includes (basic mode), and it does catch a user's type error (so a clean run means
  something); tests/typing/user_code.py also runs.

Both tools come with the ``test`` extra; without them these tests skip and say so.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _tool(name: str) -> list[str]:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' brings it)")
    return [sys.executable, "-m", name]


def _run(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_ruff_is_clean():
    proc = _run(_tool("ruff") + ["check", "--no-cache", "funcgrad", "tests", "benchmarks", "examples"])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pyright_is_clean_on_user_code_and_the_public_modules():
    proc = _run(_tool("pyright") + ["--pythonpath", sys.executable])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 errors" in proc.stdout


def test_pyright_catches_a_type_error_in_user_code():
    # The same checker and signatures must reject wrong code, or a clean run proves nothing.
    bad = ROOT / "tests" / "typing" / "_wrong_code_for_test.py"
    bad.write_text("# pyright: standard\n"
                   "import funcgrad.numpy as fnp\n"
                   "from funcgrad.typing import Array\n"
                   "total: int = fnp.sum(fnp.ones(3))\n"               # an Array is not an int
                   "fnp.ones(3).no_such_method()\n"                     # Array has no such method
                   "fnp.sum(fnp.ones(3), axis='rows')\n"                # axis is an int or ints
                   "good: Array = fnp.mean(fnp.ones(3), axis=(0,))\n")   # and right code passes
    try:
        proc = _run(_tool("pyright") + ["--pythonpath", sys.executable, str(bad)])
    finally:
        bad.unlink()
    out = proc.stdout
    assert proc.returncode != 0
    assert '"Array" is not assignable to declared type "int"' in out
    assert 'Cannot access attribute "no_such_method" for class "Array"' in out
    assert "axis" in out and 'Literal[\'rows\']' in out
    assert ":7:" not in out        # the correct line raised nothing
    assert "3 errors" in out


def test_user_code_runs():
    proc = _run([sys.executable, str(ROOT / "tests" / "typing" / "user_code.py")])
    assert proc.returncode == 0, proc.stderr[-3000:]
