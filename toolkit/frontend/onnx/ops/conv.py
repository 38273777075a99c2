"""Convolution and pooling ONNX ops -> Conv, Pool, Reduce (GlobalAveragePool), BatchNorm,
LRN. MaxPool gains ceil_mode and dilations at version 10, AveragePool ceil_mode at 10 and
dilations at 19; BatchNormalization loses ``spatial`` at 9 and gains training mode at 14."""
from __future__ import annotations

from ....ir.dims import fmt_shape
from ....ops.conv import LRN, BatchNorm, Conv, Pool, Window2D
from ....ops.reduce import Reduce
from ..translate import TranslateContext


def _pair(ctx: TranslateContext, name: str) -> tuple[int, ...]:
    return ctx.ints(name) or (1, 1)


def _window(ctx: TranslateContext, kernel: tuple[int, ...]) -> Window2D:
    x = ctx.value(0)
    if x.rank != 4:
        ctx.fail(f"input '{x.name}' has shape {x.describe()}; only 2-D {ctx.op_type} (rank 4, NCHW) is supported")
    auto_pad = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    return Window2D(tuple(kernel), _pair(ctx, "strides"), _pair(ctx, "dilations"), ctx.ints("pads") or (0, 0, 0, 0),
                    auto_pad)


def conv(ctx: TranslateContext) -> None:
    w = ctx.value(1)
    kernel = ctx.ints("kernel_shape")
    if kernel is None:
        if not all(isinstance(k, int) for k in w.shape[2:]):
            ctx.fail(f"weight '{w.name}' has kernel dims {fmt_shape(w.shape[2:])}; they must be known "
                     f"at compile time")
        kernel = tuple(int(k) for k in w.shape[2:])
    ctx.emit(Conv(_window(ctx, kernel), int(ctx.attr("group", 1))))


def pool(ctx: TranslateContext) -> None:
    kernel = ctx.ints("kernel_shape")
    if kernel is None:
        ctx.fail("attribute 'kernel_shape' is required")
    kind = "max" if ctx.op_type == "MaxPool" else "avg"
    ctx.emit(Pool(kind, _window(ctx, kernel), bool(ctx.attr("ceil_mode", 0)),
                  bool(ctx.attr("count_include_pad", 0))))


def global_average_pool(ctx: TranslateContext) -> None:
    x = ctx.value(0)
    if x.rank < 3:
        ctx.fail(f"input '{x.name}' has shape {x.describe()}; expected (N, C, spatial...)")
    # [N, C, 1, 1] is a mean over the spatial axes with the dims kept
    ctx.emit(Reduce("mean", tuple(range(2, x.rank)), True))


def batch_norm(ctx: TranslateContext) -> None:
    if ctx.version < 9 and int(ctx.attr("spatial", 1)) != 1:
        ctx.fail("spatial=0 (per-element statistics) is not supported")
    if int(ctx.attr("training_mode", 0)):
        ctx.fail("training_mode=1 is not supported (inference only)")
    extra = [o for o in ctx.outputs[1:] if o]
    if extra:
        ctx.fail(f"outputs {', '.join(repr(o) for o in extra)} exist only in training mode; "
                 f"inference computes Y alone")
    ctx.emit(BatchNorm(float(ctx.attr("epsilon", 1e-5))), ctx.inputs[:5], ctx.outputs[:1])


def lrn(ctx: TranslateContext) -> None:
    if ctx.attr("size") is None:
        ctx.fail("attribute 'size' is required")
    ctx.emit(LRN(int(ctx.attr("size")), float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75)),
                 float(ctx.attr("bias", 1.0))))


def register(r) -> None:
    r.add("Conv", (1, 11, 22), conv)
    r.add("MaxPool", (1, 8, 10, 11, 12, 22), pool)
    r.add("AveragePool", (7, 10, 11, 19, 22), pool)
    r.add("GlobalAveragePool", (1, 22), global_average_pool)
    r.add("BatchNormalization", (7, 9, 14, 15), batch_norm)
    r.add("LRN", (1, 13), lrn)
