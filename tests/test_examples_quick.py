"""Every example runs from the command line: ``--quick`` (seconds, tiny sizes) as a subprocess, one-line errors for
bad paths and arguments, and help texts that state each default without contradicting themselves.

The examples' training is tested in-process elsewhere (test_examples_control_flow.py, test_char_transformer.py,
test_mnist_training.py); here the scripts as a user runs them. The text and ODE examples run ``--quick --no-jit``:
compiling their steps costs 15-45 s of CPU on a cold kernel cache, and the jitted loops are tested in
test_control_flow.py; mnist.py always compiles its (small) step.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from funcgrad import datasets

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NAMES = ["char_rnn", "char_transformer", "neural_ode", "mnist"]


def _run(name: str, *args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    environment.update(env or {})
    return subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), *args], capture_output=True, text=True,
                          env=environment, timeout=timeout, cwd=str(ROOT))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"quick_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _mnist_available() -> bool:
    try:
        datasets.mnist()
    except datasets.DatasetError:
        return False
    return True


# ----------------------------------------------------------------------------- --quick, as a user runs it


def test_char_rnn_quick():
    done = _run("char_rnn", "--quick", "--no-jit")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "step 30: train" in done.stdout and "trained 30 steps" in done.stdout, done.stdout
    assert "GRU hidden 32, windows of 32 x batch 8" in done.stdout


def test_char_transformer_quick_and_its_one_line_errors(tmp_path):
    done = _run("char_transformer", "--quick", "--no-jit", "--no-progress", "--steps", "2", "--eval-every", "2",
                "--sample-chars", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "D=32, 2 heads, T=32" in done.stdout and "trained 2 steps" in done.stdout, done.stdout[-2000:]
    missing = _run("char_transformer", "--text", str(tmp_path / "missing.txt"))
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert missing.stderr.strip() == f"error: --text {tmp_path / 'missing.txt'}: No such file or directory"
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    bad = _run("char_transformer", "--text", str(binary))
    assert bad.returncode != 0 and bad.stderr.strip().startswith(f"error: --text {binary}: not UTF-8 text")
    short = tmp_path / "short.txt"
    short.write_text("abc")
    tiny = _run("char_transformer", "--text", str(short))
    assert tiny.returncode != 0 and "needs at least 130" in tiny.stderr and "Traceback" not in tiny.stderr


def test_neural_ode_quick():
    done = _run("neural_ode", "--quick", "--no-jit")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "step 10: loss" in done.stdout and "test error" in done.stdout, done.stdout
    assert sum(line.count("MiB") == 2 for line in done.stdout.splitlines()) == 1, done.stdout   # one memory row


@pytest.mark.skipif(not _mnist_available(), reason="MNIST data is not here (python -m funcgrad.datasets mnist)")
def test_mnist_quick_without_tqdm_prints_plain_progress(tmp_path):
    # A stand-in package named tqdm that fails to import, as when the examples extra is not installed.
    shadow = tmp_path / "shadow" / "tqdm"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('tqdm is not installed')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(ROOT)])}
    done = _run("mnist", "--quick", "--out", str(tmp_path / "out"), env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert "compiling the training step..." in lines, lines
    assert any(line.startswith("compiled the training step in ") for line in lines), lines
    assert "epoch 1/1: 7/7 batches, loss " in done.stdout, lines           # 1,000 images in batches of 128
    assert any(line.startswith("epoch 1/1: train loss") and "(500 images)" in line for line in lines), lines
    assert (tmp_path / "out" / "params.safetensors").is_file() and (tmp_path / "out" / "metrics.json").is_file()


# ----------------------------------------------------------------------------- arguments and help


@pytest.mark.parametrize("name", NAMES)
def test_help_states_defaults_without_contradictions(name, capsys):
    module = _load(name)
    with pytest.raises(SystemExit) as exit_:
        module.parse_args(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--quick" in text
    assert "--no-jit (default: True)" not in text and "--no-progress (default: True)" not in text
    assert "(default: None)" not in text
    for boolean in ("jit", "progress"):
        if f"--no-{boolean}" in text:
            assert f"--{boolean}, --no-{boolean}" in text       # one switch, both spellings, one default


@pytest.mark.parametrize("name", NAMES)
def test_quick_sets_tiny_sizes_and_explicit_options_win(name):
    module = _load(name)
    quick = module.parse_args(["--quick"])
    full = module.parse_args([])
    first = next(iter(module.QUICK))
    assert getattr(quick, first) != getattr(full, first)
    for key, value in module.QUICK.items():
        assert getattr(quick, key) == value, key
    if name == "mnist":
        assert module.parse_args(["--quick", "--epochs", "2"]).epochs == 2
    else:
        assert module.parse_args(["--quick", "--steps", "3"]).steps == 3


@pytest.mark.parametrize("name, args, message", [
    ("mnist", ["--limit-train", "0"], "--limit-train must be positive, got 0"),
    ("mnist", ["--lr", "-1"], "--lr must be positive"),
    ("mnist", ["--out", str(ROOT / "README.md")], "exists and is not a directory"),
    ("char_rnn", ["--temperature", "0"], "--temperature and --lr must be positive"),
    ("char_transformer", ["--max-chars", "0"], "--max-chars must be positive, got 0"),
    ("char_transformer", ["--d-model", "30", "--heads", "4"], "must be divisible by --heads 4"),
    ("neural_ode", ["--lr", "0"], "--lr must be positive, got 0"),
])
def test_bad_arguments_are_one_line_errors(name, args, message, capsys):
    module = _load(name)
    with pytest.raises(SystemExit) as exit_:
        module.parse_args(args)
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in last, last
