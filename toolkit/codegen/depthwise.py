"""Depthwise 2-D convolution (one input channel per group, one output channel per input
channel, float32, NCHW) with vectors along the channels.

The direct kernel of :mod:`.conv` runs vectors along an output row, so a plane narrower
than a vector wastes its lanes, and a depthwise layer reuses each loaded vector for one
multiply-add only: on EfficientNet's 96 and 144 channel layers at 12 x 10 and 6 x 5 pixels
it ran 4-8x onnxruntime's time per layer (onnxruntime blocks the channels, NCHWc). Here a
vector holds ``L`` channels (the target's float32 lanes: 4 on wasm32, 8 or 16 natively), so
the width of the image does not matter:

- per image and block of ``L`` channels, the input is *staged* channels-last into a padded
  scratch ``xs`` ((H + pads) x (W + pads) positions of L floats): L rows of L pixels
  loaded (only the row's pixels: masked natively, lane by lane on wasm32 at a row's end),
  transposed in registers, and stored one position each. The pads are zeroed once per call
  and never written after (a row's last group stores zeros past the row's end, which at
  worst land in the next row's positions before that row is staged, or in a group's
  positions of slack at the end);
- the output pixels, flattened, go a group at a time (:func:`group_pixels`: ``L``, 12 on
  wasm32): one accumulator per pixel, of L channels, over the window's taps, each tap one
  weight vector (packed at compile time, :func:`pack`) and one load of ``xs`` per pixel at
  its offset (a table filled once per call, :func:`offsets_shape`); or, when that costs
  less, a row of the image at a time, the group's pixels sharing their taps' loads
  (:func:`by_rows`);
- the ``L x L`` block of sums is transposed, so each vector is one channel's ``L``
  consecutive pixels of the output plane, which the bias and the fused ops (the
  convolution's epilogue, :func:`.conv.conv_epilogue`) take before one store: masked at
  the plane's end natively, element by element on wasm32.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, INT64, DType
from .conv import Window, conv_epilogue, conv_inputs
from .kernel import F32, I32, KernelBuilder, Tensor, ceildiv, i64, smin, transpose_vectors, unswitched
from .simd import lanes_below, mac, masked_load, masked_store

TensorType = tuple[DType, Sequence[Dim]]

def pack(w: np.ndarray, lanes: int) -> np.ndarray:
    """[C, 1, kh, kw] weights as [ceil(C / L), kh * kw, L]: per block of L channels, per tap,
    the block's weights (zeros past channel C)."""
    c = w.shape[0]
    taps = w.reshape(c, -1).T  # [taps, C]
    blocks = -(-c // lanes)
    out = np.zeros((blocks, taps.shape[0], lanes), np.float32)
    for blk in range(blocks):
        part = taps[:, blk * lanes:(blk + 1) * lanes]
        out[blk, :, :part.shape[1]] = part
    return out


def _padded(win: Window, x_shape: Sequence[Dim]) -> tuple[Dim, Dim]:
    return x_shape[2] + win.pads[0] + win.pads[2], x_shape[3] + win.pads[1] + win.pads[3]


def staged_shape(win: Window, x_shape: Sequence[Dim], lanes: int) -> tuple[Dim, ...]:
    """The channels-last staging scratch: the padded image's positions and a group's pixels
    of slack (:func:`group_pixels`: a row's last group reads past the row's end), of
    ``lanes`` floats each."""
    hp, wp = _padded(win, x_shape)
    return (D.add(D.mul(hp, wp), group_pixels(lanes)), lanes)


def by_rows(win: Window) -> bool:
    """Whether the output pixels may go a row at a time (a unit column stride): a group's
    pixels are then consecutive positions of one staged row, so its taps of one window row
    read ``group + (kw - 1) * dilation`` vectors in all, each shared by up to ``kw`` pixels,
    from one pointer; but a row's last group computes a whole group. Each call takes the
    rows when they cost fewer loads and multiply-adds than flat groups of the whole plane,
    each pixel's position from a table (:func:`offsets_shape`), which waste nothing: natively
    on 144 channels 3x3 at 56 x 56, 0.130 ms by rows (onnxruntime 0.131); on EfficientNet's
    rows of 10 and 20 pixels, flat groups."""
    return win.strides[1] == 1


def group_pixels(lanes: int) -> int:
    """The output pixels one step sums: ``lanes`` (one accumulator per pixel; natively 16
    of AVX-512's 32 registers), three times as many with 4-lane vectors (wasm32), where 12
    accumulators still fit 16 registers and each weight vector loaded feeds 12
    multiply-adds. On a 240-channel 5x5 layer at 28 x 28 under wasmtime, 4 pixels took
    0.77 ms, 8 0.68 and 12 0.66 (the direct kernel 0.62)."""
    return 3 * lanes if lanes == 4 else lanes


def offsets_shape(y_shape: Sequence[Dim], lanes: int) -> tuple[Dim, ...]:
    """The table of each output pixel's first position in the staging scratch, rounded up
    to whole groups of :func:`group_pixels` (the last group's extra entries repeat the last
    pixel's)."""
    per = group_pixels(lanes)
    return (D.mul(D.ceildiv(D.mul(y_shape[2], y_shape[3]), per), per),)


def _vec_at(b: ir.IRBuilder, vt: ir.VectorType, t: Tensor, idx: ir.Value) -> ir.Value:
    return b.bitcast(t.ptr(idx), vt.as_pointer())


def _fill_table(kb: KernelBuilder, win: Window, tab: Tensor, pixels: ir.Value, ow: ir.Value, wp: ir.Value) -> None:
    """tab[p] = output pixel p's position in the staging scratch (tap (0, 0)); past the last
    pixel, the last one's."""
    b = kb.b
    sh, sw = win.strides
    last = b.sub(pixels, i64(1))
    with kb.loop(tab.dim(0), "tb") as p:
        q = smin(kb, p, last)
        r = b.udiv(q, ow)
        col = b.sub(q, kb.mul(r, ow))
        tab.store(p, kb.add(kb.mul(kb.mul(r, i64(sh)), wp), kb.mul(col, i64(sw))))


@dataclass(frozen=True)
class _Depthwise:
    """One depthwise kernel's tensors and geometry, computed at its entry, and the code it
    writes per image and block of channels: staging, the taps' sums, the stores."""

    kb: KernelBuilder
    win: Window
    lanes: int
    per: int  # pixels a step sums (group_pixels)
    c: int  # channels (static)
    x: Tensor
    w: Tensor  # packed weights
    bt: Tensor | None
    post: tuple
    operands: Sequence[Tensor]
    xs: Tensor  # the staging scratch
    tab: Tensor  # each pixel's position in xs
    y: Tensor
    vt: ir.VectorType
    zero: ir.Constant
    h: ir.Value
    wd: ir.Value
    oh: ir.Value
    ow: ir.Value
    wp: ir.Value  # a staged row's positions, pads included
    pixels: ir.Value
    plane: ir.Value
    groups: ir.Value  # flat groups of ``per`` pixels
    row_step: ir.Value  # floats from one window row to the next in xs

    @property
    def b(self) -> ir.IRBuilder:
        return self.kb.b

    @property
    def wasm(self) -> bool:
        return self.kb.target.is_wasm

    def vload(self, ptr: ir.Value) -> ir.Value:
        return self.b.load(self.b.bitcast(ptr, self.vt.as_pointer()), typ=self.vt, align=4)

    def channel_of(self, blk: ir.Value, e: int) -> tuple[ir.Value, ir.Value | None]:
        """Channel e of block blk, clamped to the last channel, and whether it exists (None
        when every block is whole)."""
        kb, c = self.kb, self.c
        ch = kb.add(kb.mul(blk, i64(self.lanes)), i64(e))
        if c % self.lanes == 0:
            return ch, None
        return smin(kb, ch, i64(c - 1)), self.b.icmp_signed("<", ch, i64(c))

    def stage(self, n: ir.Value, blk: ir.Value) -> None:
        """xs = the block's channels of image n, channels-last, inside the pads."""
        kb, b, lanes, x = self.kb, self.b, self.lanes, self.x
        with kb.loop(self.h, "ih") as ih:
            row = kb.mul(kb.add(ih, i64(self.win.pads[0])), self.wp)
            with kb.loop(ceildiv(kb, self.wd, i64(lanes)), "iw") as g:
                iw0 = kb.mul(g, i64(lanes))
                count = b.sub(self.wd, iw0)
                if not self.wasm:
                    mask = lanes_below(b, count, lanes)
                    self.stage_group(n, blk, ih, row, iw0, lambda src: masked_load(b, x.ptr(src), mask, self.vt))
                else:
                    whole = b.icmp_signed(">=", count, i64(lanes))
                    with b.if_else(whole) as (full, part):
                        with full:
                            self.stage_group(n, blk, ih, row, iw0,
                                             lambda src: b.load(_vec_at(b, self.vt, x, src), typ=self.vt, align=4))
                        with part:
                            self.stage_group(n, blk, ih, row, iw0, lambda src: self.lane_by_lane(src, count))

    def lane_by_lane(self, src: ir.Value, count: ir.Value) -> ir.Value:
        """The vector of x's ``count`` (fewer than lanes) floats at src, zeros after."""
        kb, b = self.kb, self.b
        v = self.zero
        for e in range(self.lanes):
            at = kb.add(src, smin(kb, i64(e), b.sub(count, i64(1))))
            s = b.select(b.icmp_signed("<", i64(e), count), self.x.load(at), ir.Constant(F32, 0.0))
            v = b.insert_element(v, s, ir.Constant(I32, e))
        return v

    def stage_group(self, n: ir.Value, blk: ir.Value, ih: ir.Value, row: ir.Value, iw0: ir.Value, load) -> None:
        """A group of ``lanes`` pixels of input row ih from iw0 (each channel's read by
        ``load``), transposed into their positions in xs."""
        kb, b, lanes = self.kb, self.b, self.lanes
        rows = []
        for e in range(lanes):
            ch, valid = self.channel_of(blk, e)
            v = load(kb.add(kb.mul(kb.add(kb.mul(n, i64(self.c)), ch), self.plane), kb.add(kb.mul(ih, self.wd), iw0)))
            rows.append(v if valid is None else b.select(valid, v, self.zero))
        at = kb.add(row, kb.add(iw0, i64(self.win.pads[1])))
        for e, v in enumerate(transpose_vectors(b, rows)):
            b.store(v, _vec_at(b, self.vt, self.xs, kb.mul(kb.add(at, i64(e)), i64(lanes))), align=4)

    def store(self, n: ir.Value, blk: ir.Value, p0: ir.Value, sums: list[ir.Value], rest: ir.Value) -> None:
        """The block's sums at pixels p0.. (one vector per pixel), transposed, into y: the
        first ``rest`` of them (all when rest >= lanes)."""
        kb, b = self.kb, self.b
        epilogue = (conv_epilogue(self.bt, self.post, self.operands, self.pixels,
                                  kb.mul(n, kb.mul(i64(self.c), self.pixels)))
                    or (lambda kb, i, j, v, mask=None: v))
        mask = lanes_below(b, rest, self.lanes) if not self.wasm else None
        for e, v in enumerate(transpose_vectors(b, sums)):
            ch, valid = self.channel_of(blk, e)
            if valid is None:
                self.store_channel(n, ch, p0, v, rest, epilogue, mask)
            else:
                with b.if_then(valid):
                    self.store_channel(n, ch, p0, v, rest, epilogue, mask)

    def store_channel(self, n: ir.Value, ch: ir.Value, p0: ir.Value, v: ir.Value, rest: ir.Value, epilogue,
                      mask: ir.Value | None) -> None:
        """Channel ch's vector v of pixels p0.. into y, through the epilogue: the first
        ``rest`` lanes (masked natively, lane by lane on wasm32 unless all are pixels)."""
        kb, b, lanes, y = self.kb, self.b, self.lanes, self.y
        at = kb.add(kb.mul(kb.add(kb.mul(n, i64(self.c)), ch), self.pixels), p0)
        if not self.wasm:
            masked_store(b, epilogue(kb, ch, p0, v, mask), y.ptr(at), mask)
            return
        with b.if_else(b.icmp_signed(">=", rest, i64(lanes))) as (full, part):
            with full:
                b.store(epilogue(kb, ch, p0, v), _vec_at(b, self.vt, y, at), align=4)
            with part:
                for lane in range(lanes):
                    with b.if_then(b.icmp_signed("<", i64(lane), rest)):
                        s = b.extract_element(v, ir.Constant(I32, lane))
                        j = kb.add(p0, i64(lane))
                        y.store(kb.add(at, i64(lane)), epilogue(kb, ch, j, s))

    def tap_sums(self, wbase: ir.Value, window_row) -> list[ir.Value]:
        """One accumulator per pixel of a group over the window's taps: ``window_row(i)``
        gives, for window row i, ``at(j, e)``, pixel e's vector at tap (i, j)."""
        kb, lanes = self.kb, self.lanes
        kh_n, kw_n = self.win.kernel
        acc = [self.zero] * self.per
        for i in range(kh_n):
            at = window_row(i)
            for j in range(kw_n):
                wv = self.vload(self.w.ptr(kb.add(wbase, i64((i * kw_n + j) * lanes))))
                for e in range(self.per):
                    acc[e] = mac(self.b, acc[e], wv, at(j, e))
        return acc

    def rows_of(self, n: ir.Value, blk: ir.Value, wbase: ir.Value) -> None:
        """The block's output a row at a time (:func:`by_rows`), ``per`` pixels per step; a
        row's last step stores only the row's pixels."""
        kb, b, per, ow = self.kb, self.b, self.per, self.ow
        with kb.loop(self.oh, "oy") as oy:
            row0 = kb.mul(kb.mul(oy, i64(self.win.strides[0])), self.wp)
            with kb.loop(ceildiv(kb, ow, i64(per)), "ox") as g:
                ow0 = kb.mul(g, i64(per))
                acc = self.tap_sums(wbase, lambda i: self.row_taps(kb.add(row0, ow0), i))
                p0 = kb.add(kb.mul(oy, ow), ow0)
                for r in range(0, per, self.lanes):
                    self.store(n, blk, kb.add(p0, i64(r)), acc[r:r + self.lanes], b.sub(ow, kb.add(ow0, i64(r))))

    def row_taps(self, first: ir.Value, i: int):
        """``at(j, e)`` of window row i for a group of a row's consecutive pixels (the first
        at staged position ``first``): each vector loaded once, shared by the taps that
        read it."""
        kb, b, lanes, dw = self.kb, self.b, self.lanes, self.win.dilations[1]
        base = self.xs.ptr(kb.mul(kb.add(first, kb.mul(i64(i * self.win.dilations[0]), self.wp)), i64(lanes)))
        loaded: dict[int, ir.Value] = {}  # staged position from the group's first -> vector

        def at(j: int, e: int) -> ir.Value:
            pos = e + j * dw
            if pos not in loaded:
                loaded[pos] = self.vload(b.gep(base, [i64(pos * lanes)], source_etype=F32))
            return loaded[pos]
        return at

    def flat(self, n: ir.Value, blk: ir.Value, wbase: ir.Value) -> None:
        """The block's output in flat groups of ``per`` pixels, each pixel's position from the
        table; the last group stores only the plane's pixels."""
        kb, b, per, lanes, dw = self.kb, self.b, self.per, self.lanes, self.win.dilations[1]
        with kb.loop(self.groups, "pg") as pg:
            p0 = kb.mul(pg, i64(per))
            # each pixel's tap (0, 0) in xs; a window row further is one run-time step, and
            # the taps of a row constant offsets from it (the loads' immediates on wasm32)
            starts = [self.xs.ptr(kb.mul(self.tab.load(kb.add(p0, i64(e))), i64(lanes))) for e in range(per)]

            def window_row(i: int):
                rows = starts if i == 0 else [b.gep(p, [kb.mul(i64(i), self.row_step)], source_etype=F32)
                                              for p in starts]
                return lambda j, e: self.vload(b.gep(rows[e], [i64(j * dw * lanes)], source_etype=F32))
            acc = self.tap_sums(wbase, window_row)
            for r in range(0, per, lanes):
                self.store(n, blk, kb.add(p0, i64(r)), acc[r:r + lanes], b.sub(self.pixels, kb.add(p0, i64(r))))


@unswitched
def build_conv2d_dw(kb: KernelBuilder, params: tuple, types: Sequence[TensorType]) -> None:
    """y = post(depthwise_conv(x, w) + bias). ``params``: (window, lanes, bias, post).
    Tensors: x, the packed weights (:func:`pack`), [bias], the fused ops' operands, the
    staging scratch (:func:`staged_shape`), the offsets table (:func:`offsets_shape`, int64),
    y. Scalars: none (the pads are static)."""
    win, lanes, bias, post = params
    x, w, bt, operands, k = conv_inputs(kb, types, bias, post)
    xs = kb.tensor(k, FLOAT32, types[k][1])
    tab = kb.tensor(k + 1, INT64, types[k + 1][1])
    y = kb.tensor(k + 2, FLOAT32, types[k + 2][1])
    b = kb.b
    vt = ir.VectorType(F32, lanes)
    zero = ir.Constant(vt, [0.0] * lanes)
    c = types[0][1][1]  # static (route)
    blocks = -(-c // lanes)
    h, wd = x.dim(2), x.dim(3)
    oh, ow = y.dim(2), y.dim(3)
    wp = kb.add(wd, i64(win.pads[1] + win.pads[3]))
    pixels = kb.mul(oh, ow)
    plane = kb.mul(h, wd)
    kh_n, kw_n = win.kernel

    # the pads (and the slack) are zero for the whole call: positions are rewritten per
    # block only inside the image
    with kb.loop(xs.dim(0), "z") as i:
        b.store(zero, _vec_at(b, vt, xs, kb.mul(i, i64(lanes))), align=4)
    per = group_pixels(lanes)
    groups = ceildiv(kb, pixels, i64(per))
    use_rows: ir.Value | bool = False
    if by_rows(win):  # a row's cost by rows against its share of the flat groups' (see by_rows)
        step = per * win.taps + kh_n * (per + (kw_n - 1) * win.dilations[1])
        rows_cost = kb.mul(ceildiv(kb, ow, i64(per)), i64(step))
        use_rows = b.icmp_signed("<", rows_cost, kb.mul(ow, i64(2 * win.taps)))
    if use_rows is False:
        _fill_table(kb, win, tab, pixels, ow, wp)
    else:
        with b.if_then(b.not_(use_rows)):
            _fill_table(kb, win, tab, pixels, ow, wp)
    row_step = kb.mul(kb.mul(i64(win.dilations[0]), wp), i64(lanes))
    dw = _Depthwise(kb, win, lanes, per, c, x, w, bt, post, operands, xs, tab, y, vt, zero, h, wd, oh, ow, wp,
                    pixels, plane, groups, row_step)

    with kb.loop(x.dim(0), "n") as n:
        with kb.loop(i64(blocks), "cb") as blk:
            dw.stage(n, blk)
            wbase = kb.mul(blk, i64(win.taps * lanes))
            if use_rows is False:
                dw.flat(n, blk, wbase)
            else:
                with b.if_else(use_rows) as (rows_branch, flat_branch):
                    with rows_branch:
                        dw.rows_of(n, blk, wbase)
                    with flat_branch:
                        dw.flat(n, blk, wbase)
