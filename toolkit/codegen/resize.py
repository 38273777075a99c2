"""Resize kernels: the output dims of run-time scales (or of sizes that keep the aspect
ratio), and the resampling itself.

Coordinates, weights and sums are float64 and follow onnx.reference operation for
operation (its separable form: one axis after another in ``axes`` order, so the innermost
sum is over the first resized axis), then the result is cast back as it does: floats
clipped to the dtype's finite range, integers rounded half to even and saturated. Nearest
copies the chosen element as stored. An axis whose scale turns out to be 1 with an
unchanged size (and, for tf_crop_and_resize, the whole roi) is copied through, as the
reference skips it. The last axis, when it is resized (and the mode is not antialiased or
tf_crop_and_resize), reads its taps from index and weight tables filled once per chunk of
:data:`TAP_CHUNK` output positions, not computed again for every element: in Node, a 2x
nearest upsampling of 64 x 56 x 56 went from 12.2 to 1.75 ms (onnxruntime-web 1.8), a linear
one from 19 to 5.5 ms.

Antialiasing (linear and cubic) stretches the kernel by 1 / min(scale, 1), so an output
reads a number of taps that depends on the scale: each resized axis gets a weights table,
a scratch tensor (output dim, taps) that the kernel fills once per call before resampling,
and each output sums its row in a loop. The taps are known at compile time when the scale
is, else :func:`build_resize_taps` computes them before the tables are allocated. (numpy
sums 8 or more taps along the last axis pairwise; this kernel sums them in order, so the
float64 sums may differ from the reference's in their last bits.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import FLOAT64, DType
from .kernel import (F32, F64, I64, STATUS_INVALID_INPUT, KernelBuilder, Tensor, at_entry, ceildiv, compute_type,
                     fptosi_sat, i64, intrinsic, llvm_type, smin, stored_constant)
from .scalar import convert

TensorType = tuple[DType, Sequence[Dim]]


def f64(v: float) -> ir.Constant:
    return ir.Constant(F64, float(v))


# output positions of the last axis whose taps one table holds (its chunk's index and
# weight tables, on the stack: 32 KiB for linear)
TAP_CHUNK = 1024

# the half-width of the unstretched kernel: inputs nearer than this to x have a weight
SUPPORT = {"linear": 1, "cubic": 2}


def antialias_taps(mode: str, scale: float) -> int:
    """The taps of one output of an antialiased axis, as onnx.reference counts them:
    ``2 - 2 * (floor(-support / min(scale, 1)) + 1)``, in float64 (``scale`` is the
    float64 value of the float32 scale, or output dim / input dim for sizes)."""
    return 2 - 2 * int(np.floor(-SUPPORT[mode] / min(scale, 1.0)) + 1)


def _taps_of(b: ir.IRBuilder, mode: str, scale: ir.Value) -> ir.Value:
    """:func:`antialias_taps` in IR (i64), for a positive scale (infinite: 1). A scale so
    small that the count overflows saturates; callers give such an axis no outputs."""
    s = b.select(b.fcmp_ordered("<", scale, f64(1.0)), scale, f64(1.0))
    start = fptosi_sat(b, b.fadd(intrinsic(b, "llvm.floor", b.fdiv(f64(-SUPPORT[mode]), s)), f64(1.0)), I64)
    return b.sub(i64(2), b.mul(i64(2), start))


# ----------------------------------------------------------------------------- output dims


@dataclass(frozen=True)
class DimsPlan:
    """``source``: "scales" or "sizes" (tensor 1); ``policy``: keep_aspect_ratio_policy
    (sizes only); ``axes``: the axis each element of tensor 1 is for."""

    source: str
    policy: str
    axes: tuple[int, ...]

    @property
    def kernel_name(self) -> str:
        return f"resize_dims_{self.source}"


def build_resize_dims(kb: KernelBuilder, plan: DimsPlan, types: Sequence[TensorType]) -> None:
    """Per element ``i`` of tensor 1: scalar ``2i`` := the output dim of axis ``axes[i]``,
    scalar ``2i + 1`` := the bits of its float64 scale. Scales: floor(scale * dim), failing
    (detail 0: i) unless the scale is positive. Sizes that keep the aspect ratio: one scale,
    the min (not_larger) or max (not_smaller) of size / dim, and round_half_up(scale * dim);
    a negative size fails (details i, size). Tensors: x, scales or sizes."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    v = kb.tensor(1, *types[1])
    dims = [b.sitofp(x.dim(a), F64) for a in plan.axes]
    if plan.source == "scales":
        for i, d in enumerate(dims):
            s = v.load(i64(i))
            s = b.fpext(s, F64) if s.type != F64 else s
            kb.fail_if(b.not_(b.fcmp_ordered(">", s, f64(0.0))), STATUS_INVALID_INPUT, [i64(i)])
            kb.set_scalar(2 * i, fptosi_sat(b, intrinsic(b, "llvm.floor", b.fmul(s, d)), I64))
            kb.set_scalar(2 * i + 1, b.bitcast(s, I64))
        return
    scale = None
    for i, d in enumerate(dims):
        size = v.load(i64(i))
        size = b.sext(size, I64) if size.type != I64 else size
        kb.fail_if(b.icmp_signed("<", size, i64(0)), STATUS_INVALID_INPUT, [i64(i), size])
        r = b.fdiv(b.sitofp(size, F64), d)
        if scale is None:
            scale = r
        else:  # numpy's min/max: NaN wins
            pick = b.fcmp_ordered("<" if plan.policy == "not_larger" else ">", r, scale)
            pick = b.or_(pick, b.fcmp_unordered("uno", r, r))
            scale = b.select(pick, r, scale)
    for i, d in enumerate(dims):
        # int(scale * dim + 0.5): truncation, the same as floor for what is not negative
        kb.set_scalar(2 * i, fptosi_sat(b, b.fadd(b.fmul(scale, d), f64(0.5)), I64))
        kb.set_scalar(2 * i + 1, b.bitcast(scale, I64))


@dataclass(frozen=True)
class TapsPlan:
    """The taps of antialiased axes whose scale is known only at run time. ``from_bits``:
    per axis, whether its scale is the float64 bits in a scalar (else output dim / input
    dim, as for sizes)."""

    mode: str
    axes: tuple[int, ...]
    from_bits: tuple[bool, ...]

    @property
    def kernel_name(self) -> str:
        return f"resize_taps_{self.mode}"


def build_resize_taps(kb: KernelBuilder, plan: TapsPlan, types: Sequence[TensorType]) -> None:
    """Per entry ``j`` of ``axes``: scalar ``2j + 1`` := :func:`antialias_taps` of its scale,
    0 when its output dim (scalar ``2j``) is 0 (a scale too small to count taps for makes
    no output; any output bounds the count by a few times the input dim). The scale bits
    of the ``from_bits`` axes follow, in order. Tensors: x."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    k = len(plan.axes)
    bits = 2 * k
    for j, (a, from_bits) in enumerate(zip(plan.axes, plan.from_bits)):
        n_out = kb.scalar(2 * j)
        if from_bits:
            scale = b.bitcast(kb.scalar(bits), F64)
            bits += 1
        else:
            scale = b.fdiv(b.sitofp(n_out, F64), b.sitofp(x.dim(a), F64))
        taps = _taps_of(b, plan.mode, scale)
        kb.set_scalar(2 * j + 1, b.select(b.icmp_signed(">", n_out, i64(0)), taps, i64(0)))


# ----------------------------------------------------------------------------- resampling


@dataclass(frozen=True)
class ResizedAxis:
    """One resized axis. Its scale is ``scale`` when known at compile time, else the float64
    bits in scalar ``slot``, else (neither) output dim / input dim (sizes). ``roi``: the
    index of the axis' roi start in tensor 1 (its end is ``roi + roi_half``)."""

    axis: int
    scale: float | None = None
    slot: int | None = None
    roi: int | None = None


def leaves(mode: str, axes: Sequence[ResizedAxis], antialias: bool = False) -> int:
    """How many reads one output element's code holds (each axis whose scale may be 1 at
    run time adds a branch with one read; an antialiased axis reads in a loop)."""
    n = 1
    for a in axes:
        reads = 1 if antialias or mode == "nearest" else {"linear": 2, "cubic": 4}[mode]
        n *= reads + (mode != "nearest" and a.scale in (None, 1.0))
    return n


@dataclass(frozen=True)
class ResizePlan:
    mode: str  # nearest, linear, cubic
    coord: str
    nearest_mode: str  # round_prefer_floor, round_prefer_ceil, floor, ceil, simple (Resize-10)
    cubic_a: float
    exclude_outside: bool
    extrapolation: float
    axes: tuple[ResizedAxis, ...]  # in the order they are resized
    roi_half: int
    antialias: bool = False  # linear and cubic: one weights table per axis
    rows: bool = False  # the second-to-last axis interpolated once per output row (:func:`.plan.rows_route`)

    @property
    def kernel_name(self) -> str:
        return f"resize_{self.mode}" + ("_antialias" if self.antialias else "")


@dataclass
class _Axis:
    """What the kernel knows of one resized axis at its entry."""

    spec: ResizedAxis
    n_in: ir.Value  # i64
    d_in: ir.Value  # float64
    d_out: ir.Value
    scale: ir.Value
    width: ir.Value  # scale * input dim: the reference's (fractional) output width
    roi: tuple[ir.Value, ir.Value] | None
    ident: ir.Value | None  # i1: this axis is copied through
    table: Tensor | None = None  # antialias: the weights, (output dim, taps)
    start: ir.Value | None = None  # antialias: the first tap's offset from the pixel left of x


@dataclass
class _Taps:
    """One output position of one axis: the input positions read and their weights."""

    index: list[ir.Value]
    weight: list[ir.Value]
    ident: ir.Value | None
    outside: ir.Value | None  # i1: tf_crop_and_resize extrapolates here
    y: ir.Value  # the output position (the input position when the axis is copied through)
    first: ir.Value | None = None  # antialias: the first tap's (unclamped) input position
    row: ir.Value | None = None  # antialias: where the weights start in the table


def _coordinate(b: ir.IRBuilder, plan: ResizePlan, ax: _Axis, y: ir.Value) -> ir.Value:
    """x_original of output position ``y`` (float64), as onnx.reference computes it."""
    s, w, d_in = ax.scale, ax.width, ax.d_in
    half = b.fsub(b.fdiv(b.fadd(y, f64(0.5)), s), f64(0.5))
    one_wide = b.fcmp_ordered("==", w, f64(1.0))
    coord = plan.coord
    if coord == "half_pixel":
        return half
    if coord == "pytorch_half_pixel":
        return b.select(one_wide, f64(-0.5), half)
    if coord == "tf_half_pixel_for_nn":
        return b.fdiv(b.fadd(y, f64(0.5)), s)
    if coord == "asymmetric":
        return b.fdiv(y, s)
    if coord == "half_pixel_symmetric":
        adjustment = b.fdiv(ax.d_out, w)
        offset = b.fmul(b.fdiv(d_in, f64(2.0)), b.fsub(f64(1.0), adjustment))
        return b.fsub(b.fadd(offset, b.fdiv(b.fadd(y, f64(0.5)), s)), f64(0.5))
    last = b.fsub(d_in, f64(1.0))
    if coord == "align_corners":
        return b.select(one_wide, f64(0.0), b.fdiv(b.fmul(y, last), b.fsub(w, f64(1.0))))
    assert coord == "tf_crop_and_resize", coord
    start, end = ax.roi
    rt = start.type
    # the roi's own precision where numpy keeps it (its elements are numpy scalars)
    span = b.fsub(end, start)
    last_rt = b.sitofp(b.sub(ax.n_in, i64(1)), rt)
    base = b.fmul(start, last_rt)
    mid = b.fdiv(b.fmul(span, last_rt), ir.Constant(rt, 2.0))
    ext = (lambda v: b.fpext(v, F64)) if rt != F64 else (lambda v: v)
    spread = b.fdiv(b.fmul(b.fmul(y, ext(span)), last), b.fsub(w, f64(1.0)))
    return b.fadd(b.select(one_wide, ext(mid), spread), ext(base))


def _cubic(b: ir.IRBuilder, r: ir.Value, a: float) -> list[ir.Value]:
    """onnx.reference's cubic coefficients at ratio ``r`` (in (0, 1]): its ``A`` is the
    float32 attribute, so numpy computes them in float32 (as onnxruntime does), from
    distances computed in float64."""
    a32 = np.float32(a)

    def c(v) -> ir.Constant:
        return ir.Constant(F32, float(np.float32(v)))

    A, A5, A8, A4 = c(a32), c(a32 * np.float32(5)), c(a32 * np.float32(8)), c(a32 * np.float32(4))

    def outer(t):  # ((A * t - 5A) * t + 8A) * t - 4A, t = distance in (1, 2]
        t = b.fptrunc(t, F32)
        v = b.fsub(b.fmul(A, t), A5)
        v = b.fadd(b.fmul(v, t), A8)
        return b.fpext(b.fsub(b.fmul(v, t), A4), F64)

    def inner(t):  # ((A + 2) * t - (A + 3)) * t * t + 1, t in [0, 1]
        t = b.fptrunc(t, F32)
        v = b.fsub(b.fmul(c(a32 + np.float32(2)), t), c(a32 + np.float32(3)))
        return b.fpext(b.fadd(b.fmul(b.fmul(v, t), t), c(1.0)), F64)

    rc = b.fsub(f64(1.0), r)
    return [outer(b.fadd(r, f64(1.0))), inner(r), inner(rc), outer(b.fadd(rc, f64(1.0)))]


def _left(b: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The input position left of ``x`` (i64) and ``x``'s distance from it: the reference
    prefers the pixel left of x, so at an integer x the distance is 1, not 0."""
    fl = intrinsic(b, "llvm.floor", x)
    ratio = b.fsub(x, fl)
    is_int = b.fcmp_ordered("==", ratio, f64(0.0))
    return fptosi_sat(b, b.select(is_int, b.fsub(fl, f64(1.0)), fl), I64), b.select(is_int, f64(1.0), ratio)


def _antialias_cubic(b: ir.IRBuilder, d: ir.Value, a: float) -> tuple[ir.Value, ir.Value]:
    """onnx.reference's antialiased cubic weight at stretched distance ``d`` (float64), and
    whether it is its Python ``0.0`` (distance 2 or more) rather than a float32: x, x**2 and
    x**3 are float64, rounded to float32 where they meet the float32 ``A``."""
    a32 = np.float32(a)

    def c(v) -> ir.Constant:
        return ir.Constant(F32, float(np.float32(v)))

    x = intrinsic(b, "llvm.fabs", d)
    x2 = b.fmul(x, x)
    x3 = b.fmul(x, x2)
    x1_, x2_, x3_ = (b.fptrunc(v, F32) for v in (x, x2, x3))
    # (A + 2) * x3 - (A + 3) * x2 + 1, for x <= 1
    near = b.fadd(b.fsub(b.fmul(c(a32 + np.float32(2)), x3_), b.fmul(c(a32 + np.float32(3)), x2_)), c(1.0))
    # A * x3 - 5A * x2 + 8A * x - 4A, for 1 < x < 2
    far = b.fmul(c(a32), x3_)
    far = b.fsub(far, b.fmul(c(np.float32(5) * a32), x2_))
    far = b.fadd(far, b.fmul(c(np.float32(8) * a32), x1_))
    far = b.fsub(far, c(np.float32(4) * a32))
    zero = b.fcmp_unordered(">=", x, f64(2.0))
    v = b.select(b.fcmp_ordered("<=", x, f64(1.0)), near, far)
    return b.select(zero, f64(0.0), b.fpext(v, F64)), zero


def _fill_weights(kb: KernelBuilder, plan: ResizePlan, ax: _Axis) -> None:
    """Fill ``ax.table``: row ``y`` holds the weights of output ``y``'s taps, as
    onnx.reference computes them (its ``_linear_coeffs_antialias`` and
    ``_cubic_coeffs_antialias``, then exclude_outside). Linear is float64 throughout. Cubic
    weights are float32 and so is their sum; they are divided by it in float64 when one of
    them is the Python 0.0 (numpy then makes the array float64), else in float32."""
    b = kb.b
    table, n, start = ax.table, ax.table.dim(1), ax.start
    s = b.select(b.fcmp_ordered("<", ax.scale, f64(1.0)), ax.scale, f64(1.0))
    cubic = plan.mode == "cubic"
    with kb.loop(table.dim(0), name="wy") as y:
        x = _coordinate(b, plan, ax, b.sitofp(y, F64))
        left, ratio = _left(b, x)
        row = b.mul(y, n)

        def raw(t: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            d = b.fmul(b.fsub(b.sitofp(b.add(start, t), F64), ratio), s)
            if cubic:
                w, zero = _antialias_cubic(b, d, plan.cubic_a)
                table.store(b.add(row, t), w)
                return [b.fadd(vals[0], b.fptrunc(w, F32)), b.or_(vals[1], zero)]
            w = b.fsub(f64(1.0), intrinsic(b, "llvm.fabs", d))
            w = b.select(b.fcmp_ordered(">", w, f64(1.0)), f64(1.0), b.select(b.fcmp_ordered("<", w, f64(0.0)),
                                                                             f64(0.0), w))
            table.store(b.add(row, t), w)
            return [b.fadd(vals[0], w)]

        if cubic:
            total, any_zero = kb.carry(i64(0), n, [ir.Constant(F32, 0.0), ir.Constant(ir.IntType(1), 0)], raw,
                                       name="wsum")
        else:
            (total,) = kb.carry(i64(0), n, [f64(0.0)], raw, name="wsum")
        first = b.add(left, start)

        def normalize(t: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
            at = b.add(row, t)
            w = table.load(at)
            if cubic:
                wide = b.fdiv(w, b.fpext(total, F64))
                w = b.select(any_zero, wide, b.fpext(b.fdiv(b.fptrunc(w, F32), total), F64))
            else:
                w = b.fdiv(w, total)
            if not plan.exclude_outside:
                table.store(at, w)
                return []
            w = b.select(b.icmp_unsigned("<", b.add(first, t), ax.n_in), w, f64(0.0))
            table.store(at, w)
            return [b.fadd(vals[0], w)]

        if not plan.exclude_outside:
            kb.carry(i64(0), n, [], normalize, name="wnorm")
        else:
            (kept,) = kb.carry(i64(0), n, [f64(0.0)], normalize, name="wnorm")
            kept = b.select(b.fcmp_ordered("==", kept, f64(0.0)), f64(1.0), kept)

            def rescale(t: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
                at = b.add(row, t)
                table.store(at, b.fdiv(table.load(at), kept))
                return []

            kb.carry(i64(0), n, [], rescale, name="wexcl")


def _taps(kb: KernelBuilder, plan: ResizePlan, ax: _Axis, y: ir.Value) -> _Taps:
    b = kb.b
    yd = b.sitofp(y, F64)
    x = _coordinate(b, plan, ax, yd)
    top = b.sub(ax.n_in, i64(1))

    def clamp(v: ir.Value) -> ir.Value:
        return intrinsic(b, "llvm.smax", i64(0), intrinsic(b, "llvm.smin", v, top))

    def to_int(v: ir.Value) -> ir.Value:
        return fptosi_sat(b, v, I64)

    outside = None
    if plan.coord == "tf_crop_and_resize":
        outside = b.or_(b.fcmp_ordered("<", x, f64(0.0)), b.fcmp_ordered(">", x, b.fsub(ax.d_in, f64(1.0))))
    if plan.mode == "nearest":
        fl = intrinsic(b, "llvm.floor", x)
        ratio = b.fsub(x, fl)
        nm = plan.nearest_mode
        up = b.fadd(fl, f64(1.0))
        if nm == "round_prefer_floor":
            pos = b.select(b.fcmp_ordered("<=", ratio, f64(0.5)), fl, up)
        elif nm == "round_prefer_ceil":
            pos = b.select(b.fcmp_ordered("<", ratio, f64(0.5)), fl, up)
        elif nm == "floor":
            pos = fl
        elif nm == "ceil":
            pos = intrinsic(b, "llvm.ceil", x)
        else:  # simple (Resize-10, as onnxruntime): up when downsampling, else down
            pos = b.select(b.fcmp_ordered("<", ax.scale, f64(1.0)), intrinsic(b, "llvm.ceil", x), fl)
        return _Taps([clamp(to_int(pos))], [], None, outside, y)
    left, ratio = _left(b, x)
    if ax.table is not None:
        return _Taps([], [], ax.ident, outside, y, b.add(left, ax.start), b.mul(y, ax.table.dim(1)))
    if plan.mode == "linear":
        first, weights = left, [b.fsub(f64(1.0), ratio), ratio]
    else:
        first, weights = b.sub(left, i64(1)), _cubic(b, ratio, plan.cubic_a)
    raw = [b.add(first, i64(t)) for t in range(len(weights))]
    if plan.exclude_outside:
        weights = [b.select(b.icmp_unsigned("<", r, ax.n_in), w, f64(0.0)) for r, w in zip(raw, weights)]
        total = weights[0]
        for w in weights[1:]:
            total = b.fadd(total, w)
        total = b.select(b.fcmp_ordered("==", total, f64(0.0)), f64(1.0), total)
        weights = [b.fdiv(w, total) for w in weights]
    return _Taps([clamp(r) for r in raw], weights, ax.ident, outside, y)


def _store_value(kb: KernelBuilder, o: Tensor, at: ir.Value, v: ir.Value) -> None:
    """Store float64 ``v`` as onnx.reference's saturate_cast does."""
    b = kb.b
    dt = o.dtype
    if dt.is_float:
        big = float(np.finfo(dt.np).max)
        v = b.select(b.fcmp_ordered(">", v, f64(big)), f64(big), v)
        v = b.select(b.fcmp_ordered("<", v, f64(-big)), f64(-big), v)
        t = compute_type(dt)
        o.store(at, b.fptrunc(v, t) if t != F64 else v)
        return
    # round half to even, then saturate (fptosi.sat clips to the integer range)
    o.store(at, fptosi_sat(b, intrinsic(b, "llvm.rint", v), llvm_type(dt), signed=dt.is_signed))


def _resized_axes(kb: KernelBuilder, plan: ResizePlan, types: Sequence[TensorType], x: Tensor, o: Tensor,
                  roi_t: Tensor | None) -> dict[int, _Axis]:
    """Each resized axis's sizes, scale, roi, whether it is copied through and (antialias)
    its weights table, filled here; an empty axis resized to a non-empty one fails."""
    b = kb.b
    first_table = 1 + (roi_t is not None)
    axes: dict[int, _Axis] = {}
    for spec in plan.axes:
        a = spec.axis
        n_in, n_out = x.dim(a), o.dim(a)
        kb.fail_if(b.and_(b.icmp_signed("==", n_in, i64(0)), b.icmp_signed(">", n_out, i64(0))),
                   STATUS_INVALID_INPUT, [i64(a), n_out])
        d_in, d_out = b.sitofp(n_in, F64), b.sitofp(n_out, F64)
        if spec.scale is not None:
            scale = f64(spec.scale)
        elif spec.slot is not None:
            scale = b.bitcast(kb.scalar(spec.slot), F64)
        else:
            scale = b.fdiv(d_out, d_in)
        roi = None
        if roi_t is not None:
            roi = (roi_t.load(i64(spec.roi)), roi_t.load(i64(spec.roi + plan.roi_half)))
        ident = None
        if plan.mode != "nearest" and spec.scale in (None, 1.0):
            ident = b.and_(b.fcmp_ordered("==", scale, f64(1.0)), b.icmp_signed("==", n_in, n_out))
            if roi is not None:
                ident = b.and_(ident, b.and_(b.fcmp_ordered("==", roi[0], ir.Constant(roi[0].type, 0.0)),
                                             b.fcmp_ordered("==", roi[1], ir.Constant(roi[1].type, 1.0))))
        table = start = None
        if plan.antialias:
            table = kb.tensor(first_table + len(axes), *types[first_table + len(axes)])
            start = b.sub(i64(1), b.ashr(table.dim(1), i64(1)))  # the taps are 2 - 2 * start
        axes[a] = _Axis(spec, n_in, d_in, d_out, scale, b.fmul(scale, d_in), roi, ident, table, start)
        if table is not None:
            _fill_weights(kb, plan, axes[a])
    return axes


def _weighted(b: ir.IRBuilder, terms: list[ir.Value], weights: list[ir.Value]) -> ir.Value:
    """terms[0] * weights[0] + terms[1] * weights[1] + ..., in that order: one axis's
    interpolation, element by element and by rows alike."""
    acc = b.fmul(terms[0], weights[0])
    for term, wt in zip(terms[1:], weights[1:]):
        acc = b.fadd(acc, b.fmul(term, wt))
    return acc


@dataclass(frozen=True)
class _Resampler:
    """One Resize kernel's tensors, axes and tap tables (made at its entry) and the code it
    writes for the output's elements, rows and chunks of the last axis."""

    kb: KernelBuilder
    plan: ResizePlan
    x: Tensor
    o: Tensor
    xs: list[ir.Value]  # x's strides
    os_: list[ir.Value]  # o's strides
    axes: dict[int, _Axis]
    ev_raw: ir.Value | None  # nearest: the extrapolation value as x stores it
    ntaps: int  # tabled: input positions per output of the last axis
    idx_tab: ir.Value | None  # tabled: the chunk's input positions
    w_tab: ir.Value | None  # tabled (not nearest): the chunk's weights
    row_t: Tensor | None  # plan.rows: the float64 row of interpolated input rows

    @property
    def order(self) -> list[int]:
        return [spec.axis for spec in self.plan.axes]

    def level_load(self, off: ir.Value) -> ir.Value:
        """x's element at ``off`` in float64."""
        b, x = self.kb.b, self.x
        v = x.load(off)
        return v if v.type == F64 else (b.fpext(v, F64) if x.dtype.is_float else convert(b, v, x.dtype, FLOAT64))

    def value(self, taps: dict[int, _Taps], x_base: ir.Value) -> ir.Value:
        """The output element (nearest: as stored; else float64)."""
        kb, b = self.kb, self.kb.b
        if self.plan.mode == "nearest":
            off = x_base
            outside = None
            for a in self.order:
                off = kb.add(off, kb.mul(taps[a].index[0], self.xs[a]))
                t = taps[a].outside
                if t is not None:
                    outside = t if outside is None else b.or_(outside, t)
            v = self.x.load_raw(off)
            return v if outside is None else b.select(outside, self.ev_raw, v)
        return self.level(taps, len(self.order) - 1, x_base)

    def level(self, taps: dict[int, _Taps], j: int, off: ir.Value) -> ir.Value:
        """The interpolation over the first j + 1 resized axes (in order) from ``off``."""
        kb, b = self.kb, self.kb.b
        if j < 0:
            return self.level_load(off)
        t = taps[self.order[j]]
        if t.ident is None:
            acc = self.interpolate(taps, j, off)
        else:
            # a branch, not a select: an axis copied through (scale 1 known only at run
            # time, as for the batch axis of run-time sizes) costs one read, not n
            with b.if_else(t.ident) as (copied, resampled):
                with copied:
                    same = self.level(taps, j - 1, kb.add(off, kb.mul(t.y, self.xs[self.order[j]])))
                    from_copied = b.block
                with resampled:
                    mixed = self.interpolate(taps, j, off)
                    from_resampled = b.block
            acc = b.phi(F64)
            acc.add_incoming(same, from_copied)
            acc.add_incoming(mixed, from_resampled)
        if t.outside is not None:
            acc = b.select(t.outside, f64(self.plan.extrapolation), acc)
        return acc

    def interpolate(self, taps: dict[int, _Taps], j: int, off: ir.Value) -> ir.Value:
        """Resized axis j's taps of the lower levels, weighted (antialias: a loop over the
        axis's weights table)."""
        kb, b = self.kb, self.kb.b
        a = self.order[j]
        t = taps[a]
        if t.first is not None:
            table, top = self.axes[a].table, b.sub(self.axes[a].n_in, i64(1))

            def tap(k: ir.Value, vals: list[ir.Value]) -> list[ir.Value]:
                i = intrinsic(b, "llvm.smax", i64(0), intrinsic(b, "llvm.smin", b.add(t.first, k), top))
                v = self.level(taps, j - 1, kb.add(off, kb.mul(i, self.xs[a])))
                return [b.fadd(vals[0], b.fmul(v, table.load(b.add(t.row, k))))]

            # -0.0 + v is v for every v: the sum starts with the first product
            return kb.carry(i64(0), table.dim(1), [f64(-0.0)], tap, name=f"tap{a}")[0]
        return _weighted(b, [self.level(taps, j - 1, kb.add(off, kb.mul(i, self.xs[a]))) for i in t.index], t.weight)

    def slot(self, tab: ir.Value, t: int, k: ir.Value) -> ir.Value:
        """Where a tap table holds tap t of the chunk's output k."""
        b = self.kb.b
        at = b.gep(tab, [i64(0), b.add(i64(t * TAP_CHUNK), k)], source_etype=tab.type.pointee)
        return b.bitcast(at, tab.type.pointee.element.as_pointer())

    def rows(self, x_base: ir.Value, o_off: ir.Value, chunk) -> None:
        """Output rows of the last two axes (plan.rows): per output row, its input rows'
        interpolation for every input column into row_t, then the chunk's outputs from it."""
        kb, b, x, o, xs = self.kb, self.kb.b, self.x, self.o, self.xs
        h, w = x.rank - 2, x.rank - 1
        c0, cn = chunk
        with kb.loop(o.dim(h), name="oy") as y:
            t = _taps(kb, self.plan, self.axes[h], y)
            with kb.loop(x.dim(w), name="ix") as ix:
                terms = [self.level_load(kb.add(x_base, kb.add(kb.mul(i, xs[h]), ix))) for i in t.index]
                self.row_t.store(ix, _weighted(b, terms, t.weight))
            o_row = kb.add(o_off, kb.mul(y, self.os_[h]))
            with kb.loop(cn, name="ox") as k:
                terms = [self.row_t.load(b.load(self.slot(self.idx_tab, i, k))) for i in range(self.ntaps)]
                v = _weighted(b, terms, [b.load(self.slot(self.w_tab, i, k)) for i in range(self.ntaps)])
                _store_value(kb, o, kb.add(o_row, kb.mul(b.add(c0, k), self.os_[w])), v)

    def walk(self, axis: int, x_base: ir.Value, o_off: ir.Value, taps: dict[int, _Taps], chunk=None) -> None:
        """The output from ``axis`` on, at x_base and o_off (the outer axes' offsets), the
        outer resized axes' taps in ``taps``; the last axis over ``chunk`` (its first
        output and count) when its taps come from the tables."""
        kb, b, x, o = self.kb, self.kb.b, self.x, self.o
        if self.plan.rows and axis == x.rank - 2:
            self.rows(x_base, o_off, chunk)
            return
        if axis == x.rank:
            v = self.value(taps, x_base)
            if self.plan.mode == "nearest":
                o.store_raw(o_off, v)
            else:
                _store_value(kb, o, o_off, v)
            return
        if axis == x.rank - 1 and chunk is not None:
            c0, cn = chunk
            with kb.loop(cn, name=f"ax{axis}") as k:
                y = b.add(c0, k)
                t = _Taps([b.load(self.slot(self.idx_tab, i, k)) for i in range(self.ntaps)],
                          [b.load(self.slot(self.w_tab, i, k)) for i in range(self.ntaps)]
                          if self.w_tab is not None else [],
                          self.axes[axis].ident, None, y)
                self.walk(axis + 1, x_base, kb.add(o_off, kb.mul(y, self.os_[axis])), {**taps, axis: t})
            return
        with kb.loop(o.dim(axis), name=f"ax{axis}") as y:
            o_next = kb.add(o_off, kb.mul(y, self.os_[axis]))
            if axis in self.axes:
                self.walk(axis + 1, x_base, o_next, {**taps, axis: _taps(kb, self.plan, self.axes[axis], y)}, chunk)
            else:
                self.walk(axis + 1, kb.add(x_base, kb.mul(y, self.xs[axis])), o_next, taps, chunk)

    def walk_chunks(self) -> None:
        """The output a chunk of TAP_CHUNK positions of the last axis at a time: the chunk's
        taps into the tables, then the walk over the other axes reading them."""
        kb, b, last = self.kb, self.kb.b, self.x.rank - 1
        n_last = self.o.dim(last)
        with kb.loop(ceildiv(kb, n_last, i64(TAP_CHUNK)), name="tc") as ch:
            c0 = kb.mul(ch, i64(TAP_CHUNK))
            cn = smin(kb, i64(TAP_CHUNK), b.sub(n_last, c0))
            with kb.loop(cn, name="tf") as k:
                t = _taps(kb, self.plan, self.axes[last], b.add(c0, k))
                for i, v in enumerate(t.index):
                    b.store(v, self.slot(self.idx_tab, i, k))
                for i, v in enumerate(t.weight):
                    b.store(v, self.slot(self.w_tab, i, k))
            self.walk(0, i64(0), i64(0), {}, (c0, cn))


def build_resize(kb: KernelBuilder, plan: ResizePlan, types: Sequence[TensorType]) -> None:
    """out = Resize(x). Scalars: the float64 bits of each run-time scale (``ResizedAxis.slot``).
    Tensors: x, [roi (tf_crop_and_resize)], [antialias: a float64 weights table (output
    dim, taps) per entry of ``axes``, which the kernel fills], out. Fails (details: axis,
    output dim) when an empty axis is resized to a non-empty one."""
    b = kb.b
    x = kb.tensor(0, *types[0])
    roi_t = kb.tensor(1, *types[1]) if plan.coord == "tf_crop_and_resize" else None
    o = kb.tensor(len(types) - 1, *types[-1])
    xs, os_ = x.strides(), o.strides()
    axes = _resized_axes(kb, plan, types, x, o, roi_t)

    ev_raw = None
    if plan.mode == "nearest":
        ev = np.array(plan.extrapolation, np.float64)
        if not x.dtype.is_float:
            ev = np.round(ev)
            info = np.iinfo(x.dtype.np)
            ev = np.clip(ev, info.min, info.max)
        ev_raw = stored_constant(x.dtype, ev)

    # The last axis, when resized, reads its taps from tables filled once per chunk of
    # TAP_CHUNK output positions rather than computing them (float64 divisions, floor,
    # clamps) for every element: the same values, so the same results
    tabled = x.rank - 1 in axes and plan.coord != "tf_crop_and_resize" and not plan.antialias
    ntaps, idx_tab, w_tab = 0, None, None
    if tabled:
        # input positions per output: one for nearest, the unstretched kernel's width else
        ntaps = 2 * SUPPORT[plan.mode] if plan.mode in SUPPORT else 1
        with at_entry(kb):
            idx_tab = b.alloca(ir.ArrayType(I64, ntaps * TAP_CHUNK), name="tap_index")
            w_tab = b.alloca(ir.ArrayType(F64, ntaps * TAP_CHUNK), name="tap_weight") \
                if plan.mode != "nearest" else None

    row_t = kb.tensor(len(types) - 2, FLOAT64, types[-2][1]) if plan.rows else None
    resampler = _Resampler(kb, plan, x, o, xs, os_, axes, ev_raw, ntaps, idx_tab, w_tab, row_t)
    if tabled:
        resampler.walk_chunks()
    else:
        resampler.walk(0, i64(0), i64(0), {})
