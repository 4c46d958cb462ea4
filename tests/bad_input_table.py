"""The bad-input checker shared by the tests/test_bad_inputs*.py tables.

Each ``Case`` is a zero-argument ``call`` that must raise ``error``, whose
message must contain every entry of ``needles`` (plain substrings, or compiled
regexes for ``re.search``): the operation's name, the shapes and dtypes
involved (as ``describe`` writes them, e.g. ``f32[3,1]``) and what was
expected.  The checker also refuses internal exception types (AttributeError,
KeyError, IndexError, AssertionError, numba or pickle errors) unless the row
names that type on purpose, so no bad input leaks an implementation detail.
"""
from __future__ import annotations

import pickle
import re
from collections import namedtuple

import pytest

import funcgrad.numpy as fnp

Case = namedtuple("Case", "id call error needles")

# Exception types that only ever come from inside the implementation: a user
# must never see one of these for a mistake in their own arguments.
INTERNAL = (AttributeError, KeyError, IndexError, AssertionError, pickle.UnpicklingError)


def _is_internal(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return isinstance(exc, INTERNAL) or module.startswith("numba")


def check_raises(case: Case) -> None:
    """``case.call()`` raises ``case.error`` with every needle in its message."""
    with pytest.raises(BaseException) as info:
        case.call()
    exc = info.value
    assert isinstance(exc, case.error), (
        f"expected {case.error.__name__}, got {type(exc).__name__}: {exc}")
    if not (isinstance(case.error, type) and issubclass(case.error, INTERNAL)):
        assert not _is_internal(exc), f"internal {type(exc).__name__} leaked: {exc}"
    msg = str(exc)
    for needle in case.needles:
        if isinstance(needle, re.Pattern):
            assert needle.search(msg), f"{needle.pattern!r} not in message: {msg}"
        else:
            assert needle in msg, f"{needle!r} not in message: {msg}"


def f32(*shape):
    """A float32 funcgrad array of ones (``f32[shape]``)."""
    return fnp.ones(shape, dtype=fnp.float32)



def _i32(*values):
    """An int32 funcgrad array of ``values``."""
    return fnp.array(list(values), dtype=fnp.int32)


def _two(x, y):
    """A two-argument function whose name the jit/grad error rows look for."""
    return fnp.sum(x * y)


def table_tests(cases: list) -> tuple:
    """The two tests every table file runs: each row raises as stated, and row ids are unique."""

    @pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])
    def test_bad_input(case):
        check_raises(case)

    def test_case_ids_are_unique():
        ids = [c.id for c in cases]
        assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)

    return test_bad_input, test_case_ids_are_unique
