"""Kernels of the miscellaneous ops: Einsum, EyeLike, ReverseSequence, Det, BitCast and
GridSample.

Einsum is one loop nest: a loop per output label, then a reduction loop per summed label,
each operand reached through per-label strides (the sum of its axes' strides for a label
it repeats, which walks a diagonal; 0 on a dim of 1, which broadcasts). Det is Gaussian
elimination with partial pivoting (as LAPACK's getrf, which numpy uses) on a scratch copy.
GridSample computes, per output position, each spatial axis's taps (index, weight, and
whether it lies inside the input) once, then sums the taps' products for every channel.
"""
from __future__ import annotations

import itertools
from contextlib import ExitStack
from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, DType
from .kernel import (F32, I64, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, compute_type, fptosi_sat, i64,
                     intrinsic)
from .expr import I1, Ex, const, ex, maximum, where
from .scalar import convert

TensorType = tuple[DType, Sequence[Dim]]


def _zero_if_one(t: Tensor, axis: int, stride: Ex) -> Ex:
    """``stride`` of ``t``'s axis, or 0 where that dim is 1 (it broadcasts)."""
    return where(t.dims[axis] == 1, 0, stride)


# ----------------------------------------------------------------------------- Einsum


def build_einsum(kb: KernelBuilder, spec: tuple[tuple[tuple[int, ...], ...], tuple[int, ...]],
                 types: Sequence[TensorType]) -> None:
    """out[output labels] = sum over the other labels of the product of the operands.
    ``spec``: (each operand's labels, the output's labels). Tensors: the operands, out."""
    terms, output = spec
    b = kb.b
    ins = [kb.tensor(k, *types[k]) for k in range(len(terms))]
    y = kb.tensor(len(terms), *types[-1])
    summed = [lab for lab in dict.fromkeys(lab for t in terms for lab in t) if lab not in output]
    extent: dict[int, Ex] = {lab: y.dims[a] for a, lab in enumerate(output)}
    for lab in summed:
        # the longest of the label's dims (the others are 1, broadcasting, or equal)
        extent[lab] = const(b, I64, 1)
        for t, term in zip(ins, terms):
            for a, x in enumerate(term):
                if x == lab:
                    extent[lab] = maximum(extent[lab], t.dims[a])
    strides = []
    for t, term in zip(ins, terms):
        own = [ex(b, st) for st in t.strides()]
        per: dict[int, Ex] = {}
        for a, lab in enumerate(term):
            per[lab] = per.get(lab, 0) + _zero_if_one(t, a, own[a])
        strides.append(per)

    def step(offs: list[Ex], lab: int, i: Ex) -> list[Ex]:
        return [o + i * st[lab] if lab in st else o for o, st in zip(offs, strides)]

    def total(j: int, offs: list[Ex], acc: Ex) -> Ex:
        if j == len(summed):
            factors = [t.flat[o] for t, o in zip(ins, offs)]
            product = factors[0]
            for f in factors[1:]:
                product = product * f
            return acc + product
        lab = summed[j]
        return kb.iterate(0, extent[lab], [acc], lambda i, v: [total(j + 1, step(offs, lab, i), v[0])],
                          name=f"sum{j}")[0]

    def out_level(j: int, offs: list[Ex], pos: Ex) -> None:
        if j == len(output):
            y.flat[pos] = total(0, offs, const(b, y.ctype, 0))
            return
        lab = output[j]
        with kb.range(extent[lab], f"out{j}") as i:
            out_level(j + 1, step(offs, lab, i), pos * extent[lab] + i)

    zero = const(b, I64, 0)
    out_level(0, [zero] * len(ins), zero)


# ----------------------------------------------------------------------------- EyeLike


def build_eye(kb: KernelBuilder, k: int, types: Sequence[TensorType]) -> None:
    """Ones on diagonal ``k`` (above the main one when positive), zeros elsewhere. Tensors:
    out (2-D)."""
    y = kb.tensor(0, *types[0])
    one, zero = (const(kb.b, y.ctype, v) for v in (1, 0))
    rows, cols = y.dims
    with kb.range(rows, "row") as i, kb.range(cols, "col") as j:
        y[i, j] = where(j - i == k, one, zero)


# ----------------------------------------------------------------------------- ReverseSequence


def build_reverse_sequence(kb: KernelBuilder, axes: tuple[int, int], types: Sequence[TensorType]) -> None:
    """Along ``time`` axis, the first lens[b] elements of each batch entry b reversed, the
    rest copied. Fails with (length, time dim, batch entry) on a length outside [0, time
    dim]. Tensors: x, lens (int64), out."""
    time, batch = axes
    b = kb.b
    x = kb.tensor(0, *types[0])
    lens = kb.tensor(1, *types[1])
    y = kb.tensor(2, *types[2])
    t_dim = x.dims[time]
    with kb.range(x.dims[batch], "batch") as e:
        n = lens[e].index()
        kb.fail_if(b.icmp_unsigned(">", n.v, t_dim.v), STATUS_OUT_OF_RANGE, [n, t_dim, e])  # n < 0 too

    # walk the output; the source position along time depends on the batch entry's length
    with ExitStack() as loops:
        at = [loops.enter_context(kb.range(d, f"ax{a}")) for a, d in enumerate(x.dims)]
        n = lens[at[batch]].index()
        t = at[time]
        src = [where(t < n, n - 1 - t, t) if a == time else c for a, c in enumerate(at)]
        y.store_raw(x.offset(*at), x.load_raw(x.offset(*src)))  # y has x's shape


# ----------------------------------------------------------------------------- Det


def build_det(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """The determinant of each matrix (the last two axes) by elimination with partial
    pivoting in the scratch copy. Tensors: x, scratch (n, n), out."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    a = kb.tensor(1, *types[1])
    y = kb.tensor(2, *types[2])
    n = x.dims[-1]
    with kb.range(y.numel(), "mat") as m:
        with kb.range(n * n, "cp") as i:
            a.flat[i] = convert(b, x.flat[m * (n * n) + i].v, x.dtype, a.dtype)

        def eliminate(k: Ex, det: list[Ex]) -> list[Ex]:
            def better(i: Ex, best: list[Ex]) -> list[Ex]:
                v = abs(a[i, k])
                take = v > best[1]
                return [where(take, i, best[0]), where(take, v, best[1])]

            p, _ = kb.iterate(k + 1, n, [k, abs(a[k, k])], better, name="piv")  # the pivot row
            with kb.range(n, "sw") as j:
                a[k, j], a[p, j] = a[p, j], a[k, j]
            pivot = a[k, k]
            d = where(p != k, -det[0], det[0]) * pivot
            singular = det[1] | (pivot == 0.0)
            # a zero pivot makes the determinant 0; dividing by one instead keeps the rest finite
            inv = 1.0 / where(pivot == 0.0, 1.0, pivot)
            with kb.range(n - k - 1, "row") as r:
                i = k + 1 + r
                f = a[i, k] * inv
                with kb.range(n - k - 1, "col") as c:
                    j = k + 1 + c
                    a[i, j] = a[i, j] - f * a[k, j]
            return [d, singular]

        det, singular = kb.iterate(0, n, [const(b, a.ctype, 1.0), const(b, I1, 0)], eliminate, name="k")
        y.flat[m] = convert(b, where(singular, 0.0, det).v, a.dtype, y.dtype)


# ----------------------------------------------------------------------------- BitCast


def build_bitcast(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """The same bits in another dtype of the same size. Tensors: x, out."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    y = kb.tensor(1, *types[1])
    with kb.loop(x.numel(), name="el") as i:
        v = x.load_raw(i)
        y.store_raw(i, v if v.type == y.elem else b.bitcast(v, y.elem))


# ----------------------------------------------------------------------------- GridSample


def _reflect(b: ir.IRBuilder, x: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """``x`` reflected off the borders ``lo`` and ``hi`` until it lies between them."""
    span = b.fsub(hi, lo)
    safe = b.select(b.fcmp_ordered(">", span, ir.Constant(F32, 0.0)), span, ir.Constant(F32, 1.0))
    below = b.fcmp_ordered("<", x, lo)
    dx = b.select(below, b.fsub(lo, x), b.fsub(x, hi))
    k = fptosi_sat(b, b.fdiv(dx, safe), I64)
    r = b.fsub(dx, b.fmul(b.sitofp(k, F32), span))
    even = b.icmp_signed("==", b.and_(k, i64(1)), i64(0))
    low_side, high_side = b.fadd(lo, r), b.fsub(hi, r)
    out = b.select(below, b.select(even, low_side, high_side), b.select(even, high_side, low_side))
    out = b.select(b.fcmp_ordered(">", span, ir.Constant(F32, 0.0)), out, lo)
    inside = b.and_(b.fcmp_ordered(">=", x, lo), b.fcmp_ordered("<=", x, hi))
    return b.select(inside, x, out)


def _cubic_weights(b: ir.IRBuilder, t: ir.Value) -> list[ir.Value]:
    """Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 from floor."""
    a = -0.75

    def c(v: float) -> ir.Value:
        return ir.Constant(F32, v)

    def near(d: ir.Value) -> ir.Value:  # |d| <= 1
        return b.fadd(b.fmul(b.fmul(b.fsub(b.fmul(c(a + 2), d), c(a + 3)), d), d), c(1.0))

    def far(d: ir.Value) -> ir.Value:  # 1 < |d| < 2
        return b.fsub(b.fmul(b.fadd(b.fmul(b.fsub(b.fmul(c(a), d), c(5 * a)), d), c(8 * a)), d), c(4 * a))

    one = c(1.0)
    return [far(b.fadd(t, one)), near(t), near(b.fsub(one, t)), far(b.fsub(c(2.0), t))]


def build_grid_sample(kb: KernelBuilder, params: tuple[str, str, bool], types: Sequence[TensorType]) -> None:
    """ONNX GridSample over any number of spatial axes. ``params``: (mode: linear, nearest
    or cubic; padding: zeros, border or reflection; align_corners). Tensors: X (N, C,
    spatial...), grid (N, out spatial..., r), out (N, C, out spatial...)."""
    mode, padding, align = params
    b = kb.b
    x = kb.tensor(0, *types[0])
    g = kb.tensor(1, *types[1])
    y = kb.tensor(2, *types[2])
    r = x.rank - 2
    half, one = ir.Constant(F32, 0.5), ir.Constant(F32, 1.0)
    channels = x.dim(1)
    spatial = [x.dim(2 + i) for i in range(r)]
    plane = x.numel(2)
    positions = g.numel(1, g.rank - 1)
    xs = x.strides()
    acc_t = compute_type(x.dtype)
    with kb.loop(g.dim(0), name="n") as n:
        with kb.loop(positions, name="pos") as p:
            gbase = kb.mul(kb.add(kb.mul(n, positions), p), i64(r))
            taps: list[list[tuple[ir.Value, ir.Value, ir.Value]]] = []
            for i in range(r):
                d = spatial[i]
                df = b.sitofp(d, F32)
                # the grid lists coordinates innermost axis first
                u = convert(b, g.load(kb.add(gbase, i64(r - 1 - i))), g.dtype, FLOAT32)
                if align:
                    c = b.fmul(b.fmul(b.fadd(u, one), half), b.fsub(df, one))
                    lo, hi = ir.Constant(F32, 0.0), b.fsub(df, one)
                else:
                    c = b.fmul(b.fsub(b.fmul(b.fadd(u, one), df), one), half)
                    lo, hi = ir.Constant(F32, -0.5), b.fsub(df, half)
                if mode == "nearest":
                    c = intrinsic(b, "llvm.rint", c)
                if padding == "border":
                    c = b.select(b.fcmp_ordered("<", c, lo), ir.Constant(F32, 0.0), c)
                    top = b.fsub(df, one)
                    c = b.select(b.fcmp_ordered(">", c, hi), top, c)
                elif padding == "reflection":
                    c = _reflect(b, c, lo, hi)
                if mode == "nearest":
                    base, weights = fptosi_sat(b, c, I64), [one]
                    offsets = [0]
                else:
                    fl = intrinsic(b, "llvm.floor", c)
                    t = b.fsub(c, fl)
                    base = fptosi_sat(b, fl, I64)
                    if mode == "linear":
                        weights, offsets = [b.fsub(one, t), t], [0, 1]
                    else:
                        weights, offsets = _cubic_weights(b, t), [-1, 0, 1, 2]
                axis_taps = []
                for w, off in zip(weights, offsets):
                    idx = b.add(base, i64(off))
                    inside = b.icmp_unsigned("<", idx, d)
                    if padding == "border":
                        idx = intrinsic(b, "llvm.smin", intrinsic(b, "llvm.smax", idx, i64(0)), b.sub(d, i64(1)))
                        inside = ir.Constant(ir.IntType(1), 1)
                    elif padding == "reflection":
                        fi = _reflect(b, b.sitofp(idx, F32), lo, hi)
                        idx = fptosi_sat(b, fi, I64)
                        inside = b.icmp_unsigned("<", idx, d)
                    idx = b.select(inside, idx, i64(0))
                    axis_taps.append((kb.mul(idx, xs[2 + i]), w, inside))
                taps.append(axis_taps)
            corners = []
            for combo in itertools.product(*taps):
                off, w, ok = i64(0), one, ir.Constant(ir.IntType(1), 1)
                for o, wi, inside in combo:
                    off, w, ok = kb.add(off, o), b.fmul(w, wi), b.and_(ok, inside)
                w = b.select(ok, w, ir.Constant(F32, 0.0))
                corners.append((off, convert(b, w, FLOAT32, x.dtype)))
            with kb.loop(channels, name="c") as ch:
                src = kb.mul(kb.add(kb.mul(n, channels), ch), plane)
                total = ir.Constant(acc_t, 0.0)
                for off, w in corners:
                    v = x.load(kb.add(src, off))
                    total = b.fadd(total, b.fmul(w, v))
                y.store(kb.add(kb.mul(kb.add(kb.mul(n, channels), ch), positions), p), total)
