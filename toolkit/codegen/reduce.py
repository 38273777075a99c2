"""Reduction kernels: ReduceX over axes known at compile time or given at run time, the
kernel that reads an axes tensor at run time, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax
and LayerNormalization.

A reduction is a fold (sum, product, max or min) of a per-element map (|x|, x², exp(x -
max)), finished per output element (divide by the count, sqrt, log). ReduceX walks the
input once in memory order per pass, folding every element into its output element's
accumulator, so the innermost loop is contiguous whichever axes are reduced: a fold into
one register when the innermost axes are reduced, an elementwise fold into an output row
when they are kept. Accumulators live in the output itself when it has the accumulating
dtype, else in output-shaped scratch buffers the caller passes (float16 accumulates in
float32; LogSumExp keeps each row's max for its second pass). With axes known only at run
time the kernel reads a 0/1 mask per axis from its scalars and walks every axis with
run-time output strides (0 on reduced axes).

Softmax, LogSoftmax and Hardmax reduce rows of the input and then rewrite them;
LayerNormalization normalizes rows of the trailing axes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import BOOL, FLOAT32, FLOAT64, INT64, UINT64, DType
from . import mathlib
from .kernel import (F32, I32, I64, STATUS_INVALID_INPUT, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor,
                     at_entry, ceildiv, compute_type, fast, i64, intrinsic, smin, splat, writes_scalars)
from .scalar import Scalar, convert

Fold = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]
Index = Callable[[ir.Value], ir.Value]  # element k of a row -> its flat index
TensorType = tuple[DType, Sequence[Dim]]


@dataclass(frozen=True)
class Reduction:
    """How a ReduceX computes: ``pre`` maps each element ("abs", "square", or "exp": exp(x -
    row max), after a max pass), ``fold`` combines ("sum", "prod", "max", "min"), ``post``
    finishes each output element ("mean", "sqrt", "log")."""

    fold: str
    pre: str | None = None
    post: str | None = None


REDUCTIONS = {
    "sum": Reduction("sum"), "mean": Reduction("sum", post="mean"), "max": Reduction("max"),
    "min": Reduction("min"), "prod": Reduction("prod"), "l1": Reduction("sum", "abs"),
    "l2": Reduction("sum", "square", "sqrt"), "sum_square": Reduction("sum", "square"),
    "log_sum": Reduction("sum", post="log"), "log_sum_exp": Reduction("sum", "exp", "log"),
}


def identity(kind: str, dt: DType) -> ir.Constant:
    """The value a fold of no elements yields: 0 for sums, 1 for products, the lowest value
    for max, the highest for min (false and true for bools)."""
    t = compute_type(dt)
    if kind in ("sum", "mean", "prod"):
        one = kind == "prod"
        return ir.Constant(t, float(one) if dt.is_float else int(one))
    if dt.is_float:
        return ir.Constant(t, -math.inf if kind == "max" else math.inf)
    if dt == BOOL:
        lo, hi = 0, 1
    elif dt.is_signed:
        lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
    else:
        lo, hi = 0, (1 << t.width) - 1
    return ir.Constant(t, lo if kind == "max" else hi)


def fold(kind: str, dt: DType) -> Fold:
    """``acc (+) x`` for a fold ("sum" or "mean", "prod", "max", "min"); float sums and
    products may reassociate so they vectorize, and float max and min propagate NaN like
    numpy (on bools max is or, min is and)."""
    def step(b: ir.IRBuilder, acc: ir.Value, x: ir.Value) -> ir.Value:
        s = Scalar(b, dt)
        if kind in ("sum", "mean"):
            return fast(b.fadd(acc, x)) if dt.is_float else b.add(acc, x)
        if kind == "prod":
            return fast(b.fmul(acc, x)) if dt.is_float else b.mul(acc, x)
        return s.max(acc, x) if kind == "max" else s.min(acc, x)

    # a contiguous run is folded as independent partial results (_split_accumulate) where
    # one chain would wait on each step: float max and min, which do not reassociate
    step.split = kind in ("max", "min") and dt.is_float
    return step


def acc_dtype(kind: str, dt: DType) -> DType:
    """The dtype a reduction accumulates in: float16 in float32; ReduceL2 of integers in 64
    bits, as numpy sums the squares before the square root."""
    if dt.is_narrow_float:
        return FLOAT32
    if kind == "l2" and dt.is_int:
        return INT64 if dt.is_signed else UINT64
    return dt


def scratch_dtypes(kind: str, dt: DType) -> tuple[DType, ...]:
    """The output-shaped scratch buffers a ReduceX kernel takes between x and y: one
    accumulator per pass (LogSumExp's max pass, then its sum), except that the output
    serves as the last one when it has that dtype."""
    acc = acc_dtype(kind, dt)
    bufs = (acc, acc) if REDUCTIONS[kind].pre == "exp" else (acc,)
    return bufs[:-1] if acc == dt else bufs


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


def build_reduce(kb: KernelBuilder, params: tuple[str, tuple[int, ...] | None, bool],
                 types: Sequence[TensorType]) -> None:
    """``y = reduce(x)`` for ``params`` (kind, a key of REDUCTIONS; the reduced axes, or None
    when scalars 0..rank-1 hold a 0/1 mask per axis; noop: with no axis reduced, y is a
    copy of x, as the ONNX spec says). Tensors: x, the scratch buffers of
    :func:`scratch_dtypes`, y (y's layout is x's with the reduced axes removed)."""
    kind, axes, noop = params
    red = REDUCTIONS[kind]
    (dt, shape), (_, out_shape) = types[0], types[-1]
    b = kb.b
    x = kb.tensor(0, dt, shape)
    y = kb.tensor(len(types) - 1, dt, out_shape)
    acc = acc_dtype(kind, dt)
    bufs = [kb.tensor(1 + i, t, out_shape) for i, (t, _) in enumerate(types[1:-1])]
    if len(bufs) < (2 if red.pre == "exp" else 1):
        bufs.append(y)
    mask = None if axes is not None else [b.icmp_signed("!=", kb.scalar(a), i64(0)) for a in range(x.rank)]
    walk = _static_walk(kb, x, axes) if axes is not None else _runtime_walk(kb, x, mask)
    # the elements folded into each output element
    if mask is not None:
        count = _product(b, [b.select(m, x.dim(a), i64(1)) for a, m in enumerate(mask)])
    else:
        count = _product(b, [x.dim(a) for a in axes])

    def reduce_all() -> None:
        _reduce_passes(kb, red, x, y, bufs, acc, count, walk)

    def copy() -> None:
        with kb.loop(x.numel(), "cp") as i:
            y.store_raw(i, x.load_raw(i))

    if noop and not axes and (mask is None or not mask):
        copy()  # (the simplify pass makes a view of this)
    elif mask is not None and noop:
        with b.if_else(b.not_(_any(b, mask))) as (nothing, something):
            with nothing:
                copy()
            with something:
                reduce_all()
    else:
        reduce_all()


def _product(b: ir.IRBuilder, values: Sequence[ir.Value]) -> ir.Value:
    p: ir.Value = i64(1)
    for v in values:
        p = b.mul(p, v)
    return p


def _any(b: ir.IRBuilder, flags: Sequence[ir.Value]) -> ir.Value:
    out = flags[0]
    for f in flags[1:]:
        out = b.or_(out, f)
    return out


# walk(into, step, elem): fold elem(xoff, yoff) into into[yoff] for every element of x
Walk = Callable[[Tensor, Fold, Callable[[ir.Value, ir.Value], ir.Value], ir.Constant], None]


SPLIT_RUNS = 4  # partial results of a contiguous reduction, each over its own quarter


def _split_accumulate(kb: KernelBuilder, n: ir.Value, init: ir.Value, step: Callable[[ir.Value, ir.Value], ir.Value],
                      combine: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """``step`` folded over k in [0, n), as SPLIT_RUNS partial results over consecutive
    runs of n // SPLIT_RUNS elements (then the rest), combined at the end: independent
    chains, each a contiguous stream LLVM vectorizes. One chain waited on each step's
    latency, which for wasm's NaN-propagating f32x4.max is several instructions deep in V8
    (ReduceMax over 28 x 28 took 2.5x onnxruntime-web's time in Node; 0.9x this way). Max
    and min regroup exactly. Float sums reassociate anyway (fast), and LLVM vectorizes them
    better on its own (this split took ReduceMean twice the time)."""
    b = kb.b
    q = b.udiv(n, i64(SPLIT_RUNS))
    parts = kb.carry(i64(0), q, [init] * SPLIT_RUNS,
                     lambda i, vals: [step(v, kb.add(kb.mul(i64(j), q), i)) for j, v in enumerate(vals)], "rs")
    first = kb.carry(kb.mul(q, i64(SPLIT_RUNS)), n, [parts[0]], lambda k, vals: [step(vals[0], k)], "rt")[0]
    parts = [first] + list(parts[1:])
    while len(parts) > 1:
        parts = [combine(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)]
    return parts[0]


def _static_walk(kb: KernelBuilder, x: Tensor, axes: Sequence[int]) -> Walk:
    b = kb.b
    # a scalar is one reduced run of one element
    groups = [(r, x.numel(g[0], g[-1] + 1)) for r, g in _groups(x.rank, axes)] or [(True, i64(1))]

    def walk(into: Tensor, step: Fold, elem, init: ir.Constant) -> None:
        def level(g: int, xoff: ir.Value, yoff: ir.Value) -> None:
            reduced, ext = groups[g]
            xbase = kb.mul(xoff, ext)
            ybase = yoff if reduced else kb.mul(yoff, ext)
            if g == len(groups) - 1 and reduced:
                one = lambda a, k: step(b, a, elem(kb.add(xbase, k), ybase))  # noqa: E731
                part = _split_accumulate(kb, ext, init, one, lambda u, v: step(b, u, v)) \
                    if getattr(step, "split", False) else kb.accumulate(ext, init, one)
                into.store(ybase, step(b, into.load(ybase), part))
            elif g == len(groups) - 1:
                with kb.loop(ext, "j") as j:
                    yj = kb.add(ybase, j)
                    into.store(yj, step(b, into.load(yj), elem(kb.add(xbase, j), yj)))
            else:
                with kb.loop(ext, f"g{g}") as k:
                    level(g + 1, kb.add(xbase, k), ybase if reduced else kb.add(ybase, k))

        level(0, i64(0), i64(0))

    return walk


def _runtime_walk(kb: KernelBuilder, x: Tensor, mask: Sequence[ir.Value]) -> Walk:
    b = kb.b
    # output strides: 0 along reduced axes, row-major over the kept ones
    ostride: list[ir.Value] = [i64(0)] * x.rank
    st: ir.Value = i64(1)
    for a in range(x.rank - 1, -1, -1):
        ostride[a] = b.select(mask[a], i64(0), st)
        st = b.select(mask[a], st, b.mul(st, x.dim(a)))

    def walk(into: Tensor, step: Fold, elem, init: ir.Constant) -> None:
        def level(a: int, xoff: ir.Value, yoff: ir.Value) -> None:
            if a == x.rank:
                into.store(yoff, step(b, into.load(yoff), elem(xoff, yoff)))
                return
            with kb.loop(x.dim(a), f"ax{a}") as i:
                level(a + 1, kb.add(kb.mul(xoff, x.dim(a)), i), kb.add(yoff, b.mul(i, ostride[a])))

        level(0, i64(0), i64(0))

    return walk


def _reduce_passes(kb: KernelBuilder, red: Reduction, x: Tensor, y: Tensor, bufs: list[Tensor], acc: DType,
                   count: ir.Value, walk: Walk) -> None:
    b = kb.b
    dt = x.dtype
    s_in, s_acc = Scalar(b, dt), Scalar(b, acc)
    total = y.numel()

    def shift(yoff: ir.Value) -> ir.Value:
        """The max a LogSumExp output element subtracts; 0 when it is infinite or NaN
        (exp(inf - inf) would be NaN), where the sum of exp(x) itself is already right:
        -inf for elements of -inf, inf with a +inf, NaN with a NaN."""
        m = bufs[0].load(yoff)
        finite = b.fcmp_ordered("<", intrinsic(b, "llvm.fabs", m), ir.Constant(m.type, math.inf))
        return b.select(finite, m, ir.Constant(m.type, 0.0))

    def element(xoff: ir.Value, yoff: ir.Value, pre: str | None) -> ir.Value:
        v = x.load(xoff)
        if pre == "abs":
            v = s_in.abs(v)
        elif pre == "square":
            v = s_in.mul(v, v)  # in x's dtype, wrapping like numpy's square
        v = convert(b, v, dt, acc)
        if pre == "exp":
            v = mathlib.exp(b, b.fsub(v, shift(yoff)))
        return v

    passes = [("max", None)] if red.pre == "exp" else []
    passes.append((red.fold, red.pre))
    for into, (kind, pre) in zip(bufs, passes):
        init = identity(kind, acc)
        with kb.loop(total, "init") as i:
            into.store(i, init)
        walk(into, fold(kind, acc), lambda xo, yo, pre=pre: element(xo, yo, pre), init)

    last = bufs[-1]
    if last is y and red.post is None:
        return
    with kb.loop(total, "fin") as i:
        v = last.load(i)
        if red.post == "mean":
            v = s_acc.div(v, convert(b, count, INT64, acc))
        elif red.post == "sqrt":
            v = convert(b, intrinsic(b, "llvm.sqrt", convert(b, v, acc, FLOAT64)), FLOAT64, acc) \
                if acc.is_int else intrinsic(b, "llvm.sqrt", v)
        elif red.post == "log":
            v = mathlib.log(b, v)
            if red.pre == "exp":
                v = b.fadd(v, shift(i))
        y.store(i, convert(b, v, acc, dt))


# ----------------------------------------------------------------------------- axes at run time


@dataclass(frozen=True)
class AxesPlan:
    """What :func:`build_axes` computes from an axes tensor given at run time (1-D, int32 or
    int64; entries in ``[-rank, rank)``, negative ones counting from the end).

    Always: a 0/1 mask per axis and how many entries name an axis an earlier one named.
    ``empty_all``: an empty axes tensor names every axis (a reduction over all axes).
    ``values``: per value tensor (``c`` blocks of one entry per axes entry), ``(c,
    default)``: its output holds ``c`` blocks of one entry per axis, the entry of the axes
    entry naming it or the default. ``dims``: output dims from ``n_in`` input dims:
    "keep" (reduced axes become 1), "remove" (reduced axes dropped) or "insert" (the mask
    is over the output's axes, which are 1; the others take the input's dims in order)."""

    rank: int
    empty_all: bool = False
    values: tuple[tuple[int, int], ...] = ()
    dims: str | None = None
    n_in: int = 0
    n_out: int = 0

    kernel_name = "axes"


@writes_scalars
def build_axes(kb: KernelBuilder, plan: AxesPlan, types: Sequence[TensorType]) -> None:
    """Tensors: axes, the value tensors, their outputs (int64). Scalars: the mask (rank),
    the repeat count, the input dims (n_in), the output dims (n_out, written). Fails with
    (entry, value) when an entry is out of range."""
    b = kb.b
    r = plan.rank
    axes = kb.tensor(0, *types[0])
    nv = len(plan.values)
    vals = [kb.tensor(1 + i, *types[1 + i]) for i in range(nv)]
    outs = [kb.tensor(1 + nv + i, *types[1 + nv + i]) for i in range(nv)]
    for o, (c, default) in zip(outs, plan.values):
        with kb.loop(i64(c * r), "def") as i:
            o.store(i, i64(default))
    mask = b.alloca(I64, size=i64(max(r, 1)), name="mask")

    def flag(a: ir.Value) -> ir.Value:
        return b.gep(mask, [a], source_etype=I64)

    for a in range(r):
        b.store(i64(0), flag(i64(a)))
    k = axes.dim(0)

    def entry(j: ir.Value, dup: list[ir.Value]) -> list[ir.Value]:
        raw = axes.load(j)
        raw = raw if raw.type == I64 else b.sext(raw, I64)
        a = b.select(b.icmp_signed("<", raw, i64(0)), b.add(raw, i64(r)), raw)
        kb.fail_if(b.icmp_unsigned(">=", a, i64(r)), STATUS_OUT_OF_RANGE, [j, raw])
        p = flag(a)
        seen = b.load(p, typ=I64)
        b.store(i64(1), p)
        for v, o, (c, _) in zip(vals, outs, plan.values):
            for blk in range(c):
                src = kb.add(kb.mul(i64(blk), k), j)
                got = v.load(src)
                o.store(b.add(i64(blk * r), a), got if got.type == I64 else b.sext(got, I64))
        return [b.add(dup[0], seen)]

    dup = kb.carry(i64(0), k, [i64(0)], entry, "entry")[0]
    empty = b.icmp_signed("==", k, i64(0))
    m = []
    for a in range(r):
        v = b.load(flag(i64(a)), typ=I64)
        m.append(b.select(empty, i64(1), v) if plan.empty_all else v)
        kb.set_scalar(a, m[a])
    kb.set_scalar(r, dup)
    base = r + 1
    d = [kb.scalar(base + i) for i in range(plan.n_in)]
    out = _axes_dims(b, plan, m, d)
    for p, v in enumerate(out):
        kb.set_scalar(base + plan.n_in + p, v)


def _axes_dims(b: ir.IRBuilder, plan: AxesPlan, m: Sequence[ir.Value], d: Sequence[ir.Value]) -> list[ir.Value]:
    """The output dims of ``plan.dims`` from the mask ``m`` and the input dims ``d``."""
    if plan.dims is None:
        return []
    one = i64(1)
    hit = [b.icmp_signed("!=", v, i64(0)) for v in m]
    if plan.dims == "keep":
        return [b.select(h, one, x) for h, x in zip(hit, d)]
    out: list[ir.Value] = [i64(0)] * plan.n_out
    c: ir.Value = i64(0)  # axes kept (remove) or input dims used (insert) so far
    if plan.dims == "remove":
        for a, (h, x) in enumerate(zip(hit, d)):
            for p in range(plan.n_out):
                here = b.and_(b.not_(h), b.icmp_signed("==", c, i64(p)))
                out[p] = b.select(here, x, out[p])
            c = b.add(c, b.select(h, i64(0), one))
        return out
    for p in range(plan.n_out):
        v: ir.Value = one
        for i, x in enumerate(d):
            v = b.select(b.icmp_signed("==", c, i64(i)), x, v)
        out[p] = b.select(hit[p], one, v)
        c = b.add(c, b.select(hit[p], i64(0), one))
    return out


# ----------------------------------------------------------------------------- ArgMax, ArgMin


def _each_row(kb: KernelBuilder, x: Tensor, axis: int, body: Callable[[Index, ir.Value], None]) -> None:
    """Call ``body(at, r)`` for each 1-D row of ``x`` along ``axis``: ``at(k)`` is the flat
    index of the row's element ``k`` and ``r`` the row's index among all rows. Rows along
    the last axis are contiguous (inner is the constant 1); along another axis they are
    strided (Softmax and LogSoftmax have a loop order of their own for that, build_softmax;
    Hardmax and ArgMax walk the strided rows)."""
    outer, n, inner = x.numel(0, axis), x.dim(axis), x.numel(axis + 1)
    with kb.loop(outer, "o") as o:
        with kb.loop(inner, "p") as p:
            base = kb.add(kb.mul(kb.mul(o, n), inner), p)
            body(lambda k: kb.add(base, kb.mul(k, inner)), kb.add(kb.mul(o, inner), p))


def _arg_best(kb: KernelBuilder, x: Tensor, at: Index, n: ir.Value, largest: bool, last: bool) -> ir.Value:
    """The index (i64) of the first (or ``last``) largest (or smallest) element of a row;
    NaN counts as the extreme, like numpy. 0 for an empty row."""
    b = kb.b
    op = ">" if largest else "<"

    def better(v: ir.Value, best: ir.Value) -> ir.Value:
        if not x.dtype.is_float:
            return Scalar(b, x.dtype).cmp(op + "=" if last else op, v, best)
        v_nan = b.fcmp_unordered("uno", v, v)
        if last:
            return b.or_(b.fcmp_ordered(op + "=", v, best), v_nan)
        return b.or_(b.fcmp_ordered(op, v, best), b.and_(v_nan, b.fcmp_ordered("ord", best, best)))

    # the best index is the carried state; its value is reloaded (this loop is scalar anyway)
    return kb.accumulate(n, i64(0), lambda idx, k: b.select(better(x.load(at(k)), x.load(at(idx))), k, idx))


def build_argmax(kb: KernelBuilder, params: tuple[int, bool, bool], types: Sequence[TensorType]) -> None:
    """``y = argmax(x, axis)`` (or argmin) as int64, the first (or ``last``) index of the
    extreme, for ``params`` (axis, largest, last); NaN counts as the extreme, like numpy.
    Tensors: x, y. An empty axis fails (detail: its length) unless y is empty too."""
    axis, largest, last = params
    (dt, shape), (_, out_shape) = types
    b = kb.b
    x = kb.tensor(0, dt, shape)
    y = kb.tensor(1, INT64, out_shape)
    n = x.dim(axis)
    kb.fail_if(b.and_(b.icmp_signed("==", n, i64(0)), b.icmp_signed(">", y.numel(), i64(0))),
               STATUS_INVALID_INPUT, [n])
    _each_row(kb, x, axis, lambda at, r: y.store(r, _arg_best(kb, x, at, n, largest, last)))


# ----------------------------------------------------------------------------- Softmax family


SOFTMAX_CHUNK = 256  # rows a softmax along an inner axis takes at once


def build_softmax(kb: KernelBuilder, params: tuple[int, str], types: Sequence[TensorType]) -> None:
    """Along ``axis``, for ``params`` (axis, kind): "softmax" ``exp(x - max) / sum(exp(x -
    max))``, "log_softmax" ``x - max - log(sum(exp(x - max)))``, "hardmax" 1 at the first
    maximum (NaN counting as the maximum) and 0 elsewhere. float16 computes in float32,
    float64 in float64. Tensors: x, y."""
    axis, kind = params
    (dt, shape), _ = types
    b = kb.b
    x = kb.tensor(0, dt, shape)
    y = kb.tensor(1, dt, shape)
    n = x.dim(axis)
    ct = acc_dtype("softmax", dt)
    top, add = fold("max", ct), fold("sum", ct)
    zero, one = ir.Constant(compute_type(ct), 0.0), ir.Constant(compute_type(ct), 1.0)

    def row(at: Index, r: ir.Value) -> None:
        if kind == "hardmax":
            best = _arg_best(kb, x, at, n, True, False)
            with kb.loop(n, "k") as k:
                y.store(at(k), b.select(b.icmp_signed("==", k, best), one, zero))
            return
        m = _split_accumulate(kb, n, identity("max", ct), lambda acc, k: top(b, acc, x.load(at(k))),
                              lambda u, v: top(b, u, v))

        def exp_sum(acc: ir.Value, k: ir.Value) -> ir.Value:
            e = mathlib.exp(b, b.fsub(x.load(at(k)), m))
            if kind == "softmax":
                y.store(at(k), e)
            return add(b, acc, e)

        total = kb.accumulate(n, identity("sum", ct), exp_sum)
        if kind == "softmax":  # one division per row, a multiplication per element
            inv = b.fdiv(one, total)
            with kb.loop(n, "k") as k:
                y.store(at(k), b.fmul(y.load(at(k)), inv))
            return
        # (x - max) first: max + log(total) would round away the small log at a large max
        log_total = mathlib.log(b, total)
        with kb.loop(n, "k") as k:
            y.store(at(k), b.fsub(b.fsub(x.load(at(k)), m), log_total))

    inner = x.numel(axis + 1)
    if kind != "hardmax" and dt == FLOAT32 and axis == x.rank - 1 and kb.target is not None \
            and kb.target.f32_lanes > 1:
        _softmax_rows(kb, x, y, kind)
        return
    if kind == "hardmax" or (isinstance(inner, ir.Constant) and inner.constant == 1):
        _each_row(kb, x, axis, row)
        return
    # Along an axis that is not the last, a row's elements lie ``inner`` apart: walked row
    # by row, every load is strided and nothing vectorizes (softmax over the channels of
    # 256 x 1024 took 2.4x onnxruntime-web's time in Node). Here SOFTMAX_CHUNK rows side by
    # side (neighbours in the inner dims) go through each pass together, their running maxima
    # and sums in stack arrays, every load and store contiguous.
    vt = compute_type(ct)
    with at_entry(kb):
        tops = b.alloca(ir.ArrayType(vt, SOFTMAX_CHUNK), name="tops")
        sums = b.alloca(ir.ArrayType(vt, SOFTMAX_CHUNK), name="sums")

    def cell(arr: ir.Value, j: ir.Value) -> ir.Value:
        return b.bitcast(b.gep(arr, [i64(0), j], source_etype=arr.type.pointee), vt.as_pointer())

    with kb.loop(x.numel(0, axis), "o") as o:
        with kb.loop(ceildiv(kb, inner, i64(SOFTMAX_CHUNK)), "pc") as pc:
            p0 = kb.mul(pc, i64(SOFTMAX_CHUNK))
            cnt = smin(kb, b.sub(inner, p0), i64(SOFTMAX_CHUNK))
            base = kb.add(kb.mul(kb.mul(o, n), inner), p0)

            def at(k: ir.Value, j: ir.Value) -> ir.Value:
                return kb.add(kb.add(base, kb.mul(k, inner)), j)

            with kb.loop(cnt, "j0") as j:
                b.store(identity("max", ct), cell(tops, j))
                b.store(identity("sum", ct), cell(sums, j))
            with kb.loop(n, "k1") as k:
                with kb.loop(cnt, "j1") as j:
                    b.store(top(b, b.load(cell(tops, j)), x.load(at(k, j))), cell(tops, j))
            with kb.loop(n, "k2") as k:
                with kb.loop(cnt, "j2") as j:
                    e = mathlib.exp(b, b.fsub(x.load(at(k, j)), b.load(cell(tops, j))))
                    if kind == "softmax":
                        y.store(at(k, j), e)
                    b.store(add(b, b.load(cell(sums, j)), e), cell(sums, j))
            with kb.loop(cnt, "j3") as j:  # softmax: 1 / sum; log_softmax: log(sum)
                total = b.load(cell(sums, j))
                b.store(b.fdiv(one, total) if kind == "softmax" else mathlib.log(b, total), cell(sums, j))
            with kb.loop(n, "k3") as k:
                with kb.loop(cnt, "j4") as j:
                    if kind == "softmax":
                        y.store(at(k, j), b.fmul(y.load(at(k, j)), b.load(cell(sums, j))))
                    else:
                        y.store(at(k, j), b.fsub(b.fsub(x.load(at(k, j)), b.load(cell(tops, j))),
                                                 b.load(cell(sums, j))))


def _horizontal(b: ir.IRBuilder, v: ir.Value, op: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """``op`` over the lanes of vector v (a tree of halvings), as a scalar."""
    lanes = v.type.count
    while lanes > 1:
        lanes //= 2
        upper = ir.Constant(ir.VectorType(I32, v.type.count), [lanes + i if i < lanes else i for i in range(v.type.count)])
        v = op(v, b.shuffle_vector(v, v, upper))
    return b.extract_element(v, ir.Constant(I32, 0))


MAX_CHAINS = 4  # independent vector maxima per softmax row


def _softmax_rows(kb: KernelBuilder, x: Tensor, y: Tensor, kind: str) -> None:
    """float32 softmax or log_softmax along the last axis, whose rows are contiguous. Per row,
    three passes of vectors: the maximum (MAX_CHAINS independent chains), exp(x - max)
    (:func:`.mathlib.exp_flushed_f32`) and its sum, the result. A row's last n % lanes
    elements are the lanes of one more vector ending at the row's end, which overlaps the
    previous ones: the maximum takes it whole, the sum only its new lanes, and stores write
    the overlapped lanes their own values again. A row shorter than a vector goes element by
    element. Left to LLVM's vectorizer, the loops' horizontal reductions, NaN handling and
    remainders ran once per 4 x 16 elements natively (a row of 19 never reached its vector
    loop) and a row of 128 took about 5x onnxruntime's time."""
    b = kb.b
    n = x.dim(x.rank - 1)
    lanes = kb.target.f32_lanes
    vt = ir.VectorType(F32, lanes)
    s = Scalar(b, FLOAT32)
    add = fold("sum", FLOAT32)
    nv = b.udiv(n, i64(lanes))
    has_vec = b.icmp_signed(">", nv, i64(0))
    rem = b.sub(n, kb.mul(nv, i64(lanes)))
    last = b.sub(n, i64(lanes))  # where the vector ending at the row's end starts
    scalar_lo = b.select(has_vec, n, i64(0))  # rows shorter than a vector: every element
    # the last vector's lanes that no whole vector covered: lane >= lanes - rem
    lane_ids = ir.Constant(ir.VectorType(I32, lanes), list(range(lanes)))
    # the extra vector, when the row has a whole vector and does not end on one
    extra = b.and_(has_vec, b.icmp_signed("!=", rem, i64(0)))

    def vat(t: Tensor, at: ir.Value) -> ir.Value:
        return b.bitcast(t.ptr(at), vt.as_pointer())

    def vmax(u: ir.Value, v: ir.Value) -> ir.Value:
        return intrinsic(b, "llvm.maximum", u, v)

    def vsum(u: ir.Value, v: ir.Value) -> ir.Value:
        return fast(b.fadd(u, v))

    def guarded(values: list[ir.Value], emit: Callable[[list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
        """``emit(values)`` when the row takes the extra vector, else ``values`` unchanged."""
        before = b.block
        with b.if_then(extra):
            out = emit(values)
            inside = b.block
        merged = []
        for v, o in zip(values, out):
            phi = b.phi(v.type)
            phi.add_incoming(o, inside)
            phi.add_incoming(v, before)
            merged.append(phi)
        return merged

    new_lanes = b.icmp_signed(">=", lane_ids, splat(b, b.trunc(b.sub(i64(lanes), rem), I32), lanes))
    with kb.split_loop(x.numel(0, x.rank - 1), "row", unit_work=n) as r:  # rows split across threads
        base = kb.mul(r, n)

        def at(k: ir.Value) -> ir.Value:
            return kb.add(base, k)

        def vload(t: Tensor, k: ir.Value) -> ir.Value:
            return b.load(vat(t, at(k)), typ=vt, align=4)

        low = ir.Constant(vt, [-math.inf] * lanes)
        groups = b.udiv(nv, i64(MAX_CHAINS))
        vms = kb.carry(i64(0), groups, [low] * MAX_CHAINS,
                       lambda g, acc: [vmax(a, vload(x, kb.mul(kb.add(kb.mul(g, i64(MAX_CHAINS)), i64(c)), i64(lanes))))
                                       for c, a in enumerate(acc)], "vmax", plain=True)
        vm = kb.carry(kb.mul(groups, i64(MAX_CHAINS)), nv, [vms[0]],
                      lambda v, acc: [vmax(acc[0], vload(x, kb.mul(v, i64(lanes))))], "vmax1", plain=True)[0]
        for other in vms[1:]:
            vm = vmax(vm, other)
        vm = guarded([vm], lambda v: [vmax(v[0], vload(x, last))])[0]
        m = kb.carry(scalar_lo, n, [_horizontal(b, vm, vmax)], lambda k, acc: [s.max(acc[0], x.load(at(k)))],
                     "tmax", plain=True)[0]
        mv = splat(b, m, lanes)

        def vexp(k: ir.Value) -> ir.Value:
            e = mathlib.exp_flushed_f32(b, b.fsub(vload(x, k), mv))
            if kind == "softmax":
                b.store(e, vat(y, at(k)), align=4)
            return e

        vs = kb.carry(i64(0), nv, [ir.Constant(vt, [0.0] * lanes)],
                      lambda v, acc: [vsum(acc[0], vexp(kb.mul(v, i64(lanes))))], "vexp", plain=True)[0]
        vs = guarded([vs], lambda v: [vsum(v[0], b.select(new_lanes, vexp(last), ir.Constant(vt, [0.0] * lanes)))])[0]

        def texp(k: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            e = mathlib.exp_flushed_f32(b, b.fsub(x.load(at(k)), m))
            if kind == "softmax":
                y.store(at(k), e)
            return [add(b, acc[0], e)]

        total = kb.carry(scalar_lo, n, [_horizontal(b, vs, vsum)], texp, "texp", plain=True)[0]
        if kind == "softmax":  # one division per row, a multiplication per element
            inv = b.fdiv(ir.Constant(F32, 1.0), total)
            invv = splat(b, inv, lanes)

            def scale(k: ir.Value, only_new: bool) -> None:
                ptr = vat(y, at(k))
                v = b.load(ptr, typ=vt, align=4)
                b.store(b.select(new_lanes, b.fmul(v, invv), v) if only_new else b.fmul(v, invv), ptr, align=4)

            with kb.loop(nv, "vout", plain=True) as v:
                scale(kb.mul(v, i64(lanes)), False)
            with b.if_then(extra):
                scale(last, True)
            with kb.loop(n, "tout", start=scalar_lo, plain=True) as k:
                y.store(at(k), b.fmul(y.load(at(k)), inv))
        else:
            # (x - max) first: max + log(total) would round away the small log at a large max
            lt = mathlib.log(b, total)
            ltv = splat(b, lt, lanes)

            def logs(k: ir.Value) -> None:
                b.store(b.fsub(b.fsub(vload(x, k), mv), ltv), vat(y, at(k)), align=4)

            with kb.loop(nv, "vout", plain=True) as v:
                logs(kb.mul(v, i64(lanes)))
            with b.if_then(extra):
                logs(last)
            with kb.loop(n, "tout", start=scalar_lo, plain=True) as k:
                y.store(at(k), b.fsub(b.fsub(x.load(at(k)), m), lt))


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
    with kb.split_loop(rows, "r", unit_work=inner) as r:  # rows split across threads
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
