"""float16 <-> float32 in plain integer IR, for scalars and vectors alike.

wasm32 has no float16 instructions, and LLVM lowers ``fpext half`` / ``fptrunc`` to calls
into a compiler runtime the module does not link; these branch-free bit manipulations need
neither, and LLVM vectorizes them. Both are exact: every float16 is a float32, and the
narrowing rounds to nearest, ties to even, with overflow to infinity, subnormals, and NaN
kept NaN (as numpy's ``astype(np.float16)``).
"""
from __future__ import annotations

from llvmlite import ir

F32 = ir.FloatType()
I16 = ir.IntType(16)
I32 = ir.IntType(32)


def _like(v: ir.Value, scalar: ir.Type) -> ir.Type:
    return ir.VectorType(scalar, v.type.count) if isinstance(v.type, ir.VectorType) else scalar


def _c(t: ir.Type, value: int) -> ir.Constant:
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def to_f32(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """binary16 bits (i16) -> float32."""
    i32, f32 = _like(bits, I32), _like(bits, F32)
    h = b.zext(bits, i32)
    sign = b.shl(b.and_(h, _c(i32, 0x8000)), _c(i32, 16))
    o = b.shl(b.and_(h, _c(i32, 0x7FFF)), _c(i32, 13))  # exponent and mantissa in place
    exp = b.and_(o, _c(i32, 0x0F800000))
    o = b.add(o, _c(i32, (127 - 15) << 23))  # rebias the exponent
    inf_nan = b.icmp_unsigned("==", exp, _c(i32, 0x0F800000))
    o = b.select(inf_nan, b.add(o, _c(i32, (128 - 16) << 23)), o)
    # zero and subnormals: renormalize through a float subtraction (exact)
    sub = b.fsub(b.bitcast(b.add(o, _c(i32, 1 << 23)), f32), b.bitcast(_c(i32, 113 << 23), f32))
    o = b.select(b.icmp_unsigned("==", exp, _c(i32, 0)), b.bitcast(sub, i32), o)
    return b.bitcast(b.or_(o, sign), f32)


def from_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 -> binary16 bits (i16), rounding to nearest even."""
    i32, f32 = _like(x, I32), _like(x, F32)
    u = b.bitcast(x, i32)
    sign = b.and_(u, _c(i32, 0x80000000))
    a = b.xor(u, sign)  # |x|
    # too big for a finite half: infinity, or a quiet NaN
    big = b.select(b.icmp_unsigned(">", a, _c(i32, 255 << 23)), _c(i32, 0x7E00), _c(i32, 0x7C00))
    # subnormal results: the float adder rounds the mantissa into place
    magic = ((127 - 15) + (23 - 10) + 1) << 23
    tiny = b.sub(b.bitcast(b.fadd(b.bitcast(a, f32), b.bitcast(_c(i32, magic), f32)), i32), _c(i32, magic))
    # normal results: rebias, then round to nearest even on the 13 dropped bits
    odd = b.and_(b.lshr(a, _c(i32, 13)), _c(i32, 1))
    normal = b.lshr(b.add(b.add(a, _c(i32, ((15 - 127) << 23) + 0xFFF)), odd), _c(i32, 13))
    r = b.select(b.icmp_unsigned("<", a, _c(i32, 113 << 23)), tiny, normal)
    r = b.select(b.icmp_unsigned(">=", a, _c(i32, (127 + 16) << 23)), big, r)
    return b.trunc(b.or_(r, b.lshr(sign, _c(i32, 16))), _like(x, I16))


def f64_to_f32_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float64 -> float32 rounded to odd (an inexact result gets its lowest bit set), for
    float64 -> float16: rounding to odd first and then to nearest even with two fewer bits
    equals rounding once, where two nearest roundings could land on the wrong side of a tie."""
    i32, f32 = _like(x, I32), _like(x, F32)
    t = b.fptrunc(x, f32)
    back = b.fpext(t, x.type)
    bits = b.bitcast(t, i32)
    inexact = b.fcmp_ordered("!=", back, x)  # false for nan
    even = b.icmp_unsigned("==", b.and_(bits, _c(i32, 1)), _c(i32, 0))
    # the other neighbour of x: one step toward x in magnitude (bits are sign-magnitude)
    away = b.fcmp_ordered(">", _fabs(b, back), _fabs(b, x))
    other = b.select(away, b.sub(bits, _c(i32, 1)), b.add(bits, _c(i32, 1)))
    return b.bitcast(b.select(b.and_(inexact, even), other, bits), f32)


def _fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    t = x.type
    return b.call(b.module.declare_intrinsic("llvm.fabs", [t], ir.FunctionType(t, [t])), [x])
