"""Convolution, pooling and per-channel normalizations: Conv, Pool, BatchNorm (inference),
LRN.

Conv and the pools are 2-D (NCHW), float32. Output sizes are dim expressions, so batch and
spatial dims may be symbolic: ``(h + pads - dilation * (k - 1) - 1) // stride + 1``. With
``auto_pad`` SAME and a stride above 1 the pads themselves depend on the input size; they
are then symbolic too and reach the kernels as run-time scalars. A Conv's constant
weights are reordered for its kernel at compile time (a simplification).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..codegen import conv as C
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32
from ..ir.graph import Graph, Node, Value
from .base import CoreOp, InferContext, replace_node

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


@dataclass(frozen=True)
class Window2D:
    """A sliding window's attributes as given: kernel size, strides, dilations, explicit pads
    (top, left, bottom, right) or ``auto_pad``."""

    kernel: tuple[int, int]
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    auto_pad: str = "NOTSET"

    def resolve(self, ctx: InferContext, x: Value, ceil_mode: bool = False) -> tuple[C.Window, tuple[Dim, Dim]]:
        """The window geometry for input ``x`` and the output (height, width)."""
        for name, pair in (("kernel_shape", self.kernel), ("strides", self.strides), ("dilations", self.dilations)):
            if len(pair) != 2 or min(pair) < 1:
                ctx.fail(f"{name}={list(pair)} must be two positive integers")
        if self.auto_pad not in AUTO_PADS:
            ctx.fail(f"auto_pad '{self.auto_pad}' is not one of {', '.join(AUTO_PADS)}")
        if self.auto_pad == "NOTSET" and (len(self.pads) != 4 or min(self.pads) < 0):
            ctx.fail(f"pads={list(self.pads)} must be four non-negative integers")
        begin: list[Dim] = [0, 0]
        end: list[Dim] = [0, 0]
        out: list[Dim] = [0, 0]
        for a in (0, 1):
            size, s = x.shape[2 + a], self.strides[a]
            ext = self.dilations[a] * (self.kernel[a] - 1) + 1
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out[a] = D.ceildiv(size, s)
                total = D.maximum(0, (out[a] - 1) * s + ext - size)
                half = D.floordiv(total, 2)
                begin[a], end[a] = (half, total - half) if self.auto_pad == "SAME_UPPER" else (total - half, half)
            elif self.auto_pad == "VALID":
                out[a] = D.floordiv(size - ext, s) + 1
            else:
                begin[a], end[a] = self.pads[a], self.pads[a + 2]
                span = size + begin[a] + end[a] - ext
                if ceil_mode:
                    # the last window must start inside the input or its leading pad
                    out[a] = D.minimum(D.ceildiv(span, s) + 1, D.ceildiv(size + begin[a], s))
                else:
                    out[a] = D.floordiv(span, s) + 1
            if isinstance(out[a], int) and out[a] < 0:
                ctx.fail(f"the {'height' if a == 0 else 'width'} {size} is too small for a window of {ext} "
                         f"with pads {begin[a]}+{end[a]} (output size {out[a]})")
        win = C.Window(self.kernel, self.strides, self.dilations, (begin[0], begin[1], end[0], end[1]))
        return win, (out[0], out[1])


def _require_2d(ctx: InferContext, x: Value) -> None:
    ctx.check_dtype(x, (FLOAT32,))
    if x.rank != 4:
        ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; only 2-D {ctx.node.source} "
                 f"(rank 4, NCHW) is supported")


def _check_output_size(lw, x: Value, y: Value, win: C.Window) -> None:
    """A symbolic output height or width is negative when the input is smaller than the
    window: say so instead of failing to allocate."""
    for a, what in ((0, "height"), (1, "width")):
        lw.check_nonnegative(y.shape[2 + a], (
            f"{lw.context()}: input {what} {x.shape[2 + a]} is too small for a window of "
            f"{win.extent(a)} with pads {win.pads[a]} + {win.pads[a + 2]} (output {what} {y.shape[2 + a]} = {{1}})"))


def _call(lw, build, params, x: Value, inputs: list, scratch: Sequence[Dim] | None, out: str, win: C.Window) -> None:
    """The kernel call of a windowed op: inputs, its staging buffer if any, the output; the
    symbolic pads as scalars."""
    _check_output_size(lw, x, lw.value(out), win)
    tmp = [lw.scratch("staged input", FLOAT32, scratch)] if scratch is not None else []
    lw.call(build, params, inputs + tmp + [lw.alloc(out)], [lw.slot(d) for d in C.symbolic(win.pads)],
            outputs=len(tmp) + 1)


# ----------------------------------------------------------------------------- Conv


@dataclass(frozen=True)
class Conv(CoreOp):
    """Inputs: X (N, C, H, W), W (M, C/group, kh, kw), [B (M,)]. ``packed``: W is laid out by
    :func:`toolkit.codegen.conv.pack_weights` (done at compile time for constant weights)."""

    window: Window2D
    group: int = 1
    packed: bool = False

    def infer(self, ctx: InferContext) -> None:
        x, w, bias = ctx.input(0), ctx.input(1), ctx.optional(2)
        _require_2d(ctx, x)
        for v in (w, bias):
            if v is not None:
                ctx.check_dtype(v, (FLOAT32,))
        if w.rank != 4:
            ctx.fail(f"weight '{w.name}' has shape {D.fmt_shape(w.shape)}, expected rank 4 (M, C/group, kH, kW)")
        if tuple(w.shape[2:]) != self.window.kernel:
            ctx.fail(f"kernel_shape={list(self.window.kernel)} does not match weight '{w.name}' "
                     f"{D.fmt_shape(w.shape)}")
        group = self.group
        if group < 1:
            ctx.fail(f"group={group} must be positive")
        m = w.shape[0]
        ctx.require_eq(x.shape[1], D.mul(w.shape[1], group),
                       f"input '{x.name}' channels vs weight '{w.name}' dim 1 times group {group}")
        if group > 1:
            if isinstance(m, int) and m % group:
                ctx.fail(f"weight '{w.name}' has {m} output channels, not a multiple of group {group}")
            ctx.require_eq(D.mod(m, group), 0, f"weight '{w.name}' output channels modulo group {group}")
        if bias is not None:
            if bias.rank != 1:
                ctx.fail(f"bias '{bias.name}' has shape {D.fmt_shape(bias.shape)}, expected ({m},)")
            ctx.require_eq(bias.shape[0], m, f"bias '{bias.name}' length vs weight '{w.name}' output channels")
        win, (oh, ow) = self.window.resolve(ctx, x)
        ctx.info = win
        ctx.set_output(0, FLOAT32, (x.shape[0], m, oh, ow))

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        w = graph.values[node.inputs[1]]
        if self.packed or w.const is None:
            return None
        # reordered now: the kernel loads a vector of weights per tap
        name = f"{w.name}.packed_g{self.group}"
        if name not in graph.values:
            graph.add_value(Value(name, w.dtype, w.shape, const=C.pack_weights(w.const, self.group)))
        return replace_node(graph, node, replace(self, packed=True), [node.inputs[0], name] + node.inputs[2:])

    def lower(self, lw, node) -> None:
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        bias = len(node.inputs) > 2 and bool(node.inputs[2])
        win: C.Window = node.info
        scratch = C.conv_scratch(win, x.shape, y.shape)
        ins = [lw.tensor(i) for i in node.inputs[:3] if i]
        _call(lw, C.build_conv2d, (win, self.group, self.packed, bias), x, ins, scratch, y.name, win)


# ----------------------------------------------------------------------------- pooling


@dataclass(frozen=True)
class Pool(CoreOp):
    kind: str  # "max" or "avg"
    window: Window2D
    ceil_mode: bool = False
    count_include_pad: bool = False

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        _require_2d(ctx, x)
        if ctx.wants(1):
            ctx.fail(f"the Indices output '{ctx.node.outputs[1]}' is not supported (only the pooled values)")
        win, (oh, ow) = self.window.resolve(ctx, x, self.ceil_mode)
        for a, pad in enumerate(win.pads):
            if isinstance(pad, int) and pad >= win.extent(a % 2):
                ctx.fail(f"pads={list(win.pads)}: a pad must be smaller than the window "
                         f"({win.extent(a % 2)} {'rows' if a % 2 == 0 else 'columns'})")
        ctx.info = win
        ctx.set_output(0, FLOAT32, (x.shape[0], x.shape[1], oh, ow))

    def lower(self, lw, node) -> None:
        x, y = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        win: C.Window = node.info
        include_pad = self.kind == "avg" and self.count_include_pad
        scratch = _pool_scratch(x, y, win, self.ceil_mode)
        _call(lw, C.build_pool2d, (self.kind, win, include_pad), x, [lw.tensor(x.name)], scratch, y.name, win)


def _pool_scratch(x: Value, y: Value, win: C.Window, ceil_mode: bool) -> tuple[Dim, ...] | None:
    """The padded input shape a pool reads, or None when every window lies inside x."""
    n, c, h, w = x.shape
    dims = []
    for a, size in ((0, h), (1, w)):
        padded = size + win.pads[a] + win.pads[a + 2]
        if ceil_mode:  # the last window may hang over the end pad
            padded = D.maximum(padded, (y.shape[2 + a] - 1) * win.strides[a] + win.extent(a))
        dims.append(padded)
    if dims[0] == h and dims[1] == w:
        return None
    return (n, c, dims[0], dims[1])


# ----------------------------------------------------------------------------- per channel


@dataclass(frozen=True)
class BatchNorm(CoreOp):
    """Inference: inputs X (N, C, ...), scale, bias, mean, var (each (C,))."""

    epsilon: float = 1e-5

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        for v in ctx.inputs():
            ctx.check_dtype(v, (FLOAT32,))
        if x.rank < 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, ...)")
        for i, what in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")):
            v = ctx.input(i)
            if v.rank != 1:
                ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}, expected ({x.shape[1]},)")
            ctx.require_eq(v.shape[0], x.shape[1], f"{what} '{v.name}' length vs input '{x.name}' channels")
        ctx.set_output(0, FLOAT32, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(C.build_batch_norm, self.epsilon, node.inputs[:5], node.outputs[:1])


@dataclass(frozen=True)
class LRN(CoreOp):
    """Local response normalization across channels (ONNX LRN)."""

    size: int
    alpha: float = 1e-4
    beta: float = 0.75
    bias: float = 1.0

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, (FLOAT32,))
        if x.rank < 3:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, spatial...)")
        if self.size < 1:
            ctx.fail(f"size={self.size} must be positive")
        ctx.set_output(0, FLOAT32, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(C.build_lrn, (self.size, self.alpha, self.beta, self.bias), node.inputs[:1], node.outputs[:1])
