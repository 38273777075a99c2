"""Matrix multiplication kernels: MatMul (numpy semantics, batched with broadcasting) and
Gemm.

float32 products with a 2-D (or batched) B run through the GEMM microkernel of
:mod:`.gemm` (:func:`build_matmul_f32`, :func:`build_gemm_f32`). The loops below serve the
other dtypes, a 1-D B (a matrix-vector product) and the recurrent layers' products
(:mod:`.rnn`), which run once per time step and are too small to pack B for the microkernel:

Both reduce to one strided product ``y[i, j] = alpha * sum_k a[i, k] * b[k, j] (+ beta *
c[i, j])`` over views with per-axis strides (0 on broadcast axes). The loop order keeps the
innermost loop contiguous: ``i, k, j`` (a row of y updated from a row of b) when b's rows
are contiguous, and ``i, j, k`` dot products with reassociable sums when b has one column.
In float32 with b's rows contiguous, each row of y is summed over k in registers a few
vectors at a time (:func:`_vector_rows`) instead of updated in memory at every k.

Gemm's transB makes b's rows strided. Measured on wasm32 (wasmtime) for [64, 784] x
[1024, 784]^T, ``i, k, j`` over a transposed copy of b beats ``i, j, k`` dot products by
about 25% (the dot products' single accumulator chain is latency-bound), so a constant b
is transposed at compile time and any other b is copied transposed into a scratch buffer
first (the copy costs about 5% of the product).
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from . import fused as F
from . import gemm as G
from .gemm import View as Mat
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, DType
from .kernel import F32, KernelBuilder, Tensor, fast, i64, smin, splat, unswitched
from .scalar import Scalar
from .simd import mac

TensorType = tuple[DType, Sequence[Dim]]


def _is_one(v: ir.Value) -> bool:
    return isinstance(v, ir.Constant) and v.constant == 1


def _bcast_stride(kb: KernelBuilder, t: Tensor, axis: int, stride: ir.Value) -> ir.Value:
    """``stride`` for axis ``axis`` of ``t``, or 0 where that dim is 1 (broadcast)."""
    d = t.shape[axis]
    if isinstance(d, int):
        return i64(0) if d == 1 else stride
    return kb.b.select(kb.b.icmp_signed("==", t.dim(axis), i64(1)), i64(0), stride)


def matmul(kb: KernelBuilder, dt: DType, a: Mat, b: Mat, y: Mat, m: ir.Value, n: ir.Value, k: ir.Value,
           alpha: float = 1.0, c: Mat | None = None, beta: float = 1.0) -> None:
    """``y = alpha * a @ b + beta * c`` for an [m, k] x [k, n] product (c optional)."""
    bld = kb.b
    sc = Scalar(bld, dt)
    f = sc.is_float
    zero = sc.const(0)
    add, mul = sc.add, sc.mul

    def scaled(v: ir.Value, s: float) -> ir.Value:
        return v if s == 1.0 else sc.mul(v, sc.const(s))

    def plus_c(v: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
        return v if c is None else add(v, scaled(c.load(kb, i, j), beta))

    def dot_at(i: ir.Value, j: ir.Value) -> None:
        """y[i, j] as one dot product over k, a reassociable sum."""
        def dot(s: ir.Value, kk: ir.Value) -> ir.Value:
            p = mul(a.load(kb, i, kk), b.load(kb, kk, j))
            return fast(bld.fadd(s, fast(p))) if f else bld.add(s, p)

        acc = kb.accumulate(k, zero, dot, name="k")
        y.store(kb, i, j, plus_c(scaled(acc, alpha), i, j))

    if _is_one(b.rs) or dt.is_narrow_float:
        # b's column is contiguous: per (i, j) a dot product, vectorized as a reassociated sum.
        # Narrow floats take this path always: it sums in float32 and rounds once, where the
        # other rounds y at every step of k
        with kb.loop(m, "i") as i:
            with kb.loop(n, "j") as j:
                dot_at(i, j)
        return
    if _vector_rows(kb, dt, a, b, y, m, n, k, alpha, c, beta, dot_at):
        return
    with kb.loop(m, "i") as i:
        with kb.loop(n, "j") as j:
            y.store(kb, i, j, plus_c(zero, i, j))
        with kb.loop(k, "k") as kk:
            av = scaled(a.load(kb, i, kk), alpha)
            with kb.loop(n, "j") as j:
                y.store(kb, i, j, add(y.load(kb, i, j), mul(av, b.load(kb, kk, j))))


ROW_CHUNK_VECTORS = 4  # vectors of a row of y summed over k at once in registers


def _vector_rows(kb: KernelBuilder, dt: DType, a: Mat, b: Mat, y: Mat, m: ir.Value, n: ir.Value, k: ir.Value,
                 alpha: float, c: Mat | None, beta: float, dot_at: Callable[[ir.Value, ir.Value], None]) -> bool:
    """float32 with b's, y's (and c's) rows contiguous: each row of y by chunks of
    ROW_CHUNK_VECTORS vectors, then single vectors, each summed over all of k in registers
    with b's rows read in place, then its last columns one at a time (``dot_at(i, j)``, the
    scalar path's dot product). Returns False (nothing
    emitted) for other products. The ``i, k, j`` loops read and wrote y's row at every k: a
    recurrent layer's step (batch x hidden by hidden x gates * hidden, run once per time step,
    too small to pack b for the GEMM microkernel) spent most of its time there."""
    if dt != FLOAT32 or kb.target is None or not (_is_one(b.cs) and _is_one(y.cs)):
        return False
    if c is not None and not (_is_one(c.cs) or (isinstance(c.cs, ir.Constant) and c.cs.constant == 0)):
        return False
    bld = kb.b
    lanes = kb.target.f32_lanes
    vt = ir.VectorType(F32, lanes)
    zero = ir.Constant(vt, [0.0] * lanes)

    def vptr(v: Mat, i: ir.Value, j: ir.Value) -> ir.Value:
        return bld.bitcast(v.t.ptr(v.index(kb, i, j)), vt.as_pointer())

    def columns(i: ir.Value, j0: ir.Value, vecs: int) -> None:
        """y[i, j0 : j0 + vecs * lanes]."""
        def step(kk: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            x = a.load(kb, i, kk)
            s = splat(bld, x if alpha == 1.0 else fast(bld.fmul(x, ir.Constant(F32, alpha))), lanes)
            return [mac(bld, acc[v], s, bld.load(vptr(b, kk, kb.add(j0, i64(v * lanes))), typ=vt, align=4))
                    for v in range(vecs)]

        acc = kb.carry(i64(0), k, [zero] * vecs, step, "k", plain=True)
        for v in range(vecs):
            j = kb.add(j0, i64(v * lanes))
            out = acc[v]
            if c is not None:
                cv = bld.load(vptr(c, i, j), typ=vt, align=4) if _is_one(c.cs) else splat(bld, c.load(kb, i, j), lanes)
                out = bld.fadd(out, cv if beta == 1.0 else bld.fmul(cv, ir.Constant(vt, [beta] * lanes)))
            bld.store(out, vptr(y, i, j), align=4)

    chunk = ROW_CHUNK_VECTORS * lanes
    chunks = bld.udiv(n, i64(chunk))
    vec_lo = kb.mul(chunks, i64(chunk))
    vecs = bld.udiv(bld.sub(n, vec_lo), i64(lanes))
    tail_lo = kb.add(vec_lo, kb.mul(vecs, i64(lanes)))
    with kb.loop(m, "i") as i:
        with kb.loop(chunks, "jc") as jc:
            columns(i, kb.mul(jc, i64(chunk)), ROW_CHUNK_VECTORS)
        with kb.loop(vecs, "jv") as jv:
            columns(i, kb.add(vec_lo, kb.mul(jv, i64(lanes))), 1)
        with kb.loop(bld.sub(n, tail_lo), "jt") as jt:
            dot_at(i, kb.add(tail_lo, jt))
    return True


def build_matmul(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """numpy ``matmul``: 1-D operands act as a row (a) or a column (b), and the batch dims
    broadcast. Tensors: a, b, y."""
    (dt, a_shape), (_, b_shape), (_, out_shape) = types
    a = kb.tensor(0, dt, a_shape)
    b = kb.tensor(1, dt, b_shape)
    y = kb.tensor(2, dt, out_shape)
    ra, rb = len(a_shape), len(b_shape)
    k = a.dim(ra - 1)
    m = a.dim(ra - 2) if ra >= 2 else i64(1)
    n = b.dim(rb - 1) if rb >= 2 else i64(1)
    nb = len(out_shape) - (ra >= 2) - (rb >= 2)
    ys = y.strides()
    steps = [_batch_strides(kb, a, nb), _batch_strides(kb, b, nb), ys[:nb]]
    extents = [y.dim(axis) for axis in range(nb)]

    def level(axis: int, offs: list[ir.Value]) -> None:
        if axis == nb:
            matmul(kb, dt, Mat(a, offs[0], k, i64(1)), Mat(b, offs[1], n, i64(1)),
                   Mat(y, offs[2], n, i64(1)), m, n, k)
            return
        with kb.loop(extents[axis], f"b{axis}") as i:
            level(axis + 1, [kb.add(off, kb.mul(i, s[axis])) for off, s in zip(offs, steps)])

    level(0, [i64(0)] * 3)


def _batch_strides(kb: KernelBuilder, t: Tensor, nb: int) -> list[ir.Value]:
    """Strides of ``t``'s batch dims (all but its last two) right-aligned to ``nb`` output
    batch dims: 0 where ``t`` lacks the dim or broadcasts it."""
    own = t.strides()
    tb = max(t.rank - 2, 0)
    return [i64(0) if ax < nb - tb else _bcast_stride(kb, t, ax - (nb - tb), own[ax - (nb - tb)])
            for ax in range(nb)]


def build_gemm(kb: KernelBuilder, params, types: Sequence[TensorType]) -> None:
    """ONNX Gemm on 2-D float operands; c (optional) broadcasts to [M, N]. ``params``: (the
    Gemm op: alpha, beta, trans_a, trans_b; whether c is given). Tensors: a, b, [c],
    [scratch if trans_b], y. With ``trans_b``, b is first copied transposed into the [K, N]
    scratch buffer, so the product runs with contiguous rows of b (a constant b is
    transposed at compile time instead, and arrives here with ``trans_b`` off)."""
    op, has_c = params
    trans_a, trans_b, alpha, beta = op.trans_a, op.trans_b, op.alpha, op.beta
    dt = types[0][0]
    args = iter(enumerate(types))
    a = kb.tensor(*_flat(next(args)))
    b = kb.tensor(*_flat(next(args)))
    c = kb.tensor(*_flat(next(args))) if has_c else None
    scratch = kb.tensor(*_flat(next(args))) if trans_b else None
    y = kb.tensor(*_flat(next(args)))
    m, k = (a.dim(1), a.dim(0)) if trans_a else (a.dim(0), a.dim(1))
    n = b.dim(0) if trans_b else b.dim(1)
    one = i64(1)
    am = Mat(a, i64(0), one, m) if trans_a else Mat(a, i64(0), k, one)
    bm = Mat(b, i64(0), one, k) if trans_b else Mat(b, i64(0), n, one)
    if scratch is not None:
        staged = Mat(scratch, i64(0), n, one)
        # reads stride through b's rows, but a column of cache lines stays cached from one
        # k to the next; measured as fast as a tiled copy
        with kb.loop(k, "k") as kk:
            with kb.loop(n, "j") as j:
                staged.store(kb, kk, j, bm.load(kb, kk, j))
        bm = staged
    matmul(kb, dt, am, bm, Mat(y, i64(0), n, one), m, n, k, alpha,
           None if c is None else _broadcast_mat(kb, c), beta)


def _flat(arg: tuple[int, TensorType]) -> tuple:
    index, (dt, shape) = arg
    return index, dt, shape


def _broadcast_mat(kb: KernelBuilder, c: Tensor) -> Mat:
    """A tensor of rank <= 2 viewed as [M, N]: rows and columns step by 0 where it has no
    such dim or its dim is 1."""
    strides = c.strides()
    return Mat(c, i64(0), _bcast_stride(kb, c, 0, strides[0]) if c.rank == 2 else i64(0),
               _bcast_stride(kb, c, c.rank - 1, i64(1)) if c.rank >= 1 else i64(0))



# ----------------------------------------------------------------------------- float32 GEMM


def _static_dims(bt: Tensor) -> tuple[int, int]:
    """(n, k) of a constant [K, N] B."""
    return bt.dim(1).constant, bt.dim(0).constant


def _lone_or_gemm(kb: KernelBuilder, m: ir.Value, lone: Callable[[], None], gemm: Callable[[], None]) -> None:
    """``lone()`` when the product has one row (known now or at run time), else ``gemm()``."""
    if isinstance(m, ir.Constant):
        lone() if m.constant == 1 else gemm()
        return
    with kb.b.if_else(kb.b.icmp_signed("==", m, i64(1))) as (yes, no):
        with yes:
            lone()
        with no:
            gemm()


def _unsplit(kb: KernelBuilder, body: Callable[[], None]) -> None:
    """``body()`` in the kernel's first part only: a path that does not split its work."""
    with kb.first_part():
        body()


@unswitched
def build_matmul_f32(kb: KernelBuilder, params, types: Sequence[TensorType]) -> None:
    """float32 MatMul through the GEMM microkernel (:mod:`.gemm`), b of rank >= 2.
    ``params``: (the tile, how a constant b arrives: "panels" (packed [P, K, NR]), "rows"
    (row-major [K, N], for :func:`.gemm.sparse_row`) or "" (b is no constant), the fused
    ops). Tensors: a, b, the fused ops' operands, [with "rows": the int32 [K] scratch of
    the nonzero rows], y. With a constant b (which has no batch dims), a's batch dims and
    rows are one [batch * M, K] matrix."""
    tile, b_form, post = params
    operands = [kb.tensor(2 + e, FLOAT32, types[2 + e][1]) for e in range(F.post_operands(post))]

    def epilogue_at(y_base: ir.Value, n: ir.Value):
        if not post:
            return None
        return lambda kb, i, j, v, mask=None: G.apply_post(kb, post, v, operands, i, j,
                                                           kb.add(y_base, kb.add(kb.mul(i, n), j)), mask)

    (_, a_shape), (_, b_shape) = types[0], types[1]
    out_shape = types[-1][1]
    a = kb.tensor(0, FLOAT32, a_shape)
    bt = kb.tensor(1, FLOAT32, b_shape)
    y = kb.tensor(len(types) - 1, FLOAT32, out_shape)
    ra = len(a_shape)
    k = a.dim(ra - 1)
    if b_form:
        m = a.numel(0, ra - 1)
        n = y.dim(len(out_shape) - 1)
        av = G.View(a, i64(0), k, i64(1))
        if b_form == "panels":
            G.gemm(kb, tile, av, G.Packed(bt, i64(0)), y, i64(0), m, n, k, epilogue_at(i64(0), n),
                   inline_epilogue=F.cheap(post), split=True)
            return
        rows = kb.tensor(len(types) - 2, *types[-2])
        _lone_or_gemm(kb, m, lambda: _unsplit(kb, lambda: G.sparse_row(kb, tile, av, bt, y, *_static_dims(bt), rows,
                                                                       epilogue_at(i64(0), n))),
                      lambda: G.gemm(kb, tile, av, G.View(bt, i64(0), n, i64(1), in_place=True), y, i64(0), m, n, k,
                                     epilogue_at(i64(0), n), inline_epilogue=F.cheap(post), split=True))
        return
    rb = len(b_shape)
    m = a.dim(ra - 2) if ra >= 2 else i64(1)
    n = bt.dim(rb - 1)
    nb = len(out_shape) - (ra >= 2) - 1
    steps = [_batch_strides(kb, a, nb), _batch_strides(kb, bt, nb), y.strides()[:nb]]
    extents = [y.dim(axis) for axis in range(nb)]

    def level(axis: int, offs: list[ir.Value]) -> None:
        if axis == nb:
            G.gemm(kb, tile, G.View(a, offs[0], k, i64(1)), G.View(bt, offs[1], n, i64(1)), y, offs[2], m, n, k,
                   epilogue_at(offs[2], n), inline_epilogue=F.cheap(post), split=True)
            return
        with kb.loop(extents[axis], f"b{axis}") as i:
            level(axis + 1, [kb.add(off, kb.mul(i, s[axis])) for off, s in zip(offs, steps)])

    level(0, [i64(0)] * 3)


@unswitched
def build_gemm_f32(kb: KernelBuilder, params, types: Sequence[TensorType]) -> None:
    """float32 Gemm through the GEMM microkernel. ``params``: (the Gemm op, whether c is
    given, the tile, how a constant b arrives: as for :func:`build_matmul_f32`). Tensors:
    a, b, [c], the fused ops' operands, [the nonzero rows' scratch], y. alpha, beta * c and
    the op's fused ops are the kernel's epilogue, applied as each element is stored."""
    op, has_c, tile, b_form = params
    args = iter(enumerate(types))
    a = kb.tensor(*_flat(next(args)))
    bt = kb.tensor(*_flat(next(args)))
    c = kb.tensor(*_flat(next(args))) if has_c else None
    operands = [kb.tensor(*_flat(next(args))) for _ in range(F.post_operands(op.post))]
    rows = kb.tensor(*_flat(next(args))) if b_form == "rows" else None
    y = kb.tensor(*_flat(next(args)))
    m, n = y.dim(0), y.dim(1)
    k = a.dim(0) if op.trans_a else a.dim(1)
    av = G.View(a, i64(0), i64(1), m) if op.trans_a else G.View(a, i64(0), k, i64(1))
    if b_form == "panels":
        bsrc = G.Packed(bt, i64(0))
    elif b_form == "rows":
        bsrc = G.View(bt, i64(0), n, i64(1), in_place=True)
    else:
        bsrc = G.View(bt, i64(0), i64(1), k) if op.trans_b else G.View(bt, i64(0), n, i64(1))
    cm = None if c is None else _broadcast_mat(kb, c)

    def c_at(kb: KernelBuilder, i: ir.Value, j: ir.Value, like: ir.Value, mask: ir.Value | None) -> ir.Value:
        """C at (i, j..), as ``like``: a vector load when C's columns are contiguous, a splat
        when C has one column, else lane by lane (with ``mask``, the lanes past y's last
        column read its last column's)."""
        bld = kb.b
        if not isinstance(like.type, ir.VectorType):
            return cm.load(kb, i, j)
        if isinstance(cm.cs, ir.Constant) and cm.cs.constant == 1:
            return G.load_like(kb, cm.t, cm.index(kb, i, j), like, mask)
        if isinstance(cm.cs, ir.Constant) and cm.cs.constant == 0:
            return F.splat_like(bld, cm.load(kb, i, j), like)
        out = ir.Constant(like.type, None)
        for lane in range(like.type.count):
            col = kb.add(j, i64(lane))
            if mask is not None:
                col = smin(kb, col, bld.sub(n, i64(1)))
            out = bld.insert_element(out, cm.load(kb, i, col), ir.Constant(ir.IntType(32), lane))
        return out

    def epilogue(kb: KernelBuilder, i: ir.Value, j: ir.Value, v: ir.Value, mask: ir.Value | None = None) -> ir.Value:
        bld = kb.b
        if op.alpha != 1.0:
            v = fast(bld.fmul(v, F.splat_like(bld, ir.Constant(F32, op.alpha), v)))
        if cm is not None:
            cv = c_at(kb, i, j, v, mask)
            if op.beta != 1.0:
                cv = fast(bld.fmul(cv, F.splat_like(bld, ir.Constant(F32, op.beta), v)))
            v = fast(bld.fadd(v, cv))
        return G.apply_post(kb, op.post, v, operands, i, j, kb.add(kb.mul(i, n), j), mask)

    # C read as whole vectors or a splat, not lane by lane, is cheap enough for the registers
    vector_c = cm is None or (isinstance(cm.cs, ir.Constant) and cm.cs.constant in (0, 1))
    used = epilogue if op.alpha != 1.0 or cm is not None or op.post else None

    def gemm() -> None:
        G.gemm(kb, tile, av, bsrc, y, i64(0), m, n, k, used, inline_epilogue=vector_c and F.cheap(op.post), split=True)

    if rows is None:
        gemm()
    else:
        _lone_or_gemm(kb, m, lambda: _unsplit(kb, lambda: G.sparse_row(kb, tile, av, bt, y, *_static_dims(bt), rows,
                                                                       used)), gemm)
