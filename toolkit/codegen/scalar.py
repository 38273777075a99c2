"""Scalar arithmetic that knows its dtype: one call site for floats, signed and unsigned
integers and bools, on scalars or vectors of the dtype's compute type.

Scalar functions (toolkit.ops.elementwise's table) are written against :class:`Scalar`,
so an elementwise op is one line however many dtypes it takes. Semantics follow numpy:
integers wrap; integer division truncates and never traps (x / 0 is 0, MIN / -1 wraps);
float max/min propagate NaN; comparisons give bools (i8 0 or 1).
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.dtypes import SMALL_INTS, DType
from . import half
from .kernel import F64, I8, I32, compute_type, fptosi_sat, intrinsic

_FCMP = {"==": "==", "<": "<", ">": ">", "<=": "<=", ">=": ">=", "!=": "!="}


class Scalar:
    def __init__(self, b: ir.IRBuilder, dtype: DType):
        self.b, self.dtype, self.t = b, dtype, compute_type(dtype)
        self.is_float = dtype.is_float

    def const(self, v: float | int) -> ir.Constant:
        return ir.Constant(self.t, float(v) if self.is_float else int(v))

    def fold(self, fn, values: list[ir.Value]) -> ir.Value:
        """fn folded left over ``values`` (variadic ops: Sum, Max, Min)."""
        acc = values[0]
        for v in values[1:]:
            acc = fn(acc, v)
        return acc

    # arithmetic ------------------------------------------------------------
    def add(self, x, y):
        return self.b.fadd(x, y) if self.is_float else self.b.add(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y) if self.is_float else self.b.sub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y) if self.is_float else self.b.mul(x, y)

    def div(self, x, y):
        b = self.b
        if self.is_float:
            return b.fdiv(x, y)
        # wasm traps on x / 0 and MIN / -1: divide by a safe divisor, 0 for x / 0, -x for x / -1
        zero, one = self.const(0), self.const(1)
        is0 = b.icmp_unsigned("==", y, zero)
        if self.dtype.is_signed:
            ism1 = b.icmp_signed("==", y, self.const(-1))
            q = b.sdiv(x, b.select(b.or_(is0, ism1), one, y))
            q = b.select(ism1, b.sub(zero, x), q)
        else:
            q = b.udiv(x, b.select(is0, one, y))
        return b.select(is0, zero, q)

    def neg(self, x):
        return self.b.fneg(x) if self.is_float else self.b.sub(self.const(0), x)

    def abs(self, x):
        if self.is_float:
            return intrinsic(self.b, "llvm.fabs", x)
        if not self.dtype.is_signed:
            return x
        return self.b.select(self.lt(x, self.const(0)), self.b.sub(self.const(0), x), x)

    def max(self, x, y):
        if self.is_float:
            return intrinsic(self.b, "llvm.maximum", x, y)
        return intrinsic(self.b, "llvm.smax" if self.dtype.is_signed else "llvm.umax", x, y)

    def min(self, x, y):
        if self.is_float:
            return intrinsic(self.b, "llvm.minimum", x, y)
        return intrinsic(self.b, "llvm.smin" if self.dtype.is_signed else "llvm.umin", x, y)

    # comparisons: i1 ---------------------------------------------------------
    def cmp(self, op: str, x, y) -> ir.Value:
        if self.is_float:
            return self.b.fcmp_ordered(_FCMP[op], x, y)
        if self.dtype.is_signed:
            return self.b.icmp_signed(op, x, y)
        return self.b.icmp_unsigned(op, x, y)

    def lt(self, x, y) -> ir.Value:
        return self.cmp("<", x, y)

    def select(self, cond: ir.Value, x, y):
        return self.b.select(cond, x, y)


# bools are i8 in memory ------------------------------------------------------


def to_bool(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """An i8 bool element as i1."""
    return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))


def from_bool(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.zext(v, I8)


def convert(b: ir.IRBuilder, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    """numpy's ``astype`` between compute types: floats to ints truncate and saturate (NaN is
    0) instead of trapping (ONNX leaves out-of-range values undefined); ints wrap; anything
    to bool is ``!= 0`` (NaN is true); float64 to a narrow float rounds once."""
    st, tt = compute_type(src), compute_type(dst)
    if src == dst or st == tt and src.kind == dst.kind:
        return x
    if dst.kind == "b":
        if src.is_float:
            return from_bool(b, b.fcmp_unordered("!=", x, ir.Constant(st, 0.0)))
        return from_bool(b, b.icmp_unsigned("!=", x, ir.Constant(st, 0)))
    if src.is_float and dst.is_float:
        if st == tt:
            return x
        if dst.is_narrow_float:  # computed as float32 and rounded to its format when stored:
            return half.f64_to_f32_odd(b, x)  # round to odd first, so the two roundings make one
        return b.fpext(x, tt) if tt == F64 else b.fptrunc(x, tt)
    if src.is_float and dst in SMALL_INTS:
        # int4/int2: through a wide signed integer, so the stored low bits wrap (-3 -> uint2 1)
        wide = ir.VectorType(I32, x.type.count) if isinstance(x.type, ir.VectorType) else I32
        return b.trunc(fptosi_sat(b, x, wide, signed=True), tt)
    if src.is_float:
        return fptosi_sat(b, x, tt, signed=dst.is_signed)
    if dst.is_float:
        return b.sitofp(x, tt) if src.is_signed else b.uitofp(x, tt)
    if tt.width < st.width:
        return b.trunc(x, tt)
    if tt.width > st.width:
        return b.sext(x, tt) if src.is_signed else b.zext(x, tt)
    return x

