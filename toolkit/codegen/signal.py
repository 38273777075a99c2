"""Kernels of the signal and vision ops: the Fourier transforms (DFT, STFT), TensorScatter,
RoiAlign, MaxRoiPool, AffineGrid, TfIdfVectorizer and MelWeightMatrix.

The Fourier kernels transform one line at a time in a float64 scratch buffer (every input
dtype computes in double: wasm's scalar double arithmetic costs what float's does, and the
results then round once). A line of power-of-two length ``n`` goes through an iterative
radix-2 FFT; any other length through Bluestein's chirp-z transform, which turns the DFT
into a cyclic convolution of power-of-two length ``m >= 2n - 1`` done with the same FFT.
The twiddle factors, the chirp and the transformed chirp filter are computed once per call,
before the lines. The length is a run-time value (``dft_length`` may be), so both paths are
in every kernel. The radix-2 FFT is its own internal function (the kernel calls it up to
three times per line); it has the kernel signature, so it polls the cancel flag as kernels
do, and its status is passed on.

Scratch layout (doubles), for a transform length n: with n a power of two, twiddles
(n) then the line (2n); otherwise, for m the convolution length, twiddles (m), the chirp
(2n), the filter's transform (2m) and the line (2m). 5m + 2n < 22n bounds both
(:data:`SCRATCH_PER_POINT`).
"""
from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Sequence

from llvmlite import ir

from ..ir.dims import Dim
from ..ir.dtypes import FLOAT64, DType
from . import mathlib
from .expr import Ex, below, clamp, const, ex, maximum, minimum, where
from .kernel import (F64, I64, STATUS_CANCELLED, WHOLE, STATUS_OUT_OF_RANGE, KernelBuilder, Tensor, i64,
                     intrinsic)
from .scalar import convert

TensorType = tuple[DType, Sequence[Dim]]
I1 = ir.IntType(1)
SCRATCH_PER_POINT = 22


# ----------------------------------------------------------------------------- complex helpers

Complex = tuple[Ex, Ex]


class _Complex:
    """A float64 array of interleaved (re, im) pairs at ``base`` (in doubles) of a pointer."""

    def __init__(self, b: ir.IRBuilder, ptr: ir.Value, base: Ex):
        self.b, self.ptr, self.base = b, ptr, base

    def _at(self, k: Ex, part: int) -> ir.Value:
        return self.b.gep(self.ptr, [(self.base + ((k << 1) + part)).v], source_etype=F64)

    def load(self, k: Ex) -> Complex:
        return (ex(self.b, self.b.load(self._at(k, 0), typ=F64)), ex(self.b, self.b.load(self._at(k, 1), typ=F64)))

    def store(self, k: Ex, v: Complex) -> None:
        self.b.store(v[0].v, self._at(k, 0))
        self.b.store(v[1].v, self._at(k, 1))


def _cmul(x: Complex, y: Complex) -> Complex:
    return x[0] * y[0] - x[1] * y[1], x[0] * y[1] + x[1] * y[0]


def _unit(b: ir.IRBuilder, angle: Ex) -> Complex:
    """exp(i * angle)."""
    return ex(b, mathlib.cos(b, angle.v)), ex(b, mathlib.sin(b, angle.v))


def _log2(b: ir.IRBuilder, m: Ex) -> Ex:
    """log2 of a power of two."""
    return ex(b, intrinsic(b, "llvm.cttz", m.v, ir.Constant(I1, 0)))


# ----------------------------------------------------------------------------- radix-2 FFT


def _fft_function(kb: KernelBuilder) -> ir.Function:
    """The in-place radix-2 FFT for ``kb``'s kernel, as an internal function with the kernel
    signature: (data: m interleaved complex doubles, params: [m, inverse], twiddles: m/2
    complex exp(-2 pi i j / m), cancel). Unnormalized; ``inverse`` conjugates the twiddles."""
    name = f"{kb.fn.name}.fft"
    if name in kb.module.globals:
        return kb.module.globals[name]
    f = KernelBuilder(kb.module, name, kb.target)
    b = f.b
    zero = const(b, I64, 0)
    data = _Complex(b, f.fn.args[0], zero)
    tw = _Complex(b, f.fn.args[2], zero)
    m = ex(b, f.scalar(0))
    sign = where(ex(b, f.scalar(1)) != 0, const(b, F64, -1.0), 1.0)
    bits = _log2(b, m)
    with f.range(m, "perm") as i:
        def rev(t: Ex, r: list[Ex]) -> list[Ex]:
            bit = (i >> t) & 1  # i >= 0
            return [(r[0] << 1) | bit]

        j = f.iterate(0, bits, [zero], rev, name="bit")[0]
        with b.if_then((i < j).v):
            u, v = data.load(i), data.load(j)
            data.store(i, v)
            data.store(j, u)
    with f.range(bits, "stage") as s:
        half = const(b, I64, 1) << s
        groups = m >> (s + 1)  # also the twiddle step
        with f.range(groups, "group") as g:
            base = g << (s + 1)
            with f.range(half, "bfly") as k:
                w = tw.load(k * groups)
                w = (w[0], w[1] * sign)
                p = base + k
                q = p + half
                u = data.load(p)
                v = _cmul(data.load(q), w)
                data.store(p, (u[0] + v[0], u[1] + v[1]))
                data.store(q, (u[0] - v[0], u[1] - v[1]))
    f.finish()
    return f.fn


class _Transform:
    """What one kernel needs to transform lines of length ``n`` (a run-time value) in the
    float64 scratch tensor: :meth:`prepare` once, then per line :meth:`line` (where to put
    the input, ``n`` values), :meth:`run`, and read the result from :meth:`line`."""

    def __init__(self, kb: KernelBuilder, scratch: Tensor, n: Ex, inverse: bool):
        self.kb, self.n, self.inverse = kb, n, inverse
        b = self.b = kb.b
        self.fft = _fft_function(kb)
        self.args = b.alloca(I64, size=i64(2), name="fft.args")
        self.ptr = scratch.data
        self.pow2 = (n & (n - 1)) == 0
        # m: the power of two >= 2n - 1 (only used when n is not one; n = 1 is a power of two)
        top = 64 - ex(b, intrinsic(b, "llvm.ctlz", ((n << 1) - 2).v, ir.Constant(I1, 0)))
        self.m = where(self.pow2, n, const(b, I64, 1) << top)  # the FFT length of either path
        twiddles = self.m
        self.chirp = _Complex(b, self.ptr, twiddles)
        self.filter = _Complex(b, self.ptr, twiddles + (n << 1))
        self.work = _Complex(b, self.ptr, where(self.pow2, twiddles, twiddles + (n << 1) + (self.m << 1)))
        self.twiddles = b.gep(self.ptr, [i64(0)], source_etype=F64)
        self.zero = const(b, F64, 0.0)

    def _call_fft(self, data: _Complex, length: Ex, inverse: bool) -> None:
        b, kb = self.b, self.kb
        b.store(length.v, b.gep(self.args, [i64(0)], source_etype=I64))
        b.store(i64(int(inverse)), b.gep(self.args, [i64(1)], source_etype=I64))
        ptr = b.gep(data.ptr, [data.base.v], source_etype=F64)
        status = ex(b, b.call(self.fft, [ptr, self.args, self.twiddles, kb.fn.args[3], *WHOLE]))
        kb.fail_if(status != 0, STATUS_CANCELLED)

    def prepare(self) -> None:
        """Twiddles for the FFT length; for Bluestein also the chirp and the filter's FFT."""
        b, kb, n, m = self.b, self.kb, self.n, self.m
        tw = _Complex(b, self.ptr, const(b, I64, 0))
        mf = m.to(F64)
        with kb.range(m >> 1, "tw") as j:
            tw.store(j, _unit(b, -2 * math.pi * j.to(F64) / mf))
        with b.if_then((~self.pow2).v):
            # chirp c_k = exp(s i pi k^2 / n), s = -1 forward, +1 inverse; k^2 mod 2n keeps
            # the angle small (and exact) for any k
            nf = n.to(F64)
            s = math.pi if self.inverse else -math.pi
            with kb.range(n, "chirp") as k:
                self.chirp.store(k, _unit(b, s * (k * k % (n << 1)).to(F64) / nf))
            # the filter: conj(c_j) at j and at m - j, zero in between; transformed
            with kb.range(m, "fzero") as j:
                self.filter.store(j, (self.zero, self.zero))
            with kb.range(n, "filter") as j:
                c = self.chirp.load(j)
                conj = (c[0], -c[1])
                self.filter.store(j, conj)
                with b.if_then((j > 0).v):
                    self.filter.store(m - j, conj)
            self._call_fft(self.filter, m, False)

    def line(self) -> _Complex:
        return self.work

    def run(self) -> None:
        """Transform the line in place (unnormalized)."""
        b, kb, n, m = self.b, self.kb, self.n, self.m
        with b.if_else(self.pow2.v) as (radix2, bluestein):
            with radix2:
                self._call_fft(self.work, n, self.inverse)
            with bluestein:
                w = self.work
                with kb.range(n, "pre") as k:
                    w.store(k, _cmul(w.load(k), self.chirp.load(k)))
                with kb.range(m - n, "pad") as k:
                    w.store(n + k, (self.zero, self.zero))
                self._call_fft(w, m, False)
                with kb.range(m, "conv") as k:
                    w.store(k, _cmul(w.load(k), self.filter.load(k)))
                self._call_fft(w, m, True)
                inv_m = 1.0 / m.to(F64)
                with kb.range(n, "post") as k:
                    v = _cmul(w.load(k), self.chirp.load(k))
                    w.store(k, (v[0] * inv_m, v[1] * inv_m))


# ----------------------------------------------------------------------------- DFT, STFT


def _around(x: Tensor, out: Tensor, axis: Ex) -> tuple[Ex, ...]:
    """(outer, length, inner) of ``x`` around a signal axis known at run time (in range), and
    the output's dim there."""
    b = x.kb.b
    outer, length, inner, count = (const(b, I64, v) for v in (1, 0, 1, 0))
    for a in range(x.rank - 1):
        outer = outer * where(axis > a, x.dims[a], 1)
        inner = inner * where(axis < a, x.dims[a], 1)
        hit = axis == a
        length = where(hit, x.dims[a], length)
        count = where(hit, out.dims[a], count)
    return outer, length, inner, count


def _narrow(b: ir.IRBuilder, v: Ex, dt: DType) -> Ex:
    """A float64 result as ``dt`` computes (rounded once to a narrow float's format)."""
    return ex(b, convert(b, v.v, FLOAT64, dt))


@dataclass(frozen=True)
class FourierPlan:
    """``stft``: frames of a [batch, length, c] signal (scalars n, step), else lines along
    ``axis`` (scalar n; axis -1: the axis is scalar 1). ``window``: STFT's window tensor
    follows the signal."""

    stft: bool
    axis: int
    inverse: bool
    onesided: bool
    window: bool = False
    kernel_name: str = "dft"


def build_fourier(kb: KernelBuilder, plan: FourierPlan, types: Sequence[TensorType]) -> None:
    """DFT along one axis, or STFT. Tensors: x, [window], scratch (float64), out. Scalars: n
    (the transform length), [frame step]. The input's last dim (1 real, 2 complex) and the
    output's decide how values are read and written; inverse transforms are scaled by 1/n,
    and the one-sided inverse (IRFFT) fills the upper half with the conjugates of the lower
    one and keeps the real part."""
    b = kb.b
    k = 0
    x = kb.tensor(k, *types[k])
    win = None
    if plan.window:
        k += 1
        win = kb.tensor(k, *types[k])
    scratch = kb.tensor(k + 1, *types[k + 1])
    out = kb.tensor(k + 2, *types[k + 2])
    n = ex(b, kb.scalar(0))
    cx, co = x.shape[-1], out.shape[-1]
    irfft = plan.inverse and plan.onesided
    t = _Transform(kb, scratch, n, plan.inverse)
    t.prepare()
    line = t.line()
    zero = t.zero

    def read(pos: Ex) -> Complex:
        return x.flat[pos * cx].to(F64), (x.flat[pos * cx + 1].to(F64) if cx == 2 else zero)

    def write(pos: Ex, v: Complex) -> None:
        out.flat[pos * co] = _narrow(b, v[0], out.dtype)
        if co == 2:
            out.flat[pos * co + 1] = _narrow(b, v[1], out.dtype)

    scale = 1.0 / n.to(F64) if plan.inverse else None
    if plan.stft:
        count = out.dims[2]
    elif plan.axis >= 0:
        outer, length, inner = (ex(b, v) for v in (x.numel(0, plan.axis), x.dim(plan.axis),
                                                   x.numel(plan.axis + 1, x.rank - 1)))
        count = out.dims[plan.axis]
    else:
        outer, length, inner, count = _around(x, out, ex(b, kb.scalar(1)))

    def finish(out_pos) -> None:
        t.run()
        with kb.range(count, "store") as j:
            v = line.load(j)
            if scale is not None:
                v = (v[0] * scale, v[1] * scale)
            write(out_pos(j), v)

    if plan.stft:
        step = ex(b, kb.scalar(1))
        length, frames = x.dims[1], out.dims[1]
        with kb.range(x.dims[0], "batch") as bi, kb.range(frames, "frame") as fr:
            start = bi * length + fr * step
            with kb.range(n, "load") as j:
                v = read(start + j)
                if win is not None:
                    w = win.flat[j].to(F64)
                    v = (v[0] * w, v[1] * w)
                line.store(j, v)
            row = (bi * frames + fr) * count
            finish(lambda j: row + j)
        return

    # the input values used: n (truncated or zero-padded), or n // 2 + 1 for the IRFFT
    used = (n >> 1) + 1 if irfft else n
    avail = minimum(length, used)
    with kb.range(outer, "outer") as o, kb.range(inner, "inner") as i:
        with kb.range(n, "load") as j:
            inside = j < avail
            v = read((o * length + where(inside, j, 0)) * inner + i)
            line.store(j, (where(inside, v[0], zero), where(inside, v[1], zero)))
        if irfft:
            # X[n - j] = conj(X[j]) for the upper half
            with kb.range(n - used, "herm") as j:
                dst = used + j
                src = line.load(n - dst)
                line.store(dst, (src[0], -src[1]))
        finish(lambda j: (o * count + j) * inner + i)


# ----------------------------------------------------------------------------- TensorScatter


def build_tensor_scatter(kb: KernelBuilder, params: tuple[int, bool, bool], types: Sequence[TensorType]) -> None:
    """out = past; then along ``axis`` the update's rows go to rows write_index[batch] + s
    (modulo the cache's length when ``circular``). ``params``: (axis, circular, whether the
    write indices are given). Tensors: past, update, [write_indices], out. A linear write
    past the cache fails with (write index, update length, batch entry)."""
    axis, circular, has_indices = params
    b = kb.b
    past = kb.tensor(0, *types[0])
    upd = kb.tensor(1, *types[1])
    idx = kb.tensor(2, *types[2]) if has_indices else None
    out = kb.tensor(len(types) - 1, *types[-1])
    with kb.range(past.numel(), "cp") as i:
        out.store_raw(i, past.load_raw(i))
    cache, seq = past.dims[axis], upd.dims[axis]
    inner = ex(b, past.numel(axis + 1))
    per_batch = ex(b, past.numel(1, axis))  # prefixes per batch entry
    with kb.range(past.dims[0], "batch") as bi:
        w = idx[bi].index() if idx is not None else const(b, I64, 0)
        if not circular:
            kb.fail_if((w < 0) | (w + seq > cache), STATUS_OUT_OF_RANGE, [w, seq, bi])
        with kb.range(per_batch, "prefix") as p:
            row = bi * per_batch + p
            with kb.range(seq, "seq") as s:
                t = (w + s) % cache if circular else w + s
                src = (row * seq + s) * inner
                dst = (row * cache + t) * inner
                with kb.range(inner, "el") as e:
                    out.store_raw(dst + e, upd.load_raw(src + e))


# ----------------------------------------------------------------------------- RoiAlign, MaxRoiPool


def _batch_index(kb: KernelBuilder, i: Ex, n: ir.Value) -> Ex:
    """A ROI's batch index (i64), failing with (index, batch size) unless it is in [0, n)."""
    kb.fail_if(kb.b.icmp_unsigned(">=", i.v, n), STATUS_OUT_OF_RANGE, [i, n])
    return i


@dataclass(frozen=True)
class RoiAlignPlan:
    max: bool
    height: int
    width: int
    sampling_ratio: int
    spatial_scale: float
    half_pixel: bool


def build_roi_align(kb: KernelBuilder, plan: RoiAlignPlan, types: Sequence[TensorType]) -> None:
    """Bilinear samples on a grid in each output bin of each ROI, averaged (or the largest
    weighted corner value, as onnxruntime does in max mode). Coordinates are computed in
    double once per sample; the channel loop is innermost. Tensors: X (N, C, H, W), rois
    (R, 4), batch_indices (R), out (R, C, oh, ow)."""
    x = kb.tensor(0, *types[0])
    rois = kb.tensor(1, *types[1])
    bidx = kb.tensor(2, *types[2])
    out = kb.tensor(3, *types[3])
    acc = out.ctype
    _, channels, height, width = x.dims
    hf, wf = height.to(F64), width.to(F64)

    with kb.range(rois.dim(0), "roi") as r:
        batch = _batch_index(kb, bidx[r].index(), x.dim(0))
        offset = 0.5 if plan.half_pixel else 0.0
        x0, y0, x1, y1 = (rois[r, c].to(F64) * plan.spatial_scale - offset for c in range(4))
        rw, rh = x1 - x0, y1 - y0
        if not plan.half_pixel:
            rw, rh = maximum(rw, 1.0), maximum(rh, 1.0)
        bin_h, bin_w = rh / plan.height, rw / plan.width
        if plan.sampling_ratio > 0:
            gh = gw = const(kb.b, I64, plan.sampling_ratio)
        else:
            gh, gw = bin_h.ceil().index(), bin_w.ceil().index()
        count = maximum(gh * gw, 1)
        step_h, step_w = bin_h / gh.to(F64), bin_w / gw.to(F64)
        with kb.range(plan.height, "ph") as ph, kb.range(plan.width, "pw") as pw:
            with kb.range(channels, "zero") as c:
                out[r, c, ph, pw] = 0.0
            with kb.range(gh, "iy") as iy:
                yy = y0 + ph.to(F64) * bin_h + (iy.to(F64) + 0.5) * step_h
                with kb.range(gw, "ix") as ix:
                    xx = x0 + pw.to(F64) * bin_w + (ix.to(F64) + 0.5) * step_w
                    outside = (yy < -1.0) | (yy > hf) | (xx < -1.0) | (xx > wf)
                    axes = []
                    for v, size in ((yy, height), (xx, width)):
                        v = maximum(v, 0.0)
                        low, last = v.index(), size - 1
                        edge = low >= last
                        low = where(edge, last, low)
                        high = where(edge, last, low + 1)
                        frac = where(edge, last.to(F64), v) - low.to(F64)
                        axes.append((low, high, 1.0 - frac, frac))
                    (yl, yh, wy0, wy1), (xl, xh, wx0, wx1) = axes
                    # the four corners (row, column, weight); outside the input: (0, 0) weighted 0
                    taps = [(where(outside, 0, yi), where(outside, 0, xi), where(outside, 0.0, wy * wx).to(acc))
                            for yi, wy in ((yl, wy0), (yh, wy1)) for xi, wx in ((xl, wx0), (xh, wx1))]
                    first = (iy == 0) & (ix == 0)
                    with kb.range(channels, "c") as c:
                        terms = [w * x[batch, c, yi, xi] for yi, xi, w in taps]
                        if plan.max:
                            v = terms[0]
                            for t in terms[1:]:
                                v = maximum(v, t)
                            v = where(first, v, maximum(out[r, c, ph, pw], v))
                        else:
                            v = out[r, c, ph, pw] + ((terms[0] + terms[1]) + (terms[2] + terms[3]))
                        out[r, c, ph, pw] = v
            if not plan.max:
                inv = (1.0 / count.to(F64)).to(acc)
                with kb.range(channels, "avg") as c:
                    out[r, c, ph, pw] = out[r, c, ph, pw] * inv


def _round_away(v: Ex) -> Ex:
    """C's round (halves away from zero) without a libcall."""
    t = v.trunc()
    frac = v - t
    return where(frac >= 0.5, t + 1.0, where(frac <= -0.5, t - 1.0, t))


def build_max_roi_pool(kb: KernelBuilder, params: tuple[int, int, float], types: Sequence[TensorType]) -> None:
    """The largest value in each bin of each ROI (Caffe's and onnxruntime's geometry: ROI
    corners rounded, bins floor/ceil of equal fractions, clamped to the input; an empty bin
    gives 0). ``params``: (pooled height, pooled width, spatial scale). Tensors: X (N, C, H,
    W), rois (R, 5: batch index, x1, y1, x2, y2), out (R, C, ph, pw). A batch index outside
    [0, N) fails with (index, N)."""
    ph_n, pw_n, scale = params
    x = kb.tensor(0, *types[0])
    rois = kb.tensor(1, *types[1])
    out = kb.tensor(2, *types[2])
    _, channels, height, width = x.dims

    def span(p: Ex, size: Ex, start: Ex, hi: Ex) -> tuple[Ex, Ex]:
        """Bin ``p``'s [first, end) rows (or columns) in the input."""
        lo = (p.to(F64) * size).floor().index()
        up = ((p.to(F64) + 1.0) * size).ceil().index()
        return clamp(lo + start, 0, hi), clamp(up + start, 0, hi)

    with kb.range(rois.dim(0), "roi") as r:
        vals = [rois[r, c].to(F64) for c in range(5)]
        batch = _batch_index(kb, vals[0].index(), x.dim(0))
        x1, y1, x2, y2 = (_round_away(v * scale).index() for v in vals[1:])
        bin_h = maximum(y2 - y1 + 1, 1).to(F64) / ph_n
        bin_w = maximum(x2 - x1 + 1, 1).to(F64) / pw_n
        with kb.range(ph_n, "ph") as ph:
            hs, he = span(ph, bin_h, y1, height)
            with kb.range(pw_n, "pw") as pw:
                ws, we = span(pw, bin_w, x1, width)
                empty = (he <= hs) | (we <= ws)
                with kb.range(channels, "c") as c:
                    def row(h: Ex, best: list[Ex]) -> list[Ex]:
                        return kb.iterate(ws, we, best, lambda w, m: [maximum(m[0], x[batch, c, h, w])], name="w")

                    m = kb.iterate(hs, he, [const(kb.b, x.ctype, -math.inf)], row, name="h")[0]
                    out[r, c, ph, pw] = where(empty, 0.0, m)


# ----------------------------------------------------------------------------- AffineGrid


def build_affine_grid(kb: KernelBuilder, align: bool, types: Sequence[TensorType]) -> None:
    """grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1), the base coordinates spread
    over [-1, 1] (pixel centers, or corners when ``align``). Computed in double. Tensors:
    theta (N, r, r + 1), out (N, spatial..., r)."""
    theta = kb.tensor(0, *types[0])
    out = kb.tensor(1, *types[1])
    r = out.rank - 2

    def base(i: Ex, size: Ex) -> Ex:
        sf, fi = size.to(F64), i.to(F64)
        if align:
            return fi * where(size > 1, 2.0 / (sf - 1.0), 0.0) - 1.0
        return (fi * 2.0 + 1.0) / sf - 1.0

    with kb.range(out.dims[0], "n") as n, ExitStack() as loops:
        at, coords = [], []
        for a, size in enumerate(out.dims[1:-1]):
            at.append(loops.enter_context(kb.range(size, f"ax{a}")))
            coords.append(base(at[-1], size))
        # coords are outermost first (z, y, x); theta's columns are x, y, (z), 1
        vec = list(reversed(coords))
        for j in range(r):
            total = theta[n, j, r].to(F64)
            for k, v in enumerate(vec):
                total = total + theta[n, j, k].to(F64) * v
            out[(n, *at, j)] = _narrow(kb.b, total, out.dtype)


# ----------------------------------------------------------------------------- TfIdfVectorizer


@dataclass(frozen=True)
class TfIdfPlan:
    """``mode``: TF, IDF or TFIDF; grams of ``min_len`` .. the table's width - 1 items, with
    up to ``max_skip`` items skipped between them; ``rows``: the table's row count."""

    mode: str
    min_len: int
    max_skip: int
    rows: int
    kernel_name: str = "tfidf"


def build_tfidf(kb: KernelBuilder, plan: TfIdfPlan, types: Sequence[TensorType]) -> None:
    """Counts of the table's n-grams in each row of X, weighted. A gram is k items of a row
    ``d`` apart (d = 1 .. max_skip + 1; unigrams only with d = 1), looked up by binary search
    in the table: sorted rows (k, item 1 .. item k, zeros), each with its output column.
    Tensors: X ([C] or [B, C], int32 or int64), table (G, width), columns (G), weights
    (output size, float32), out ([size] or [B, size], float32)."""
    b = kb.b
    x, table, cols, weights, out = (kb.tensor(k, *types[k]) for k in range(5))
    width = types[1][1][1]  # 1 + the longest gram
    size, length = out.dims[-1], x.dims[-1]
    rows = x.numel(0, x.rank - 1)
    with kb.range(out.numel(), "zero") as i:
        out.flat[i] = 0.0

    with kb.range(rows, "row") as row:
        with kb.range(plan.max_skip + 1, "skip") as s:
            d = s + 1
            first = const(b, I64, plan.min_len) if plan.min_len >= 2 else where(d == 1, const(b, I64, 1), 2)
            with kb.range(length, "start") as start, kb.range(width - first, "gram") as j:
                k = first + j
                with b.if_then((start + (k - 1) * d < length).v):
                    key = [k]  # the table's row for this gram: k, its items, zeros
                    for c in range(1, width):
                        inside = k >= c
                        pos = where(inside, start + (c - 1) * d, 0)
                        key.append(where(inside, x.flat[row * length + pos].index(), 0))

                    def compare(r: Ex) -> Ex:
                        """-1, 0 or 1: table row r against the key."""
                        result = const(b, I64, 0)
                        for c in reversed(range(width)):
                            v = table[r, c]
                            here = where(v < key[c], -1, (v > key[c]).to(I64))
                            result = where(here != 0, here, result)
                        return result

                    def halve(_: Ex, lh: list[Ex]) -> list[Ex]:
                        lo, hi = lh
                        open_ = lo < hi
                        mid = (lo + hi) >> 1
                        below = compare(where(open_, mid, 0)) < 0
                        return [where(open_ & below, mid + 1, lo), where(open_ & ~below, mid, hi)]

                    steps = max(plan.rows, 1).bit_length() + 1
                    lo = kb.iterate(0, steps, [const(b, I64, 0), const(b, I64, plan.rows)], halve, name="search")[0]
                    with b.if_then((lo < plan.rows).v):
                        with b.if_then((compare(lo) == 0).v):
                            at = row * size + cols[lo]
                            out.flat[at] = out.flat[at] + 1.0
    if plan.mode == "TF":
        return
    with kb.range(rows, "wrow") as row, kb.range(size, "wcol") as c:
        f, w = out.flat[row * size + c], weights[c]
        out.flat[row * size + c] = where(f > 0.0, w, 0.0) if plan.mode == "IDF" else w * f


# ----------------------------------------------------------------------------- MelWeightMatrix


def build_mel_weight_matrix(kb: KernelBuilder, params: None, types: Sequence[TensorType]) -> None:
    """Triangular filters between the mel-spaced bin edges (onnx.reference's: num_mel_bins +
    2 edges over [lower, upper] mel spread in steps of (upper - lower) / (num_mel_bins + 2),
    each mapped to spectrogram bin floor((dft_length + 1) * hz / sample_rate)), in double.
    Tensors: sample_rate (int), lower_edge_hertz, upper_edge_hertz, out (bins, num_mel_bins).
    Scalars: dft_length."""
    b = kb.b
    rate = kb.tensor(0, *types[0])
    lower = kb.tensor(1, *types[1])
    upper = kb.tensor(2, *types[2])
    out = kb.tensor(3, *types[3])
    dft = ex(b, kb.scalar(0))
    bins, mels = out.dims
    ln10 = math.log(10.0)

    def mel(hz_t: Tensor) -> Ex:
        hz = hz_t.flat[0].to(F64)
        return 2595.0 * ex(b, mathlib.log1p(b, (hz / 700.0).v)) / ln10

    sr = rate.flat[0].to(F64)
    low, high = mel(lower), mel(upper)
    step = (high - low) / (mels + 2).to(F64)
    scale = (dft + 1).to(F64)

    def edge(i: Ex) -> Ex:
        m = i.to(F64) * step + low
        hz = 700.0 * ex(b, mathlib.expm1(b, (m / 2595.0 * ln10).v))
        return (scale * hz / sr).floor().to(I64)

    with kb.range(out.numel(), "zero") as i:
        out.flat[i] = _narrow(b, const(b, F64, 0.0), out.dtype)

    def put(j: Ex, i: Ex, v: Ex) -> None:
        with b.if_then(below(j, bins).v):
            out[j, i] = _narrow(b, v, out.dtype)

    with kb.range(mels, "mel") as i:
        left, center, right = edge(i), edge(i + 1), edge(i + 2)
        rise, fall = center - left, right - center
        with b.if_else((rise == 0).v) as (flat, slope):
            with flat:
                put(center, i, const(b, F64, 1.0))
            with slope:
                with kb.range(center - left + 1, "up") as k:
                    put(left + k, i, k.to(F64) / rise.to(F64))
        with kb.range(fall, "down") as k:
            j = center + k
            put(j, i, (right - j).to(F64) / fall.to(F64))
