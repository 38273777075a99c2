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
from .expr import Ex, const, ex, maximum, minimum, raw, where
from .kernel import (F32, I32, I64, STATUS_INVALID_INPUT, KernelBuilder, Tensor, i64, intrinsic,
                     to_compute, writes_scalars)
from .fused import splat_like
from .scalar import Scalar

TensorType = tuple[DType, Sequence[Dim]]
I1 = ir.IntType(1)
Before = Callable[[Ex, Ex], Ex]  # (a, b) -> i1: a comes before b


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


class _Cell:
    """A stack variable (:func:`_var`) read and written as Exs."""

    def __init__(self, kb: KernelBuilder, init: Ex):
        self.b, self.type, self.ptr = kb.b, init.type, _var(kb, init.v)

    def get(self) -> Ex:
        return ex(self.b, self.b.load(self.ptr, typ=self.type))

    def set(self, v: Ex) -> None:
        self.b.store(raw(v), self.ptr)


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


def _to_i64(b: ir.IRBuilder, dt: DType, v: Ex) -> Ex:
    """An element as int64: floats truncate toward zero (saturating, NaN is 0); unsigned
    integers zero-extend (``to`` would sign-extend them)."""
    if dt.is_float or dt.is_signed or v.type.width == 64:
        return v.to(I64)
    return ex(b, b.zext(v.v, I64))


def _rows(x: Tensor, axis: int | None) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(outer, n, inner): ``x`` as ``n`` slices along ``axis`` (the flattened elements when
    ``axis`` is None)."""
    if axis is None:
        return i64(1), x.numel(), i64(1)
    return x.numel(0, axis), x.dim(axis), x.numel(axis + 1)


def _copy_slice(kb: KernelBuilder, src: Tensor, s: Ex | ir.Value, n: Ex | ir.Value, dst: Tensor, d: Ex | ir.Value,
                m: Ex | ir.Value, outer: Ex | ir.Value, inner: Ex | ir.Value) -> None:
    """dst[o, d, p] = src[o, s, p] for the (outer, n, inner) view of src and (outer, m, inner)
    of dst."""
    s, n, d, m, outer, inner = (ex(kb.b, v) for v in (s, n, d, m, outer, inner))
    if outer.constant == 1 and inner.constant == 1:
        dst.store_raw(d, src.load_raw(s))  # one element: no loops (whose bodies would poll)
        return
    with kb.range(outer, "o") as o, kb.range(inner, "p") as p:
        dst.store_raw((o * m + d) * inner + p, src.load_raw((o * n + s) * inner + p))


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
    order = kb.tensor(1, *types[1])  # order[0]: the slices' permutation, order[1] its merge scratch
    grp = kb.tensor(2, *types[2])
    outer, n, inner = (ex(b, v) for v in _rows(x, axis))
    arrays = [(order.data, order.ptr(n), I64)]

    if axis is None:
        keys = kb.tensor(3, *types[3])
        arrays.append((keys.data, keys.ptr(n), keys.elem))

        def before(ri: list[ir.Value], rj: list[ir.Value]) -> ir.Value:
            return less(b, dt, to_compute(b, dt, ri[1]), to_compute(b, dt, rj[1]))

        def same(p: Ex, q: Ex) -> ir.Value:
            return equal(b, dt, keys.load(p), keys.load(q))  # by sorted position

        with kb.range(n, "init") as i:
            order[0, i] = i
            keys.store_raw(i, x.load_raw(i))
    else:
        length = outer * inner

        def elem(r: Ex | ir.Value, t: Ex | ir.Value) -> ir.Value:
            """Element t (row-major over the other axes) of slice r: x[o, r, p] of the
            (outer, n, inner) view."""
            o, p = divmod(ex(b, t), inner)
            return x.load((o * n + r) * inner + p)

        def differ(i: Ex | ir.Value, j: Ex | ir.Value) -> Ex:
            """Where slices i and j first differ (``length`` if nowhere)."""
            return ex(b, find_first(kb, i64(0), length.v, lambda t: b.not_(equal(b, dt, elem(i, t), elem(j, t)))))

        def before(ri: list[ir.Value], rj: list[ir.Value]) -> ir.Value:
            i, j = ri[0], rj[0]
            t = differ(i, j)
            result = _Cell(kb, const(b, I1, 0))
            with b.if_then((t < length).v):  # only then are there elements to read
                result.set(less(b, dt, elem(i, t), elem(j, t)))
            return result.get().v

        def same(p: Ex, q: Ex) -> ir.Value:
            return (differ(order[0, p], order[0, q]) == length).v

        with kb.range(n, "init") as i:
            order[0, i] = i
    merge_sort(kb, arrays, n.v, before)
    with b.if_then((n > 0).v):
        grp[order[0, 0]] = 0

    def step(q: Ex, vals: list[Ex]) -> list[Ex]:
        g = vals[0] + (~ex(b, same(q - 1, q))).to(I64)
        grp[order[0, q]] = g
        return [g]

    last = kb.iterate(1, n, [const(b, I64, 0)], step, name="group")[0]
    kb.set_scalar(0, where(n > 0, last + 1, 0).v)


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
    work = kb.tensor(2, *types[2])  # work[0, g]: group g's position in Y, work[1, p]: the count at position p
    y = kb.tensor(3, *types[3])
    present: list[Tensor | None] = []
    k = 4
    for wanted in wants:
        present.append(kb.tensor(k, *types[k]) if wanted else None)
        k += wanted
    indices, inverse, counts = present
    outer, n, inner = _rows(x, axis)
    u = work.dims[1]

    if not is_sorted:
        # group ranks by first occurrence: scanning x in order meets each group's first
        # element in that order
        with kb.range(u, "clear") as g:
            work[0, g] = -1

        def first_seen(i: Ex, vals: list[Ex]) -> list[Ex]:
            g = grp[i]
            cur = work[0, g]
            new = cur < 0
            work[0, g] = where(new, vals[0], cur)
            return [vals[0] + new.to(I64)]

        kb.iterate(0, n, [const(b, I64, 0)], first_seen, name="seen")
    with kb.range(u, "zero") as g:
        work[1, g] = 0
    with kb.range(n, "elem") as i:
        g = grp[i]
        pos = g if is_sorted else work[0, g]
        c = work[1, pos]
        with b.if_then((c == 0).v):  # the group's first occurrence
            if indices is not None:
                indices[pos] = i
            _copy_slice(kb, x, i, n, y, pos, u, outer, inner)
        work[1, pos] = c + 1
        if inverse is not None:
            inverse[i] = pos
    if counts is not None:
        with kb.range(u, "counts") as g:
            counts[g] = work[1, g]


# ----------------------------------------------------------------------------- Compress


def build_compress_count(kb: KernelBuilder, axis: int | None, types: Sequence[TensorType]) -> None:
    """scalars[0] := how many of condition's first n entries are true (n: the length of x
    along ``axis``, or its size). A true entry past n fails with details (its index, n), as
    numpy.compress does. Tensors: x, condition."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    cond = kb.tensor(1, *types[1])
    n = ex(b, _rows(x, axis)[1])
    c = cond.dims[0]
    m = minimum(n, c)
    count = kb.iterate(0, m, [const(b, I64, 0)], lambda j, acc: [acc[0] + (cond.flat[j] != 0).to(I64)], name="r")[0]
    bad = ex(b, find_first(kb, m.v, c.v, lambda j: (cond.flat[j] != 0).v))
    kb.fail_if(bad < c, STATUS_INVALID_INPUT, [bad, n])
    kb.set_scalar(0, count.v)


def build_compress(kb: KernelBuilder, axis: int | None, types: Sequence[TensorType]) -> None:
    """out[o, k, p] = x[o, j_k, p] for the k-th true condition[j] (j < n). Tensors: x,
    condition, out."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    cond = kb.tensor(1, *types[1])
    out = kb.tensor(2, *types[2])
    outer, n, inner = (ex(b, v) for v in _rows(x, axis))
    k = out.dims[axis if axis is not None else 0]

    def step(j: Ex, vals: list[Ex]) -> list[Ex]:
        take = cond.flat[j] != 0
        with b.if_then(take.v):
            _copy_slice(kb, x, j, n, out, vals[0], k, outer, inner)
        return [vals[0] + take.to(I64)]

    kb.iterate(0, minimum(n, cond.dims[0]), [const(b, I64, 0)], step, name="sel")


# ----------------------------------------------------------------------------- TopK


def _until(kb: KernelBuilder, init: Ex, step: Callable[[Ex], tuple[Ex, Ex]]) -> Ex:
    """``v = init; while True: go, nxt = step(v); if not go: break; v = nxt``; returns the
    last ``v`` (a flat loop: it does not poll the cancel flag)."""
    b = kb.b
    pre = b.block
    head = kb.fn.append_basic_block("until.head")
    done = kb.fn.append_basic_block("until.done")
    b.branch(head)
    b.position_at_end(head)
    v = b.phi(init.type, name="until")
    v.add_incoming(init.v, pre)
    go, nxt = step(ex(b, v))
    v.add_incoming(nxt.v, b.block)
    b.cbranch(go.v, head, done)
    b.position_at_end(done)
    return ex(b, v)


def _sift_down(kb: KernelBuilder, heap: Tensor, size: Ex, item: Ex, after: Before) -> None:
    """Put ``item`` into the heap ``heap[0:size]`` (size >= 1) whose root is the element that
    comes last (``after`` every other), in place of its root."""

    def step(hole: Ex) -> tuple[Ex, Ex]:
        c1 = hole * 2 + 1
        c2 = c1 + 1
        has1, has2 = c1 < size, c2 < size
        # a missing child reads the root, a valid element whose value is not used
        h1, h2 = heap[where(has1, c1, 0)], heap[where(has2, c2, 0)]
        second = has2 & after(h2, h1)
        child, hc = where(second, c2, c1), where(second, h2, h1)
        move = has1 & after(hc, item)
        heap[hole] = where(move, hc, item)
        return move, where(move, child, hole)

    _until(kb, const(kb.b, I64, 0), step)


def _sift_up(kb: KernelBuilder, heap: Tensor, size: Ex, item: Ex, after: Before) -> None:
    """Add ``item`` to the heap ``heap[0:size]`` (heap[0] holds a valid element even when
    empty)."""

    def step(hole: Ex) -> tuple[Ex, Ex]:
        parent = (hole - 1) >> 1  # used only where hole >= 1
        has = hole > 0
        hp = heap[where(has, parent, 0)]
        move = has & after(item, hp)
        heap[hole] = where(move, hp, item)
        return move, where(move, parent, hole)

    _until(kb, size, step)


def _key32(b: ir.IRBuilder, dt: DType, v: Ex, largest: bool) -> Ex:
    """An int32 that orders numbers of at most 32 bits as TopK ranks them: larger ranks
    first when ``largest``. Floats (computed as float32) by their bits, negatives' magnitude
    bits flipped, after NaN becomes one positive NaN (above every number, all NaNs equal) and
    -0.0 becomes 0.0 (equal, as :func:`equal` has them); unsigned integers with the top bit
    flipped. Smallest first is the bitwise complement, which reverses the order."""
    if dt.is_float:
        bits = ex(b, b.bitcast((v + 0.0).v, I32))  # -0.0 + 0.0 is 0.0
        bits = where(ex(b, _is_nan(b, v.v)), 0x7FC00000, bits)
        key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    else:
        # to() sign-extends: an unsigned narrower number zero-extends instead
        key = v.to(I32) if dt.is_signed or v.type.width >= 32 else ex(b, b.zext(v.v, I32))
        if not dt.is_signed:
            key = key ^ -0x80000000
    return key if largest else ~key


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
    outer, n, inner = (ex(b, v) for v in _rows(x, axis))
    k = vals.dims[axis]
    # rows of contiguous elements stored as computed: a vector's worth tested at once
    lanes = 0
    if inner.constant == 1 and dt.name in ("float32", "float64", "int32", "int64"):
        lanes = kb.target.f32_lanes * 4 // dt.itemsize
    # numbers of at most 32 bits rank by an integer key (:func:`_key32`)
    keyed = dt.itemsize <= 4 and (dt.is_float or dt.kind in "iu")
    with b.if_then((k > 0).v), kb.range(outer, "o") as o, kb.range(inner, "p") as p:
        base = o * n * inner + p
        obase = o * k * inner + p

        def at(j: Ex) -> Ex:
            return base + j * inner

        if keyed:
            # the heap holds each element's rank as one int64: its 32-bit key above, ~index
            # below (a lower index ranks higher), so one signed compare orders two entries as
            # the output does
            def entry(j: Ex) -> Ex:
                key = _key32(b, dt, x.flat[at(j)], largest)
                low = 0xFFFFFFFF - j  # n < 2^31: the arena's limit
                return (key.to(I64) << 32) | low

            def index_of(e: Ex) -> Ex:
                return 0xFFFFFFFF - (e & 0xFFFFFFFF)

            def after(e1: Ex, e2: Ex) -> Ex:
                return e1 < e2
        else:
            def entry(j: Ex) -> Ex:
                return j

            def index_of(e: Ex) -> Ex:
                return e

            def after(i: Ex, j: Ex) -> Ex:
                """Element i of the row comes after element j in the output."""
                xi, xj = x.flat[at(i)], x.flat[at(j)]
                worse = ex(b, less(b, dt, xi.v, xj.v) if largest else less(b, dt, xj.v, xi.v))
                return worse | (ex(b, equal(b, dt, xi.v, xj.v)) & (i > j))

        def take(j: Ex) -> None:
            """Element j replaces the heap's root if it comes before it."""
            e = entry(j)
            with b.if_then(after(heap[0], e).v):
                _sift_down(kb, heap, k, e, after)

        heap[0] = entry(const(b, I64, 0))
        with kb.range(k, "fill") as j:  # k <= n (checked before the call)
            _sift_up(kb, heap, j, entry(j), after)
        rest = k
        if lanes:
            # a vector of the row at a time against the root's value: the lanes strictly
            # behind it cannot enter (the root only gets better); any other lane, or a NaN,
            # takes the exact test
            vt = ir.VectorType(x.elem, lanes)
            chunks = (n - k) >> (lanes.bit_length() - 1)  # n - k >= 0; lanes a power of two
            with kb.range(chunks, "chunk") as c:
                j0 = k + c * lanes
                v = b.load(b.bitcast(x.ptr(at(j0)), vt.as_pointer()), typ=vt, align=dt.itemsize)
                thr = x.flat[at(index_of(heap[0]))]
                behind = Scalar(b, dt).cmp("<" if largest else ">", v, splat_like(b, thr.v, v))
                lanes_in = ex(b, b.zext(b.bitcast(b.not_(behind), ir.IntType(lanes)), I64))

                def next_lane(bits: Ex) -> tuple[Ex, Ex]:
                    """The lowest lane left takes the exact test."""
                    take(j0 + ex(b, b.cttz(bits.v, ir.Constant(I1, 1))))
                    rest_bits = bits & (bits - 1)
                    return rest_bits != 0, rest_bits

                with b.if_then((lanes_in != 0).v):
                    _until(kb, lanes_in, next_lane)
            rest = k + chunks * lanes
        with kb.range(n, "take", start=rest) as j:
            take(j)
        # heapsort: the root (the last of the rest) goes to the end, k-1 down to 1
        with kb.range(k - 1, "sort") as t:
            end = k - 1 - t
            item = heap[end]
            heap[end] = heap[0]
            _sift_down(kb, heap, end, item, after)
        with kb.range(k, "top") as j:
            src = index_of(heap[j])
            dst = obase + j * inner
            vals.store_raw(dst, x.load_raw(at(src)))
            idxs.flat[dst] = src


# ----------------------------------------------------------------------------- NonMaxSuppression


def _box(boxes: Tensor, batch: Ex, i: Ex | ir.Value, center: bool) -> tuple[Ex, ...]:
    """(x_min, x_max, y_min, y_max) of box ``i`` of ``batch``, computed as onnx.reference and
    onnxruntime do (so IoU ties break the same way)."""
    c = [boxes[batch, i, k] for k in range(4)]
    if center:  # [x_center, y_center, width, height]
        hw, hh = c[2] / 2.0, c[3] / 2.0
        return c[0] - hw, c[0] + hw, c[1] - hh, c[1] + hh

    def min_max(p: Ex, q: Ex) -> tuple[Ex, Ex]:
        swap = p >= q
        return where(swap, q, p), where(swap, p, q)

    # [y1, x1, y2, x2], any diagonal pair of corners
    return (*min_max(c[1], c[3]), *min_max(c[0], c[2]))


def _suppresses(one: tuple[Ex, ...], two: tuple[Ex, ...], iou: Ex) -> Ex:
    """IoU(one, two) > iou, with onnx.reference's order of float32 operations and its
    guards (no overlap, or an empty box, never suppresses)."""
    x1min, x1max, y1min, y1max = one
    x2min, x2max, y2min, y2max = two

    def pymax(p: Ex, q: Ex) -> Ex:
        return where(q > p, q, p)

    def pymin(p: Ex, q: Ex) -> Ex:
        return where(q < p, q, p)

    ixmin, ixmax = pymax(x1min, x2min), pymin(x1max, x2max)
    iymin, iymax = pymax(y1min, y2min), pymin(y1max, y2max)
    inter = (ixmax - ixmin) * (iymax - iymin)
    area1 = (x1max - x1min) * (y1max - y1min)
    area2 = (x2max - x2min) * (y2max - y2min)
    union = area1 + area2 - inter
    ok = (ixmax > ixmin) & (iymax > iymin)
    for v in (inter, area1, area2, union):
        ok = ok & (v > 0.0)
    return ok & (inter / union > iou)


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
    max_out = maximum(kb.tensor(2, *types[2]).flat[0], 0)
    iou = const(b, F32, 0.0)
    if has_iou:
        iou = kb.tensor(k, *types[k]).flat[0]
        k += 1
    thr = None
    if has_score:
        thr = kb.tensor(k, *types[k]).flat[0]
        k += 1
    order = kb.tensor(k, *types[k])  # order[0]: the candidates, order[1] their merge scratch
    sel = kb.tensor(k + 1, *types[k + 1])
    nsel = kb.tensor(k + 2, *types[k + 2])
    kb.fail_if(~((iou >= 0.0) & (iou <= 1.0)), STATUS_INVALID_INPUT)  # NaN fails too
    nb, nc, ns = scores.dims
    total = _Cell(kb, const(b, I64, 0))
    with kb.range(nb, "batch") as bi, kb.range(nc, "class") as ci:
        def candidate(s: Ex, vals: list[Ex]) -> list[Ex]:
            order[0, vals[0]] = s  # kept only if it passes: vals[0] <= s < S
            if thr is None:
                return [vals[0] + 1]
            return [vals[0] + (scores[bi, ci, s] > thr).to(I64)]

        m = kb.iterate(0, ns, [const(b, I64, 0)], candidate, name="cand")[0]
        merge_sort(kb, [(order.data, order.ptr(ns), I64)], m.v,
                   lambda ri, rj: (scores[bi, ci, ri[0]] > scores[bi, ci, rj[0]]).v)
        q = _Cell(kb, const(b, I64, 0))
        with kb.range(m, "next") as t:
            with b.if_then((q.get() < max_out).v):
                nq = q.get()
                box = order[0, t]
                me = _box(boxes, bi, box, center)
                hit = find_first(kb, i64(0), nq.v,
                                 lambda j: _suppresses(me, _box(boxes, bi, sel[bi, ci, j], center), iou).v)
                with b.if_then((nq == hit).v):
                    sel[bi, ci, nq] = box
                    q.set(nq + 1)
        nsel[bi, ci] = q.get()
        total.set(total.get() + q.get())
    kb.set_scalar(0, total.get().v)


def build_nms_fill(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """out[r] = (batch, class, box) of each kept box, by batch, class, then selection order.
    Tensors: sel (B, C, S), nsel (B, C), out (N, 3)."""
    sel = kb.tensor(0, *types[0])
    nsel = kb.tensor(1, *types[1])
    out = kb.tensor(2, *types[2])
    nb, nc, _ = sel.dims
    row = _Cell(kb, const(kb.b, I64, 0))
    with kb.range(nb, "batch") as bi, kb.range(nc, "class") as ci, kb.range(nsel[bi, ci], "kept") as j:
        r = row.get()
        out[r, 0], out[r, 1], out[r, 2] = bi, ci, sel[bi, ci, j]
        row.set(r + 1)


# ----------------------------------------------------------------------------- OneHot


def build_onehot_depth(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """scalars[0] := depth (its one element) as int64, a float truncated toward zero.
    Tensors: depth."""
    d = kb.tensor(0, *types[0])
    kb.set_scalar(0, _to_i64(kb.b, d.dtype, d.flat[0]).v)


def build_onehot(kb: KernelBuilder, params: tuple[int, bool], types: Sequence[TensorType]) -> None:
    """out[o, d, p] = on if index[o, p] (as int64; + depth when negative and ``wrap``) == d
    else off. Tensors: indices, values [off, on], out."""
    axis, wrap = params
    b = kb.b
    ind = kb.tensor(0, *types[0])
    values = kb.tensor(1, *types[1])
    out = kb.tensor(2, *types[2])
    outer, inner = ex(b, ind.numel(0, axis)), ex(b, ind.numel(axis))
    depth = out.dims[axis]
    off, on = (ex(b, values.load_raw(i64(k))) for k in range(2))  # as stored: copied, not computed on
    with kb.range(outer, "o") as o, kb.range(depth, "d") as d:
        obase = (o * depth + d) * inner
        with kb.range(inner, "p") as p:
            idx = _to_i64(b, ind.dtype, ind.flat[o * inner + p])
            if wrap:
                idx = where(idx < 0, idx + depth, idx)
            out.store_raw(obase + p, where(idx == d, on, off).v)


__all__ = ["build_unique_count", "build_unique_fill", "build_compress_count", "build_compress", "build_topk",
           "build_nms_count", "build_nms_fill", "build_onehot_depth", "build_onehot", "merge_sort", "find_first",
           "less", "equal"]
