"""Counting the Python calls one call of a function makes (the overhead tests of eager and jitted calls)."""
import sys
from collections import Counter

import numpy as np

import funcgrad.numpy as fnp


def _python_calls(f, *args):
    """(result, Counter of (file name, function name) -> Python calls) of one call of ``f``."""
    counts: Counter = Counter()

    def profile(frame, event, arg):
        if event == "call":
            counts[frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name] += 1

    sys.setprofile(profile)
    try:
        out = f(*args)
    finally:
        sys.setprofile(None)
    return out, counts


def _tiny():
    x64 = np.linspace(-1.0, 1.0, 10)
    return fnp.array(x64.astype(np.float32)), np.cos(x64) * x64 + np.sin(x64)
