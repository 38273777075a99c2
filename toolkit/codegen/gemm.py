"""The float32 GEMM microkernel: the core of MatMul and Gemm.

``y[i, j] = sum_k a[i, k] * b[k, j]`` over an [M, K] view ``a`` (any strides: Gemm's
transA is a view) and B *packed* into panels of ``NR`` columns: panel ``p`` holds columns
``[p * NR, p * NR + NR)`` of every row k contiguously, ``[P, K, NR]`` with ``P = ceil(N /
NR)``, the last panel's missing columns zero. A constant B is packed at compile time
(:func:`pack_b`); any other is packed by the kernel into a scratch buffer first
(:func:`pack_runtime`), which also reads a transposed or strided B.

A register tile is ``MR`` rows by ``NR`` columns, ``MR * NR / lanes`` vector accumulators
that stay in registers over a block of k: each step loads ``NR / lanes`` vectors of the
panel and broadcasts ``MR`` elements of a, so every value loaded feeds several
multiply-adds (fused on hosts with FMA). The rows after the last whole tile run as one
tile of exactly that many rows (one variant per count when M is symbolic); fewer rows than a
tile, with B packed, run a row at a time against several panels at once, so the M = 1 case
has ``ONE_ROW_PANELS * NR / lanes`` accumulators too; the last,
partial panel computes all its ``NR`` columns (the padding is zero) and stores only the
columns that exist, through a small buffer. No path falls back to scalar products.

Loops are blocked for the caches, as BLIS does: k in blocks of ``KC`` (one block of a panel,
``KC * NR`` floats, stays in L1 while every row tile of a block of rows uses it); rows in
blocks of ``MC`` (the rows' ``MC * KC`` floats of a stay in L2 while every panel passes);
later k blocks add to the partial sums stored by earlier ones.

Tile shapes per target (:func:`tile_for`): wasm32 SIMD128 has 4 lanes and engines map
locals to 16 vector registers, so 4 x 8 (8 accumulators, 2 panel vectors, 1 broadcast);
x86 hosts with AVX2 have 8 lanes and 16 registers: 6 x 16 (12 accumulators).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from .conv import _ceildiv, _splat, mac, smin
from .kernel import F32, KernelBuilder, Tensor, i64

ONE_ROW_PANELS = 4  # panels a lone row runs against at once


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
    if lanes == 8:
        return GemmTile(mr=6, nr=16, lanes=8, kc=256, mc=72)
    return GemmTile(mr=4, nr=8, lanes=4, kc=256, mc=64)


def panels(n: int, nr: int) -> int:
    return -(-n // nr)


def pack_b(b: np.ndarray, nr: int) -> np.ndarray:
    """A [K, N] matrix as ``[ceil(N / nr), K, nr]`` panels, the last one padded with zeros."""
    k, n = b.shape
    p = panels(n, nr)
    padded = np.zeros((k, p * nr), np.float32)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, p, nr).transpose(1, 0, 2))


@dataclass
class View:
    """A strided 2-D view of a tensor: element (r, c) is at ``base + r * rs + c * cs``."""

    t: Tensor
    base: ir.Value
    rs: ir.Value
    cs: ir.Value

    def index(self, kb: KernelBuilder, r: ir.Value, c: ir.Value) -> ir.Value:
        return kb.add(self.base, kb.add(kb.mul(r, self.rs), kb.mul(c, self.cs)))

    def load(self, kb: KernelBuilder, r: ir.Value, c: ir.Value) -> ir.Value:
        return self.t.load(self.index(kb, r, c))

    def store(self, kb: KernelBuilder, r: ir.Value, c: ir.Value, v: ir.Value) -> None:
        self.t.store(self.index(kb, r, c), v)


def _vec(lanes: int) -> ir.VectorType:
    return ir.VectorType(F32, lanes)


def _pack_block(kb: KernelBuilder, tile: GemmTile, src: View, buf: ir.Value, j0: ir.Value, k0: ir.Value,
                kn: ir.Value, n: ir.Value, whole: bool) -> None:
    """Rows [k0, k0 + kn) of columns [j0, j0 + NR) of the [k, n] view ``src`` into ``buf`` as
    one panel block (kn x NR, row-major). ``whole``: every column is < n. Contiguous rows
    (column stride 1) of a whole panel are copied a vector at a time; otherwise element by
    element along k, which is contiguous for a transposed B, with zeros past column n."""
    b = kb.b
    nr, lanes = tile.nr, tile.lanes
    vt = _vec(lanes)

    def at(kk: ir.Value, c: ir.Value) -> ir.Value:
        return b.gep(buf, [kb.add(kb.mul(kk, i64(nr)), c)], source_etype=F32)

    def by_vectors() -> None:
        with kb.loop(kn, "pk") as kk:
            row = src.index(kb, kb.add(k0, kk), j0)
            for v in range(tile.vecs):
                x = b.load(src.t.ptr(kb.add(row, i64(v * lanes))), typ=vt, align=4)
                b.store(x, b.bitcast(at(kk, i64(v * lanes)), vt.as_pointer()), align=4)

    def by_elements() -> None:
        for c in range(nr):
            j = kb.add(j0, i64(c))
            inside = b.icmp_signed("<", j, n) if not whole else ir.Constant(ir.IntType(1), 1)
            # a column past n reads column 0 (in bounds) and stores zero
            jj = b.select(inside, j, i64(0))
            with kb.loop(kn, "pk") as kk:
                v = b.select(inside, src.t.load(src.index(kb, kb.add(k0, kk), jj)), ir.Constant(F32, 0.0))
                b.store(v, at(kk, i64(c)))

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


def gemm(kb: KernelBuilder, tile: GemmTile, a: View, bsrc: "Packed | View", y: Tensor, y_base: ir.Value,
         m: ir.Value, n: ir.Value, k: ir.Value) -> None:
    """``y[i, j] = sum_k a[i, k] * B[k, j]`` for B packed (:class:`Packed`) or a [k, n]
    :class:`View` packed here a block at a time; y is row-major [m, n] from ``y_base``."""
    b = kb.b
    mr, nr, lanes, vecs = tile.mr, tile.nr, tile.lanes, tile.vecs
    vt = _vec(lanes)
    zero = ir.Constant(vt, [0.0] * lanes)
    full_panels = i64(n.constant // nr) if isinstance(n, ir.Constant) else b.udiv(n, i64(nr))
    ragged = (n.constant % nr != 0) if isinstance(n, ir.Constant) else b.icmp_signed(
        "!=", kb.mul(full_panels, i64(nr)), n)
    one_block = isinstance(k, ir.Constant) and k.constant <= tile.kc
    with _at_entry(kb):
        # the partial panel's tile is stored here first, then its columns that exist copied
        # out; a B given as a view is packed into ``block`` a panel block at a time
        edge = b.alloca(ir.ArrayType(F32, mr * nr), name="edge") if ragged is not False else None
        block = b.alloca(ir.ArrayType(F32, tile.kc * nr), name="block") if isinstance(bsrc, View) else None

    def panel_ptr(p: ir.Value, k0: ir.Value) -> ir.Value:
        """Where panel p's rows from k0 start."""
        if block is not None:
            return b.bitcast(block, F32.as_pointer())
        return bsrc.t.ptr(kb.add(bsrc.base, kb.add(kb.mul(p, kb.mul(k, i64(nr))), kb.mul(k0, i64(nr)))))

    def vload(ptr: ir.Value, at: ir.Value) -> ir.Value:
        return b.load(b.gep(ptr, [at], source_etype=F32), typ=vt, align=4)

    def tile_at(i0: ir.Value, rows: int, ps: list[ir.Value], base: list[ir.Value], k0: ir.Value, kn: ir.Value,
                first, partial: bool) -> None:
        """Rows [i0, i0 + rows) x the panels ``ps`` (their blocks at ``base``), over k in [k0,
        k0 + kn): added to y unless ``first`` (the first k block); ``partial``: the last panel,
        whose columns past n are not stored."""
        w = len(ps) * vecs  # vectors per row
        a_rows = [a.index(kb, kb.add(i0, i64(r)), k0) for r in range(rows)]

        def step(kk: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            at = kb.mul(kk, i64(nr))
            bv = [vload(ptr, kb.add(at, i64(v * lanes))) for ptr in base for v in range(vecs)]
            acc = list(acc)
            for r in range(rows):
                s = _splat(b, a.t.load(kb.add(a_rows[r], kb.mul(kk, a.cs))), lanes)
                for v in range(w):
                    acc[r * w + v] = mac(b, acc[r * w + v], s, bv[v])
            return acc

        acc = kb.carry(i64(0), kn, [zero] * (rows * w), step, "k")

        def plus_old(s: ir.Value, old) -> ir.Value:
            """s, plus the partial sums of earlier k blocks unless this is the first."""
            return s if first is True else b.select(first, s, b.fadd(s, old()))

        if not partial:
            for r in range(rows):
                row = kb.mul(kb.add(i0, i64(r)), n)
                for q, p in enumerate(ps):
                    for v in range(vecs):
                        at = kb.add(y_base, kb.add(row, kb.add(kb.mul(p, i64(nr)), i64(v * lanes))))
                        ptr = b.bitcast(y.ptr(at), vt.as_pointer())
                        b.store(plus_old(acc[r * w + q * vecs + v], lambda: b.load(ptr, typ=vt, align=4)), ptr,
                                align=4)
            return
        for r in range(rows):
            for v in range(vecs):
                ptr = b.gep(edge, [i64(0), i64(r * nr + v * lanes)], source_etype=edge.type.pointee)
                b.store(acc[r * w + v], b.bitcast(ptr, vt.as_pointer()), align=4)
        j0 = kb.mul(ps[0], i64(nr))
        cols = b.sub(n, j0)
        for r in range(rows):
            row = kb.add(y_base, kb.add(kb.mul(kb.add(i0, i64(r)), n), j0))
            with kb.loop(cols, "ec") as c:
                ptr = b.gep(edge, [i64(0), kb.add(i64(r * nr), c)], source_etype=edge.type.pointee)
                at = kb.add(row, c)
                y.store(at, plus_old(b.load(ptr, typ=F32), lambda: y.load(at)))

    def rows_block(i_lo: ir.Value, mn: ir.Value, k0: ir.Value, kn: ir.Value, first) -> None:
        """Rows [i_lo, i_lo + mn) against every panel."""
        whole = b.udiv(mn, i64(mr)) if not isinstance(mn, ir.Constant) else i64(mn.constant // mr)
        rest_lo = kb.mul(whole, i64(mr))

        def over_panel(p: ir.Value, partial: bool) -> None:
            if block is not None:
                _pack_block(kb, tile, bsrc, panel_ptr(p, k0), kb.mul(p, i64(nr)), k0, kn, n, not partial)
            base = [panel_ptr(p, k0)]
            with kb.loop(whole, "ir") as t:
                tile_at(kb.add(i_lo, kb.mul(t, i64(mr))), mr, [p], base, k0, kn, first, partial)
            # the rows after the whole tiles: one tile of exactly that many rows
            i_rest = kb.add(i_lo, rest_lo)
            if isinstance(mn, ir.Constant):
                if mn.constant % mr:
                    tile_at(i_rest, mn.constant % mr, [p], base, k0, kn, first, partial)
                return
            rest = b.sub(mn, rest_lo)
            for rows in range(1, mr):
                with b.if_then(b.icmp_signed("==", rest, i64(rows))):
                    tile_at(i_rest, rows, [p], base, k0, kn, first, partial)

        # a block with fewer rows than a tile, and a packed B: one row against PG panels at
        # once, so the row's PG * vecs accumulators hide the adds' latency
        pg = ONE_ROW_PANELS
        if block is None and pg > 1:
            few = b.icmp_signed("<", mn, i64(mr)) if not isinstance(mn, ir.Constant) else mn.constant < mr
            groups = b.udiv(full_panels, i64(pg)) if not isinstance(full_panels, ir.Constant) \
                else i64(full_panels.constant // pg)

            def grouped() -> None:
                with kb.loop(groups, "pg") as g:
                    ps = [kb.add(kb.mul(g, i64(pg)), i64(q)) for q in range(pg)]
                    base = [panel_ptr(p, k0) for p in ps]
                    with kb.loop(mn, "ir1") as r:
                        tile_at(kb.add(i_lo, r), 1, ps, base, k0, kn, first, False)
                with kb.loop(full_panels, "p", start=kb.mul(groups, i64(pg))) as p:
                    over_panel(p, False)

            def tiled() -> None:
                with kb.loop(full_panels, "p") as p:
                    over_panel(p, False)

            if few is True:
                grouped()
            elif few is False:
                tiled()
            else:
                with b.if_else(few) as (yes, no):
                    with yes:
                        grouped()
                    with no:
                        tiled()
        else:
            with kb.loop(full_panels, "p") as p:
                over_panel(p, False)
        if ragged is True:
            over_panel(full_panels, True)
        elif ragged is not False:
            with b.if_then(ragged):
                over_panel(full_panels, True)

    if one_block:
        with kb.loop(_ceildiv(kb, m, i64(tile.mc)), "ic") as ic:
            i_lo = kb.mul(ic, i64(tile.mc))
            rows_block(i_lo, smin(kb, i64(tile.mc), b.sub(m, i_lo)), i64(0), k, True)
        return
    # at least one block: with k = 0 it stores the zeros y is
    blocks = _ceildiv(kb, k, i64(tile.kc))
    blocks = b.select(b.icmp_signed("==", blocks, i64(0)), i64(1), blocks)
    with kb.loop(blocks, "pc") as pc:
        k0 = kb.mul(pc, i64(tile.kc))
        kn = smin(kb, i64(tile.kc), b.sub(k, k0))
        first = b.icmp_signed("==", pc, i64(0))
        with kb.loop(_ceildiv(kb, m, i64(tile.mc)), "ic") as ic:
            i_lo = kb.mul(ic, i64(tile.mc))
            rows_block(i_lo, smin(kb, i64(tile.mc), b.sub(m, i_lo)), k0, kn, first)


class _at_entry:
    """Position the builder in the kernel's entry block (for allocas), then back."""

    def __init__(self, kb: KernelBuilder):
        self.kb = kb

    def __enter__(self):
        b = self.kb.b
        self.block = b.block
        entry = self.kb.fn.entry_basic_block
        if entry.instructions:
            b.position_before(entry.instructions[0])
        else:
            b.position_at_end(entry)

    def __exit__(self, *exc):
        self.kb.b.position_at_end(self.block)
