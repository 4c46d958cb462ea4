"""The optimizer interface: a pair of pure functions, and how to combine them.

An optimizer (a *gradient transformation*) never mutates anything: ``init``
builds a state from the parameters, ``update`` maps gradients and a state to
updates and a *new* state.  States are NamedTuples of pytrees of arrays, so
they are pytrees themselves: they pass through ``jit``, ``vmap`` and
checkpoints like parameters do.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

import funcgrad.numpy as fnp
from funcgrad import dtypes as _dtypes
from funcgrad.core import Array, Tracer, describe
from funcgrad.lax import convert_element_type as convert
from funcgrad.tree_util import all_leaves, tree_flatten, tree_map

PyTree = Any
Params = PyTree
Updates = PyTree
OptState = Any


class GradientTransformation(NamedTuple):
    """``init(params) -> state``; ``update(grads, state, params=None) -> (updates, new_state)``.

    >>> opt = optim.sgd(0.1)
    >>> params, grads = {"w": fnp.ones(2)}, {"w": fnp.array([1.0, -2.0])}
    >>> state = opt.init(params)                       # any pytree of arrays
    >>> updates, state = opt.update(grads, state, params)
    >>> optim.apply_updates(params, updates)           # params + updates
    {'w': Array([0.9, 1.2], dtype=float32)}
    """

    init: Callable[[Params], OptState]
    update: Callable[..., tuple[Updates, OptState]]


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none.

    >>> optim.sgd(0.1).init({"w": fnp.zeros(2)})
    (EmptyState(), EmptyState())
    """


def apply_updates(params: Params, updates: Updates) -> Params:
    """``params + updates`` leaf by leaf, keeping each parameter's dtype.

    >>> apply_updates({"w": fnp.ones(2)}, {"w": fnp.full(2, -0.5)})["w"]
    Array([0.5, 0.5], dtype=float32)
    """
    check_trees("apply_updates", "params", params, "updates", updates)

    def add(p: Any, u: Any) -> Any:
        if _dtype_kind(p) in "iub" and _dtype_kind(u) == "f":
            raise _truncating_update(params, updates)
        return _cast_like(fnp.add(p, u), p)

    return tree_map(add, params, updates)


def _truncating_update(params: Params, updates: Updates) -> TypeError:
    for path, p, u in zip(tree_paths(params), tree_flatten(params)[0], tree_flatten(updates)[0]):
        if _dtype_kind(p) in "iub" and _dtype_kind(u) == "f":
            return TypeError(f"apply_updates: params{path} is {describe(p)} but its update is {describe(u)}: "
                             "adding a float update to an integer parameter would truncate it; keep only float "
                             "arrays in the trees given to the optimizer")
    return TypeError("apply_updates: an integer parameter got a float update")   # not reached: called on one


def chain(*transforms: GradientTransformation, name: str = "chain") -> GradientTransformation:
    """Apply ``transforms`` one after another; the state is the tuple of their states.

    ``update`` checks, before computing anything, that the state has one
    part per transformation, each of the type that transformation's ``init``
    makes, and that the gradients match the parameters' structure and shapes
    (``name`` is how errors refer to the chain).

    >>> opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-3))
    >>> state = opt.init({"w": fnp.zeros(2)})
    >>> len(state)                                     # one part per transformation
    2
    """
    transforms = tuple(transforms)
    for i, t in enumerate(transforms):
        if not (isinstance(t, tuple) and len(t) == 2 and callable(t[0]) and callable(t[1])):
            raise TypeError(f"{name}: transformation {i} is a {type(t).__name__}, expected a "
                            "GradientTransformation (an (init, update) pair such as optim.sgd(0.1))")
    expected = tuple(_state_kind(t) for t in transforms)

    def init(params: Params) -> tuple:
        return tuple(t.init(params) for t in transforms)

    def update(updates: Updates, state: tuple, params: Params = None) -> tuple[Updates, tuple]:
        _check_chain_state(name, state, expected)
        if params is not None:
            check_trees(f"{name}.update", "params", params, "grads", updates)
        new_state = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)

    update.state_kind = ("chain", expected)
    return GradientTransformation(init, update)


# --------------------------------------------------------------------------
# Helpers shared by the transformations
# --------------------------------------------------------------------------


def _cast_like(x: Any, like: Any) -> Any:
    """``x`` in the dtype of ``like`` (so a float32 step size never widens float16 params)."""
    dtype = like.dtype if isinstance(like, (Array, Tracer, np.ndarray)) else None
    return convert(x, dtype) if dtype is not None and x.dtype != dtype else x


def zeros_like_tree(owner: str, tree: PyTree) -> PyTree:
    """Zeros shaped like each (float) parameter: the initial moment or momentum buffers."""
    for i, x in enumerate(tree_flatten(tree)[0]):
        if _dtype_kind(x) != "f":
            raise TypeError(f"{owner}: params{tree_paths(tree)[i]} is {describe(x)}; an optimizer updates float "
                            "parameters only (keep integer or boolean arrays out of the tree given to init)")
    return tree_map(lambda x: fnp.zeros_like(fnp.asarray(x)), tree)


_INT32_MAX = np.iinfo(np.int32).max


def new_count() -> Array:
    """The step counter every stateful transformation keeps: an int32 0-d array."""
    return fnp.zeros((), np.int32)


def increment(count: Any) -> Any:
    # Saturate instead of wrapping to a negative step after 2**31 - 1 steps.
    return fnp.where(count < _INT32_MAX, count + 1, count)


# --------------------------------------------------------------------------
# Checks (static: tree structure, shapes and types only, so they run once at
# trace time under jit and never look at values)
# --------------------------------------------------------------------------


def _dtype_kind(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    return _dtypes.kind(dtype if dtype is not None else np.asarray(x).dtype)   # bfloat16 counts as "f"


def _shape(x: Any) -> tuple:
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def _is_node(x: Any) -> bool:
    """Whether ``x`` is a pytree container rather than a leaf (arrays answered without flattening)."""
    return not isinstance(x, (Array, np.ndarray)) and not all_leaves((x,))


def tree_paths(tree: Any) -> list[str]:
    """The path of every leaf of ``tree`` in flattening order: ``['layer1']['w']``, ``[0].mu``."""
    out: list[str] = []

    def walk(x: Any, path: str) -> None:
        # One level of x: its children become the leaves.
        children, node = tree_flatten(x, is_leaf=lambda child: child is not x)
        t = node.node_type
        if t is None:
            out.append(path)
            return
        if t is dict:
            labels = [f"[{k!r}]" for k in node.aux]
        elif isinstance(x, tuple) and hasattr(t, "_fields"):
            labels = [f".{f}" for f in t._fields]
        else:
            labels = [f"[{i}]" for i in range(len(children))]
        for label, child in zip(labels, children):
            walk(child, path + label)

    walk(tree, "")
    return out


def _matches(a: Any, b: Any) -> bool | None:
    """Whether ``a`` and ``b`` have the same structure and leaf shapes (None: a custom node, undecided).

    One walk over both trees, building nothing: this runs on every eager
    optimizer step, where flattening both trees would cost more than the
    arithmetic of a small model.
    """
    ta = type(a)
    if ta is not type(b):
        return False if (_is_node(a) or _is_node(b)) else _shape(a) == _shape(b)
    if ta is dict:
        if a.keys() != b.keys():
            return False
        results = [_matches(a[k], b[k]) for k in a]
    elif ta is list or ta is tuple or (isinstance(a, tuple) and hasattr(ta, "_fields")):
        if len(a) != len(b):
            return False
        results = [_matches(x, y) for x, y in zip(a, b)]
    elif a is None:
        return True
    elif _is_node(a):
        return None
    else:
        return _shape(a) == _shape(b)
    return None if None in results else all(results)


def check_trees(owner: str, a_name: str, a: Any, b_name: str, b: Any) -> None:
    """Raise unless trees ``a`` and ``b`` have the same structure and leaf shapes.

    Broadcasting between a parameter and its gradient (``f32[3]`` with
    ``f32[3,1]``) would silently turn the parameter into a ``f32[3,3]``.
    """
    if _matches(a, b):
        return
    a_leaves, a_def = tree_flatten(a)
    b_leaves, b_def = tree_flatten(b)
    if a_def != b_def:
        raise ValueError(f"{owner}: {b_name} and {a_name} have different tree structures: {b_name} is {b_def}, "
                         f"{a_name} is {a_def}; they must match leaf for leaf")
    for i, (x, y) in enumerate(zip(a_leaves, b_leaves)):
        if _shape(x) != _shape(y):
            path = tree_paths(a)[i]
            raise ValueError(f"{owner}: {b_name}{path} is {describe(y)} but {a_name}{path} is {describe(x)}: "
                             "the shapes must be equal (no broadcasting); reshape the gradient or fix the "
                             "parameter")


_FOREIGN_STATE = ("this state was made by another optimizer's init (states are not interchangeable); use the "
                  "state from this optimizer's init, or load a saved state with "
                  "serialization.load(path, like=opt.init(params))")


def check_state(owner: str, state: Any, expected: type) -> None:
    """Raise unless ``state`` is the kind of state ``owner``'s ``init`` makes."""
    if not isinstance(state, expected):
        raise TypeError(f"{owner}: got an optimizer state of type {_state_name(state)}, expected "
                        f"{expected.__name__}: {_FOREIGN_STATE}")


def _state_name(state: Any) -> str:
    if isinstance(state, tuple) and not hasattr(type(state), "_fields"):
        return f"tuple of {len(state)} ({', '.join(_state_name(s) for s in state)})"
    return type(state).__name__


def _state_kind(t: GradientTransformation) -> Any:
    """What ``t.update`` expects as its state: a state class, ``("chain", parts)``, or None (unknown)."""
    return getattr(t.update, "state_kind", None)


def _check_chain_state(owner: str, state: Any, expected: tuple, where: str = "state") -> None:
    if not isinstance(state, tuple) or hasattr(type(state), "_fields"):
        raise TypeError(f"{owner}.update: {where} must be the tuple that {owner}'s init returns (one part per "
                        f"transformation), got {_state_name(state)}")
    if len(state) != len(expected):
        raise ValueError(f"{owner}.update: expected a state of {len(expected)} parts (one per transformation), "
                         f"got {_state_name(state)}: {_FOREIGN_STATE}")
    for i, (part, kind) in enumerate(zip(state, expected)):
        if isinstance(kind, tuple):
            _check_chain_state(owner, part, kind[1], f"{where}[{i}]")
        elif isinstance(kind, type) and not isinstance(part, kind):
            raise TypeError(f"{owner}.update: {where}[{i}] is a {_state_name(part)}, expected {kind.__name__}: "
                            f"{_FOREIGN_STATE}")
