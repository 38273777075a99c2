"""Data-movement ONNX ops -> Transpose, Gather, Concat, Slice. Slice before version 10 has
its starts, ends and axes as attributes; from 10 they (and steps) are inputs. Axes known
only at run time make starts, ends and steps for every axis (PerAxis: the default slices
take all of an axis), so the Slice itself needs no axes."""
from __future__ import annotations

import numpy as np

from ....ops.movement import BIG, Concat, Gather, Slice, Transpose
from ....ops.shape import PerAxis
from ..translate import TranslateContext
from .shape import known_axes


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
    axes = known_axes(ctx, 3) if ctx.has(3) else None
    if axes is not None or not ctx.has(3):
        ctx.emit(Slice(axes), inputs)
        return
    # starts 0, ends past the end, steps 1 on the axes not named
    defaults = ((1, 0), (1, BIG), (1, 1))[:len(inputs) - 1]
    full = [ctx.tmp(what) for what in ("starts", "ends", "steps")[:len(defaults)]]
    ctx.emit(PerAxis(ctx.value(0).rank, defaults), [ctx.inputs[3]] + inputs[1:], full)
    ctx.emit(Slice(None), inputs[:1] + full)


def register(r) -> None:
    r.add("Transpose", (1, 13, 21, 23, 24, 25), transpose)
    r.add("Gather", (1, 11, 13), gather)
    r.add("Concat", (4, 11, 13), concat)
    r.add("Slice", (1, 10, 11, 13), slice_)
