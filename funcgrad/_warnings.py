"""Warning categories of funcgrad (all exported from ``funcgrad``).

Filter them like any warning::

    import warnings, funcgrad as fg
    warnings.simplefilter("error", fg.RetraceWarning)   # make retraces fail loudly in tests
    warnings.simplefilter("ignore", fg.CacheWarning)
"""
from __future__ import annotations

import warnings


class FuncgradWarning(UserWarning):
    """Base class of funcgrad's warnings.

    >>> issubclass(fg.FuncgradWarning, UserWarning)
    True
    """


class CacheWarning(FuncgradWarning):
    """The kernel cache could not be used as configured and funcgrad worked around it.

    A damaged cache entry was discarded and recompiled, or an unwritable cache
    directory was replaced by a private temporary one.  Results are unaffected;
    only compile time is.

    >>> issubclass(fg.CacheWarning, fg.FuncgradWarning)
    True
    """


class RetraceWarning(FuncgradWarning):
    """A jitted function keeps tracing and compiling again, one argument changing each time.

    >>> issubclass(fg.RetraceWarning, fg.FuncgradWarning)
    True
    """


# numpy reports floating-point trouble (log(-1), 1/0, inf - inf) as RuntimeWarnings attributed to the line
# that called the ufunc: inside funcgrad, a line the user cannot act on. funcgrad's semantics are JAX's (NaN
# and inf flow through silently; ``debug_nans`` finds the first NaN and names the user's line), so these
# warnings are ignored when they come from funcgrad's own modules. The filter matches the module a warning
# is attributed to and numpy's wording, so funcgrad's own RuntimeWarnings still show, and numpy's error
# state and the warnings of the user's own numpy code are untouched (``-W error::RuntimeWarning`` still
# turns those into errors: the filter goes first, so it holds for funcgrad's modules under it too).
#
# ``warnings.catch_warnings`` (pytest runs every test and its collection in one) starts from a copy of the
# filter list and drops what was added inside, so the evaluation paths call ``float_warnings_filtered``:
# an identity check on the list (tens of nanoseconds) that puts the filter back into a new list.
_FUNCGRAD_MODULES = r"funcgrad(\..*)?$"
_NUMPY_FLOAT_ERRORS = r"(invalid value|divide by zero|overflow|underflow) encountered"   # numpy's wording
_filtered_list: list = [None]   # the filter list that holds the filter


def _insert_filter() -> None:
    warnings.filterwarnings("ignore", message=_NUMPY_FLOAT_ERRORS, category=RuntimeWarning,
                            module=_FUNCGRAD_MODULES)
    _filtered_list[0] = warnings.filters


def float_warnings_filtered() -> None:
    """Make sure numpy's floating-point RuntimeWarnings from funcgrad's modules are filtered out (cheap)."""
    if warnings.filters is not _filtered_list[0]:
        _insert_filter()


_insert_filter()
