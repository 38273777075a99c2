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

from ..ir.dims import Dim
from ..ir.dtypes import DType
from .kernel import (F32, I64, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, intrinsic)
from .expr import I1, Ex, below, const, ex, maximum, minimum, where
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


def _reflect(x: Ex, lo: Ex | float, hi: Ex) -> Ex:
    """``x`` reflected off the borders ``lo`` and ``hi`` until it lies between them."""
    span = hi - lo
    safe = where(span > 0.0, span, 1.0)
    below = x < lo
    dx = where(below, lo - x, x - hi)
    k = (dx / safe).to(I64)
    r = dx - k.to(F32) * span
    even = (k & 1) == 0
    low_side, high_side = lo + r, hi - r
    out = where(below, where(even, low_side, high_side), where(even, high_side, low_side))
    out = where(span > 0.0, out, lo)
    inside = (x >= lo) & (x <= hi)
    return where(inside, x, out)


def _cubic_weights(t: Ex) -> list[Ex]:
    """Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 from floor."""
    a = -0.75

    def near(d: Ex) -> Ex:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1.0

    def far(d: Ex) -> Ex:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _axis_taps(kb: KernelBuilder, u: Ex, d: Ex, stride: Ex, params: tuple[str, str, bool]) -> list[tuple[Ex, Ex, Ex]]:
    """The taps (offset along the axis, weight, inside the input) of grid coordinate ``u``
    on an input axis of ``d`` elements and ``stride``."""
    mode, padding, align = params
    b = kb.b
    df = d.to(F32)
    if align:
        c = (u + 1.0) * 0.5 * (df - 1.0)
        lo, hi = 0.0, df - 1.0
    else:
        c = ((u + 1.0) * df - 1.0) * 0.5
        lo, hi = -0.5, df - 0.5
    if mode == "nearest":
        c = ex(b, intrinsic(b, "llvm.rint", c.v))
    if padding == "border":
        c = where(c < lo, 0.0, c)
        top = df - 1.0
        c = where(c > hi, top, c)
    elif padding == "reflection":
        c = _reflect(c, lo, hi)
    if mode == "nearest":
        base, weights, offsets = c.to(I64), [const(b, F32, 1.0)], [0]
    else:
        fl = c.floor()
        t = c - fl
        base = fl.to(I64)
        if mode == "linear":
            weights, offsets = [1.0 - t, t], [0, 1]
        else:
            weights, offsets = _cubic_weights(t), [-1, 0, 1, 2]
    taps = []
    for w, off in zip(weights, offsets):
        idx = base + off
        inside = below(idx, d)
        if padding == "border":
            idx = minimum(maximum(idx, 0), d - 1)
            inside = const(b, I1, 1)
        elif padding == "reflection":
            idx = _reflect(idx.to(F32), lo, hi).to(I64)
            inside = below(idx, d)
        taps.append((where(inside, idx, 0) * stride, w, inside))
    return taps


def build_grid_sample(kb: KernelBuilder, params: tuple[str, str, bool], types: Sequence[TensorType]) -> None:
    """ONNX GridSample over any number of spatial axes. ``params``: (mode: linear, nearest
    or cubic; padding: zeros, border or reflection; align_corners). Tensors: X (N, C,
    spatial...), grid (N, out spatial..., r), out (N, C, out spatial...)."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    g = kb.tensor(1, *types[1])
    y = kb.tensor(2, *types[2])
    r = x.rank - 2
    channels = x.dims[1]
    plane, positions = ex(b, x.numel(2)), ex(b, g.numel(1, g.rank - 1))
    xs = x.strides()
    with kb.range(g.dims[0], "n") as n, kb.range(positions, "pos") as p:
        gbase = (n * positions + p) * r
        # the grid lists coordinates innermost axis first
        taps = [_axis_taps(kb, g.flat[gbase + (r - 1 - i)].to(F32), x.dims[2 + i], ex(b, xs[2 + i]), params)
                for i in range(r)]
        corners = []
        for combo in itertools.product(*taps):
            off, w, ok = const(b, I64, 0), const(b, F32, 1.0), const(b, I1, 1)
            for o, wi, inside in combo:
                off, w, ok = off + o, w * wi, ok & inside
            corners.append((off, where(ok, w, 0.0).to(x.ctype)))
        with kb.range(channels, "c") as ch:
            src = (n * channels + ch) * plane
            total = const(b, x.ctype, 0.0)
            for off, w in corners:
                total = total + w * x.flat[src + off]
            y.flat[(n * channels + ch) * positions + p] = total
