"""onnxruntime's contrib ops (domain com.microsoft): placeholder, filled below."""
from __future__ import annotations

from ..translate import Registry


def register(r: Registry) -> None:
    """Each op: r.add(op_type, (1,), translation, foldable=False, domain=CONTRIB)."""
