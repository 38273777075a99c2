"""Shape ONNX ops -> views (Reshape, Flatten, Squeeze, Unsqueeze), ShapeOf, Size, Expand and
Fill. Squeeze and Unsqueeze take their axes as an attribute before version 13 and as a
constant input from 13."""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import FLOAT32, dtype_of_numpy
from ....ops.shape import Expand, Fill, Flatten, Reshape, ShapeOf, Size, Squeeze, Unsqueeze
from ..translate import TranslateContext


def shape(ctx: TranslateContext) -> None:
    # Shape-15 adds start/end, which clamp exactly like Python slicing
    ctx.emit(ShapeOf(int(ctx.attr("start", 0)), ctx.attr("end")))


def size(ctx: TranslateContext) -> None:
    ctx.emit(Size())


def reshape(ctx: TranslateContext) -> None:
    # allowzero exists from version 14
    ctx.emit(Reshape(bool(ctx.attr("allowzero", 0))), ctx.inputs[:2])


def flatten(ctx: TranslateContext) -> None:
    ctx.emit(Flatten(int(ctx.attr("axis", 1))))


def _axes(ctx: TranslateContext) -> tuple[int, ...] | None:
    if ctx.version < 13:
        return ctx.ints("axes")
    return ctx.const_ints(1, "axes")


def squeeze(ctx: TranslateContext) -> None:
    ctx.emit(Squeeze(_axes(ctx)), ctx.inputs[:1])


def unsqueeze(ctx: TranslateContext) -> None:
    axes = _axes(ctx)
    if axes is None:
        ctx.fail("axes are required")
    ctx.emit(Unsqueeze(axes), ctx.inputs[:1])


def expand(ctx: TranslateContext) -> None:
    ctx.emit(Expand())


def constant_of_shape(ctx: TranslateContext) -> None:
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if value.size != 1:
        ctx.fail(f"value must hold one element, has {value.size}")
    try:
        dt = dtype_of_numpy(value.dtype)
    except KeyError:
        ctx.fail(f"value has dtype {value.dtype}, which is not supported")
    ctx.emit(Fill(value.item() if dt != FLOAT32 else float(value[0]), dt))


def register(r) -> None:
    r.add("Shape", (1, 13, 15, 19, 21, 23, 24, 25), shape)
    r.add("Size", (1, 13, 19, 21, 23, 24, 25), size)
    r.add("Reshape", (5, 13, 14, 19, 21, 23, 24, 25), reshape)
    r.add("Flatten", (1, 9, 11, 13, 21, 23, 24, 25), flatten)
    r.add("Squeeze", (1, 11, 13, 21, 23, 24, 25), squeeze)
    r.add("Unsqueeze", (1, 11, 13, 21, 23, 24, 25), unsqueeze)
    r.add("Expand", (8, 13), expand)
    r.add("ConstantOfShape", (9, 20, 21, 23, 24, 25), constant_of_shape)
