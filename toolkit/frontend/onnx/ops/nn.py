"""Neural-network ONNX ops -> MatMul, Gemm, Softmax, LogSoftmax, Hardmax, LayerNorm;
Dropout (inference: an identity, and a mask of ones when asked for).

Dropout-12 takes training_mode as an input. Training with a ratio other than 0 drops at
random, which symwasm does not do: refused at compile time when both are known, otherwise
checked at run time by an Assert on "training and ratio != 0", so a run that asks for
random dropping fails naming the node instead of returning the input.

Softmax, LogSoftmax and Hardmax before version 13 normalize the input flattened to 2-D at
``axis`` (default 1): over all the trailing dims at once. Each becomes Flatten, the op over
axis 1 and a view back, unless ``axis`` is the last dim, where both meanings agree.
"""
from __future__ import annotations

import numpy as np

from ....ir import dims as D
from ....ir.dtypes import BOOL, FLOATS
from ....ops.datadep import Assert
from ....ops.elementwise import Elementwise
from ....ops.linalg import Gemm, MatMul
from ....ops.reduce import Hardmax, LayerNorm, LogSoftmax, Softmax
from ....ops.shape import Fill, Flatten, Identity, ShapeOf, ViewAs
from ..translate import CONTRIB, TranslateContext


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


DROPOUT_RATIO = 0.5  # Dropout-12's default ratio


def dropout(ctx: TranslateContext) -> None:
    if ctx.version >= 12 and ctx.has(2):
        _refuse_training(ctx)
    ctx.emit(Identity(), ctx.inputs[:1], ctx.outputs[:1])
    if len(ctx.outputs) > 1 and ctx.outputs[1]:
        shape = ctx.tmp("shape")
        ctx.emit(ShapeOf(), ctx.inputs[:1], [shape])
        ctx.emit(Fill(True, BOOL), [shape], [ctx.outputs[1]])


def _refuse_training(ctx: TranslateContext) -> None:
    """Dropout-12's output is its input unless training_mode (input 2) is true and ratio
    (input 1) is not 0: refuse that now when both are known, else check it at run time."""
    mode, ratio = ctx.value(2), ctx.value(1)
    if mode.dtype != BOOL:
        ctx.fail(f"training_mode '{mode.name}' has dtype {mode.dtype}; it must be bool")
    if ratio is not None and ratio.dtype not in FLOATS:
        ctx.fail(f"ratio '{ratio.name}' has dtype {ratio.dtype}; it must be a float")
    for v, what in ((mode, "training_mode"), (ratio, "ratio")):
        if v is not None and D.product(v.shape) != 1:
            ctx.fail(f"{what} '{v.name}' must be a scalar, has shape {D.fmt_shape(v.shape)}")
    training = mode.int_contents()
    rate = DROPOUT_RATIO if ratio is None else (float(ratio.const.reshape(-1)[0]) if ratio.const is not None
                                                else None)
    if (training is not None and not training[0]) or rate == 0:
        return
    named = "ratio (the default)" if ratio is None else f"ratio '{ratio.name}'"
    said_ratio = f"{named} is {rate:g}" if rate is not None else f"{named} is not 0"
    reason = "training-mode dropout (random) is not supported; symwasm compiles inference"
    if training is not None and rate is not None:
        ctx.fail(f"training_mode '{mode.name}' is true and {said_ratio}: {reason}")
    flags = [] if training is not None else [mode.name]
    if rate is None:
        zero, nonzero = ctx.tmp("ratio_is_0"), ctx.tmp("ratio_not_0")
        ctx.emit(Elementwise("equal"), [ratio.name, ctx.constant("0", np.zeros((), ratio.dtype.np))], [zero])
        ctx.emit(Elementwise("not"), [zero], [nonzero])  # NaN counts as not 0
        flags.append(nonzero)
    refused = flags[0]
    if len(flags) == 2:
        refused = ctx.tmp("refused")
        ctx.emit(Elementwise("and"), flags, [refused])
    ctx.emit(Assert(f"at run time, training_mode '{mode.name}' is true and {said_ratio}: {reason}"), [refused], [])


def register(r) -> None:
    r.add("MatMul", (1, 9, 13), matmul)
    r.add("Gemm", (7, 9, 11, 13), gemm)
    for op in SOFTMAX_FAMILY:
        r.add(op, (1, 11, 13), softmax)
    r.add("LayerNormalization", (17,), layer_norm)
    # onnxruntime's own LayerNormalization-1 of the default domain, which its transformer
    # optimizer writes into models of opsets below 17: the semantics ONNX adopted at 17
    # (translate.ORT_DEFAULT_DOMAIN routes it here; layer_norm gives 17's defaults)
    r.add("LayerNormalization", (1,), layer_norm, foldable=False, domain=CONTRIB)
    r.add("Dropout", (7, 10, 12, 13, 22), dropout)
