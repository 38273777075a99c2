"""onnxruntime's quantization contrib ops (domain com.microsoft), as its quantizers write them
(QOperator format, dynamic quantization, 4-bit weights), translated to core ops and
computed as onnxruntime's CPU kernels compute them, step for step in float32, so the
integer outputs are the same bit for bit (the one exception is below).

Per-tensor parameters (the QLinear ops' scales and zero points: one element, a scalar or a
1-D tensor of one) are combined in numpy float32 at compile time when they are constants,
and by core ops at run time otherwise (:class:`_Scalars`); the combination is onnxruntime's,
in its order, since float32 rounding depends on it.

- QLinearAdd: onnxruntime's AVX2 kernel: with ``rA = A_scale / C_scale``, ``rB = B_scale /
  C_scale`` and ``fixed = C_zp - (rA * A_zp + rB * B_zp)``, ``C = rint(fma(A, rA, fma(B, rB,
  fixed)))`` saturated. A fused multiply-add rounds once; here it is computed in float64,
  where the product of an 8-bit integer and a float32 and the sum are exact, then rounded to
  float32 (wasm has no fma instruction). Where one operand is one value per span (one
  element, or broadcast along the innermost dims), onnxruntime folds it into ``fixed``
  first, with a rounded product and sum, and so does this.
- QLinearMul: ``rint((A - A_zp) * (B - B_zp) * (A_scale * B_scale / C_scale) + C_zp)``, the
  integer product exact, then a float32 multiply and add.
- QLinearSigmoid, QLinearLeakyRelu (``alpha``, default 0.01): Dequantize, the float
  function, Quantize. onnxruntime evaluates the same through a 256-entry table built with
  its own sigmoid approximation (MLAS's logistic), so QLinearSigmoid may differ by one step
  where a value lies within float32 rounding of a tie between two steps.
- QLinearSoftmax (``opset``, required; ``axis``, default 1 before opset 13, else -1; before
  13 over all the dims from axis on): onnxruntime's table of float32 exponentials of the
  256 differences from a row's max (:func:`_softmax_table`), each row summed in order in
  float32 (the last of the running sums), then ``rint(e / sum * floor(1 / y_scale)) +
  y_zero_point`` saturated; X_zero_point cancels. (onnxruntime's sources of earlier
  versions multiply before dividing, which overflows float32 on short rows, and wrap int8;
  1.32's kernel divides first and saturates, as this does: checked on rounding-sensitive
  cases.)
- QLinearConcat (``axis``, required): each input whose scale and zero point are not the
  output's is dequantized and quantized again (onnxruntime's table does the same per value);
  the rest are concatenated as they are.
- QLinearGlobalAveragePool (``channels_last``, default 0): the int32 sum of ``x - x_zp``
  over the spatial dims, requantized by ``x_scale / (y_scale * image_size)`` in float32.
- QLinearAveragePool (AveragePool's attributes and ``channels_last``): Dequantize, the
  float32 average pool, then ``rint(avg / y_scale + y_zp)`` saturated; channels_last is a
  transpose around it. ceil_mode with count_include_pad is refused (onnxruntime's divisor
  differs from AveragePool's for the windows ceil_mode adds).
- MatMulIntegerToFloat, DynamicQuantizeMatMul: the exact int32 product of the 8-bit
  operands minus their zero points (per tensor, or per column of B), times ``a_scale *
  b_scale`` (float32, per column with a 1-D ``b_scale``), plus ``bias``. DynamicQuantizeMatMul
  first quantizes A to uint8 over its own range (DynamicQuantizeLinear).
- QGemm (``transA``, ``transB``, ``alpha``): the int32 product plus the int32 ``C``, times
  ``alpha * a_scale * b_scale`` (per column of B with a 1-D ``b_scale``); with ``y_scale``
  divided by it and quantized around ``y_zero_point``, without it float32.
- MatMulNBits (``K``, ``N``, ``bits`` 4, ``block_size``; constant B, scales and zero
  points): B unpacked at compile time to one 8-bit value per weight, dequantized per block
  of K (Dequantize, which folds to float32 weights natively and stays 8-bit in a wasm32
  module), then a float32 MatMul plus ``bias``. Zero points are packed uint8 or absent
  (then 8). ``accuracy_level`` is ignored: it only permits onnxruntime to compute in lower
  precision (int8 or float16), and the float32 product is at least as precise. ``g_idx``
  is refused.
- GatherBlockQuantized (``block_size``, ``quantize_axis``, ``gather_axis``; constant data,
  scales and zero points): int4 or uint4 data (what onnxruntime's 4-bit quantizer writes;
  zero points of the same dtype, or 0), or uint8 data of ``bits`` 4 (two values a byte,
  the low bits first, along the last axis) or 8, gathered along axis 0 (zero points
  packed the same way, or 2 ** (bits - 1)). The 8-bit values, their scales and zero points
  are gathered with the same indices, then dequantized per block. An index out of range is
  an error here (onnxruntime gives zeros).
- QuantizeLinear, DequantizeLinear (``axis``, default 1; what the QDQ quantizer writes with
  its contrib option, for 16-bit and 4-bit types): the core Quantize and Dequantize, per
  tensor or per axis.
- DynamicQuantizeLSTM (LSTM's attributes but ``layout``, which it lacks; int8 or uint8 W
  [directions, input, 4 * hidden] and R [directions, hidden, 4 * hidden], float32 scales
  and zero points of W's and R's dtype, per direction ([directions]) or per column
  ([directions, 4 * hidden]); int32 sequence_lens): the core Recurrent with quantized
  weights. onnxruntime does not dequantize the weights: each GEMM quantizes its float
  operand (X for the input projection, the previous hidden state at each step) to uint8
  over its own range, as DynamicQuantizeLinear does, and takes the exact int32 products
  times ``a_scale * w_scale``; so does the kernel (toolkit/codegen/rnn.py; dequantized
  weights give errors near 5e-3). Zero points must be constants; as onnxruntime requires,
  per-column ones are all 0 for int8 and all equal for uint8, and one per direction is
  read. onnxruntime splits the batch of the recurrent GEMM into one slice per thread, each
  quantized over its own range, when the batch is above 4 (or 2 or more with hidden up to
  256); this computes the one-thread result.
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import DTYPES, FLOAT16, FLOAT32, FLOAT64, INT8, INT32, UINT8, DType
from ....ops.conv import Pool
from ....ops.elementwise import Cast, Elementwise
from ....ops.linalg import MatMul
from ....ops.indexing import Cumulative
from ....ops.movement import Concat, Gather, Transpose
from ....ops.quant import Dequantize, DynamicQuantize, Quantize
from ....ops.reduce import Reduce
from ....ops.rnn import QuantizedWeights, Recurrent
from ....ops.shape import Flatten, ShapeOf, ViewAs
from ..translate import CONTRIB, TranslateContext
from .conv import _pool_kernel, _window
from .quant import _exact_in_float32, _float_product
from .rnn import activations

EIGHT_BIT = (UINT8, INT8)
INT4, UINT4 = DTYPES["int4"], DTYPES["uint4"]
# what the contrib QuantizeLinear makes and DequantizeLinear reads (besides int32)
CONTRIB_QUANTIZED = (UINT8, INT8, DTYPES["uint16"], DTYPES["int16"], INT4, UINT4)


def _ew(ctx: TranslateContext, fn: str, ins: list[str], what: str, params: tuple = ()) -> str:
    out = ctx.tmp(what)
    ctx.emit(Elementwise(fn, params), ins, [out])
    return out


def _cast(ctx: TranslateContext, name: str, to: DType, what: str) -> str:
    out = ctx.tmp(what)
    ctx.emit(Cast(to), [name], [out])
    return out


class _Scalars:
    """Arithmetic on per-tensor parameters in one dtype (float32; int32 for zero points):
    numpy scalars while every operand is a constant (computed now, rounded as the kernel
    rounds them), value names of core ops otherwise."""

    def __init__(self, ctx: TranslateContext, dtype: DType = FLOAT32):
        self.ctx = ctx
        self.dtype = dtype

    def input(self, i: int, what: str, allowed: tuple[DType, ...], default: float | None = None):
        """Input ``i`` (one element) in this dtype; ``default`` if it is absent."""
        ctx = self.ctx
        v = _per_tensor(ctx, i, what, allowed, default is None)
        if v is None:
            return self.dtype.np(default)
        if v.const is not None:
            return self.dtype.np(v.const.reshape(-1)[0])
        name = v.name
        if v.rank:
            name = ctx.tmp(f"{what} scalar")
            ctx.emit(ViewAs(()), [v.name], [name])
        return name if v.dtype == self.dtype else _cast(ctx, name, self.dtype, what)

    def name(self, x, what: str) -> str:
        return x if isinstance(x, str) else self.ctx.constant(what, np.asarray(x, self.dtype.np))

    def op(self, fn: str, a, b, what: str):
        if not isinstance(a, str) and not isinstance(b, str):
            with np.errstate(all="ignore"):  # a zero scale gives infinity, as in the kernel
                return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[fn](a, b)
        return _ew(self.ctx, fn, [self.name(a, what + " a"), self.name(b, what + " b")], what)

    def fma(self, x, r, c, what: str):
        """float32(x * r + c) rounded once (a fused multiply-add), for ``x`` an 8-bit
        tensor (a value name) or integer, and float32 ``r`` and ``c``. Computed in float64:
        the product (at most 9 + 24 significant bits) is exact, and so is the sum while the
        two terms' exponents are within 20 of each other, as those of quantization
        parameters are; then rounded to float32 once (wasm32 has no fma instruction)."""
        if not any(isinstance(v, str) for v in (x, r, c)):
            return np.float32(np.float64(x) * np.float64(r) + np.float64(c))
        ctx = self.ctx

        def wide(v, part: str) -> str:
            return _cast(ctx, v, FLOAT64, f"{what} {part} float64") if isinstance(v, str) else \
                ctx.constant(f"{what} {part}", np.float64(v))

        total = _ew(ctx, "affine", [wide(x, "x"), wide(r, "factor"), wide(c, "addend")], f"{what} float64")
        return _cast(ctx, total, FLOAT32, what)


def _per_tensor(ctx: TranslateContext, i: int, what: str, allowed: tuple[DType, ...], required: bool):
    """Input ``i``, a per-tensor parameter: one element of an ``allowed`` dtype (None if
    absent and not ``required``)."""
    v = ctx.value(i)
    if v is None:
        if required:
            ctx.fail(f"input {what} is required")
        return None
    if v.dtype not in allowed:
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; {ctx.op_type} takes {', '.join(d.name for d in allowed)}")
    if v.numel != 1:
        ctx.fail(f"{what} '{v.name}' has shape {v.describe()}; it must have one element (per tensor)")
    return v


def _eight_bit(ctx: TranslateContext, i: int, what: str) -> DType:
    v = ctx.value(i)
    if v is None:
        ctx.fail(f"input {what} is required")
    if v.dtype not in EIGHT_BIT:
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; {ctx.op_type} takes uint8, int8")
    return v.dtype


def _saturate(ctx: TranslateContext, value: str, out: DType) -> None:
    """The node's output: float32 ``value`` rounded half to even and saturated to ``out``
    (Quantize by a multiplier of 1, exact)."""
    one = ctx.constant("one", np.float32(1))
    ctx.emit(Quantize(out, multiply=True), [value, one], ctx.outputs[:1])


def _span_scalar(x: tuple, other: tuple) -> bool:
    """Whether onnxruntime's broadcasting hands ``x`` to the kernel as one value per span:
    one element, or, aligned from the right and past the trailing dims that are 1 in both,
    a 1 where the other's dim is not."""
    n = max(len(x), len(other))
    x, other = (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(other)) + tuple(other)
    while x and x[-1] == 1 and other[-1] == 1:
        x, other = x[:-1], other[:-1]
    return not x or (x[-1] == 1 and other[-1] != 1)


# ----------------------------------------------------------------------------- elementwise


def _binary(ctx: TranslateContext) -> tuple:
    """QLinearAdd's and QLinearMul's common part (inputs A, A_scale, A_zero_point, B, B_scale,
    B_zero_point, C_scale, C_zero_point): the 8-bit dtype both operands share, the scalars'
    builder and the three scales."""
    out = _eight_bit(ctx, 0, "A")
    if _eight_bit(ctx, 3, "B") != out:
        ctx.fail(f"A and B differ in dtype ({ctx.value(0).dtype}, {ctx.value(3).dtype})")
    s = _Scalars(ctx)
    return out, s, *(s.input(i, w, (FLOAT32,)) for i, w in ((1, "A_scale"), (4, "B_scale"), (6, "C_scale")))


def qlinear_add(ctx: TranslateContext) -> None:
    out, s, sa, sb, sc = _binary(ctx)
    za, zb, zc = (s.input(i, w, (out,), 0) for i, w in ((2, "A_zero_point"), (5, "B_zero_point"),
                                                        (7, "C_zero_point")))
    ra, rb = s.op("div", sa, sc, "A scale ratio"), s.op("div", sb, sc, "B scale ratio")
    a, b = ctx.value(0), ctx.value(3)
    # onnxruntime's kernel takes the operand that is one value per span second, so with
    # one A per span the two trade places (the fixed part's rounding included)
    one, two = (b.name, rb, zb), (a.name, ra, za)
    if not _span_scalar(a.shape, b.shape):
        one, two = two, one
    fixed = s.op("sub", zc, s.fma(one[2], one[1], s.op("mul", two[1], two[2], "second offset"), "offsets"),
                 "fixed part")
    _saturate(ctx, s.fma(one[0], one[1], s.fma(two[0], two[1], fixed, "inner sum"), "sum"), out)


def qlinear_mul(ctx: TranslateContext) -> None:
    out, s, sa, sb, sc = _binary(ctx)
    zc = s.input(7, "C_zero_point", (out,), 0)
    ratio = s.op("div", s.op("mul", sa, sb, "scale product"), sc, "multiplier")
    prod = _ew(ctx, "mul", [_centred(ctx, 0, 2, "A"), _centred(ctx, 3, 5, "B")], "product")
    scaled = _ew(ctx, "mul", [_cast(ctx, prod, FLOAT32, "product float32"), s.name(ratio, "multiplier")], "scaled")
    _saturate(ctx, _ew(ctx, "add", [scaled, s.name(zc, "C zero point")], "shifted"), out)


def _centred(ctx: TranslateContext, i: int, zi: int | None, what: str) -> str:
    """8-bit input ``i`` minus its zero point (input ``zi``, one element, if given) in int32."""
    dt = _eight_bit(ctx, i, what)
    s = _Scalars(ctx, INT32)
    z = s.input(zi, f"{what} zero point", (dt,), 0) if zi is not None else np.int32(0)
    v = ctx.value(i)
    if v.const is not None and not isinstance(z, str):
        return ctx.constant(f"{what} centred", v.const.astype(np.int32) - z)
    wide = _cast(ctx, v.name, INT32, f"{what} int32")
    return wide if not isinstance(z, str) and z == 0 else _ew(ctx, "sub", [wide, s.name(z, f"{what} zero point")],
                                                            f"{what} centred")


def _requantize_activation(ctx: TranslateContext, fn: str, params: tuple) -> None:
    # inputs: X, X_scale, X_zero_point, Y_scale, Y_zero_point
    dt = _eight_bit(ctx, 0, "X")
    for i, what in ((1, "X_scale"), (3, "Y_scale")):
        _per_tensor(ctx, i, what, (FLOAT32,), True)
    for i, what in ((2, "X_zero_point"), (4, "Y_zero_point")):
        _per_tensor(ctx, i, what, (dt,), False)
    x = _dequantized(ctx, 0, 1, 2, "X")
    y = _ew(ctx, fn, [x], fn, params)
    ctx.emit(Quantize(dt), [y, ctx.inputs[3]] + ([ctx.inputs[4]] if ctx.has(4) else []), ctx.outputs[:1])


def _dequantized(ctx: TranslateContext, x: int, scale: int, zp: int, what: str) -> str:
    out = ctx.tmp(f"{what} dequantized")
    ctx.emit(Dequantize(FLOAT32), [ctx.inputs[x], ctx.inputs[scale]] + ([ctx.inputs[zp]] if ctx.has(zp) else []),
             [out])
    return out


def qlinear_sigmoid(ctx: TranslateContext) -> None:
    _requantize_activation(ctx, "sigmoid", ())


def qlinear_leaky_relu(ctx: TranslateContext) -> None:
    _requantize_activation(ctx, "leaky_relu", (float(ctx.attr("alpha", 0.01)),))


def qlinear_concat(ctx: TranslateContext) -> None:
    # inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per tensor
    if ctx.attr("axis") is None:
        ctx.fail("attribute 'axis' is required")
    if len(ctx.inputs) < 5 or (len(ctx.inputs) - 2) % 3:
        ctx.fail(f"has {len(ctx.inputs)} inputs; expected Y_scale, Y_zero_point and a (tensor, scale, zero point) "
                 f"triple per tensor")
    out = _eight_bit(ctx, 1, "Y_zero_point")
    s = _Scalars(ctx)
    ys = s.input(0, "Y_scale", (FLOAT32,))
    yz = s.input(1, "Y_zero_point", (out,))
    parts = []
    for k in range(2, len(ctx.inputs), 3):
        if _eight_bit(ctx, k, f"input {k}") != out:
            ctx.fail(f"input '{ctx.inputs[k]}' has dtype {ctx.value(k).dtype}; Y_zero_point has {out}")
        xs = s.input(k + 1, f"scale of '{ctx.inputs[k]}'", (FLOAT32,))
        xz = s.input(k + 2, f"zero point of '{ctx.inputs[k]}'", (out,))
        same = ctx.inputs[k + 1:k + 3] == ctx.inputs[:2] or (
            not isinstance(xs, str) and not isinstance(ys, str) and not isinstance(xz, str)
            and not isinstance(yz, str) and xs == ys and xz == yz)
        if same:
            parts.append(ctx.inputs[k])
            continue
        q = ctx.tmp(f"{ctx.inputs[k]} requantized")
        ctx.emit(Quantize(out), [_dequantized(ctx, k, k + 1, k + 2, ctx.inputs[k]), ctx.inputs[0], ctx.inputs[1]],
                 [q])
        parts.append(q)
    ctx.emit(Concat(int(ctx.attr("axis"))), parts, ctx.outputs[:1])


# the float32 exp table QLinearSoftmax reads: scaled so a row's sum stays below
# float32's maximum with this margin (e**5) to spare, as onnxruntime scales it
SOFTMAX_TABLE_MARGIN = 5.0
FLOAT32_MAX = np.finfo(np.float32).max


def _softmax_table(ctx: TranslateContext, x_scale, length) -> str:
    """onnxruntime's QLinearSoftmax table: entry ``255 + d`` is float32(exp((d + shift) *
    x_scale)) in float64 for ``d`` = x - (the row's max) in -255..0, with ``shift`` =
    max(0, log(float32(FLT_MAX / length)) - 5) / x_scale, so the exponentials of a row of
    ``length`` sum to at most FLT_MAX / e**5. ``x_scale`` and ``length`` (float32) are
    constants or value names; a constant table is computed here."""
    steps = np.arange(-255, 1, dtype=np.float64)
    if not isinstance(x_scale, str) and not isinstance(length, str):
        with np.errstate(all="ignore"):
            shift = max(0.0, np.log(np.float64(FLOAT32_MAX / length)) - SOFTMAX_TABLE_MARGIN) / np.float64(x_scale)
            return ctx.constant("exp table", np.exp((steps + shift) * np.float64(x_scale)).astype(np.float32))
    s = _Scalars(ctx)
    room = _cast(ctx, s.name(s.op("div", FLOAT32_MAX, length, "room"), "room"), FLOAT64, "room float64")
    log = _ew(ctx, "sub", [_ew(ctx, "log", [room], "log room"), ctx.constant("margin", np.float64(5))], "log margin")
    scale = _cast(ctx, s.name(x_scale, "x_scale"), FLOAT64, "x_scale float64")
    shift = _ew(ctx, "div", [_ew(ctx, "max", [log, ctx.constant("zero", np.float64(0))], "shift"), scale], "shift")
    exponent = _ew(ctx, "mul", [_ew(ctx, "add", [ctx.constant("steps", steps), shift], "steps"), scale], "exponent")
    return _cast(ctx, _ew(ctx, "exp", [exponent], "exp float64"), FLOAT32, "exp table")


def qlinear_softmax(ctx: TranslateContext) -> None:
    # inputs: X, X_scale, X_zero_point, Y_scale, Y_zero_point; attributes axis, opset
    dt = _eight_bit(ctx, 0, "X")
    if ctx.attr("opset") is None:
        ctx.fail("attribute 'opset' is required (the Softmax version whose axis it follows)")
    flat = int(ctx.attr("opset")) < 13  # Softmax before 13: over all the dims from axis on
    x = ctx.value(0)
    axis = int(ctx.attr("axis", 1 if flat else -1))
    if not -x.rank <= axis < max(x.rank, 1):
        ctx.fail(f"axis {axis} is out of range for input '{x.name}' of rank {x.rank}")
    axis = axis + x.rank if axis < 0 else axis
    s = _Scalars(ctx)
    xs, ys = s.input(1, "X_scale", (FLOAT32,)), s.input(3, "Y_scale", (FLOAT32,))
    _per_tensor(ctx, 2, "X_zero_point", (dt,), False)  # differences from the row's max cancel it
    _per_tensor(ctx, 4, "Y_zero_point", (dt,), False)
    rows = x.name
    if flat:
        rows = ctx.tmp("rows")
        ctx.emit(Flatten(axis), [x.name], [rows])
        axis = 1
    shape = ctx.graph.values[rows].shape
    if isinstance(shape[axis], int):
        length = np.float32(shape[axis])
    else:
        dim = ctx.tmp("row length")
        ctx.emit(ShapeOf(axis, axis + 1), [rows], [dim])
        length = _cast(ctx, dim, FLOAT32, "row length float32")
    top = ctx.tmp("row max")
    ctx.emit(Reduce("max", (axis,), True), [rows], [top])
    below = _ew(ctx, "sub", [_cast(ctx, rows, INT32, "X int32"), _cast(ctx, top, INT32, "row max int32")], "below max")
    index = _ew(ctx, "add", [below, ctx.constant("table offset", np.int32(255))], "table index")
    exps = ctx.tmp("exps")
    ctx.emit(Gather(0), [_softmax_table(ctx, xs, length), index], [exps])
    # the kernel sums a row in order, in float32: the last of the running sums
    running, total = ctx.tmp("running sums"), ctx.tmp("row sum")
    ctx.emit(Cumulative("sum"), [exps, ctx.constant("axis", np.int64(axis))], [running])
    ctx.emit(Gather(axis), [running, ctx.constant("last", np.array([-1], np.int64))], [total])
    steps = s.op("div", np.float32(1), ys, "steps per one")
    steps = np.floor(steps) if not isinstance(steps, str) else _ew(ctx, "floor", [steps], "whole steps per one")
    q = _ew(ctx, "mul", [_ew(ctx, "div", [exps, total], "fraction"), s.name(steps, "steps")], "scaled fraction")
    # rint, plus the zero point, saturated (onnxruntime 1.32 saturates int8 too)
    out = ctx.tmp("Y rows") if flat else ctx.outputs[0]
    ctx.emit(Quantize(dt, multiply=True), [q, ctx.constant("one", np.float32(1))]
             + ([ctx.inputs[4]] if ctx.has(4) else []), [out])
    if flat:
        ctx.emit(ViewAs(x.shape), [out], ctx.outputs[:1])


# ----------------------------------------------------------------------------- pooling


def _channels_last(ctx: TranslateContext) -> bool:
    v = int(ctx.attr("channels_last", 0))
    if v not in (0, 1):
        ctx.fail(f"channels_last={v} must be 0 or 1")
    return bool(v)


def qlinear_global_average_pool(ctx: TranslateContext) -> None:
    # inputs: X, x_scale, x_zero_point, y_scale, y_zero_point
    dt = _eight_bit(ctx, 0, "X")
    x = ctx.value(0)
    if x.rank < 3:
        ctx.fail(f"input '{x.name}' has shape {x.describe()}; expected (N, C, spatial...) or (N, spatial..., C)")
    first = 1 if _channels_last(ctx) else 2
    axes = tuple(range(first, first + x.rank - 2))
    s = _Scalars(ctx)
    sx, sy = s.input(1, "x_scale", (FLOAT32,)), s.input(3, "y_scale", (FLOAT32,))
    _per_tensor(ctx, 4, "y_zero_point", (dt,), False)
    sums = ctx.tmp("sums")
    ctx.emit(Reduce("sum", axes, True), [_centred(ctx, 0, 2, "X")], [sums])
    size = x.shape[first:first + x.rank - 2]
    if all(isinstance(d, int) for d in size):
        count = np.float32(int(np.prod(size, dtype=np.int64)))
    else:
        dims, n = ctx.tmp("image dims"), ctx.tmp("image size")
        ctx.emit(ShapeOf(first, first + x.rank - 2), [x.name], [dims])
        ctx.emit(Reduce("prod", (0,), False), [dims], [n])
        count = _cast(ctx, n, FLOAT32, "image size float32")
    mult = s.op("div", sx, s.op("mul", sy, count, "scaled size"), "multiplier")
    zp = [ctx.inputs[4]] if ctx.has(4) else []
    ctx.emit(Quantize(dt, multiply=True, precision=FLOAT32), [sums, s.name(mult, "multiplier")] + zp,
             ctx.outputs[:1])


def qlinear_average_pool(ctx: TranslateContext) -> None:
    # inputs: X, x_scale, x_zero_point, y_scale, y_zero_point
    dt = _eight_bit(ctx, 0, "X")
    s = _Scalars(ctx)
    _per_tensor(ctx, 1, "x_scale", (FLOAT32,), True)
    _per_tensor(ctx, 2, "x_zero_point", (dt,), False)
    ys, yz = s.input(3, "y_scale", (FLOAT32,)), s.input(4, "y_zero_point", (dt,), 0)
    x = _dequantized(ctx, 0, 1, 2, "X")
    rank = ctx.value(0).rank
    last = _channels_last(ctx) and rank >= 3
    if last:
        first = ctx.tmp("X channels first")
        ctx.emit(Transpose((0, rank - 1) + tuple(range(1, rank - 1))), [x], [first])
        x = first
    ceil, count_pad = bool(ctx.attr("ceil_mode", 0)), bool(ctx.attr("count_include_pad", 0))
    if ceil and count_pad:
        # onnxruntime divides a window that ceil_mode extends past the padded end by the
        # whole kernel's size, the core pool (as ONNX AveragePool) by its taps in the padding
        ctx.fail("ceil_mode=1 with count_include_pad=1 is not supported (onnxruntime divides the windows past "
                 "the padded end by the whole kernel size, AveragePool by the taps within the pads)")
    pool = Pool("avg", _window(ctx, _pool_kernel(ctx)), ceil, count_pad)
    avg = ctx.tmp("average")
    ctx.emit(pool, [x], [avg])
    if last:
        back = ctx.tmp("average channels last")
        ctx.emit(Transpose((0,) + tuple(range(2, rank)) + (1,)), [avg], [back])
        avg = back
    scaled = _ew(ctx, "div", [avg, s.name(ys, "y_scale")], "scaled")
    _saturate(ctx, _ew(ctx, "add", [scaled, s.name(yz, "y zero point")], "shifted"), dt)


# ----------------------------------------------------------------------------- integer products


def _column_param(ctx: TranslateContext, i: int, what: str, allowed: tuple[DType, ...], n) -> None:
    """Input ``i`` is one element, or 1-D with one per column (``n``)."""
    v = ctx.value(i)
    if v.dtype not in allowed:
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; {ctx.op_type} takes {', '.join(d.name for d in allowed)}")
    if v.numel == 1:
        return
    if v.rank != 1:
        ctx.fail(f"{what} '{v.name}' has shape {v.describe()}; it must have one element or be 1-D (per column)")
    if isinstance(n, int) and isinstance(v.shape[0], int) and v.shape[0] != n:
        ctx.fail(f"{what} '{v.name}' has {v.shape[0]} elements; B has {n} columns")


def _product(ctx: TranslateContext, a: str, a_zp: str | None, b: str, b_zp: str | None, out: str) -> None:
    """out = (a - a_zp) @ (b - b_zp) in int32 (the 8-bit values ``a`` and ``b``; ``a_zp`` one
    element, ``b_zp`` one or one per column of b); as the float32 product when b is a
    constant and that is exact (:func:`quant._exact_in_float32`)."""
    g = ctx.graph.values

    def centred(x: str, zp: str | None, what: str) -> str:
        v, z = g[x], g[zp] if zp else None
        if v.const is not None and (z is None or z.const is not None):
            arr = v.const.astype(np.int32)
            if z is not None:
                arr = arr - (z.const.reshape(-1).astype(np.int32) if z.numel > 1 else z.const.reshape(()).astype(np.int32))
            return ctx.constant(what, arr)
        wide = _cast(ctx, x, INT32, f"{what} int32")
        if z is None:
            return wide
        zw = _cast(ctx, zp, INT32, f"{what} zero point int32")
        if z.rank:
            zv = ctx.tmp(f"{what} zero point view")
            ctx.emit(ViewAs(() if z.numel == 1 else (z.shape[0],)), [zw], [zv])
            zw = zv
        return _ew(ctx, "sub", [wide, zw], what)

    ac, bc = centred(a, a_zp, "a centred"), centred(b, b_zp, "b centred")
    w = g[bc].const
    if _exact_in_float32(w, (-2,)):
        _float_product(ctx, MatMul(), ac, w, out)
    else:
        ctx.emit(MatMul(), [ac, bc], [out])


def _per_column(ctx: TranslateContext, name: str, what: str) -> str:
    """A one-element or 1-D parameter as a scalar or a 1-D vector (broadcast over rows)."""
    v = ctx.graph.values[name]
    if v.rank == 0 or (v.rank == 1 and v.numel != 1):
        return name
    out = ctx.tmp(what)
    ctx.emit(ViewAs(()), [name], [out])
    return out


def _scale_and_bias(ctx: TranslateContext, acc: str, scale: str, bias: str | None) -> None:
    """The float32 output: float32(acc) * scale (+ bias), as MLAS's scale-bias output
    processor."""
    product = _cast(ctx, acc, FLOAT32, "product float32")
    if bias is None:
        ctx.emit(Elementwise("mul"), [product, scale], ctx.outputs[:1])
        return
    scaled = _ew(ctx, "mul", [product, scale], "scaled")
    ctx.emit(Elementwise("add"), [scaled, bias], ctx.outputs[:1])


def _bias(ctx: TranslateContext, i: int, n) -> str | None:
    v = ctx.value(i)
    if v is None:
        return None
    if v.dtype != FLOAT32:
        ctx.fail(f"bias '{v.name}' has dtype {v.dtype}; {ctx.op_type} takes float32 here")
    if v.rank != 1 or (isinstance(n, int) and isinstance(v.shape[0], int) and v.shape[0] != n):
        ctx.fail(f"bias '{v.name}' has shape {v.describe()}; expected ({n},), B's columns")
    return v.name


def _output_scale(ctx: TranslateContext, first: str, b_scale: str) -> str:
    """first * b_scale in float32 (per column with a 1-D b_scale); folded for constants."""
    g = ctx.graph.values
    f, b = g[first], g[b_scale]
    if f.const is not None and b.const is not None:
        return ctx.constant("output scale", (f.const.reshape(()).astype(np.float32)
                                             * b.const.reshape(-1 if b.numel > 1 else ()).astype(np.float32)))
    return _ew(ctx, "mul", [_per_column(ctx, first, "a scale"), _per_column(ctx, b_scale, "b scale")], "output scale")


def _matmul_shapes(ctx: TranslateContext, a: int, b: int) -> object:
    """B's column count (the checks both products share)."""
    av, bv = ctx.value(a), ctx.value(b)
    if bv.rank < 1 or av.rank < 1:
        ctx.fail(f"A '{av.name}' {av.describe()} and B '{bv.name}' {bv.describe()} must not be scalars")
    return bv.shape[-1] if bv.rank >= 2 else 1


def matmul_integer_to_float(ctx: TranslateContext) -> None:
    # inputs: A, B, a_scale, b_scale, [a_zero_point], [b_zero_point], [bias]
    adt, bdt = _eight_bit(ctx, 0, "A"), _eight_bit(ctx, 1, "B")
    n = _matmul_shapes(ctx, 0, 1)
    _per_tensor(ctx, 2, "a_scale", (FLOAT32,), True)
    _column_param(ctx, 3, "b_scale", (FLOAT32,), n)
    _per_tensor(ctx, 4, "a_zero_point", (adt,), False)
    if ctx.has(5):
        _column_param(ctx, 5, "b_zero_point", (bdt,), n)
    acc = ctx.tmp("int32 product")
    _product(ctx, ctx.inputs[0], ctx.inputs[4] if ctx.has(4) else None, ctx.inputs[1],
             ctx.inputs[5] if ctx.has(5) else None, acc)
    _scale_and_bias(ctx, acc, _output_scale(ctx, ctx.inputs[2], ctx.inputs[3]), _bias(ctx, 6, n))


def dynamic_quantize_matmul(ctx: TranslateContext) -> None:
    # inputs: A (float32), B, b_scale, [b_zero_point], [bias]
    a = ctx.value(0)
    if a.dtype != FLOAT32:
        ctx.fail(f"A '{a.name}' has dtype {a.dtype}; {ctx.op_type} takes float32")
    bdt = _eight_bit(ctx, 1, "B")
    n = _matmul_shapes(ctx, 0, 1)
    _column_param(ctx, 2, "b_scale", (FLOAT32,), n)
    if ctx.has(3):
        _column_param(ctx, 3, "b_zero_point", (bdt,), n)
    q, scale, zp = ctx.tmp("A quantized"), ctx.tmp("A scale"), ctx.tmp("A zero point")
    ctx.emit(DynamicQuantize(), [a.name], [q, scale, zp])
    acc = ctx.tmp("int32 product")
    _product(ctx, q, zp, ctx.inputs[1], ctx.inputs[3] if ctx.has(3) else None, acc)
    _scale_and_bias(ctx, acc, _output_scale(ctx, scale, ctx.inputs[2]), _bias(ctx, 4, n))


def qgemm(ctx: TranslateContext) -> None:
    # inputs: A, a_scale, a_zero_point, B, b_scale, b_zero_point, [C], [y_scale], [y_zero_point]
    adt, bdt = _eight_bit(ctx, 0, "A"), _eight_bit(ctx, 3, "B")
    a, b = ctx.value(0), ctx.value(3)
    if a.rank != 2 or b.rank != 2:
        ctx.fail(f"A '{a.name}' {a.describe()} and B '{b.name}' {b.describe()} must be matrices")
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    n = b.shape[0] if trans_b else b.shape[1]
    s = _Scalars(ctx)
    sa = s.input(1, "a_scale", (FLOAT32,))
    _per_tensor(ctx, 2, "a_zero_point", (adt,), False)
    _column_param(ctx, 4, "b_scale", (FLOAT32,), n)
    if ctx.has(5):
        _column_param(ctx, 5, "b_zero_point", (bdt,), n)
    if ctx.has(7) != ctx.has(8):
        ctx.fail("y_scale and y_zero_point must be given together (a quantized output) or both left out (float32)")
    an, bn = a.name, b.name
    if trans_a:
        an = ctx.tmp("A transposed")
        ctx.emit(Transpose((1, 0)), [a.name], [an])
    if trans_b:
        bn = ctx.constant("B transposed", b.const.T) if b.const is not None else ctx.tmp("B transposed")
        if b.const is None:
            ctx.emit(Transpose((1, 0)), [b.name], [bn])
    acc = ctx.tmp("int32 product")
    _product(ctx, an, ctx.inputs[2] if ctx.has(2) else None, bn, ctx.inputs[5] if ctx.has(5) else None, acc)
    if ctx.has(6):
        c = ctx.value(6)
        if c.dtype != INT32:
            ctx.fail(f"C '{c.name}' has dtype {c.dtype}; QGemm takes int32")
        with_c = ctx.tmp("int32 product plus C")
        ctx.emit(Elementwise("add"), [acc, c.name], [with_c])
        acc = with_c
    # alpha * a_scale * b_scale[i] (/ y_scale), left to right in float32
    first = s.op("mul", np.float32(ctx.attr("alpha", 1.0)), sa, "alpha a_scale")
    scale = _output_scale(ctx, s.name(first, "alpha a_scale"), ctx.inputs[4])
    if not ctx.has(7):
        _scale_and_bias(ctx, acc, scale, None)
        return
    ydt = _eight_bit(ctx, 8, "y_zero_point")
    ys = s.input(7, "y_scale", (FLOAT32,))
    g = ctx.graph.values
    if g[scale].const is not None and not isinstance(ys, str):
        mult = ctx.constant("multiplier", (g[scale].const / ys).astype(np.float32))
    else:
        mult = _ew(ctx, "div", [scale, s.name(ys, "y_scale")], "multiplier")
    ctx.emit(Quantize(ydt, axis=1, multiply=True, precision=FLOAT32), [acc, mult, ctx.inputs[8]], ctx.outputs[:1])


# ----------------------------------------------------------------------------- 4-bit weights


def _unpack(packed: np.ndarray, bits: int) -> np.ndarray:
    """uint8 bytes holding ``8 // bits`` values each, the low bits first, along the last
    axis -> one uint8 per value."""
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    vals = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return vals.reshape(packed.shape[:-1] + (packed.shape[-1] * per,)).astype(np.uint8)


def matmul_nbits(ctx: TranslateContext) -> None:
    # inputs: A, B (N, k_blocks, blob), scales (N * k_blocks), [zero_points], [g_idx], [bias]
    k, n = ctx.attr("K"), ctx.attr("N")
    block = ctx.attr("block_size")
    if k is None or n is None or block is None:
        ctx.fail("attributes 'K', 'N' and 'block_size' are required")
    k, n, block, bits = int(k), int(n), int(block), int(ctx.attr("bits", 4))
    if bits != 4:
        ctx.fail(f"bits={bits} is not supported (supported: 4)")
    if block < 16 or block & (block - 1):
        ctx.fail(f"block_size={block} must be a power of 2 of at least 16")
    if int(ctx.attr("weight_prepacked", 0)):
        ctx.fail("weight_prepacked (a CUDA layout) is not supported")
    if ctx.has(4):
        ctx.fail("g_idx (deprecated: blocks in a permuted order) is not supported")
    a = ctx.value(0)
    if a.dtype != FLOAT32:
        ctx.fail(f"A '{a.name}' has dtype {a.dtype}; only float32 is supported")
    blocks = -(-k // block)
    blob = block * bits // 8
    b, scales = ctx.value(1), ctx.value(2)
    for v, what in ((b, "B"), (scales, "scales")):
        if v.const is None:
            ctx.fail(f"{what} '{v.name}' must be a constant (it is unpacked at compile time)")
    if b.dtype != UINT8 or b.const.size != n * blocks * blob:
        ctx.fail(f"B '{b.name}' {b.dtype} {b.describe()} must be uint8 of ({n}, {blocks}, {blob}) for K={k}, N={n}, "
                 f"block_size={block}")
    if scales.dtype != FLOAT32 or scales.const.size != n * blocks:
        ctx.fail(f"scales '{scales.name}' {scales.dtype} {scales.describe()} must be float32 of {n} x {blocks}")
    if a.shape and isinstance(a.shape[-1], int) and a.shape[-1] != k:
        ctx.fail(f"A '{a.name}' {a.describe()} has {a.shape[-1]} columns; K={k}")
    # weights as (K, N): blocks along axis 0
    q = _unpack(b.const.reshape(n, blocks * blob), bits)[:, :k].T
    sc = scales.const.reshape(n, blocks).T.astype(np.float32)
    if ctx.has(3):
        zv = ctx.value(3)
        if zv.const is None or zv.dtype != UINT8:
            ctx.fail(f"zero_points '{zv.name}' {zv.dtype} must be constant packed uint8 (float zero points are not "
                     f"supported)")
        per_row = -(-blocks * bits // 8)
        if zv.const.size != n * per_row:
            ctx.fail(f"zero_points '{zv.name}' {zv.describe()} must have {n} x {per_row} bytes")
        zp = _unpack(zv.const.reshape(n, per_row), bits)[:, :blocks].T
    else:
        zp = np.full((blocks, n), 1 << (bits - 1), np.uint8)
    weights = ctx.tmp("weights")
    ctx.emit(Dequantize(FLOAT32, axis=0, block=block),
             [ctx.constant("weights quantized", np.ascontiguousarray(q)), ctx.constant("weight scales", sc),
              ctx.constant("weight zero points", np.ascontiguousarray(zp))], [weights])
    bias = _bias(ctx, 5, n)
    if bias is None:
        ctx.emit(MatMul(), [a.name, weights], ctx.outputs[:1])
        return
    prod = ctx.tmp("product")
    ctx.emit(MatMul(), [a.name, weights], [prod])
    ctx.emit(Elementwise("add"), [prod, bias], ctx.outputs[:1])


def gather_block_quantized(ctx: TranslateContext) -> None:
    # inputs: data, indices, scales, [zero_points]
    data, idx, scales = ctx.value(0), ctx.value(1), ctx.value(2)
    if data.const is None or scales.const is None:
        ctx.fail("data and scales must be constants")
    if scales.dtype != FLOAT32:
        ctx.fail(f"scales '{scales.name}' have dtype {scales.dtype}; supported: float32")
    block = int(ctx.attr("block_size", 128))
    if block < 16 or block & (block - 1):
        ctx.fail(f"block_size={block} must be a power of 2 of at least 16")
    rank = data.rank
    axes = []
    for name, default in (("gather_axis", 0), ("quantize_axis", 1)):
        a = int(ctx.attr(name, default))
        if not -rank <= a < rank:
            ctx.fail(f"{name}={a} must be in [{-rank}, {rank - 1}]")
        axes.append(a % rank)
    gaxis, qaxis = axes
    if qaxis == gaxis:
        ctx.fail(f"quantize_axis and gather_axis are both {qaxis}; they must differ")
    if data.dtype in (INT4, UINT4):
        # one value per element; zero points of the same dtype, 0 when absent
        narrow = np.int8 if data.dtype == INT4 else np.uint8
        q, bits, unpack = data.const.astype(narrow), 4, False
    elif data.dtype == UINT8:
        bits = int(ctx.attr("bits", 4))
        if bits not in (4, 8):
            ctx.fail(f"bits={bits} is not supported for uint8 data (supported: 4, 8)")
        if gaxis != 0:
            ctx.fail(f"gather_axis={gaxis}: uint8 data is gathered along axis 0")
        narrow, unpack = np.uint8, bits == 4
        q = _unpack(data.const, bits) if unpack else data.const
    else:
        ctx.fail(f"data '{data.name}' has dtype {data.dtype}; supported: int4, uint4, uint8 (with 'bits')")
    nblocks = -(-q.shape[qaxis] // block)
    want = q.shape[:qaxis] + (nblocks,) + q.shape[qaxis + 1:]
    if scales.const.shape != want:
        ctx.fail(f"scales '{scales.name}' {scales.describe()} must have shape {want}")
    if ctx.has(3):
        zv = ctx.value(3)
        if zv.const is None or zv.dtype != data.dtype:
            ctx.fail(f"zero_points '{zv.name}' must be a constant of {data.dtype}, as data")
        zp = _unpack(zv.const, bits) if unpack else zv.const.astype(narrow)
        zp = zp[tuple(slice(0, d) for d in want)]
        if zp.shape != want:
            ctx.fail(f"zero_points '{zv.name}' {zv.describe()} must hold {want} values")
    else:
        zp = np.full(want, 1 << (bits - 1) if data.dtype == UINT8 else 0, narrow)
    parts = []
    for what, arr in (("data", q), ("scales", scales.const), ("zero points", zp)):
        table = ctx.constant(f"{what} table", np.ascontiguousarray(arr))
        out = ctx.tmp(f"gathered {what}")
        ctx.emit(Gather(gaxis), [table, idx.name], [out])
        parts.append(out)
    axis = qaxis if qaxis < gaxis else qaxis - 1 + idx.rank
    ctx.emit(Dequantize(FLOAT32, axis=axis, block=block), parts, ctx.outputs[:1])


def quantize_linear(ctx: TranslateContext) -> None:
    # inputs: x, y_scale, [y_zero_point] (its dtype the output's; uint8 without it)
    x = ctx.value(0)
    if x.dtype not in (FLOAT32, FLOAT16):
        ctx.fail(f"x '{x.name}' has dtype {x.dtype}; {ctx.op_type} takes float32, float16")
    out = ctx.value(2).dtype if ctx.has(2) else UINT8
    if out not in CONTRIB_QUANTIZED:
        ctx.fail(f"y_zero_point '{ctx.inputs[2]}' has dtype {out}; {ctx.op_type} takes "
                 f"{', '.join(d.name for d in CONTRIB_QUANTIZED)}")
    ctx.emit(Quantize(out, int(ctx.attr("axis", 1))))


def dequantize_linear(ctx: TranslateContext) -> None:
    # inputs: x, x_scale, [x_zero_point]
    x = ctx.value(0)
    if x.dtype not in CONTRIB_QUANTIZED + (INT32,):
        ctx.fail(f"x '{x.name}' has dtype {x.dtype}; {ctx.op_type} takes "
                 f"{', '.join(d.name for d in CONTRIB_QUANTIZED + (INT32,))}")
    ctx.emit(Dequantize(None, int(ctx.attr("axis", 1))))


# ----------------------------------------------------------------------------- recurrent

# DynamicQuantizeLSTM's inputs after LSTM's eight
LSTM_W_SCALE, LSTM_W_ZERO, LSTM_R_SCALE, LSTM_R_ZERO = range(8, 12)


def _lstm_zero_points(ctx: TranslateContext, weights: int, scale: int, zero: int, what: str,
                      directions: int) -> tuple[tuple[int, ...], bool]:
    """The zero point of each direction of W or R (a constant, as onnxruntime checks it)
    and whether the scales are per column."""
    w, s, z = ctx.value(weights), ctx.value(scale), ctx.value(zero)
    for v, name in ((s, f"{what}_scale"), (z, f"{what}_zero_point")):
        if v is None:
            ctx.fail(f"input {name} is required")
    if z.dtype != w.dtype:
        ctx.fail(f"{what}_zero_point '{z.name}' has dtype {z.dtype}; it must be {what}'s, {w.dtype}")
    if z.rank != s.rank or s.rank not in (1, 2):
        ctx.fail(f"{what}_scale '{s.name}' has shape {s.describe()} and {what}_zero_point '{z.name}' "
                 f"{z.describe()}; both must be [directions] (per tensor) or [directions, 4*hidden] "
                 f"(per column)")
    if z.const is None:
        ctx.fail(f"{what}_zero_point '{z.name}' must be a constant")
    zeros = z.const.astype(np.int64).reshape(len(z.const), -1)
    if zeros.shape[0] != directions:
        ctx.fail(f"{what}_zero_point '{z.name}' has shape {z.describe()}; it must have {directions} direction(s)")
    per_column = s.rank == 2
    if per_column and w.dtype == INT8 and zeros.any():
        ctx.fail(f"{what}_zero_point '{z.name}': per-column zero points of int8 weights must be 0 "
                 f"(onnxruntime's DynamicQuantizeLSTM requires it)")
    if per_column and (zeros != zeros.flat[0]).any():
        ctx.fail(f"{what}_zero_point '{z.name}': per-column zero points of uint8 weights must all be equal "
                 f"(onnxruntime's DynamicQuantizeLSTM requires it)")
    return tuple(int(v) for v in zeros[:, 0]), per_column


def dynamic_quantize_lstm(ctx: TranslateContext) -> None:
    direction = ctx.attr("direction", "forward")
    directions = 2 if direction == "bidirectional" else 1
    if int(ctx.attr("layout", 0)):
        ctx.fail("layout is not an attribute of DynamicQuantizeLSTM (X is [seq, batch, input])")
    hidden = ctx.attr("hidden_size")
    if hidden is None:
        ctx.fail("hidden_size is required")
    clip = ctx.attr("clip")
    if clip is not None and not clip > 0:
        ctx.fail(f"clip {clip} must be positive")
    if _eight_bit(ctx, 1, "W") != _eight_bit(ctx, 2, "R"):
        r = ctx.value(2)
        ctx.fail(f"R '{r.name}' has dtype {r.dtype}; W and R must have one dtype")
    lens = ctx.value(4)
    if lens is not None and lens.dtype != INT32:
        ctx.fail(f"sequence_lens '{lens.name}' has dtype {lens.dtype}; DynamicQuantizeLSTM takes int32")
    w_zero, w_per_column = _lstm_zero_points(ctx, 1, LSTM_W_SCALE, LSTM_W_ZERO, "W", directions)
    r_zero, r_per_column = _lstm_zero_points(ctx, 2, LSTM_R_SCALE, LSTM_R_ZERO, "R", directions)
    op = Recurrent("lstm", direction, activations(ctx, "lstm", directions), int(hidden),
                   float(clip) if clip is not None else None, input_forget=bool(ctx.attr("input_forget", 0)),
                   w_transposed=True, r_transposed=True,
                   quantized=QuantizedWeights(w_zero, r_zero, w_per_column, r_per_column))
    lstm_inputs = (ctx.inputs[:8] + [""] * 8)[:8]
    ctx.emit(op, lstm_inputs + [ctx.inputs[LSTM_W_SCALE], ctx.inputs[LSTM_R_SCALE]])


def register(r) -> None:
    for op, fn in (("QLinearAdd", qlinear_add), ("QLinearMul", qlinear_mul), ("QLinearSigmoid", qlinear_sigmoid),
                   ("QLinearLeakyRelu", qlinear_leaky_relu), ("QLinearConcat", qlinear_concat),
                   ("QLinearSoftmax", qlinear_softmax),
                   ("QLinearGlobalAveragePool", qlinear_global_average_pool),
                   ("QLinearAveragePool", qlinear_average_pool), ("MatMulIntegerToFloat", matmul_integer_to_float),
                   ("DynamicQuantizeMatMul", dynamic_quantize_matmul), ("QGemm", qgemm),
                   ("MatMulNBits", matmul_nbits), ("GatherBlockQuantized", gather_block_quantized),
                   ("QuantizeLinear", quantize_linear), ("DequantizeLinear", dequantize_linear),
                   ("DynamicQuantizeLSTM", dynamic_quantize_lstm)):
        r.add(op, (1,), fn, foldable=False, domain=CONTRIB)
