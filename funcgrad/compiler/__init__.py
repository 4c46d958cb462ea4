"""The jit compiler: IR passes, fusion into generated numba kernels, and the run-time program."""
