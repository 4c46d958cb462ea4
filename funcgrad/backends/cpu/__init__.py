"""funcgrad's hand-written numba CPU kernels.

Imported before any of them: numba's cache of these kernels then heals
damaged files and falls back to a private directory when it cannot write
(see :mod:`funcgrad.compiler.kernel_cache`).
"""
from funcgrad.compiler import kernel_cache as _kernel_cache  # noqa: F401
