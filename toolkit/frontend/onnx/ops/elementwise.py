"""Elementwise ONNX ops -> ``Elementwise(fn, params)`` and ``Cast``.

An elementwise op that is only its scalar function is one line of :data:`ELEMENTWISE`: the
ONNX name, the core scalar function (toolkit.ops.elementwise.SCALAR), the op versions that
mean it (later versions of these ops only widen their types) and the float attributes that
become its parameters, in order (schema defaults filled in).
"""
from __future__ import annotations

import numpy as np

from ....ir.dims import product
from ....ops.elementwise import Cast, Elementwise
from ....ops.shape import Identity
from ..translate import TranslateContext

ELEMENTWISE: dict[str, tuple[str, tuple[int, ...]] | tuple[str, tuple[int, ...], tuple[str, ...]]] = {
    "Add": ("add", (7, 13, 14)),
    "Sub": ("sub", (7, 13, 14)),
    "Mul": ("mul", (7, 13, 14)),
    "Div": ("div", (7, 13, 14)),
    "Pow": ("pow", (7, 12, 13, 15)),
    "Max": ("max", (6, 8, 12, 13)),
    "Min": ("min", (6, 8, 12, 13)),
    "Sum": ("add", (6, 8, 13)),
    "Equal": ("equal", (7, 11, 13, 19)),
    "Less": ("less", (7, 9, 13)),
    "Greater": ("greater", (7, 9, 13)),
    "LessOrEqual": ("less_equal", (12, 16)),
    "GreaterOrEqual": ("greater_equal", (12, 16)),
    "And": ("and", (7,)),
    "Or": ("or", (7,)),
    "Xor": ("xor", (7,)),
    "Not": ("not", (1,)),
    "Neg": ("neg", (6, 13)),
    "Abs": ("abs", (6, 13)),
    "Relu": ("relu", (6, 13, 14)),
    "Sqrt": ("sqrt", (6, 13)),
    "Reciprocal": ("reciprocal", (6, 13)),
    "Exp": ("exp", (6, 13)),
    "Log": ("log", (6, 13)),
    "Sigmoid": ("sigmoid", (6, 13)),
    "Tanh": ("tanh", (6, 13)),
    "Erf": ("erf", (9, 13)),
    "Where": ("where", (9, 16)),
    "LeakyRelu": ("leaky_relu", (6, 16), ("alpha",)),
    "HardSigmoid": ("hard_sigmoid", (6, 22), ("alpha", "beta")),
    "HardSwish": ("hard_swish", (14, 22)),
    "Softsign": ("softsign", (1, 22)),
    "Softplus": ("softplus", (1, 22)),
}


def _plain(fn: str, attrs: tuple[str, ...]):
    def translate(ctx: TranslateContext) -> None:
        ctx.emit(Elementwise(fn, tuple(float(ctx.attr(a)) for a in attrs)), [i for i in ctx.inputs if i])
    return translate


def clip(ctx: TranslateContext) -> None:
    """Clip-6 has its bounds as attributes, Clip-11 and later as optional inputs."""
    x = ctx.value(0)
    if ctx.version < 11:
        lo = ctx.constant("min", np.array(ctx.attr("min", -3.4028234663852886e38), x.dtype.np))
        hi = ctx.constant("max", np.array(ctx.attr("max", 3.4028234663852886e38), x.dtype.np))
        ctx.emit(Elementwise("clip", (True, True)), [ctx.inputs[0], lo, hi])
        return
    bounds = []
    for i in (1, 2):
        v = ctx.value(i)
        if v is not None:
            if v.dtype != x.dtype:
                ctx.fail(f"bound '{v.name}' is {v.dtype}, input is {x.dtype}")
            if v.rank != 0 and product(v.shape) != 1:
                ctx.fail(f"bound '{v.name}' must be a scalar, has shape {v.describe()}")
            bounds.append(v.name)
    ctx.emit(Elementwise("clip", (ctx.has(1), ctx.has(2))), [ctx.inputs[0]] + bounds)


def cast(ctx: TranslateContext) -> None:
    ctx.emit(Cast(ctx.dtype(ctx.attr("to"), "cast to")))


def identity(ctx: TranslateContext) -> None:
    ctx.emit(Identity())


def register(r) -> None:
    for onnx_op, (fn, versions, *attrs) in ELEMENTWISE.items():
        r.add(onnx_op, versions, _plain(fn, attrs[0] if attrs else ()))
    r.add("Clip", (6, 11, 12, 13), clip)
    r.add("Cast", (6, 9, 13, 19, 21, 23, 24, 25), cast)
    r.add("Identity", (1, 13, 14, 16, 19, 21, 23, 24, 25), identity)
