"""Reductions and row-wise normalizations: Reduce (sum, mean, max, min), ArgMax, Softmax,
LayerNorm.

The reduced axes decide the output's rank and the kernel's loops, so they are parameters
known at compile time (a frontend reads them from an attribute or a constant input).
Reducing no axes (``noop_with_empty_axes``) is simplified to a view.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..codegen import reduce as R
from ..codegen.elementwise import build_elementwise
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT16, FLOAT32, FLOATS, INT64, NUMERIC
from ..ir.graph import Graph, Node, Value
from .base import CoreOp, InferContext, replace_node
from .elementwise import Elementwise
from .shape import Identity

F16_F32 = (FLOAT16, FLOAT32)


def kept_shape(shape: Sequence[Dim], axes: Sequence[int], keepdims: bool) -> list[Dim]:
    if keepdims:
        return [1 if a in axes else d for a, d in enumerate(shape)]
    return [d for a, d in enumerate(shape) if a not in axes]


@dataclass(frozen=True)
class Reduce(CoreOp):
    kind: str  # "sum", "mean", "max" or "min"
    axes: tuple[int, ...] | None = None  # None or (): every axis, or none with noop_with_empty_axes
    keepdims: bool = True
    noop_with_empty_axes: bool = False

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, FLOATS if self.kind == "mean" else NUMERIC)
        if self.axes and x.rank == 0:
            ctx.fail(f"input '{x.name}' is a scalar; it has no axes {list(self.axes)} to reduce")
        if not self.axes:
            axes = [] if self.noop_with_empty_axes else list(range(x.rank))
        else:
            axes = sorted(ctx.axis(int(a), x.rank, "axes entry") for a in self.axes)
            if len(set(axes)) != len(axes):
                ctx.fail(f"axes {list(self.axes)} repeat an axis")
        ctx.info = tuple(axes)
        ctx.set_output(0, x.dtype, kept_shape(x.shape, axes, self.keepdims))

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        if node.info:
            return None
        return replace_node(graph, node, Identity(), node.inputs[:1])  # reducing no axes

    def lower(self, lw, node) -> None:
        lw.run_kernel(R.build_reduce, (self.kind, node.info), node.inputs[:1], node.outputs[:1])


@dataclass(frozen=True)
class ArgMax(CoreOp):
    axis: int = 0
    keepdims: bool = True
    select_last_index: bool = False

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, NUMERIC)
        if x.rank == 0:
            ctx.fail(f"input '{x.name}' is a scalar; ArgMax needs an axis")
        axis = ctx.axis(self.axis, x.rank)
        ctx.info = axis
        ctx.set_output(0, INT64, kept_shape(x.shape, [axis], self.keepdims))

    def lower(self, lw, node) -> None:
        axis = node.info
        lw.run_kernel(R.build_argmax, (axis, self.select_last_index), node.inputs[:1], node.outputs[:1],
                      error=f"argmax over axis {axis} of length {{0}}: the axis is empty")


@dataclass(frozen=True)
class Softmax(CoreOp):
    """Softmax along one axis (ONNX 13's meaning; older versions are translated to it)."""

    axis: int = -1

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, F16_F32)
        ctx.info = ctx.axis(self.axis, x.rank)
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(R.build_softmax, node.info, node.inputs[:1], node.outputs[:1])


@dataclass(frozen=True)
class LayerNorm(CoreOp):
    """Inputs: X, Scale, [B]; outputs: Y, [Mean], [InvStdDev], normalizing over axes
    ``axis..`` and computing in float32."""

    axis: int = -1
    epsilon: float = 1e-5

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, F16_F32)
        axis = ctx.axis(self.axis, x.rank)
        for what, p in (("Scale", ctx.input(1)), ("B", ctx.optional(2))):
            if p is not None:
                if p.dtype != x.dtype:
                    ctx.fail(f"{what} '{p.name}' has dtype {p.dtype}, X '{x.name}' {x.dtype}")
                ctx.unidirectional(p, x.shape, what)
        ctx.info = axis
        ctx.set_output(0, x.dtype, x.shape)
        stat = tuple(x.shape[:axis]) + (1,) * (x.rank - axis)
        ctx.set_output(1, FLOAT32, stat)
        ctx.set_output(2, FLOAT32, stat)

    def lower(self, lw, node) -> None:
        axis = node.info
        x = lw.value(node.inputs[0])
        params = [lw.value(i) for i in node.inputs[1:3] if i]
        stats = [node.outputs[i] if i < len(node.outputs) else "" for i in (1, 2)]
        fused = all(_indexed_like_row(p, x.shape, axis) for p in params)
        fused_params = params if fused else []
        kparams = (axis, self.epsilon, len(fused_params), tuple(bool(s) for s in stats))
        lw.run_kernel(R.build_layer_norm, kparams, [x.name] + [p.name for p in fused_params],
                      [node.outputs[0]] + [s for s in stats if s])
        if not fused:
            # Scale or B varies along the outer dims or repeats within a row: y = y * scale + b
            # in place, with the elementwise kernels' general broadcasting
            y = lw.tensor(node.outputs[0])
            lw.call(build_elementwise, Elementwise("affine"), [y] + [lw.tensor(p.name) for p in params] + [y])


def _indexed_like_row(p: Value, shape: Sequence[Dim], axis: int) -> bool:
    """Whether ``p`` broadcast to ``shape`` repeats one normalized row exactly, so element
    ``j`` of a row reads ``p[j]``."""
    full = (1,) * (len(shape) - p.rank) + tuple(p.shape)
    return all(d == 1 for d in full[:axis]) and all(d == s for d, s in zip(full[axis:], shape[axis:]))
