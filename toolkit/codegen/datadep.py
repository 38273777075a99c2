"""Kernels of data-dependent ops: each op has a counting kernel, whose result the VM uses
to size the output, and a filling kernel."""
from __future__ import annotations

from llvmlite import ir

from typing import Sequence

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .kernel import I64, STATUS_INVALID_INPUT, KernelBuilder, Tensor, compute_type, fptosi_sat, i64, intrinsic
from .scalar import convert

TensorType = tuple[DType, Sequence[Dim]]


def _is_nonzero(b: ir.IRBuilder, t: Tensor, v: ir.Value) -> ir.Value:
    if t.dtype.is_float:
        return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))  # NaN counts, as in numpy
    return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))


def build_count_nonzero(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """scalars[0] := number of non-zero elements of tensor 0."""
    t = kb.tensor(0, *types[0])
    b = kb.b
    count = kb.accumulate(t.numel(), i64(0),
                          lambda acc, i: b.add(acc, b.zext(_is_nonzero(b, t, t.load(i)), I64)))
    kb.set_scalar(0, count)


def build_nonzero(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """out[d, k] := coordinate d of the k-th non-zero element in row-major order. Tensors:
    x, out."""
    t = kb.tensor(0, *types[0])
    o = kb.tensor(1, *types[1])
    b = kb.b
    count = o.dim(1)
    pos = b.alloca(I64, name="pos")
    b.store(i64(0), pos)
    strides = t.strides()

    def level(axis: int, idx: list[ir.Value], off: ir.Value) -> None:
        if axis == t.rank:
            with b.if_then(_is_nonzero(b, t, t.load(off))):
                p = b.load(pos)
                for d, coord in enumerate(idx):
                    o.store(b.add(b.mul(i64(d), count), p), coord)
                b.store(b.add(p, i64(1)), pos)
            return
        with kb.loop(t.dim(axis), name=f"ax{axis}") as i:
            level(axis + 1, idx + [i], kb.add(off, kb.mul(i, strides[axis])))

    level(0, [], i64(0))


def _scalar(kb: KernelBuilder, index: int, dtype: DType, work: DType | None = None) -> ir.Value:
    """Tensor ``index``'s one element, converted to ``work``'s compute type if given."""
    v = kb.tensor(index, dtype, ()).load(i64(0))
    return v if work is None else convert(kb.b, v, dtype, work)


def build_range_count(kb: KernelBuilder, params: DType, types: Sequence[TensorType]) -> None:
    """scalars[0] := max(0, ceil((limit - start) / delta)) computed in ``params`` (the
    inputs' dtype, or what float16 and bfloat16 compute in); fails when delta is 0.
    Tensors: start, limit, delta (scalars of one dtype)."""
    b = kb.b
    dtype = types[0][0]
    start, limit, delta = (_scalar(kb, k, dtype, params) for k in range(3))
    if dtype.is_float:
        kb.fail_if(b.fcmp_ordered("==", delta, ir.Constant(delta.type, 0.0)), STATUS_INVALID_INPUT)
        q = b.fdiv(b.fsub(limit, start), delta)
        n = fptosi_sat(b, intrinsic(b, "llvm.ceil", q), I64)
    else:
        start, limit, delta = (b.sext(v, I64) if v.type != I64 else v for v in (start, limit, delta))
        kb.fail_if(b.icmp_signed("==", delta, i64(0)), STATUS_INVALID_INPUT)
        # exact for every int64 start, limit and delta: the distance to cover and the step's
        # size are unsigned 64-bit (the difference of two int64 fits one; a signed difference
        # could overflow, and INT64_MIN / -1 would trap in wasm)
        up = b.icmp_signed(">", delta, i64(0))
        nonempty = b.select(up, b.icmp_signed(">", limit, start), b.icmp_signed(">", start, limit))
        span = b.select(up, b.sub(limit, start), b.sub(start, limit))
        step = b.select(up, delta, b.sub(i64(0), delta))
        q = b.udiv(span, step)
        q = b.add(q, b.zext(b.icmp_unsigned("!=", b.urem(span, step), i64(0)), I64))
        # past INT64_MAX elements: stays huge, and fails to allocate
        q = b.select(b.icmp_signed("<", q, i64(0)), i64((1 << 63) - 1), q)
        n = b.select(nonempty, q, i64(0))
    kb.set_scalar(0, b.select(b.icmp_signed("<", n, i64(0)), i64(0), n))


def build_range_fill(kb: KernelBuilder, params: DType, types: Sequence[TensorType]) -> None:
    """out[i] := start + i * delta, computed in ``params`` (as :func:`build_range_count`)
    and rounded once to out's dtype. Tensors: start, limit, delta, out."""
    b = kb.b
    dtype = types[0][0]
    start = _scalar(kb, 0, dtype, params)
    delta = _scalar(kb, 2, dtype, params)
    o = kb.tensor(3, *types[3])
    t = compute_type(params)
    with kb.loop(o.dim(0)) as i:
        if dtype.is_float:
            o.store(i, convert(b, b.fadd(start, b.fmul(b.sitofp(i, t), delta)), params, dtype))
        else:
            ii = b.trunc(i, t) if t != I64 else i
            o.store(i, b.add(start, b.mul(ii, delta)))


def build_fail_if_true(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """Fails with STATUS_INVALID_INPUT when tensor 0 (one bool) is true (the Assert op)."""
    v = kb.tensor(0, *types[0]).load(i64(0))
    kb.fail_if(kb.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)), STATUS_INVALID_INPUT)
