"""Signal and vision core ops: DFT, STFT, TensorScatter, RoiAlign, MaxRoiPool, AffineGrid,
TfIdfVectorizer and MelWeightMatrix.

Sizes read from tensors (a DFT's length, an STFT's frame length and step, an AffineGrid's
size) are dims: known at compile time (constants, or dims of other tensors read through
``Shape``) they are used as they are; otherwise they are fresh data-dependent symbols that
the op's lowering loads from the tensor, checks, and defines before allocating its output.
A check on such a symbol is emitted by that lowering (the node's deferred checks run before
it, when the symbol has no value yet).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen import signal as K
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import ALL, FLOAT32, FLOAT64, FLOATS, INDEX, INT64, DType
from ..ir.graph import Value
from .base import CoreOp, InferContext


# ----------------------------------------------------------------------------- sizes from tensors


def _scalar_input(ctx: InferContext, i: int, what: str) -> Value:
    """Input ``i``: one int32 or int64 element."""
    v = ctx.input(i)
    if not v.dtype.is_int or v.dtype.itemsize < 4 or not v.dtype.is_signed:
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be int32 or int64")
    if v.numel != 1 or v.rank > 1:
        ctx.fail(f"{what} '{v.name}' must be a scalar, has shape {D.fmt_shape(v.shape)}")
    return v


def _size_of(ctx: InferContext, i: int, what: str, prefix: str) -> tuple[Dim, bool]:
    """The size input ``i`` holds, and whether it is a fresh symbol the lowering loads."""
    known = _scalar_input(ctx, i, what).int_contents()
    if known is not None:
        d = known[0]
        if isinstance(d, int) and d < 1:
            ctx.fail(f"{what} is {d}; it must be at least 1")
        return d, False
    return ctx.fresh(prefix), True


def _load_size(lw, node, i: int, d: Dim, what: str) -> None:
    """Define the fresh symbol ``d`` from input ``i``, checking that it is at least 1."""
    if lw.is_defined(d):
        return
    slot = lw.load_scalar(node.inputs[i], what)
    lw.check_le(lw.const_slot(1), slot, f"{lw.context()}: {what} is {{1}}; it must be at least 1")
    lw.define(d, slot)


def _complex_dim(ctx: InferContext, x: Value) -> int:
    """The last dim of a real ([..., 1]) or complex ([..., 2]) signal."""
    c = x.shape[-1] if x.rank else None
    if c not in (1, 2):
        ctx.fail(f"input '{x.name}' {D.fmt_shape(x.shape)} must end in a dim of 1 (real) or 2 (complex)")
    return c


def _scratch(lw, n: Dim):
    return lw.scratch("Fourier transform workspace", FLOAT64, (D.mul(n, K.SCRATCH_PER_POINT),))


# ----------------------------------------------------------------------------- DFT, STFT


@dataclass(frozen=True)
class DFT(CoreOp):
    """Inputs: x ([..., 1] real or [..., 2] complex), [dft_length], [axis]. ``axis``: the
    axis (may be negative, not the last), or None to read it from input 2 at run time; then
    every signal dim of the output is a fresh symbol, computed once the axis is known."""

    axis: int | None = 1
    inverse: bool = False
    onesided: bool = False

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, FLOATS)
        if x.rank < 2:
            ctx.fail(f"input '{x.name}' {D.fmt_shape(x.shape)} needs a signal axis and the complex axis")
        _complex_dim(ctx, x)
        irfft = self.inverse and self.onesided
        out = list(x.shape)
        out[-1] = 1 if irfft else 2
        if self.axis is None:
            _scalar_input(ctx, 2, "axis")
            n, fresh = _size_of(ctx, 1, "dft_length", "dft_length") if ctx.has(1) else (ctx.fresh("dft_length"), True)
            for a in range(x.rank - 1):
                out[a] = ctx.fresh(f"dft_dim{a}")
            ctx.info = (None, n, fresh)
            ctx.set_output(0, x.dtype, out)
            return
        if not -x.rank <= self.axis <= x.rank - 2 or self.axis == -1:
            ctx.fail(f"axis {self.axis} is out of range for rank {x.rank} (the last axis holds the complex "
                     f"parts)")
        axis = self.axis % x.rank
        length = x.shape[axis]
        fresh = False
        if ctx.has(1):
            n, fresh = _size_of(ctx, 1, "dft_length", "dft_length")
        else:
            n = D.mul(D.add(length, -1), 2) if irfft else length
        if not fresh:
            ctx.require_le(1, n, f"the transform length (from dim {axis} of '{x.name}' or dft_length)")
        out[axis] = D.add(D.floordiv(n, 2), 1) if self.onesided and not self.inverse else n
        ctx.info = (axis, n, fresh)
        ctx.set_output(0, x.dtype, out)

    def lower(self, lw, node) -> None:
        axis, n, fresh = node.info
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        scalars = []
        if axis is None:
            scalars = [self._runtime_shape(lw, node, x, y, n, fresh)]
        elif fresh:
            _load_size(lw, node, 1, n, "dft_length")
        plan = K.FourierPlan(False, -1 if axis is None else axis, self.inverse, self.onesided)
        lw.call(K.build_fourier, plan, [lw.tensor(x.name), _scratch(lw, n), lw.alloc(y.name)],
                [lw.slot(n)] + scalars, outputs=2)

    def _runtime_shape(self, lw, node, x: Value, y: Value, n: Dim, fresh: bool):
        """Read the axis, define the transform length (when it is the axis' dim) and the
        output's signal dims; returns the slot of the axis (counted from 0)."""
        r = x.rank
        raw = lw.load_scalar(node.inputs[2], "axis")
        neg = lw.arith("LT", raw, lw.const_slot(0))
        axis = lw.arith("ADD", raw, lw.arith("MUL", neg, lw.const_slot(r)))
        msg = f"{lw.context()}: axis {{1}} is out of range for rank {r} (the last axis holds the complex parts)"
        lw.check_le(lw.const_slot(0), axis, msg)
        lw.check_le(axis, lw.const_slot(r - 2), msg.replace("{1}", "{0}"))
        hits = [lw.arith("EQ", axis, lw.const_slot(a)) for a in range(r - 1)]
        length = lw.const_slot(0)
        for a, hit in enumerate(hits):
            length = lw.arith("ADD", length, lw.arith("MUL", hit, lw.slot(x.shape[a])))
        if fresh and node.inputs[1:2] and node.inputs[1]:
            _load_size(lw, node, 1, n, "dft_length")
        elif fresh:
            if self.inverse and self.onesided:
                length = lw.arith("MUL", lw.arith("SUB", length, lw.const_slot(1)), lw.const_slot(2))
            lw.check_le(lw.const_slot(1), length, f"{lw.context()}: the transform length is {{1}}")
            lw.define(n, length)
        size = lw.slot(n)
        if self.onesided and not self.inverse:
            size = lw.arith("ADD", lw.arith("FLOORDIV", size, lw.const_slot(2)), lw.const_slot(1))
        for a, hit in enumerate(hits):
            d = lw.slot(x.shape[a])
            lw.define(y.shape[a], lw.arith("ADD", d, lw.arith("MUL", hit, lw.arith("SUB", size, d))))
        return axis


@dataclass(frozen=True)
class STFT(CoreOp):
    """Inputs: signal [batch, length, 1 or 2], frame_step, [window], [frame_length]."""

    onesided: bool = True

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, FLOATS)
        if x.rank != 3:
            ctx.fail(f"signal '{x.name}' {D.fmt_shape(x.shape)} must be [batch, length, 1 or 2]")
        _complex_dim(ctx, x)
        length = x.shape[1]
        step, step_fresh = _size_of(ctx, 1, "frame_step", "frame_step")
        if not step_fresh:
            ctx.require_le(1, step, "frame_step")
        win = ctx.optional(2)
        if win is not None:
            if win.dtype != x.dtype:
                ctx.fail(f"window '{win.name}' ({win.dtype}) and signal '{x.name}' ({x.dtype}) differ in dtype")
            if win.rank != 1:
                ctx.fail(f"window '{win.name}' must be 1-D, has shape {D.fmt_shape(win.shape)}")
        fresh = False
        if ctx.has(3):
            n, fresh = _size_of(ctx, 3, "frame_length", "frame_length")
            if win is not None and not fresh:
                ctx.require_eq(win.shape[0], n, f"the length of window '{win.name}' and frame_length")
        elif win is not None:
            n = win.shape[0]
            ctx.require_le(1, n, f"the length of window '{win.name}'")
        else:
            n = length
        if not fresh:
            ctx.require_le(n, length, f"the frame length and the length of signal '{x.name}'")
        if step_fresh or fresh or not isinstance(step, int):
            frames = ctx.fresh("stft_frames")
        else:
            frames = D.add(D.floordiv(D.add(length, D.mul(n, -1)), step), 1)
        bins = D.add(D.floordiv(n, 2), 1) if self.onesided else n
        ctx.info = (n, fresh, step, step_fresh, frames)
        ctx.set_output(0, x.dtype, (x.shape[0], frames, bins, 2))

    def lower(self, lw, node) -> None:
        n, fresh, step, step_fresh, frames = node.info
        x = lw.value(node.inputs[0])
        win = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
        if step_fresh:
            _load_size(lw, node, 1, step, "frame_step")
        if fresh:
            _load_size(lw, node, 3, n, "frame_length")
            length = lw.slot(x.shape[1])
            lw.check_le(lw.slot(n), length, f"{lw.context()}: frame_length {{0}} exceeds the signal length {{1}}")
            if win is not None:
                lw.check_eq(lw.slot(lw.value(win).shape[0]), lw.slot(n),
                            f"{lw.context()}: the window has {{0}} elements, frame_length is {{1}}")
        if not lw.is_defined(frames):
            rest = lw.arith("SUB", lw.slot(x.shape[1]), lw.slot(n))
            lw.define(frames, lw.arith("ADD", lw.arith("FLOORDIV", rest, lw.slot(step)), lw.const_slot(1)))
        plan = K.FourierPlan(True, 1, False, self.onesided, win is not None, "stft")
        ins = [lw.tensor(x.name)] + ([lw.tensor(win)] if win else [])
        lw.call(K.build_fourier, plan, ins + [_scratch(lw, n), lw.alloc(node.outputs[0])],
                [lw.slot(n), lw.slot(step)], outputs=2)


# ----------------------------------------------------------------------------- TensorScatter


@dataclass(frozen=True)
class TensorScatter(CoreOp):
    """Inputs: past_cache, update (the cache's shape but a shorter ``axis``), [write_indices
    (int64, one per batch entry)]."""

    axis: int = -2
    circular: bool = False

    def infer(self, ctx: InferContext) -> None:
        past, upd = ctx.input(0), ctx.input(1)
        ctx.check_dtype(past, ALL)
        if upd.dtype != past.dtype:
            ctx.fail(f"update '{upd.name}' ({upd.dtype}) and past_cache '{past.name}' ({past.dtype}) differ in dtype")
        if past.rank < 2 or upd.rank != past.rank:
            ctx.fail(f"past_cache '{past.name}' {D.fmt_shape(past.shape)} and update '{upd.name}' "
                     f"{D.fmt_shape(upd.shape)} must have the same rank, at least 2")
        axis = ctx.axis(self.axis, past.rank)
        if axis == 0:
            ctx.fail("axis is the batch axis (0); the sequence axis must be another")
        for a in range(past.rank):
            if a == axis:
                ctx.require_le(upd.shape[a], past.shape[a], f"the sequence dim {a} of update '{upd.name}' and of "
                                                            f"past_cache '{past.name}'")
            else:
                ctx.require_eq(upd.shape[a], past.shape[a], f"dim {a} of update '{upd.name}' and of past_cache "
                                                            f"'{past.name}'")
        idx = ctx.optional(2)
        if idx is not None:
            ctx.check_dtype(idx, (INT64,))
            if idx.rank != 1:
                ctx.fail(f"write_indices '{idx.name}' must be 1-D, has shape {D.fmt_shape(idx.shape)}")
            ctx.require_eq(idx.shape[0], past.shape[0], f"the length of write_indices '{idx.name}' and the batch "
                                                        f"dim of past_cache '{past.name}'")
        ctx.info = axis
        ctx.set_output(0, past.dtype, past.shape)

    def lower(self, lw, node) -> None:
        ins = [i for i in node.inputs[:3] if i]
        lw.run_kernel(K.build_tensor_scatter, (node.info, self.circular, len(ins) == 3), ins, node.outputs[:1],
                      error="write index {0} plus the update's {1} rows does not fit the cache (batch entry {2})")


# ----------------------------------------------------------------------------- RoiAlign, MaxRoiPool


def _rois(ctx: InferContext, x: Value, i: int, cols: int) -> Value:
    rois = ctx.input(i)
    if rois.dtype != x.dtype:
        ctx.fail(f"rois '{rois.name}' ({rois.dtype}) and '{x.name}' ({x.dtype}) differ in dtype")
    if rois.rank != 2 or rois.shape[1] != cols:
        ctx.fail(f"rois '{rois.name}' has shape {D.fmt_shape(rois.shape)}; expected (num_rois, {cols})")
    return rois


def _image(ctx: InferContext) -> Value:
    x = ctx.input(0)
    ctx.check_dtype(x, FLOATS)
    if x.rank != 4:
        ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, H, W)")
    return x


@dataclass(frozen=True)
class RoiAlign(CoreOp):
    """Inputs: X (N, C, H, W), rois (R, 4: x1, y1, x2, y2), batch_indices (R, int64)."""

    mode: str = "avg"
    output_height: int = 1
    output_width: int = 1
    sampling_ratio: int = 0
    spatial_scale: float = 1.0
    half_pixel: bool = True

    def infer(self, ctx: InferContext) -> None:
        x = _image(ctx)
        rois = _rois(ctx, x, 1, 4)
        idx = ctx.input(2)
        ctx.check_dtype(idx, INDEX)
        if idx.rank != 1:
            ctx.fail(f"batch_indices '{idx.name}' must be 1-D, has shape {D.fmt_shape(idx.shape)}")
        ctx.require_eq(idx.shape[0], rois.shape[0], f"the length of batch_indices '{idx.name}' and the number of "
                                                    f"rois '{rois.name}'")
        if self.mode not in ("avg", "max"):
            ctx.fail(f"mode '{self.mode}' is not one of avg, max")
        if self.output_height < 1 or self.output_width < 1 or self.sampling_ratio < 0:
            ctx.fail(f"output_height {self.output_height} and output_width {self.output_width} must be positive, "
                     f"sampling_ratio {self.sampling_ratio} not negative")
        ctx.set_output(0, x.dtype, (rois.shape[0], x.shape[1], self.output_height, self.output_width))

    def lower(self, lw, node) -> None:
        plan = K.RoiAlignPlan(self.mode == "max", self.output_height, self.output_width, self.sampling_ratio,
                              self.spatial_scale, self.half_pixel)
        lw.run_kernel(K.build_roi_align, plan, node.inputs[:3], node.outputs[:1],
                      error="batch index {0} is out of range for a batch of {1}")


@dataclass(frozen=True)
class MaxRoiPool(CoreOp):
    """Inputs: X (N, C, H, W), rois (R, 5: batch index, x1, y1, x2, y2)."""

    pooled_shape: tuple[int, int]
    spatial_scale: float = 1.0

    def infer(self, ctx: InferContext) -> None:
        x = _image(ctx)
        rois = _rois(ctx, x, 1, 5)
        if len(self.pooled_shape) != 2 or min(self.pooled_shape) < 1:
            ctx.fail(f"pooled_shape {list(self.pooled_shape)} must be two positive integers")
        ctx.set_output(0, x.dtype, (rois.shape[0], x.shape[1]) + tuple(self.pooled_shape))

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_max_roi_pool, self.pooled_shape + (self.spatial_scale,), node.inputs[:2],
                      node.outputs[:1], error="batch index {0} is out of range for a batch of {1}")


# ----------------------------------------------------------------------------- AffineGrid


@dataclass(frozen=True)
class AffineGrid(CoreOp):
    """Inputs: theta (N, 2, 3) or (N, 3, 4), size (int64: N, C, H, W or N, C, D, H, W)."""

    align_corners: bool = False

    def infer(self, ctx: InferContext) -> None:
        theta, size = ctx.input(0), ctx.input(1)
        ctx.check_dtype(theta, FLOATS)
        ctx.check_dtype(size, (INT64,))
        k = ctx.shape_length(size, "size")
        if k not in (4, 5):
            ctx.fail(f"size '{size.name}' has {k} elements; expected 4 (N, C, H, W) or 5 (N, C, D, H, W)")
        r = k - 2
        if theta.shape[1:] != (r, r + 1):
            ctx.fail(f"theta '{theta.name}' has shape {D.fmt_shape(theta.shape)}; for a size of {k} elements it "
                     f"must be (N, {r}, {r + 1})")
        known = size.int_contents()
        fresh = known is None
        spatial = [ctx.fresh(f"grid_dim{a}") for a in range(r)] if fresh else list(known[2:])
        if not fresh:
            ctx.require_eq(known[0], theta.shape[0], f"size[0] and the batch dim of theta '{theta.name}'")
            for a, d in enumerate(spatial):
                ctx.require_le(0, d, f"size[{a + 2}]")
        ctx.info = fresh
        ctx.set_output(0, theta.dtype, (theta.shape[0], *spatial, r))

    def lower(self, lw, node) -> None:
        theta, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        if node.info:
            vals = lw.values_of(node.inputs[1])
            lw.check_eq(vals[0], lw.slot(theta.shape[0]),
                        f"{lw.context()}: size[0] = {{0}} is not the batch dim of theta, {{1}}")
            lw.define_dims(y.shape[1:-1], vals[2:])
        lw.run_kernel(K.build_affine_grid, self.align_corners, node.inputs[:1], node.outputs[:1])


# ----------------------------------------------------------------------------- TfIdfVectorizer


@dataclass(frozen=True)
class TfIdf(CoreOp):
    """Inputs: X ([C] or [B, C], int32 or int64), table (G, width: sorted rows of (k, the
    gram's k items, zeros)), columns (G, int64: each gram's output column), weights
    (``size`` float32). Output: [size] or [B, size] float32."""

    mode: str
    min_len: int
    max_skip: int
    size: int

    def infer(self, ctx: InferContext) -> None:
        x, table = ctx.input(0), ctx.input(1)
        ctx.check_dtype(x, INDEX)
        if x.rank not in (1, 2):
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected [C] or [B, C]")
        if self.mode not in ("TF", "IDF", "TFIDF"):
            ctx.fail(f"mode '{self.mode}' is not one of TF, IDF, TFIDF")
        ctx.set_output(0, FLOAT32, tuple(x.shape[:-1]) + (self.size,))
        ctx.info = table.shape[0]

    def lower(self, lw, node) -> None:
        plan = K.TfIdfPlan(self.mode, self.min_len, self.max_skip, node.info)
        lw.run_kernel(K.build_tfidf, plan, node.inputs[:4], node.outputs[:1])


# ----------------------------------------------------------------------------- MelWeightMatrix


@dataclass(frozen=True)
class MelWeightMatrix(CoreOp):
    """Inputs: num_mel_bins, dft_length, sample_rate (int scalars), lower_edge_hertz,
    upper_edge_hertz (float scalars). Output (dft_length // 2 + 1, num_mel_bins)."""

    dtype: DType = FLOAT32

    def infer(self, ctx: InferContext) -> None:
        if self.dtype not in FLOATS:
            ctx.fail(f"output_datatype {self.dtype} is not supported (float16, float32, float64 are)")
        mels, mels_fresh = _size_of(ctx, 0, "num_mel_bins", "num_mel_bins")
        n, n_fresh = _size_of(ctx, 1, "dft_length", "dft_length")
        _scalar_input(ctx, 2, "sample_rate")
        for i, what in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")):
            v = ctx.input(i)
            ctx.check_dtype(v, FLOATS)
            if v.numel != 1 or v.rank > 1:
                ctx.fail(f"{what} '{v.name}' must be a scalar, has shape {D.fmt_shape(v.shape)}")
        if not mels_fresh:
            ctx.require_le(1, mels, "num_mel_bins")
        if not n_fresh:
            ctx.require_le(1, n, "dft_length")
        ctx.info = (mels, mels_fresh, n, n_fresh)
        ctx.set_output(0, self.dtype, (D.add(D.floordiv(n, 2), 1), mels))

    def lower(self, lw, node) -> None:
        mels, mels_fresh, n, n_fresh = node.info
        if mels_fresh:
            _load_size(lw, node, 0, mels, "num_mel_bins")
        if n_fresh:
            _load_size(lw, node, 1, n, "dft_length")
        rate = lw.load_scalar(node.inputs[2], "sample_rate")
        lw.check_le(lw.const_slot(1), rate, f"{lw.context()}: sample_rate is {{1}}; it must be positive")
        lw.call(K.build_mel_weight_matrix, None, [lw.tensor(i) for i in node.inputs[2:5]] +
                [lw.alloc(node.outputs[0])], [lw.slot(n)])
