"""3x3 convolutions by Winograd's minimal filtering F(2x2, 3x3): 16 multiplications for a 2x2
block of outputs where the direct sum takes 36, so 2.25 times fewer multiply-adds.

For each 2x2 output tile, the 4x4 input patch ``d`` under it becomes ``V = Bt d B``, each 3x3
filter ``g`` becomes ``U = G g Gt`` (at compile time: the weights are constant), and the
tile's outputs are ``Y = At (sum_c U[c] * V[c]) A``, the product elementwise over the 16
positions. The sums over input channels are 16 matrix products, one per position ``xi`` of
the 4x4 grid: ``M[xi] = U[xi] (out x in) @ V[xi] (in x tiles)``, run by the GEMM microkernel
(:mod:`.gemm`); the transforms are a few additions per element:

    Bt = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    At = [[1, 1, 1, 0], [0, 1, -1, -1]]

(Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015). The constants
are 0, 1 and 1/2, so the transforms are exact in float32 and the products' rounding is that
of a sum of 16 terms instead of 9: within 1e-6 of the direct sum relative to the output's
scale, as the tests check against onnx.reference.

The kernel stages the input once, zero-padded to whole tiles (``2 * th + 2`` rows by ``2 * tw
+ 2`` columns for ``th x tw`` tiles), then works through the tiles of an image in chunks of
whole tile rows whose transformed inputs and products (``16 * channels * tiles`` floats each)
stay in L2 (:func:`chunk_tiles`): the input transform of the chunk, the 16 products, and the
output transform, which adds the bias and runs the fused ops (the epilogue the GEMM
convolution runs, :func:`toolkit.codegen.conv.conv_epilogue`) on whole vectors of output
pixels. Both transforms run on vectors of consecutive tiles of a tile row, the tiles left
over one at a time.

It runs float32 3x3 convolutions of one group with unit strides and dilations, constant
weights and enough input and output channels (:func:`.plan.winograd_route`): fewer leave too little of a
product to pay for the transforms.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32
from . import gemm as G
from .conv import conv_epilogue, conv_inputs, dims_in
from .kernel import F32, I32, KernelBuilder, Tensor, ceildiv, i64, smax, smin, unswitched

CHUNK_FLOATS = 1 << 14  # 16 * channels * tiles of a chunk: 1 MiB of transforms (L2)
# vector widths of the transforms, in tiles: a row of 8 x 8 output tiles (16 x 16 pixels)
# still runs on vectors with AVX-512, whose 16 lanes would leave it to the scalar code
TRANSFORM_LANES = (8, 4)

_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def transform_weights(w: np.ndarray) -> np.ndarray:
    """[M, C, 3, 3] filters as ``U[xi, m, c]``: ``G g Gt`` at position ``xi = 4 * p + q``."""
    u = np.einsum("pi,mcij,qj->pqmc", _G, w.astype(np.float64), _G)
    return np.ascontiguousarray(u.reshape(16, w.shape[0], w.shape[1]).astype(np.float32))


def chunk_tiles(c: int, m: int) -> int:
    """Tiles per chunk: the transforms of a chunk, ``16 * max(c, m) * tiles`` floats, fill
    about :data:`CHUNK_FLOATS`."""
    return max(16, CHUNK_FLOATS // max(c, m))


def scratch_shapes(x_shape: Sequence[Dim], y_shape: Sequence[Dim], c: int, m: int) -> list[tuple[Dim, ...]]:
    """The kernel's scratch tensors: the staged input ``(n, c, 2 * th + 2, 2 * tw + 2)``, then
    a chunk's transformed inputs ``(16, c, tiles)`` and products ``(16, m, tiles)``, where a
    chunk holds whole tile rows: ``tiles = max(tw, chunk_tiles(c, m))``."""
    th, tw = D.ceildiv(y_shape[2], 2), D.ceildiv(y_shape[3], 2)
    tiles = D.maximum(tw, chunk_tiles(c, m))
    return [(x_shape[0], c, 2 * th + 2, 2 * tw + 2), (16, c, tiles), (16, m, tiles)]


def _stage(kb: KernelBuilder, x: Tensor, xs: Tensor, top: ir.Value, left: ir.Value) -> None:
    """xs[n, c, r, q] = x[n, c, r - top, q - left], zero outside x."""
    b = kb.b
    h, w = x.dim(2), x.dim(3)
    hq, wq = xs.dim(2), xs.dim(3)
    zero = ir.Constant(F32, 0.0)
    with kb.loop(kb.mul(x.dim(0), x.dim(1)), "nc") as nc:
        src, dst = kb.mul(nc, kb.mul(h, w)), kb.mul(nc, kb.mul(hq, wq))
        with kb.loop(hq, "r") as r:
            ih = b.sub(r, top)
            row_in = b.icmp_unsigned("<", ih, h)
            row = kb.add(src, kb.mul(b.select(row_in, ih, i64(0)), w))
            with kb.loop(wq, "q") as q:
                iw = b.sub(q, left)
                ok = b.and_(row_in, b.icmp_unsigned("<", iw, w))
                v = x.load(kb.add(row, b.select(ok, iw, i64(0))))
                xs.store(kb.add(dst, kb.add(kb.mul(r, wq), q)), b.select(ok, v, zero))


def _bt(b: ir.IRBuilder, d: list[ir.Value]) -> list[ir.Value]:
    """Bt applied to four values (a column or a row of the patch)."""
    return [b.fsub(d[0], d[2]), b.fadd(d[1], d[2]), b.fsub(d[2], d[1]), b.fsub(d[1], d[3])]


def _at(b: ir.IRBuilder, m: list[ir.Value]) -> list[ir.Value]:
    """At applied to four values."""
    return [b.fadd(b.fadd(m[0], m[1]), m[2]), b.fsub(b.fsub(m[1], m[2]), m[3])]


def _lanes(b: ir.IRBuilder, v: ir.Value, start: int, count: int) -> ir.Value:
    """Lanes start, start + 2, ... (``count`` of them) of vector v."""
    idx = ir.Constant(ir.VectorType(I32, count), [start + 2 * i for i in range(count)])
    return b.shuffle_vector(v, v, idx)


def _interleave(b: ir.IRBuilder, even: ir.Value, odd: ir.Value) -> ir.Value:
    n = even.type.count
    idx = ir.Constant(ir.VectorType(I32, 2 * n), [i // 2 + (n if i % 2 else 0) for i in range(2 * n)])
    return b.shuffle_vector(even, odd, idx)


@dataclass(frozen=True)
class _Tiles:
    """What the transforms of a Winograd kernel read: its tensors and the image's geometry,
    computed once at the kernel's entry."""

    kb: KernelBuilder
    lanes: int  # the target's float32 lanes
    xs: Tensor  # the staged, zero-padded input
    vt: Tensor  # the transformed inputs V of a chunk
    mt: Tensor  # the products M of a chunk
    y: Tensor
    m: ir.Value  # output channels
    c: ir.Value  # input channels
    oh: ir.Value
    ow: ir.Value
    tw: ir.Value  # tiles in a tile row
    wq: ir.Value  # the staged input's row length
    v0: ir.Value  # where this part's chunk of V starts in vt
    m0: ir.Value  # where its chunk of M starts in mt


def _in_groups(g: _Tiles, count: ir.Value, limit: ir.Value, body) -> None:
    """body(tx, width) over tiles [0, count): vectors of :data:`TRANSFORM_LANES` tiles (at
    most the target's lanes) while they stay below ``limit``, then of fewer, then one
    tile at a time."""
    kb, b = g.kb, g.kb.b
    done = i64(0)
    for width in [w for w in TRANSFORM_LANES if w <= g.lanes]:
        groups = b.udiv(b.sub(limit, done), i64(width))
        with kb.loop(groups, f"g{width}") as gi:
            body(kb.add(done, kb.mul(gi, i64(width))), width)
        done = kb.add(done, kb.mul(groups, i64(width)))
    with kb.loop(count, "t1", start=done) as t:
        body(t, 1)


def _load(b: ir.IRBuilder, t: Tensor, at: ir.Value, width: int) -> ir.Value:
    return t.load(at) if width == 1 else b.load(t.ptr(at), typ=ir.VectorType(F32, width), align=4)


def _store(b: ir.IRBuilder, t: Tensor, at: ir.Value, v: ir.Value) -> None:
    if isinstance(v.type, ir.VectorType):
        b.store(v, t.ptr(at), align=4)
    else:
        t.store(at, v)


def _transform_in(g: _Tiles, ci: ir.Value, tiles: ir.Value, top_row: ir.Value, t_row: ir.Value, tx: ir.Value,
                  width: int) -> None:
    """V of ``width`` tiles from tile tx of a tile row of input channel ci (its first input
    row at ``top_row``, its first tile the chunk's ``t_row``)."""
    kb, b, xs = g.kb, g.kb.b, g.xs
    at = kb.add(top_row, kb.mul(i64(2), tx))
    d = []
    for r in range(4):
        row_at = kb.add(at, kb.mul(i64(r), g.wq))
        if width == 1:
            d.append([xs.load(kb.add(row_at, i64(q))) for q in range(4)])
        else:
            lo = _load(b, xs, row_at, 2 * width)
            hi = _load(b, xs, kb.add(row_at, i64(2)), 2 * width)
            d.append([_lanes(b, lo, 0, width), _lanes(b, lo, 1, width),
                      _lanes(b, hi, 0, width), _lanes(b, hi, 1, width)])
    cols = [_bt(b, [d[r][q] for r in range(4)]) for q in range(4)]  # Bt d, by column
    for p in range(4):
        v = _bt(b, [cols[q][p] for q in range(4)])  # (Bt d) B, row p
        for q in range(4):
            _store(b, g.vt, kb.add(g.v0, kb.add(kb.mul(kb.add(kb.mul(i64(4 * p + q), g.c), ci), tiles),
                                                kb.add(t_row, tx))), v[q])


@dataclass(frozen=True)
class _OutRow:
    """A tile row of one output channel in the output transform."""

    oc: ir.Value
    oy: ir.Value  # its first output row
    second_row: ir.Value  # whether its second output row exists
    t_row: ir.Value  # its first tile in the chunk's products
    tiles: ir.Value  # the chunk's tiles
    y_base: ir.Value  # the image's first output
    pixels: ir.Value
    epilogue: Callable | None  # conv_epilogue's bias and fused ops, or None


def _transform_out(g: _Tiles, row: _OutRow, tx: ir.Value, width: int) -> None:
    """Y of ``width`` tiles from tile tx of a tile row, through the epilogue, into y."""
    kb, b = g.kb, g.kb.b
    at = kb.add(row.t_row, tx)
    mm = [_load(b, g.mt, kb.add(g.m0, kb.add(kb.mul(kb.mul(i64(xi), g.m), row.tiles), at)), width)
          for xi in range(16)]
    cols = [_at(b, [mm[4 * p + q] for p in range(4)]) for q in range(4)]  # At M, by column
    out = [_at(b, [cols[q][r] for q in range(4)]) for r in range(2)]  # (At M) A, row r
    ox = kb.mul(i64(2), tx)
    for r in range(2):
        if r == 0:
            _put_row(g, row, r, out[r], ox, width)
        else:
            with b.if_then(row.second_row):
                _put_row(g, row, r, out[r], ox, width)


def _put_row(g: _Tiles, row: _OutRow, r: int, out: list[ir.Value], ox: ir.Value, width: int) -> None:
    """Output row r of the tiles (``out``: its two columns), the second column only where it
    exists when one tile at a time."""
    kb, b, epilogue = g.kb, g.kb.b, row.epilogue
    j = kb.add(kb.mul(kb.add(row.oy, i64(r)), g.ow), ox)
    if width > 1:
        v = _interleave(b, out[0], out[1])
        _store(b, g.y, kb.add(row.y_base, kb.add(kb.mul(row.oc, row.pixels), j)),
               epilogue(kb, row.oc, j, v) if epilogue else v)
        return
    for col in range(2):
        jj = kb.add(j, i64(col))
        v = epilogue(kb, row.oc, jj, out[col]) if epilogue else out[col]
        if col == 0:
            _store(b, g.y, kb.add(row.y_base, kb.add(kb.mul(row.oc, row.pixels), jj)), v)
        else:
            with b.if_then(b.icmp_signed("<", kb.add(ox, i64(1)), g.ow)):
                _store(b, g.y, kb.add(row.y_base, kb.add(kb.mul(row.oc, row.pixels), jj)), v)


@unswitched
def build_conv2d_winograd(kb: KernelBuilder, params: tuple, types: Sequence) -> None:
    """y = post(conv(x, w) + bias) for a 3x3 convolution with unit strides by F(2x2, 3x3).
    ``params``: (window, GEMM tile, bias, post). Tensors: x, U (:func:`transform_weights`),
    [bias], the post ops' operands, the three scratch tensors of :func:`scratch_shapes`, y.
    Scalars: the symbolic pads. Across threads, each part takes its share of every image's
    tile rows and the matching share of the two scratch tensors (so at most as many parts as
    the scratch holds tile rows); every part stages the input alike, the same values to the
    same places. A tile's products are the same whatever the chunk it falls in."""
    win, tile, bias, post = params
    b = kb.b
    x, u, bt, operands, k = conv_inputs(kb, types, bias, post)
    xs, vt, mt = (kb.tensor(k + e, FLOAT32, types[k + e][1]) for e in range(3))
    y = kb.tensor(k + 3, FLOAT32, types[-1][1])
    top, left, _, _ = dims_in(kb, win.pads)
    _stage(kb, x, xs, top, left)

    m, c = u.dim(1), u.dim(2)
    oh, ow = y.dim(2), y.dim(3)
    pixels = kb.mul(oh, ow)
    th, tw = ceildiv(kb, oh, i64(2)), ceildiv(kb, ow, i64(2))
    wq = xs.dim(3)
    plane = kb.mul(xs.dim(2), wq)
    # across threads, each part takes its share of the tile rows and of the scratch, which
    # holds at least one tile row per part (so there are at most as many parts as it holds)
    cap = vt.dim(2)  # tiles of a chunk the scratch holds
    part, parts = kb.part(most=b.udiv(cap, smax(kb, tw, i64(1))))
    width = b.udiv(cap, parts)  # this part's tiles of scratch
    row_lo, row_hi = kb.portion(th, part, parts)
    # whole tile rows per chunk: as many as the part's scratch holds (at least one; it holds
    # one row), and never 0, which would divide by zero when the output is empty
    rows_per = smax(kb, i64(1), smin(kb, th, b.udiv(width, smax(kb, tw, i64(1)))))
    full_pairs = b.udiv(ow, i64(2))  # tiles whose two output columns both exist
    v0, m0 = (kb.mul(part, kb.mul(kb.mul(i64(16), ch), width)) for ch in (c, m))
    g = _Tiles(kb, tile.lanes, xs, vt, mt, y, m, c, oh, ow, tw, wq, v0, m0)

    with kb.loop(x.dim(0), "n") as n:
        image = kb.mul(n, kb.mul(c, plane))
        y_base = kb.mul(n, kb.mul(m, pixels))
        epilogue = conv_epilogue(bt, post, operands, pixels, y_base)
        with kb.loop(ceildiv(kb, b.sub(row_hi, row_lo), rows_per), "chunk") as ch:
            ty0 = kb.add(row_lo, kb.mul(ch, rows_per))
            rows = smin(kb, rows_per, b.sub(row_hi, ty0))
            tiles = kb.mul(rows, tw)

            # the input transform: V[xi, c, t] for the chunk's tiles t
            with kb.loop(c, "ci") as ci:
                with kb.loop(rows, "ty") as ty:
                    top_row = kb.add(image, kb.add(kb.mul(ci, plane), kb.mul(kb.mul(i64(2), kb.add(ty0, ty)), wq)))
                    t_row = kb.mul(ty, tw)
                    _in_groups(g, tw, tw, lambda tx, width: _transform_in(g, ci, tiles, top_row, t_row, tx, width))

            # the 16 products M[xi] = U[xi] @ V[xi]: [m, c] @ [c, tiles]
            with kb.loop(i64(16), "xi") as xi:
                a = G.View(u, kb.mul(xi, kb.mul(m, c)), c, i64(1))
                src = G.View(vt, kb.add(v0, kb.mul(xi, kb.mul(c, tiles))), tiles, i64(1))
                G.gemm(kb, tile, a, src, mt, kb.add(m0, kb.mul(xi, kb.mul(m, tiles))), m, tiles, c)

            # the output transform, the bias and the fused ops
            with kb.loop(m, "oc") as oc:
                with kb.loop(rows, "ty") as ty:
                    oy = kb.mul(i64(2), kb.add(ty0, ty))
                    second_row = b.icmp_signed("<", kb.add(oy, i64(1)), oh)
                    row = _OutRow(oc, oy, second_row, kb.add(kb.mul(oc, tiles), kb.mul(ty, tw)), tiles, y_base,
                                  pixels, epilogue)
                    _in_groups(g, tw, full_pairs, lambda tx, width: _transform_out(g, row, tx, width))
