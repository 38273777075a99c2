"""Indexing kernels: GatherElements, GatherND, ScatterElements, ScatterND, CumSum and
CumProd, Trilu.

Indices are read at run time. Each is counted from the end when negative and checked
against its dim right where it is read: a bad one makes the kernel return OUT_OF_RANGE
with (index, dim size, data axis) as details, before any element is read or written
through it. A scatter copies its data into the output first, then applies the updates in
row-major order of the indices (so with duplicate indices the last update wins, as in
onnx.reference).
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .kernel import (I64, STATUS_INVALID_INPUT, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, i64,
                     llvm_type)
from .scalar import Scalar

TensorType = tuple[DType, Sequence[Dim]]
REDUCTIONS = ("none", "add", "mul", "max", "min")
CUMULATIVE = ("sum", "prod")


def _raw_index(kb: KernelBuilder, idx: Tensor, pos: ir.Value) -> ir.Value:
    """Element ``pos`` of an int32 or int64 index tensor, as i64."""
    v = idx.load(pos)
    return v if v.type == I64 else kb.b.sext(v, I64)


def _checked(kb: KernelBuilder, raw: ir.Value, n: ir.Value, axis: int) -> ir.Value:
    """``raw`` counted from the end when negative; fails unless it then lies in [0, n)."""
    b = kb.b
    k = b.select(b.icmp_signed("<", raw, i64(0)), b.add(raw, n), raw)
    # one unsigned compare covers both k < 0 and k >= n
    kb.fail_if(b.icmp_unsigned(">=", k, n), STATUS_OUT_OF_RANGE, [raw, n, i64(axis)])
    return k


def _copy(kb: KernelBuilder, src: Tensor, dst: Tensor, src_off: ir.Value, dst_off: ir.Value,
          n: ir.Value) -> None:
    with kb.loop(n, name="cp") as i:
        dst.store_raw(kb.add(dst_off, i), src.load_raw(kb.add(src_off, i)))


def _update(kb: KernelBuilder, out: Tensor, pos: ir.Value, upd: Tensor, upd_pos: ir.Value,
            reduction: str) -> None:
    """out[pos] = reduction(out[pos], upd[upd_pos]); numpy's meaning on bools (add and max
    are or, mul and min are and)."""
    if reduction == "none":
        out.store_raw(pos, upd.load_raw(upd_pos))
        return
    b = kb.b
    old, new = out.load(pos), upd.load(upd_pos)
    if out.dtype.kind == "b":
        value = b.or_(old, new) if reduction in ("add", "max") else b.and_(old, new)
    else:
        s = Scalar(b, out.dtype)
        value = {"add": s.add, "mul": s.mul, "max": s.max, "min": s.min}[reduction](old, new)
    out.store(pos, value)


def _each_element(kb: KernelBuilder, idx: Tensor, data_strides: Sequence[ir.Value], axis: int, body) -> None:
    """``body(i, d)`` for each element of ``idx`` in row-major order: ``i`` its offset in
    ``idx``, ``d`` the offset in data of the same coordinates with the one along ``axis``
    left out (data may be larger than ``idx`` on the other axes)."""
    strides = idx.strides()

    def level(a: int, ioff: ir.Value, doff: ir.Value) -> None:
        if a == idx.rank:
            body(ioff, doff)
            return
        with kb.loop(idx.dim(a), name=f"ax{a}") as i:
            level(a + 1, kb.add(ioff, kb.mul(i, strides[a])),
                  doff if a == axis else kb.add(doff, kb.mul(i, data_strides[a])))

    level(0, i64(0), i64(0))


def build_gather_elements(kb: KernelBuilder, axis: int, types: Sequence[TensorType]) -> None:
    """out[c] = data[c with c[axis] = idx[c]] for each coordinate c of idx. Tensors: data,
    indices, out."""
    data = kb.tensor(0, *types[0])
    idx = kb.tensor(1, *types[1])
    o = kb.tensor(2, *types[2])
    ds, n = data.strides(), data.dim(axis)

    def body(i: ir.Value, d: ir.Value) -> None:
        k = _checked(kb, _raw_index(kb, idx, i), n, axis)
        o.store_raw(i, data.load_raw(kb.add(d, kb.mul(k, ds[axis]))))

    _each_element(kb, idx, ds, axis, body)


def build_scatter_elements(kb: KernelBuilder, axis_reduction: tuple[int, str],
                           types: Sequence[TensorType]) -> None:
    """out = data; then out[c with c[axis] = idx[c]] = reduction(.., updates[c]) for each
    coordinate c of idx. Tensors: data, indices, updates, out."""
    axis, reduction = axis_reduction
    data = kb.tensor(0, *types[0])
    idx = kb.tensor(1, *types[1])
    upd = kb.tensor(2, *types[2])
    o = kb.tensor(3, *types[3])
    _copy(kb, data, o, i64(0), i64(0), data.numel())
    ds, n = data.strides(), data.dim(axis)

    def body(i: ir.Value, d: ir.Value) -> None:
        k = _checked(kb, _raw_index(kb, idx, i), n, axis)
        _update(kb, o, kb.add(d, kb.mul(k, ds[axis])), upd, i, reduction)

    _each_element(kb, idx, ds, axis, body)


def _nd_offset(kb: KernelBuilder, data: Tensor, ds: Sequence[ir.Value], idx: Tensor, first: int, k: int,
               row: ir.Value, base: ir.Value) -> ir.Value:
    """``base`` plus the offset in data (strides ``ds``) of the index tuple ``idx[row, :]``
    (``k`` elements) addressing data axes ``first .. first + k``, each index checked."""
    off = base
    for j in range(k):
        a = first + j
        kk = _checked(kb, _raw_index(kb, idx, kb.add(kb.mul(row, i64(k)), i64(j))), data.dim(a), a)
        off = kb.add(off, kb.mul(kk, ds[a]))
    return off


def build_gather_nd(kb: KernelBuilder, batch_k: tuple[int, int], types: Sequence[TensorType]) -> None:
    """For each batch (the first ``batch_dims`` axes, shared by data and indices) and each
    index tuple of it (the last axis of indices, ``k`` long), the slice of data's remaining
    axes at that tuple goes to the output. Tensors: data, indices, out."""
    batch, k = batch_k
    data = kb.tensor(0, *types[0])
    idx = kb.tensor(1, *types[1])
    o = kb.tensor(2, *types[2])
    per_batch = data.numel(batch)  # elements of data in one batch
    tuples = idx.numel(batch, idx.rank - 1)  # index tuples per batch
    size = data.numel(batch + k)  # elements each tuple addresses
    ds = data.strides()
    with kb.loop(data.numel(0, batch), name="batch") as bi:
        with kb.loop(tuples, name="tuple") as g:
            row = kb.add(kb.mul(bi, tuples), g)
            src = _nd_offset(kb, data, ds, idx, batch, k, row, kb.mul(bi, per_batch))
            _copy(kb, data, o, src, kb.mul(row, size), size)


def build_scatter_nd(kb: KernelBuilder, k_reduction: tuple[int, str], types: Sequence[TensorType]) -> None:
    """out = data; then for each index tuple (the last axis of indices, ``k`` long), the
    slice of out at that tuple = reduction(.., the matching slice of updates). Tensors:
    data, indices, updates, out."""
    k, reduction = k_reduction
    data = kb.tensor(0, *types[0])
    idx = kb.tensor(1, *types[1])
    upd = kb.tensor(2, *types[2])
    o = kb.tensor(3, *types[3])
    _copy(kb, data, o, i64(0), i64(0), data.numel())
    size, ds = data.numel(k), data.strides()
    with kb.loop(idx.numel(0, idx.rank - 1), name="tuple") as g:
        dst = _nd_offset(kb, data, ds, idx, 0, k, g, i64(0))
        src = kb.mul(g, size)
        with kb.loop(size, name="el") as i:
            _update(kb, o, kb.add(dst, i), upd, kb.add(src, i), reduction)


def _runtime_axis(kb: KernelBuilder, x: Tensor) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(outer, n, inner) around the axis in scalar 0 (negative counts from the end); fails
    with (axis, rank) unless it names an axis of ``x``."""
    b = kb.b
    raw = kb.scalar(0)
    rank = i64(x.rank)
    axis = b.select(b.icmp_signed("<", raw, i64(0)), b.add(raw, rank), raw)
    kb.fail_if(b.icmp_unsigned(">=", axis, rank), STATUS_INVALID_INPUT, [raw, rank])
    outer, n, inner = i64(1), i64(0), i64(1)
    for a in range(x.rank):
        d = x.dim(a)
        outer = b.mul(outer, b.select(b.icmp_signed(">", axis, i64(a)), d, i64(1)))
        n = b.select(b.icmp_signed("==", axis, i64(a)), d, n)
        inner = b.mul(inner, b.select(b.icmp_signed("<", axis, i64(a)), d, i64(1)))
    return outer, n, inner


def build_cumulative(kb: KernelBuilder, params: tuple[int | None, str, bool, bool],
                     types: Sequence[TensorType]) -> None:
    """Running sums or products (``kind`` "sum" or "prod") along one axis: out[p] =
    out[previous p] (+) x[p] (x[previous p] when exclusive; the first is then 0 or 1), the
    previous position one before, or one after when reversed. Each partial result is stored
    before the next reads it back, so float16 rounds each one as numpy does. The axis is
    ``axis``, or scalar 0 when None (known only at run time). Tensors: x, out."""
    axis, kind, exclusive, reverse = params
    b = kb.b
    x = kb.tensor(0, *types[0])
    o = kb.tensor(1, *types[1])
    if axis is None:
        outer, n, inner = _runtime_axis(kb, x)
    else:
        outer, n, inner = x.numel(0, axis), x.dim(axis), x.numel(axis + 1)
    s = Scalar(b, x.dtype)
    zero = s.const(0 if kind == "sum" else 1)
    combine = s.add if kind == "sum" else s.mul
    with kb.loop(outer, name="outer") as a:
        base = kb.mul(kb.mul(a, n), inner)
        with kb.loop(n, name="t") as t:
            first = b.icmp_signed("==", t, i64(0))
            p = b.sub(b.sub(n, i64(1)), t) if reverse else t
            q = b.add(p, i64(1)) if reverse else b.sub(p, i64(1))
            q = b.select(first, p, q)  # the first position has no previous one: any valid row
            prow = kb.add(base, kb.mul(p, inner))
            qrow = kb.add(base, kb.mul(q, inner))
            with kb.loop(inner, name="in") as i:
                prev = b.select(first, zero, o.load(kb.add(qrow, i)))
                add = x.load(kb.add(qrow if exclusive else prow, i))
                if exclusive:
                    add = b.select(first, zero, add)
                o.store(kb.add(prow, i), combine(prev, add))


def build_trilu(kb: KernelBuilder, upper: bool, types: Sequence[TensorType]) -> None:
    """Keep the elements of each matrix (the last two axes) on and above (``upper``) or on
    and below diagonal k (scalar 0), zero the rest. Tensors: x, out."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    o = kb.tensor(1, *types[1])
    r = x.rank
    rows, cols, k = x.dim(r - 2), x.dim(r - 1), kb.scalar(0)
    elem = llvm_type(x.dtype)
    zero = ir.Constant(elem, 0.0 if isinstance(elem, (ir.FloatType, ir.DoubleType)) else 0)
    with kb.loop(x.numel(0, r - 2), name="mat") as m:
        with kb.loop(rows, name="row") as i:
            row = kb.mul(kb.add(kb.mul(m, rows), i), cols)
            with kb.loop(cols, name="col") as j:
                # j - i cannot overflow (both are dims); k may be anything
                d = b.sub(j, i)
                keep = b.icmp_signed(">=" if upper else "<=", d, k)
                pos = kb.add(row, j)
                o.store_raw(pos, b.select(keep, x.load_raw(pos), zero))
