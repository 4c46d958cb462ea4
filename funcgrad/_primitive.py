"""``Primitive``: one operation with all of its rules, and the registries backends and compilers fill.

``Primitive.bind`` (apply the primitive: evaluate it eagerly or hand it to the
innermost transform) is defined with :func:`funcgrad._core.bind`, which sits
above the tracers this module must not know about.
"""
from __future__ import annotations

from typing import Any, Callable


class Primitive:
    """One operation with all of its rules declared together.

    * ``impl(*values, **params)``: numpy reference implementation.
    * ``abstract_eval(*avals, **params) -> aval | list[aval]``: shape/dtype rule.
    * ``jvp(primals, tangents, **params) -> (out, tangent_out)``: forward mode
      (tangents may be ``None`` = symbolic zero).
    * ``vjp(cts, primals, outs, needs, **params) -> input cotangents``:
      reverse mode (``needs[i]`` says whether input i wants one).
    * ``batch(values, dims, axis_size, **params) -> (out, out_dim)``: vmap.
    * ``vjp_forward(primals, needs, **params) -> (outs, backward)``
      (optional): reverse mode's forward pass for primitives whose vjp
      needs values the plain forward pass does not keep (a loop's carries);
      ``backward(cts)`` then replaces ``vjp``.

    Rules are written with primitives, so derivatives can be traced again.

    The primitive is also the only registry of what backends and compilers
    know about it, keyed by the object (never by its name):

    * ``impls[backend]``: the implementation on that backend's buffers,
      registered from the backend's folder with :func:`register_impl`
      (``impl`` is the host's: the block's numpy reference until the CPU
      backend registers a faster one);
    * ``lowerings[compiler]``: how a compiler emits it inside a generated
      kernel (:func:`register_lowering`);
    * ``traits``: properties compilers rely on (:func:`add_traits`), such
      as ``"view"`` (the host impl may return a view of an input) or
      ``"writes_out"`` (the host impl accepts ``out=``).
    """

    __slots__ = ("name", "impl", "abstract_eval", "jvp", "vjp", "vjp_forward", "batch", "multiple_results",
                 "impls", "lowerings", "traits", "__weakref__")

    def __init__(self, name: str, *, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results
        self.impl: Callable[..., Any] | None = None
        self.abstract_eval: Callable[..., Any] | None = None
        self.jvp: Callable[..., Any] | None = None
        self.vjp: Callable[..., Any] | None = None
        self.vjp_forward: Callable[..., Any] | None = None
        self.batch: Callable[..., Any] | None = None
        self.impls: dict[str, Callable[..., Any]] = {}
        self.lowerings: dict[str, Any] = {}
        self.traits: frozenset[str] = frozenset()

    # bind(*args, **params) -> the result: attached by funcgrad._core (see the module docstring).
    bind: Callable[..., Any]

    def __repr__(self) -> str:
        return self.name


def register_impl(prim: Primitive, backend: str, impl: Callable[..., Any]) -> None:
    """Make ``impl`` ``prim``'s implementation on ``backend``'s buffers.

    ``"cpu"`` also makes it the host implementation that eager evaluation,
    compiled programs and constant folding run; the block's reference
    implementation stays reachable as ``prim.impls["reference"]``.
    """
    if backend == "cpu":
        prim.impls.setdefault("reference", prim.impl)
        prim.impl = impl
    prim.impls[backend] = impl


def register_lowering(prim: Primitive, compiler: str, lowering: Any) -> None:
    """Tell ``compiler`` how to emit ``prim`` inside a generated kernel."""
    prim.lowerings[compiler] = lowering


def add_traits(prim: Primitive, *traits: str) -> None:
    """Declare properties of ``prim`` that compilers rely on (see :class:`Primitive`)."""
    prim.traits = prim.traits | frozenset(traits)
