"""Shared fixtures for funcgrad's tests.

* ``x64``: float64 enabled for the duration of one test (restored after).
* ``x32``: float64 disabled for one test (the default, made explicit).
* ``debug_nans``: NaN checking enabled for one test.
* ``rng``: a seeded numpy Generator, so every test is reproducible.
* Hypothesis profiles: ``funcgrad`` (the default: derandomized, so CI sees the
  same examples every run; no deadline, no example database) and ``thorough``
  (many random examples), chosen by ``FUNCGRAD_HYPOTHESIS_PROFILE``.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest

import funcgrad as fg
from hypothesis import settings

settings.register_profile("funcgrad", max_examples=30, deadline=None, derandomize=True, database=None,
                          print_blob=True)
settings.register_profile("thorough", max_examples=1000, deadline=None, database=None)
settings.load_profile(os.environ.get("FUNCGRAD_HYPOTHESIS_PROFILE", "funcgrad"))


@contextlib.contextmanager
def config_set(name: str, value):
    """``fg.config.<name>`` set to ``value`` inside the block, restored after."""
    old = getattr(fg.config, name)
    fg.config.update(name, value)
    try:
        yield
    finally:
        fg.config.update(name, old)


@pytest.fixture
def x64():
    """float64 arrays stay float64 for this test (as ``FUNCGRAD_ENABLE_X64=1``)."""
    with config_set("enable_x64", True):
        yield


@pytest.fixture
def x32():
    """The default: 64-bit inputs are narrowed to 32 bits for this test."""
    with config_set("enable_x64", False):
        yield


@pytest.fixture
def debug_nans():
    with config_set("debug_nans", True):
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
