"""Elementwise kernels with numpy broadcasting.

One kernel per (op, dtypes, shapes): a flat loop when every input has the output's element
count or one element (the common case, which LLVM vectorizes), and otherwise a loop nest
over the output dims with per-input strides that are 0 on broadcast dims. Which path runs
is decided at run time when the compiler cannot tell.
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.graph import BOOL, FLOAT32, DType
from . import mathlib
from .kernel import F32, I8, KernelBuilder, Tensor, fptosi_sat, i64, intrinsic, llvm_type

ScalarFn = Callable[[ir.IRBuilder, list[ir.Value]], ir.Value]


def build_elementwise(kb: KernelBuilder, inputs: Sequence[tuple[DType, Sequence[Dim]]],
                      out: tuple[DType, Sequence[Dim]], fn: ScalarFn) -> None:
    """``out[i] = fn(in_0[i'], in_1[i''], ...)`` with broadcasting. Tensors are the kernel's
    arguments in order: the inputs, then the output."""
    ins = [kb.tensor(k, dt, shape) for k, (dt, shape) in enumerate(inputs)]
    o = kb.tensor(len(ins), out[0], out[1])
    n = o.numel()
    kinds = []
    for t in ins:
        if tuple(t.shape) == tuple(o.shape):
            kinds.append("same")
        elif D.product(t.shape) == 1:
            kinds.append("scalar")
        else:
            kinds.append("maybe")

    def flat():
        scalars = {k: t.load(i64(0)) for k, t in enumerate(ins) if kinds[k] == "scalar"}
        with kb.loop(n) as i:
            vals = [scalars[k] if k in scalars else t.load(i) for k, t in enumerate(ins)]
            o.store(i, fn(kb.b, vals))

    maybe = [t for t, k in zip(ins, kinds) if k == "maybe"]
    if not maybe:
        flat()
        return
    b = kb.b
    cond = None
    for t in maybe:
        c = b.icmp_signed("==", t.numel(), n)
        cond = c if cond is None else b.and_(cond, c)
    with b.if_else(cond) as (then, otherwise):
        with then:
            flat()
        with otherwise:
            _nested(kb, ins, o, fn)


def _nested(kb: KernelBuilder, ins: list[Tensor], o: Tensor, fn: ScalarFn) -> None:
    b = kb.b
    rank = o.rank
    strides = []
    for t in ins:
        own = t.strides()
        s = []
        for axis in range(rank):
            a = axis - (rank - t.rank)
            if a < 0:
                s.append(i64(0))
            else:
                is_one = b.icmp_signed("==", t.dim(a), i64(1))
                s.append(b.select(is_one, i64(0), own[a]))
        strides.append(s)
    ostrides = o.strides()

    def level(axis: int, offs: list[ir.Value], ooff: ir.Value) -> None:
        if axis == rank:
            o.store(ooff, fn(b, [t.load(off) for t, off in zip(ins, offs)]))
            return
        with kb.loop(o.dim(axis), name=f"ax{axis}") as i:
            level(axis + 1, [kb.add(off, kb.mul(i, s[axis])) for off, s in zip(offs, strides)],
                  kb.add(ooff, kb.mul(i, ostrides[axis])))

    level(0, [i64(0)] * len(ins), i64(0))


# ----------------------------------------------------------------------------- scalar ops


def is_float(dt: DType) -> bool:
    return dt == FLOAT32


def to_bool(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """An i8 bool element as i1."""
    return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))


def from_bool(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.zext(v, I8)


def binary(op: str, dt: DType) -> ScalarFn:
    """The scalar function of an arithmetic or comparison op on dtype ``dt``."""
    f = is_float(dt)
    t = llvm_type(dt)

    def arith(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
        if len(v) != 2:  # variadic ops (Max, Min, Sum) fold left; one input is the identity
            acc = v[0]
            for y in v[1:]:
                acc = arith(b, [acc, y])
            return acc
        x, y = v
        if op == "Add":
            return b.fadd(x, y) if f else b.add(x, y)
        if op == "Sub":
            return b.fsub(x, y) if f else b.sub(x, y)
        if op == "Mul":
            return b.fmul(x, y) if f else b.mul(x, y)
        if op == "Div":
            if f:
                return b.fdiv(x, y)
            # wasm traps on x/0 and MIN/-1: divide by a safe divisor, 0 for x/0, -x for x/-1
            zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
            is0 = b.icmp_signed("==", y, zero)
            ism1 = b.icmp_signed("==", y, ir.Constant(t, -1))
            safe = b.select(b.or_(is0, ism1), one, y)
            q = b.sdiv(x, safe)
            q = b.select(ism1, b.sub(zero, x), q)
            return b.select(is0, zero, q)
        if op == "Max":
            return intrinsic(b, "llvm.maximum", x, y) if f else intrinsic(b, "llvm.smax", x, y)
        if op == "Min":
            return intrinsic(b, "llvm.minimum", x, y) if f else intrinsic(b, "llvm.smin", x, y)
        if op == "Pow":
            return _pow(b, x, y)
        cmp = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=", "GreaterOrEqual": ">="}[op]
        if f:
            return from_bool(b, b.fcmp_ordered(cmp, x, y))
        if dt == BOOL:
            return from_bool(b, b.icmp_unsigned(cmp, x, y))
        return from_bool(b, b.icmp_signed(cmp, x, y))

    return arith


def _pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """ONNX Pow: the exponent may have another dtype than the base; the result has the base's."""
    if x.type == F32:
        return mathlib.pow(b, x, y if y.type == F32 else b.sitofp(y, F32))
    if y.type == F32:
        return fptosi_sat(b, mathlib.pow(b, b.sitofp(x, F32), y), x.type)
    if y.type != x.type:
        y = b.trunc(y, x.type) if y.type.width > x.type.width else b.sext(y, x.type)
    return _int_pow(b, x, y)


def _int_pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x**y for integers by squaring (wrapping like numpy); y < 0 gives 0 unless |x| == 1."""
    t = x.type
    one, zero = ir.Constant(t, 1), ir.Constant(t, 0)
    result, base, e = one, x, y
    for _ in range(t.width):
        bit = b.icmp_unsigned("!=", b.and_(e, one), zero)
        result = b.select(bit, b.mul(result, base), result)
        base = b.mul(base, base)
        e = b.lshr(e, one)
    neg = b.icmp_signed("<", y, zero)
    odd = b.icmp_unsigned("!=", b.and_(y, one), zero)
    neg_val = b.select(b.icmp_signed("==", x, one), one,
                       b.select(b.icmp_signed("==", x, ir.Constant(t, -1)),
                                b.select(odd, ir.Constant(t, -1), one), zero))
    return b.select(neg, neg_val, result)


def unary(op: str, dt: DType, attrs: dict) -> ScalarFn:
    f = is_float(dt)
    t = llvm_type(dt)
    zero = ir.Constant(t, 0.0 if f else 0)

    def fn(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
        x = v[0]
        if op == "Neg":
            return b.fneg(x) if f else b.sub(zero, x)
        if op == "Abs":
            if f:
                return intrinsic(b, "llvm.fabs", x)
            return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)
        if op == "Relu":
            less = b.fcmp_ordered("<", x, zero) if f else b.icmp_signed("<", x, zero)
            return b.select(less, zero, x)
        if op == "LeakyRelu":
            alpha = ir.Constant(F32, float(attrs.get("alpha", 0.01)))
            return b.select(b.fcmp_ordered("<", x, zero), b.fmul(x, alpha), x)
        if op == "Not":
            return b.xor(x, ir.Constant(I8, 1))
        if op == "Sqrt":
            return intrinsic(b, "llvm.sqrt", x)
        if op == "Reciprocal":
            return b.fdiv(ir.Constant(F32, 1.0), x)
        math = {"Exp": mathlib.exp, "Log": mathlib.log, "Tanh": mathlib.tanh,
                "Sigmoid": mathlib.sigmoid, "Erf": mathlib.erf}
        return math[op](b, x)

    return fn


def logical(op: str) -> ScalarFn:
    def fn(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
        x, y = (to_bool(b, a) for a in v)
        return from_bool(b, b.and_(x, y) if op == "And" else b.or_(x, y))

    return fn


def where(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
    return b.select(to_bool(b, v[0]), v[1], v[2])


def identity(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
    return v[0]


def clip(dt: DType, has_min: bool, has_max: bool) -> ScalarFn:
    f = is_float(dt)

    def fn(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
        x = v[0]
        k = 1
        if has_min:
            lo = v[k]
            k += 1
            below = b.fcmp_ordered("<", x, lo) if f else b.icmp_signed("<", x, lo)
            x = b.select(below, lo, x)
        if has_max:
            hi = v[k]
            above = b.fcmp_ordered(">", x, hi) if f else b.icmp_signed(">", x, hi)
            x = b.select(above, hi, x)
        return x

    return fn


def cast(src: DType, dst: DType) -> ScalarFn:
    st, tt = llvm_type(src), llvm_type(dst)

    def fn(b: ir.IRBuilder, v: list[ir.Value]) -> ir.Value:
        x = v[0]
        if src == dst:
            return x
        if dst == BOOL:
            nz = b.fcmp_unordered("!=", x, ir.Constant(F32, 0.0)) if is_float(src) else \
                b.icmp_signed("!=", x, ir.Constant(st, 0))
            return from_bool(b, nz)
        if src == BOOL:
            return b.uitofp(x, tt) if is_float(dst) else b.zext(x, tt)
        if is_float(src):
            # saturating: NaN -> 0, out of range -> min/max; never a trap
            return fptosi_sat(b, x, tt)
        if is_float(dst):
            return b.sitofp(x, tt)
        return b.trunc(x, tt) if tt.width < st.width else b.sext(x, tt)

    return fn
