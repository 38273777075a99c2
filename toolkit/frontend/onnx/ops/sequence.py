"""ONNX sequence ops (stub: filled in by the sequence work)."""
from __future__ import annotations


def register(r) -> None:
    pass
