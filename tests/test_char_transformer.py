"""The char-level Transformer example trains: a tiny configuration, a few steps, on a small built-in text.

Eager (``--no-jit``) so that the test does not wait for the step to be
compiled; ``examples/char_transformer.py`` itself runs jitted.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "char_transformer.py")

TEXT = ("def add(a, b):\n    return a + b\n\n\n"
        "def sub(a, b):\n    return a - b\n\n\n"
        "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n\n") * 40


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("char_transformer", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_corpus_and_unigram_entropy(example):
    corpus = example.make_corpus("abcabcab", val_fraction=0.25)
    assert corpus.chars == "abc"
    assert corpus.train.tolist() == [0, 1, 2, 0, 1, 2] and corpus.val.tolist() == [0, 1]
    assert corpus.decode([2, 0]) == "ca"
    assert example.unigram_entropy(corpus.train, 3) == pytest.approx(np.log(3))


def test_tiny_transformer_loss_decreases(example):
    args = example.parse_args(["--steps", "40", "--batch-size", "8", "--seq-len", "32", "--d-model", "32",
                               "--heads", "2", "--layers", "1", "--lr", "1e-2", "--eval-every", "40",
                               "--eval-batches", "2", "--sample-chars", "4", "--no-progress", "--no-jit"])
    corpus = example.make_corpus(TEXT, val_fraction=0.1)
    lines: list[str] = []
    result = example.train(args, corpus, log=lines.append)
    initial, final = result["val_loss"][0], result["val_loss"][-1]
    train = result["train_loss"]
    assert final < initial - 0.5, lines
    assert np.mean(train[-5:]) < np.mean(train[:5]) - 0.5
    assert final < result["unigram_entropy"], lines       # it uses the context
    assert len(result["sample"]) == len(args.sample_prompt) + 4
