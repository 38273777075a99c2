"""Data-movement kernels: Transpose, Gather, Concat, Slice and the ConstantOfShape fill.

They copy elements without computing on them. Loops run over the output in row-major
order, so stores are contiguous, and the innermost run that is contiguous on both sides is
one flat copy loop (which LLVM vectorizes or turns into a memory copy). A Transpose that
moves the last axis runs by square blocks transposed in registers (:func:`_blocked`).
"""
from __future__ import annotations

from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .kernel import I64, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, i64, stored_constant, transpose_vectors

# the elements of a cache line (64 bytes) of 4-byte elements: a Transpose's blocks span this
# many rows of the output, so that each line of the input they read is used whole
LINE_ELEMENTS = 16

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
    if inner == len(perm) and x.dtype.itemsize == 4:
        _blocked(kb, x, o, [xs[p] for p in perm], perm.index(len(perm) - 1), kb.target.f32_lanes)
        return
    _nest(kb, x, o, [xs[p] for p in perm], i64(0), inner)


def _blocked(kb: KernelBuilder, x: Tensor, o: Tensor, x_strides: Sequence[ir.Value], q: int, lanes: int) -> None:
    """A Transpose that moves the input's last axis to output axis ``q`` (not the last), of
    4-byte elements: over the other output axes, the (q, last) plane by LANES x LANES blocks,
    each LANES vectors loaded along the input's last axis, transposed in registers
    (:func:`.kernel.transpose_vectors`) and stored along the output's last axis; the rows
    and columns after the last whole block an element at a time. A block row spans
    :data:`LINE_ELEMENTS` rows of q (four 4 x 4 blocks on wasm32), so each input line it
    reads is used whole.

    Element by element, the loads of one output row were a whole input row apart: a 512 x
    512 float32 Transpose took 3.3x onnxruntime's time natively (the input's column in one
    L1 set: 2 KiB strides) and 1.2x onnxruntime-web's in Node."""
    b = kb.b
    rank = o.rank
    last = rank - 1
    os_ = o.strides()
    vt = ir.VectorType(x.elem, lanes)
    sub = max(1, LINE_ELEMENTS // lanes)  # LANES-row blocks per block row

    def vload(at: ir.Value) -> ir.Value:
        return b.load(b.bitcast(x.ptr(at), vt.as_pointer()), typ=vt, align=4)

    def vstore(v: ir.Value, at: ir.Value) -> None:
        b.store(v, b.bitcast(o.ptr(at), vt.as_pointer()), align=4)

    def plane(x_off: ir.Value, o_off: ir.Value) -> None:
        nq, nj = o.dim(q), o.dim(last)
        sj, sq = x_strides[last], os_[q]  # the input's stride along j; the output's along q
        jb = b.udiv(nj, i64(lanes))
        j_rest = kb.mul(jb, i64(lanes))

        def element(qq: ir.Value, j: ir.Value) -> None:
            o.store_raw(kb.add(o_off, kb.add(kb.mul(qq, sq), j)), x.load_raw(kb.add(x_off, kb.add(qq, kb.mul(j, sj)))))

        def rows(q0: ir.Value, count: int) -> None:
            """Output rows [q0, q0 + count * LANES): whole blocks, then the columns after them."""
            with kb.loop(jb, name="tj") as t:
                j0 = kb.mul(t, i64(lanes))
                for s in range(count):
                    qs = kb.add(q0, i64(s * lanes))
                    vecs = [vload(kb.add(x_off, kb.add(qs, kb.mul(kb.add(j0, i64(r)), sj)))) for r in range(lanes)]
                    for c, v in enumerate(transpose_vectors(b, vecs)):
                        vstore(v, kb.add(o_off, kb.add(kb.mul(kb.add(qs, i64(c)), sq), j0)))
            with kb.loop(i64(count * lanes), name="tq", plain=True) as c:
                qq = kb.add(q0, c)
                with kb.loop(nj, name="tr", start=j_rest, plain=True) as j:
                    element(qq, j)

        wide = b.udiv(nq, i64(sub * lanes))
        with kb.loop(wide, name="tb") as t:
            rows(kb.mul(t, i64(sub * lanes)), sub)
        q_done = kb.mul(wide, i64(sub * lanes))
        if sub > 1:  # the LANES-row blocks after the last whole block row
            narrow = b.udiv(b.sub(nq, q_done), i64(lanes))
            with kb.loop(narrow, name="tn") as t:
                rows(kb.add(q_done, kb.mul(t, i64(lanes))), 1)
            q_done = kb.add(q_done, kb.mul(narrow, i64(lanes)))
        with kb.loop(nq, name="tq", start=q_done, plain=True) as qq:
            with kb.loop(nj, name="tr", plain=True) as j:
                element(qq, j)

    def level(axis: int, x_off: ir.Value, o_off: ir.Value) -> None:
        if axis == last:
            plane(x_off, o_off)
            return
        if axis == q:
            level(axis + 1, x_off, o_off)
            return
        with kb.loop(o.dim(axis), name=f"ax{axis}") as i:
            level(axis + 1, kb.add(x_off, kb.mul(i, x_strides[axis])), kb.add(o_off, kb.mul(i, os_[axis])))

    level(0, i64(0), i64(0))


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

