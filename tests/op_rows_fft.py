"""Op-table rows for funcgrad.numpy's fft functions (loaded by op_table.py; see its Op record)."""
from __future__ import annotations

OPS: list = []
PUBLIC: list[str] = []
