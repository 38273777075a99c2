"""2-D convolution and pooling kernels (NCHW, float32) and the per-channel BatchNormalization
and global-average kernels.

Conv is a register-blocked direct convolution. One tile is ``OC_BLOCK`` output channels by
``TILE_VECS`` SIMD128 vectors of consecutive output columns of one output row; its
accumulators stay in registers over the whole (ic, kh, kw) reduction and are stored once,
so each input vector loaded feeds ``OC_BLOCK`` multiply-adds. Tiles never test bounds:

- horizontal padding is materialized once per call in a scratch copy of the input whose
  rows carry the pad columns as zeros (a copy costs one pass over the input; the
  convolution reads each input element ``M * KH * KW / stride`` times);
- vertical padding clamps the kh range per output row. Rows whose window lies inside the
  input, nearly all of them, take a variant whose kh loop is unrolled at compile time;
- a row whose width is not a multiple of the tile ends with one more full tile shifted left
  to end at the row's end; it recomputes a few columns instead of running a scalar tail.

A 1x1 convolution with unit strides and no padding is a matrix product: its spatial dims
are treated as one row so tiles run over ``H * W`` columns.

Pooling runs one output element at a time over its (kh, kw) window, unrolled; padding (and
the overhang of ``ceil_mode``) is a scratch copy filled with the pooling's neutral value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.graph import FLOAT32
from .kernel import F32, I32, I64, TENSOR, KernelBuilder, Tensor, fast, i64

LANES = 4  # f32 lanes of a SIMD128 vector
OC_BLOCK = 4  # output channels per register tile
TILE_VECS = 2  # vectors per register tile: OC_BLOCK * TILE_VECS accumulators
VEC = ir.VectorType(F32, LANES)
# multiply-adds may fuse (FMA on hosts that have it); sums keep their order
MAC_FLAGS = ("contract",)


@dataclass(frozen=True)
class Window:
    """The geometry of a 2-D sliding window: kernel (kh, kw), strides, dilations and pads
    (top, left, bottom, right). Symbolic pads reach the kernel as scalars, in order."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    pads: tuple[Dim, Dim, Dim, Dim]

    @property
    def pads_cols(self) -> bool:
        return not (self.pads[1] == 0 and self.pads[3] == 0)

    @property
    def pads_rows(self) -> bool:
        return not (self.pads[0] == 0 and self.pads[2] == 0)

    def extent(self, axis: int) -> int:
        """How many input rows (0) or columns (1) one window spans."""
        return self.dilations[axis] * (self.kernel[axis] - 1) + 1


def symbolic(dims: Sequence[Dim]) -> list[Dim]:
    """The dims among ``dims`` that are not constants: a kernel reads them as scalars."""
    return [d for d in dims if not isinstance(d, int)]


def _dims_in(kb: KernelBuilder, dims: Sequence[Dim]) -> list[ir.Value]:
    out: list[ir.Value] = []
    k = 0
    for d in dims:
        if isinstance(d, int):
            out.append(i64(d))
        else:
            out.append(kb.scalar(k))
            k += 1
    return out


def _static(v: ir.Value) -> int | None:
    return v.constant if isinstance(v, ir.Constant) else None


def _floordiv(kb: KernelBuilder, x: ir.Value, c: int) -> ir.Value:
    """floor(x / c) for a possibly negative x and a positive constant c."""
    if c == 1:
        return x
    b = kb.b
    q = b.sdiv(x, i64(c))
    return b.sub(q, b.zext(b.icmp_signed("<", b.srem(x, i64(c)), i64(0)), I64))


def _udiv(kb: KernelBuilder, x: ir.Value, c: int) -> ir.Value:
    if c == 1:
        return x
    s = _static(x)
    return i64(s // c) if s is not None else kb.b.udiv(x, i64(c))


def _smax(kb: KernelBuilder, a: ir.Value, b_: ir.Value) -> ir.Value:
    return kb.b.select(kb.b.icmp_signed(">", a, b_), a, b_)


def _smin(kb: KernelBuilder, a: ir.Value, b_: ir.Value) -> ir.Value:
    return kb.b.select(kb.b.icmp_signed("<", a, b_), a, b_)


def _when(kb: KernelBuilder, cond: ir.Value | bool, then: Callable[[], None],
          otherwise: Callable[[], None] | None = None) -> None:
    """``if cond`` decided at compile time when ``cond`` is a Python bool."""
    if isinstance(cond, bool):
        if cond:
            then()
        elif otherwise:
            otherwise()
        return
    if otherwise is None:
        with kb.b.if_then(cond):
            then()
        return
    with kb.b.if_else(cond) as (yes, no):
        with yes:
            then()
        with no:
            otherwise()


def _carry(kb: KernelBuilder, start: ir.Value, stop: ir.Value, inits: list[ir.Value],
           step: Callable[[ir.Value, list[ir.Value]], list[ir.Value]], name: str) -> list[ir.Value]:
    """``for i in range(start, stop): vals = step(i, vals)`` with ``vals`` in registers."""
    b = kb.b
    pre = b.block
    head = kb.fn.append_basic_block(f"{name}.head")
    body = kb.fn.append_basic_block(f"{name}.body")
    done = kb.fn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    vals = []
    for k, v in enumerate(inits):
        phi = b.phi(v.type, name=f"{name}.v{k}")
        phi.add_incoming(v, pre)
        vals.append(phi)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    new = step(i, list(vals))
    nxt = b.add(i, i64(1), name=f"{name}.next")
    for phi, v in zip(vals, new):
        phi.add_incoming(v, b.block)
    i.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(done)
    return vals


def _opaque_dim(kb: KernelBuilder, t: Tensor, axis: int) -> ir.Value:
    p = kb.b.gep(t.desc, [ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, axis)], source_etype=TENSOR)
    return kb.b.load(p, typ=I64)


def _splat(b: ir.IRBuilder, s: ir.Value, lanes: int) -> ir.Value:
    if lanes == 1:
        return s
    undef = ir.Constant(VEC, ir.Undefined)
    v = b.insert_element(undef, s, ir.Constant(I32, 0))
    return b.shuffle_vector(v, undef, ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))


def _ptr(kb: KernelBuilder, t: Tensor, idx: ir.Value) -> ir.Value:
    # inbounds: the wasm backend then folds constant offsets into the load instruction
    return kb.b.gep(t.data, [idx], inbounds=True, source_etype=t.elem)


def _load(kb: KernelBuilder, t: Tensor, idx: ir.Value) -> ir.Value:
    return kb.b.load(_ptr(kb, t, idx), typ=t.elem)


def _load_lanes(kb: KernelBuilder, t: Tensor, idx: ir.Value, lanes: int, stride: int) -> ir.Value:
    """``lanes`` elements of ``t`` at ``idx, idx + stride, ...`` (one vector when lanes > 1)."""
    b = kb.b
    if lanes == 1:
        return _load(kb, t, idx)
    if stride == 1:
        return b.load(_ptr(kb, t, idx), typ=VEC, align=4)
    if stride == 2:
        # two overlapping loads end exactly at the last lane: never past the data
        lo = b.load(_ptr(kb, t, idx), typ=VEC, align=4)
        hi = b.load(_ptr(kb, t, kb.add(idx, i64(3))), typ=VEC, align=4)
        return b.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(I32, LANES), [0, 2, 5, 7]))
    v = ir.Constant(VEC, ir.Undefined)
    for lane in range(lanes):
        v = b.insert_element(v, _load(kb, t, kb.add(idx, i64(lane * stride))), ir.Constant(I32, lane))
    return v


def _pad_copy(kb: KernelBuilder, x: Tensor, xp: Tensor, top: ir.Value, left: ir.Value,
              fill: float) -> None:
    """xp := ``fill`` everywhere, then x's rows at row ``top``, column ``left`` of each plane."""
    b = kb.b
    planes = kb.mul(x.dim(0), x.dim(1))
    h, w = x.dim(2), x.dim(3)
    hp, wp = xp.dim(2), xp.dim(3)
    c = ir.Constant(F32, fill)
    with kb.loop(xp.numel(), name="fill") as i:
        xp.store(i, c)
    with kb.loop(kb.mul(planes, h), name="row") as r:
        plane = b.udiv(r, h) if _static(h) != 1 else r
        dst = kb.add(kb.mul(kb.add(kb.mul(plane, hp), kb.add(b.urem(r, h), top)), wp), left)
        src = kb.mul(r, w)
        with kb.loop(w, name="cp") as j:
            xp.store(kb.add(dst, j), x.load(kb.add(src, j)))


# ----------------------------------------------------------------------------- Conv


class _Row(NamedTuple):
    """Where a run of tiles works: image n (``in_base``: its group's first input channel),
    output channels [oc, oc + ocb), output row oh reading input rows ih0 + kh * dilation
    for kh in [kh_lo, kh_hi)."""

    n: ir.Value
    in_base: ir.Value
    oc: ir.Value
    ocb: int
    oh: ir.Value
    ih0: ir.Value
    kh_lo: ir.Value
    kh_hi: ir.Value


def build_conv2d(kb: KernelBuilder, win: Window, group: int, x_shape: Sequence[Dim],
                 w_shape: Sequence[Dim], bias: bool, y_shape: Sequence[Dim],
                 scratch: Sequence[Dim] | None) -> None:
    """y = conv(x, w) (+ bias). Tensors: x, w, [bias], [scratch for the column-padded
    input, shape (N, C, H, W + left + right)], y. Scalars: the symbolic pads."""
    b = kb.b
    x = kb.tensor(0, FLOAT32, x_shape)
    w = kb.tensor(1, FLOAT32, w_shape)
    k = 2 + int(bias)  # the next tensor argument
    bt = kb.tensor(2, FLOAT32, (y_shape[1],)) if bias else None
    top, left, _, _ = _dims_in(kb, win.pads)
    src = x
    if scratch is not None:
        src = kb.tensor(k, FLOAT32, scratch)
        k += 1
        _pad_copy(kb, x, src, i64(0), left, 0.0)
    y = kb.tensor(k, FLOAT32, y_shape)

    (sh, sw), (dh, dw) = win.strides, win.dilations
    kh_n, kw_n = win.kernel
    taps = kh_n * kw_n
    c_in, cg, m = x.dim(1), w.dim(1), y.dim(1)
    if taps == 1 and win.strides == (1, 1) and not win.pads_rows and not win.pads_cols:
        rows, cols = i64(1), kb.mul(x.dim(2), x.dim(3))  # a matrix product: one long row
        out_rows, out_cols = i64(1), kb.mul(y.dim(2), y.dim(3))
    else:
        rows, cols = x.dim(2), src.dim(3)
        out_rows, out_cols = y.dim(2), y.dim(3)
    plane, out_plane = kb.mul(rows, cols), kb.mul(out_rows, out_cols)
    w_per_oc = kb.mul(cg, i64(taps))
    # The tap loops run to trip counts LLVM cannot see. Unrolled, the wasm backend's
    # register stackifier sinks each accumulator's chain of adds into one expression tree
    # and keeps every loaded input and weight vector live across all the trees: far more
    # than the 16 vector registers wasm engines map locals to, so they spill.
    kh_trips, kw_trips = _opaque_dim(kb, w, 2), _opaque_dim(kb, w, 3)

    def tile(r: _Row, ow0: ir.Value, vecs: int, lanes: int) -> None:
        """Accumulate and store the tile of r's channels x columns [ow0, ow0 + vecs * lanes)."""
        zero = ir.Constant(VEC, [0.0] * LANES) if lanes > 1 else ir.Constant(F32, 0.0)
        inits = []
        for j in range(r.ocb):
            start = _splat(b, _load(kb, bt, kb.add(r.oc, i64(j))), lanes) if bt is not None else zero
            inits += [start] * vecs
        col0 = kb.mul(ow0, i64(sw))
        w_oc = kb.mul(r.oc, w_per_oc)

        def over_ic(ic: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            chan = kb.add(r.in_base, kb.mul(ic, plane))
            w_ic = kb.add(w_oc, kb.mul(ic, i64(taps)))

            def over_kh(kh: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                row = kb.add(kb.add(chan, kb.mul(kb.add(r.ih0, kb.mul(kh, i64(dh))), cols)), col0)
                w_kh = kb.add(w_ic, kb.mul(kh, i64(kw_n)))

                def over_kw(kw: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                    at = kb.add(row, kb.mul(kw, i64(dw)))
                    xs = [_load_lanes(kb, src, kb.add(at, i64(u * lanes * sw)), lanes, sw)
                          for u in range(vecs)]
                    acc = list(acc)
                    for j in range(r.ocb):
                        wv = _splat(b, _load(kb, w, kb.add(kb.add(w_kh, kw), kb.mul(i64(j), w_per_oc))), lanes)
                        for u in range(vecs):
                            acc[j * vecs + u] = _mac(b, acc[j * vecs + u], wv, xs[u])
                    return acc

                return _carry(kb, i64(0), kw_trips, acc, over_kw, "kw")

            return _carry(kb, r.kh_lo, r.kh_hi, acc, over_kh, "kh")

        acc = _carry(kb, i64(0), cg, inits, over_ic, "ic")
        out0 = kb.add(kb.mul(r.oh, out_cols), ow0)
        for j in range(r.ocb):
            base = kb.add(kb.mul(kb.add(kb.mul(r.n, m), kb.add(r.oc, i64(j))), out_plane), out0)
            for u in range(vecs):
                kb.b.store(acc[j * vecs + u], _ptr(kb, y, kb.add(base, i64(u * lanes))), align=4)

    def row_of_tiles(r: _Row) -> None:
        """Covers output columns [0, out_cols) with tiles, the widest that fit."""
        width = TILE_VECS * LANES
        ow = out_cols
        full = _udiv(kb, ow, width)
        with kb.loop(full, name="ow") as i:
            tile(r, kb.mul(i, i64(width)), TILE_VECS, LANES)
        s = _static(ow)
        wide = s >= width if s is not None else b.icmp_signed(">=", ow, i64(width))
        ragged = s % width != 0 if s is not None else b.icmp_signed("!=", kb.mul(full, i64(width)), ow)
        mid = s >= LANES if s is not None else b.icmp_signed(">=", ow, i64(LANES))

        def last_wide():  # ends at the row's end, overlapping the previous tile
            tile(r, b.sub(ow, i64(width)), TILE_VECS, LANES)

        def two_vectors():  # LANES <= ow < width: two overlapping one-vector tiles
            tile(r, i64(0), 1, LANES)
            tile(r, b.sub(ow, i64(LANES)), 1, LANES)

        def scalars():
            with kb.loop(ow, name="owc") as c:
                tile(r, c, 1, 1)

        _when(kb, wide, lambda: _when(kb, ragged, last_wide),
              lambda: _when(kb, mid, two_vectors, scalars))

    def output_rows(n: ir.Value, in_base: ir.Value, oc: ir.Value, ocb: int) -> None:
        with kb.loop(out_rows, name="oh") as oh:
            ih0 = b.sub(kb.mul(oh, i64(sh)), top)
            lo, hi = i64(0), kh_trips
            if win.pads_rows:  # only the window rows inside the input
                lo = _smax(kb, lo, b.sub(i64(0), _floordiv(kb, ih0, dh)))
                hi = _smin(kb, hi, b.add(_floordiv(kb, b.sub(b.sub(rows, i64(1)), ih0), dh), i64(1)))
            row_of_tiles(_Row(n, in_base, oc, ocb, oh, ih0, lo, hi))

    mg = _udiv(kb, m, group)
    blocks = _udiv(kb, mg, OC_BLOCK)
    with kb.loop(y.dim(0), name="n") as n:
        with kb.loop(i64(group), name="g") as g:
            in_base = kb.mul(kb.add(kb.mul(n, c_in), kb.mul(g, cg)), plane)
            oc0 = kb.mul(g, mg)
            with kb.loop(blocks, name="ocb") as blk:
                output_rows(n, in_base, kb.add(oc0, kb.mul(blk, i64(OC_BLOCK))), OC_BLOCK)
            if _static(mg) is None or _static(mg) % OC_BLOCK:
                done = kb.add(oc0, kb.mul(blocks, i64(OC_BLOCK)))
                with kb.loop(b.sub(mg, kb.mul(blocks, i64(OC_BLOCK))), name="oc1") as j:
                    output_rows(n, in_base, kb.add(done, j), 1)


def _mac(b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
    prod = b.fmul(x, y)
    prod.flags.extend(MAC_FLAGS)
    s = b.fadd(acc, prod)
    s.flags.extend(MAC_FLAGS)
    return s


# ----------------------------------------------------------------------------- pooling


def _count_in(kb: KernelBuilder, first: ir.Value, step: int, taps: int, lo: ir.Value,
              hi: ir.Value) -> ir.Value:
    """How many of ``first + k * step`` (k < taps) lie in [lo, hi), branch-free."""
    b = kb.b
    span = b.sub(hi, lo)
    n = i64(0)
    for k in range(taps):
        pos = b.sub(kb.add(first, i64(k * step)), lo)
        n = b.add(n, b.zext(b.icmp_unsigned("<", pos, span), I64))
    return n


def build_pool2d(kb: KernelBuilder, kind: str, win: Window, count_include_pad: bool,
                 x_shape: Sequence[Dim], y_shape: Sequence[Dim], scratch: Sequence[Dim] | None) -> None:
    """Max or average pooling. Tensors: x, [scratch: x padded with the neutral value at
    (top, left), wide enough for every window], y. Scalars: the symbolic pads. Averages
    divide by the window's elements inside the input (``count_include_pad``: inside the
    explicitly padded input)."""
    b = kb.b
    x = kb.tensor(0, FLOAT32, x_shape)
    y = kb.tensor(2 if scratch is not None else 1, FLOAT32, y_shape)
    top, left, bottom, right = _dims_in(kb, win.pads)
    is_max = kind == "max"
    neutral = float("-inf") if is_max else 0.0
    src = x
    if scratch is not None:
        src = kb.tensor(1, FLOAT32, scratch)
        _pad_copy(kb, x, src, top, left, neutral)
    (kh_n, kw_n), (sh, sw), (dh, dw) = win.kernel, win.strides, win.dilations
    h, w = x.dim(2), x.dim(3)
    rows, cols = src.dim(2), src.dim(3)
    out_rows, out_cols = y.dim(2), y.dim(3)
    if count_include_pad:
        bounds_h, bounds_w = (i64(0), kb.add(kb.add(h, top), bottom)), (i64(0), kb.add(kb.add(w, left), right))
    else:
        bounds_h, bounds_w = (top, kb.add(h, top)), (left, kb.add(w, left))

    with kb.loop(kb.mul(x.dim(0), x.dim(1)), name="nc") as nc:
        with kb.loop(out_rows, name="oh") as oh:
            r0 = kb.mul(oh, i64(sh))
            base = kb.mul(kb.add(kb.mul(nc, rows), r0), cols)
            out = kb.mul(kb.add(kb.mul(nc, out_rows), oh), out_cols)
            window_rows = [kb.add(base, kb.mul(i64(kh * dh), cols)) for kh in range(kh_n)]
            count_h = _count_in(kb, r0, dh, kh_n, *bounds_h) if scratch is not None else None
            with kb.loop(out_cols, name="ow") as ow:
                c0 = kb.mul(ow, i64(sw))
                acc = ir.Constant(F32, neutral)
                for row in window_rows:
                    for kw in range(kw_n):
                        v = src.load(kb.add(row, kb.add(c0, i64(kw * dw))))
                        acc = b.select(b.fcmp_ordered(">", v, acc), v, acc) if is_max else b.fadd(acc, v)
                if not is_max:
                    if count_h is None:
                        count = i64(kh_n * kw_n)
                    else:
                        count = b.mul(count_h, _count_in(kb, c0, dw, kw_n, *bounds_w))
                    acc = b.fdiv(acc, b.sitofp(count, F32))
                y.store(kb.add(out, ow), acc)


# ----------------------------------------------------------------------------- per channel


def build_global_average(kb: KernelBuilder, x_shape: Sequence[Dim], y_shape: Sequence[Dim]) -> None:
    """y[n, c] = mean of x[n, c, ...]."""
    b = kb.b
    x = kb.tensor(0, FLOAT32, x_shape)
    y = kb.tensor(1, FLOAT32, y_shape)
    inner = x.numel(2)
    with kb.loop(x.numel(0, 2), name="nc") as r:
        base = kb.mul(r, inner)
        total = kb.accumulate(inner, ir.Constant(F32, 0.0),
                              lambda acc, i: fast(b.fadd(acc, x.load(kb.add(base, i)))))
        y.store(r, b.fdiv(total, b.sitofp(inner, F32)))


def build_batch_norm(kb: KernelBuilder, x_shape: Sequence[Dim], c_shape: Sequence[Dim],
                     epsilon: float) -> None:
    """y = (x - mean) * (scale / sqrt(var + epsilon)) + bias over axis 1. Tensors: x, scale,
    bias, mean, var, y."""
    b = kb.b
    x = kb.tensor(0, FLOAT32, x_shape)
    scale, bias, mean, var = (kb.tensor(k, FLOAT32, c_shape) for k in range(1, 5))
    y = kb.tensor(5, FLOAT32, x_shape)
    channels, inner = x.dim(1), x.numel(2)
    sqrt = b.module.declare_intrinsic("llvm.sqrt", [F32])
    with kb.loop(x.dim(0), name="n") as n:
        with kb.loop(channels, name="c") as c:
            a = b.fdiv(scale.load(c), b.call(sqrt, [b.fadd(var.load(c), ir.Constant(F32, epsilon))]))
            mu, beta = mean.load(c), bias.load(c)
            base = kb.mul(kb.add(kb.mul(n, channels), c), inner)
            with kb.loop(inner) as i:
                at = kb.add(base, i)
                y.store(at, b.fadd(b.fmul(b.fsub(x.load(at), mu), a), beta))
