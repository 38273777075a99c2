"""ONNX random ops (stub: filled in by the random work)."""
from __future__ import annotations


def register(r) -> None:
    pass
