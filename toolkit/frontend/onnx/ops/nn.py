"""Neural-network ONNX ops -> MatMul, Gemm, Softmax, LogSoftmax, Hardmax, LayerNorm;
Dropout (inference: an identity, and a mask of ones when asked for).

Softmax, LogSoftmax and Hardmax before version 13 normalize the input flattened to 2-D at
``axis`` (default 1): over all the trailing dims at once. Each becomes Flatten, the op over
axis 1 and a view back, unless ``axis`` is the last dim, where both meanings agree.
"""
from __future__ import annotations

from ....ir.dtypes import BOOL
from ....ops.linalg import Gemm, MatMul
from ....ops.reduce import Hardmax, LayerNorm, LogSoftmax, Softmax
from ....ops.shape import Fill, Flatten, Identity, ShapeOf, ViewAs
from ..translate import TranslateContext


def matmul(ctx: TranslateContext) -> None:
    ctx.emit(MatMul())


def gemm(ctx: TranslateContext) -> None:
    beta = float(ctx.attr("beta", 1.0))
    # like onnx.reference, beta == 0 ignores C entirely (NaN or inf in C included)
    inputs = ctx.inputs[:2] + ([ctx.inputs[2]] if ctx.has(2) and beta != 0 else [])
    ctx.emit(Gemm(float(ctx.attr("alpha", 1.0)), beta, bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))),
             inputs)


SOFTMAX_FAMILY = {"Softmax": Softmax, "LogSoftmax": LogSoftmax, "Hardmax": Hardmax}


def softmax(ctx: TranslateContext) -> None:
    op = SOFTMAX_FAMILY[ctx.op_type]
    x = ctx.value(0)
    if ctx.version >= 13:
        ctx.emit(op(int(ctx.attr("axis", -1))))
        return
    axis = int(ctx.attr("axis", 1))
    if not -x.rank <= axis < max(x.rank, 1):
        ctx.fail(f"axis {axis} is out of range for rank {x.rank}")
    axis = axis + x.rank if axis < 0 else axis
    if axis == x.rank - 1:
        ctx.emit(op(axis))
        return
    flat, normed = ctx.tmp("flat"), ctx.tmp("normed")
    ctx.emit(Flatten(axis), outputs=[flat])
    ctx.emit(op(1), [flat], [normed])
    ctx.emit(ViewAs(x.shape), [normed])


def layer_norm(ctx: TranslateContext) -> None:
    if int(ctx.attr("stash_type", 1)) != 1:
        ctx.fail(f"stash_type {ctx.attr('stash_type')} is not supported (only 1, float32)")
    ctx.emit(LayerNorm(int(ctx.attr("axis", -1)), float(ctx.attr("epsilon", 1e-5))))


def dropout(ctx: TranslateContext) -> None:
    if ctx.version >= 12 and ctx.has(2):
        mode = ctx.value(2)
        vals = mode.int_contents()
        if vals is None:
            ctx.fail(f"training_mode '{mode.name}' must be a constant (symwasm compiles inference)")
        if any(vals):
            ctx.fail(f"training_mode '{mode.name}' is true; only inference (an identity) is supported")
    ctx.emit(Identity(), ctx.inputs[:1], ctx.outputs[:1])
    if len(ctx.outputs) > 1 and ctx.outputs[1]:
        shape = ctx.tmp("shape")
        ctx.emit(ShapeOf(), ctx.inputs[:1], [shape])
        ctx.emit(Fill(True, BOOL), [shape], [ctx.outputs[1]])


def register(r) -> None:
    r.add("MatMul", (1, 9, 13), matmul)
    r.add("Gemm", (7, 9, 11, 13), gemm)
    for op in SOFTMAX_FAMILY:
        r.add(op, (1, 11, 13), softmax)
    r.add("LayerNormalization", (17,), layer_norm)
    r.add("Dropout", (7, 10, 12, 13, 22), dropout)
