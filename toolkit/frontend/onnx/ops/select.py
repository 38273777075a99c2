"""ONNX ops that select or rank elements: Unique, Compress, TopK, NonMaxSuppression, OneHot.

What changed between versions: Compress-11 and OneHot-11 take negative axes, and OneHot-11
counts negative indices from the end (OneHot-9: they match nothing); TopK-1 takes k as an
attribute, TopK-10 as an input, TopK-11 adds ``largest`` and ``sorted`` and integer inputs;
the versions 24 and 28 only add bfloat16, which symwasm does not carry.
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import FLOATS, names
from ....ops.select import Compress, NonMaxSuppression, OneHot, TopK, Unique
from ..translate import TranslateContext


def _flag(ctx: TranslateContext, name: str, default: int) -> bool:
    v = int(ctx.attr(name, default))
    if v not in (0, 1):
        ctx.fail(f"attribute {name} = {v}; it must be 0 or 1")
    return bool(v)


def unique(ctx: TranslateContext) -> None:
    axis = ctx.attr("axis")
    ctx.emit(Unique(None if axis is None else int(axis), _flag(ctx, "sorted", 1)))


def compress(ctx: TranslateContext) -> None:
    axis = ctx.attr("axis")
    if axis is not None and int(axis) < 0 and ctx.version < 11:
        ctx.fail(f"axis = {axis}: Compress-{ctx.version} takes no negative axis (Compress-11 does)")
    ctx.emit(Compress(None if axis is None else int(axis)))


def topk(ctx: TranslateContext) -> None:
    inputs = ctx.inputs
    if ctx.version < 11:
        x = ctx.value(0)
        if x is not None and x.dtype not in FLOATS:
            ctx.fail(f"input '{x.name}' has dtype {x.dtype}; TopK-{ctx.version} takes {names(FLOATS)} "
                     f"(integers need TopK-11)")
    if ctx.version == 1:
        k = ctx.attr("k")
        if k is None:
            ctx.fail("attribute k is required")
        inputs = [ctx.inputs[0], ctx.constant("k", np.array([int(k)], np.int64))]
    largest = _flag(ctx, "largest", 1) if ctx.version >= 11 else True
    if ctx.version >= 11:
        _flag(ctx, "sorted", 1)  # sorted=0 leaves the order free: sorted output is conformant
    ctx.emit(TopK(int(ctx.attr("axis", -1)), largest), inputs)


def nms(ctx: TranslateContext) -> None:
    ctx.emit(NonMaxSuppression(_flag(ctx, "center_point_box", 0)))


def onehot(ctx: TranslateContext) -> None:
    axis = int(ctx.attr("axis", -1))
    ctx.emit(OneHot(axis, wrap_negative=ctx.version >= 11))


def register(r) -> None:
    # onnx.reference's Unique is wrong for sorted=0 (it keeps the sorted Y when Y is the
    # only output, and takes Y along axis 0): never fold it
    r.add("Unique", (11, 28), unique, foldable=False)
    r.add("Compress", (9, 11, 28), compress)
    r.add("TopK", (1, 10, 11, 24), topk)
    r.add("NonMaxSuppression", (10, 11), nms)
    # onnx.reference's OneHot counts negative indices from the end in OneHot-9 too, and
    # takes a fractional depth's ceiling: never fold it
    r.add("OneHot", (9, 11, 28), onehot, foldable=False)
