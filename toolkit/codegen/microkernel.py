"""The register tile of :func:`.gemm.gemm`: ``MR`` rows by the ``NR`` columns of one or
more panels, summed over a block of k in vector accumulators and stored into y, through the
epilogue on the last k block (:meth:`Microkernel.tile_at`). The tricks that steer LLVM, V8 and
Cranelift towards the code measured fastest (:func:`.kernel.pinned`, :func:`.kernel.settle`)
live here, and in :func:`.gemm.sparse_row`, the other microkernel; the loops around the tiles
(k blocks, row blocks, panels and where their rows lie) are :mod:`.gemm`'s."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from .kernel import F32, I32, I64, KernelBuilder, Tensor, i64, pinned, settle, splat, to_compute
from .simd import f32_vector, lanes_below, mac, masked_load, masked_store

if TYPE_CHECKING:
    from .gemm import Epilogue, GemmTile, PanelA, View

ROW_ACCUMULATORS = 8  # vector accumulators of a lone row, against several panels at once


# a k block's first or last: True when known at compile time, else a run-time i1 (False: never)
Flag = bool | ir.Value


def _on_last(b: ir.IRBuilder, last: Flag, emit: Callable[[], None]) -> None:
    """``emit`` the code that runs on the last k block: unguarded when it is known to be,
    under a branch on ``last`` when that is a run-time flag."""
    if last is True:
        emit()
    elif last is not False:
        with b.if_then(last):
            emit()


def _plus_old(b: ir.IRBuilder, first: Flag, s: ir.Value, old: Callable[[], ir.Value]) -> ir.Value:
    """s, plus the partial sums of earlier k blocks unless this is the first."""
    return s if first is True else b.select(first, s, b.fadd(s, old()))


@dataclass(frozen=True)
class Microkernel:
    """The register tile of one :func:`.gemm.gemm` call: :meth:`tile_at` sums rows x panels
    over a block of k in registers and stores them into y. The fields are what every tile of
    the call shares."""

    kb: KernelBuilder
    tile: GemmTile
    a: View | PanelA
    a_step: int | None  # elements from one row of a tile to the next in a, when known
    b_stride: ir.Value  # elements from one row k of a panel to the next: NR packed, B's rows in place
    y: Tensor
    y_base: ir.Value
    n: ir.Value
    one_panel: bool  # all of B is one panel or less
    edge: ir.Value | None  # wasm32's partial panel tile, stored here before its columns are copied out
    epilogue: Epilogue | None
    prefetch: Callable[[KernelBuilder, ir.Value, ir.Value], None] | None
    inline_epilogue: bool

    @property
    def wasm(self) -> bool:
        return self.kb.target is not None and self.kb.target.is_wasm

    @property
    def vt(self) -> ir.VectorType:
        return f32_vector(self.tile.lanes)

    def vload(self, ptr: ir.Value, at: ir.Value, inbounds: bool = False) -> ir.Value:
        b = self.kb.b
        return b.load(b.gep(ptr, [at], inbounds=inbounds, source_etype=F32), typ=self.vt, align=4)

    def tile_at(self, i0: ir.Value, rows: int, ps: list[ir.Value], base: list[ir.Value], k0: ir.Value,
                kn: ir.Value, first: Flag, last: Flag, partial: bool, koffs: ir.Value | None = None) -> None:
        """Rows [i0, i0 + rows) x the panels ``ps`` (their blocks at ``base``; natively read in
        place, each row k at its offset in ``koffs``), over k in [k0, k0 + kn): added to y
        unless ``first`` (the first k block), finished by the epilogue if ``last``;
        ``partial``: the last panel, whose columns past n are not stored."""
        kb, b = self.kb, self.kb.b
        acc = self._sums(i0, rows, ps, base, k0, kn, last, koffs)
        if not partial:
            self._store_panels(i0, rows, ps, acc, first, last)
            return
        j0 = kb.mul(ps[0], i64(self.tile.nr))
        cols = b.sub(self.n, j0)
        if not self.wasm:
            self._store_masked(i0, rows, j0, cols, acc, first, last)
        else:
            self._store_edge(i0, rows, j0, cols, acc, first, last)

    def _sums(self, i0: ir.Value, rows: int, ps: list[ir.Value], base: list[ir.Value], k0: ir.Value,
              kn: ir.Value, last: Flag, koffs: ir.Value | None) -> list[ir.Value]:
        """The tile's accumulators after the k loop: ``rows`` x ``len(ps) * vecs`` vectors."""
        kb, b = self.kb, self.kb.b
        w = len(ps) * self.tile.vecs  # vectors per row
        a_rows = [self.a.index(kb, kb.add(i0, i64(r)), k0) for r in range(rows)]
        if self.prefetch is not None:
            _on_last(b, last, lambda: self._fetch(i0, rows, ps))
        # a lone row against several panels on wasm32: each panel's multiply-adds are settled
        # before the next panel's loads (kernel.settle), else Cranelift holds all the panels'
        # vectors at once and spills an accumulator (8 + 8 + 1 values for 16 registers)
        settled = self.wasm and rows == 1 and len(ps) > 1
        # a row against a B of one panel or less (a classifier's 10 columns) sums k in
        # interleaved chains, added together at the end, so the multiply-adds do not wait out
        # each other's latency: 1024 x 10 at batch 1 took 0.9 us in Node as one chain per
        # vector (1024 dependent multiply-adds). Only when the panel is all of B: every column
        # of a row is then summed in the same order, as across panels elsewhere (a softmax
        # over 1000 equal logits of 1e5 came out uneven when its partial panel alone chained)
        chains = ROW_ACCUMULATORS // w if rows == 1 and self.one_panel and not settled and koffs is None else 1
        chains = 1 << (max(chains, 1).bit_length() - 1)  # a power of two, for the pairwise sum
        never = pinned(b, ir.Constant(I32, -1)) if self.wasm and (settled or chains > 1) else None
        k_step = _KStep(self, rows, w, base, koffs, a_rows, settled, never, chains)
        zero = ir.Constant(self.vt, [0.0] * self.tile.lanes)
        # plain: LLVM would unroll the k loop natively (not on wasm32), which cost bert2's
        # native emission 12% more time and measured no faster (gemm_1024 the same; bert2 at
        # one token 0.90 -> 0.84x and cnn n1 1.14 -> 1.07x onnxruntime's time without it)
        if chains == 1:
            return kb.carry(i64(0), kn, [zero] * (rows * w), k_step.step, "k", plain=True)
        whole = b.udiv(kn, i64(chains))
        acc = kb.carry(i64(0), whole, [zero] * (chains * w), k_step.chained, "kq", plain=True)
        while len(acc) > w:  # the halves added pairwise
            half = len(acc) // 2
            acc = [b.fadd(acc[v], acc[half + v]) for v in range(half)]
        return kb.carry(kb.mul(whole, i64(chains)), kn, acc, k_step.step, "k", plain=True)

    def _fetch(self, i0: ir.Value, rows: int, ps: list[ir.Value]) -> None:
        """``prefetch`` for each cache line of the tile's rows in y."""
        kb, nr = self.kb, self.tile.nr
        for r in range(rows):
            for p in ps:
                for c in range(0, nr, 16):  # a 64-byte cache line of floats
                    self.prefetch(kb, kb.add(i0, i64(r)), kb.add(kb.mul(p, i64(nr)), i64(c)))

    def _inline(self, first: Flag, last: Flag) -> bool:
        """Whether the epilogue runs on the accumulators as they are stored: when it is cheap
        and this is the only k block; else :meth:`finish` runs it over the tile read back."""
        return self.inline_epilogue and self.epilogue is not None and first is True and last is True

    def _store_panels(self, i0: ir.Value, rows: int, ps: list[ir.Value], acc: list[ir.Value], first: Flag,
                      last: Flag) -> None:
        """The accumulators of whole panels into y."""
        kb, b = self.kb, self.kb.b
        nr, lanes, vecs = self.tile.nr, self.tile.lanes, self.tile.vecs
        w = len(ps) * vecs
        inline = self._inline(first, last)
        for r in range(rows):
            i = kb.add(i0, i64(r))
            row = kb.mul(i, self.n)
            for q, p in enumerate(ps):
                for v in range(vecs):
                    j = kb.add(kb.mul(p, i64(nr)), i64(v * lanes))
                    ptr = b.bitcast(self.y.ptr(kb.add(self.y_base, kb.add(row, j))), self.vt.as_pointer())
                    s = _plus_old(b, first, acc[r * w + q * vecs + v], lambda: b.load(ptr, typ=self.vt, align=4))
                    b.store(self.epilogue(kb, i, j, s) if inline else s, ptr, align=4)
        if not inline:
            for p in ps:
                self.finish(i0, rows, kb.mul(p, i64(nr)), None, last)

    def _store_masked(self, i0: ir.Value, rows: int, j0: ir.Value, cols: ir.Value, acc: list[ir.Value],
                      first: Flag, last: Flag) -> None:
        # natively, each accumulator stored through its mask of the columns that exist
        # (and the cheap epilogue on it first): element by element, the columns past the
        # last whole panel, with a SiLU epilogue's division, took 65% of an EfficientNet
        # 24 -> 144 channel layer's time at 120 pixels
        kb, b = self.kb, self.kb.b
        lanes, vecs = self.tile.lanes, self.tile.vecs
        inline = self._inline(first, last)
        for r in range(rows):
            i = kb.add(i0, i64(r))
            row = kb.add(self.y_base, kb.mul(i, self.n))
            for v in range(vecs):
                j = kb.add(j0, i64(v * lanes))
                mask = lanes_below(b, b.sub(cols, i64(v * lanes)), lanes)
                ptr = self.y.ptr(kb.add(row, j))
                s = _plus_old(b, first, acc[r * vecs + v], lambda: masked_load(b, ptr, mask, self.vt))
                masked_store(b, self.epilogue(kb, i, j, s, mask) if inline else s, ptr, mask)
        if not inline:
            self.finish(i0, rows, j0, cols, last)

    def _store_edge(self, i0: ir.Value, rows: int, j0: ir.Value, cols: ir.Value, acc: list[ir.Value],
                    first: Flag, last: Flag) -> None:
        """wasm32's partial panel: the tile into ``edge``, then its columns that exist into y."""
        kb, b, edge, y = self.kb, self.kb.b, self.edge, self.y
        nr, lanes, vecs = self.tile.nr, self.tile.lanes, self.tile.vecs
        for r in range(rows):
            for v in range(vecs):
                ptr = b.gep(edge, [i64(0), i64(r * nr + v * lanes)], source_etype=edge.type.pointee)
                b.store(acc[r * vecs + v], b.bitcast(ptr, self.vt.as_pointer()), align=4)
        with kb.loop(i64(rows), "er", plain=True) as r:
            row = kb.add(self.y_base, kb.add(kb.mul(kb.add(i0, r), self.n), j0))
            with kb.loop(cols, "ec", plain=True) as c:
                ptr = b.gep(edge, [i64(0), kb.add(kb.mul(r, i64(nr)), c)], source_etype=edge.type.pointee)
                at = kb.add(row, c)
                y.store(at, _plus_old(b, first, b.load(ptr, typ=F32), lambda: y.load(at)))
        self.finish(i0, rows, j0, cols, last)

    def finish(self, i0: ir.Value, rows: int, j0: ir.Value, cols: ir.Value | None, last: Flag) -> None:
        """The epilogue over the tile just stored (rows from i0, columns from j0; ``cols`` of
        them in the partial panel, else NR), on the last k block. A loop over the tile's
        vectors, read back from L1, rather than unrolled over its registers: the epilogue's
        code (a GELU's erf) is then emitted once per tile shape, not once per accumulator,
        which kept AVX-512's 24-accumulator tiles from multiplying compile time and size."""
        if self.epilogue is None or last is False:
            return
        _on_last(self.kb.b, last, lambda: self._finish_rows(i0, rows, j0, cols))

    def _finish_rows(self, i0: ir.Value, rows: int, j0: ir.Value, cols: ir.Value | None) -> None:
        kb, b, y, epilogue = self.kb, self.kb.b, self.y, self.epilogue
        lanes, vecs, vt = self.tile.lanes, self.tile.vecs, self.vt
        with kb.loop(i64(rows), "er", plain=True) as r:
            i = kb.add(i0, r)
            row = kb.add(self.y_base, kb.mul(i, self.n))
            if cols is None:
                with kb.loop(i64(vecs), "ev", plain=True) as v:
                    j = kb.add(j0, kb.mul(v, i64(lanes)))
                    ptr = b.bitcast(y.ptr(kb.add(row, j)), vt.as_pointer())
                    b.store(epilogue(kb, i, j, b.load(ptr, typ=vt, align=4)), ptr, align=4)
            elif not self.wasm:  # the partial panel's vectors, masked to its columns
                with kb.loop(i64(vecs), "ev", plain=True) as v:
                    j = kb.add(j0, kb.mul(v, i64(lanes)))
                    mask = lanes_below(b, b.sub(cols, kb.mul(v, i64(lanes))), lanes)
                    ptr = y.ptr(kb.add(row, j))
                    masked_store(b, epilogue(kb, i, j, masked_load(b, ptr, mask, vt), mask), ptr, mask)
            else:
                with kb.loop(cols, "ec", plain=True) as c:
                    j = kb.add(j0, c)
                    at = kb.add(row, j)
                    y.store(at, epilogue(kb, i, j, y.load(at)))


@dataclass(frozen=True)
class _KStep:
    """One tile's step of k: the multiply-adds of one row of its panel blocks into the
    accumulators (``w`` vectors a row), in ``chains`` interleaved chains of k if more than one."""

    mk: Microkernel
    rows: int
    w: int
    base: list[ir.Value]  # each panel block's first row
    koffs: ir.Value | None  # in place: row k's offset from ``base``
    a_rows: list[ir.Value]  # each row's first element in a
    settled: bool  # a lone row against several panels on wasm32 (:func:`.kernel.settle`)
    never: ir.Value | None  # settle's opaque -1
    chains: int

    def never_at(self, i: ir.Value) -> ir.Value:
        """settle's branch condition: never true, but LLVM cannot tell (from loop index i)."""
        b = self.mk.kb.b
        return b.icmp_signed("==", b.trunc(i, I32), self.never)

    def step(self, kk: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        mk, rows = self.mk, self.rows
        kb, b, a, lanes, vecs = mk.kb, mk.kb.b, mk.a, mk.tile.lanes, mk.tile.vecs
        # row kk of the panel: packed, NR floats a row; in place, at its offset
        if self.koffs is None:
            at = kb.mul(kk, mk.b_stride)
        else:
            at = b.load(b.gep(self.koffs, [kk], source_etype=I64), typ=I64)
        if mk.wasm:
            # on wasm32 each panel row's vectors lie at constant offsets from a pointer
            # loop strength reduction cannot see, so they stay the loads' offsets
            rows_at = [pinned(b, b.gep(ptr, [at], inbounds=True, source_etype=F32)) for ptr in self.base]
            bv = [] if self.settled else [mk.vload(rp, i64(v * lanes), inbounds=True) for rp in rows_at
                                          for v in range(vecs)]
        else:
            bv = [mk.vload(ptr, kb.add(at, i64(v * lanes))) for ptr in self.base for v in range(vecs)]
        if mk.wasm and rows > 1 and mk.a_step is not None:  # the rows' elements likewise
            pa = pinned(b, a.t.ptr(kb.add(self.a_rows[0], kb.mul(kk, a.cs))))
            xs = [to_compute(b, a.t.dtype, b.load(b.gep(pa, [i64(r * mk.a_step)], inbounds=True,
                                                        source_etype=a.t.elem), typ=a.t.elem))
                  for r in range(rows)]
        else:
            xs = [a.t.load(kb.add(self.a_rows[r], kb.mul(kk, a.cs))) for r in range(rows)]
        acc = list(acc)
        if self.settled:
            s = splat(b, xs[0], lanes)
            for q, rp in enumerate(rows_at):
                mine = range(q * vecs, (q + 1) * vecs)
                for v, at_v in enumerate(mine):
                    acc[at_v] = mac(b, acc[at_v], s, mk.vload(rp, i64(v * lanes), inbounds=True))
                if q < len(rows_at) - 1:  # this panel's sums, and the broadcast (else rebuilt after the join)
                    *acc[mine.start:mine.stop], s = settle(kb, self.never_at(kk), acc[mine.start:mine.stop] + [s])
            return acc
        for r in range(rows):
            s = splat(b, xs[r], lanes)
            for v in range(self.w):
                acc[r * self.w + v] = mac(b, acc[r * self.w + v], s, bv[v])
        return acc

    def chained(self, kq: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        # on wasm32 each chain's multiply-adds settle before the next chain's loads, as a
        # panel group's do: else Cranelift spilled, and a Relu + 1024 x 10 Gemm under
        # wasmtime took 10.4 us against 9.8 as one chain (9.6 settled)
        kb, w = self.mk.kb, self.w
        out = []
        for c in range(self.chains):
            part = self.step(kb.add(kb.mul(kq, i64(self.chains)), i64(c)), acc[c * w:(c + 1) * w])
            if self.mk.wasm and c < self.chains - 1:
                part = settle(kb, self.never_at(kq), part)
            out += part
        return out
