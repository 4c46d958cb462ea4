"""Backends: where primitives run. One folder per backend, the CPU's included.

A backend folder ``funcgrad/backends/<name>/`` provides, in its
``__init__.py``, an object ``backend`` (a :class:`Backend`) with

* its array type (a subclass of :class:`funcgrad.Array`; the CPU's is
  ``Array`` itself) and host transfers;
* its implementations, registered against the primitive objects with
  ``funcgrad._core.register_impl(prim, name, impl)`` (and, for a
  compiler, lowerings with ``register_lowering``);
* optionally ``compile(jaxpr)``: a compiled program for ``jit``.

The core never imports a backend: :mod:`funcgrad.devices` discovers them
through :func:`register_backend`, and a device array names its backend in
the class attribute ``backend``. A primitive a backend does not implement
is reported by ``missing_impl`` (an error naming it, unless the user asked
for host fallback).
"""
from __future__ import annotations

from typing import Any, Callable

_REGISTRY: dict[str, "Backend"] = {}


class Backend:
    """The contract a backend folder fulfils (see the module docstring)."""

    name: str = ""
    array_type: type = object

    def available(self) -> bool:
        """Whether this machine can run the backend now (never raises)."""
        return True

    def unavailable_reason(self) -> str:
        return ""

    # ---- evaluation (used by funcgrad._core.apply_primitive for device arrays)
    def device_value(self, arg: Any) -> Any:
        """One primitive argument as this backend's buffer (Python scalars stay as they are)."""
        raise NotImplementedError

    def wrap(self, out: Any) -> Any:
        """An implementation's raw result as this backend's immutable array."""
        raise NotImplementedError

    def host_value(self, value: Any) -> Any:
        """A raw buffer (or scalar) copied to a numpy value (debug_nans reads it)."""
        raise NotImplementedError

    def missing_impl(self, prim: Any) -> Callable[..., Any]:
        """What runs ``prim`` when the backend has no implementation: raise, or a fallback."""
        raise NotImplementedError(f"{prim.name}: no implementation on the '{self.name}' backend")

    # ---- transfers
    def to_device(self, x: Any) -> Any:
        """A host Array copied to this backend."""
        raise NotImplementedError

    def to_host(self, x: Any) -> Any:
        """This backend's array copied to a host Array."""
        raise NotImplementedError

    # ---- foreign buffers (optional; ``funcgrad.devices`` asks every backend)
    #: DLPack device types (dlpack.h ``DLDeviceType``) whose buffers :meth:`from_dlpack` imports.
    dlpack_device_types: tuple[int, ...] = ()

    def owns_buffer(self, value: Any) -> bool:
        """Whether ``value`` is a raw buffer of this backend's array library (``device_put`` wraps it)."""
        return False

    def from_buffer(self, value: Any, copy: bool = True) -> Any:
        """One of this backend's raw buffers as its array (copied by default: the caller keeps a handle)."""
        raise NotImplementedError

    def from_dlpack(self, obj: Any, copy: bool | None = None) -> Any:
        """A DLPack producer on one of :attr:`dlpack_device_types` as this backend's array."""
        raise NotImplementedError

    # ---- compilation (optional)
    compile: Callable[..., Any] | None = None


def register_backend(backend: Backend) -> Backend:
    """Make ``backend`` known to :mod:`funcgrad.devices` under its name."""
    _REGISTRY[backend.name] = backend
    return backend


def get_backend(name: str) -> Backend:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown backend '{name}'; known: {', '.join(sorted(_REGISTRY))}") from None


def registered_backends() -> dict[str, Backend]:
    return dict(_REGISTRY)
