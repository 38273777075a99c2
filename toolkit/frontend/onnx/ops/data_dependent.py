"""ONNX ops whose output shape depends on tensor values: NonZero, Range."""
from __future__ import annotations

from ....ops.datadep import NonZero, Range
from ..translate import TranslateContext


def nonzero(ctx: TranslateContext) -> None:
    ctx.emit(NonZero())


def range_(ctx: TranslateContext) -> None:
    ctx.emit(Range())


def register(r) -> None:
    r.add("NonZero", (9, 13), nonzero)
    # Range-27 adds stash_type, which only matters for float16 and bfloat16 (not supported)
    r.add("Range", (11, 27), range_)
