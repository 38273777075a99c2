"""A 2-D convolution's patch matrix as the GEMM's B (:func:`.gemm.gemm`, a
:class:`.gemm.BSource`), read from the convolution's input staged into stride phases
(:func:`.conv.stage_phases`): packed a block at a time, or natively read in place
(:meth:`Im2col.direct`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from .gemm import GemmTile, Reading, block_at
from .kernel import F32, I64, KernelBuilder, Tensor, at_entry, ceildiv, i64, smin
from .simd import copy_vectors, f32_vector, lanes_below, masked_load, masked_store

DIRECT_MAX_K = 1 << 14  # rows k of a convolution's patches read in place: their offsets' table, on the stack


@dataclass
class Im2col:
    """The [K, P] patch matrix of a 2-D convolution of one image, never materialized: row
    ``k = ic * taps + dy * kw + dx`` and column ``j = oh * ow + ox`` hold the input element
    that tap (dy, dx) of output pixel (oh, ox) reads in channel ic. It is read from the
    input *staged* into stride phases (:func:`toolkit.codegen.conv.stage_phases`): plane
    ``(py, px)`` of a channel holds padded rows ``r * sh + py`` and columns ``q * sw + px``
    as a ``hq x wq`` grid, so an element's offset splits into a part of k and a part of j,

        offset(k, j) = koff(k) + oh * wq + ox,
        koff(k) = ic * sh * sw * plane + (py * sw + px) * plane + ry * wq + rx,

    with ``(ry, py) = divmod(dy * dh, sh)`` and ``(rx, px) = divmod(dx * dw, sw)``. The NR
    columns of a panel that lie in one output row are then contiguous in every row k: the
    block is packed a vector at a time (or, natively when every panel lies in a row, not
    packed: see :meth:`direct`); a panel that wraps to the next output row (or passes the
    last pixel) is gathered column by column."""

    t: Tensor
    base: ir.Value  # the image's first staged element
    plane: ir.Value  # hq * wq
    wq: ir.Value
    ow: ir.Value  # output row length
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]

    table: ir.Value | None = None  # koff of each tap, filled by prepare()

    @property
    def taps(self) -> int:
        return self.kernel[0] * self.kernel[1]

    def prepare(self, kb: KernelBuilder) -> None:
        """Fill the table of each tap's offset ``(py * sw + px) * plane + ry * wq + rx`` (in a
        stack buffer, once per call): a row k's offset is then ``ic * channel + table[t]``."""
        kw, (sh, sw), (dh, dw) = self.kernel[1], self.strides, self.dilations
        with at_entry(kb):
            self.table = kb.b.alloca(I64, size=self.taps, name="taps")
        for t in range(self.taps):
            (ry, py), (rx, px) = divmod(t // kw * dh, sh), divmod(t % kw * dw, sw)
            off = kb.add(kb.mul(i64(py * sw + px), self.plane), kb.add(kb.mul(i64(ry), self.wq), i64(rx)))
            kb.b.store(off, kb.b.gep(self.table, [i64(t)], source_etype=I64))

    def pixel(self, kb: KernelBuilder, j: ir.Value) -> ir.Value:
        """Where output pixel j's row 0 (its offset's part of j) lies in the staged input."""
        b = kb.b
        return kb.add(self.base, kb.add(kb.mul(b.udiv(j, self.ow), self.wq), b.urem(j, self.ow)))

    def reading(self, kb: KernelBuilder, tile: GemmTile, n: ir.Value, k: ir.Value) -> Reading:
        return Reading.DIRECT if self.direct(kb, tile, k) else Reading.PACK

    def panel(self, kb: KernelBuilder, tile: GemmTile, p: ir.Value, k0: ir.Value, k: ir.Value) -> ir.Value:
        """Panel p's first pixel in the staged input: its row 0, from which :meth:`offsets` count."""
        return self.t.ptr(self.pixel(kb, kb.mul(p, i64(tile.nr))))

    def direct(self, kb: KernelBuilder, tile: GemmTile, k: ir.Value) -> bool:
        """Whether the GEMM reads this matrix's panels in place instead of packing them: every
        panel lies in one output row (a static row length a multiple of NR), so in each row k
        its NR columns are contiguous in the staged input, at ``koff(k)`` from the panel's
        first pixel. Natively only, and with K known (the offsets' table is K long).

        Packing cost the 3x3 layers of the cnn benchmark 13-16% of their time natively; read
        in place they took 0.87-0.90x the time (paired calls against onnxruntime: 3 -> 16
        channels at 64 x 64 1.19 -> 1.03x its time, 16 -> 32 at 32 x 32 1.26 -> 1.14x). On
        wasm32 the 2-row tiles share a packed panel among many more tiles, and the offset
        each step loads made 16 -> 32 channels no faster under wasmtime, so wasm32 packs."""
        return (not kb.target.is_wasm and isinstance(self.ow, ir.Constant) and self.ow.constant % tile.nr == 0
                and isinstance(k, ir.Constant) and k.constant <= DIRECT_MAX_K)

    def offsets(self, kb: KernelBuilder, k: int) -> ir.Value:
        """A table of ``koff(k)`` for every row k (in a stack buffer, filled per call)."""
        with at_entry(kb):
            table = kb.b.alloca(I64, size=max(1, k), name="koffs")
        self.rows(kb, i64(0), i64(k), lambda kk, koff: kb.b.store(koff, kb.b.gep(table, [kk], source_etype=I64)))
        return table

    def rows(self, kb: KernelBuilder, k0: ir.Value, kn: ir.Value, body: Callable[[ir.Value, ir.Value], None]) -> None:
        """``body(kk, koff(k0 + kk))`` for kk in [0, kn): the tap and the channel's offset are
        carried from row to row (no division per row)."""
        b = kb.b
        taps = self.taps
        channel = kb.mul(i64(self.strides[0] * self.strides[1]), self.plane)
        t0 = b.urem(k0, i64(taps)) if taps > 1 else i64(0)
        c0 = kb.mul(b.udiv(k0, i64(taps)) if taps > 1 else k0, channel)

        def step(kk: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            t, c = vals
            tap = b.load(b.gep(self.table, [t], source_etype=I64), typ=I64)
            body(kk, kb.add(c, tap))
            nt = b.add(t, i64(1))
            wrap = b.icmp_signed("==", nt, i64(taps))
            return [b.select(wrap, i64(0), nt), b.select(wrap, kb.add(c, channel), c)]

        kb.carry(i64(0), kn, [t0, c0], step, "pk")

    def pack(self, kb: KernelBuilder, tile: GemmTile, buf: ir.Value, j0: ir.Value, k0: ir.Value, kn: ir.Value,
             n: ir.Value, whole: bool) -> None:
        """Rows [k0, k0 + kn) of the panel of columns [j0, j0 + NR) into ``buf``; columns past
        the last pixel (``not whole``) are zero. A panel inside one output row is contiguous
        in every row k of the staged input: it is copied a vector at a time. A panel that
        wraps to the next output row (or passes the last pixel) is copied by segments
        natively, and gathered column by column on wasm32 (see :meth:`_by_segments`)."""
        b = kb.b
        oh0, ox0 = b.udiv(j0, self.ow), b.urem(j0, self.ow)
        in_row = b.icmp_signed("<=", kb.add(ox0, i64(tile.nr)), self.ow)
        if not whole:
            in_row = ir.Constant(ir.IntType(1), 0)
        with b.if_else(in_row) as (yes, no):
            with yes:
                src = kb.add(self.base, kb.add(kb.mul(oh0, self.wq), ox0))
                self.rows(kb, k0, kn, lambda kk, koff: copy_vectors(kb, tile.lanes, self.t, kb.add(src, koff),
                                                                    block_at(kb, buf, tile.nr, kk, i64(0)),
                                                                    i64(tile.vecs)))
            with no:
                if kb.target.is_wasm:
                    self._by_columns(kb, tile, buf, j0, k0, kn, n)
                else:
                    self._by_segments(kb, tile, buf, j0, oh0, ox0, k0, kn, n, whole)

    def _by_columns(self, kb: KernelBuilder, tile: GemmTile, buf: ir.Value, j0: ir.Value, k0: ir.Value,
                    kn: ir.Value, n: ir.Value) -> None:
        """Each column's offset and whether it exists, once per block, then an element at a
        time; a column past the last pixel reads pixel 0 (in bounds) and stores zero."""
        b = kb.b
        cols = []
        for c in range(tile.nr):
            j = kb.add(j0, i64(c))
            inside = b.icmp_signed("<", j, n)
            jj = b.select(inside, j, i64(0))
            cols.append((inside, self.pixel(kb, jj)))

        def row(kk: ir.Value, koff: ir.Value) -> None:
            for c, (inside, off) in enumerate(cols):
                v = b.select(inside, self.t.load(kb.add(koff, off)), ir.Constant(F32, 0.0))
                b.store(v, block_at(kb, buf, tile.nr, kk, i64(c)))

        self.rows(kb, k0, kn, row)

    def _by_segments(self, kb: KernelBuilder, tile: GemmTile, buf: ir.Value, j0: ir.Value, oh0: ir.Value,
                     ox0: ir.Value, k0: ir.Value, kn: ir.Value, n: ir.Value, whole: bool) -> None:
        """The panel's part in each output row (a *segment*) is contiguous in every row k:
        copied by vectors, its last columns by one masked vector. With AVX-512's 32-column
        panels every panel of a 28 x 28 or smaller output wraps, and gathering them cost
        small layers 7-13% of their time natively (measured on 3x3 layers of resnet50 and
        squeezenet). wasm32 has no masked loads (LLVM branches per lane), and there copying
        by segments measured 1-8% slower than gathering under wasmtime."""
        b = kb.b
        nr, lanes = tile.nr, tile.lanes
        vt = f32_vector(lanes)
        cols = i64(nr) if whole else smin(kb, i64(nr), b.sub(n, j0))
        if not whole:
            zero = ir.Constant(vt, [0.0] * lanes)
            with kb.loop(kn, "pz", plain=True) as kk:
                for v in range(tile.vecs):
                    b.store(zero, b.bitcast(block_at(kb, buf, nr, kk, i64(v * lanes)), vt.as_pointer()), align=4)
        with kb.loop(ceildiv(kb, kb.add(ox0, cols), self.ow), "sg", plain=True) as sg:
            first = b.icmp_signed("==", sg, i64(0))
            ox = b.select(first, ox0, i64(0))
            c0 = b.select(first, i64(0), b.sub(kb.mul(sg, self.ow), ox0))  # its first column in the panel
            length = smin(kb, b.sub(self.ow, ox), b.sub(cols, c0))
            src = kb.add(self.base, kb.add(kb.mul(kb.add(oh0, sg), self.wq), ox))
            vecs = b.udiv(length, i64(lanes))
            tail = kb.mul(vecs, i64(lanes))
            mask = lanes_below(b, b.sub(length, tail), lanes)

            def row(kk: ir.Value, koff: ir.Value) -> None:
                at, dst = kb.add(src, koff), block_at(kb, buf, nr, kk, c0)
                copy_vectors(kb, tile.lanes, self.t, at, dst, vecs)
                x = masked_load(b, self.t.ptr(kb.add(at, tail)), mask, vt)
                masked_store(b, x, b.gep(dst, [tail], source_etype=F32), mask)

            self.rows(kb, k0, kn, row)
