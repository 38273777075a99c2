"""Convolution, pooling and normalization ONNX ops -> Conv, ConvTranspose, DeformConv,
Col2Im, Pool, MaxUnpool, Reduce (the global pools), BatchNorm, LRN, GroupNorm, LpNorm.

Versions: MaxPool gains Indices and storage_order at 8, ceil_mode and dilations at 10,
int8/uint8 at 12; AveragePool ceil_mode at 10 and dilations at 19; LpPool's p is a float
before 2, and it gains ceil_mode and dilations at 18; BatchNormalization loses ``spatial``
at 9 and gains training mode at 14 (Y by the batch's statistics, composed of core ops; the
training outputs of 7 and 9 are refused, their meaning being loose); GroupNormalization
scales per group at 18 and per channel from 21. Later versions add dtypes only.
DeformConv (19, 22) is supported in 2-D only, as onnx.reference and onnxruntime implement
it; Col2Im (18) in any rank, its image and block shapes known or read at run time.
"""
from __future__ import annotations

import numpy as np

from ....ir.dims import fmt_shape
from ....ir.dtypes import BFLOAT16, FLOAT16, FLOAT32
from ....ops.conv import (LRN, BatchNorm, Col2Im, Conv, ConvTranspose, DeformConv, GroupNorm, LpNorm,
                          MaxUnpool, Pool, SlidingWindow)
from ....ops.elementwise import Cast, Elementwise
from ....ops.reduce import Reduce
from ....ops.shape import Squeeze
from ..translate import TranslateContext


def _window(ctx: TranslateContext, kernel: tuple[int, ...]) -> SlidingWindow:
    n = len(kernel)
    return SlidingWindow(tuple(kernel), ctx.ints("strides") or (1,) * n, ctx.ints("dilations") or (1,) * n,
                         ctx.ints("pads") or (0,) * (2 * n), ctx.attr("auto_pad", "NOTSET") or "NOTSET")


def conv_window(ctx: TranslateContext, w_index: int = 1) -> SlidingWindow:
    """The window of a convolution whose weight is input ``w_index``: its kernel is
    kernel_shape, or the weight's spatial dims, which must then be static."""
    w = ctx.value(w_index)
    kernel = ctx.ints("kernel_shape")
    if kernel is None:
        if not all(isinstance(k, int) for k in w.shape[2:]):
            ctx.fail(f"weight '{w.name}' has kernel dims {fmt_shape(w.shape[2:])}; they must be known "
                     f"at compile time")
        kernel = tuple(int(k) for k in w.shape[2:])
    return _window(ctx, kernel)


def conv(ctx: TranslateContext) -> None:
    ctx.emit(Conv(conv_window(ctx), int(ctx.attr("group", 1))))


def conv_transpose(ctx: TranslateContext) -> None:
    ctx.emit(ConvTranspose(conv_window(ctx), int(ctx.attr("group", 1)),
                           ctx.ints("output_padding") or (), ctx.ints("output_shape") or ()))


def deform_conv(ctx: TranslateContext) -> None:
    ctx.emit(DeformConv(conv_window(ctx), int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))))


def col2im(ctx: TranslateContext) -> None:
    image = ctx.value(1)
    n = image.shape[0] if image.rank == 1 and isinstance(image.shape[0], int) else 0
    ctx.emit(Col2Im(ctx.ints("strides") or (1,) * n, ctx.ints("dilations") or (1,) * n,
                    ctx.ints("pads") or (0,) * (2 * n)))


def _pool_kernel(ctx: TranslateContext) -> tuple[int, ...]:
    kernel = ctx.ints("kernel_shape")
    if kernel is None:
        ctx.fail("attribute 'kernel_shape' is required")
    return kernel


def pool(ctx: TranslateContext) -> None:
    kind = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}[ctx.op_type]
    ctx.emit(Pool(kind, _window(ctx, _pool_kernel(ctx)), bool(ctx.attr("ceil_mode", 0)),
                  bool(ctx.attr("count_include_pad", 0)), float(ctx.attr("p", 2)),
                  int(ctx.attr("storage_order", 0))))


def max_unpool(ctx: TranslateContext) -> None:
    kernel = _pool_kernel(ctx)
    ctx.emit(MaxUnpool(_window(ctx, kernel)))


def _spatial_axes(ctx: TranslateContext) -> tuple[int, ...]:
    x = ctx.value(0)
    if x.rank < 3:
        ctx.fail(f"input '{x.name}' has shape {x.describe()}; expected (N, C, spatial...)")
    return tuple(range(2, x.rank))


def global_pool(ctx: TranslateContext) -> None:
    # [N, C, 1, ...] is a reduction over the spatial axes with the dims kept
    kind = "mean" if ctx.op_type == "GlobalAveragePool" else "max"
    ctx.emit(Reduce(kind, _spatial_axes(ctx), True))


def global_lp_pool(ctx: TranslateContext) -> None:
    """(sum |x| ** p) ** (1 / p) over the spatial axes."""
    axes = _spatial_axes(ctx)
    p = float(ctx.attr("p", 2))
    if not p > 0:
        ctx.fail(f"p={p} must be positive")
    dt = ctx.value(0).dtype.np
    absolute, powered, total = ctx.tmp("abs"), ctx.tmp("pow"), ctx.tmp("sum")
    ctx.emit(Elementwise("abs"), ctx.inputs[:1], [absolute])
    ctx.emit(Elementwise("pow"), [absolute, ctx.constant("p", np.array(p, dt))], [powered])
    ctx.emit(Reduce("sum", axes, True), [powered], [total])
    ctx.emit(Elementwise("pow"), [total, ctx.constant("1/p", np.array(1 / p, dt))], ctx.outputs[:1])


def batch_norm(ctx: TranslateContext) -> None:
    if ctx.version < 9 and int(ctx.attr("spatial", 1)) != 1:
        ctx.fail("spatial=0 (per-element statistics) is not supported")
    training = ctx.version >= 14 and int(ctx.attr("training_mode", 0))
    extra = [o for o in ctx.outputs[1:] if o]
    if extra and ctx.version < 14:
        ctx.fail(f"outputs {', '.join(repr(o) for o in extra)} are BatchNormalization-{ctx.version}'s training "
                 f"outputs, which are not supported: the spec leaves open which statistics normalize Y and "
                 f"what saved_var holds (BatchNormalization-14's training_mode defines them)")
    if extra and not training:
        ctx.fail(f"outputs {', '.join(repr(o) for o in extra)} exist only in training mode; "
                 f"inference computes Y alone")
    if training:
        _batch_norm_training(ctx)
        return
    ctx.emit(BatchNorm(float(ctx.attr("epsilon", 1e-5))), ctx.inputs[:5], ctx.outputs[:1])


def _batch_norm_training(ctx: TranslateContext) -> None:
    """Y normalized by the batch's own statistics over every axis but the channel axis (the
    population variance), and the running statistics blended with them by momentum. The
    statistics of float16 and bfloat16 inputs are computed in float32, as
    BatchNormalization-15 says; the running ones have input_mean's dtype (T2)."""
    x, mean_in, var_in = ctx.value(0), ctx.value(3), ctx.value(4)
    if x.rank < 2:
        ctx.fail(f"input '{x.name}' has shape {x.describe()}; expected (N, C, ...)")
    axes = (0,) + tuple(range(2, x.rank))
    data = x.name
    if x.dtype in (FLOAT16, BFLOAT16):
        data = ctx.tmp("float32")
        ctx.emit(Cast(FLOAT32), [x.name], [data])
    mean_kept, centred, squared, mean, var = (ctx.tmp(w) for w in ("mean_kept", "centred", "squared", "mean", "var"))
    ctx.emit(Reduce("mean", axes, True), [data], [mean_kept])
    ctx.emit(Elementwise("sub"), [data, mean_kept], [centred])
    ctx.emit(Elementwise("mul"), [centred, centred], [squared])
    ctx.emit(Reduce("mean", axes, False), [squared], [var])
    ctx.emit(Squeeze(axes), [mean_kept], [mean])
    ctx.emit(BatchNorm(float(ctx.attr("epsilon", 1e-5))), [x.name] + ctx.inputs[1:3] + [mean, var], ctx.outputs[:1])
    momentum = float(ctx.attr("momentum", 0.9))
    for k, (given, current) in enumerate(((mean_in, mean), (var_in, var)), start=1):
        if k >= len(ctx.outputs) or not ctx.outputs[k]:
            continue
        dt = given.dtype
        if ctx.graph.values[current].dtype != dt:
            cast = ctx.tmp("cast")
            ctx.emit(Cast(dt), [current], [cast])
            current = cast
        kept, added = ctx.tmp("kept"), ctx.tmp("added")
        ctx.emit(Elementwise("mul"), [given.name, ctx.constant("momentum", np.array(momentum, dt.np))], [kept])
        ctx.emit(Elementwise("mul"), [current, ctx.constant("1-momentum", np.array(1 - momentum, dt.np))],
                 [added])
        ctx.emit(Elementwise("add"), [kept, added], [ctx.outputs[k]])


def lrn(ctx: TranslateContext) -> None:
    if ctx.attr("size") is None:
        ctx.fail("attribute 'size' is required")
    ctx.emit(LRN(int(ctx.attr("size")), float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75)),
                 float(ctx.attr("bias", 1.0))))


def instance_norm(ctx: TranslateContext) -> None:
    ctx.emit(GroupNorm(float(ctx.attr("epsilon", 1e-5))))


def group_norm(ctx: TranslateContext) -> None:
    if ctx.attr("num_groups") is None:
        ctx.fail("attribute 'num_groups' is required")
    if int(ctx.attr("stash_type", 1)) != 1:
        ctx.fail(f"stash_type {ctx.attr('stash_type')} is not supported (only 1, float32)")
    ctx.emit(GroupNorm(float(ctx.attr("epsilon", 1e-5)), int(ctx.attr("num_groups")), ctx.version < 21))


def lp_norm(ctx: TranslateContext) -> None:
    ctx.emit(LpNorm(int(ctx.attr("axis", -1)), int(ctx.attr("p", 2))))


def register(r) -> None:
    r.add("Conv", (1, 11, 22), conv)
    r.add("ConvTranspose", (1, 11, 22), conv_transpose)
    r.add("Col2Im", (18,), col2im)
    r.add("DeformConv", (19, 22), deform_conv)
    r.add("MaxPool", (1, 8, 10, 11, 12, 22), pool)
    r.add("AveragePool", (7, 10, 11, 19, 22), pool)
    r.add("LpPool", (2, 11, 18, 22), pool)
    r.add("MaxUnpool", (9, 11, 22), max_unpool)
    r.add("GlobalAveragePool", (1, 22), global_pool)
    r.add("GlobalMaxPool", (1, 22), global_pool)
    r.add("GlobalLpPool", (2, 22), global_lp_pool)
    r.add("BatchNormalization", (7, 9, 14, 15), batch_norm)
    r.add("LRN", (1, 13), lrn)
    r.add("InstanceNormalization", (6, 22), instance_norm)
    r.add("GroupNormalization", (18, 21), group_norm)
    r.add("LpNormalization", (1, 22), lp_norm)
