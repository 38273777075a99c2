"""Quantization kernels: linear quantization (and requantization of int32 accumulators),
linear dequantization, and dynamic uint8 quantization.

A scale (and zero point) applies per tensor, per slice along one axis, or per block of
``block`` consecutive elements along one axis (:class:`QuantPlan`). The kernels walk the
input as ``[outer, n, inner]`` around that axis and find each element's scale at
``o * so + (a // block) * sa + i * si``: per tensor all strides are 0, per axis only
``sa`` is 1, and a blocked scale has the input's shape with ``ceil(n / block)`` on the axis.

Rounding is to nearest, ties to even (``llvm.rint``, wasm's ``nearest``), as numpy's
``rint`` in onnx.reference; the rounded value is then offset by the zero point and
clamped to the output dtype's range in int64, so no conversion wraps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, DType
from . import minifloat
from .kernel import F32, I64, KernelBuilder, Tensor, fptosi_sat, from_compute, i64, intrinsic
from .kernel import to_compute as kernel_to_compute
from .scalar import convert

TensorType = tuple[DType, Sequence[Dim]]


@dataclass(frozen=True)
class QuantPlan:
    """How scales (and zero points) map onto the input: ``mode`` "tensor", "axis" or
    "block" along ``axis`` (blocks of ``block`` elements); ``zp_scalar``: the zero point is
    one element even though the scale is not (requantization's output zero point)."""

    mode: str
    axis: int
    block: int = 1
    zp_scalar: bool = False


def _walk(kb: KernelBuilder, x: Tensor, scale: Tensor, plan: QuantPlan,
          body: Callable[[ir.Value, ir.Value], None]) -> None:
    """``body(pos, sidx)`` for each element of ``x``: its offset and its scale's."""
    if plan.mode == "tensor":
        with kb.loop(x.numel(), name="el") as i:
            body(i, i64(0))
        return
    axis = plan.axis
    outer, n, inner = x.numel(0, axis), x.dim(axis), x.numel(axis + 1)
    if plan.mode == "axis":
        so, sa, si = i64(0), i64(1), i64(0)
    else:
        so, sa, si = kb.mul(scale.dim(axis), inner), inner, i64(1)
    with kb.loop(outer, name="outer") as o:
        with kb.loop(n, name="a") as a:
            blk = a if plan.block == 1 else kb.b.udiv(a, i64(plan.block))
            row = kb.mul(kb.add(kb.mul(o, n), a), inner)
            srow = kb.add(kb.mul(o, so), kb.mul(blk, sa))
            with kb.loop(inner, name="in") as i:
                body(kb.add(row, i), kb.add(srow, kb.mul(i, si)))


def _to(b: ir.IRBuilder, v: ir.Value, src: DType, dst: DType) -> ir.Value:
    """``v`` converted to ``dst``'s compute type and rounded to ``dst``: float16 is computed
    in float32, so a conversion to it must round explicitly."""
    v = convert(b, v, src, dst)
    if dst != src and dst.is_narrow_float:
        v = kernel_to_compute(b, dst, from_compute(b, dst, v))
    return v


def _zero_point(kb: KernelBuilder, zp: Tensor | None, plan: QuantPlan, sidx: ir.Value, to: ir.Type) -> ir.Value | None:
    if zp is None:
        return None
    v = zp.load(i64(0) if plan.zp_scalar else sidx)
    return kb.b.sext(v, to) if zp.dtype.is_signed else kb.b.zext(v, to)


def build_quantize(kb: KernelBuilder, params: tuple[QuantPlan, DType, DType, bool, bool],
                   types: Sequence[TensorType]) -> None:
    """y = clamp(rint(x / scale) + zero_point) (``x * scale`` when ``multiply``: the
    requantization of an int32 accumulator by a multiplier). x and scale are converted to
    ``pre`` (ONNX's precision attribute, or the dtype numpy would divide them in), then
    divided in ``compute``, its result rounded to float16 when that is the compute dtype
    (numpy divides float16 in float16). A float8/float4 y is a saturating cast of
    x / scale + zero point instead (rounding to nearest even; ``saturate`` False: out of
    range gives infinity or NaN). Tensors: x, scale, [zero point], y."""
    plan, pre, compute, multiply, saturate = params
    b = kb.b
    x = kb.tensor(0, *types[0])
    scale = kb.tensor(1, *types[1])
    zp = kb.tensor(2, *types[2]) if len(types) == 4 else None
    y = kb.tensor(len(types) - 1, *types[-1])
    info = y.dtype
    bits = minifloat.SMALL_INTS[info.name][0] if info.name in minifloat.SMALL_INTS else info.bits
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if info.is_signed else (0, (1 << bits) - 1)

    def to_compute(v: ir.Value, src: DType) -> ir.Value:
        return _to(b, _to(b, v, src, pre), pre, compute)

    def body(pos: ir.Value, sidx: ir.Value) -> None:
        v = to_compute(x.load(pos), x.dtype)
        s = to_compute(scale.load(sidx), scale.dtype)
        q = b.fmul(v, s) if multiply else b.fdiv(v, s)
        if compute.is_narrow_float:  # computed in float32, rounded as the input's dtype would be
            q = kernel_to_compute(b, compute, from_compute(b, compute, q))
        if info.is_float:  # float8/float4: the format's own rounding
            q = _to(b, q, compute, FLOAT32)
            if zp is not None:
                q = b.fadd(q, _to(b, zp.load(i64(0) if plan.zp_scalar else sidx), zp.dtype, FLOAT32))
            y.store(pos, q, saturate)
            return
        r = fptosi_sat(b, intrinsic(b, "llvm.rint", q), I64)
        z = _zero_point(kb, zp, plan, sidx, I64)
        if z is not None:  # saturating: an infinity's int64 plus the zero point must not wrap
            r = intrinsic(b, "llvm.sadd.sat", r, z)
        r = intrinsic(b, "llvm.smin", intrinsic(b, "llvm.smax", r, i64(lo)), i64(hi))
        y.store(pos, b.trunc(r, ir.IntType(info.bits)))

    _walk(kb, x, scale, plan, body)


def build_dequantize(kb: KernelBuilder, params: tuple[QuantPlan, DType], types: Sequence[TensorType]) -> None:
    """y = (x - zero_point) * scale, computed in ``compute`` (float32; float64 for int32
    x, whose values float32 cannot hold) and rounded to y's dtype. Tensors: x, scale,
    [zero point], y."""
    plan, compute = params
    b = kb.b
    x = kb.tensor(0, *types[0])
    scale = kb.tensor(1, *types[1])
    zp = kb.tensor(2, *types[2]) if len(types) == 4 else None
    y = kb.tensor(len(types) - 1, *types[-1])

    def body(pos: ir.Value, sidx: ir.Value) -> None:
        v = _to(b, x.load(pos), x.dtype, compute)
        if zp is not None:
            z = zp.load(i64(0) if plan.zp_scalar else sidx)
            v = b.fsub(v, _to(b, z, zp.dtype, compute))
        v = b.fmul(v, _to(b, scale.load(sidx), scale.dtype, compute))
        y.store(pos, _to(b, v, compute, y.dtype))

    _walk(kb, x, scale, plan, body)


def _clamp(b: ir.IRBuilder, v: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """``v`` clamped to [lo, hi] by compares (llvm.minnum is a libcall on wasm32)."""
    v = b.select(b.fcmp_ordered("<", v, lo), lo, v)
    return b.select(b.fcmp_ordered(">", v, hi), hi, v)


def build_dynamic_quantize(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """ONNX DynamicQuantizeLinear on float32, step by step as onnx.reference (and
    onnxruntime) compute it in float32: the range [min(0, min x), max(0, max x)], scale =
    range / 255 (1 / 255 for an empty range), zero point = rint(clamp(-min / scale, 0,
    255)), y = clamp(rint(x / scale) + zero point, 0, 255). Tensors: x, y, scale, zp."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    y = kb.tensor(1, *types[1])
    scale_out = kb.tensor(2, *types[2])
    zp_out = kb.tensor(3, *types[3])
    n = x.numel()
    zero, one = ir.Constant(F32, 0.0), ir.Constant(F32, 1.0)

    def extend(i: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        v = x.load(i)
        return [intrinsic(b, "llvm.maximum", acc[0], v), intrinsic(b, "llvm.minimum", acc[1], v)]

    hi, lo = kb.carry(i64(0), n, [zero, zero], extend, name="range")
    span = b.select(b.fcmp_ordered("==", hi, lo), one, b.fsub(hi, lo))
    scale = b.fdiv(span, ir.Constant(F32, 255.0))
    zp = b.fsub(zero, b.fdiv(lo, scale))
    top = ir.Constant(F32, 255.0)
    zp = intrinsic(b, "llvm.rint", _clamp(b, zp, zero, top))
    scale_out.store(i64(0), scale)
    zp_out.store(i64(0), fptosi_sat(b, zp, ir.IntType(8), signed=False))
    with kb.loop(n, name="q") as i:
        q = b.fadd(intrinsic(b, "llvm.rint", b.fdiv(x.load(i), scale)), zp)
        q = _clamp(b, q, zero, top)
        y.store(i, fptosi_sat(b, q, ir.IntType(8), signed=False))


__all__ = ["QuantPlan", "build_quantize", "build_dequantize", "build_dynamic_quantize"]
