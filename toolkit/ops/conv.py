"""Convolution, pooling and normalizations over (N, C, spatial...) tensors: Conv,
ConvTranspose, DeformConv, Col2Im, Pool (max with or without indices, average, Lp), MaxUnpool,
BatchNorm (inference), LRN, GroupNorm (also InstanceNormalization), LpNorm.

Conv, ConvTranspose, the pools and MaxUnpool share one description of their window
(:class:`SlidingWindow`, the attributes as given) and of its geometry once resolved
against an input (:class:`toolkit.codegen.conv.Window`), over any number of spatial dims.
Output sizes are dim expressions, so batch and spatial dims may be symbolic:
``(h + pads - dilation * (k - 1) - 1) // stride + 1``. With ``auto_pad`` SAME and a stride
above 1 the pads themselves depend on the input size; they are then symbolic too and reach
the kernels as run-time scalars.

A float32 2-D Conv runs the register-tiled kernel of :mod:`toolkit.codegen.conv` (its
constant weights reordered for it at compile time, a simplification); a 1-D one is
simplified into it through views (a row of height 1). Other convolutions (float64,
float16, bfloat16, 3-D, the int32 ones ConvInteger and QLinearConv become) and every
ConvTranspose run the direct N-D kernel of :mod:`toolkit.codegen.conv_nd` (float16 and
bfloat16 summed in float32), which also holds DeformConv's (2-D) and Col2Im's (whose
block sizes may be read at run time).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..codegen import conv as C
from ..codegen import conv_nd as CN
from ..codegen import conv_pool as CP
from ..codegen import depthwise as DW
from ..codegen import plan as P
from ..codegen import winograd as W
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT16, FLOAT32, FLOAT64, FLOATS, INT8, INT32, INT64, UINT8, DType
from ..ir.graph import Graph, Node, Value
from .base import CoreOp, InferContext, Patch, planned, scratch_of
from . import elementwise as EW
from . import linalg as L
from .shape import ViewAs

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
CONV_DTYPES = FLOATS  # Conv and ConvTranspose
DEFORM_DTYPES = (FLOAT32, FLOAT64)
CONV_INT = INT32  # the zero-centred products of ConvInteger and QLinearConv
F16_F32 = (FLOAT16, FLOAT32)


def window_count(size: Dim, begin: Dim, end: Dim, extent: Dim, stride: int) -> Dim:
    """How many windows spanning ``extent`` fit, ``stride`` apart, along a dim of ``size``
    padded by ``begin`` and ``end``."""
    return D.floordiv(size + begin + end - extent, stride) + 1


@dataclass(frozen=True)
class SlidingWindow:
    """A sliding window's attributes as given, for N spatial dims: kernel size, strides,
    dilations, explicit pads (the N begins, then the N ends) or ``auto_pad``."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]
    auto_pad: str = "NOTSET"

    @property
    def rank(self) -> int:
        return len(self.kernel)

    def check(self, ctx: InferContext, x: Value) -> None:
        """The attributes are well formed and fit input ``x`` (N, C, spatial...)."""
        n = self.rank
        if x.rank != n + 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; a {n}-D window (kernel "
                     f"{list(self.kernel)}) needs rank {n + 2} (N, C, {n} spatial dims)")
        for name, vals in (("kernel_shape", self.kernel), ("strides", self.strides), ("dilations", self.dilations)):
            if len(vals) != n or min(vals, default=1) < 1:
                ctx.fail(f"{name}={list(vals)} must be {n} positive integers")
        if self.auto_pad not in AUTO_PADS:
            ctx.fail(f"auto_pad '{self.auto_pad}' is not one of {', '.join(AUTO_PADS)}")
        if self.auto_pad == "NOTSET" and (len(self.pads) != 2 * n or min(self.pads, default=0) < 0):
            ctx.fail(f"pads={list(self.pads)} must be {2 * n} non-negative integers")

    def extent(self, axis: int) -> int:
        return self.dilations[axis] * (self.kernel[axis] - 1) + 1

    def geometry(self, begins, ends) -> C.Window:
        return C.Window(self.kernel, self.strides, self.dilations, tuple(begins) + tuple(ends))

    def resolve(self, ctx: InferContext, x: Value, ceil_mode: bool = False) -> tuple[C.Window, tuple[Dim, ...]]:
        """The window geometry over input ``x`` and the output's spatial dims."""
        self.check(ctx, x)
        begin: list[Dim] = []
        end: list[Dim] = []
        out: list[Dim] = []
        for a in range(self.rank):
            size, s, ext = x.shape[2 + a], self.strides[a], self.extent(a)
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                o = D.ceildiv(size, s)
                total = D.maximum(0, (o - 1) * s + ext - size)
                half = D.floordiv(total, 2)
                b, e = (half, total - half) if self.auto_pad == "SAME_UPPER" else (total - half, half)
            elif self.auto_pad == "VALID":
                b, e = 0, 0
                o = window_count(size, 0, 0, ext, s)
            else:
                b, e = self.pads[a], self.pads[self.rank + a]
                if ceil_mode:
                    # the last window must start inside the input or its leading pad
                    o = D.minimum(D.ceildiv(size + b + e - ext, s) + 1, D.ceildiv(size + b, s))
                else:
                    o = window_count(size, b, e, ext, s)
            if isinstance(o, int) and o < 0:
                ctx.fail(f"spatial dim {a} of size {size} is too small for a window of {ext} with pads {b}+{e} "
                         f"(output size {o})")
            begin.append(b)
            end.append(e)
            out.append(o)
        return self.geometry(begin, end), tuple(out)

    def resolve_transposed(self, ctx: InferContext, x: Value, output_padding: tuple[int, ...],
                           output_shape: tuple[int, ...]) -> tuple[C.Window, tuple[Dim, ...]]:
        """The geometry of a transposed convolution of ``x`` and its output's spatial dims.
        As the ONNX spec says: a given ``output_shape`` fixes the output and the pads follow
        from it (``pads`` ignored); SAME makes the output ``input * stride``; the total
        padding is split with the larger half at the end for SAME_UPPER, at the start
        otherwise."""
        self.check(ctx, x)
        n = self.rank
        if len(output_padding) != n or min(output_padding, default=0) < 0:
            ctx.fail(f"output_padding={list(output_padding)} must be {n} non-negative integers")
        for a, (op, s, d) in enumerate(zip(output_padding, self.strides, self.dilations)):
            if op >= max(s, d):
                ctx.fail(f"output_padding={list(output_padding)}: entry {a} must be less than its stride or "
                         f"dilation")
        if output_shape and len(output_shape) not in (n, n + 2):
            ctx.fail(f"output_shape={list(output_shape)} must give {n} spatial dims")
        given = output_shape[-n:] if output_shape else ()
        begin: list[Dim] = []
        end: list[Dim] = []
        out: list[Dim] = []
        for a in range(n):
            size, s = x.shape[2 + a], self.strides[a]
            full = s * (size - 1) + output_padding[a] + self.extent(a)  # the output with no pads
            if given or self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                o = given[a] if given else size * s
                total = full - o
                half = D.floordiv(total, 2)
                b = half if self.auto_pad == "SAME_UPPER" else total - half
                e = total - b
            elif self.auto_pad == "VALID":
                b, e, o = 0, 0, full
            else:
                b, e = self.pads[a], self.pads[n + a]
                o = full - b - e
            if isinstance(o, int) and o < 0:
                ctx.fail(f"pads {b}+{e} leave spatial dim {a} a negative size {o}")
            begin.append(b)
            end.append(e)
            out.append(o)
        return self.geometry(begin, end), tuple(out)


def _check_output_size(lw, x: Value, y: Value, win: C.Window) -> None:
    """A symbolic output dim is negative when the input is smaller than the window: say so
    instead of failing to allocate."""
    for a in range(win.rank):
        lw.check_nonnegative(y.shape[2 + a], (
            f"{lw.context()}: input spatial dim {a} ({x.shape[2 + a]}) is too small for a window of "
            f"{win.extent(a)} with pads {win.begin(a)} + {win.end(a)} (output size {y.shape[2 + a]} = {{1}})"))


def _check_same(ctx: InferContext, values, what: str) -> DType:
    dt = values[0].dtype
    for v in values[1:]:
        if v is not None and v.dtype != dt:
            ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}, input '{values[0].name}' {dt}; they must match")
    return dt


# ----------------------------------------------------------------------------- Conv


@dataclass(frozen=True)
class Conv(CoreOp):
    """Inputs: X (N, C, spatial...), W (M, C/group, k...), [B (M,)], all of one float dtype
    or all int32 (exact integer sums, for ConvInteger and QLinearConv). ``packed``:
    W is laid out by :func:`toolkit.codegen.conv.pack_weights` (done at compile time for
    constant weights of the 2-D kernel)."""

    window: SlidingWindow
    group: int = 1
    post: tuple = ()  # elementwise ops fused after it (gemm.PostOp; toolkit.passes.fuse)
    plan: P.Plan | None = field(default=None, repr=False)  # its kernel (toolkit.passes.kernels)
    operands_at: ClassVar[int] = 3  # where the fused ops' operands start among the inputs

    def infer(self, ctx: InferContext) -> None:
        x, w, bias = ctx.input(0), ctx.input(1), ctx.optional(2)
        ctx.check_dtype(x, CONV_DTYPES + (CONV_INT,))
        _check_same(ctx, [x, w], "weight")
        _check_same(ctx, [x, bias], "bias")
        _check_weight(ctx, x, w, self.window, "M, C/group")
        m = w.shape[0]
        _check_group(ctx, self.group, m, "output")
        ctx.require_eq(x.shape[1], D.mul(w.shape[1], self.group),
                       f"input '{x.name}' channels vs weight '{w.name}' dim 1 times group {self.group}")
        _check_bias(ctx, bias, m, w)
        win, out = self.window.resolve(ctx, x)
        ctx.info = win
        ctx.set_output(0, x.dtype, (x.shape[0], m) + out)

    def fusable(self, graph: Graph, node: Node) -> bool:
        return self.plan is not None and self.plan.fusable

    def select(self, graph: Graph, node: Node, tuning: P.Tuning, route: str | None = None) -> P.Plan:
        """This Conv's kernel plan (:func:`toolkit.codegen.plan.plan_conv`)."""
        x, w, y = (graph.values[n] for n in (node.inputs[0], node.inputs[1], node.outputs[0]))
        return P.plan_conv(tuning, node.info, self.group, x.shape, w.shape, y.shape, x.dtype,
                           w.const is not None, route)

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        x, w = graph.values[node.inputs[0]], graph.values[node.inputs[1]]
        if x.rank == 3 and x.dtype == FLOAT32:
            return self._as_2d(node, graph, x, w)
        return None

    def _as_2d(self, node: Node, graph: Graph, x: Value, w: Value) -> list[Node]:
        """A 1-D Conv as a 2-D one over rows of height 1: views in and out."""
        win = self.window
        win2 = SlidingWindow((1,) + win.kernel, (1,) + win.strides, (1,) + win.dilations,
                             (0, win.pads[0], 0, win.pads[1]) if win.auto_pad == "NOTSET" else (),
                             win.auto_pad)
        y = graph.values[node.outputs[0]]
        patch = Patch(graph, node)
        add = patch.add

        def lifted(v: Value) -> str:
            name = graph.fresh_name(f"{v.name}/2d")
            shape = (v.shape[0], v.shape[1], 1, v.shape[2])
            if v.const is not None:
                graph.add_value(Value(name, v.dtype, shape, const=v.const.reshape([int(d) for d in shape])))
                return name
            return add(ViewAs(shape), [v.name], name)

        inputs = [lifted(x), lifted(w)] + node.inputs[2:]
        y2 = add(Conv(win2, self.group), inputs, graph.fresh_name(f"{y.name}/2d"))
        add(ViewAs(y.shape), [y2], y.name)
        return patch.nodes

    def lower(self, lw, node) -> None:
        """Emit the plan: the weights packed as its route reads them, its scratch, its kernel."""
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        bias = len(node.inputs) > 2 and bool(node.inputs[2])
        win: C.Window = node.info
        plan = planned(self, node)
        _check_output_size(lw, x, y, win)
        ins = [lw.tensor(i) for i in node.inputs[:3] if i]
        pads = [lw.slot(d) for d in C.symbolic(win.pads)]
        if plan.route == "nd":
            _call_conv_nd(lw, (win, self.group, False, bias), ins, y, pads)
            return
        packed = plan.packed_weights(self.group)
        if packed is not None:
            ins[1] = lw.derived_const(node.inputs[1], *packed)
        extra = [lw.tensor(i) for i in node.inputs[self.operands_at:]]
        outs = scratch_of(lw, plan) + [lw.alloc(y.name)]
        tile, post, n = plan.tile, self.post, len(outs)
        match plan.route:
            case "winograd":
                lw.call(W.build_conv2d_winograd, (win, tile, bias, post), ins + extra + outs, pads, outputs=n)
            case "transposed":
                lw.call(C.build_conv2d_t, (win, tile, bias, post), ins + extra + outs, outputs=n)
            case "gemm":
                lw.call(C.build_conv2d_gemm, (win, tile, bias, post, packed is not None, plan.dual),
                        ins + extra + outs, pads, outputs=n)
            case "depthwise":
                lw.call(DW.build_conv2d_dw, (win, tile.lanes, bias, post), ins + extra + outs, outputs=n)
            case _:
                lw.call(C.build_conv2d, (win, self.group, packed is not None, bias), ins + outs, pads, outputs=n)


def _check_weight(ctx: InferContext, x: Value, w: Value, window: "SlidingWindow", layout: str) -> None:
    """w has x's rank, laid out as (``layout``, kernel...), with the window's kernel."""
    if w.rank != x.rank:
        ctx.fail(f"weight '{w.name}' has shape {D.fmt_shape(w.shape)}, expected rank {x.rank} ({layout}, "
                 f"kernel...)")
    if tuple(w.shape[2:]) != window.kernel:
        ctx.fail(f"kernel_shape={list(window.kernel)} does not match weight '{w.name}' {D.fmt_shape(w.shape)}")


def _check_group(ctx: InferContext, group: int, channels: Dim, what: str) -> None:
    """``group`` is positive and divides the weight's ``channels`` (its dim 0)."""
    w = ctx.input(1)
    if group < 1:
        ctx.fail(f"group={group} must be positive")
    if group > 1:
        if isinstance(channels, int) and channels % group:
            ctx.fail(f"weight '{w.name}' has {channels} {what} channels, not a multiple of group {group}")
        ctx.require_eq(D.mod(channels, group), 0, f"weight '{w.name}' {what} channels modulo group {group}")


def _check_bias(ctx: InferContext, bias: Value | None, m: Dim, w: Value) -> None:
    if bias is None:
        return
    if bias.rank != 1:
        ctx.fail(f"bias '{bias.name}' has shape {D.fmt_shape(bias.shape)}, expected ({m},)")
    ctx.require_eq(bias.shape[0], m, f"bias '{bias.name}' length vs the output channels of weight '{w.name}'")


@dataclass(frozen=True)
class ConvTranspose(CoreOp):
    """Inputs: X (N, C, spatial...), W (C, M/group, k...), [B (M,)]. ``output_shape``: the
    spatial output dims when given (else empty)."""

    window: SlidingWindow
    group: int = 1
    output_padding: tuple[int, ...] = ()
    output_shape: tuple[int, ...] = ()

    def infer(self, ctx: InferContext) -> None:
        x, w, bias = ctx.input(0), ctx.input(1), ctx.optional(2)
        ctx.check_dtype(x, CONV_DTYPES)
        _check_same(ctx, [x, w], "weight")
        _check_same(ctx, [x, bias], "bias")
        _check_weight(ctx, x, w, self.window, "C, M/group")
        _check_group(ctx, self.group, w.shape[0], "input")
        ctx.require_eq(x.shape[1], w.shape[0], f"input '{x.name}' channels vs weight '{w.name}' dim 0")
        m = D.mul(w.shape[1], self.group)
        _check_bias(ctx, bias, m, w)
        win, out = self.window.resolve_transposed(ctx, x, self.output_padding or (0,) * self.window.rank,
                                                  self.output_shape)
        ctx.info = win
        ctx.set_output(0, x.dtype, (x.shape[0], m) + out)

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        """A float32 2-D ConvTranspose of one group, constant weights and pads known at
        compile time is a GEMM and a Col2Im: the columns ``W^T x`` ([M * kh * kw, C] times
        each image's [C, H * W]) summed into the image by the blocks' geometry, then the bias
        added. The image dims may be symbolic: Col2Im's image_shape is then a shape value of
        the output's dims. The direct kernel spreads every (input channel, output channel,
        tap) over the image, strided when the stride is not 1: a 2x2 stride-2 upsampling took
        7.4x, a 3x3 one 8.2x onnxruntime-web's time in Node, and a symbolic U-Net's 2x2 one
        40% of its native run."""
        x, w, y = graph.values[node.inputs[0]], graph.values[node.inputs[1]], graph.values[node.outputs[0]]
        win: C.Window = node.info
        if (x.dtype != FLOAT32 or x.rank != 4 or self.group != 1 or w.const is None
                or not all(isinstance(p, int) for p in win.pads)
                or min(win.pads) < 0):  # an output_shape past what the input reaches
            return None
        c, m, kh, kw = (int(d) for d in w.shape)
        h, wd = x.shape[2], x.shape[3]
        image = (y.shape[2], y.shape[3])
        blocks = [window_count(image[a], win.pads[a], win.pads[2 + a], win.dilations[a] * (win.kernel[a] - 1) + 1,
                               win.strides[a]) for a in range(2)]
        if blocks != [h, wd]:  # (symbolic dims: when the dims' arithmetic proves it)
            return None
        patch = Patch(graph, node)
        add = patch.add

        def constant(tag: str, arr: np.ndarray) -> str:
            name = graph.fresh_name(f"{node.outputs[0]}/{tag}")
            graph.add_value(Value(name, FLOAT32 if arr.dtype == np.float32 else INT64, arr.shape, const=arr))
            return name

        wt = constant("weights", np.ascontiguousarray(w.const.reshape(c, m * kh * kw).T))
        rows = add(ViewAs((x.shape[0], c, h * wd)), [x.name], graph.fresh_name(f"{x.name}/rows"))
        cols = add(L.MatMul(), [wt, rows], graph.fresh_name(f"{node.outputs[0]}/cols"))
        bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
        image_out = graph.fresh_name(f"{node.outputs[0]}/image") if bias else node.outputs[0]
        if all(isinstance(d, int) for d in image):
            image_shape = constant("image_shape", np.array(image, np.int64))
        else:
            image_shape = graph.fresh_name(f"{node.outputs[0]}/image_shape")
            graph.add_value(Value(image_shape, INT64, (2,), sym=image))
        add(Col2Im(win.strides, win.dilations, tuple(int(p) for p in win.pads)),
            [cols, image_shape, constant("block_shape", np.array([kh, kw], np.int64))], image_out)
        if bias:
            b = graph.values[bias]
            if b.const is not None:
                col = constant("bias", b.const.reshape(m, 1, 1))
            else:
                col = add(ViewAs((m, 1, 1)), [bias], graph.fresh_name(f"{bias}/col"))
            add(EW.Elementwise("add"), [image_out, col], node.outputs[0])
        return patch.nodes

    def lower(self, lw, node) -> None:
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        win: C.Window = node.info
        _check_output_size(lw, x, y, win)
        bias = len(node.inputs) > 2 and bool(node.inputs[2])
        ins = [lw.tensor(i) for i in node.inputs[:3] if i]
        _call_conv_nd(lw, (win, self.group, True, bias), ins, y, [lw.slot(d) for d in C.symbolic(win.pads)])


def _call_conv_nd(lw, params, ins, y: Value, pads) -> None:
    """The direct N-D kernel on tensors ``ins`` into a new ``y``, with the float32 scratch it
    sums a narrow float in."""
    sums = CN.sums_dtype(y.dtype)
    tmp = [lw.scratch("float32 sums", sums, y.shape)] if sums is not None else []
    lw.call(CN.build_conv_nd, params, ins + tmp + [lw.alloc(y.name)], pads, outputs=len(tmp) + 1)


@dataclass(frozen=True)
class DeformConv(CoreOp):
    """Deformable 2-D convolution. Inputs: X (N, C, H, W), W (M, C/group, kH, kW), offset
    (N, offset_group * kH * kW * 2, oH, oW), [B (M,)], [mask (N, offset_group * kH * kW, oH,
    oW)]."""

    window: SlidingWindow
    group: int = 1
    offset_group: int = 1

    def infer(self, ctx: InferContext) -> None:
        x, w, offset, bias, mask = ctx.input(0), ctx.input(1), ctx.input(2), ctx.optional(3), ctx.optional(4)
        ctx.check_dtype(x, DEFORM_DTYPES)
        for what, v in (("weight", w), ("offset", offset), ("bias", bias), ("mask", mask)):
            _check_same(ctx, [x, v], what)
        if x.rank != 4:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; only 2-D DeformConv (N, C, H, W) is "
                     f"supported")
        if w.rank != 4 or tuple(w.shape[2:]) != self.window.kernel:
            ctx.fail(f"weight '{w.name}' has shape {D.fmt_shape(w.shape)}; expected (M, C/group, "
                     f"{', '.join(map(str, self.window.kernel))})")
        m = w.shape[0]
        _check_group(ctx, self.group, m, "output")
        ctx.require_eq(x.shape[1], D.mul(w.shape[1], self.group),
                       f"input '{x.name}' channels vs weight '{w.name}' dim 1 times group {self.group}")
        if self.offset_group < 1:
            ctx.fail(f"offset_group={self.offset_group} must be positive")
        ctx.require_eq(D.mod(x.shape[1], self.offset_group), 0,
                       f"input '{x.name}' channels modulo offset_group {self.offset_group}")
        _check_bias(ctx, bias, m, w)
        win, out = self.window.resolve(ctx, x)
        taps = self.offset_group * win.taps
        for v, per_tap, what in ((offset, 2, "offset"), (mask, 1, "mask")):
            if v is None:
                continue
            want = (x.shape[0], taps * per_tap) + out
            if v.rank != 4:
                ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}, expected {D.fmt_shape(want)}")
            for a, (d, e) in enumerate(zip(v.shape, want)):
                ctx.require_eq(d, e, f"{what} '{v.name}' dim {a}")
        ctx.info = win
        ctx.set_output(0, x.dtype, (x.shape[0], m) + out)

    def lower(self, lw, node) -> None:
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        win: C.Window = node.info
        _check_output_size(lw, x, y, win)
        bias = len(node.inputs) > 3 and bool(node.inputs[3])
        mask = len(node.inputs) > 4 and bool(node.inputs[4])
        ins = [lw.tensor(i) for i in node.inputs[:5] if i]
        lw.call(CN.build_deform_conv, (win, self.group, self.offset_group, bias, mask), ins + [lw.alloc(y.name)])


# ----------------------------------------------------------------------------- Col2Im


COL2IM_DTYPES = FLOATS + (INT32, INT64)


@dataclass(frozen=True)
class Col2Im(CoreOp):
    """Inputs: x (N, C * K, L), image_shape, block_shape (N-element shape tensors; K is the
    product of the block sizes, L the number of blocks the window geometry fits in the
    image). Output (N, C, image...). Shape tensors known at compile time fix the dims;
    otherwise they are read at run time, and every check waits for them (lower)."""

    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]

    def infer(self, ctx: InferContext) -> None:
        x, image, block = ctx.input(0), ctx.input(1), ctx.input(2)
        ctx.check_dtype(x, COL2IM_DTYPES)
        if x.rank != 3:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C * block size, blocks)")
        r = ctx.shape_length(image, "image_shape")
        if ctx.shape_length(block, "block_shape") != r:
            ctx.fail(f"block_shape '{block.name}' must have {r} elements, as image_shape '{image.name}'")
        for name, vals in (("strides", self.strides), ("dilations", self.dilations)):
            if len(vals) != r or min(vals, default=1) < 1:
                ctx.fail(f"{name}={list(vals)} must be {r} positive integers")
        if len(self.pads) != 2 * r or min(self.pads, default=0) < 0:
            ctx.fail(f"pads={list(self.pads)} must be {2 * r} non-negative integers")
        img, blk = image.int_contents(), block.int_contents()
        runtime = img is None or blk is None
        img = img if img is not None else tuple(ctx.fresh("col2im_image") for _ in range(r))
        blk = blk if blk is not None else tuple(ctx.fresh("col2im_block") for _ in range(r))
        for a, k in enumerate(blk):
            if isinstance(k, int) and k < 1:
                ctx.fail(f"block_shape '{block.name}' element {a} is {k}; block sizes must be positive")
        counts = tuple(window_count(img[a], self.pads[a], self.pads[r + a], self.dilations[a] * (blk[a] - 1) + 1,
                                    self.strides[a]) for a in range(r))
        for a, c in enumerate(counts):
            if isinstance(c, int) and c < 0:
                ctx.fail(f"image dim {a} ({img[a]}) is too small for a block of {blk[a]} with pads "
                         f"{self.pads[a]} + {self.pads[r + a]}")
        taps = D.product(blk)
        if not runtime:
            if isinstance(taps, int):
                ctx.require_eq(D.mod(x.shape[1], taps), 0, f"input '{x.name}' dim 1 modulo the block size {taps}")
            ctx.require_eq(x.shape[2], D.product(counts), f"input '{x.name}' dim 2 vs the blocks in the image")
        ctx.info = (runtime, blk, counts)
        ctx.set_output(0, x.dtype, (x.shape[0], D.div_exact(x.shape[1], taps)) + tuple(img))

    def lower(self, lw, node) -> None:
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        runtime, blk, counts = node.info
        if runtime:
            lw.define_dims(y.shape[2:], lw.values_of(node.inputs[1]))
            lw.define_dims(blk, lw.values_of(node.inputs[2]))  # the output's channels divide by them (lw.slot)
            one = lw.const_slot(1)
            for a, k in enumerate(blk):
                lw.check_le(one, lw.slot(k), f"{lw.context()}: block_shape element {a} is {{1}}; block sizes "
                                             f"must be positive")
            for a, c in enumerate(counts):
                lw.check_le(lw.const_slot(0), lw.slot(c), f"{lw.context()}: image dim {a} is too small for "
                                                          f"its block ({{1}} blocks)")
            lw.check_eq(lw.slot(x.shape[2]), lw.slot(D.product(counts)),
                        f"{lw.context()}: input '{x.name}' dim 2 = {{0}} does not equal the {{1}} blocks the "
                        f"image holds")
        else:
            for a, c in enumerate(counts):
                lw.check_nonnegative(c, f"{lw.context()}: image dim {a} is too small for its block ({{1}} blocks)")
        lw.call(CN.build_col2im, (self.strides, self.dilations, self.pads),
                [lw.tensor(x.name), lw.alloc(y.name)], [lw.slot(d) for d in tuple(blk) + tuple(counts)])


# ----------------------------------------------------------------------------- pooling


@dataclass(frozen=True)
class Pool(CoreOp):
    """Max, average or Lp pooling over the spatial dims; output 1 (max only): the flat
    index of each maximum in x, its spatial dims row-major (``storage_order`` 0) or
    column-major (1)."""

    kind: str  # "max", "avg" or "lp"
    window: SlidingWindow
    ceil_mode: bool = False
    count_include_pad: bool = False
    p: float = 2.0
    storage_order: int = 0
    plan: P.Plan | None = field(default=None, repr=False)  # its kernel (toolkit.passes.kernels)

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        if self.kind == "max":
            ctx.check_dtype(x, FLOATS + (INT8, UINT8))
        elif self.kind == "lp" and CP.lp_uses_mathlib(self.p):
            ctx.check_dtype(x, F16_F32)
        else:
            ctx.check_dtype(x, FLOATS)
        if self.kind == "lp" and not self.p > 0:
            ctx.fail(f"p={self.p} must be positive")
        if ctx.wants(1) and self.kind != "max":
            ctx.fail("only MaxPool has an Indices output")
        if self.storage_order not in (0, 1):
            ctx.fail(f"storage_order={self.storage_order} must be 0 or 1")
        win, out = self.window.resolve(ctx, x, self.ceil_mode)
        for a, pad in enumerate(win.pads):
            axis = a % win.rank
            if isinstance(pad, int) and pad >= win.extent(axis):
                ctx.fail(f"pads={list(win.pads)}: a pad must be smaller than the window ({win.extent(axis)} "
                         f"along spatial dim {axis})")
        ctx.info = win
        shape = (x.shape[0], x.shape[1]) + out
        ctx.set_output(0, x.dtype, shape)
        ctx.set_output(1, INT64, shape)

    def select(self, graph: Graph, node: Node, tuning: P.Tuning, route: str | None = None) -> P.Plan:
        """The kernel plan (:func:`toolkit.codegen.plan.plan_pool`)."""
        x, y = graph.values[node.inputs[0]], graph.values[node.outputs[0]]
        indices = len(node.outputs) > 1 and bool(node.outputs[1])
        return P.plan_pool(tuning, self.kind, node.info, indices, x.shape, y.shape, x.dtype, self.ceil_mode, route)

    def lower(self, lw, node) -> None:
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        win: C.Window = node.info
        plan = planned(self, node)
        _check_output_size(lw, x, y, win)
        indices = plan.route == "indices"
        params = CP.Pooling(self.kind, win, self.kind == "avg" and self.count_include_pad, float(self.p),
                            self.storage_order if indices else None, clamped=plan.route == "clamped")
        pads = [lw.slot(d) for d in C.symbolic(win.pads)]
        if indices:
            lw.call(CP.build_pool, params, [lw.tensor(x.name), lw.alloc(y.name), lw.alloc(node.outputs[1])], pads,
                    outputs=2)
            return
        tmp = scratch_of(lw, plan)
        lw.call(CP.build_pool, params, [lw.tensor(x.name)] + tmp + [lw.alloc(y.name)], pads, outputs=len(tmp) + 1)


@dataclass(frozen=True)
class MaxUnpool(CoreOp):
    """Inputs: X (N, C, spatial...), I (MaxPool's indices, X's shape), [output_shape]."""

    window: SlidingWindow

    def infer(self, ctx: InferContext) -> None:
        x, ind, shape = ctx.input(0), ctx.input(1), ctx.optional(2)
        ctx.check_dtype(x, FLOATS)
        ctx.check_dtype(ind, (INT64,))
        self.window.check(ctx, x)
        if ind.rank != x.rank:
            ctx.fail(f"indices '{ind.name}' has shape {D.fmt_shape(ind.shape)}; it must have the shape of "
                     f"'{x.name}' {D.fmt_shape(x.shape)}")
        for a, (d, e) in enumerate(zip(ind.shape, x.shape)):
            ctx.require_eq(d, e, f"indices '{ind.name}' dim {a} vs input '{x.name}'")
        w = self.window
        default = list(x.shape[:2]) + [(x.shape[2 + a] - 1) * w.strides[a] - w.pads[a] - w.pads[w.rank + a]
                                       + w.kernel[a] for a in range(w.rank)]
        out = default
        if shape is not None:
            if ctx.shape_length(shape, "output_shape") != x.rank:
                ctx.fail(f"output_shape '{shape.name}' must have {x.rank} elements")
            vals = shape.int_contents()
            if vals is None:  # read at run time, then checked (lower)
                out = [ctx.fresh("maxunpool") for _ in range(x.rank)]
            else:
                out = list(vals)
                for a, (d, o) in enumerate(zip(default, out)):
                    ctx.require_le(d, o, _unpool_check(shape, a))
        ctx.info = (w.geometry(w.pads[:w.rank], w.pads[w.rank:]), tuple(default))
        ctx.set_output(0, x.dtype, out)

    def lower(self, lw, node) -> None:
        out = lw.value(node.outputs[0])
        win, default = node.info
        given = len(node.inputs) > 2 and bool(node.inputs[2])
        if given and not lw.value(node.inputs[2]).known:
            shape = lw.value(node.inputs[2])
            lw.define_dims(out.shape, lw.values_of(shape.name))
            for a, (d, o) in enumerate(zip(default, out.shape)):
                lw.check_le(lw.slot(d), lw.slot(o), f"{lw.context()}: {_unpool_check(shape, a)}: {o} = {{1}} is "
                                                    f"less than {d} = {{0}}")
        lw.run_kernel(CP.build_max_unpool, (win, given), node.inputs[:2], node.outputs[:1],
                      error="element {0} of the indices is {1}, outside [0, {2})")


def _unpool_check(shape: Value, axis: int) -> str:
    return f"output_shape '{shape.name}' dim {axis} vs the unpooled size"


# ----------------------------------------------------------------------------- normalizations


@dataclass(frozen=True)
class BatchNorm(CoreOp):
    """Inference: inputs X (N, C, ...), scale, bias, mean, var (each (C,))."""

    epsilon: float = 1e-5

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        for v in ctx.inputs():
            ctx.check_dtype(v, FLOATS)
        if x.rank < 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, ...)")
        for i, what in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")):
            _check_channels(ctx, x, ctx.input(i), what, x.shape[1])
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(C.build_batch_norm, self.epsilon, node.inputs[:5], node.outputs[:1])


def _check_channels(ctx: InferContext, x: Value, v: Value, what: str, n: Dim) -> None:
    if v.rank != 1:
        ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}, expected ({n},)")
    ctx.require_eq(v.shape[0], n, f"{what} '{v.name}' length vs input '{x.name}'")


@dataclass(frozen=True)
class LRN(CoreOp):
    """Local response normalization across channels (ONNX LRN)."""

    size: int
    alpha: float = 1e-4
    beta: float = 0.75
    bias: float = 1.0

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, F16_F32)
        if x.rank < 3:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, spatial...)")
        if self.size < 1:
            ctx.fail(f"size={self.size} must be positive")
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(C.build_lrn, (self.size, self.alpha, self.beta, self.bias), node.inputs[:1], node.outputs[:1])


@dataclass(frozen=True)
class GroupNorm(CoreOp):
    """Normalize each group of channels of each image by its mean and variance, then scale
    and shift. Inputs: X (N, C, ...), scale, bias: one value per channel, or per group with
    ``per_group``. ``groups`` None: one group per channel (InstanceNormalization)."""

    epsilon: float = 1e-5
    groups: int | None = None
    per_group: bool = False

    def infer(self, ctx: InferContext) -> None:
        x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
        for v in (x, scale, bias):
            ctx.check_dtype(v, FLOATS)
        if x.rank < 3 if self.groups is None else x.rank < 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, "
                     f"{'spatial...' if self.groups is None else '...'})")
        n = x.shape[1]
        if self.groups is not None:
            if self.groups < 1:
                ctx.fail(f"num_groups={self.groups} must be positive")
            ctx.require_eq(D.mod(x.shape[1], self.groups), 0, f"input '{x.name}' channels modulo num_groups "
                                                               f"{self.groups}")
            if self.per_group:
                n = self.groups
        _check_channels(ctx, x, scale, "scale", n)
        _check_channels(ctx, x, bias, "bias", n)
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(C.build_group_norm, (self.epsilon, self.groups, self.per_group), node.inputs[:3],
                      node.outputs[:1])


@dataclass(frozen=True)
class LpNorm(CoreOp):
    """x divided by its L1 or L2 norm along ``axis`` (ONNX LpNormalization)."""

    axis: int = -1
    p: int = 2

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, FLOATS)
        if self.p not in (1, 2):
            ctx.fail(f"p={self.p} is not supported (1 or 2)")
        ctx.info = ctx.axis(self.axis, x.rank)
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(C.build_lp_norm, (node.info, self.p), node.inputs[:1], node.outputs[:1])

