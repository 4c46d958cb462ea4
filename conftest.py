"""Names every docstring example may use without importing them (``pytest --doctest-modules funcgrad``).

The package's docstring examples run as doctests in the normal test run (``testpaths`` in pyproject.toml), with
``NORMALIZE_WHITESPACE``, ``ELLIPSIS`` and ``NUMBER`` (floats compare to the precision written).
"""
import pytest

# Not collected (``--doctest-modules`` would import them): modules that cannot be imported on a machine
# without an NVIDIA GPU and CuPy/Triton, and scripts that run when imported (the MPI programs that tests
# start under mpiexec, the user code that the type checker reads).
collect_ignore_glob = ["funcgrad/backends/gpu/*", "tests/mpi/*", "tests/typing/*",
                       "tests/op_table.py", "tests/op_rows_*.py"]   # the op table: imported by test_ops.py


@pytest.fixture(autouse=True)
def _doctest_names(request):
    """``np``, ``fg``, ``fnp``, ``lax``, ``nn``, ``optim``, ``random``, ``jit``, ``grad``, ... for doctests."""
    if not isinstance(request.node, pytest.DoctestItem):
        yield
        return
    import numpy as np

    import funcgrad as fg
    import funcgrad.numpy as fnp
    from funcgrad import lax, nn, optim, random, scipy

    namespace = request.getfixturevalue("doctest_namespace")
    namespace.update(np=np, fg=fg, fnp=fnp, lax=lax, nn=nn, optim=optim, random=random, scipy=scipy,
                     jit=fg.jit, grad=fg.grad, vmap=fg.vmap, jvp=fg.jvp, vjp=fg.vjp)
    x64 = fg.config.enable_x64          # the examples show the default (float32) results, whatever the environment
    fg.config.update("enable_x64", False)
    try:
        yield
    finally:
        fg.config.update("enable_x64", x64)
