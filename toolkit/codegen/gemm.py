"""The float32 GEMM microkernel: the core of MatMul, Gemm and Conv.

``y[i, j] = sum_k a[i, k] * b[k, j]`` over an [M, K] view ``a`` (any strides: Gemm's
transA is a view) and B *packed* into panels of ``NR`` columns: panel ``p`` holds columns
``[p * NR, p * NR + NR)`` of every row k contiguously, ``[P, K, NR]`` with ``P = ceil(N /
NR)``, the last panel's missing columns zero. A constant B is packed at compile time
(:func:`pack_b`); any other is packed by the kernel one ``KC x NR`` block at a time into a
stack buffer, from a strided :class:`View` (a run-time B, transposed or not) or from an
:class:`.im2col.Im2col`, a convolution's patch matrix read straight from its input. Natively,
a patch matrix whose panels each lie in one output row is not packed at all: the tiles read
every row of a panel in place, through a table of the rows' offsets
(:meth:`.im2col.Im2col.direct`). Each of these *B sources* answers how its panels are read
(:class:`BSource`, :class:`Reading`); :func:`gemm` never asks a source's type.

A register tile is ``MR`` rows by ``NR`` columns, ``MR * NR / lanes`` vector accumulators
that stay in registers over a block of k: each step loads ``NR / lanes`` vectors of the
panel and broadcasts ``MR`` elements of a, so every value loaded feeds several
multiply-adds (fused on hosts with FMA). The rows after the last whole tile run as one
tile of exactly that many rows (when M is symbolic, as tiles of the powers of two that sum to
that many: :func:`rest_tiles`); fewer rows than a tile, with B packed, run a row at a time
against several panels at once, so the M = 1 case has ``ROW_ACCUMULATORS`` accumulators too
(against that many vectors of panels; against a B of one panel or less, as interleaved
chains of k); the last, partial panel computes all its ``NR`` columns (the padding is zero)
and stores only the columns that exist (natively through masks, on wasm32 through a small
buffer). No path falls back to scalar products. The tile is
:class:`.microkernel.Microkernel`; :func:`gemm` runs the loops around it.

A lone row of a Relu's output against a constant B runs :func:`sparse_row` instead, where
the product keeps B row-major: the row's zeros skip whole rows of B, which at batch 1 is most
of the time a ReLU MLP spends (reading B). Its other row counts run the GEMM on that B,
read in place natively and packed a block at a time on wasm32.

Loops are blocked for the caches, as BLIS does: k in blocks of ``KC`` (one block of a panel,
``KC * NR`` floats, stays in L1 while every row tile of a block of rows uses it); rows in
blocks of ``MC`` (the rows' ``MC * KC`` floats of a stay in L2 while every panel passes;
``PACKED_HERE_MC`` when the kernel packs B itself, which it does again for every block of
rows); later k blocks add to the partial sums stored by earlier ones.

After the last k block, each tile's elements pass through an optional *epilogue*
(:data:`Epilogue`) while they are in L1 (or in registers, as they are stored, when it is
cheap and k is one block: a 16 -> 64 channel 1 x 1 convolution took 0.93x the time): a
convolution's bias, Gemm's alpha and beta * C, and the elementwise ops fused after the
product (:class:`.fused.PostOp`, :mod:`toolkit.passes.fuse`), applied by their own scalar
functions: on whole vectors where they are plain arithmetic, lane by lane otherwise.

Tile shapes per target (:func:`tile_for`): wasm32 SIMD128 has 4 lanes and engines map
locals to 16 vector registers, so 2 x 16 (8 accumulators, 4 panel vectors, 2 broadcasts);
x86 hosts with AVX2 have 8 lanes and 16 registers: 6 x 16 (12 accumulators); with AVX-512, 16
lanes and 32 registers: 12 x 32 (24 accumulators).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import numpy as np
from llvmlite import ir

from . import fused as F
from .kernel import F32, I32, I64, KernelBuilder, Tensor, at_entry, ceildiv, i64, pinned, smin, splat
from .microkernel import ROW_ACCUMULATORS, Flag, Microkernel
from .simd import f32_vector, lanes_below, mac, vector_load, vector_store

PACKED_HERE_MC = 512  # rows per cache block when the kernel packs B itself


@dataclass(frozen=True)
class GemmTile:
    mr: int  # rows of a register tile
    nr: int  # columns of a register tile, and of a packed panel
    lanes: int  # f32 lanes of a vector
    kc: int  # k per cache block
    mc: int  # rows per cache block

    @property
    def vecs(self) -> int:
        return self.nr // self.lanes


def tile_for(target) -> GemmTile:
    lanes = target.f32_lanes
    if lanes == 16:
        # AVX-512's 32 registers: 24 accumulators, 2 panel vectors and a broadcast. Measured
        # at 1024^3 on a Xeon (emeraldrapids) against 6x32, 8x32, 14x32 and 4x64: 146
        # GFLOP/s, 85% of the FMA peak (benchmarks/gemm_peak.py), against 97 for AVX2's 6x16
        return GemmTile(mr=12, nr=32, lanes=16, kc=256, mc=72)
    if lanes == 8:
        return GemmTile(mr=6, nr=16, lanes=8, kc=256, mc=72)
    # wasm32: 2 rows by 4 vectors. Measured at 512^3 against 4x8, 3x12, 3x16, 5x8, 6x8, 2x12
    # and 2x20 (benchmarks/gemm_peak.py): 78% of the multiply-add peak in Node and 60% under
    # wasmtime, against 73% and 53% for 4x8. Fewer rows means fewer broadcasts of a per step
    # (Cranelift lowers load32_splat to three instructions); taller tiles spill V8's 16
    # vector registers
    return GemmTile(mr=2, nr=16, lanes=4, kc=256, mc=64)


def rest_tiles(mr: int) -> list[int]:
    """The row counts of the tiles that run the 1 to MR - 1 rows after a symbolic M's whole
    tiles: the powers of two below MR, each taken when its bit of the count is set."""
    return [1 << e for e in range((mr - 1).bit_length())]


def panels(n: int, nr: int) -> int:
    return -(-n // nr)


def pack_b(b: np.ndarray, nr: int) -> np.ndarray:
    """A [K, N] matrix as ``[ceil(N / nr), K, nr]`` panels, the last one padded with zeros."""
    k, n = b.shape
    p = panels(n, nr)
    padded = np.zeros((k, p * nr), np.float32)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, p, nr).transpose(1, 0, 2))


class Reading(Enum):
    """How the tiles of one :func:`gemm` call reach B's panels, as B's source answers
    (:meth:`BSource.reading`), and what of the source each answer uses."""

    PACKED = "packed"  # already in panels (pack_b), read from ``panel``, rows NR floats apart
    IN_PLACE = "in place"  # B's own rows, read from ``panel``, ``rs`` elements apart
    DIRECT = "direct"  # read from ``panel``, row k at its offset in the table ``offsets`` fills
    PACK = "pack"  # packed here by ``pack`` into a stack buffer, a KC x NR block at a time


class BSource(Protocol):
    """A [k, n] B of :func:`gemm`: :class:`Packed`, :class:`View`, a convolution's patches
    (:class:`.im2col.Im2col`). The driver asks a source once a call how its panels are read
    (``reading``), then only what that reading uses, never the source's type. Every source
    has ``reading`` and ``panel``; the other members belong to one reading each, and a source
    has those of the readings it can answer (:class:`Packed` none of them, :class:`View`
    ``rs`` and ``pack``, :class:`.im2col.Im2col` ``offsets`` and ``pack``)."""

    def reading(self, kb: KernelBuilder, tile: GemmTile, n: ir.Value, k: ir.Value) -> Reading: ...

    def panel(self, kb: KernelBuilder, tile: GemmTile, p: ir.Value, k0: ir.Value, k: ir.Value) -> ir.Value:
        """Where the tiles read panel p's rows from k0, in every reading but PACK (DIRECT: the
        panel's row 0, from which ``offsets`` count)."""

    rs: ir.Value  # IN_PLACE: elements from one row k to the next

    def offsets(self, kb: KernelBuilder, k: int) -> ir.Value:
        """DIRECT: a table of each row k's offset from its panel's row 0, filled per call."""

    def pack(self, kb: KernelBuilder, tile: GemmTile, buf: ir.Value, j0: ir.Value, k0: ir.Value, kn: ir.Value,
             n: ir.Value, whole: bool) -> None:
        """PACK: rows [k0, k0 + kn) of columns [j0, j0 + NR) into ``buf`` (kn x NR, row-major),
        the columns from n zero unless ``whole``."""


@dataclass
class View:
    """A strided 2-D view of a tensor: element (r, c) is at ``base + r * rs + c * cs``.
    ``in_place``: as :func:`gemm`'s B, read where it lies where that pays (a constant B kept
    row-major for :func:`sparse_row`), not packed a block at a time."""

    t: Tensor
    base: ir.Value
    rs: ir.Value
    cs: ir.Value
    in_place: bool = False

    def row_step(self, mr: int, mc: int) -> int | None:
        """Elements from one row of a register tile to the next, when known at compile time."""
        return self.rs.constant if isinstance(self.rs, ir.Constant) else None

    def index(self, kb: KernelBuilder, r: ir.Value, c: ir.Value) -> ir.Value:
        return kb.add(self.base, kb.add(kb.mul(r, self.rs), kb.mul(c, self.cs)))

    def load(self, kb: KernelBuilder, r: ir.Value, c: ir.Value) -> ir.Value:
        return self.t.load(self.index(kb, r, c))

    def store(self, kb: KernelBuilder, r: ir.Value, c: ir.Value, v: ir.Value) -> None:
        self.t.store(self.index(kb, r, c), v)

    def reading(self, kb: KernelBuilder, tile: GemmTile, n: ir.Value, k: ir.Value) -> Reading:
        """IN_PLACE natively, for a row-major view that asks for it (``in_place``) and N a
        multiple of NR, so that no panel reads past its row; else PACK. Rows a page apart share
        their L1 sets, so the tiles read B from L2, which the tiles' multiply-adds outpace less
        than a pass that packs (mlp b64, natively: 1.03x the time of packed panels, against
        1.08x packing at run time); on wasm32 that took 1.5x, so it packs."""
        wasm = kb.target is not None and kb.target.is_wasm
        if (self.in_place and not wasm and isinstance(self.cs, ir.Constant) and self.cs.constant == 1
                and isinstance(n, ir.Constant) and n.constant % tile.nr == 0):
            return Reading.IN_PLACE
        return Reading.PACK

    def panel(self, kb: KernelBuilder, tile: GemmTile, p: ir.Value, k0: ir.Value, k: ir.Value) -> ir.Value:
        return self.t.ptr(kb.add(self.base, kb.add(kb.mul(k0, self.rs), kb.mul(p, i64(tile.nr)))))

    def pack(self, kb: KernelBuilder, tile: GemmTile, buf: ir.Value, j0: ir.Value, k0: ir.Value, kn: ir.Value,
             n: ir.Value, whole: bool) -> None:
        _pack_view(kb, tile, self, buf, j0, k0, kn, n, whole)


@dataclass
class PanelA:
    """A constant A packed at compile time (:func:`pack_a`) into panels of MR rows: panel
    ``r // MR`` holds its rows' elements of every column c contiguously, ``[ceil(M / MR), K,
    MR]``, the last panel's missing rows zero. A tile's MR broadcasts of one k step then read
    consecutive floats, and a row block of A is one stream, where the rows of an unpacked A
    lie K floats apart (12 streams for AVX-512's tile). A convolution's constant weights are
    packed so: resnet50's 3 x 3 layers with 512 channels, whose weights are 9.4 MB, took
    0.87-0.90x the time natively in paired calls (smaller layers 0.96-1.0x), and under
    wasmtime 0.98x."""

    t: Tensor
    base: ir.Value
    k: ir.Value  # columns
    mr: int

    @property
    def cs(self) -> ir.Value:
        return i64(self.mr)

    def row_step(self, mr: int, mc: int) -> int | None:
        """Elements from one row of a register tile of ``mr`` rows to the next: 1 when its
        rows lie in one panel, as they do when tiles start at multiples of ``mr`` (row blocks
        of ``mc``) and ``mr`` divides the panels' rows."""
        return 1 if self.mr % mr == 0 and mc % mr == 0 else None

    def index(self, kb: KernelBuilder, r: ir.Value, c: ir.Value) -> ir.Value:
        b = kb.b
        panel = b.udiv(r, i64(self.mr))
        return kb.add(self.base, kb.add(kb.mul(panel, kb.mul(self.k, i64(self.mr))),
                                        kb.add(kb.mul(c, i64(self.mr)), b.urem(r, i64(self.mr)))))


def pack_a(a: np.ndarray, mr: int) -> np.ndarray:
    """[M, K] as :class:`PanelA`'s panels, [ceil(M / MR), K, MR]."""
    m, k = a.shape
    p = -(-m // mr)
    out = np.zeros((p * mr, k), np.float32)
    out[:m] = a
    return np.ascontiguousarray(out.reshape(p, mr, k).transpose(0, 2, 1))


def block_at(kb: KernelBuilder, buf: ir.Value, nr: int, kk: ir.Value, c: ir.Value) -> ir.Value:
    """Element (kk, c) of a packed panel block (kn x NR, row-major)."""
    return kb.b.gep(buf, [kb.add(kb.mul(kk, i64(nr)), c)], source_etype=F32)


# (kb, row i, column j, y[i, j], [mask]) -> the value stored: a fused epilogue (bias,
# activation); y[i, j] is a float32, or a vector of the columns from j, of which only the
# lanes of the optional mask (natively, a partial panel's) are columns of y: the epilogue
# reads its operands there only (:func:`load_like`)
Epilogue = Callable[..., ir.Value]


def apply_post(kb: KernelBuilder, post: tuple, v: ir.Value, operands: Sequence[Tensor] = (),
               i: ir.Value | None = None, j: ir.Value | None = None, flat: ir.Value | None = None,
               mask: ir.Value | None = None) -> ir.Value:
    """v (a float32 or a vector of consecutive columns from ``j``) through the fused ops
    ``post`` (:class:`.fused.PostOp`), in order; an op with a tensor operand reads its
    tensor of ``operands`` (in order) at ``flat`` (y's element) or ``j`` (its column), only
    the lanes of ``mask`` when one is given (:func:`load_like`)."""
    it = iter(operands)
    return F.apply(kb.b, post, v, lambda p: load_like(kb, next(it), flat if p.operand == "full" else j, v, mask))


def load_like(kb: KernelBuilder, t: Tensor, at: ir.Value, like: ir.Value, mask: ir.Value | None = None) -> ir.Value:
    """Element ``at`` of float32 ``t``, or the vector of consecutive elements from ``at``
    when ``like`` is a vector: with ``mask``, only its lanes are read, the others zero
    (:func:`masked_load`, natively)."""
    if not isinstance(like.type, ir.VectorType):
        return t.load(at)
    return vector_load(kb.b, t.ptr(at), like.type, mask)


def _pack_view(kb: KernelBuilder, tile: GemmTile, src: View, buf: ir.Value, j0: ir.Value, k0: ir.Value,
               kn: ir.Value, n: ir.Value, whole: bool) -> None:
    """Rows [k0, k0 + kn) of columns [j0, j0 + NR) of the [k, n] view ``src`` into ``buf`` as
    one panel block (kn x NR, row-major). ``whole``: every column is < n. Contiguous rows
    (column stride 1) of a whole panel are copied a vector at a time; otherwise element by
    element along k, which is contiguous for a transposed B, with zeros past column n."""
    b = kb.b
    nr, lanes = tile.nr, tile.lanes
    vt = f32_vector(lanes)

    def at(kk: ir.Value, c: ir.Value) -> ir.Value:
        return block_at(kb, buf, nr, kk, c)

    def by_vectors() -> None:
        with kb.loop(kn, "pk") as kk:
            row = src.index(kb, kb.add(k0, kk), j0)
            for v in range(tile.vecs):
                x = b.load(src.t.ptr(kb.add(row, i64(v * lanes))), typ=vt, align=4)
                b.store(x, b.bitcast(at(kk, i64(v * lanes)), vt.as_pointer()), align=4)

    def by_elements() -> None:
        # a loop over the columns, not unrolled: LLVM vectorizes each k loop (with gathers and
        # scatters on AVX-512), and NR copies of that cost AVX-512's 32-column panels 8000
        # instructions in bert2's attention kernel
        with kb.loop(i64(nr), "pc", plain=True) as c:
            j = kb.add(j0, c)
            inside = b.icmp_signed("<", j, n) if not whole else ir.Constant(ir.IntType(1), 1)
            # a column past n reads column 0 (in bounds) and stores zero
            jj = b.select(inside, j, i64(0))
            with kb.loop(kn, "pk") as kk:
                v = b.select(inside, src.t.load(src.index(kb, kb.add(k0, kk), jj)), ir.Constant(F32, 0.0))
                b.store(v, at(kk, c))

    if not whole:
        by_elements()
    elif isinstance(src.cs, ir.Constant):
        by_vectors() if src.cs.constant == 1 else by_elements()
    else:
        with b.if_else(b.icmp_signed("==", src.cs, i64(1))) as (yes, no):
            with yes:
                by_vectors()
            with no:
                by_elements()


@dataclass
class Packed:
    """B packed whole (:func:`pack_b`), in ``t`` from element ``base``."""

    t: Tensor
    base: ir.Value

    def reading(self, kb: KernelBuilder, tile: GemmTile, n: ir.Value, k: ir.Value) -> Reading:
        return Reading.PACKED

    def panel(self, kb: KernelBuilder, tile: GemmTile, p: ir.Value, k0: ir.Value, k: ir.Value) -> ir.Value:
        nr = tile.nr
        return self.t.ptr(kb.add(self.base, kb.add(kb.mul(p, kb.mul(k, i64(nr))), kb.mul(k0, i64(nr)))))


@dataclass(frozen=True)
class _Driver:
    """The loops of one :func:`gemm` call around its tiles: k blocks, blocks of rows, panels,
    and where each panel block's rows lie (as B's source answers, :class:`Reading`)."""

    mk: Microkernel
    bsrc: BSource
    reading: Reading
    k: ir.Value
    full_panels: ir.Value  # the whole panels run are [first_panel, full_panels)
    ragged: Flag  # the partial last panel is run too
    block: ir.Value | None  # PACK: the stack buffer B is packed into, a panel block at a time
    offsets: ir.Value | None  # DIRECT: each row k's offset from its panel's row 0
    first_panel: ir.Value  # 0, or where this part's share of the panels starts
    partial_at: ir.Value  # the partial panel's index: B's number of whole panels

    def panel_ptr(self, p: ir.Value, k0: ir.Value) -> ir.Value:
        """Where panel p's rows from k0 start (DIRECT: its row 0)."""
        if self.block is not None:
            return self.mk.kb.b.bitcast(self.block, F32.as_pointer())
        return self.bsrc.panel(self.mk.kb, self.mk.tile, p, k0, self.k)

    def rows_block(self, i_lo: ir.Value, mn: ir.Value, k0: ir.Value, kn: ir.Value, first: Flag,
                   last: Flag) -> None:
        """Rows [i_lo, i_lo + mn) against every panel."""
        kb, b, mr = self.mk.kb, self.mk.kb.b, self.mk.tile.mr
        whole = b.udiv(mn, i64(mr)) if not isinstance(mn, ir.Constant) else i64(mn.constant // mr)
        _RowBlock(self, i_lo, mn, k0, kn, first, last, whole, kb.mul(whole, i64(mr))).run()

    def run(self, m: ir.Value, mc: int, lone: bool | None, one_block: bool) -> None:
        """Every block of rows, over k in one block or in blocks of about KC."""
        kb, b, k = self.mk.kb, self.mk.kb.b, self.k
        if one_block:
            if lone is True:
                self.rows_block(i64(0), i64(1), i64(0), k, True, True)
                return
            with kb.loop(ceildiv(kb, m, i64(mc)), "ic") as ic:
                i_lo = kb.mul(ic, i64(mc))
                self.rows_block(i_lo, smin(kb, i64(mc), b.sub(m, i_lo)), i64(0), k, True, True)
            return
        # at least one block: with k = 0 it stores the zeros y is. The blocks share k evenly
        # (784 is 4 x 196, not 3 x 256 + 16): a short last block would pay a whole block's
        # stores and reloads of the partial sums for a few steps
        blocks = ceildiv(kb, k, i64(self.mk.tile.kc))
        blocks = b.select(b.icmp_signed("==", blocks, i64(0)), i64(1), blocks)
        kc = ceildiv(kb, k, blocks)
        if lone is None:  # M known only at run time: the lone row's one block as a code path of its own
            with b.if_else(b.icmp_signed("==", m, i64(1))) as (yes, no):
                with yes:
                    self.rows_block(i64(0), i64(1), i64(0), k, True, True)
                with no:
                    self.blocked(m, mc, blocks, kc)
        else:
            self.blocked(m, mc, blocks, kc)

    def blocked(self, m: ir.Value, mc: int, blocks: ir.Value, kc: ir.Value) -> None:
        """k in ``blocks`` blocks of ``kc``, each over every block of ``mc`` rows."""
        kb, b, k = self.mk.kb, self.mk.kb.b, self.k
        with kb.loop(blocks, "pc") as pc:
            k0 = kb.mul(pc, kc)
            kn = smin(kb, kc, b.sub(k, k0))
            first = b.icmp_signed("==", pc, i64(0))
            last = b.icmp_signed("==", pc, b.sub(blocks, i64(1)))
            with kb.loop(ceildiv(kb, m, i64(mc)), "ic") as ic:
                i_lo = kb.mul(ic, i64(mc))
                self.rows_block(i_lo, smin(kb, i64(mc), b.sub(m, i_lo)), k0, kn, first, last)


@dataclass(frozen=True)
class _RowBlock:
    """Rows [i_lo, i_lo + mn) against every panel over k in [k0, k0 + kn): ``whole`` tiles of
    MR rows, then the ``mn - rest_lo`` rows after them."""

    d: _Driver
    i_lo: ir.Value
    mn: ir.Value
    k0: ir.Value
    kn: ir.Value
    first: Flag
    last: Flag
    whole: ir.Value
    rest_lo: ir.Value

    def run(self) -> None:
        d = self.d
        b, tile = d.mk.kb.b, d.mk.tile
        # a block with fewer rows than a tile, and B's panels read where they lie at a stride:
        # one row against PG panels at once, so the row's PG * vecs accumulators hide the adds'
        # latency
        pg = ROW_ACCUMULATORS // tile.vecs
        if d.reading in (Reading.PACKED, Reading.IN_PLACE) and pg > 1:
            mn, count = self.mn, d.mk.kb.sub(d.full_panels, d.first_panel)
            few = b.icmp_signed("<", mn, i64(tile.mr)) if not isinstance(mn, ir.Constant) else mn.constant < tile.mr
            groups = b.udiv(count, i64(pg)) if not isinstance(count, ir.Constant) else i64(count.constant // pg)
            if few is True:
                self.grouped(groups, pg)
            elif few is False:
                self.tiled()
            else:
                with b.if_else(few) as (yes, no):
                    with yes:
                        self.grouped(groups, pg)
                    with no:
                        self.tiled()
        else:
            self.tiled()
        if d.ragged is True:
            self.over_panel(d.partial_at, True)
        elif d.ragged is not False:
            with b.if_then(d.ragged):
                self.over_panel(d.partial_at, True)

    def grouped(self, groups: ir.Value, pg: int) -> None:
        """Each row against PG panels at once, then the panels after the last whole group."""
        d = self.d
        kb = d.mk.kb
        with kb.loop(groups, "pg") as g:
            ps = [kb.add(d.first_panel, kb.add(kb.mul(g, i64(pg)), i64(q))) for q in range(pg)]
            base = [d.panel_ptr(p, self.k0) for p in ps]
            with kb.loop(self.mn, "ir1") as r:
                d.mk.tile_at(kb.add(self.i_lo, r), 1, ps, base, self.k0, self.kn, self.first, self.last, False)
        with kb.loop(d.full_panels, "p", start=kb.add(d.first_panel, kb.mul(groups, i64(pg)))) as p:
            self.over_panel(p, False)

    def tiled(self) -> None:
        """Every whole panel against the block's tiles."""
        d = self.d
        with d.mk.kb.loop(d.full_panels, "p", start=d.first_panel) as p:
            self.over_panel(p, False)

    def over_panel(self, p: ir.Value, partial: bool) -> None:
        """Panel p (``partial``: the last, partial one) against the whole tiles, then the rest."""
        d = self.d
        kb, b, mk, bsrc = d.mk.kb, d.mk.kb.b, d.mk, d.bsrc
        mr, nr = mk.tile.mr, mk.tile.nr
        k0, kn, first, last, mn = self.k0, self.kn, self.first, self.last, self.mn
        if d.block is not None:
            bsrc.pack(kb, mk.tile, d.panel_ptr(p, k0), kb.mul(p, i64(nr)), k0, kn, mk.n, not partial)
        base = [d.panel_ptr(p, k0)]
        koffs = None if d.offsets is None else b.gep(d.offsets, [k0], source_etype=I64)
        with kb.loop(self.whole, "ir") as t:
            mk.tile_at(kb.add(self.i_lo, kb.mul(t, i64(mr))), mr, [p], base, k0, kn, first, last, partial, koffs)
        # the rows after the whole tiles: one tile of exactly that many rows when M is
        # known; otherwise tiles of the powers of two that sum to it (8 + 2 + 1 rows for
        # 11), so the kernel holds log2(MR) tile variants instead of MR - 1 (AVX-512's
        # 12-row tile: 4 variants of 15 rows in all against 11 of 66; bert2's native
        # compile 10.4 -> 3 s)
        i_rest = kb.add(self.i_lo, self.rest_lo)
        if isinstance(mn, ir.Constant):
            if mn.constant % mr:
                mk.tile_at(i_rest, mn.constant % mr, [p], base, k0, kn, first, last, partial, koffs)
            return
        rest = b.sub(mn, self.rest_lo)
        for rows in reversed(rest_tiles(mr)):
            with b.if_then(b.icmp_signed("!=", b.and_(rest, i64(rows)), i64(0))):
                # the rows of the larger pieces come first
                mk.tile_at(kb.add(i_rest, b.and_(rest, i64(-2 * rows))), rows, [p], base, k0, kn, first, last,
                           partial, koffs)


def gemm(kb: KernelBuilder, tile: GemmTile, a: View | PanelA, bsrc: BSource, y: Tensor, y_base: ir.Value,
         m: ir.Value, n: ir.Value, k: ir.Value, epilogue: Epilogue | None = None,
         prefetch: Callable[[KernelBuilder, ir.Value, ir.Value], None] | None = None,
         inline_epilogue: bool = False,
         split: bool | tuple[ir.Value, ir.Value] = False) -> tuple[ir.Value, ir.Value] | None:
    """``y[i, j] = epilogue(i, j, sum_k a[i, k] * B[k, j])`` for a [k, n] B read as its source
    answers (:class:`BSource`, :class:`Reading`); y is row-major [m, n] from ``y_base``. The
    epilogue (default: none) runs once per element, over each tile the last k block has
    stored. ``prefetch(kb, i, j)``, if given, is called for each cache line (16 floats) of
    each tile's rows before the last k block's loop: the epilogue's operands fetched while
    the tile computes. ``inline_epilogue``: the epilogue is a vector instruction or two
    (:func:`.fused.cheap`), so with one k block it runs on the accumulators as they are
    stored rather than over the stored tile read back. ``split``: this call computes its part's
    share of B's panels (:meth:`.KernelBuilder.share`; or, given ``(part, parts)`` from
    :meth:`.KernelBuilder.part`, that part's), so the kernel's parts run on the context's
    threads; a panel's columns are computed alike whoever computes them. Returns the share,
    ``[lo, hi)`` in panels (the partial one counted), when ``split``."""
    b = kb.b
    mr, nr = tile.mr, tile.nr
    wasm = kb.target is not None and kb.target.is_wasm
    full_panels = i64(n.constant // nr) if isinstance(n, ir.Constant) else b.udiv(n, i64(nr))
    ragged = (n.constant % nr != 0) if isinstance(n, ir.Constant) else b.icmp_signed(
        "!=", kb.mul(full_panels, i64(nr)), n)
    reading = bsrc.reading(kb, tile, n, k)
    # on wasm32 a lone row against B packed whole streams all of k in one block: it reads each
    # of B's elements once, so blocking k keeps nothing in cache for it, and each panel group
    # is then one sequential read with no partial sums stored and read back. A 1024 x 1024
    # layer at batch 1 in Node took 0.89x the time; natively 1.05x, so not there
    lone = wasm and reading is Reading.PACKED and (m.constant == 1 if isinstance(m, ir.Constant) else None)
    one_block = isinstance(k, ir.Constant) and k.constant <= tile.kc or lone is True
    one_panel = isinstance(n, ir.Constant) and n.constant <= nr
    offsets = bsrc.offsets(kb, k.constant) if reading is Reading.DIRECT else None
    # B packed here is packed again for every block of rows: larger blocks pack less often
    mc = max(tile.mc, PACKED_HERE_MC) if reading is Reading.PACK else tile.mc
    with at_entry(kb):
        # the partial panel's tile is stored here first, then its columns that exist copied
        # out; a B that is packed here is packed into ``block`` a panel block at a time
        edge = b.alloca(ir.ArrayType(F32, mr * nr), name="edge") if ragged is not False and wasm else None
        block = b.alloca(ir.ArrayType(F32, tile.kc * nr), name="block") if reading is Reading.PACK else None
    b_stride = bsrc.rs if reading is Reading.IN_PLACE else i64(nr)
    mk = Microkernel(kb, tile, a, a.row_step(mr, mc), b_stride, y, y_base, n, one_panel, edge, epilogue, prefetch,
                     inline_epilogue)
    first, end, share = i64(0), full_panels, None
    if split:
        total = ceildiv(kb, n, i64(nr))  # the panels, the partial one counted
        share = first, hi = kb.share(total) if split is True else kb.portion(total, *split)
        # the whole panels [first, end) (first <= end: a share of only the partial panel, or
        # none, starts past the last whole one), and the partial panel if the share holds it
        end = smin(kb, hi, full_panels)
        if ragged is not False:
            here = b.and_(b.icmp_signed(">", hi, full_panels), b.icmp_signed("<=", first, full_panels))
            ragged = here if ragged is True else b.and_(ragged, here)
        first = smin(kb, first, end)
    _Driver(mk, bsrc, reading, k, end, ragged, block, offsets, first, full_panels).run(m, mc, lone, one_block)
    return share


SPARSE_ROWS = 4  # rows of B a step of the lone sparse row adds into y
SPARSE_UNROLL = 4  # vectors of y per step of the column loop


def sparse_row(kb: KernelBuilder, tile: GemmTile, a: View, bt: Tensor, y: Tensor, n: int, k: int, rows: Tensor,
               epilogue: Epilogue | None = None) -> None:
    """``y[0, j] = epilogue(0, j, sum over k with a[0, k] != 0 of a[0, k] * b[k, j])`` for one
    row of a and a constant B stored row-major [k, n] (chosen by
    :func:`toolkit.ops.linalg.b_form`): the row's zeros (a Relu's output holds many) skip
    their rows of B, which the GEMM's panels cannot, since hardware prefetchers fetch a
    panel's skipped lines anyway, while a skipped row of B is a whole stretch of memory
    nobody reads. ``rows`` (int32, k elements) receives the indices of the row's other
    elements (a NaN is one). y accumulates ``SPARSE_ROWS`` rows of B a step, in k's order,
    each sum a chain of multiply-adds from zero as the GEMM's lone row computes it on wasm32
    (all of k in one block) against two panels or more, so there the same bits but for the
    sign of a zero sum. B's elements are finite (the caller's condition), so no skipped 0 *
    inf was a NaN."""
    b = kb.b
    lanes = tile.lanes
    wasm = kb.target is not None and kb.target.is_wasm
    vt = f32_vector(lanes)
    chunk = SPARSE_UNROLL * lanes

    def nonzero(kk: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
        b.store(b.trunc(kk, I32), rows.ptr(vals[0]))
        keep = b.fcmp_unordered("!=", a.load(kb, i64(0), kk), ir.Constant(F32, 0.0))
        return [kb.add(vals[0], b.zext(keep, I64))]

    count = kb.carry(i64(0), i64(k), [i64(0)], nonzero, "nz", plain=True)[0]

    def columns(body: Callable[[ir.Value, int, ir.Value | None], None],
                scalar: Callable[[ir.Value], None]) -> None:
        """body(j, vectors, mask) over y's columns: chunks of SPARSE_UNROLL vectors, then
        single vectors, then the last columns under a mask (natively) or one by one."""
        if n // chunk:
            with kb.loop(i64(n // chunk), "sc", plain=True) as c:
                body(kb.mul(c, i64(chunk)), SPARSE_UNROLL, None)
        for v in range(n % chunk // lanes):
            body(i64(n // chunk * chunk + v * lanes), 1, None)
        last = n // lanes * lanes
        if n % lanes and not wasm:
            body(i64(last), 1, lanes_below(b, i64(n - last), lanes))
        elif n % lanes:
            with kb.loop(i64(n - last), "st", plain=True) as c:
                scalar(kb.add(i64(last), c))

    def at(ptr: ir.Value, j: ir.Value) -> ir.Value:
        """ptr + j elements; on wasm32 through an opaque value, so that the vectors' offsets
        from it stay the loads' offset immediates (:func:`kernel.pinned`)."""
        p = b.gep(ptr, [j], inbounds=True, source_etype=F32)
        return pinned(b, p) if wasm else p

    y0 = y.ptr(i64(0))
    zero = ir.Constant(vt, [0.0] * lanes)
    columns(lambda j, vecs, mask: [vector_store(b, zero, b.gep(at(y0, j), [i64(u * lanes)], source_etype=F32), mask)
                                   for u in range(vecs)],
            lambda j: y.store(j, ir.Constant(F32, 0.0)))

    def add_rows(first: ir.Value, count_rows: int) -> None:
        """y += the rows of B listed from rows[first], count_rows of them."""
        idx = [b.zext(b.load(rows.ptr(kb.add(first, i64(t))), typ=I32), I64) for t in range(count_rows)]
        xs = [a.load(kb, i64(0), r) for r in idx]
        ss = [splat(b, x, lanes) for x in xs]
        starts = [bt.ptr(kb.mul(r, i64(n))) for r in idx]

        def body(j: ir.Value, vecs: int, mask: ir.Value | None) -> None:
            yp = at(y0, j)
            rps = [at(p, j) for p in starts]
            for u in range(vecs):
                off = i64(u * lanes)
                ptr = b.gep(yp, [off], inbounds=True, source_etype=F32)
                v = vector_load(b, ptr, vt, mask)
                for s, rp in zip(ss, rps):
                    v = mac(b, v, s, vector_load(b, b.gep(rp, [off], inbounds=True, source_etype=F32), vt, mask))
                vector_store(b, v, ptr, mask)

        def scalar(j: ir.Value) -> None:
            v = y.load(j)
            for x, r in zip(xs, idx):
                v = mac(b, v, x, bt.load(kb.add(kb.mul(r, i64(n)), j)))
            y.store(j, v)

        columns(body, scalar)

    groups = b.udiv(count, i64(SPARSE_ROWS))
    with kb.loop(groups, "sg") as g:
        add_rows(kb.mul(g, i64(SPARSE_ROWS)), SPARSE_ROWS)
    with kb.loop(b.sub(count, kb.mul(groups, i64(SPARSE_ROWS))), "sr") as r:
        add_rows(kb.add(kb.mul(groups, i64(SPARSE_ROWS)), r), 1)
    if epilogue is None:
        return

    def finish(j: ir.Value, vecs: int, mask: ir.Value | None) -> None:
        for u in range(vecs):
            ju = kb.add(j, i64(u * lanes))
            ptr = y.ptr(ju)
            vector_store(b, epilogue(kb, i64(0), ju, vector_load(b, ptr, vt, mask), mask), ptr, mask)

    columns(finish, lambda j: y.store(j, epilogue(kb, i64(0), j, y.load(j))))
