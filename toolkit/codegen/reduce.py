"""Reduction kernels: ReduceSum/Mean/Max/Min over constant axes, ArgMax, Softmax and
LayerNormalization.

ReduceX walks the input once in memory order, folding every element into its output
element (initialised to the identity), so the innermost loop is contiguous whichever axes
are reduced: a reduction into one accumulator when the innermost axes are reduced, an
elementwise fold into an output row when they are kept. Softmax and LayerNormalization
reduce rows of the input and then rewrite them.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, INT64, DType
from . import mathlib
from .kernel import F32, STATUS_INVALID_INPUT, KernelBuilder, Tensor, compute_type, fast, i64, intrinsic
from .scalar import Scalar

Fold = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]
Index = Callable[[ir.Value], ir.Value]  # element k of a row -> its flat index
TensorType = tuple[DType, Sequence[Dim]]


def identity(kind: str, dt: DType) -> ir.Constant:
    """The value a reduction of no elements yields: 0 for sums, the lowest value for max,
    the highest for min."""
    t = compute_type(dt)
    if kind in ("sum", "mean"):
        return ir.Constant(t, 0.0 if dt.is_float else 0)
    if dt.is_float:
        return ir.Constant(t, -math.inf if kind == "max" else math.inf)
    if dt.is_signed:
        lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
    else:
        lo, hi = 0, (1 << t.width) - 1
    return ir.Constant(t, lo if kind == "max" else hi)


def fold(kind: str, dt: DType) -> Fold:
    """``acc (+) x`` for a reduction kind ("sum", "mean", "max" or "min"); float sums may
    reassociate so they vectorize, and float max and min propagate NaN like numpy."""
    def step(b: ir.IRBuilder, acc: ir.Value, x: ir.Value) -> ir.Value:
        s = Scalar(b, dt)
        if kind in ("sum", "mean"):
            return fast(b.fadd(acc, x)) if dt.is_float else b.add(acc, x)
        return s.max(acc, x) if kind == "max" else s.min(acc, x)

    return step


def _groups(rank: int, axes: Sequence[int]) -> list[tuple[bool, list[int]]]:
    """Runs of adjacent axes that are all reduced or all kept: each run is one loop."""
    out: list[tuple[bool, list[int]]] = []
    for a in range(rank):
        r = a in axes
        if out and out[-1][0] == r:
            out[-1][1].append(a)
        else:
            out.append((r, [a]))
    return out


def build_reduce(kb: KernelBuilder, params: tuple[str, tuple[int, ...]], types: Sequence[TensorType]) -> None:
    """``y = reduce(x, axes)`` for ``params`` (kind: "sum", "mean", "max" or "min"; axes, not
    empty); a mean divides the sums by the count. Tensors: x, y (y's layout is x's with the
    reduced axes removed)."""
    kind, axes = params
    (dt, shape), (_, out_shape) = types
    mean = kind == "mean"
    b = kb.b
    x = kb.tensor(0, dt, shape)
    y = kb.tensor(1, dt, out_shape)
    step = fold(kind, dt)
    init = identity(kind, dt)
    groups = [(r, x.numel(g[0], g[-1] + 1)) for r, g in _groups(len(shape), axes)]
    total = y.numel()
    with kb.loop(total) as i:
        y.store(i, init)

    def level(g: int, xoff: ir.Value, yoff: ir.Value) -> None:
        reduced, ext = groups[g]
        xbase = kb.mul(xoff, ext)
        ybase = yoff if reduced else kb.mul(yoff, ext)
        if g == len(groups) - 1 and reduced:
            acc = kb.accumulate(ext, init, lambda acc, k: step(b, acc, x.load(kb.add(xbase, k))))
            y.store(ybase, step(b, y.load(ybase), acc))
        elif g == len(groups) - 1:
            with kb.loop(ext, "j") as j:
                yj = kb.add(ybase, j)
                y.store(yj, step(b, y.load(yj), x.load(kb.add(xbase, j))))
        else:
            with kb.loop(ext, f"g{g}") as k:
                level(g + 1, kb.add(xbase, k), ybase if reduced else kb.add(ybase, k))

    level(0, i64(0), i64(0))
    if mean:
        count = i64(1)
        for reduced, ext in groups:
            if reduced:
                count = kb.mul(count, ext)
        countf = b.sitofp(count, compute_type(dt))
        with kb.loop(total) as i:
            y.store(i, b.fdiv(y.load(i), countf))


def _each_row(kb: KernelBuilder, x: Tensor, axis: int, body: Callable[[Index, ir.Value], None]) -> None:
    """Call ``body(at, r)`` for each 1-D row of ``x`` along ``axis``: ``at(k)`` is the flat
    index of the row's element ``k`` and ``r`` the row's index among all rows. Rows along
    the last axis are contiguous (inner is the constant 1); along another axis they are
    strided, which is rare enough (Softmax and ArgMax mostly run on the last axis) not to
    need a second loop order."""
    outer, n, inner = x.numel(0, axis), x.dim(axis), x.numel(axis + 1)
    with kb.loop(outer, "o") as o:
        with kb.loop(inner, "p") as p:
            base = kb.add(kb.mul(kb.mul(o, n), inner), p)
            body(lambda k: kb.add(base, kb.mul(k, inner)), kb.add(kb.mul(o, inner), p))


def build_argmax(kb: KernelBuilder, params: tuple[int, bool], types: Sequence[TensorType]) -> None:
    """``y = argmax(x, axis)`` as int64, the first (or ``last``) index of the maximum, for
    ``params`` (axis, last); NaN counts as the maximum, like numpy. Tensors: x, y. An empty
    axis fails (detail: its length) unless y is empty too."""
    axis, last = params
    (dt, shape), (_, out_shape) = types
    b = kb.b
    x = kb.tensor(0, dt, shape)
    y = kb.tensor(1, INT64, out_shape)
    n = x.dim(axis)
    kb.fail_if(b.and_(b.icmp_signed("==", n, i64(0)), b.icmp_signed(">", y.numel(), i64(0))),
               STATUS_INVALID_INPUT, [n])

    def better(v: ir.Value, best: ir.Value) -> ir.Value:
        if not dt.is_float:
            return Scalar(b, dt).cmp(">=" if last else ">", v, best)
        v_nan = b.fcmp_unordered("uno", v, v)
        if last:
            return b.or_(b.fcmp_ordered(">=", v, best), v_nan)
        return b.or_(b.fcmp_ordered(">", v, best), b.and_(v_nan, b.fcmp_ordered("ord", best, best)))

    def row(at: Index, r: ir.Value) -> None:
        # the best index is the carried state; its value is reloaded (this loop is scalar anyway)
        best = kb.accumulate(n, i64(0), lambda idx, k: b.select(
            better(x.load(at(k)), x.load(at(idx))), k, idx))
        y.store(r, best)

    _each_row(kb, x, axis, row)


def build_softmax(kb: KernelBuilder, axis: int, types: Sequence[TensorType]) -> None:
    """``y = exp(x - max) / sum(exp(x - max))`` along ``axis`` (float32, or float16 computed
    in float32). Tensors: x, y."""
    (dt, shape), _ = types
    b = kb.b
    x = kb.tensor(0, dt, shape)
    y = kb.tensor(1, dt, shape)
    n = x.dim(axis)
    top, add = fold("max", FLOAT32), fold("sum", FLOAT32)

    def row(at: Index, r: ir.Value) -> None:
        m = kb.accumulate(n, identity("max", FLOAT32), lambda acc, k: top(b, acc, x.load(at(k))))

        def exp_sum(acc: ir.Value, k: ir.Value) -> ir.Value:
            e = mathlib.exp(b, b.fsub(x.load(at(k)), m))
            y.store(at(k), e)
            return add(b, acc, e)

        total = kb.accumulate(n, identity("sum", FLOAT32), exp_sum)
        with kb.loop(n, "k") as k:
            y.store(at(k), b.fdiv(y.load(at(k)), total))

    _each_row(kb, x, axis, row)


def build_layer_norm(kb: KernelBuilder, params: tuple[int, float, int, tuple[bool, bool]],
                     types: Sequence[TensorType]) -> None:
    """LayerNormalization over axes ``axis..`` for ``params`` (axis, epsilon, how many of
    scale and bias are fused, which of Mean and InvStdDev are wanted). Tensors: x, then the
    fused scale and bias (indexed like one normalized row), y, then the wanted statistics.
    With nothing fused y is the normalized x. float32, or float16 computed in float32."""
    axis, epsilon, affine, stats = params
    (dt, shape) = types[0]
    b = kb.b
    x = kb.tensor(0, dt, shape)
    scale_bias = [kb.tensor(1 + k, *types[1 + k]) for k in range(affine)]
    y = kb.tensor(1 + affine, dt, shape)
    index = iter(range(2 + affine, len(types)))
    mean_out, inv_out = (kb.tensor(k := next(index), *types[k]) if want else None for want in stats)
    rows, inner = x.numel(0, axis), x.numel(axis)
    count = b.sitofp(inner, F32)
    add = fold("sum", FLOAT32)
    with kb.loop(rows, "r") as r:
        base = kb.mul(r, inner)

        def at(j: ir.Value) -> ir.Value:
            return kb.add(base, j)

        mean = b.fdiv(kb.accumulate(inner, identity("sum", FLOAT32),
                                    lambda acc, j: add(b, acc, x.load(at(j)))), count)

        def sq(acc: ir.Value, j: ir.Value) -> ir.Value:
            d = b.fsub(x.load(at(j)), mean)
            return add(b, acc, fast(b.fmul(d, d)))

        var = b.fdiv(kb.accumulate(inner, identity("sum", FLOAT32), sq), count)
        inv = b.fdiv(ir.Constant(F32, 1.0), intrinsic(b, "llvm.sqrt", b.fadd(var, ir.Constant(F32, epsilon))))
        with kb.loop(inner, "j") as j:
            v = b.fmul(b.fsub(x.load(at(j)), mean), inv)
            if affine:
                v = b.fmul(v, scale_bias[0].load(j))
            if affine > 1:
                v = b.fadd(v, scale_bias[1].load(j))
            y.store(at(j), v)
        for t, v in ((mean_out, mean), (inv_out, inv)):
            if t is not None:
                t.store(r, v)
