"""Shared fixtures for funcgrad's tests.

* ``x64``: float64 enabled for the duration of one test (restored after).
* ``x32``: float64 disabled for one test (the default, made explicit).
* ``debug_nans``: NaN checking enabled for one test.
* ``rng``: a seeded numpy Generator, so every test is reproducible.
"""
from __future__ import annotations

import numpy as np
import pytest

import funcgrad as fg


def _set_flag(name: str, value: bool):
    old = getattr(fg.config, name)
    fg.config.update(name, value)
    return old


@pytest.fixture
def x64():
    """float64 arrays stay float64 for this test (as ``FUNCGRAD_ENABLE_X64=1``)."""
    old = _set_flag("enable_x64", True)
    try:
        yield
    finally:
        fg.config.update("enable_x64", old)


@pytest.fixture
def x32():
    """The default: 64-bit inputs are narrowed to 32 bits for this test."""
    old = _set_flag("enable_x64", False)
    try:
        yield
    finally:
        fg.config.update("enable_x64", old)


@pytest.fixture
def debug_nans():
    old = _set_flag("debug_nans", True)
    try:
        yield
    finally:
        fg.config.update("debug_nans", old)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
