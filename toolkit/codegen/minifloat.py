"""The small storage formats, to and from their compute type, in plain integer and float IR
(no libcalls; scalars or vectors alike).

- bfloat16: the high half of a float32; computed as float32, rounded to nearest even.
- float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) and float4 (e2m1, one value per byte, in the
  low nibble): decoded through a table built from :data:`FORMATS`, encoded by rounding to
  nearest even, with ONNX's saturation rule (``saturate``: out of range, and infinities,
  become the largest finite value; else infinity where the format has one, NaN otherwise).
- float8 e8m0 (the MX scale format): a float32's 8 exponent bits alone, 2**(code - 127); no
  sign, no zero, 0xFF the one NaN. Decoded by placing the code as a float32 exponent,
  encoded from a float32's exponent as onnx's reference does (``to_float8e8m0``), rounded
  by ONNX Cast's ``round_mode`` (:data:`E8M0_ROUND_MODES`).
- int4, uint4, int2, uint2: one value per byte in the low bits (as ml_dtypes and numpy
  hold them); computed as int8/uint8: loads sign- or zero-extend, stores keep the low bits
  (so a wider value wraps, as ONNX's Cast does).

The format facts live here once: :data:`FORMATS` gives each float format's layout, and
:func:`decode_value` (pure Python) is what both the decode table and the tests' reading of
the layout come from.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

F32 = ir.FloatType()
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)


@dataclass(frozen=True)
class MiniFloat:
    ebits: int
    mbits: int
    bias: int
    inf: bool  # has infinities (e5m2 only)
    nan: int | None  # the NaN code made (without sign; None: no NaN); fnuz: 0x80, the "negative zero"
    fnuz: bool  # no negative zero; the code 0x80 is the one NaN
    max_code: int  # the largest finite magnitude code
    nan_from: int = 0  # magnitudes from here up are NaN (not fnuz)

    @property
    def sign_bit(self) -> int:
        return 1 << (self.ebits + self.mbits)

    @property
    def codes(self) -> int:
        return self.sign_bit << 1


FORMATS: dict[str, MiniFloat] = {
    "float8_e4m3fn": MiniFloat(4, 3, 7, False, 0x7F, False, 0x7E, nan_from=0x7F),
    "float8_e4m3fnuz": MiniFloat(4, 3, 8, False, 0x80, True, 0x7F),
    "float8_e5m2": MiniFloat(5, 2, 15, True, 0x7E, False, 0x7B, nan_from=0x7D),
    "float8_e5m2fnuz": MiniFloat(5, 2, 16, False, 0x80, True, 0x7F),
    "float4_e2m1fn": MiniFloat(2, 1, 1, False, None, False, 0x7),
}
SMALL_INTS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}
E8M0 = "float8_e8m0fnu"  # not a MiniFloat: no sign or mantissa, and its own rounding modes
E8M0_ROUND_MODES = ("up", "down", "nearest")


def decode_value(fmt: MiniFloat, code: int) -> float:
    """The value of ``code`` in ``fmt``, from the layout alone."""
    sign = -1.0 if code & fmt.sign_bit else 1.0
    mag = code & (fmt.sign_bit - 1)
    if fmt.fnuz and code == 0x80:
        return math.nan
    if fmt.nan is not None and not fmt.fnuz and mag >= fmt.nan_from:
        return math.nan
    if fmt.inf and mag == 0x7C:
        return sign * math.inf
    e, m = mag >> fmt.mbits, mag & ((1 << fmt.mbits) - 1)
    if e == 0:
        return sign * m * 2.0 ** (1 - fmt.bias - fmt.mbits)
    return sign * (1 + m / (1 << fmt.mbits)) * 2.0 ** (e - fmt.bias)


def _vec(v: ir.Value, scalar: ir.Type) -> ir.Type:
    return ir.VectorType(scalar, v.type.count) if isinstance(v.type, ir.VectorType) else scalar


def _c(t: ir.Type, value) -> ir.Constant:
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def _table(module: ir.Module, name: str, fmt: MiniFloat) -> ir.GlobalVariable:
    gname = f"sw_decode_{name}"
    if gname in module.globals:
        return module.globals[gname]
    t = ir.ArrayType(F32, fmt.codes)
    g = ir.GlobalVariable(module, t, gname)
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(t, [ir.Constant(F32, decode_value(fmt, c)) for c in range(fmt.codes)])
    return g


def decode(b: ir.IRBuilder, name: str, raw: ir.Value) -> ir.Value:
    """Stored bits (i8, or i16 for bfloat16) -> the compute value (f32; i8 for small ints)."""
    if name == "bfloat16":
        return b.bitcast(b.shl(b.zext(raw, _vec(raw, I32)), _c(_vec(raw, I32), 16)), _vec(raw, F32))
    if name == E8M0:
        return _decode_e8m0(b, raw)
    if name in SMALL_INTS:
        bits, signed = SMALL_INTS[name]
        if signed:
            return b.ashr(b.shl(raw, _c(raw.type, 8 - bits)), _c(raw.type, 8 - bits))
        return b.and_(raw, _c(raw.type, (1 << bits) - 1))
    fmt = FORMATS[name]
    table = _table(b.module, name, fmt)
    idx = b.zext(b.and_(raw, _c(raw.type, fmt.codes - 1)), _vec(raw, I32))
    if isinstance(raw.type, ir.VectorType):
        out = ir.Constant(_vec(raw, F32), None)
        for k in range(raw.type.count):
            p = b.gep(table, [ir.Constant(I32, 0), b.extract_element(idx, ir.Constant(I32, k))])
            out = b.insert_element(out, b.load(p), ir.Constant(I32, k))
        return out
    return b.load(b.gep(table, [ir.Constant(I32, 0), idx]))


def encode(b: ir.IRBuilder, name: str, x: ir.Value, saturate: bool = True, round_mode: str = "up") -> ir.Value:
    """The compute value -> stored bits, rounding to nearest even (floats; e8m0 by
    ``round_mode``) or keeping the low bits (small ints)."""
    if name == E8M0:
        return _encode_e8m0(b, x, saturate, round_mode)
    if name == "bfloat16":
        i32 = _vec(x, I32)
        u = b.bitcast(x, i32)
        rounded = b.add(b.add(u, _c(i32, 0x7FFF)), b.and_(b.lshr(u, _c(i32, 16)), _c(i32, 1)))
        quiet = b.or_(u, _c(i32, 0x400000))  # a NaN stays a NaN (its payload's top kept)
        out = b.select(b.fcmp_unordered("uno", x, x), quiet, rounded)
        return b.trunc(b.lshr(out, _c(i32, 16)), _vec(x, I16))
    if name in SMALL_INTS:
        return b.and_(x, _c(x.type, (1 << SMALL_INTS[name][0]) - 1))
    fmt = FORMATS[name]
    i32, f32 = _vec(x, I32), _vec(x, F32)
    u = b.bitcast(x, i32)
    sign = b.lshr(u, _c(i32, 31))
    a_bits = b.and_(u, _c(i32, 0x7FFFFFFF))
    a = b.bitcast(a_bits, f32)
    # below the smallest normal: count steps of the smallest subnormal, rounding to even
    scaled = b.fmul(a, _c(f32, 2.0 ** (fmt.bias - 1 + fmt.mbits)))
    sub = b.fptoui(b.call(_rint(b.module, f32), [scaled]), i32)
    # normal: round the float32 mantissa to mbits (to nearest even), then rebias
    drop = 23 - fmt.mbits
    r = b.add(b.add(a_bits, _c(i32, (1 << (drop - 1)) - 1)), b.and_(b.lshr(a_bits, _c(i32, drop)), _c(i32, 1)))
    normal = b.sub(b.lshr(r, _c(i32, drop)), _c(i32, (127 - fmt.bias) << fmt.mbits))
    tiny = b.fcmp_ordered("<", a, _c(f32, 2.0 ** (1 - fmt.bias)))
    code = b.select(tiny, sub, normal)
    over = b.icmp_unsigned(">", code, _c(i32, fmt.max_code))  # also infinity (huge bits)
    if saturate or fmt.nan is None:
        big = _c(i32, fmt.max_code)
    elif fmt.inf:
        big = _c(i32, 0x7C)
    else:
        big = _c(i32, fmt.nan)
    code = b.select(over, big, code)
    code = b.or_(code, b.shl(sign, _c(i32, fmt.ebits + fmt.mbits)))
    if fmt.fnuz:  # no negative zero: -0 is 0 (its code is the NaN); a NaN result keeps 0x80
        code = b.select(b.icmp_unsigned("==", code, _c(i32, 0x80)), _c(i32, 0), code)
        code = b.select(b.and_(over, _c(over.type, 0 if saturate else 1)), _c(i32, 0x80), code)
    nan = _c(i32, fmt.nan if fmt.nan is not None else fmt.sign_bit)  # float4 has no NaN: ml_dtypes gives -0
    if fmt.nan is not None and not fmt.fnuz:
        nan = b.or_(nan, b.shl(sign, _c(i32, fmt.ebits + fmt.mbits)))
    code = b.select(b.fcmp_unordered("uno", x, x), nan, code)
    return b.trunc(code, _vec(x, I8))


def _decode_e8m0(b: ir.IRBuilder, raw: ir.Value) -> ir.Value:
    """The code as a float32's biased exponent; code 0 (2**-127) is the float32 subnormal
    0x00400000, 0xFF the quiet NaN ml_dtypes gives."""
    i32 = _vec(raw, I32)
    code = b.zext(raw, i32)
    bits = b.shl(code, _c(i32, 23))
    bits = b.select(b.icmp_unsigned("==", code, _c(i32, 0)), _c(i32, 0x00400000), bits)
    bits = b.select(b.icmp_unsigned("==", code, _c(i32, 0xFF)), _c(i32, 0x7FC00000), bits)
    return b.bitcast(bits, _vec(raw, F32))


def _encode_e8m0(b: ir.IRBuilder, x: ir.Value, saturate: bool, round_mode: str) -> ir.Value:
    """x's float32 exponent, rounded up by its mantissa as ``round_mode`` says: ``up`` when
    any mantissa bit is set, ``nearest`` from half the step (ties up; below the normals,
    strictly above half), ``down`` never. ``saturate``: no rounding past 0xFE (2**127),
    else it becomes the NaN. As onnx's reference: the sign is ignored, zero (and a float32
    subnormal rounded down) is code 0, an infinity is NaN even when saturating."""
    if round_mode not in E8M0_ROUND_MODES:
        raise ValueError(f"round_mode {round_mode!r} is not one of {', '.join(E8M0_ROUND_MODES)}")
    i32 = _vec(x, I32)
    u = b.bitcast(x, i32)
    exp = b.and_(b.lshr(u, _c(i32, 23)), _c(i32, 0xFF))

    def nonzero(mask: int) -> ir.Value:
        return b.icmp_unsigned("!=", b.and_(u, _c(i32, mask)), _c(i32, 0))

    if round_mode == "up":
        inc = nonzero(0x7FFFFF)
    elif round_mode == "nearest":  # onnx's guard bit, and round, sticky or "lsb" (a normal)
        normal = b.icmp_unsigned("!=", exp, _c(i32, 0))
        inc = b.and_(nonzero(0x400000), b.or_(nonzero(0x3FFFFF), normal))
    else:
        inc = None
    code = exp
    if inc is not None:
        if saturate:
            inc = b.and_(inc, b.icmp_unsigned("!=", exp, _c(i32, 0xFE)))
        code = b.add(exp, b.zext(inc, i32))
    code = b.select(b.icmp_unsigned("==", exp, _c(i32, 0xFF)), _c(i32, 0xFF), code)
    return b.trunc(code, _vec(x, I8))


def _rint(module: ir.Module, t: ir.Type) -> ir.Function:
    """llvm.rint: round to nearest, ties to even (wasm f32.nearest, x86 roundss)."""
    suffix = f"v{t.count}f32" if isinstance(t, ir.VectorType) else "f32"
    name = f"llvm.rint.{suffix}"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(t, [t]), name)
