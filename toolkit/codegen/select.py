"""Kernels of the selecting ops: Unique, Compress, TopK, NonMaxSuppression, OneHot.

Each op whose output size depends on data has a counting kernel (``outputs`` it writes are
scratch buffers it leaves for the filling kernel; the size goes back through scalar 0) and
a filling kernel. Sorting is a stable bottom-up merge sort of an int64 index array with a
scratch array of the same length (:func:`merge_sort`), with the keys beside the indices
when they are single values: O(n log n), no recursion, no libc. TopK keeps a heap of the
k best instead: O(n log k).

Orders are total: a float NaN sorts above every number and equals every NaN, as in
numpy's ``sort``/``unique`` and onnx.reference's TopK.
"""
from __future__ import annotations

from typing import Callable, Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .kernel import (F32, I64, STATUS_INVALID_INPUT, KernelBuilder, Tensor, fptosi_sat, i64, intrinsic, to_compute,
                     writes_scalars)
from .fused import splat_like
from .scalar import Scalar

TensorType = tuple[DType, Sequence[Dim]]
I1 = ir.IntType(1)
Before = Callable[[ir.Value, ir.Value], ir.Value]  # (a, b) -> i1: a comes before b


# ----------------------------------------------------------------------------- building blocks


def _var(kb: KernelBuilder, init: ir.Value) -> ir.Value:
    """A stack variable holding ``init``, allocated in the entry block (so it is promoted to a
    register and never grows the stack inside a loop)."""
    b = kb.b
    here = b.block
    entry = kb.fn.entry_basic_block
    b.position_at_start(entry)
    ptr = b.alloca(init.type)
    b.position_at_end(here)
    b.store(init, ptr)
    return ptr


def _at(b: ir.IRBuilder, base: ir.Value, i: ir.Value) -> ir.Value:
    return b.gep(base, [i], source_etype=I64)


def _ld(b: ir.IRBuilder, base: ir.Value, i: ir.Value) -> ir.Value:
    """Element ``i`` of an int64 array."""
    return b.load(_at(b, base, i), typ=I64)


def _st(b: ir.IRBuilder, base: ir.Value, i: ir.Value, v: ir.Value) -> None:
    b.store(v, _at(b, base, i))


def find_first(kb: KernelBuilder, start: ir.Value, stop: ir.Value, pred: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """The first ``i`` in ``[start, stop)`` where ``pred(i)`` holds, or ``stop``: a loop that
    exits early (a flat scan, so it does not poll the cancel flag)."""
    b = kb.b
    pre = b.block
    head = kb.fn.append_basic_block("find.head")
    body = kb.fn.append_basic_block("find.body")
    done = kb.fn.append_basic_block("find.done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name="find")
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    hit = pred(i)
    i.add_incoming(b.add(i, i64(1)), b.block)
    b.cbranch(hit, done, head)
    b.position_at_end(done)
    return i  # head dominates done: on both exits i is the answer (stop, or the hit)


def merge_sort(kb: KernelBuilder, arrays: Sequence[tuple[ir.Value, ir.Value, ir.Type]], n: ir.Value,
               before: Callable[[list[ir.Value], list[ir.Value]], ir.Value]) -> None:
    """Sort ``n`` records stably by ``before`` (a strict order on records): record ``r`` is
    element ``r`` of each array in ``arrays`` (base, scratch of the same length, element
    type), all moved together, so a key stored beside an index is compared without reading
    memory at random. Bottom-up passes of width 1, 2, 4, ... alternate between the arrays
    and their scratch; an odd number of passes ends with a copy back."""
    b = kb.b
    small = b.icmp_signed("<=", n, i64(1))
    # ceil(log2(n)) passes; n - 1 is never 0 when n > 1
    clz = intrinsic(b, "llvm.ctlz", b.select(small, i64(1), b.sub(n, i64(1))), ir.Constant(I1, 0))
    passes = b.select(small, i64(0), b.sub(i64(64), clz))

    def elem(base: ir.Value, t: ir.Type, i: ir.Value) -> ir.Value:
        return b.gep(base, [i], source_etype=t)

    with kb.loop(passes, "pass") as ps:
        width = b.shl(i64(1), ps)
        span = b.shl(width, i64(1))
        odd = b.trunc(ps, I1)
        pairs = b.lshr(b.add(n, b.sub(span, i64(1))), b.add(ps, i64(1)))
        with kb.loop(pairs, "pair") as pr:
            lo = b.mul(pr, span)
            mid = intrinsic(b, "llvm.smin", b.add(lo, width), n)
            hi = intrinsic(b, "llvm.smin", b.add(lo, span), n)

            def step(k: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
                i, j = vals
                left_ok = b.icmp_signed("<", i, mid)
                right_ok = b.icmp_signed("<", j, hi)
                # an exhausted side reads a valid record (lo) whose value is not used
                ii, jj = b.select(left_ok, i, lo), b.select(right_ok, j, lo)
                srcs = [(b.select(odd, tmp, a), b.select(odd, a, tmp), t) for a, tmp, t in arrays]
                ri = [b.load(elem(src, t, ii), typ=t) for src, _, t in srcs]
                rj = [b.load(elem(src, t, jj), typ=t) for src, _, t in srcs]
                right = b.and_(right_ok, b.or_(b.not_(left_ok), before(rj, ri)))
                for (_, dst, t), vi, vj in zip(srcs, ri, rj):
                    b.store(b.select(right, vj, vi), elem(dst, t, k))
                return [b.add(i, b.zext(b.not_(right), I64)), b.add(j, b.zext(right, I64))]

            kb.carry(lo, hi, [lo, mid], step, name="merge")
    with b.if_then(b.trunc(passes, I1)):
        with kb.loop(n, "back") as k:
            for a, tmp, t in arrays:
                b.store(b.load(elem(tmp, t, k), typ=t), elem(a, t, k))


def _is_nan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", x, x)


def less(b: ir.IRBuilder, dt: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """``x < y`` in the total order (NaN above every number)."""
    if dt.is_float:
        return b.or_(b.fcmp_ordered("<", x, y), b.and_(b.not_(_is_nan(b, x)), _is_nan(b, y)))
    return Scalar(b, dt).cmp("<", x, y)


def equal(b: ir.IRBuilder, dt: DType, x: ir.Value, y: ir.Value) -> ir.Value:
    """``x == y`` in the total order (NaN equals NaN; -0.0 equals 0.0)."""
    if dt.is_float:
        return b.or_(b.fcmp_ordered("==", x, y), b.and_(_is_nan(b, x), _is_nan(b, y)))
    return b.icmp_unsigned("==", x, y)


def _to_i64(b: ir.IRBuilder, dt: DType, v: ir.Value) -> ir.Value:
    """An element as int64: floats truncate toward zero (saturating, NaN is 0)."""
    if dt.is_float:
        return fptosi_sat(b, v, I64)
    if v.type.width == 64:
        return v
    return b.sext(v, I64) if dt.is_signed else b.zext(v, I64)


def _rows(x: Tensor, axis: int | None) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(outer, n, inner): ``x`` as ``n`` slices along ``axis`` (the flattened elements when
    ``axis`` is None)."""
    if axis is None:
        return i64(1), x.numel(), i64(1)
    return x.numel(0, axis), x.dim(axis), x.numel(axis + 1)


def _copy_slice(kb: KernelBuilder, src: Tensor, s: ir.Value, n: ir.Value, dst: Tensor, d: ir.Value, m: ir.Value,
                outer: ir.Value, inner: ir.Value) -> None:
    """dst[o, d, p] = src[o, s, p] for the (outer, n, inner) view of src and (outer, m, inner)
    of dst."""
    b = kb.b
    if all(isinstance(v, ir.Constant) and v.constant == 1 for v in (outer, inner)):
        dst.store_raw(d, src.load_raw(s))  # one element: no loops (whose bodies would poll)
        return
    with kb.loop(outer, "o") as o:
        sbase = b.mul(b.add(b.mul(o, n), s), inner)
        dbase = b.mul(b.add(b.mul(o, m), d), inner)
        with kb.loop(inner, "p") as p:
            dst.store_raw(b.add(dbase, p), src.load_raw(b.add(sbase, p)))


# ----------------------------------------------------------------------------- Unique


@writes_scalars
def build_unique_count(kb: KernelBuilder, axis: int | None, types: Sequence[TensorType]) -> None:
    """Sorts the slices of x along ``axis`` (the elements when None) and numbers the
    distinct ones in sorted order: grp[i] := the rank of slice i's value among the distinct
    values; scalars[0] := how many there are. Slices compare lexicographically in row-major
    order. Tensors: x, order (2, n) int64 (scratch), grp (n,) int64, and for the elements
    (``axis`` None) keys (2, n) of x's dtype (scratch: the values sorted beside their
    indices)."""
    b = kb.b
    dt = types[0][0]
    x = kb.tensor(0, *types[0])
    order = kb.tensor(1, *types[1])
    grp = kb.tensor(2, *types[2])
    outer, n, inner = _rows(x, axis)
    perm = order.data
    arrays = [(perm, _at(b, perm, n), I64)]

    if axis is None:
        keys = kb.tensor(3, *types[3])
        arrays.append((keys.data, keys.ptr(n), keys.elem))

        def value(raw: ir.Value) -> ir.Value:
            return to_compute(b, dt, raw)

        def before(ri: list[ir.Value], rj: list[ir.Value]) -> ir.Value:
            return less(b, dt, value(ri[1]), value(rj[1]))

        def same(p: ir.Value, q: ir.Value) -> ir.Value:
            return equal(b, dt, keys.load(p), keys.load(q))  # by sorted position

        with kb.loop(n, "init") as i:
            _st(b, perm, i, i)
            keys.store_raw(i, x.load_raw(i))
    else:
        length = b.mul(outer, inner)

        def elem(r: ir.Value, t: ir.Value) -> ir.Value:
            # element t (row-major over the other axes) of slice r
            o, p = b.udiv(t, inner), b.urem(t, inner)
            return b.add(b.mul(b.add(b.mul(o, n), r), inner), p)

        def differ(i: ir.Value, j: ir.Value) -> ir.Value:
            """Where slices i and j first differ (``length`` if nowhere)."""
            return find_first(kb, i64(0), length,
                              lambda t: b.not_(equal(b, dt, x.load(elem(i, t)), x.load(elem(j, t)))))

        def before(ri: list[ir.Value], rj: list[ir.Value]) -> ir.Value:
            i, j = ri[0], rj[0]
            t = differ(i, j)
            result = _var(kb, ir.Constant(I1, 0))
            with b.if_then(b.icmp_signed("<", t, length)):  # only then are there elements to read
                b.store(less(b, dt, x.load(elem(i, t)), x.load(elem(j, t))), result)
            return b.load(result, typ=I1)

        def same(p: ir.Value, q: ir.Value) -> ir.Value:
            return b.icmp_signed("==", differ(_ld(b, perm, p), _ld(b, perm, q)), length)

        with kb.loop(n, "init") as i:
            _st(b, perm, i, i)
    merge_sort(kb, arrays, n, before)
    with b.if_then(b.icmp_signed(">", n, i64(0))):
        grp.store(_ld(b, perm, i64(0)), i64(0))

    def step(q: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
        g = b.add(vals[0], b.zext(b.not_(same(b.sub(q, i64(1)), q)), I64))
        grp.store(_ld(b, perm, q), g)
        return [g]

    last = kb.carry(i64(1), n, [i64(0)], step, name="group")[0]
    kb.set_scalar(0, b.select(b.icmp_signed(">", n, i64(0)), b.add(last, i64(1)), i64(0)))


def build_unique_fill(kb: KernelBuilder, params: tuple[int | None, bool, tuple[bool, bool, bool]],
                      types: Sequence[TensorType]) -> None:
    """The outputs of Unique from the groups :func:`build_unique_count` numbered: in sorted
    order, or (``sorted`` False) in the order of first occurrence. ``wants`` says which of
    indices, inverse_indices and counts are present. Tensors: x, grp (n,), work (2, u) int64
    (scratch), Y, then the wanted ones of indices (u,), inverse_indices (n,), counts (u,)."""
    axis, is_sorted, wants = params
    b = kb.b
    x = kb.tensor(0, *types[0])
    grp = kb.tensor(1, *types[1])
    work = kb.tensor(2, *types[2])
    y = kb.tensor(3, *types[3])
    present: list[Tensor | None] = []
    k = 4
    for wanted in wants:
        present.append(kb.tensor(k, *types[k]) if wanted else None)
        k += wanted
    indices, inverse, counts = present
    outer, n, inner = _rows(x, axis)
    u = work.dim(1)
    pos_of, cnt = work.data, _at(b, work.data, u)

    if not is_sorted:
        # group ranks by first occurrence: scanning x in order meets each group's first
        # element in that order
        with kb.loop(u, "clear") as g:
            _st(b, pos_of, g, i64(-1))

        def first_seen(i: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            g = grp.load(i)
            cur = _ld(b, pos_of, g)
            new = b.icmp_signed("<", cur, i64(0))
            _st(b, pos_of, g, b.select(new, vals[0], cur))
            return [b.add(vals[0], b.zext(new, I64))]

        kb.carry(i64(0), n, [i64(0)], first_seen, name="seen")
    with kb.loop(u, "zero") as g:
        _st(b, cnt, g, i64(0))
    with kb.loop(n, "elem") as i:
        g = grp.load(i)
        pos = g if is_sorted else _ld(b, pos_of, g)
        c = _ld(b, cnt, pos)
        with b.if_then(b.icmp_signed("==", c, i64(0))):  # the group's first occurrence
            if indices is not None:
                indices.store(pos, i)
            _copy_slice(kb, x, i, n, y, pos, u, outer, inner)
        _st(b, cnt, pos, b.add(c, i64(1)))
        if inverse is not None:
            inverse.store(i, pos)
    if counts is not None:
        with kb.loop(u, "counts") as g:
            counts.store(g, _ld(b, cnt, g))


# ----------------------------------------------------------------------------- Compress


def build_compress_count(kb: KernelBuilder, axis: int | None, types: Sequence[TensorType]) -> None:
    """scalars[0] := how many of condition's first n entries are true (n: the length of x
    along ``axis``, or its size). A true entry past n fails with details (its index, n), as
    numpy.compress does. Tensors: x, condition."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    cond = kb.tensor(1, *types[1])
    _, n, _ = _rows(x, axis)
    c = cond.dim(0)
    m = intrinsic(b, "llvm.smin", n, c)
    count = kb.accumulate(m, i64(0), lambda acc, j: b.add(acc, b.zext(
        b.icmp_unsigned("!=", cond.load(j), ir.Constant(cond.elem, 0)), I64)))
    bad = find_first(kb, m, c, lambda j: b.icmp_unsigned("!=", cond.load(j), ir.Constant(cond.elem, 0)))
    kb.fail_if(b.icmp_signed("<", bad, c), STATUS_INVALID_INPUT, [bad, n])
    kb.set_scalar(0, count)


def build_compress(kb: KernelBuilder, axis: int | None, types: Sequence[TensorType]) -> None:
    """out[o, k, p] = x[o, j_k, p] for the k-th true condition[j] (j < n). Tensors: x,
    condition, out."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    cond = kb.tensor(1, *types[1])
    out = kb.tensor(2, *types[2])
    outer, n, inner = _rows(x, axis)
    m = intrinsic(b, "llvm.smin", n, cond.dim(0))
    k = out.dim(axis if axis is not None else 0)

    def step(j: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
        take = b.icmp_unsigned("!=", cond.load(j), ir.Constant(cond.elem, 0))
        with b.if_then(take):
            _copy_slice(kb, x, j, n, out, vals[0], k, outer, inner)
        return [b.add(vals[0], b.zext(take, I64))]

    kb.carry(i64(0), m, [i64(0)], step, name="sel")


# ----------------------------------------------------------------------------- TopK


def _until(kb: KernelBuilder, init: ir.Value, step: Callable[[ir.Value], tuple[ir.Value, ir.Value]]) -> ir.Value:
    """``v = init; while True: go, nxt = step(v); if not go: break; v = nxt``; returns the
    last ``v`` (a flat loop: it does not poll the cancel flag)."""
    b = kb.b
    pre = b.block
    head = kb.fn.append_basic_block("until.head")
    done = kb.fn.append_basic_block("until.done")
    b.branch(head)
    b.position_at_end(head)
    v = b.phi(init.type, name="until")
    v.add_incoming(init, pre)
    go, nxt = step(v)
    v.add_incoming(nxt, b.block)
    b.cbranch(go, head, done)
    b.position_at_end(done)
    return v


def _sift_down(kb: KernelBuilder, h: ir.Value, size: ir.Value, item: ir.Value, after: Before) -> None:
    """Put ``item`` into the heap ``h[0:size]`` (size >= 1) whose root is the element that
    comes last (``after`` every other), in place of its root."""
    b = kb.b

    def step(hole: ir.Value) -> tuple[ir.Value, ir.Value]:
        c1 = b.add(b.mul(hole, i64(2)), i64(1))
        c2 = b.add(c1, i64(1))
        has1, has2 = b.icmp_signed("<", c1, size), b.icmp_signed("<", c2, size)
        # a missing child reads the root, a valid element whose value is not used
        h1, h2 = _ld(b, h, b.select(has1, c1, i64(0))), _ld(b, h, b.select(has2, c2, i64(0)))
        second = b.and_(has2, after(h2, h1))
        child, hc = b.select(second, c2, c1), b.select(second, h2, h1)
        move = b.and_(has1, after(hc, item))
        _st(b, h, hole, b.select(move, hc, item))
        return move, b.select(move, child, hole)

    _until(kb, i64(0), step)


def _sift_up(kb: KernelBuilder, h: ir.Value, size: ir.Value, item: ir.Value, after: Before) -> None:
    """Add ``item`` to the heap ``h[0:size]`` (h[0] holds a valid element even when empty)."""
    b = kb.b

    def step(hole: ir.Value) -> tuple[ir.Value, ir.Value]:
        parent = b.sdiv(b.sub(hole, i64(1)), i64(2))
        has = b.icmp_signed(">", hole, i64(0))
        hp = _ld(b, h, b.select(has, parent, i64(0)))
        move = b.and_(has, after(item, hp))
        _st(b, h, hole, b.select(move, hp, item))
        return move, b.select(move, parent, hole)

    _until(kb, size, step)


def _key32(b: ir.IRBuilder, dt: DType, v: ir.Value, largest: bool) -> ir.Value:
    """An int32 that orders numbers of at most 32 bits as TopK ranks them: larger ranks
    first when ``largest``. Floats (computed as float32) by their bits, negatives' magnitude
    bits flipped, after NaN becomes one positive NaN (above every number, all NaNs equal) and
    -0.0 becomes 0.0 (equal, as :func:`equal` has them); unsigned integers with the top bit
    flipped. Smallest first is the bitwise complement, which reverses the order."""
    i32 = ir.IntType(32)
    if dt.is_float:
        bits = b.bitcast(b.fadd(v, ir.Constant(v.type, 0.0)), i32)  # -0.0 + 0.0 is 0.0
        bits = b.select(b.fcmp_unordered("uno", v, v), ir.Constant(i32, 0x7FC00000), bits)
        key = b.xor(bits, b.and_(b.ashr(bits, ir.Constant(i32, 31)), ir.Constant(i32, 0x7FFFFFFF)))
    else:
        w = v.type.width
        key = v if w == 32 else (b.trunc(v, i32) if w > 32 else (b.sext(v, i32) if dt.is_signed else b.zext(v, i32)))
        if not dt.is_signed:
            key = b.xor(key, ir.Constant(i32, -0x80000000))
    return key if largest else b.not_(key)


def build_topk(kb: KernelBuilder, params: tuple[int, bool], types: Sequence[TensorType]) -> None:
    """The first k of each row along ``axis`` sorted descending (``largest``) or ascending,
    ties by lower index: values and their int64 indices. A heap of the k best seen so far
    (its root the worst of them) takes each element of the row in turn, so most elements
    cost one comparison when k is small (along a contiguous row of 4-byte or 8-byte numbers,
    one comparison per vector of them); then the heap is sorted in place: O(n log k). The
    heap holds indices, or for numbers of at most 32 bits each element's rank and index as
    one int64 (:func:`_key32`): an integer compare then orders two entries.
    Tensors: x, heap (k,) int64 (scratch), values, indices."""
    axis, largest = params
    b = kb.b
    dt = types[0][0]
    x = kb.tensor(0, *types[0])
    heap = kb.tensor(1, *types[1])
    vals = kb.tensor(2, *types[2])
    idxs = kb.tensor(3, *types[3])
    outer, n, inner = _rows(x, axis)
    k = vals.dim(axis)
    h = heap.data
    # rows of contiguous elements stored as computed: a vector's worth tested at once
    lanes = 0
    if isinstance(inner, ir.Constant) and inner.constant == 1 and dt.name in ("float32", "float64", "int32", "int64"):
        lanes = kb.target.f32_lanes * 4 // dt.itemsize
    # numbers of at most 32 bits rank by an integer key (:func:`_key32`)
    keyed = dt.itemsize <= 4 and (dt.is_float or dt.kind in "iu")
    with b.if_then(b.icmp_signed(">", k, i64(0))):
        with kb.loop(outer, "o") as o:
            with kb.loop(inner, "p") as p:
                base = b.add(b.mul(b.mul(o, n), inner), p)
                obase = b.add(b.mul(b.mul(o, k), inner), p)

                def at(j: ir.Value) -> ir.Value:
                    return b.add(base, b.mul(j, inner))

                if keyed:
                    # the heap holds each element's rank as one int64: its 32-bit key above,
                    # ~index below (a lower index ranks higher), so one signed compare orders
                    # two entries as the output does
                    def entry(j: ir.Value) -> ir.Value:
                        key = _key32(b, dt, x.load(at(j)), largest)
                        low = b.sub(i64(0xFFFFFFFF), j)  # n < 2^31: the arena's limit
                        return b.or_(b.shl(b.sext(key, I64), i64(32)), low)

                    def index_of(e: ir.Value) -> ir.Value:
                        return b.sub(i64(0xFFFFFFFF), b.and_(e, i64(0xFFFFFFFF)))

                    def after(e1: ir.Value, e2: ir.Value) -> ir.Value:
                        return b.icmp_signed("<", e1, e2)
                else:
                    def entry(j: ir.Value) -> ir.Value:
                        return j

                    def index_of(e: ir.Value) -> ir.Value:
                        return e

                    def after(i: ir.Value, j: ir.Value) -> ir.Value:
                        """Element i of the row comes after element j in the output."""
                        xi, xj = x.load(at(i)), x.load(at(j))
                        worse = less(b, dt, xi, xj) if largest else less(b, dt, xj, xi)
                        return b.or_(worse, b.and_(equal(b, dt, xi, xj), b.icmp_signed(">", i, j)))

                def take(j: ir.Value) -> None:
                    """Element j replaces the heap's root if it comes before it."""
                    e = entry(j)
                    with b.if_then(after(_ld(b, h, i64(0)), e)):
                        _sift_down(kb, h, k, e, after)

                _st(b, h, i64(0), entry(i64(0)))
                with kb.loop(k, "fill") as j:  # k <= n (checked before the call)
                    _sift_up(kb, h, j, entry(j), after)
                rest = k
                if lanes:
                    # a vector of the row at a time against the root's value: the lanes
                    # strictly behind it cannot enter (the root only gets better); any other
                    # lane, or a NaN, takes the exact test
                    vt = ir.VectorType(x.elem, lanes)
                    chunks = b.udiv(b.sub(n, k), i64(lanes))
                    with kb.loop(chunks, "chunk") as c:
                        j0 = b.add(k, b.mul(c, i64(lanes)))
                        v = b.load(b.bitcast(x.ptr(at(j0)), vt.as_pointer()), typ=vt, align=dt.itemsize)
                        thr = x.load(at(index_of(_ld(b, h, i64(0)))))
                        behind = Scalar(b, dt).cmp("<" if largest else ">", v, splat_like(b, thr, v))
                        lanes_in = b.zext(b.bitcast(b.not_(behind), ir.IntType(lanes)), I64)

                        def next_lane(bits: ir.Value) -> tuple[ir.Value, ir.Value]:
                            """The lowest lane left takes the exact test."""
                            take(b.add(j0, b.cttz(bits, ir.Constant(I1, 1))))
                            rest_bits = b.and_(bits, b.sub(bits, i64(1)))
                            return b.icmp_unsigned("!=", rest_bits, i64(0)), rest_bits

                        with b.if_then(b.icmp_unsigned("!=", lanes_in, i64(0))):
                            _until(kb, lanes_in, next_lane)
                    rest = b.add(k, b.mul(chunks, i64(lanes)))
                with kb.loop(n, "take", start=rest) as j:
                    take(j)
                # heapsort: the root (the last of the rest) goes to the end, k-1 down to 1
                with kb.loop(b.sub(k, i64(1)), "sort") as t:
                    end = b.sub(b.sub(k, i64(1)), t)
                    item = _ld(b, h, end)
                    _st(b, h, end, _ld(b, h, i64(0)))
                    _sift_down(kb, h, end, item, after)
                with kb.loop(k, "top") as j:
                    src = index_of(_ld(b, h, j))
                    dst = b.add(obase, b.mul(j, inner))
                    vals.store_raw(dst, x.load_raw(at(src)))
                    idxs.store(dst, src)


# ----------------------------------------------------------------------------- NonMaxSuppression


def _box(b: ir.IRBuilder, boxes: Tensor, base: ir.Value, center: bool) -> tuple[ir.Value, ...]:
    """(x_min, x_max, y_min, y_max) of the box at ``base``, computed as onnx.reference and
    onnxruntime do (so IoU ties break the same way)."""
    c = [boxes.load(b.add(base, i64(k))) for k in range(4)]
    if center:  # [x_center, y_center, width, height]
        two = ir.Constant(F32, 2.0)
        hw, hh = b.fdiv(c[2], two), b.fdiv(c[3], two)
        return b.fsub(c[0], hw), b.fadd(c[0], hw), b.fsub(c[1], hh), b.fadd(c[1], hh)

    def min_max(p: ir.Value, q: ir.Value) -> tuple[ir.Value, ir.Value]:
        swap = b.fcmp_ordered(">=", p, q)
        return b.select(swap, q, p), b.select(swap, p, q)

    # [y1, x1, y2, x2], any diagonal pair of corners
    return (*min_max(c[1], c[3]), *min_max(c[0], c[2]))


def _suppresses(b: ir.IRBuilder, one: tuple[ir.Value, ...], two: tuple[ir.Value, ...], iou: ir.Value) -> ir.Value:
    """IoU(one, two) > iou, with onnx.reference's order of float32 operations and its
    guards (no overlap, or an empty box, never suppresses)."""
    x1min, x1max, y1min, y1max = one
    x2min, x2max, y2min, y2max = two

    def pymax(p, q):
        return b.select(b.fcmp_ordered(">", q, p), q, p)

    def pymin(p, q):
        return b.select(b.fcmp_ordered("<", q, p), q, p)

    ixmin, ixmax = pymax(x1min, x2min), pymin(x1max, x2max)
    iymin, iymax = pymax(y1min, y2min), pymin(y1max, y2max)
    zero = ir.Constant(F32, 0.0)
    inter = b.fmul(b.fsub(ixmax, ixmin), b.fsub(iymax, iymin))
    area1 = b.fmul(b.fsub(x1max, x1min), b.fsub(y1max, y1min))
    area2 = b.fmul(b.fsub(x2max, x2min), b.fsub(y2max, y2min))
    union = b.fsub(b.fadd(area1, area2), inter)
    ok = b.and_(b.fcmp_ordered(">", ixmax, ixmin), b.fcmp_ordered(">", iymax, iymin))
    for v in (inter, area1, area2, union):
        ok = b.and_(ok, b.fcmp_ordered(">", v, zero))
    return b.and_(ok, b.fcmp_ordered(">", b.fdiv(inter, union), iou))


@writes_scalars
def build_nms_count(kb: KernelBuilder, params: tuple[bool, bool, bool], types: Sequence[TensorType]) -> None:
    """Greedy non-max suppression of each (batch, class): candidates (score above the
    threshold, if given) by descending score, ties by lower box index; a box is kept unless
    its IoU with a kept box exceeds iou_threshold; at most max_output_boxes_per_class
    (negative counts as 0). sel[b, c, :nsel[b, c]] := the kept boxes; scalars[0] := their
    total. An iou_threshold outside [0, 1] fails. ``params``: (center_point_box, has iou,
    has score). Tensors: boxes (B, S, 4), scores (B, C, S), max_output, [iou_threshold],
    [score_threshold], order (2, S) int64 (scratch), sel (B, C, S), nsel (B, C)."""
    center, has_iou, has_score = params
    b = kb.b
    boxes = kb.tensor(0, *types[0])
    scores = kb.tensor(1, *types[1])
    k = 3
    max_out = intrinsic(b, "llvm.smax", kb.tensor(2, *types[2]).load(i64(0)), i64(0))
    iou = ir.Constant(F32, 0.0)
    if has_iou:
        iou = kb.tensor(k, *types[k]).load(i64(0))
        k += 1
    thr = None
    if has_score:
        thr = kb.tensor(k, *types[k]).load(i64(0))
        k += 1
    order = kb.tensor(k, *types[k])
    sel = kb.tensor(k + 1, *types[k + 1])
    nsel = kb.tensor(k + 2, *types[k + 2])
    # NaN fails too
    kb.fail_if(b.not_(b.and_(b.fcmp_ordered(">=", iou, ir.Constant(F32, 0.0)),
                             b.fcmp_ordered("<=", iou, ir.Constant(F32, 1.0)))), STATUS_INVALID_INPUT)
    nb, nc, ns = scores.dim(0), scores.dim(1), scores.dim(2)
    cand, tmp = order.data, _at(b, order.data, ns)
    total = _var(kb, i64(0))
    with kb.loop(nb, "batch") as bi:
        with kb.loop(nc, "class") as ci:
            bc = b.add(b.mul(bi, nc), ci)
            srow = b.mul(bc, ns)
            kept = b.mul(bc, ns)

            def candidate(s: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
                _st(b, cand, vals[0], s)  # kept only if it passes: vals[0] <= s < S
                if thr is None:
                    return [b.add(vals[0], i64(1))]
                passes = b.fcmp_ordered(">", scores.load(b.add(srow, s)), thr)
                return [b.add(vals[0], b.zext(passes, I64))]

            m = kb.carry(i64(0), ns, [i64(0)], candidate, name="cand")[0]
            merge_sort(kb, [(cand, tmp, I64)], m, lambda ri, rj: b.fcmp_ordered(
                ">", scores.load(b.add(srow, ri[0])), scores.load(b.add(srow, rj[0]))))
            q = _var(kb, i64(0))
            box_base = b.mul(bi, ns)
            with kb.loop(m, "next") as t:
                with b.if_then(b.icmp_signed("<", b.load(q, typ=I64), max_out)):
                    nq = b.load(q, typ=I64)
                    box = _ld(b, cand, t)
                    me = _box(b, boxes, b.mul(b.add(box_base, box), i64(4)), center)
                    hit = find_first(kb, i64(0), nq, lambda j: _suppresses(
                        b, me, _box(b, boxes, b.mul(b.add(box_base, sel.load(b.add(kept, j))), i64(4)), center), iou))
                    with b.if_then(b.icmp_signed("==", hit, nq)):
                        sel.store(b.add(kept, nq), box)
                        b.store(b.add(nq, i64(1)), q)
            nq = b.load(q, typ=I64)
            nsel.store(bc, nq)
            b.store(b.add(b.load(total, typ=I64), nq), total)
    kb.set_scalar(0, b.load(total, typ=I64))


def build_nms_fill(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """out[r] = (batch, class, box) of each kept box, by batch, class, then selection order.
    Tensors: sel (B, C, S), nsel (B, C), out (N, 3)."""
    b = kb.b
    sel = kb.tensor(0, *types[0])
    nsel = kb.tensor(1, *types[1])
    out = kb.tensor(2, *types[2])
    nb, nc, ns = sel.dim(0), sel.dim(1), sel.dim(2)
    row = _var(kb, i64(0))
    with kb.loop(nb, "batch") as bi:
        with kb.loop(nc, "class") as ci:
            bc = b.add(b.mul(bi, nc), ci)
            with kb.loop(nsel.load(bc), "kept") as j:
                r = b.mul(b.load(row, typ=I64), i64(3))
                out.store(r, bi)
                out.store(b.add(r, i64(1)), ci)
                out.store(b.add(r, i64(2)), sel.load(b.add(b.mul(bc, ns), j)))
                b.store(b.add(b.load(row, typ=I64), i64(1)), row)


# ----------------------------------------------------------------------------- OneHot


def build_onehot_depth(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """scalars[0] := depth (its one element) as int64, a float truncated toward zero.
    Tensors: depth."""
    dt = types[0][0]
    d = kb.tensor(0, *types[0])
    kb.set_scalar(0, _to_i64(kb.b, dt, d.load(i64(0))))


def build_onehot(kb: KernelBuilder, params: tuple[int, bool], types: Sequence[TensorType]) -> None:
    """out[o, d, p] = on if index[o, p] (as int64; + depth when negative and ``wrap``) == d
    else off. Tensors: indices, values [off, on], out."""
    axis, wrap = params
    b = kb.b
    idt = types[0][0]
    ind = kb.tensor(0, *types[0])
    values = kb.tensor(1, *types[1])
    out = kb.tensor(2, *types[2])
    outer, inner = ind.numel(0, axis), ind.numel(axis)
    depth = out.dim(axis)
    off, on = values.load_raw(i64(0)), values.load_raw(i64(1))
    with kb.loop(outer, "o") as o:
        with kb.loop(depth, "d") as d:
            obase = b.mul(b.add(b.mul(o, depth), d), inner)
            with kb.loop(inner, "p") as p:
                idx = _to_i64(b, idt, ind.load(b.add(b.mul(o, inner), p)))
                if wrap:
                    idx = b.select(b.icmp_signed("<", idx, i64(0)), b.add(idx, depth), idx)
                out.store_raw(b.add(obase, p), b.select(b.icmp_signed("==", idx, d), on, off))


__all__ = ["build_unique_count", "build_unique_fill", "build_compress_count", "build_compress", "build_topk",
           "build_nms_count", "build_nms_fill", "build_onehot_depth", "build_onehot", "merge_sort", "find_first",
           "less", "equal"]
