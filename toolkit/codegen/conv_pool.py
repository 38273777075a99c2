"""Pooling kernels over any number of spatial dims (NC...): max, average and Lp pooling,
MaxPool's Indices, MaxUnpool.

Without Indices a pool runs one output element at a time over its window, the taps
unrolled (up to ``UNROLL_TAPS``; the outer axes of larger windows loop) and the innermost
output loop left for LLVM to vectorize. Padding, and the overhang of ``ceil_mode``, is a
scratch copy of the input filled with the pooling's neutral value (the dtype's lowest value
for max, zero for the sums), so no tap tests bounds; averages divide by the count of taps
inside the input, or inside the explicitly padded input with ``count_include_pad``.

Natively, a 2-D max pool of unit dilations whose windows all overlap the input reads the
input itself, its taps clamped to the input's edges (:func:`clamp_fits`): with unit dilations a
tap in the padding lands on the window's nearest element inside the input, which the maximum
already counts, so the result is the same, and the padded copy (resnet50's 64 x 112 x 112
input, 3.3 MB written and read again) is not made. Only the outputs whose windows cross an
edge clamp; the others read straight from the input.

With Indices, each window's taps are clamped to the input instead (:func:`.conv.inside`):
the first maximum in window order wins, as in onnx.reference and onnxruntime, and a window
with no tap inside the input gives 0 and index -1.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import INT64, DType
from . import mathlib
from .conv import Window, dims_in, inside, pad_copy
from .kernel import STATUS_OUT_OF_RANGE, KernelBuilder, compute_type, i64, intrinsic, smax, smin, unswitched
from .reduce import identity
from .scalar import Scalar

TensorType = tuple[DType, Sequence[Dim]]
UNROLL_TAPS = 64  # a window of up to this many taps is unrolled


@dataclass(frozen=True)
class Pooling:
    """What a pool computes: ``kind`` "max", "avg" or "lp" (with ``p``) over ``window``;
    ``count_include_pad`` for averages; ``storage_order`` (0 row-major, 1 column-major over
    the spatial dims) when MaxPool's Indices are wanted, else None; ``clamped``: how it
    reads a padded input (see :func:`clamp_fits`)."""

    kind: str
    window: Window
    count_include_pad: bool = False
    p: float = 2.0
    storage_order: int | None = None
    clamped: bool = False  # reads x with its taps clamped, not a padded copy (:func:`clamp_fits`)

    @property
    def kernel_name(self) -> str:
        return f"{self.kind}pool{self.window.rank}d" + ("_indices" if self.storage_order is not None else "")

    def neutral(self, dt: DType) -> ir.Constant:
        """The padding value: no tap of it changes the result."""
        return identity("max" if self.kind == "max" else "sum", dt)


def _lp_term(b: ir.IRBuilder, v: ir.Value, p: float) -> ir.Value:
    """|v| ** p: products for a whole p (as numpy's power of an integer exponent)."""
    a = intrinsic(b, "llvm.fabs", v)
    if p == int(p) and 1 <= p <= 8:
        out = a
        for _ in range(int(p) - 1):
            out = b.fmul(out, a)
        return out
    return mathlib.pow(b, a, ir.Constant(a.type, p))


def _lp_root(b: ir.IRBuilder, s: ir.Value, p: float) -> ir.Value:
    if p == 1:
        return s
    if p == 2:
        return intrinsic(b, "llvm.sqrt", s)
    return mathlib.pow(b, s, ir.Constant(s.type, 1.0 / p))


def lp_uses_mathlib(p: float) -> bool:
    """Whether an Lp pool of this p calls the float32 math library (so takes no float64)."""
    return p not in (1, 2)


def clamp_fits(kind: str, win: Window, x_shape: Sequence[Dim], y_shape: Sequence[Dim], ceil_mode: bool) -> bool:
    """Whether :func:`_max_clamped` can run a pool (without Indices) that needs a padded input
    (:func:`pool_scratch`): a max pool over 2 spatial dims, unit dilations, at most
    UNROLL_TAPS taps, static pads and spatial dims, every window overlapping x (it starts
    before x's end and ends after its start). Whether it pays is the plan's
    (:func:`.plan.plan_pool`)."""
    if not (kind == "max" and win.rank == 2 and win.dilations == (1, 1) and math.prod(win.kernel) <= UNROLL_TAPS
            and all(isinstance(d, int) for d in (*win.pads, *x_shape[2:], *y_shape[2:]))
            and pool_scratch(x_shape, y_shape, win, ceil_mode) is not None):
        return False
    for a in range(2):
        size, out, k, st, pb = x_shape[2 + a], y_shape[2 + a], win.kernel[a], win.strides[a], win.begin(a)
        if out > 0 and not (pb < k and (out - 1) * st - pb <= size - 1):
            return False
    return True


def _max_clamped(kb: KernelBuilder, params: Pooling, types: Sequence[TensorType]) -> None:
    """A 2-D max pool reading x, its taps clamped to x's edges (:func:`clamp_fits`): per output
    row, each tap row's clamped offset; the columns in three runs, the windows that cross
    the left edge and the right one clamping their columns, those between (which LLVM
    vectorizes) reading x as they are."""
    dt = types[0][0]
    b, s = kb.b, Scalar(kb.b, dt)
    win = params.window
    x = kb.tensor(0, dt, types[0][1])
    y = kb.tensor(1, dt, types[-1][1])
    (h, w), (oh, ow) = types[0][1][2:], types[-1][1][2:]
    (kh, kw), (sh, sw) = win.kernel, win.strides
    top, left = win.begin(0), win.begin(1)
    # outputs [0, lo) start left of column 0; [hi, ow) end right of column w - 1
    lo = min(ow, -(-left // sw))
    hi = max(lo, min(ow, (w - kw + left) // sw + 1))

    def clamp(v: ir.Value, last: int) -> ir.Value:
        return smin(kb, smax(kb, v, i64(0)), i64(last))

    # planes split across threads; a plane's work: its outputs' windows
    with kb.split_loop(x.numel(0, 2), "plane", unit_work=oh * ow * kh * kw) as nc:
        with kb.loop(i64(oh), name="o0") as oy:
            first = b.sub(kb.mul(oy, i64(sh)), i64(top))
            rows = [kb.add(kb.mul(nc, i64(h * w)), kb.mul(clamp(kb.add(first, i64(r)), h - 1), i64(w)))
                    for r in range(kh)]
            out = kb.add(kb.mul(nc, i64(oh * ow)), kb.mul(oy, i64(ow)))

            def window(ox: ir.Value, edge: bool) -> None:
                start = b.sub(kb.mul(ox, i64(sw)), i64(left))
                acc = params.neutral(dt)
                for row in rows:
                    for c in range(kw):
                        col = kb.add(start, i64(c))
                        v = x.load(kb.add(row, clamp(col, w - 1) if edge else col))
                        acc = b.select(s.cmp(">", v, acc), v, acc)
                y.store(kb.add(out, ox), acc)

            with kb.loop(i64(lo), name="ol", plain=True) as ox:
                window(ox, True)
            with kb.loop(i64(hi), name="o1", start=i64(lo)) as ox:
                window(ox, False)
            with kb.loop(i64(ow), name="or", start=i64(hi), plain=True) as ox:
                window(ox, True)


@unswitched
def build_pool(kb: KernelBuilder, params: Pooling, types: Sequence[TensorType]) -> None:
    """Tensors: x, [scratch: x padded for every window, see :func:`pool_scratch`], y, and
    [indices (int64)] when ``storage_order`` is set. Scalars: the symbolic pads. A pool
    that :func:`clamps` has no scratch."""
    if params.storage_order is not None:
        _max_with_indices(kb, params, types)
        return
    if params.clamped:
        _max_clamped(kb, params, types)
        return
    dt = types[0][0]
    win, kind = params.window, params.kind
    b, s = kb.b, Scalar(kb.b, dt)
    x = kb.tensor(0, dt, types[0][1])
    padded = len(types) == 3
    y = kb.tensor(len(types) - 1, dt, types[-1][1])
    pads = dims_in(kb, win.pads)
    r = win.rank
    src = x
    if padded:
        src = kb.tensor(1, dt, types[1][1])
        pad_copy(kb, x, src, pads[:r], params.neutral(dt))
    strides = src.strides()[2:]
    # axes below `split` loop over their taps, the rest are unrolled
    split = next(a for a in range(r + 1) if math.prod(win.kernel[a:]) <= UNROLL_TAPS)

    def step(acc: ir.Value, v: ir.Value) -> ir.Value:
        if kind == "max":
            return b.select(s.cmp(">", v, acc), v, acc)
        return b.fadd(acc, _lp_term(b, v, params.p) if kind == "lp" else v)

    def taps(axis: int, at: ir.Value, acc: ir.Value) -> ir.Value:
        if axis == r:
            return step(acc, src.load(at))
        gap = kb.mul(i64(win.dilations[axis]), strides[axis])
        if axis < split:
            return kb.carry(i64(0), i64(win.kernel[axis]), [acc],
                            lambda k, vals: [taps(axis + 1, kb.add(at, kb.mul(k, gap)), vals[0])], f"k{axis}")[0]
        for k in range(win.kernel[axis]):
            acc = taps(axis + 1, kb.add(at, kb.mul(i64(k), gap)), acc)
        return acc

    def counted(axis: int) -> tuple[ir.Value, ir.Value]:
        """[lo, hi): the padded positions of the axis whose taps count for an average."""
        size = x.dim(2 + axis)
        if params.count_include_pad:
            return i64(0), kb.add(kb.add(size, pads[axis]), pads[r + axis])
        return pads[axis], kb.add(size, pads[axis])

    def count(axis: int, first: ir.Value) -> ir.Value:
        """How many of the axis's taps from padded position ``first`` count for an average."""
        lo, hi = counted(axis)
        k_lo, k_hi = inside(kb, b.sub(first, lo), win.dilations[axis], i64(win.kernel[axis]), b.sub(hi, lo))
        return smax(kb, b.sub(k_hi, k_lo), i64(0))

    def count32(axis: int, first: ir.Value) -> ir.Value:
        """:func:`count` in int32 for an axis of unit dilation: the taps k in [0, K) with lo
        <= first + k < hi."""
        i32 = ir.IntType(32)
        lo, hi = counted(axis)
        f = b.trunc(first, i32)
        k_lo = b.sub(b.trunc(lo, i32), f)  # taps below it are before lo
        k_hi = b.sub(b.trunc(hi, i32), f)
        zero, kk = ir.Constant(i32, 0), ir.Constant(i32, win.kernel[axis])
        k_lo = b.select(b.icmp_signed(">", k_lo, zero), k_lo, zero)
        k_hi = b.select(b.icmp_signed("<", k_hi, kk), k_hi, kk)
        n = b.sub(k_hi, k_lo)
        return b.select(b.icmp_signed(">", n, zero), n, zero)

    def outputs(axis: int, at: ir.Value, out: ir.Value, n: ir.Value) -> None:
        """The loop over output positions of ``axis``: ``at`` is where the window of the
        position 0 starts in src, ``out`` the flat output position so far, ``n`` the count
        of taps the axes before this one give an average."""
        with kb.loop(y.dim(2 + axis), name=f"o{axis}") as o:
            first = kb.mul(o, i64(win.strides[axis]))
            here = kb.add(at, kb.mul(first, strides[axis]))
            pos = kb.add(kb.mul(out, y.dim(2 + axis)), o)
            if axis < r - 1:
                outputs(axis + 1, here, pos, b.mul(n, count(axis, first)) if kind == "avg" and padded else n)
                return
            acc = taps(0, here, params.neutral(dt))
            if kind == "avg" and padded and win.dilations[axis] == 1:
                # the last axis's count in int32 (vectors of int64 have no conversion to
                # float on wasm32): the product of two small integers is exact in float
                acc = b.fdiv(acc, b.fmul(b.sitofp(n, acc.type), b.sitofp(count32(axis, first), acc.type)))
            elif kind == "avg":
                total = b.mul(n, count(axis, first)) if padded else i64(win.taps)
                acc = b.fdiv(acc, b.sitofp(total, acc.type))
            elif kind == "lp":
                acc = _lp_root(b, acc, params.p)
            y.store(pos, acc)

    plane = src.numel(2)
    # planes split across threads; a plane's work: about its input's elements
    with kb.split_loop(x.numel(0, 2), "plane", unit_work=kb.add(plane, y.numel(2))) as nc:
        outputs(0, kb.mul(nc, plane), nc, i64(1))


def _max_with_indices(kb: KernelBuilder, params: Pooling, types: Sequence[TensorType]) -> None:
    """MaxPool with Indices. Tensors: x, y, indices. Scalars: the symbolic pads."""
    dt = types[0][0]
    win = params.window
    b, s = kb.b, Scalar(kb.b, dt)
    x = kb.tensor(0, dt, types[0][1])
    y = kb.tensor(1, dt, types[1][1])
    ind = kb.tensor(2, INT64, types[2][1])
    pads = dims_in(kb, win.pads)
    r = win.rank
    sizes = [x.dim(2 + a) for a in range(r)]
    row_major = x.strides()[2:]
    col_major = [i64(1)]
    for a in range(1, r):
        col_major.append(kb.mul(col_major[-1], sizes[a - 1]))
    order = row_major if params.storage_order == 0 else col_major
    plane = x.numel(2)
    ct = compute_type(dt)

    def taps(axis: int, firsts: list[ir.Value], ranges, flat: ir.Value, index: ir.Value,
             vals: list[ir.Value]) -> list[ir.Value]:
        if axis == r:
            v = x.load(flat)
            best, idx, found = vals
            take = b.or_(b.icmp_unsigned("==", found, ir.Constant(found.type, 0)), s.cmp(">", v, best))
            return [b.select(take, v, best), b.select(take, index, idx), b.select(take, ir.Constant(found.type, 1),
                                                                                     found)]
        lo, hi = ranges[axis]

        def step(k: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            pos = kb.add(firsts[axis], kb.mul(k, i64(win.dilations[axis])))
            return taps(axis + 1, firsts, ranges, kb.add(flat, kb.mul(pos, row_major[axis])),
                        kb.add(index, kb.mul(pos, order[axis])), vals)

        return kb.carry(lo, hi, vals, step, f"k{axis}")

    def outputs(axis: int, out: ir.Value, firsts: list[ir.Value], ranges: list, base: ir.Value) -> None:
        with kb.loop(y.dim(2 + axis), name=f"o{axis}") as o:
            first = b.sub(kb.mul(o, i64(win.strides[axis])), pads[axis])
            rng = inside(kb, first, win.dilations[axis], i64(win.kernel[axis]), sizes[axis])
            pos = kb.add(kb.mul(out, y.dim(2 + axis)), o)
            if axis < r - 1:
                outputs(axis + 1, pos, firsts + [first], ranges + [rng], base)
                return
            inits = [ir.Constant(ct, 0.0 if dt.is_float else 0), i64(-1), ir.Constant(ir.IntType(1), 0)]
            best, idx, found = taps(0, firsts + [first], ranges + [rng], base, base, inits)
            y.store(pos, best)
            ind.store(pos, idx)

    with kb.loop(x.numel(0, 2), name="plane") as nc:
        outputs(0, nc, [], [], kb.mul(nc, plane))


def build_max_unpool(kb: KernelBuilder, params: tuple[Window, bool], types: Sequence[TensorType]) -> None:
    """MaxUnpool for ``params`` (window, whether the output shape was given). Tensors: x,
    indices (int64, x's shape), y. The indices are flat positions in the tensor of the
    default output shape ((in - 1) * stride - pads + kernel per spatial axis); with a given
    output shape, that tensor is placed at the start of every axis of y (as onnx.reference
    and the ONNX conformance case do). An index outside it fails with its position, value
    and limit."""
    win, given = params
    dt = types[0][0]
    b = kb.b
    x = kb.tensor(0, dt, types[0][1])
    ind = kb.tensor(1, INT64, types[1][1])
    y = kb.tensor(2, dt, types[2][1])
    r = win.rank
    dims = [x.dim(0), x.dim(1)] + [
        b.add(b.sub(kb.mul(b.sub(x.dim(2 + a), i64(1)), i64(win.strides[a])), i64(win.begin(a) + win.end(a))),
              i64(win.kernel[a])) for a in range(r)]
    limit = i64(1)
    for d in dims:
        limit = kb.mul(limit, d)
    zero = ir.Constant(compute_type(dt), 0.0)
    with kb.loop(y.numel(), name="fill") as i:
        y.store(i, zero)
    with kb.loop(x.numel(), name="e") as e:
        i = ind.load(e)
        kb.fail_if(b.icmp_unsigned(">=", i, limit), STATUS_OUT_OF_RANGE, [e, i, limit])
        at = i
        if given:
            at, rest, scale = i64(0), i, i64(1)
            for a in reversed(range(x.rank)):
                at = kb.add(at, kb.mul(b.urem(rest, dims[a]), scale))
                rest = b.udiv(rest, dims[a])
                scale = kb.mul(scale, y.dim(a))
        y.store_raw(at, x.load_raw(e))


def pool_scratch(x_shape: Sequence[Dim], y_shape: Sequence[Dim], win: Window,
                 ceil_mode: bool) -> tuple[Dim, ...] | None:
    """The padded input a pool without Indices reads, or None when every window lies
    inside x."""
    dims = []
    for a in range(win.rank):
        size = x_shape[2 + a]
        padded = size + win.begin(a) + win.end(a)
        if ceil_mode:  # the last window may hang over the end pad
            padded = D.maximum(padded, (y_shape[2 + a] - 1) * win.strides[a] + win.extent(a))
        dims.append(padded)
    if tuple(dims) == tuple(x_shape[2:]):
        return None
    return tuple(x_shape[:2]) + tuple(dims)

