"""ONNX random ops -> RandomUniform, RandomNormal, Multinomial (toolkit.ops.random), and
Bernoulli as a RandomUniformLike compared with its probabilities.

Versions: each op's 22 adds only bfloat16 (outputs, and the inputs of the Like forms,
Multinomial and Bernoulli), so version 1 (7 for Multinomial, 15 for Bernoulli) refuses a
bfloat16 dtype. The ``seed`` attribute (a float) becomes the op's stream key; without one
the key comes from the node's name, and every run of the module repeats the same numbers
(see :mod:`toolkit.ops.random` for the generator and why). None of these nodes is folded at
compile time, even with constant inputs: onnx.reference's draws would become constants.

Bernoulli has its own translation, not its ONNX function: the function computes
``Greater(RandomUniformLike(p), p)``, which is 1 with probability 1 - p, the opposite of
the op's documentation (and of onnx.reference). Here it is ``Less(u, p)``, 1 with
probability p; u is drawn in p's dtype, or in float32 for float16 and bfloat16 (whose
coarse grid would bias the comparison).
"""
from __future__ import annotations

from ....ir.dtypes import BFLOAT16, FLOAT32, FLOAT64, FLOATS, INDEX, DType
from ....ops.elementwise import Cast, Elementwise
from ....ops.random import Multinomial, RandomNormal, RandomUniform, stream_key
from ..translate import TranslateContext


def _key(ctx: TranslateContext) -> int:
    seed = ctx.attr("seed")
    return stream_key(None if seed is None else float(seed), ctx.name)


def _allowed(ctx: TranslateContext, dtype: DType, what: str) -> DType:
    """``dtype`` if this version of the op takes it for ``what`` (bfloat16 from version 22)."""
    if dtype not in FLOATS:
        ctx.fail(f"{what} is {dtype}; {ctx.op_type} takes {', '.join(d.name for d in FLOATS)}")
    if dtype == BFLOAT16 and ctx.version < 22:
        ctx.fail(f"{what} is bfloat16, which {ctx.op_type}-{ctx.version} does not take (version 22 does)")
    return dtype


def _float_dtype(ctx: TranslateContext) -> DType:
    """The output dtype: the ``dtype`` attribute, or for the Like forms the input's."""
    code = ctx.attr("dtype")
    if code is not None:
        return _allowed(ctx, ctx.dtype(int(code), "dtype"), "dtype")
    x = ctx.value(0)
    if x.dtype not in FLOATS:
        ctx.fail(f"input '{x.name}' is {x.dtype} and there is no dtype attribute; the output must be a float type")
    return _allowed(ctx, x.dtype, f"input '{x.name}' (its dtype is the output's)")


def random_uniform(ctx: TranslateContext) -> None:
    ctx.emit(RandomUniform(_float_dtype(ctx), float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0)), _key(ctx),
                           ctx.ints("shape")))  # required: the importer checked it


def random_uniform_like(ctx: TranslateContext) -> None:
    ctx.emit(RandomUniform(_float_dtype(ctx), float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0)), _key(ctx)))


def random_normal(ctx: TranslateContext) -> None:
    ctx.emit(RandomNormal(_float_dtype(ctx), float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0)), _key(ctx),
                          ctx.ints("shape")))  # required: the importer checked it


def random_normal_like(ctx: TranslateContext) -> None:
    ctx.emit(RandomNormal(_float_dtype(ctx), float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0)), _key(ctx)))


def multinomial(ctx: TranslateContext) -> None:
    x = ctx.value(0)
    if x.dtype == BFLOAT16:
        _allowed(ctx, x.dtype, f"input '{x.name}'")
    dtype = ctx.dtype(int(ctx.attr("dtype", 6)), "dtype")
    if dtype not in INDEX:
        ctx.fail(f"dtype {dtype} is not one of int32, int64")
    size = int(ctx.attr("sample_size", 1))
    if size < 0:
        ctx.fail(f"sample_size {size} is negative")
    ctx.emit(Multinomial(dtype, size, _key(ctx)))


def bernoulli(ctx: TranslateContext) -> None:
    p = ctx.value(0)
    _allowed(ctx, p.dtype, f"input '{p.name}'")
    code = ctx.attr("dtype")
    out = ctx.dtype(int(code), "dtype") if code is not None else p.dtype
    draw = p.dtype if p.dtype in (FLOAT32, FLOAT64) else FLOAT32
    u, hit = ctx.tmp("uniform"), ctx.tmp("hit")
    ctx.emit(RandomUniform(draw, 0.0, 1.0, _key(ctx)), [p.name], [u])
    probs = p.name
    if draw != p.dtype:
        probs = ctx.tmp("p")
        ctx.emit(Cast(draw), [p.name], [probs])
    ctx.emit(Elementwise("less"), [u, probs], [hit])
    ctx.emit(Cast(out), [hit])


def register(r) -> None:
    r.add("RandomUniform", (1, 22), random_uniform, foldable=False)
    r.add("RandomUniformLike", (1, 22), random_uniform_like, foldable=False)
    r.add("RandomNormal", (1, 22), random_normal, foldable=False)
    r.add("RandomNormalLike", (1, 22), random_normal_like, foldable=False)
    r.add("Multinomial", (7, 22), multinomial, foldable=False)
    r.add("Bernoulli", (15, 22), bernoulli, foldable=False)
