"""Elementwise ONNX ops -> ``Elementwise(fn, params)`` and ``Cast``.

An elementwise op that is only its scalar function is one line of :data:`ELEMENTWISE`: the
ONNX name, the core scalar function (toolkit.ops.elementwise.SCALAR), the op versions that
mean it (later versions of these ops only widen their types) and the float attributes that
become its parameters, in order (schema defaults filled in).
"""
from __future__ import annotations

import numpy as np
import onnx

from ....ir.dims import product
from ....ir.dtypes import FLOAT8E8M0, DType
from ....ops.elementwise import E8M0_ROUND_MODES, Cast, Elementwise
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
    "Mean": ("mean", (6, 8, 13)),
    "Equal": ("equal", (7, 11, 13, 19)),
    "Less": ("less", (7, 9, 13)),
    "Greater": ("greater", (7, 9, 13)),
    "LessOrEqual": ("less_equal", (12, 16)),
    "GreaterOrEqual": ("greater_equal", (12, 16)),
    "And": ("and", (7,)),
    "Or": ("or", (7,)),
    "Xor": ("xor", (7,)),
    "Not": ("not", (1,)),
    "BitwiseAnd": ("bitwise_and", (18,)),
    "BitwiseOr": ("bitwise_or", (18,)),
    "BitwiseXor": ("bitwise_xor", (18,)),
    "BitwiseNot": ("bitwise_not", (18,)),
    "Neg": ("neg", (6, 13)),
    "Abs": ("abs", (6, 13)),
    "Sign": ("sign", (9, 13)),
    "Ceil": ("ceil", (6, 13)),
    "Floor": ("floor", (6, 13)),
    "Round": ("round", (11, 22)),
    "IsNaN": ("isnan", (9, 13, 20)),
    "Relu": ("relu", (6, 13, 14)),
    "PRelu": ("prelu", (6, 7, 9, 16)),  # 6 only took slopes that 7's broadcasting takes too
    "Sqrt": ("sqrt", (6, 13)),
    "Reciprocal": ("reciprocal", (6, 13)),
    "Exp": ("exp", (6, 13)),
    "Log": ("log", (6, 13)),
    "Sigmoid": ("sigmoid", (6, 13)),
    "Tanh": ("tanh", (6, 13)),
    "Erf": ("erf", (9, 13)),
    **{op: (op.lower(), (7, 22)) for op in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan")},
    **{op: (op.lower(), (9, 22)) for op in ("Sinh", "Cosh", "Asinh", "Acosh", "Atanh")},
    "Where": ("where", (9, 16)),
    "LeakyRelu": ("leaky_relu", (6, 16), ("alpha",)),
    "ThresholdedRelu": ("thresholded_relu", (10, 22), ("alpha",)),
    "Elu": ("elu", (6, 22), ("alpha",)),
    "Selu": ("selu", (6, 22), ("alpha", "gamma")),
    "Celu": ("celu", (12, 28), ("alpha",)),
    "Shrink": ("shrink", (9,), ("lambd", "bias")),
    "Mish": ("mish", (18, 22)),
    "Swish": ("swish", (24,), ("alpha",)),
    "HardSigmoid": ("hard_sigmoid", (6, 22), ("alpha", "beta")),
    "HardSwish": ("hard_swish", (14, 22)),
    "Softsign": ("softsign", (1, 22)),
    "Softplus": ("softplus", (1, 22)),
}


def _plain(fn: str, attrs: tuple[str, ...]):
    def translate(ctx: TranslateContext) -> None:
        if fn == "equal" and ctx.value(0).dtype.is_string:
            if ctx.version < 19:
                ctx.fail(f"Equal-{ctx.version} does not take strings (Equal-19 does)")
            from .text import string_equal
            return string_equal(ctx)
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


def _cast_target(ctx: TranslateContext, code) -> DType:
    """The dtype a Cast goes to; string is refused here."""
    if int(code) == onnx.TensorProto.STRING:
        ctx.fail("cast to string is not supported")
    return ctx.dtype(code, "cast to")


def _cast(ctx: TranslateContext, to: DType) -> Cast:
    """Cast-19's ``saturate`` (default 1): only float8 targets read it. Cast-24's
    ``round_mode`` (default up): only float8 e8m0 reads it, so other targets keep the
    default (one kernel whatever the attribute says)."""
    saturate = bool(ctx.attr("saturate", 1)) if ctx.version >= 19 else True
    round_mode = "up"
    if to == FLOAT8E8M0 and ctx.version >= 24:
        round_mode = ctx.attr("round_mode", "up")
        if round_mode not in E8M0_ROUND_MODES:
            ctx.fail(f"round_mode {round_mode!r} is not one of {', '.join(E8M0_ROUND_MODES)}")
    return Cast(to, saturate, round_mode)


def cast(ctx: TranslateContext) -> None:
    ctx.emit(_cast(ctx, _cast_target(ctx, ctx.attr("to"))), [ctx.inputs[0]])


def cast_like(ctx: TranslateContext) -> None:
    """Cast to the second input's dtype (its values are not read)."""
    ctx.emit(_cast(ctx, ctx.value(1).dtype), [ctx.inputs[0]])


def mod(ctx: TranslateContext) -> None:
    fmod = int(ctx.attr("fmod", 0))
    if fmod not in (0, 1):
        ctx.fail(f"attribute fmod must be 0 or 1, got {fmod}")
    if fmod == 0 and ctx.version < 28 and ctx.value(0).dtype.is_float:
        ctx.fail(f"fmod=0 on {ctx.value(0).dtype} needs Mod-28 (Mod-{ctx.version} takes floats only with fmod=1)")
    ctx.emit(Elementwise("mod", (bool(fmod),)))


def bitshift(ctx: TranslateContext) -> None:
    direction = ctx.attr("direction")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("LEFT", "RIGHT"):
        ctx.fail(f"attribute direction must be LEFT or RIGHT, got {direction!r}")
    if ctx.version < 28 and ctx.value(0).dtype.is_signed:
        ctx.fail(f"BitShift-{ctx.version} takes unsigned integers only, got {ctx.value(0).dtype}")
    ctx.emit(Elementwise("bitshift", (direction == "LEFT",)))


def isinf(ctx: TranslateContext) -> None:
    ctx.emit(Elementwise("isinf", (bool(ctx.attr("detect_positive", 1)), bool(ctx.attr("detect_negative", 1)))))


def gelu(ctx: TranslateContext) -> None:
    approximate = ctx.attr("approximate", "none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate not in ("none", "tanh"):
        ctx.fail(f"attribute approximate must be 'none' or 'tanh', got {approximate!r}")
    ctx.emit(Elementwise("gelu", (approximate == "tanh",)))


def identity(ctx: TranslateContext) -> None:
    ctx.emit(Identity())


def register(r) -> None:
    for onnx_op, (fn, versions, *attrs) in ELEMENTWISE.items():
        r.add(onnx_op, versions, _plain(fn, attrs[0] if attrs else ()))
    r.add("Clip", (6, 11, 12, 13), clip)
    r.add("Cast", (6, 9, 13, 19, 21, 23, 24, 25, 28), cast)
    r.add("CastLike", (15, 19, 21, 23, 24, 25), cast_like)
    r.add("Mod", (10, 13, 28), mod)
    r.add("BitShift", (11, 28), bitshift)
    r.add("IsInf", (10, 20), isinf)
    r.add("Gelu", (20,), gelu)
    r.add("Identity", (1, 13, 14, 16, 19, 21, 23, 24, 25), identity)
