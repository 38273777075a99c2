"""Data-movement ONNX ops -> Transpose, Gather, Concat, Slice. Slice before version 10 has
its starts, ends and axes as attributes; from 10 they (and steps) are inputs, of which the
axes must be constant."""
from __future__ import annotations

import numpy as np

from ....ops.movement import Concat, Gather, Slice, Transpose
from ..translate import TranslateContext


def transpose(ctx: TranslateContext) -> None:
    ctx.emit(Transpose(ctx.ints("perm")))


def gather(ctx: TranslateContext) -> None:
    ctx.emit(Gather(int(ctx.attr("axis", 0))))


def concat(ctx: TranslateContext) -> None:
    if ctx.attr("axis") is None:
        ctx.fail("attribute 'axis' is required")
    ctx.emit(Concat(int(ctx.attr("axis"))), [i for i in ctx.inputs if i])


def slice_(ctx: TranslateContext) -> None:
    if ctx.version < 10:
        starts, ends = ctx.ints("starts"), ctx.ints("ends")
        if starts is None or ends is None:
            ctx.fail("attributes 'starts' and 'ends' are required")
        inputs = [ctx.inputs[0], ctx.constant("starts", np.array(starts, np.int64)),
                  ctx.constant("ends", np.array(ends, np.int64))]
        ctx.emit(Slice(ctx.ints("axes")), inputs)
        return
    inputs = ctx.inputs[:3] + ([ctx.inputs[4]] if ctx.has(4) else [])
    ctx.emit(Slice(ctx.const_ints(3, "axes")), inputs)


def register(r) -> None:
    r.add("Transpose", (1, 13, 21, 23, 24, 25), transpose)
    r.add("Gather", (1, 11, 13), gather)
    r.add("Concat", (4, 11, 13), concat)
    r.add("Slice", (1, 10, 11, 13), slice_)
