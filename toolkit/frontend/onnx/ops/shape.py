"""Shape ONNX ops -> views (Reshape, Flatten, Squeeze, Unsqueeze), ShapeOf, Size, Expand and
Fill. Squeeze and Unsqueeze take their axes as an attribute before version 13 and as an
input from 13 (known at compile time or not)."""
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


def known_axes(ctx: TranslateContext, i: int) -> tuple[int, ...] | None:
    """The axes in input ``i`` (given) when known at compile time (an empty tensor's are
    ()), else None: the core op then takes the input and reads them at run time."""
    v = ctx.value(i)
    vals = v.int_contents()
    if vals is None and v.shape == (0,):
        return ()
    if vals is not None and all(isinstance(a, int) for a in vals):
        return tuple(int(a) for a in vals)
    return None


def _squeeze_op(ctx: TranslateContext, op) -> None:
    """Squeeze or Unsqueeze: axes from the attribute before 13, from input 1 after."""
    if ctx.version < 13:
        axes = ctx.ints("axes")
        # an empty list squeezes every dim of 1 before 13 (as onnx.reference reads it)
        ctx.emit(op(None if op is Squeeze and not axes else axes), ctx.inputs[:1])
        return
    axes = known_axes(ctx, 1) if ctx.has(1) else None
    ctx.emit(op(axes), ctx.inputs[:2] if ctx.has(1) and axes is None else ctx.inputs[:1])


def squeeze(ctx: TranslateContext) -> None:
    _squeeze_op(ctx, Squeeze)


def unsqueeze(ctx: TranslateContext) -> None:
    _squeeze_op(ctx, Unsqueeze)


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
