"""Recurrent ONNX ops -> Recurrent (RNN, GRU, LSTM).

What changed between versions: version 14 adds ``layout`` (batch-major X, Y and states);
version 22 only adds bfloat16, which symwasm does not carry. (Versions 1 and 3 carried
``output_sequence``; opset 7 is the oldest symwasm imports.)

Activation names are matched without regard to case, as onnxruntime does. ``activation_alpha``
and ``activation_beta`` are consumed in order by the activations that take them (Affine,
LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu), as onnxruntime reads them; values
left over are refused rather than guessed at (onnx.reference reads them by the activation's
position instead).
"""
from __future__ import annotations

from ....ops.rnn import ACTIVATIONS, CELLS, Activation, Recurrent
from ..translate import TranslateContext

VERSIONS = (7, 14, 22)


def activations(ctx: TranslateContext, cell: str, directions: int) -> tuple[Activation, ...]:
    """The node's activations (with their alpha and beta), every direction's in turn; also
    onnxruntime's DynamicQuantizeLSTM's (contrib_quant)."""
    spec = CELLS[cell]
    names = ctx.attr("activations")
    if names is None:
        return tuple(Activation(n) for n in spec.defaults) * directions
    want = spec.activations * directions
    if cell == "rnn" and directions == 1 and len(names) == 2:
        # RNN's schema default is [Tanh, Tanh] whatever the direction; onnxruntime reads a
        # one-way RNN's first function
        names = names[:1]
    if len(names) != want:
        ctx.fail(f"activations lists {len(names)} functions ({', '.join(names)}); {ctx.op_type} with "
                 f"{directions} direction(s) takes {want}")
    alphas = list(ctx.attr("activation_alpha") or ())
    betas = list(ctx.attr("activation_beta") or ())
    out = []
    for name in names:
        key = name.lower()
        if key not in ACTIVATIONS:
            ctx.fail(f"activation '{name}' is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
                     f"ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus")
        spec = ACTIVATIONS[key]
        alpha = float(alphas.pop(0)) if spec.alpha is not None and alphas else spec.alpha
        beta = float(betas.pop(0)) if spec.beta is not None and betas else spec.beta
        out.append(Activation(key, alpha or 0.0, beta or 0.0))
    for what, left in (("activation_alpha", alphas), ("activation_beta", betas)):
        if left:
            ctx.fail(f"{what} has {len(left)} value(s) more than the activations {', '.join(names)} take "
                     f"(they are consumed in order by the activations that take one)")
    return tuple(out)


def recurrent(ctx: TranslateContext) -> None:
    cell = ctx.op_type.lower()
    direction = ctx.attr("direction", "forward")
    hidden = ctx.attr("hidden_size")
    clip = ctx.attr("clip")
    if clip is not None and not clip > 0:
        ctx.fail(f"clip {clip} must be positive")
    op = Recurrent(cell, direction, activations(ctx, cell, 2 if direction == "bidirectional" else 1),
                   int(hidden) if hidden is not None else None, float(clip) if clip is not None else None,
                   linear_before_reset=bool(ctx.attr("linear_before_reset", 0)),
                   input_forget=bool(ctx.attr("input_forget", 0)),
                   layout=int(ctx.attr("layout", 0)))
    ctx.emit(op)


def register(r) -> None:
    # onnx.reference, which would fold an all-constant node, lacks sequence_lens, clip and
    # most activations
    for op_type in ("RNN", "GRU", "LSTM"):
        r.add(op_type, VERSIONS, recurrent, foldable=False)
