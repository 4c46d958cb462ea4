"""``funcgrad.ad_checkpoint``: as ``jax.ad_checkpoint``, rematerialisation and named values.

>>> from funcgrad.ad_checkpoint import checkpoint, checkpoint_name
>>> checkpoint_name(fnp.ones(2), "h")      # the identity, naming its value for the checkpoint policies
Array([1., 1.], dtype=float32)
"""
from funcgrad.api import checkpoint, checkpoint_name, checkpoint_policies, remat

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]
