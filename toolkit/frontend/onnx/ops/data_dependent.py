"""ONNX ops whose output shape depends on tensor values: NonZero, Range."""
from __future__ import annotations

from ....ops.datadep import NonZero, Range
from ..translate import TranslateContext


def nonzero(ctx: TranslateContext) -> None:
    ctx.emit(NonZero())


def range_(ctx: TranslateContext) -> None:
    # Range-27 adds float16 and bfloat16, computed in stash_type (float32 by default)
    if ctx.version >= 27 and ctx.value(0).dtype.is_narrow_float:
        ctx.emit(Range(ctx.dtype(ctx.attr("stash_type", 1), "stash_type")))
        return
    ctx.emit(Range())


def register(r) -> None:
    r.add("NonZero", (9, 13), nonzero)
    r.add("Range", (11, 27), range_)
