"""Warning categories of funcgrad (all exported from ``funcgrad``).

Filter them like any warning::

    import warnings, funcgrad as fg
    warnings.simplefilter("error", fg.RetraceWarning)   # make retraces fail loudly in tests
    warnings.simplefilter("ignore", fg.CacheWarning)
"""
from __future__ import annotations


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
