"""Op-table rows for funcgrad.numpy.fft (loaded by op_table.py; see its Op record).

References are numpy.fft in float64/complex128; derivatives (fwd and rev, order 2) are checked along
complex directions, which also checks the rfft/irfft transposes' Hermitian weighting."""
from __future__ import annotations

import numpy as np

import funcgrad.numpy as fnp
from op_table import Op, normal

V = [((3, 4),), ((5,),)]      # a batch of rows, and one odd-length vector
M = [((3, 4),)]


def cnormal(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _row(name, kwargs=None, shapes=V, gen=cnormal, out="complex", variant=None, **kw):
    kwargs = kwargs or {}
    f, ref = getattr(fnp.fft, name), getattr(np.fft, name)
    label = f"fft.{name}" + (f"[{variant}]" if variant else "")
    return Op(label, lambda *a: f(*a, **kwargs), lambda *a: ref(*a, **kwargs), shapes, gen, out=out, **kw)


OPS = [
    _row("fft"),
    _row("fft", gen=normal, variant="real input"),
    _row("fft", {"n": 6, "axis": 0, "norm": "ortho"}, M, variant="n,axis,ortho"),
    _row("fft", {"n": 3}, M, variant="n cuts"),
    _row("ifft"),
    _row("ifft", {"n": 5, "norm": "forward"}, M, variant="n,forward"),
    _row("rfft", gen=normal),
    _row("rfft", {"n": 5, "axis": 0, "norm": "ortho"}, M, gen=normal, variant="n,axis,ortho"),
    _row("irfft", out="float"),
    _row("irfft", {"n": 5, "norm": "forward"}, M, out="float", variant="odd n,forward"),
    _row("irfft", {"axis": 0, "norm": "ortho"}, M, out="float", variant="axis,ortho"),
    _row("hfft", out="float"),
    _row("hfft", {"n": 5, "norm": "ortho"}, M, out="float", variant="n,ortho"),
    _row("ihfft", gen=normal),
    _row("ihfft", {"norm": "forward"}, M, gen=normal, variant="forward"),
    _row("fft2", shapes=M),
    _row("fft2", {"s": (2, 5), "norm": "ortho"}, [((2, 3, 4),)], variant="s,ortho"),
    _row("ifft2", shapes=M),
    _row("ifft2", {"axes": (0, 1), "norm": "forward"}, [((2, 3, 2),)], variant="axes,forward"),
    _row("rfft2", shapes=M, gen=normal),
    _row("rfft2", {"s": (4, 3), "axes": (1, 0)}, M, gen=normal, variant="s,axes"),
    _row("irfft2", shapes=M, out="float"),
    _row("irfft2", {"s": (2, 5), "norm": "ortho"}, M, out="float", variant="s,ortho"),
    _row("fftn", shapes=[((2, 3, 2),)]),
    _row("fftn", {"axes": (0, 2)}, [((2, 3, 2),)], variant="axes"),
    _row("fftn", shapes=[((2, 1, 2, 2, 1),)], variant="5 axes"),
    _row("ifftn", shapes=[((2, 3, 2),)]),
    _row("ifftn", {"s": (3, 3), "axes": (0, 1), "norm": "ortho"}, M, variant="s,ortho"),
    _row("rfftn", shapes=[((2, 3, 4),)], gen=normal),
    _row("rfftn", shapes=[((2, 1, 2, 2, 3),)], gen=normal, variant="5 axes"),
    _row("irfftn", shapes=[((2, 3, 3),)], out="float"),
    _row("irfftn", {"s": (3, 5), "axes": (0, 1)}, M, out="float", variant="s,axes"),
    _row("irfftn", shapes=[((2, 1, 2, 2, 3),)], out="float", variant="5 axes"),
    Op("fft.fftfreq", lambda: fnp.fft.fftfreq(5, 0.1), lambda: np.fft.fftfreq(5, 0.1), [()], diff=False),
    Op("fft.fftfreq[even,d array]", lambda d: fnp.fft.fftfreq(4, d), lambda d: np.fft.fftfreq(4, d), [((),)],
       lambda rng, shape: rng.uniform(0.5, 2.0, shape)),
    Op("fft.rfftfreq", lambda: fnp.fft.rfftfreq(6, 0.5), lambda: np.fft.rfftfreq(6, 0.5), [()], diff=False),
    Op("fft.rfftfreq[odd]", lambda: fnp.fft.rfftfreq(7), lambda: np.fft.rfftfreq(7), [()], diff=False),
    Op("fft.fftshift", fnp.fft.fftshift, np.fft.fftshift, [((3, 4),), ((5,),)]),
    Op("fft.fftshift[axes]", lambda x: fnp.fft.fftshift(x, axes=1), lambda x: np.fft.fftshift(x, axes=1), M, cnormal,
       out="complex"),
    Op("fft.ifftshift", fnp.fft.ifftshift, np.fft.ifftshift, [((3, 5),), ((5,),)]),
    Op("fft.ifftshift[axes]", lambda x: fnp.fft.ifftshift(x, axes=(0,)), lambda x: np.fft.ifftshift(x, axes=(0,)),
       M),
]

PUBLIC: list[str] = ["fft." + n for n in ("fft ifft rfft irfft fft2 ifft2 rfft2 irfft2 fftn ifftn rfftn irfftn hfft "
                                          "ihfft fftfreq rfftfreq fftshift ifftshift").split()]
