"""Elementwise kernels with numpy broadcasting.

One kernel per (scalar function, dtypes, static-shape pattern): a flat loop when every
input has the output's element count or one element (the common case, which LLVM
vectorizes), and otherwise a loop nest over the output dims with per-input strides that
are 0 on broadcast dims. Which path runs is decided at run time when the compiler cannot
tell. The scalar function comes from the core op (``op.scalar_fn``), so the same loops
serve every elementwise op and, later, fused chains of them.
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, FLOAT64, DType
from . import mathlib
from .kernel import KernelBuilder, Tensor, i64, unswitched
from .scalar import convert

ScalarFn = Callable[[ir.IRBuilder, list[ir.Value]], ir.Value]
TensorType = tuple[DType, Sequence[Dim]]


@unswitched
def build_elementwise(kb: KernelBuilder, op, types: Sequence[TensorType]) -> None:
    """``out[i] = op(in_0[i'], in_1[i''], ...)`` with broadcasting, for a core op with a
    ``scalar_fn(b, values, in_dtypes, out_dtype)``. Tensors are the kernel's arguments in
    order: the inputs, then the output."""
    *inputs, out = types
    dtypes = [dt for dt, _ in inputs]

    def fn(b: ir.IRBuilder, vals: list[ir.Value]) -> ir.Value:
        return op.scalar_fn(b, vals, dtypes, out[0])

    loops(kb, inputs, out, fn, saturate=getattr(op, "saturate", True), round_mode=getattr(op, "round_mode", "up"))


def loops(kb: KernelBuilder, inputs: Sequence[TensorType], out: TensorType, fn: ScalarFn,
          saturate: bool = True, round_mode: str = "up") -> None:
    """The broadcasting loops around a scalar function (inputs' elements in compute types).
    ``saturate``, ``round_mode``: how an out-of-range result stores as float8, how a result
    rounds to float8 e8m0 (see kernel.from_compute)."""
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
        with kb.split_loop(n, "i", grain=16, unit_work=1) as i:  # split across threads when large
            vals = [scalars[k] if k in scalars else t.load(i) for k, t in enumerate(ins)]
            o.store(i, fn(kb.b, vals), saturate, round_mode)

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
            # not split: in the first part only, since every part running it would be wrong
            # when the output is an input's buffer (in place), read after another part wrote it
            with kb.first_part():
                _nested(kb, ins, o, fn, saturate, round_mode)


def _nested(kb: KernelBuilder, ins: list[Tensor], o: Tensor, fn: ScalarFn, saturate: bool, round_mode: str) -> None:
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
            o.store(ooff, fn(b, [t.load(off) for t, off in zip(ins, offs)]), saturate, round_mode)
            return
        with kb.loop(o.dim(axis), name=f"ax{axis}") as i:
            level(axis + 1, [kb.add(off, kb.mul(i, s[axis])) for off, s in zip(offs, strides)],
                  kb.add(ooff, kb.mul(i, ostrides[axis])))

    level(0, [i64(0)] * len(ins), i64(0))


# ----------------------------------------------------------------------------- scalar helpers


def power(b: ir.IRBuilder, x: ir.Value, y: ir.Value, xdt: DType, ydt: DType) -> ir.Value:
    """ONNX Pow: the exponent may have another dtype than the base; the result has the
    base's. With a float operand it computes in float64 when either is float64 or the base
    is an integer (numpy's promotion, then truncated back like the reference's ``astype``),
    else in float32 (nearly correctly rounded)."""
    if xdt.is_float or ydt.is_float:
        ct = FLOAT64 if FLOAT64 in (xdt, ydt) or not xdt.is_float else FLOAT32
        r = mathlib.pow(b, convert(b, x, xdt, ct), convert(b, y, ydt, ct))
        return convert(b, r, ct, xdt)
    t = x.type
    if y.type.width > t.width:
        y = b.trunc(y, t)
    elif y.type.width < t.width:
        y = b.sext(y, t) if ydt.is_signed else b.zext(y, t)
    return _int_pow(b, x, y, ydt.is_signed)


def _int_pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed_exponent: bool) -> ir.Value:
    """x**y for integers by squaring (wrapping like numpy); y < 0 gives 0 unless |x| == 1."""
    t = x.type
    one, zero = ir.Constant(t, 1), ir.Constant(t, 0)
    result, base, e = one, x, y
    for _ in range(t.width):
        bit = b.icmp_unsigned("!=", b.and_(e, one), zero)
        result = b.select(bit, b.mul(result, base), result)
        base = b.mul(base, base)
        e = b.lshr(e, one)
    if not signed_exponent:
        return result
    neg = b.icmp_signed("<", y, zero)
    odd = b.icmp_unsigned("!=", b.and_(y, one), zero)
    neg_val = b.select(b.icmp_signed("==", x, one), one,
                       b.select(b.icmp_signed("==", x, ir.Constant(t, -1)),
                                b.select(odd, ir.Constant(t, -1), one), zero))
    return b.select(neg, neg_val, result)
