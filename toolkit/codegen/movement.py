"""Data-movement kernels: Transpose, Gather, Concat, Slice and the ConstantOfShape fill.

They copy elements without computing on them. Loops run over the output in row-major
order, so stores are contiguous, and the innermost run that is contiguous on both sides is
one flat copy loop (which LLVM vectorizes or turns into a memory copy).
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .kernel import I64, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, i64, stored_constant

TensorType = tuple[DType, Sequence[Dim]]


def _copy(kb: KernelBuilder, src: Tensor, src_off: ir.Value, dst: Tensor, dst_off: ir.Value,
          n: ir.Value) -> None:
    """dst[dst_off + i] = src[src_off + i] for i < n (elements as stored)."""
    with kb.loop(n, name="cp") as i:
        dst.store_raw(kb.add(dst_off, i), src.load_raw(kb.add(src_off, i)))


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


def build_transpose(kb: KernelBuilder, perm: Sequence[int], types: Sequence[TensorType]) -> None:
    """out = transpose(in, perm). Trailing axes that ``perm`` leaves in place are one
    contiguous block on both sides. Tensors: in, out."""
    x = kb.tensor(0, *types[0])
    o = kb.tensor(1, *types[1])
    inner = len(perm)
    while inner > 0 and perm[inner - 1] == inner - 1:
        inner -= 1
    xs = x.strides()
    _nest(kb, x, o, [xs[p] for p in perm], i64(0), inner)


def build_gather(kb: KernelBuilder, axis: int, types: Sequence[TensorType]) -> None:
    """out[a, j, c] = data[a, idx[j], c] over (outer, indices, inner) blocks. Every index is
    checked before anything is copied; a bad one fails with details (index, dim). Tensors:
    data, indices, out."""
    data = kb.tensor(0, *types[0])
    idx = kb.tensor(1, *types[1])
    o = kb.tensor(2, *types[2])
    b = kb.b
    outer, n, inner, m = data.numel(0, axis), data.dim(axis), data.numel(axis + 1), idx.numel()

    def index(j: ir.Value) -> tuple[ir.Value, ir.Value]:
        raw = idx.load(j)
        if raw.type != I64:
            raw = b.sext(raw, I64) if idx.dtype.is_signed else b.zext(raw, I64)
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


def build_concat(kb: KernelBuilder, axis: int, types: Sequence[TensorType]) -> None:
    """out = concat(inputs, axis): each input's (dims[axis:]) block goes to its offset in
    every output row. Scalar 0 is where the first input starts along ``axis`` (a concat of
    more inputs than one call takes is split into calls). Tensors: the inputs, out."""
    ins = [kb.tensor(k, *t) for k, t in enumerate(types[:-1])]
    o = kb.tensor(len(ins), *types[-1])
    outer, inner = o.numel(0, axis), o.numel(axis + 1)
    row = kb.mul(o.dim(axis), inner)
    off = kb.mul(kb.scalar(0), inner)
    for t in ins:
        blk = kb.mul(t.dim(axis), inner)
        with kb.loop(outer, name="row") as a:
            _copy(kb, t, kb.mul(a, blk), o, kb.add(kb.mul(a, row), off), blk)
        off = kb.add(off, blk)


def build_slice(kb: KernelBuilder, axes_steps: tuple[tuple[int, ...], tuple[int | None, ...]],
                types: Sequence[TensorType]) -> None:
    """out[.., i, ..] = in[.., first + i * step, ..] on each sliced axis. Scalars: (first,
    step) per sliced axis in ``axes`` order; a step known at compile time (``steps``) is a
    constant instead. Axes after the last sliced one are copied as one contiguous block.
    Tensors: in, out."""
    axes, steps = axes_steps
    x = kb.tensor(0, *types[0])
    o = kb.tensor(1, *types[1])
    xs = x.strides()
    base: ir.Value = i64(0)
    stride = list(xs)
    for j, (a, step) in enumerate(zip(axes, steps)):
        base = kb.add(base, kb.mul(kb.scalar(2 * j), xs[a]))
        stride[a] = kb.mul(i64(step) if step is not None else kb.scalar(2 * j + 1), xs[a])
    _nest(kb, x, o, stride, base, max(axes) + 1)


def build_fill(kb: KernelBuilder, value: float | int | bool, types: Sequence[TensorType]) -> None:
    """Every element of tensor 0 := value (as its dtype stores it)."""
    dtype, shape = types[0]
    o = kb.tensor(0, dtype, shape)
    c = stored_constant(dtype, value)
    with kb.loop(o.numel()) as i:
        o.store_raw(i, c)

