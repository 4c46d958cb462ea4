"""Which arguments a transform works on, and which it holds fixed.

``grad``, ``value_and_grad``, ``jacfwd``, ``jacrev`` and ``hessian``
(``argnums``), ``jit`` (``static_argnums``, ``static_argnames``),
``make_jaxpr`` (``static_argnums``) and ``custom_vjp`` (``nondiff_argnums``)
all pick arguments by position (``jit`` by name too).  An :class:`ArgSpec`
checks such a choice once, when the transform is made, and at each call
splits the arguments (:meth:`ArgSpec.split`) into the ones the transform
works on -- differentiates or traces -- and the ones it holds fixed;
:meth:`Split.bind` puts them back together around the function.

>>> spec = ArgSpec("jit", "static_argnums", 1, static=True)
>>> split = spec.split((10, "tag", 30), {})
>>> split.dynamic, split.fixed_positions
((10, 30), (1,))
>>> split.bind(lambda a, tag, b: f"{tag}:{a + b}")(1, 2)
'tag:3'
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple

import numpy as np

from funcgrad._core import Array, Tracer, as_array

__all__ = ["ArgSpec", "Split", "Signature", "fun_name", "is_int", "signature", "with_args"]


def fun_name(f: Callable) -> str:
    """``f``'s name for messages (a callable object's class name if it has none)."""
    return getattr(f, "__name__", type(f).__name__)


def is_int(i: Any) -> bool:
    """An argument position: a Python or numpy int, not a bool."""
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


class Signature(NamedTuple):
    """What of a function's signature the argument specs check against."""

    positional: tuple[str, ...]          # names of the positional parameters, in order
    defaults: frozenset[str]             # those of them that have a default
    var_args: bool                       # takes *args
    keywords: frozenset[str] | None      # names it takes by keyword; None: any (it takes **kwargs)


def signature(f: Callable) -> Signature | None:
    """``f``'s :class:`Signature`; None for callables without one (some builtins)."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = inspect.Parameter
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    keywords = None if any(p.kind == kinds.VAR_KEYWORD for p in params) else frozenset(
        p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY))
    return Signature(tuple(p.name for p in positional),
                     frozenset(p.name for p in positional if p.default is not kinds.empty),
                     any(p.kind == kinds.VAR_POSITIONAL for p in params), keywords)


def with_args(f: Callable, args: tuple, kwargs: dict, positions: tuple[int, ...]) -> Callable:
    """``g(*xs, **more)``: ``f`` called with ``xs`` in place of ``args`` at ``positions``
    (the other arguments, and ``kwargs``, as given).

    >>> with_args(lambda a, b, c: (a, b, c), (1, 2, 3), {}, (2, 0))("z", "x")
    ('x', 2, 'z')
    """
    # This runs on every grad call: no closure is made when none is needed.
    if not kwargs and len(args) < len(_IN_ORDER) and positions == _IN_ORDER[len(args)]:
        return f   # nothing to put back: grad(f)(x), the common case, calls f itself
    if len(positions) == 1 and not kwargs:
        return _with_one(f, args, positions[0])
    return _with_many(f, args, kwargs, positions)


_IN_ORDER = [tuple(range(n)) for n in range(9)]   # all the positions of n arguments, in order


def _with_one(f: Callable, args: tuple, i: int) -> Callable:
    def one(x: Any, **more: Any) -> Any:
        new_args = list(args)
        new_args[i] = x
        return f(*new_args, **more)
    return one


def _with_many(f: Callable, args: tuple, kwargs: dict, positions: tuple[int, ...]) -> Callable:
    def g(*xs: Any, **more: Any) -> Any:
        new_args = list(args)
        for i, x in zip(positions, xs):
            new_args[i] = x
        return f(*new_args, **more, **kwargs)
    return g


class Split:
    """One call's arguments as an :class:`ArgSpec` splits them.

    ``dynamic``: the positional arguments the transform works on (in the
    order of ``positions``, their places in ``args``); ``dynamic_kwargs``: the
    keyword arguments it works on; ``fixed_positions`` and ``fixed_kwargs``:
    the others, held as they are.
    """

    __slots__ = ("args", "positions", "fixed_positions", "dynamic_kwargs", "fixed_kwargs")

    def __init__(self, args: tuple, positions: tuple[int, ...], fixed_positions: tuple[int, ...],
                 dynamic_kwargs: dict, fixed_kwargs: dict):
        self.args = args
        self.positions = positions
        self.fixed_positions = fixed_positions
        self.dynamic_kwargs = dynamic_kwargs
        self.fixed_kwargs = fixed_kwargs

    @property
    def dynamic(self) -> tuple:
        return tuple([self.args[i] for i in self.positions])

    @property
    def fixed(self) -> dict:
        """The fixed arguments by position (int) and by name (str)."""
        return {**{i: self.args[i] for i in self.fixed_positions}, **self.fixed_kwargs}

    def bind(self, f: Callable) -> Callable:
        """``g(*dynamic, **dynamic_kwargs)``: ``f`` called with all the arguments, the fixed ones in place."""
        return with_args(f, self.args, self.fixed_kwargs, self.positions)


class ArgSpec:
    """A transform's choice of arguments by position (and, for ``jit``, by name).

    ``static=False`` (``argnums``): the chosen positional arguments are the
    ones the transform works on, in the order given; everything else is
    fixed.  ``static=True`` (``static_argnums``, ``nondiff_argnums``): the
    chosen ones (positions and ``names``) are fixed; the other arguments are
    worked on.  ``option`` is the keyword the user passed (for messages);
    ``unique``: naming an argument twice is an error (else repeats are
    dropped).  With ``fun`` and ``check_signature``, positions and names are
    checked against ``fun``'s signature now, and a fixed position may also be
    passed by keyword (or left to its default) at call time.  ``names_option``:
    the keyword that picks fixed arguments by name (``jit``'s
    ``static_argnames``), if the transform has one.

    Negative positions count from the end of the signature when it is
    checked (and has no ``*args``), else from the end of each call's
    positional arguments.  Errors name the transform, the option as given
    and the fix.
    """

    __slots__ = ("transform", "option", "static", "unique", "purpose", "nums", "names", "names_option", "spec",
                 "where", "fun_name", "sig", "fixed_names", "_low", "_high")

    def __init__(self, transform: str, option: str, value: Any, *, static: bool, purpose: str = "",
                 names: Any = (), names_option: str | None = None, unique: bool = False,
                 fun: Callable | None = None, check_signature: bool = False, where: str | None = None):
        self.transform, self.option, self.static, self.unique = transform, option, static, unique
        self.names_option = names_option
        self.purpose = purpose or ("positions of the arguments to differentiate" if not static
                                   else "argument positions")
        self.fun_name = fun_name(fun) if fun is not None else "the function"
        self.where = where or (f"{transform}({self.fun_name})" if fun is not None else transform)
        self.nums = self._check_nums(value)
        self.names = self._check_names(names)
        self.sig = signature(fun) if fun is not None and check_signature else None
        self.fixed_names = frozenset(self.names)   # names under which a fixed argument may come by keyword
        if self.sig is not None:
            self._check_signature()
            n = len(self.sig.positional)
            if static and not self.sig.var_args:
                # Negative positions count from the end of the signature, so that -1 still names the last
                # parameter when it comes by keyword or keeps its default.
                self.nums = self._distinct(tuple(i % n for i in self.nums), f"{self.fun_name}'s {n} parameters")
            if static:
                self.fixed_names |= {self.sig.positional[i] for i in self.nums if 0 <= i < n}
        # The spec as the transform keeps it: an int argnums gives one gradient, not a tuple of one.
        self.spec: int | tuple[int, ...] = int(value) if is_int(value) and not static else self.nums
        # Smallest and largest position: each call checks them against its arguments in O(1).
        self._low, self._high = (min(self.nums), max(self.nums)) if self.nums else (0, -1)

    # -------------------------------------------------- checks when the transform is made

    def _check_nums(self, value: Any) -> tuple[int, ...]:
        nums = (value,) if is_int(value) else value
        if not isinstance(nums, (tuple, list)) or not all(is_int(i) for i in nums):
            raise TypeError(f"{self.transform}: {self.option} must be an int or a tuple of ints ({self.purpose}), "
                            f"got {value!r:.60} of type {type(value).__name__}")
        nums = tuple(int(i) for i in nums)
        distinct = tuple(dict.fromkeys(nums))
        if len(distinct) != len(nums):
            if self.unique:
                verb = "differentiated" if not self.static else "named"
                raise ValueError(f"{self.transform}: {self.option}={nums} names an argument more than once; each "
                                 f"argument can be {verb} once: pass distinct positions, e.g. "
                                 f"{self.option}={distinct}")
            nums = distinct
        return nums

    def _distinct(self, positions: tuple[int, ...], counted_in: str) -> tuple[int, ...]:
        """``positions`` (made non-negative) without repeats: an error if the spec is ``unique``."""
        if len(set(positions)) == len(positions):
            return positions
        if self.unique:   # e.g. (0, -2) with two arguments
            raise ValueError(f"{self.where}: {self.option}={self._shown()} names the same argument twice with "
                             f"{counted_in}; pass distinct positions")
        return tuple(dict.fromkeys(positions))

    def _check_names(self, names: Any) -> tuple[str, ...]:
        names = (names,) if isinstance(names, str) else names
        if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{self.transform}: {self.names_option} must be a str or a tuple of str (parameter "
                            f"names), got {names!r:.60}")
        return tuple(dict.fromkeys(names))

    def _check_signature(self) -> None:
        """Positions the function cannot take (without ``*args``) and names it does not take: errors now."""
        positional, _, var_args, keywords = self.sig
        name, n = self.fun_name, len(positional)
        bad = [i for i in self.nums if not -n <= i < n]
        if bad and not var_args:
            raise ValueError(f"{self.where}: {self.option}={self.nums} but {name} takes "
                             f"{_count(n, 'positional argument')} ({', '.join(positional) or 'none'}); positions "
                             f"{bad} do not exist")
        unknown = [k for k in self.names if keywords is not None and k not in keywords]
        if unknown:
            raise ValueError(f"{self.where}: {self.names_option}={self.names} names {unknown}, which {name} does not "
                             f"take as a keyword (its parameters: {', '.join(sorted(keywords)) or 'none'})")

    # -------------------------------------------------------------- at each call

    def positions(self, nargs: int, kwargs: dict | None = None) -> tuple[int, ...]:
        """The chosen positions, made non-negative, for a call with ``nargs`` positional arguments.

        A position past them is an error -- unless it is fixed and comes by
        keyword or keeps its default (then it is left out).
        """
        nums = self.nums
        if self._low >= 0 and self._high < nargs:
            return nums
        missing = [i for i in nums if not -nargs <= i < nargs and not self._given_otherwise(i, kwargs)]
        if missing:
            raise ValueError(self._range_message(nargs, missing))
        return self._distinct(tuple(i % nargs for i in nums if -nargs <= i < nargs),
                              _count(nargs, "positional argument"))

    def _given_otherwise(self, i: int, kwargs: dict | None) -> bool:
        """Whether fixed position ``i``, not passed positionally, comes by keyword or has a default."""
        if self.names_option is None or self.sig is None or not 0 <= i < len(self.sig.positional):
            return False   # only a transform that takes fixed arguments by name (jit) accepts them so
        name = self.sig.positional[i]
        return (kwargs is not None and name in kwargs) or name in self.sig.defaults

    def _shown(self) -> Any:
        """The positions as messages show them: an int argnums stays an int, static ones are a tuple."""
        return self.nums if self.static else self.spec

    def _range_message(self, nargs: int, missing: list[int]) -> str:
        shown = self._shown()
        which = f"argument {missing[0]} does" if len(missing) == 1 else f"arguments {missing} do"
        msg = (f"{self.where}: {self.option}={shown} but {self.fun_name} was called with "
               f"{_count(nargs, 'positional argument')}, so {which} not exist: {self.option} counts positional "
               f"arguments from 0 and must be in [{-nargs}, {nargs})")
        if self.names_option:
            msg += f". Pass that argument positionally, or name it in {self.names_option}"
        return msg

    def split(self, args: tuple, kwargs: dict) -> Split:
        """This call's arguments: the ones the transform works on, and the fixed ones."""
        nargs = len(args)
        chosen = self.positions(nargs, kwargs)
        if not self.static:
            chosen_set = set(chosen)
            fixed = tuple(i for i in range(nargs) if i not in chosen_set)
            return Split(args, chosen, fixed, {}, kwargs)
        dynamic = tuple(i for i in range(nargs) if i not in chosen) if chosen else tuple(range(nargs))
        if not kwargs:
            return Split(args, dynamic, chosen, {}, {})
        fixed_kw = {k: v for k, v in kwargs.items() if k in self.fixed_names}
        dynamic_kw = {k: v for k, v in kwargs.items() if k not in self.fixed_names} if fixed_kw else kwargs
        return Split(args, dynamic, chosen, dynamic_kw, fixed_kw)


def as_leaf(x: Any, where: str, output: int | None = None) -> Any:
    """``x`` as an array leaf of a transform's arguments (``output=i``: of the function's output leaf i);
    an array, a tracer, or a number made an array. Anything else is an error starting with ``where``."""
    if isinstance(x, (Array, Tracer)):
        return x
    try:
        return as_array(x)
    except TypeError:
        what = ("every leaf of the arguments must be an array or a number, got" if output is None else
                f"the function must return arrays (or a pytree of arrays), but output leaf {output} is")
        raise TypeError(f"{where}: {what} {type(x).__name__}: {x!r:.60}") from None
