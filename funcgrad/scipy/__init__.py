"""``funcgrad.scipy``: the parts of scipy's API that JAX offers, over funcgrad's primitives."""
from funcgrad.scipy import linalg, special, stats

__all__ = ["linalg", "special", "stats"]
