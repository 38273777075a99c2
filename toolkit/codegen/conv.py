"""The 2-D convolution kernel (NCHW, float32), the sliding-window geometry every
convolution and pooling kernel shares (:class:`Window`, :func:`inside`, :func:`pad_copy`),
and the normalization kernels: BatchNormalization, LRN, GroupNormalization (and
InstanceNormalization), LpNormalization. The N-D convolutions are in :mod:`.conv_nd`, the
pools in :mod:`.conv_pool`.

A float32 Conv of one group runs as a GEMM (:func:`build_conv2d_gemm`): the weights are
the GEMM's A (constant ones packed into panels of a tile's rows at compile time,
:class:`.gemm.PanelA`), the patch matrix its B, packed a block at a time from the input
staged into stride phases (:func:`stage_phases`, :class:`.im2col.Im2col`), and the bias and
fused ops are the GEMM's epilogue (:func:`conv_epilogue`). A 3x3 one with unit strides and
constant weights runs as 16 smaller GEMMs by Winograd's F(2x2, 3x3) instead
(:mod:`.winograd`), and one on a small image as the transposed GEMM, pixels as rows
(:func:`build_conv2d_t`; natively any kernel, on wasm32 1x1 without pads). A grouped
Conv (depthwise: one channel per group) has too few rows per group for the GEMM's tiles: a
depthwise one of at least 16 channels with static pads runs with vectors along the channels
(:mod:`.depthwise`), the others the direct kernel below (:func:`build_conv2d`).

The direct kernel is a register-blocked convolution. A tile is ``OC_BLOCK`` output channels by
``TILE_VECS`` vectors of output columns of one output row (SIMD128 on wasm32, AVX2 width
on hosts that have it: ``Target.f32_lanes``); its accumulators stay in registers over the
(ic, kh, kw) reduction and are stored once, so each input vector loaded feeds ``OC_BLOCK``
multiply-adds, and constant weights are reordered at compile time (:func:`pack_weights`) so
each tap's ``OC_BLOCK`` weights are one SIMD128 load. Tiles never test bounds and only load
contiguous vectors:

- the input rows are staged once per call into a scratch copy when they need column
  padding (zeros) or a column stride (each row split into stride phases, so a strided walk
  is a contiguous one): one pass over the input, which the convolution reads
  ``M * kh * kw / strides`` times;
- vertical padding clamps the kh range of each output row;
- a row whose width is not a multiple of the tile ends with one more tile shifted left to
  end at the row's end: it recomputes a few columns instead of running a scalar tail.
  A narrower row is one tile of its first and last vectors (overlapping), of the widest
  vectors that fit. A row narrower than SIMD128 is one masked vector of 4 lanes natively
  (only its columns read and stored); on wasm32, which has no masked loads, it goes column
  by column.

A 1x1 convolution without padding is a matrix product: its (strided, compacted) spatial
dims are treated as one long row. Loops are blocked for the caches (see ``IC_CHUNK``,
``W_CHUNK``, ``X_CHUNK``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from llvmlite import ir

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, DType
from . import fused as F
from . import gemm as G
from . import mathlib
from .im2col import Im2col
from .kernel import (F32, I32, I64, KernelBuilder, Tensor, at_entry, ceildiv, compute_type, fast, i64, intrinsic,
                     prefetch, smax, smin, splat, transpose_vectors, unswitched)
from .reduce import fold, identity
from .scalar import convert
from .simd import copy_vectors, lanes_below, mac, masked_load, masked_store, vector_store

TensorType = tuple[DType, Sequence[Dim]]

OC_BLOCK = 4  # output channels per register tile: one SIMD128 vector of weights per tap
TILE_VECS = 2  # vectors per register tile: OC_BLOCK * TILE_VECS accumulators
MIN_LANES = 4  # f32 lanes of a SIMD128 vector, the narrowest vector tiles use
IC_CHUNK = 2048  # floats of weights one tile reads in one pass (L1)
W_CHUNK = 32768  # floats of weights one sweep over the output rows reuses (L2)
X_CHUNK = 8192  # floats of input one chunk of output columns reads per pass (L1)


@dataclass(frozen=True)
class Window:
    """The geometry of a sliding window over the last N dims of a tensor: per spatial axis
    its kernel size, stride and dilation, and the pads as ONNX orders them (the N begins,
    then the N ends). Symbolic pads reach the kernels as scalars, in order. Conv,
    ConvTranspose and the pools share it."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[Dim, ...]

    @property
    def rank(self) -> int:
        return len(self.kernel)

    @property
    def taps(self) -> int:
        return int(np.prod(self.kernel))

    def begin(self, axis: int) -> Dim:
        return self.pads[axis]

    def end(self, axis: int) -> Dim:
        return self.pads[self.rank + axis]

    def padded(self, axis: int) -> bool:
        """Whether spatial axis ``axis`` may have padding."""
        return not (self.begin(axis) == 0 and self.end(axis) == 0)

    def extent(self, axis: int) -> int:
        """How many input positions along spatial axis ``axis`` one window spans."""
        return self.dilations[axis] * (self.kernel[axis] - 1) + 1


def symbolic(dims: Sequence[Dim]) -> list[Dim]:
    """The dims among ``dims`` that are not constants: a kernel reads them as scalars."""
    return [d for d in dims if not isinstance(d, int)]


def dims_in(kb: KernelBuilder, dims: Sequence[Dim]) -> list[ir.Value]:
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


def floordiv(kb: KernelBuilder, x: ir.Value, c: int) -> ir.Value:
    """floor(x / c) for a possibly negative x and a positive constant c."""
    if c == 1:
        return x
    b = kb.b
    q = b.sdiv(x, i64(c))
    return b.sub(q, b.zext(b.icmp_signed("<", b.srem(x, i64(c)), i64(0)), I64))


def udiv(kb: KernelBuilder, x: ir.Value, c: int) -> ir.Value:
    if c == 1:
        return x
    s = _static(x)
    return i64(s // c) if s is not None else kb.b.udiv(x, i64(c))


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


def _lane(b: ir.IRBuilder, v: ir.Value, lane: int, lanes: int) -> ir.Value:
    """Lane ``lane`` of vector v, broadcast to ``lanes`` lanes (a scalar when 1)."""
    if lanes == 1:
        return b.extract_element(v, ir.Constant(I32, lane))
    mask = ir.Constant(ir.VectorType(I32, lanes), [lane] * lanes)
    return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), mask)


def _load_lanes(kb: KernelBuilder, t: Tensor, idx: ir.Value, lanes: int) -> ir.Value:
    """``lanes`` consecutive elements of ``t`` from ``idx``: a vector, or a scalar when 1."""
    if lanes == 1:
        return t.load(idx)
    return kb.b.load(t.ptr(idx), typ=ir.VectorType(F32, lanes), align=4)


def pad_copy(kb: KernelBuilder, x: Tensor, xp: Tensor, offsets: Sequence[ir.Value], fill: ir.Value,
              phases: int = 1) -> None:
    """xp := x placed at ``offsets`` along its last ``len(offsets)`` dims (the leading dims,
    batch and channels, are the same in both), ``fill`` around it. With ``phases`` p > 1,
    each padded row (the last dim) is stored as p runs: the columns whose index is 0, 1, ...
    modulo p, so a stride-p walk over the row reads one contiguous run.

    Only the border is filled: the whole of xp was once filled first and then mostly
    overwritten, which made resnet50's padded MaxPool (64 x 114 x 114) write its scratch
    twice."""
    b = kb.b
    lead = x.rank - len(offsets)
    last = x.rank - 1
    run = udiv(kb, xp.dim(last), phases)

    def placed(col: ir.Value) -> ir.Value:
        """Where a padded row's column ``col`` is stored: its phase's run, then its place in it."""
        if phases == 1:
            return col
        return kb.add(kb.mul(b.urem(col, i64(phases)), run), b.udiv(col, i64(phases)))

    def fill_span(start: ir.Value, n: ir.Value) -> None:
        with kb.loop(n, name="fill") as i:
            xp.store(kb.add(start, i), fill)

    def border(axis: int, dst: ir.Value) -> None:
        """Fill what lies outside x in the block of xp at flat position ``dst`` (in units of
        xp's dims before ``axis``)."""
        off, xn, n = offsets[axis - lead], x.dim(axis), xp.dim(axis)
        end = kb.add(off, xn)
        if axis < last:
            inner = xp.numel(axis + 1)
            base = kb.mul(dst, n)
            fill_span(kb.mul(base, inner), kb.mul(off, inner))
            fill_span(kb.mul(kb.add(base, end), inner), kb.mul(b.sub(n, end), inner))
            with kb.loop(xn, name=f"border{axis}") as i:
                border(axis + 1, kb.add(base, kb.add(off, i)))
            return
        row = kb.mul(dst, n)
        if phases == 1:
            fill_span(row, off)
            fill_span(kb.add(row, end), b.sub(n, end))
            return
        for lo, count in ((i64(0), off), (end, b.sub(n, end))):
            with kb.loop(count, name="fillcol") as i:
                xp.store(kb.add(row, placed(kb.add(lo, i))), fill)

    with kb.loop(x.numel(0, lead), name="bplane") as plane:
        border(lead, plane)

    def rows(axis: int, src: ir.Value, dst: ir.Value) -> None:
        """Copy x's rows below flat position ``src`` (in units of dims up to ``axis``)."""
        off = offsets[axis - lead]
        if axis < last:
            with kb.loop(x.dim(axis), name=f"row{axis}") as i:
                rows(axis + 1, kb.add(kb.mul(src, x.dim(axis)), i), kb.add(kb.mul(dst, xp.dim(axis)), kb.add(i, off)))
            return
        src, dst = kb.mul(src, x.dim(last)), kb.mul(dst, xp.dim(last))
        with kb.loop(x.dim(last), name="cp") as i:
            xp.store_raw(kb.add(dst, placed(kb.add(i, off))), x.load_raw(kb.add(src, i)))

    with kb.loop(x.numel(0, lead), name="plane") as plane:
        rows(lead, plane, plane)


def inside(kb: KernelBuilder, base: ir.Value, step: int, n: ir.Value, extent: ir.Value) -> tuple[ir.Value, ir.Value]:
    """[lo, hi): the v in [0, n) with 0 <= base + v * step < extent (hi may be below lo when
    there are none). How a window's taps are clamped to the input, or the positions one tap
    reaches: ``base`` may be negative, ``step`` is a positive constant."""
    b = kb.b
    lo = smax(kb, i64(0), b.sub(i64(0), floordiv(kb, base, step)))
    hi = smin(kb, n, b.add(floordiv(kb, b.sub(b.sub(extent, i64(1)), base), step), i64(1)))
    return lo, hi


def _subsample(kb: KernelBuilder, x: Tensor, xs: Tensor, strides: tuple[int, int]) -> None:
    """xs[n, c, i, j] := x[n, c, i * stride_h, j * stride_w]."""
    h, w = x.dim(2), x.dim(3)
    with kb.loop(kb.mul(xs.dim(0), xs.dim(1)), name="nc") as nc:
        with kb.loop(xs.dim(2), name="i") as i:
            src = kb.mul(kb.add(kb.mul(nc, h), kb.mul(i, i64(strides[0]))), w)
            dst = kb.mul(kb.add(kb.mul(nc, xs.dim(2)), i), xs.dim(3))
            with kb.loop(xs.dim(3), name="j") as j:
                xs.store(kb.add(dst, j), x.load(kb.add(src, kb.mul(j, i64(strides[1])))))


# ----------------------------------------------------------------------------- Conv


class _Row(NamedTuple):
    """Where tiles work: image n, input channels [ic0, ic0 + ics) of its group (the
    first of which starts at ``in_base``; ``first``: ic0 is 0), output row oh reading
    input rows ih0 + kh * dilation for kh in [kh_lo, kh_hi)."""

    n: ir.Value
    ic0: ir.Value
    ics: ir.Value
    first: ir.Value
    in_base: ir.Value
    oh: ir.Value
    ih0: ir.Value
    kh_lo: ir.Value
    kh_hi: ir.Value


def pack_weights(w: np.ndarray, group: int) -> np.ndarray:
    """w (M, C/group, kh, kw) in the order the kernel reads with ``packed``: within each
    group, every full block of OC_BLOCK output channels has the channel innermost, so one
    vector load fetches the block's weights of one tap; the remaining channels keep their
    order. Each channel block stays where its channels were."""
    m = w.shape[0]
    per_group, k = m // group, w[0].size
    full = per_group // OC_BLOCK * OC_BLOCK
    g = w.reshape(group, per_group, k).copy()
    g[:, :full] = (g[:, :full].reshape(group, full // OC_BLOCK, OC_BLOCK, k)
                   .transpose(0, 1, 3, 2).reshape(group, full, k))
    return g.reshape(w.shape)


def _pointwise(win: Window) -> bool:
    return win.kernel == (1, 1) and not win.padded(0) and not win.padded(1)


def conv_scratch(win: Window, x_shape: Sequence[Dim], y_shape: Sequence[Dim]) -> tuple[Dim, ...] | None:
    """The shape of the staged copy of the input that a Conv's tiles read, or None when
    they read the input itself. A 1x1 convolution without padding reads its strided input
    compacted; any other, when it has column padding or a column stride, reads rows padded
    and split into stride phases (see :func:`pad_copy`)."""
    n, c, h, w = x_shape
    sw = win.strides[1]
    if _pointwise(win):
        return None if win.strides == (1, 1) else (n, c, y_shape[2], y_shape[3])
    if not win.padded(1) and sw == 1:
        return None
    return (n, c, h, D.ceildiv(w + win.pads[1] + win.pads[3], sw) * sw)


def im2col_stage(win: Window, x_shape: Sequence[Dim]) -> tuple[Dim, ...] | None:
    """The shape ``(n, c, sh * sw, hq, wq)`` of the input as the GEMM convolution reads it
    (:func:`stage_phases`): padded, and split into stride phases so that every tap of a
    row of output pixels reads contiguous elements; None when it reads the input as is (no
    padding, unit strides)."""
    n, c, h, w = x_shape
    sh, sw = win.strides
    if not (win.padded(0) or win.padded(1)) and (sh, sw) == (1, 1):
        return None
    return (n, c, sh * sw, D.ceildiv(h + win.pads[0] + win.pads[2], sh), D.ceildiv(w + win.pads[1] + win.pads[3], sw))


def stage_phases(kb: KernelBuilder, x: Tensor, xs: Tensor, top: ir.Value, left: ir.Value,
                 strides: tuple[int, int]) -> None:
    """xs[n, c, py * sw + px, r, q] = x[n, c, r * sh + py - top, q * sw + px - left], zero
    outside x: the padded input, each stride phase a grid of its own."""
    b = kb.b
    sh, sw = strides
    h, w = x.dim(2), x.dim(3)
    hq, wq = xs.dim(3), xs.dim(4)
    zero = ir.Constant(F32, 0.0)
    with kb.loop(kb.mul(x.dim(0), x.dim(1)), "nc") as nc:
        src = kb.mul(nc, kb.mul(h, w))
        for py in range(sh):
            for px in range(sw):
                plane = kb.mul(kb.add(kb.mul(nc, i64(sh * sw)), i64(py * sw + px)), hq)
                with kb.loop(hq, "r") as r:
                    ih = b.sub(kb.add(kb.mul(r, i64(sh)), i64(py)), top)
                    row_in = b.icmp_unsigned("<", ih, h)
                    row = kb.add(src, kb.mul(b.select(row_in, ih, i64(0)), w))
                    dst = kb.mul(kb.add(plane, r), wq)
                    with kb.loop(wq, "q") as q:
                        iw = b.sub(kb.add(kb.mul(q, i64(sw)), i64(px)), left)
                        ok = b.and_(row_in, b.icmp_unsigned("<", iw, w))
                        v = x.load(kb.add(row, b.select(ok, iw, i64(0))))
                        xs.store(kb.add(dst, q), b.select(ok, v, zero))


@unswitched
def build_conv2d_gemm(kb: KernelBuilder, params: tuple, types: Sequence[TensorType]) -> None:
    """y = post(conv(x, w) + bias) as one GEMM per image through the microkernel
    (:mod:`.gemm`): ``y[oc, pixel] = sum_k w[oc, k] * patches[k, pixel]`` with the weights
    as they are ([M, C * kh * kw], row-major) or, ``packed_a``, packed by
    :func:`.gemm.pack_a` at compile time, and the patch matrix never materialized
    (:class:`.im2col.Im2col` packs its blocks from the staged input). The bias and the fused
    elementwise ops ``post`` (:class:`.gemm.PostOp`) are the GEMM's epilogue. ``params``:
    (window, tile, bias, post, packed_a, dual). ``dual`` (:func:`.plan.dual_route`): the weights
    are packed by :func:`pack_conv_t`, and a call with few pixels (:func:`conv_t_wins`) runs
    the transposed GEMM (:func:`transposed_gemm`) instead. Tensors: x, w, [bias], the post
    ops' operands, [the staged input of :func:`im2col_stage`], with ``dual`` [the patches]
    and the transposed output, y. Scalars: the symbolic pads. Across threads, each part
    computes its share of the pixels (the GEMM's panels, :func:`.gemm.gemm`'s ``split``);
    every part stages the input alike, the same values to the same places, before reading it."""
    win, tile, bias, post, packed_a, dual = params
    x_shape, y_shape = types[0][1], types[-1][1]
    x, w, bt, operands, k = conv_inputs(kb, types, bias, post)
    top, left, _, _ = dims_in(kb, win.pads)
    staged = im2col_stage(win, x_shape)
    if staged is not None:
        xs = kb.tensor(k, FLOAT32, staged)
        k += 1
        stage_phases(kb, x, xs, top, left, win.strides)
        hq, wq = xs.dim(3), xs.dim(4)
    else:
        xs, hq, wq = x, x.dim(2), x.dim(3)
    patches = yt = None
    if dual:
        patches, yt, k = conv_t_scratch(kb, win, types, k)
    y = kb.tensor(k, FLOAT32, y_shape)
    m, ow = y.dim(1), y.dim(3)
    pixels = kb.mul(y.dim(2), ow)
    depth = kb.mul(x.dim(1), i64(win.taps))
    plane = kb.mul(hq, wq)
    image = kb.mul(kb.mul(x.dim(1), i64(win.strides[0] * win.strides[1])), plane)
    pointwise = staged is None and win.kernel == (1, 1)

    def weights_as_a() -> None:
        table = None
        if not pointwise:
            taps = Im2col(xs, i64(0), plane, wq, ow, win.kernel, win.strides, win.dilations)
            taps.prepare(kb)
            table = taps.table
        with kb.loop(x.dim(0), "n") as n:
            base = kb.mul(n, image)
            if pointwise:  # the patches are the input itself: [C, H * W]
                src = G.View(xs, base, pixels, i64(1))
            else:
                src = Im2col(xs, base, plane, wq, ow, win.kernel, win.strides, win.dilations, table)
            y_base = kb.mul(n, kb.mul(m, pixels))
            # with both routes the weights are in the transposed GEMM's NR-column panels
            a = G.PanelA(w, i64(0), depth, tile.nr if dual else tile.mr) if packed_a else \
                G.View(w, i64(0), depth, i64(1))
            G.gemm(kb, replace(tile, kc=DUAL_KC) if dual else tile, a, src, y, y_base, m, pixels, depth,
                   conv_epilogue(bt, post, operands, pixels, y_base),
                   prefetch=residual_prefetch(kb, post, operands, pixels, y_base), inline_epilogue=F.cheap(post),
                   split=True)

    if not dual:
        weights_as_a()
        return
    with kb.b.if_else(conv_t_wins(pixels, m.constant, tile.nr, _ir_ops(kb))) as (few, many):
        with few:
            transposed_gemm(kb, win, tile, post, x, xs if staged is not None else None, w, bt, operands, patches,
                            yt, y)
        with many:
            weights_as_a()


# rows of pixels per block of the transposed GEMM, by vector lanes: its A (the input, pixels
# along a row of each channel) is read in place, a cache line per channel for each tile's
# rows, so smaller blocks than the GEMM's own keep it in L1 natively. Measured on resnet50's
# 512 -> 2048 channels at 7 x 7 (fastest of 300 alternating calls): AVX-512 12 rows 1.12 ms,
# 24 1.02, 72 (the GEMM's own) 1.26, and in another run 36 0.95x the time of 24; under
# wasmtime 16 rows 5.34 ms, 64 (the GEMM's own) 5.05
CONV_T_MC = {16: 36}
# ...except when a k block of the packed weights (KC x M floats) is at least this many bytes,
# more than L2 keeps beside the rest: a second block of rows would read it from memory
# again, so the rows are one block. resnet50's 1024 -> 2048 and 512 -> 2048 channel layers at
# 7 x 7 took 7-9% less of the model's time in two profiled runs (M = 2048: 2 MB a block);
# the 1024-channel layers at 14 x 14 were unchanged. Natively (not measured on wasm32)
CONV_T_ONE_BLOCK_BYTES = 1 << 21
# the most pixels the transposed GEMM takes: it reads its A strided and transposes its
# product, which cost more than the panels' padding saves on larger images. Per layer,
# transposed against the GEMM of the weights as A (fastest of 300 alternating calls),
# natively: 7 x 7 (512 -> 2048 channels) 0.73x, 13 x 13 (512 -> 1000) 0.89x, 14 x 14
# (256 -> 1024 and 1024 -> 256) 0.91-0.94x, 28 x 28 (256 -> 512) 1.19x, 56 x 56 (64 -> 256)
# 1.25x; under wasmtime 7 x 7 0.77x, 13 x 13 0.98x, 14 x 14 0.94x. With stride 2 (1024 ->
# 2048 channels, 14 x 14 -> 7 x 7): 0.83x natively, 0.78x under wasmtime
CONV_T_MAX_PIXELS = 256


def conv_t_patches(win: Window) -> bool:
    """Whether the transposed GEMM copies the patch matrix out (a kernel larger than 1 x 1, or
    pads) rather than reading the input, or its phase 0, as it is."""
    return win.kernel != (1, 1) or win.padded(0) or win.padded(1)


class _Ops(NamedTuple):
    mul: Callable
    le: Callable
    ceildiv: Callable
    both: Callable


_INT_OPS = _Ops(lambda a, b: a * b, lambda a, b: a <= b, D.ceildiv, lambda a, b: a and b)


def _ir_ops(kb: KernelBuilder) -> _Ops:
    b = kb.b

    def const(v):
        return i64(v) if isinstance(v, int) else v
    return _Ops(lambda x, y: kb.mul(const(x), const(y)), lambda x, y: b.icmp_signed("<=", const(x), const(y)),
                lambda x, y: ceildiv(kb, const(x), const(y)), lambda x, y: b.and_(x, y))


def conv_t_wins(pixels, m: int, nr: int, ops: _Ops = _INT_OPS):
    """Whether ``pixels`` output pixels (a number, or a run-time value with ``ops`` of
    :func:`_ir_ops`) take the transposed GEMM: at least one and at most
    :data:`CONV_T_MAX_PIXELS`, and no more multiply-adds over NR than the GEMM of the
    weights as A, the panels' padding included (pixels fill ceil(pixels / NR) panels of the
    weights' orientation, the M channels ceil(M / NR) of the transposed one)."""
    fits = ops.both(ops.le(1, pixels), ops.le(pixels, CONV_T_MAX_PIXELS))
    return ops.both(fits, ops.le(ops.mul(pixels, D.ceildiv(m, nr)), ops.mul(ops.ceildiv(pixels, nr), m)))


# k per cache block of the GEMM of the weights as A when they are packed for both routes: a
# tile's k block of A then spans KC rows of NR floats (128 bytes natively), so the 256 of
# the tile's own KC would fill 32 KB of L1 beside the B block's 32 KB. On 256 -> 256
# channels, 3 x 3 at 28 x 28, 256 took 1.06-1.09x the time of the 12-row panels (two
# paired runs against onnxruntime), 128 0.98x; 64 -> 64 at 56 x 56 0.99x
DUAL_KC = 128


def pack_conv_t(w: np.ndarray, nr: int) -> np.ndarray:
    """[M, C, kh, kw] weights as the transposed GEMM's packed B: W^T, [C * kh * kw, M], in
    NR-column panels (:func:`.gemm.pack_b`)."""
    return G.pack_b(np.ascontiguousarray(w.reshape(w.shape[0], -1).T), nr)


@unswitched
def build_conv2d_t(kb: KernelBuilder, params: tuple, types: Sequence[TensorType]) -> None:
    """y = post(conv(x, w) + bias) for a convolution with few pixels (:func:`.plan.transposed_route`),
    per image as the transposed GEMM (:func:`transposed_gemm`). ``params``: (window, tile,
    bias, post). Tensors: x, the packed weights (:func:`pack_conv_t`), [bias], the fused ops'
    operands, [the staged input], [the patches], yt (the scratch [pixels, M]), y. Scalars:
    none (the route needs static pads)."""
    win, tile, bias, post = params
    x_shape, y_shape = types[0][1], types[-1][1]
    x, w, bt, operands, k = conv_inputs(kb, types, bias, post)
    staged = im2col_stage(win, x_shape)
    xs = x
    if staged is not None:
        xs = kb.tensor(k, FLOAT32, staged)
        k += 1
        stage_phases(kb, x, xs, i64(win.pads[0]), i64(win.pads[1]), win.strides)
    patches, yt, k = conv_t_scratch(kb, win, types, k)
    y = kb.tensor(k, FLOAT32, y_shape)
    transposed_gemm(kb, win, tile, post, x, xs if staged is not None else None, w, bt, operands, patches, yt, y)


def conv_t_scratch(kb: KernelBuilder, win: Window, types: Sequence[TensorType], k: int):
    """The transposed GEMM's scratch tensors from tensor ``k`` on: [the patches] (when
    :func:`conv_t_patches`), the transposed output. Returns (patches or None, yt, the next
    tensor's index)."""
    patches = None
    if conv_t_patches(win):
        patches = kb.tensor(k, FLOAT32, types[k][1])
        k += 1
    return patches, kb.tensor(k, FLOAT32, types[k][1]), k + 1


def transposed_gemm(kb: KernelBuilder, win: Window, tile, post: tuple, x: Tensor, xs: Tensor | None, w: Tensor,
                    bt: Tensor | None, operands: Sequence[Tensor], patches: Tensor | None, yt: Tensor,
                    y: Tensor) -> None:
    """Per image, the transposed GEMM ``yt[pixel, oc] = sum_k patches[k, pixel] * wt[k, oc]``:
    the weights are the packed B (at compile time, :func:`pack_conv_t`), so the output
    channels fill the panels and the pixels are the rows, which tiles of any height cover
    exactly. The patches of a 1 x 1 kernel without pads are the input itself (with strides,
    phase 0 of the input staged into stride phases ``xs``, :func:`stage_phases`); otherwise
    (:func:`conv_t_patches`) the staged input's patch matrix is copied out into ``patches``
    ([K, pixels] or more), an output row's pixels at a time, and read as A. Then yt ([pixels,
    M] or more) is transposed into y, the bias and the fused ops ``post`` applied on the way
    (vectors along the pixels, as :func:`conv_epilogue` takes them). The image's size may be
    known only at run time (:func:`.plan.dual_route`). Across threads, each part computes its
    share of the product's panels (output channels) and transposes those channels only; every
    part stages the input and copies an image's patches alike, the same values to the same
    places, so a batch of images with patches runs as one part (the patches of the next image
    would overwrite those another part still reads)."""
    if xs is not None:
        channel = kb.mul(kb.mul(xs.dim(2), xs.dim(3)), xs.dim(4))
    else:
        xs, channel = x, kb.mul(x.dim(2), x.dim(3))
    pointwise = patches is None
    b = kb.b
    c, m = x.dim(1), y.dim(1)
    oh, ow = y.dim(2), y.dim(3)
    pixels = kb.mul(oh, ow)
    lanes = tile.lanes
    vt = ir.VectorType(F32, lanes)
    depth = c if pointwise else kb.mul(c, i64(win.taps))
    im = wq = None
    if not pointwise:
        hq, wq = (xs.dim(3), xs.dim(4)) if xs is not x else (x.dim(2), x.dim(3))
        im = Im2col(xs, i64(0), kb.mul(hq, wq), wq, ow, win.kernel, win.strides, win.dilations)
        im.prepare(kb)
    with at_entry(kb):
        block = b.alloca(ir.ArrayType(F32, lanes * lanes), name="block")

    vectors = b.udiv(pixels, i64(lanes))
    rows_tile = replace(tile, mc=CONV_T_MC.get(tile.lanes, tile.mc))
    if not kb.target.is_wasm and tile.kc * m.constant * 4 >= CONV_T_ONE_BLOCK_BYTES:  # M is static
        # the pixels are at most CONV_T_MAX_PIXELS
        rows_tile = replace(rows_tile, mc=max(rows_tile.mc, pixels.constant if isinstance(pixels, ir.Constant)
                                              else CONV_T_MAX_PIXELS))
    # across threads, each part computes its share of the output channels (the product's
    # panels). Every part copies an image's patches alike, so with more than one image a part
    # could overwrite the patches another still reads: then the parts are one
    one_image = b.icmp_signed("==", x.dim(0), i64(1))
    part, parts = kb.part(None if pointwise else b.select(one_image, i64(1 << 30), i64(1)))  # (1 << 30: no limit)
    with b.if_then(b.icmp_signed("<", part, parts)), kb.loop(x.dim(0), "n") as n:  # a part with a share
        if pointwise:
            a = G.View(xs, kb.mul(n, kb.mul(c, channel)), i64(1), channel)
        else:
            _materialize(kb, lanes, im, xs, patches, oh, ow, pixels, wq, depth, kb.mul(n, kb.mul(c, channel)))
            a = G.View(patches, i64(0), i64(1), pixels)
        # this part's channels: the panels of the product it computes
        lo, hi = G.gemm(kb, rows_tile, a, G.Packed(w, i64(0)), yt, i64(0), pixels, m, depth, split=(part, parts))
        y_base = kb.mul(n, kb.mul(m, pixels))
        epilogue = conv_epilogue(bt, post, operands, pixels, y_base) or (lambda kb, i, j, v, mask=None: v)
        _TransposedOut(kb, lanes, vt, block, yt, y, m, pixels, y_base, epilogue).image(
            vectors, residual_operands(post, operands), kb.mul(lo, i64(tile.nr)), smin(kb, kb.mul(hi, i64(tile.nr)), m))


def _materialize(kb: KernelBuilder, lanes: int, im: Im2col, xs: Tensor, patches: Tensor, oh: ir.Value,
                 ow: ir.Value, pixels: ir.Value, wq: ir.Value, depth: ir.Value, base: ir.Value) -> None:
    """patches[k, pixel] = the patch matrix of the image at ``base`` in xs (whose rows are wq
    long) for an oh x ow output, one output row's OW pixels at a time (contiguous in the
    staged input): whole vectors, then one masked vector."""
    b = kb.b
    if isinstance(ow, ir.Constant):
        vecs = i64(ow.constant // lanes)
        rest = ow.constant % lanes
        mask = ir.Constant(ir.VectorType(ir.IntType(1), lanes), [i < rest for i in range(lanes)])
    else:
        vecs = b.udiv(ow, i64(lanes))
        rest = b.sub(ow, kb.mul(vecs, i64(lanes)))
        mask = lanes_below(b, rest, lanes)
    whole = kb.mul(vecs, i64(lanes))
    vt = ir.VectorType(F32, lanes)

    def row(kk: ir.Value, koff: ir.Value) -> None:
        with kb.loop(oh, "mr", plain=True) as r:
            src = kb.add(base, kb.add(koff, kb.mul(r, wq)))
            dst = kb.add(kb.mul(kk, pixels), kb.mul(r, ow))
            copy_vectors(kb, lanes, xs, src, patches.ptr(dst), vecs)
            if not isinstance(rest, int) or rest:  # a run-time count, or a nonzero constant
                x_ = masked_load(b, xs.ptr(kb.add(src, whole)), mask, vt)
                masked_store(b, x_, patches.ptr(kb.add(dst, whole)), mask)

    im.rows(kb, i64(0), depth, row)


@dataclass(frozen=True)
class _TransposedOut:
    """One image's yt ([pixels, M]) transposed into y by :func:`transposed_gemm`, through the
    epilogue."""

    kb: KernelBuilder
    lanes: int
    vt: ir.VectorType
    block: ir.Value  # LANES x LANES floats of stack: a transposed block
    yt: Tensor
    y: Tensor
    m: ir.Value
    pixels: ir.Value
    y_base: ir.Value  # the image's first output
    epilogue: Callable

    def staged_vector(self, e: ir.Value) -> ir.Value:
        """Where ``block`` holds vector e."""
        kb, b, block = self.kb, self.kb.b, self.block
        return b.bitcast(b.gep(block, [i64(0), kb.mul(e, i64(self.lanes))], source_etype=block.type.pointee),
                         self.vt.as_pointer())

    def yt_at(self, j: ir.Value, i: ir.Value) -> ir.Value:
        return self.kb.add(self.kb.mul(j, self.m), i)

    def out(self, i: ir.Value, j: ir.Value, v: ir.Value, mask: ir.Value | None = None) -> None:
        """y[oc i, pixels from j] = the epilogue of v (a vector or an element); only the
        lanes of ``mask`` when one is given."""
        kb = self.kb
        at = kb.add(self.y_base, kb.add(kb.mul(i, self.pixels), j))
        v = self.epilogue(kb, i, j, v, mask)
        if isinstance(v.type, ir.VectorType):
            vector_store(kb.b, v, self.y.ptr(at), mask)
        else:
            self.y.store(at, v)

    def transpose_out(self, i0: ir.Value, j0: ir.Value, pixel_rest: ir.Value | None = None,
                      channel_rest: ir.Value | None = None) -> None:
        """The LANES x LANES block of yt at pixels from j0, channels from i0, read as
        vectors along the channels and transposed in registers (log2(LANES) rounds of
        two-vector shuffles), staged in ``block``, then each channel's vector of pixels
        through the epilogue. A partial block (natively, with masks): ``pixel_rest``
        pixels (the rows past them read the last pixel's, and nothing past it is
        stored), ``channel_rest`` channels (only theirs read)."""
        kb, b, lanes, vt = self.kb, self.kb.b, self.lanes, self.vt
        channels = lanes_below(b, channel_rest, lanes) if channel_rest is not None else None
        rows = []
        for e in range(lanes):
            j = kb.add(j0, i64(e))
            if pixel_rest is not None:
                j = smin(kb, j, b.sub(self.pixels, i64(1)))
            ptr = self.yt.ptr(self.yt_at(j, i0))
            rows.append(masked_load(b, ptr, channels, vt) if channels is not None
                        else b.load(b.bitcast(ptr, vt.as_pointer()), typ=vt, align=4))
        for e, v in enumerate(transpose_vectors(b, rows)):
            b.store(v, self.staged_vector(i64(e)), align=4)
        pixel_mask = lanes_below(b, pixel_rest, lanes) if pixel_rest is not None else None
        with kb.loop(channel_rest if channel_rest is not None else i64(lanes), "oc", plain=True) as e:
            self.out(kb.add(i0, e), j0, b.load(self.staged_vector(e), typ=vt, align=4), pixel_mask)

    def image(self, vectors: ir.Value, residual: Sequence[Tensor], first: ir.Value | None = None,
              end: ir.Value | None = None) -> None:
        """The image's channels [first, end) (default all; ``first`` a multiple of LANES, and
        ``end`` too unless it is M): blocks of LANES channels by vectors of pixels, then the
        pixels and channels left over (``vectors``: the whole vectors of pixels; ``residual``:
        the fused ops' operands read at y's positions, prefetched with y)."""
        kb, b, lanes, m, pixels, yt = self.kb, self.kb.b, self.lanes, self.m, self.pixels, self.yt
        end = m if end is None else end
        # natively, the pixels after the last whole vector and the channels after the last
        # whole block run as masked blocks. Element by element, a SiLU epilogue's division
        # made 8 of 120 pixels 65% of an EfficientNet 24 -> 144 channel layer's time
        masked_tails = not kb.target.is_wasm
        whole_pixels = kb.mul(vectors, i64(lanes))
        pixel_rest = b.sub(pixels, whole_pixels)
        blocks = b.udiv(end, i64(lanes))
        with kb.loop(blocks, "ob", start=None if first is None else b.udiv(first, i64(lanes))) as ob:
            i0 = kb.mul(ob, i64(lanes))
            with kb.loop(vectors, "pv") as pv:
                j0 = kb.mul(pv, i64(lanes))
                if not kb.target.is_wasm:
                    # the next block of channels' lines at these pixels: y's, owned for the
                    # stores, and the residual's. A block's stores and loads are LANES
                    # streams a channel's row apart, and y's lines are cold: in resnet50 the
                    # pass was 19% of a 256 -> 1024 channel layer's time, waiting on them.
                    # Fetched a block ahead, the model took 0.98-0.99x the time in two paired
                    # runs against onnxruntime (fastest 1.186 -> 1.163 and 1.189 -> 1.178x
                    # its time, median pair 1.205 -> 1.183 and 1.193 -> 1.185). The last
                    # block fetches its own last channel's lines, which stay in bounds
                    for e in range(lanes):
                        ch = smin(kb, kb.add(i0, i64(lanes + e)), b.sub(m, i64(1)))
                        at = kb.add(self.y_base, kb.add(kb.mul(ch, pixels), j0))
                        prefetch(b, self.y.ptr(at), write=True)
                        for t in residual:
                            prefetch(b, t.ptr(at))
                self.transpose_out(i0, j0)
            if masked_tails:
                _when(kb, _positive(b, pixel_rest), lambda: self.transpose_out(i0, whole_pixels, pixel_rest))
            else:
                with kb.loop(i64(lanes), "oc", plain=True) as e:
                    with kb.loop(pixels, "pt", start=whole_pixels, plain=True) as j:
                        self.out(kb.add(i0, e), j, yt.load(self.yt_at(j, kb.add(i0, e))))
        whole_channels = kb.mul(blocks, i64(lanes))
        if first is not None:  # a share of no whole block: its channels (if any) are all tail
            whole_channels = smax(kb, whole_channels, first)
        if masked_tails:
            channel_rest = b.sub(end, whole_channels)

            def channel_tail() -> None:
                with kb.loop(vectors, "pv") as pv:
                    self.transpose_out(whole_channels, kb.mul(pv, i64(lanes)), channel_rest=channel_rest)
                _when(kb, _positive(b, pixel_rest),
                      lambda: self.transpose_out(whole_channels, whole_pixels, pixel_rest, channel_rest))
            _when(kb, _positive(b, channel_rest), channel_tail)
        else:
            # the channels after the last whole block, an element at a time
            with kb.loop(end, "oc", start=whole_channels, plain=True) as i:
                with kb.loop(pixels, "p", plain=True) as j:
                    self.out(i, j, yt.load(self.yt_at(j, i)))


def _positive(b: ir.IRBuilder, n: ir.Value) -> ir.Value | bool:
    """n > 0: a Python bool when n is a constant (decided at compile time)."""
    if isinstance(n, ir.Constant):
        return n.constant > 0
    return b.icmp_signed(">", n, i64(0))


def conv_inputs(kb: KernelBuilder, types: Sequence[TensorType], bias: bool, post: tuple):
    """The leading tensors of a fusing convolution kernel: x, w, [bias], the fused ops'
    operands. Returns (x, w, bias or None, operands, the next tensor's index)."""
    x = kb.tensor(0, FLOAT32, types[0][1])
    w = kb.tensor(1, FLOAT32, types[1][1])
    bt = kb.tensor(2, FLOAT32, (types[-1][1][1],)) if bias else None
    k = 2 + int(bias)
    operands = [kb.tensor(k + e, FLOAT32, types[k + e][1]) for e in range(F.post_operands(post))]
    return x, w, bt, operands, k + len(operands)


def residual_operands(post: tuple, operands: Sequence[Tensor]) -> list[Tensor]:
    """The tensors of ``operands`` that the fused ops ``post`` read whole, element for element
    of the output (a residual)."""
    return [t for p, t in zip([p for p in post if p.reads_tensor], operands) if p.operand == "full"]


def residual_prefetch(kb: KernelBuilder, post: tuple, operands: Sequence[Tensor], pixels: ir.Value,
                      y_base: ir.Value):
    """Natively, the GEMM's ``prefetch`` for a convolution whose fused ops read a tensor of
    the output's shape (a residual): the cache line of each such tensor at output channel i,
    pixel j. The epilogue reads a tile's rows of it a whole image row apart, too many streams
    for the hardware's prefetchers, and in resnet50 23% of a 64 -> 256 channel layer's time
    waited on those loads; fetched when the tile's k loop starts, its 64-256 k steps hide
    the latency (that layer's share of the model 4.09 -> 3.98%, 128 -> 512 channels 4.43 ->
    4.18%). None on wasm32, which has no prefetch, or without such an operand."""
    full = residual_operands(post, operands)
    if not full or kb.target.is_wasm:
        return None

    def fetch(kb: KernelBuilder, i: ir.Value, j: ir.Value) -> None:
        for t in full:
            prefetch(kb.b, t.ptr(kb.add(y_base, kb.add(kb.mul(i, pixels), j))))
    return fetch


def conv_epilogue(bt: Tensor | None, post: tuple, operands: Sequence[Tensor], pixels: ir.Value, y_base: ir.Value):
    """The epilogue of a convolution of one image (y's element ``y_base + i * pixels + j`` for
    output channel i and pixel j): add the bias ``bt`` (if any), then the fused ops ``post``
    with their tensor ``operands``; None when there is neither."""
    if bt is None and not post:
        return None

    def epilogue(kb: KernelBuilder, i: ir.Value, j: ir.Value, v: ir.Value, mask: ir.Value | None = None) -> ir.Value:
        """(``mask``: a vector's lanes that are pixels; the operands are read only there.)"""
        if bt is not None:
            v = kb.b.fadd(v, F.splat_like(kb.b, bt.load(i), v))
        return G.apply_post(kb, post, v, operands, i, j, kb.add(y_base, kb.add(kb.mul(i, pixels), j)), mask)
    return epilogue


@dataclass(frozen=True)
class _Direct:
    """The direct kernel's tensors and geometry (:func:`build_conv2d`, computed at its entry)
    and the code it writes for register tiles, rows' ends and sweeps of output rows."""

    kb: KernelBuilder
    win: Window
    packed: bool  # w laid out by pack_weights
    one_pass: bool  # all input channels in one pass: no partial sums to read back
    w: Tensor
    bt: Tensor | None
    src: Tensor  # x, or its staged copy
    y: Tensor
    m: ir.Value
    sh: int  # the row stride (1 for a pointwise window's one long row)
    top: ir.Value
    phases: int  # column phases of the staged rows
    run: ir.Value  # a column phase's length
    rows: ir.Value
    cols: ir.Value
    out_rows: ir.Value
    out_cols: ir.Value
    plane: ir.Value
    out_plane: ir.Value
    w_per_oc: ir.Value
    kh_trips: ir.Value
    kw_trips: ir.Value
    wide: int  # lanes of the vectors of whole tiles
    width: int  # columns of a whole tile
    full: ir.Value  # whole tiles per output row
    col_chunk: ir.Value

    def column(self, kw: ir.Value) -> ir.Value:
        """Where tap kw of output column 0 reads in a staged row."""
        kb, b = self.kb, self.kb.b
        at = kb.mul(kw, i64(self.win.dilations[1]))
        if self.phases == 1:
            return at
        return kb.add(kb.mul(b.urem(at, i64(self.phases)), self.run), b.udiv(at, i64(self.phases)))

    def tile(self, r: _Row, oc: ir.Value, ocb: int, starts: list[ir.Value], lanes: int,
             done_below: ir.Value | None = None, mask: ir.Value | None = None) -> None:
        """Accumulate channels [oc, oc + ocb) x ``lanes`` columns from each of ``starts``
        over r's input channels, onto the bias (first pass) or the partial sums so far.
        Columns below ``done_below`` were already summed in this pass by another tile:
        their stored sums are kept. With a lane ``mask``, only its lanes are read and stored
        (a row narrower than a vector)."""
        kb, b, w, y = self.kb, self.kb.b, self.w, self.y
        kw_n = self.win.kernel[1]
        taps = self.win.taps

        def load(t: Tensor, idx: ir.Value) -> ir.Value:
            if mask is None:
                return _load_lanes(kb, t, idx, lanes)
            return masked_load(b, t.ptr(idx), mask, ir.VectorType(F32, lanes))

        vecs = len(starts)
        zero = ir.Constant(ir.VectorType(F32, lanes), [0.0] * lanes) if lanes > 1 else ir.Constant(F32, 0.0)
        row_out = kb.mul(r.oh, self.out_cols)
        outs = [kb.add(kb.mul(kb.add(kb.mul(r.n, self.m), kb.add(oc, i64(j))), self.out_plane), row_out)
                for j in range(ocb)]
        inits = []
        for j in range(ocb):
            start = splat(b, self.bt.load(kb.add(oc, i64(j))), lanes) if self.bt is not None else zero
            for col in starts:
                if self.one_pass:
                    inits.append(start)
                else:
                    done = load(y, kb.add(outs[j], col))
                    inits.append(b.select(r.first, start, done))
        w_oc = kb.mul(oc, self.w_per_oc)
        # a packed block holds OC_BLOCK weights per tap, contiguous
        w_tap = OC_BLOCK if self.packed and ocb == OC_BLOCK else 1

        def over_ic(i: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            ic = kb.add(r.ic0, i)
            chan = kb.add(r.in_base, kb.mul(ic, self.plane))
            w_ic = kb.add(w_oc, kb.mul(ic, i64(taps * w_tap)))

            def over_kh(kh: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                row = kb.add(chan, kb.mul(kb.add(r.ih0, kb.mul(kh, i64(self.win.dilations[0]))), self.cols))
                w_kh = kb.add(w_ic, kb.mul(kh, i64(kw_n * w_tap)))

                def over_kw(kw: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
                    at = kb.add(row, self.column(kw))
                    xs = [load(self.src, kb.add(at, col)) for col in starts]
                    acc = list(acc)
                    w_at = kb.add(w_kh, kb.mul(kw, i64(w_tap)))
                    block = _load_lanes(kb, w, w_at, OC_BLOCK) if w_tap > 1 else None
                    for j in range(ocb):
                        if block is None:
                            wv = splat(b, w.load(kb.add(w_at, kb.mul(i64(j), self.w_per_oc))), lanes)
                        else:
                            wv = _lane(b, block, j, lanes)
                        for u in range(vecs):
                            acc[j * vecs + u] = mac(b, acc[j * vecs + u], wv, xs[u])
                    return acc

                return kb.carry(i64(0), self.kw_trips, acc, over_kw, "kw")

            return kb.carry(r.kh_lo, r.kh_hi, acc, over_kh, "kh")

        acc = kb.carry(i64(0), r.ics, inits, over_ic, "ic")
        for j in range(ocb):
            for u, col in enumerate(starts):
                at = kb.add(outs[j], col)
                v = acc[j * vecs + u]
                if done_below is not None and not self.one_pass:
                    v = b.select(_lanes_from(kb, col, done_below, lanes), v, _load_lanes(kb, y, at, lanes))
                vector_store(b, v, y.ptr(at), mask)

    def row_end(self, r: _Row, oc: ir.Value, ocb: int) -> None:
        """The columns after the whole tiles, or all of a row narrower than one tile."""
        kb, b, ow, width, full = self.kb, self.kb.b, self.out_cols, self.width, self.full
        s = _static(ow)
        fits_tile = s >= width if s is not None else b.icmp_signed(">=", ow, i64(width))
        ragged = s % width != 0 if s is not None else b.icmp_signed("!=", kb.mul(full, i64(width)), ow)

        def last_wide():  # ends at the row's end, overlapping the previous tile
            self.tile(r, oc, ocb, _vector_starts(kb, b.sub(ow, i64(width)), self.wide), self.wide,
                      kb.mul(full, i64(width)))

        _when(kb, fits_tile, lambda: _when(kb, ragged, last_wide), lambda: self.narrow(r, oc, ocb, self.wide))

    def narrow(self, r: _Row, oc: ir.Value, ocb: int, n: int) -> None:
        """ow < 2n: the row's first and last vectors of n lanes (overlapping) if ow >= n,
        else narrower vectors, else columns one by one."""
        kb, b, ow = self.kb, self.kb.b, self.out_cols
        if n < MIN_LANES:
            if kb.target.is_wasm:  # no masked loads: LLVM would branch on every lane
                with kb.loop(ow, name="owc") as c:
                    self.tile(r, oc, ocb, [c], 1)
            else:  # the row's columns as the first lanes of one masked vector
                self.tile(r, oc, ocb, [i64(0)], MIN_LANES, mask=lanes_below(b, ow, MIN_LANES))
            return
        s = _static(ow)
        fits = s >= n if s is not None else b.icmp_signed(">=", ow, i64(n))
        _when(kb, fits, lambda: self.tile(r, oc, ocb, [i64(0), b.sub(ow, i64(n))], n),
              lambda: self.narrow(r, oc, ocb, n // 2))

    def output_rows(self, at: tuple[ir.Value, ...], oc_lo: ir.Value, blocks: ir.Value, ocb: int) -> None:
        """All output rows of channels [oc_lo, oc_lo + blocks * ocb); at: _Row's first fields."""
        kb, b, dh, full, col_chunk = self.kb, self.kb.b, self.win.dilations[0], self.full, self.col_chunk
        with kb.loop(self.out_rows, name="oh") as oh:
            ih0 = b.sub(kb.mul(oh, i64(self.sh)), self.top)
            lo, hi = i64(0), self.kh_trips
            if self.win.padded(0):  # only the window rows inside the input
                lo = smax(kb, lo, b.sub(i64(0), floordiv(kb, ih0, dh)))
                hi = smin(kb, hi, b.add(floordiv(kb, b.sub(b.sub(self.rows, i64(1)), ih0), dh), i64(1)))
            r = _Row(*at, oh, ih0, lo, hi)
            with kb.loop(ceildiv(kb, full, col_chunk), name="cc") as cc:
                t0 = kb.mul(cc, col_chunk)
                with kb.loop(blocks, name="blk") as blk:
                    oc = kb.add(oc_lo, kb.mul(blk, i64(ocb)))
                    with kb.loop(smin(kb, col_chunk, b.sub(full, t0)), name="t") as t:
                        self.tile(r, oc, ocb, _vector_starts(kb, kb.mul(kb.add(t0, t), i64(self.width)), self.wide),
                                  self.wide)
            with kb.loop(blocks, name="blk") as blk:
                self.row_end(r, kb.add(oc_lo, kb.mul(blk, i64(ocb))), ocb)


@unswitched
def build_conv2d(kb: KernelBuilder, params: tuple[Window, int, bool, bool], types: Sequence[TensorType]) -> None:
    """y = conv(x, w) (+ bias) for ``params`` (window, group, packed, bias). Tensors: x, w
    (laid out by :func:`pack_weights` when ``packed``), [bias], [the staged input of
    :func:`conv_scratch`], y. Scalars: the symbolic pads. float32."""
    win, group, packed, bias = params
    x_shape, w_shape, y_shape = types[0][1], types[1][1], types[-1][1]
    b = kb.b
    x = kb.tensor(0, FLOAT32, x_shape)
    w = kb.tensor(1, FLOAT32, w_shape)
    k = 2 + int(bias)  # the next tensor argument
    bt = kb.tensor(2, FLOAT32, (y_shape[1],)) if bias else None
    top, left, _, _ = dims_in(kb, win.pads)
    scratch = conv_scratch(win, x_shape, y_shape)
    src = x
    if scratch is not None:
        src = kb.tensor(k, FLOAT32, scratch)
        k += 1
    y = kb.tensor(k, FLOAT32, y_shape)

    sh, sw = win.strides
    kh_n = win.kernel[0]
    taps = win.taps
    c_in, cg, m = x.dim(1), w.dim(1), y.dim(1)
    phases = 1  # column phases of the staged rows
    if _pointwise(win):
        if scratch is not None:
            _subsample(kb, x, src, win.strides)
        sh = 1
        rows, cols = i64(1), kb.mul(src.dim(2), src.dim(3))  # a matrix product: one long row
        out_rows, out_cols = i64(1), kb.mul(y.dim(2), y.dim(3))
    else:
        if scratch is not None:
            phases = sw
            pad_copy(kb, x, src, (i64(0), left), ir.Constant(F32, 0.0), phases)
        rows, cols = x.dim(2), src.dim(3)
        out_rows, out_cols = y.dim(2), y.dim(3)
    run = udiv(kb, cols, phases)
    plane, out_plane = kb.mul(rows, cols), kb.mul(out_rows, out_cols)
    w_per_oc = kb.mul(cg, i64(taps))
    # The tap loops run to trip counts LLVM cannot see. Unrolled, the wasm backend's
    # register stackifier sinks each accumulator's chain of adds into one expression tree
    # and keeps every loaded input and weight vector live across all the trees: far more
    # than the 16 vector registers wasm engines map locals to, so they spill.
    kh_trips, kw_trips = w.dim(2, opaque=True), w.dim(3, opaque=True)

    wide = kb.target.f32_lanes  # lanes of the vectors of whole tiles
    width = TILE_VECS * wide
    full = udiv(kb, out_cols, width)  # whole tiles per output row
    # Cache blocking. The reduction runs in passes over chunks of input channels whose
    # weights for one tile stay in L1 (later passes add to the stored partial sums); in
    # a pass, a chunk of output-channel blocks, whose weights stay in L2, sweeps the
    # output rows; in a row, each chunk of columns, whose input rows stay in L1, is done
    # for every block of the channel chunk before the next.
    ic_chunk = max(1, IC_CHUNK // (OC_BLOCK * taps))
    if _static(cg) is not None:
        ic_chunk = min(ic_chunk, max(1, _static(cg)))
    one_pass = _static(cg) is not None and _static(cg) <= ic_chunk
    oc_chunk = i64(max(1, W_CHUNK // (OC_BLOCK * ic_chunk * taps)))
    col_chunk = i64(max(1, X_CHUNK // (ic_chunk * kh_n * width)))
    direct = _Direct(kb, win, packed, one_pass, w, bt, src, y, m, sh, top, phases, run, rows, cols, out_rows,
                     out_cols, plane, out_plane, w_per_oc, kh_trips, kw_trips, wide, width, full, col_chunk)

    mg = udiv(kb, m, group)
    blocks = udiv(kb, mg, OC_BLOCK)
    with kb.loop(y.dim(0), name="n") as n, kb.loop(i64(group), name="g") as g:
        in_base = kb.mul(kb.add(kb.mul(n, c_in), kb.mul(g, cg)), plane)
        oc0 = kb.mul(g, mg)
        with kb.loop(ceildiv(kb, cg, i64(ic_chunk)), name="icc") as pass_:
            ic0 = kb.mul(pass_, i64(ic_chunk))
            at = (n, ic0, smin(kb, i64(ic_chunk), b.sub(cg, ic0)),
                  b.icmp_signed("==", pass_, i64(0)), in_base)
            with kb.loop(ceildiv(kb, blocks, oc_chunk), name="occ") as ch:
                first = kb.mul(ch, oc_chunk)
                direct.output_rows(at, kb.add(oc0, kb.mul(first, i64(OC_BLOCK))),
                                   smin(kb, oc_chunk, b.sub(blocks, first)), OC_BLOCK)
            if _static(mg) is None or _static(mg) % OC_BLOCK:
                done = kb.mul(blocks, i64(OC_BLOCK))
                direct.output_rows(at, kb.add(oc0, done), b.sub(mg, done), 1)


def _lanes_from(kb: KernelBuilder, col: ir.Value, first: ir.Value, lanes: int) -> ir.Value:
    """Which lanes of the vector of columns [col, col + lanes) are at or after ``first``."""
    b = kb.b
    idx = b.add(splat(b, col, lanes), ir.Constant(ir.VectorType(I64, lanes), list(range(lanes))))
    return b.icmp_signed(">=", idx, splat(b, first, lanes))


def _vector_starts(kb: KernelBuilder, ow0: ir.Value, lanes: int) -> list[ir.Value]:
    """The first columns of the vectors of a whole tile starting at ow0."""
    return [kb.add(ow0, i64(u * lanes)) for u in range(TILE_VECS)]


# ----------------------------------------------------------------------------- per channel


def build_batch_norm(kb: KernelBuilder, epsilon: float, types: Sequence[TensorType]) -> None:
    """y = (x - mean) * (scale / sqrt(var + epsilon)) + bias over axis 1. Tensors: x, scale,
    bias, mean, var, y. Floats; the four (C,) parameters may have their own float dtype."""
    dt = types[0][0]
    b = kb.b
    x = kb.tensor(0, dt, types[0][1])
    scale, bias, mean, var = (kb.tensor(k, *types[k]) for k in range(1, 5))
    y = kb.tensor(5, dt, types[0][1])
    ct = compute_type(dt)

    def param(t: Tensor, c: ir.Value) -> ir.Value:
        return convert(b, t.load(c), t.dtype, dt)

    channels, inner = x.dim(1), x.numel(2)
    with kb.loop(x.dim(0), name="n") as n:
        with kb.loop(channels, name="c") as c:
            a = b.fdiv(param(scale, c), intrinsic(b, "llvm.sqrt", b.fadd(param(var, c), ir.Constant(ct, epsilon))))
            mu, beta = param(mean, c), param(bias, c)
            base = kb.mul(kb.add(kb.mul(n, channels), c), inner)
            with kb.loop(inner) as i:
                at = kb.add(base, i)
                y.store(at, b.fadd(b.fmul(b.fsub(x.load(at), mu), a), beta))


def build_group_norm(kb: KernelBuilder, params: tuple[float, int | None, bool], types: Sequence[TensorType]) -> None:
    """GroupNormalization and InstanceNormalization for ``params`` (epsilon, groups or None
    for one per channel, whether scale and bias hold one value per group instead of per
    channel): each group of channels of each image is normalized by its own mean and
    variance, then scaled and shifted per channel (or group). Tensors: x (N, C, ...), scale,
    bias, y. Floats; float16 is computed in float32."""
    epsilon, groups, per_group = params
    dt = types[0][0]
    b = kb.b
    x = kb.tensor(0, dt, types[0][1])
    scale, bias = kb.tensor(1, *types[1]), kb.tensor(2, *types[2])
    y = kb.tensor(3, dt, types[0][1])
    ct = compute_type(dt)
    channels, inner = x.dim(1), x.numel(2)
    n_groups = i64(groups) if groups is not None else channels
    per = udiv(kb, channels, groups) if groups is not None else i64(1)  # channels per group
    size = kb.mul(per, inner)
    count = b.sitofp(size, ct)
    add = fold("sum", dt)
    with kb.loop(kb.mul(x.dim(0), n_groups), name="ng") as ng:
        base = kb.mul(ng, size)
        total = kb.accumulate(size, identity("sum", dt), lambda acc, j: add(b, acc, x.load(kb.add(base, j))))
        mean = b.fdiv(total, count)

        def sq(acc: ir.Value, j: ir.Value) -> ir.Value:
            d = b.fsub(x.load(kb.add(base, j)), mean)
            return add(b, acc, fast(b.fmul(d, d)))

        var = b.fdiv(kb.accumulate(size, identity("sum", dt), sq), count)
        inv = b.fdiv(ir.Constant(ct, 1.0), intrinsic(b, "llvm.sqrt", b.fadd(var, ir.Constant(ct, epsilon))))
        g = b.urem(ng, n_groups)
        with kb.loop(per, name="ch") as ch:
            which = g if per_group else kb.add(kb.mul(g, per), ch)
            a = b.fmul(convert(b, scale.load(which), scale.dtype, dt), inv)
            beta = convert(b, bias.load(which), bias.dtype, dt)
            row = kb.add(base, kb.mul(ch, inner))
            with kb.loop(inner, name="i") as i:
                at = kb.add(row, i)
                y.store(at, b.fadd(b.fmul(b.fsub(x.load(at), mean), a), beta))


def build_lp_norm(kb: KernelBuilder, params: tuple[int, int], types: Sequence[TensorType]) -> None:
    """LpNormalization for ``params`` (axis, p of 1 or 2): x divided by the L1 or L2 norm of
    its vector along ``axis``; a zero vector stays zero. Tensors: x, y. Floats."""
    axis, p = params
    dt = types[0][0]
    b = kb.b
    x = kb.tensor(0, dt, types[0][1])
    y = kb.tensor(1, dt, types[0][1])
    ct = compute_type(dt)
    n, inner = x.dim(axis), x.numel(axis + 1)
    zero = ir.Constant(ct, 0.0)
    with kb.loop(kb.mul(x.numel(0, axis), inner), name="v") as v:
        base = kb.add(kb.mul(b.udiv(v, inner), kb.mul(n, inner)), b.urem(v, inner)) if _static(inner) != 1 else \
            kb.mul(v, n)

        def term(acc: ir.Value, j: ir.Value) -> ir.Value:
            e = x.load(kb.add(base, kb.mul(j, inner)))
            return b.fadd(acc, intrinsic(b, "llvm.fabs", e) if p == 1 else b.fmul(e, e))

        norm = kb.accumulate(n, zero, term)
        if p == 2:
            norm = intrinsic(b, "llvm.sqrt", norm)
        nonzero = b.fcmp_unordered("!=", norm, zero)
        with kb.loop(n, name="j") as j:
            at = kb.add(base, kb.mul(j, inner))
            y.store(at, b.select(nonzero, b.fdiv(x.load(at), norm), zero))


def build_lrn(kb: KernelBuilder, params: tuple[int, float, float, float], types: Sequence[TensorType]) -> None:
    """Local response normalization across channels (axis 1) for ``params`` (size, alpha,
    beta, bias): y = x / (bias + alpha / size * sum of x^2 over the channels
    [c - (size - 1) // 2, c + size // 2])^beta. Tensors: x, y. float32, or float16 computed in
    float32.

    Per channel, each of the window's taps is a channel (clamped into range) and a flag of
    whether it is inside; the loop over the channel's elements then reads every tap and adds
    the square of those inside (a square outside adds 0.0, which changes no sum: the squares
    add in the window's order as before), straight-line code that LLVM vectorizes. The power
    is :func:`lrn_power`."""
    size, alpha, beta, bias = params
    b = kb.b
    x = kb.tensor(0, types[0][0], types[0][1])
    y = kb.tensor(1, types[1][0], types[1][1])
    channels, inner = x.dim(1), x.numel(2)
    before = (size - 1) // 2
    scale = ir.Constant(F32, alpha / size)
    zero = ir.Constant(F32, 0.0)
    with kb.loop(x.dim(0), name="n") as n:
        with kb.loop(channels, name="c") as c:
            taps = []
            for t in range(size):
                cc = b.add(c, i64(t - before))
                inside = b.icmp_unsigned("<", cc, channels)  # 0 <= cc < channels
                taps.append((kb.mul(kb.add(kb.mul(n, channels), b.select(inside, cc, c)), inner), inside))
            base = kb.mul(kb.add(kb.mul(n, channels), c), inner)
            with kb.loop(inner, name="i") as i:
                total = zero
                for row, inside in taps:
                    v = x.load(kb.add(row, i))
                    total = b.fadd(total, b.select(inside, b.fmul(v, v), zero))
                denom = b.fadd(ir.Constant(F32, bias), b.fmul(scale, total))
                at = kb.add(base, i)
                y.store(at, b.fdiv(x.load(at), lrn_power(b, denom, beta)))


def lrn_power(b: ir.IRBuilder, d: ir.Value, beta: float) -> ir.Value:
    """d ** beta as powf has it, by square roots for the exponents models use (AlexNet's and
    GoogLeNet's 0.75, and 0.5 and 1: each root correctly rounded, so within 2 ulp of the
    power), :func:`.mathlib.pow` otherwise. (sqrt(-0.0) is -0.0 where powf gives 0.0, but d
    is a signed zero only when every square in the window is, x's own too, and 0 / 0 is NaN
    either way.)"""
    if beta == 1.0:
        return d
    if beta in (0.5, 0.75):
        r = intrinsic(b, "llvm.sqrt", d)
        return r if beta == 0.5 else b.fmul(r, intrinsic(b, "llvm.sqrt", r))
    return mathlib.pow(b, d, ir.Constant(d.type, beta))
