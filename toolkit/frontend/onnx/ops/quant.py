"""Quantization ONNX ops -> Quantize, Dequantize, DynamicQuantize (toolkit.ops.quant), the
integer products MatMulInteger and QLinearMatMul as MatMul over int32, and ConvInteger and
QLinearConv as Conv over int32.

Versions: QuantizeLinear and DequantizeLinear 13 add ``axis`` (per-axis scales); 19 adds
float8 types and ``saturate`` (float8 only); 21 adds int16/uint16, int4 and
``block_size`` (blocked scales), and QuantizeLinear ``output_dtype``; 23 adds
DequantizeLinear ``output_dtype``, QuantizeLinear ``precision`` and float4; 24 the float8e8m0
scale; 25 int2; 28 float6. The float8, float4, float6, int4 and int2 types have no dtype
in symwasm: a model using them fails to compile, naming the node and dtype. QLinearMatMul
21 adds float16 scales and float8 types.

MatMulInteger and QLinearMatMul subtract the zero points in int32 and multiply with the
int32 MatMul (exact, wrapping as numpy's int32 does); a constant operand is centred at
compile time. A 1-D ``a_zero_point`` of more than one element is per row of a (the spec's
meaning, not numpy broadcasting). QLinearMatMul then requantizes the int32 product with
the multiplier ``a_scale * b_scale / y_scale`` (computed in the scales' dtype, applied in
float64 as onnx.reference does), per tensor or per column of b.

ConvInteger and QLinearConv are the same over Conv: x and w centred in int32 (so padding
stands for x's zero point, as the spec says), the int32 Conv (exact sums) plus
QLinearConv's int32 bias, and QLinearConv requantizes per tensor or per output channel
(a 1-D ``w_scale``; a 1-D ``w_zero_point`` is per output channel too). x's scale and zero
point, and y's, are per tensor.

With a constant b (or constant weights, and no bias or a constant one) whose sums provably
stay within float32's exact integers, the product runs as the float32 GEMM or convolution
instead, every product and partial sum exact, and is cast back to int32 (see
:func:`_int_product`): the same values, from the fast kernels.
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import FLOAT4, FLOAT8, FLOAT16, FLOAT32, FLOAT64, INT8, INT16, INT32, SMALL_INTS, UINT8, UINT16, DType
from ....ops.elementwise import Cast, Elementwise
from ....ops.linalg import MatMul
from ....ops.quant import Dequantize, DynamicQuantize, Quantize
from ....ops.conv import Conv
from ....ops.shape import ViewAs
from ..translate import TranslateContext
from .conv import conv_window

EIGHT_BIT = (UINT8, INT8)


def _zero_point_dtype(ctx: TranslateContext, i: int, allowed: tuple[DType, ...]) -> DType | None:
    v = ctx.value(i)
    if v is None:
        return None
    if v.dtype not in allowed:
        ctx.fail(f"zero point '{v.name}' has dtype {v.dtype}; {ctx.op_type}-{ctx.version} takes "
                 f"{', '.join(d.name for d in allowed)}")
    return v.dtype


def _quantized_types(version: int) -> tuple[DType, ...]:
    """What QuantizeLinear-``version`` makes and DequantizeLinear reads (besides int32)."""
    if version < 19:
        return EIGHT_BIT
    if version < 21:
        return EIGHT_BIT + FLOAT8
    return (UINT8, INT8, UINT16, INT16) + FLOAT8 + SMALL_INTS + (FLOAT4,)


def quantize_linear(ctx: TranslateContext) -> None:
    allowed = _quantized_types(ctx.version)
    out = _zero_point_dtype(ctx, 2, allowed)
    code = int(ctx.attr("output_dtype", 0)) if ctx.version >= 21 else 0
    if code:
        wanted = ctx.dtype(code, "output_dtype")
        if out is not None and wanted != out:
            ctx.fail(f"output_dtype {wanted} differs from the zero point's dtype {out}")
        if wanted not in allowed:
            ctx.fail(f"output_dtype {wanted} is not one of {', '.join(d.name for d in allowed)}")
        out = wanted
    precision = None
    if ctx.version >= 23 and int(ctx.attr("precision", 0)):
        precision = ctx.dtype(int(ctx.attr("precision")), "precision")
        if precision not in (FLOAT16, FLOAT32, INT32):
            ctx.fail(f"precision {precision} is not one of float16, float32, int32")
    block = int(ctx.attr("block_size", 0)) if ctx.version >= 21 else 0
    saturate = bool(ctx.attr("saturate", 1)) if ctx.version >= 19 else True
    ctx.emit(Quantize(out or UINT8, int(ctx.attr("axis", 1)), block, precision, saturate=saturate))


def dequantize_linear(ctx: TranslateContext) -> None:
    allowed = _quantized_types(ctx.version) + (INT32,)
    x = ctx.value(0)
    if x.dtype not in allowed:
        ctx.fail(f"x '{x.name}' has dtype {x.dtype}; {ctx.op_type}-{ctx.version} takes "
                 f"{', '.join(d.name for d in allowed)}")
    code = int(ctx.attr("output_dtype", 0)) if ctx.version >= 23 else 0
    out = ctx.dtype(code, "output_dtype") if code else None
    block = int(ctx.attr("block_size", 0)) if ctx.version >= 21 else 0
    ctx.emit(Dequantize(out, int(ctx.attr("axis", 1)), block))


def dynamic_quantize_linear(ctx: TranslateContext) -> None:
    ctx.emit(DynamicQuantize())


# ----------------------------------------------------------------------------- integer products


def _centered(ctx: TranslateContext, i: int, zi: int | None, what: str, ones: int) -> str:
    """Input ``i`` as int32 minus its zero point (input ``zi``, if given). ``ones`` > 0: a
    1-D zero point of several elements applies along the dim ``ones`` dims from the end
    (viewed as (n, 1, ...) with ``ones`` ones): per row of a matrix, per output channel of a
    convolution's weight."""
    v = ctx.value(i)
    if v.dtype not in EIGHT_BIT:
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; {ctx.op_type} takes uint8, int8")
    zp = ctx.value(zi) if zi is not None and ctx.has(zi) else None
    if zp is not None and zp.dtype != v.dtype:
        ctx.fail(f"zero point '{zp.name}' has dtype {zp.dtype}; '{v.name}' has {v.dtype}")
    column = zp is not None and ones > 0 and zp.rank == 1 and zp.shape[0] != 1 and v.rank > ones
    if column:
        n = v.shape[v.rank - 1 - ones]
        if isinstance(n, int) and isinstance(zp.shape[0], int) and n != zp.shape[0]:
            ctx.fail(f"zero point '{zp.name}' has {zp.shape[0]} elements; '{v.name}' {v.describe()} has {n} "
                     f"along dim {v.rank - 1 - ones}")
    if v.const is not None and (zp is None or zp.const is not None):
        arr = v.const.astype(np.int32)
        if zp is not None:
            z = zp.const.astype(np.int32)
            arr = arr - (z.reshape((-1,) + (1,) * ones) if column else z)
        return ctx.constant(what, arr)
    wide = ctx.tmp(f"{what} int32")
    ctx.emit(Cast(INT32), [v.name], [wide])
    if zp is None:
        return wide
    z = ctx.tmp(f"{what} zero point int32")
    ctx.emit(Cast(INT32), [zp.name], [z])
    if column:
        col = ctx.tmp(f"{what} zero point column")
        ctx.emit(ViewAs((zp.shape[0],) + (1,) * ones), [z], [col])
        z = col
    out = ctx.tmp(what)
    ctx.emit(Elementwise("sub"), [wide, z], [out])
    return out


# the integers float32 holds exactly: |x| <= 2 ** 24
EXACT_IN_FLOAT32 = 1 << 24


def _exact_in_float32(w: np.ndarray | None, reduced: tuple[int, ...]) -> bool:
    """Whether a product of an 8-bit operand minus its zero point (|a - zp| <= 255) and the
    constant centred ``w``, summing over w's axes ``reduced``, keeps every partial sum within
    float32's exact integers: 255 times the largest sum of |w| at most 2 ** 24. Each product
    and partial sum is then an integer float32 holds, in any order."""
    return (w is not None and w.ndim >= 2
            and 255 * int(np.abs(w.astype(np.int64)).sum(axis=reduced).max(initial=0)) <= EXACT_IN_FLOAT32)


def _float_product(ctx: TranslateContext, op, a: str, w: np.ndarray, out: str) -> None:
    """out = op(a, w) of int32 ``a`` and the constant int32 ``w`` (:func:`_exact_in_float32`)
    computed in float32 by op's fast kernels and cast back to int32 exactly
    (``Cast(integral=True)``, which a Cast to float32 after it reads through)."""
    af, product = ctx.tmp(f"{a} float32"), ctx.tmp("product float32")
    ctx.emit(Cast(FLOAT32), [a], [af])
    ctx.emit(op, [af, ctx.constant("weights float32", w.astype(np.float32))], [product])
    ctx.emit(Cast(INT32, integral=True), [product], [out])


def _int_product(ctx: TranslateContext, a: int, az: int, b: int, bz: int, out: str) -> None:
    """out = the int32 product of a and b, each minus its zero point; as the float32 GEMM when
    b is constant and that is exact (:func:`_exact_in_float32`, over b's rows): the int32
    GEMM loops took 45% of a dynamically quantized BERT's native time."""
    ac, bc = _centered(ctx, a, az, "a centred", 1), _centered(ctx, b, bz, "b centred", 0)
    w = ctx.graph.values[bc].const
    if _exact_in_float32(w, (-2,)):
        _float_product(ctx, MatMul(), ac, w, out)
    else:
        ctx.emit(MatMul(), [ac, bc], [out])


def matmul_integer(ctx: TranslateContext) -> None:
    _int_product(ctx, 0, 2, 1, 3, ctx.outputs[0])


def _one_element(ctx: TranslateContext, i: int, what: str) -> None:
    v = ctx.value(i)
    if v is None:
        ctx.fail(f"input {what} is required")
    if v.numel != 1:
        ctx.fail(f"{what} '{v.name}' has shape {v.describe()}; it must have one element (per tensor)")


def _multiplier(ctx: TranslateContext, a_scale: int, b_scale: int, y_scale: int) -> str:
    """a_scale * b_scale / y_scale in the scales' dtype (folded when all are constants)."""
    vals = [ctx.value(i) for i in (a_scale, b_scale, y_scale)]
    if len({v.dtype for v in vals}) > 1 or vals[0].dtype not in (FLOAT32, FLOAT16):
        ctx.fail("the scales must all be float32 or all float16, have "
                 + ", ".join(f"'{v.name}' {v.dtype}" for v in vals))
    if all(v.const is not None for v in vals):
        a, b, y = (v.const for v in vals)
        return ctx.constant("multiplier", (a * b / y).astype(a.dtype))
    prod, mult = ctx.tmp("scale product"), ctx.tmp("multiplier")
    ctx.emit(Elementwise("mul"), [vals[0].name, vals[1].name], [prod])
    ctx.emit(Elementwise("div"), [prod, vals[2].name], [mult])
    return mult


def _qlinear_scales(ctx: TranslateContext, first: str, second: str, per: str) -> DType:
    """The checks QLinearMatMul and QLinearConv share on their scales and output zero point
    (inputs 1, 4, 6, 7: the first operand's scale, the second's, y_scale, y_zero_point);
    returns the output dtype."""
    _one_element(ctx, 1, f"{first}_scale")
    _one_element(ctx, 6, "y_scale")
    _one_element(ctx, 7, "y_zero_point")
    scale = ctx.value(4)
    if scale.rank > 1:
        ctx.fail(f"{second}_scale '{scale.name}' has shape {scale.describe()}; it must be a scalar or 1-D "
                 f"(per {per})")
    return _zero_point_dtype(ctx, 7, EIGHT_BIT)


def qlinear_matmul(ctx: TranslateContext) -> None:
    # inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point
    out = _qlinear_scales(ctx, "a", "b", "column of b")
    acc = ctx.tmp("int32 product")
    _int_product(ctx, 0, 2, 3, 5, acc)
    mult = _multiplier(ctx, 1, 4, 6)
    ctx.emit(Quantize(out, -1, precision=FLOAT64, multiply=True), [acc, mult, ctx.inputs[7]], ctx.outputs[:1])


def _int_conv(ctx: TranslateContext, x: int, xz: int, w: int, wz: int, bias: str, out: str) -> None:
    """The int32 convolution of x and w centred on their zero points, plus ``bias`` (if
    any)."""
    if ctx.has(xz):
        _one_element(ctx, xz, "x_zero_point")
    if ctx.has(wz) and ctx.value(wz).rank > 1:
        ctx.fail(f"w_zero_point '{ctx.value(wz).name}' has shape {ctx.value(wz).describe()}; it must be a "
                 f"scalar or 1-D (per output channel)")
    wv = ctx.value(w)
    ins = [_centered(ctx, x, xz, "x centred", 0), _centered(ctx, w, wz, "w centred", max(wv.rank - 1, 0))]
    conv = Conv(conv_window(ctx, w), int(ctx.attr("group", 1)))
    wc = ctx.graph.values[ins[1]].const
    bv = ctx.graph.values[bias] if bias else None
    # as _int_product, over each output channel's weights; not with a run-time bias, whose
    # length the int32 Conv checks, naming it
    if (bv is not None and bv.const is None) or not _exact_in_float32(wc, tuple(range(1, wv.rank))):
        ctx.emit(conv, ins + ([bias] if bias else []), [out])
        return
    if bv is not None and bv.const.shape != (wc.shape[0],):
        ctx.fail(f"bias '{bias}' has shape {bv.describe()}; expected ({wc.shape[0]},), the output channels")
    if not bias:
        _float_product(ctx, conv, ins[0], wc, out)
        return
    acc = ctx.tmp("sums int32")  # the int32 bias added after
    _float_product(ctx, conv, ins[0], wc, acc)
    col = ctx.tmp("bias column")
    ctx.emit(ViewAs((wc.shape[0],) + (1,) * (wv.rank - 2)), [bias], [col])
    ctx.emit(Elementwise("add"), [acc, col], [out])


def conv_integer(ctx: TranslateContext) -> None:
    # inputs: x, w, [x_zero_point], [w_zero_point]
    _int_conv(ctx, 0, 2, 1, 3, "", ctx.outputs[0])


def qlinear_conv(ctx: TranslateContext) -> None:
    # inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, [B]
    out = _qlinear_scales(ctx, "x", "w", "output channel")
    bias = ctx.inputs[8] if ctx.has(8) else ""
    if bias and ctx.value(8).dtype != INT32:
        ctx.fail(f"bias '{bias}' has dtype {ctx.value(8).dtype}; QLinearConv takes int32")
    acc = ctx.tmp("int32 convolution")
    _int_conv(ctx, 0, 2, 3, 5, bias, acc)
    mult = _multiplier(ctx, 1, 4, 6)
    ctx.emit(Quantize(out, 1, precision=FLOAT64, multiply=True), [acc, mult, ctx.inputs[7]], ctx.outputs[:1])


def register(r) -> None:
    r.add("QuantizeLinear", (10, 13, 19, 21, 23, 24, 25, 28), quantize_linear)
    r.add("DequantizeLinear", (10, 13, 19, 21, 23, 24, 25, 28), dequantize_linear)
    r.add("DynamicQuantizeLinear", (11,), dynamic_quantize_linear)
    r.add("MatMulInteger", (10,), matmul_integer)
    r.add("QLinearMatMul", (10, 21), qlinear_matmul)
    r.add("ConvInteger", (10,), conv_integer)
    r.add("QLinearConv", (10,), qlinear_conv)
