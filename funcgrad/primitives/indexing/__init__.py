"""Indexing and joining primitives: ``getitem`` (gather), the scatters (its transposes among them),
and ``concatenate``, ``pad``, ``flip``.

* ``normalize.py``: numpy-style indices split into a static template and index-array operands, and
  the out-of-bounds modes (clip, fill/drop, wrap, checked);
* ``gather.py``: the getitem primitive, ``getitem``/``static_slice``, concatenate, pad, flip, and
  ``batch_by_loop``;
* ``scatter.py``: scatter_set/add/max/min/mul, ``scatter_combine``, and getitem's transpose.

Every name is importable from here, as ``funcgrad.primitives.indexing.<name>``.
"""
from __future__ import annotations

from funcgrad.primitives.indexing.gather import (batch_by_loop, concatenate_p, flip_p, getitem, getitem_p, pad_p,
                                                 static_slice)
from funcgrad.primitives.indexing.normalize import (GATHER_MODES, SCATTER_MODES, _fill_scalar, _item_axes,
                                                    build_index, fill_value_for, normalize_indices, split_index)
from funcgrad.primitives.indexing.scatter import (_target_shape, scatter_add, scatter_add_p, scatter_combine,
                                                  scatter_max, scatter_max_p, scatter_min, scatter_min_p,
                                                  scatter_mul_p, scatter_set, scatter_set_p)

__all__ = [
    "GATHER_MODES", "SCATTER_MODES", "batch_by_loop", "build_index", "concatenate_p", "fill_value_for", "flip_p",
    "getitem", "getitem_p", "normalize_indices", "pad_p", "scatter_add", "scatter_add_p", "scatter_combine",
    "scatter_max", "scatter_max_p", "scatter_min", "scatter_min_p", "scatter_mul_p", "scatter_set",
    "scatter_set_p", "split_index", "static_slice",
]
