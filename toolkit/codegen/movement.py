"""Data-movement kernels: Transpose, Gather, Concat, Slice and the ConstantOfShape fill.

They copy elements without computing on them. Loops run over the output in row-major
order, so stores are contiguous, and the innermost run that is contiguous on both sides is
one flat copy loop (which LLVM vectorizes or turns into a memory copy).
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.graph import FLOAT32, DType
from .kernel import I64, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, i64, llvm_type


def _copy(kb: KernelBuilder, src: Tensor, src_off: ir.Value, dst: Tensor, dst_off: ir.Value,
          n: ir.Value) -> None:
    """dst[dst_off + i] = src[src_off + i] for i < n."""
    with kb.loop(n, name="cp") as i:
        dst.store(kb.add(dst_off, i), src.load(kb.add(src_off, i)))


def _nest(kb: KernelBuilder, x: Tensor, o: Tensor, x_strides: Sequence[ir.Value], x_base: ir.Value,
          inner: int) -> None:
    """Loops over output axes ``[0, inner)`` (input stride ``x_strides[axis]`` each), then
    one contiguous copy of the block of the remaining axes."""
    os_ = o.strides()
    block = o.numel(inner)

    def level(axis: int, x_off: ir.Value, o_off: ir.Value) -> None:
        if axis == inner:
            _copy(kb, x, x_off, o, o_off, block)
            return
        with kb.loop(o.dim(axis), name=f"ax{axis}") as i:
            level(axis + 1, kb.add(x_off, kb.mul(i, x_strides[axis])), kb.add(o_off, kb.mul(i, os_[axis])))

    level(0, x_base, i64(0))


def build_transpose(kb: KernelBuilder, dtype: DType, in_shape: Sequence[Dim], perm: Sequence[int],
                    out_shape: Sequence[Dim]) -> None:
    """out = transpose(in, perm). Trailing axes that ``perm`` leaves in place are one
    contiguous block on both sides."""
    x = kb.tensor(0, dtype, in_shape)
    o = kb.tensor(1, dtype, out_shape)
    inner = len(perm)
    while inner > 0 and perm[inner - 1] == inner - 1:
        inner -= 1
    xs = x.strides()
    _nest(kb, x, o, [xs[p] for p in perm], i64(0), inner)


def build_gather(kb: KernelBuilder, dtype: DType, data_shape: Sequence[Dim], idx_dtype: DType,
                 idx_shape: Sequence[Dim], axis: int, out_shape: Sequence[Dim]) -> None:
    """out[a, j, c] = data[a, idx[j], c] over (outer, indices, inner) blocks. Every index is
    checked before anything is copied; a bad one fails with details (index, dim)."""
    data = kb.tensor(0, dtype, data_shape)
    idx = kb.tensor(1, idx_dtype, idx_shape)
    o = kb.tensor(2, dtype, out_shape)
    b = kb.b
    outer, n, inner, m = data.numel(0, axis), data.dim(axis), data.numel(axis + 1), idx.numel()

    def index(j: ir.Value) -> tuple[ir.Value, ir.Value]:
        raw = idx.load(j)
        raw = b.sext(raw, I64) if raw.type != I64 else raw
        return raw, b.select(b.icmp_signed("<", raw, i64(0)), b.add(raw, n), raw)

    with kb.loop(m, name="chk") as j:
        raw, k = index(j)
        # one unsigned compare covers both k < 0 and k >= n
        kb.fail_if(b.icmp_unsigned(">=", k, n), STATUS_OUT_OF_RANGE, [raw, n])
    with kb.loop(outer, name="outer") as a:
        with kb.loop(m, name="j") as j:
            _, k = index(j)
            src = kb.mul(kb.add(kb.mul(a, n), k), inner)
            dst = kb.mul(kb.add(kb.mul(a, m), j), inner)
            _copy(kb, data, src, o, dst, inner)


def build_concat(kb: KernelBuilder, dtype: DType, in_shapes: Sequence[Sequence[Dim]], axis: int,
                 out_shape: Sequence[Dim]) -> None:
    """out = concat(inputs, axis): each input's (dims[axis:]) block goes to its offset in
    every output row. Scalar 0 is where the first input starts along ``axis`` (a concat of
    more inputs than one call takes is split into calls)."""
    ins = [kb.tensor(k, dtype, s) for k, s in enumerate(in_shapes)]
    o = kb.tensor(len(ins), dtype, out_shape)
    outer, inner = o.numel(0, axis), o.numel(axis + 1)
    row = kb.mul(o.dim(axis), inner)
    off = kb.mul(kb.scalar(0), inner)
    for t in ins:
        blk = kb.mul(t.dim(axis), inner)
        with kb.loop(outer, name="row") as a:
            _copy(kb, t, kb.mul(a, blk), o, kb.add(kb.mul(a, row), off), blk)
        off = kb.add(off, blk)


def build_slice(kb: KernelBuilder, dtype: DType, in_shape: Sequence[Dim], out_shape: Sequence[Dim],
                axes: Sequence[int], steps: Sequence[int | None]) -> None:
    """out[.., i, ..] = in[.., first + i * step, ..] on each sliced axis. Scalars: (first,
    step) per sliced axis in ``axes`` order; a step known at compile time (``steps``) is a
    constant instead. Axes after the last sliced one are copied as one contiguous block."""
    x = kb.tensor(0, dtype, in_shape)
    o = kb.tensor(1, dtype, out_shape)
    xs = x.strides()
    base: ir.Value = i64(0)
    stride = list(xs)
    for j, (a, step) in enumerate(zip(axes, steps)):
        base = kb.add(base, kb.mul(kb.scalar(2 * j), xs[a]))
        stride[a] = kb.mul(i64(step) if step is not None else kb.scalar(2 * j + 1), xs[a])
    _nest(kb, x, o, stride, base, max(axes) + 1)


def build_fill(kb: KernelBuilder, dtype: DType, shape: Sequence[Dim], value: float | int | bool) -> None:
    """Every element of tensor 0 := value."""
    o = kb.tensor(0, dtype, shape)
    c = ir.Constant(llvm_type(dtype), float(value) if dtype == FLOAT32 else int(value))
    with kb.loop(o.numel()) as i:
        o.store(i, c)

