"""Reductions and row-wise normalizations: Reduce (sum, mean, max, min, prod, l1, l2,
sum_square, log_sum, log_sum_exp), ArgMax, ArgMin, Softmax, LogSoftmax, Hardmax, LayerNorm.

The reduced axes are parameters known at compile time (a frontend reads them from an
attribute or a constant input), or an input known only at run time: then the axes kernel
reads them (rejecting entries out of range or repeated, naming the node and the input),
makes a 0/1 mask per axis and the output dims, which are fresh symbols, and the reduction
kernel walks every axis with run-time strides. With keepdims=0 the output's rank is the
input's minus the number of axes, so that number must be static.
Reducing no axes (``noop_with_empty_axes``) is simplified to a view.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from ..codegen import reduce as R
from ..codegen.elementwise import build_elementwise
from ..ir.dims import Dim
from ..ir.dtypes import BOOL, FLOAT16, FLOAT32, FLOATS, INDEX, INT8, INT32, INT64, NUMERIC, UINT8, UINT32, UINT64
from ..ir.graph import Graph, Node, Value
from .base import CoreOp, InferContext, replace_node
from .elementwise import Elementwise
from .shape import Identity, runtime_axes

F16_F32 = (FLOAT16, FLOAT32)
_SUMS = FLOATS + (INT32, INT64, UINT32, UINT64)
# the dtypes ONNX gives each kind (LogSum and LogSumExp are Log and Exp of sums: floats)
REDUCE_DTYPES = {"max": _SUMS + (INT8, UINT8, BOOL), "min": _SUMS + (INT8, UINT8, BOOL),
                 "log_sum": FLOATS, "log_sum_exp": FLOATS}
# kinds whose reduction of one element is that element
_ONE_IS_ITSELF = ("sum", "mean", "max", "min", "prod")


def kept_shape(shape: Sequence[Dim], axes: Sequence[int], keepdims: bool) -> list[Dim]:
    if keepdims:
        return [1 if a in axes else d for a, d in enumerate(shape)]
    return [d for a, d in enumerate(shape) if a not in axes]


@dataclass(frozen=True)
class Reduce(CoreOp):
    """Inputs: x, [axes, known only at run time]. ``axes`` None or (): every axis, or none
    with ``noop_with_empty_axes`` (then the output is the input, as the ONNX spec says)."""

    kind: str  # a key of codegen.reduce.REDUCTIONS
    axes: tuple[int, ...] | None = None
    keepdims: bool = True
    noop_with_empty_axes: bool = False

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        if self.kind not in R.REDUCTIONS:
            ctx.fail(f"reduction '{self.kind}' is not one of {', '.join(R.REDUCTIONS)}")
        ctx.check_dtype(x, REDUCE_DTYPES.get(self.kind, _SUMS))
        if ctx.has(1):
            self._infer_runtime(ctx, x, ctx.input(1))
            return
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

    def _infer_runtime(self, ctx: InferContext, x: Value, axes: Value) -> None:
        if axes.dtype not in INDEX or axes.rank != 1:
            ctx.fail(f"axes '{axes.name}' must be a 1-D int64 or int32 tensor, has {axes.describe()}")
        k = axes.shape[0]
        ctx.info = None  # the kernels read the axes at run time
        if self.keepdims:
            ctx.set_output(0, x.dtype, [1 if d == 1 else ctx.fresh("reduce") for d in x.shape])
            return
        if not isinstance(k, int):
            ctx.fail(f"axes '{axes.name}' has {k} entries; with keepdims=0 the output's rank depends on "
                     f"their number, so it must be static")
        if k > x.rank:
            ctx.fail(f"axes '{axes.name}' has {k} entries; '{x.name}' has only {x.rank} axes")
        ctx.set_output(0, x.dtype, [ctx.fresh("reduce") for _ in range(x.rank - k)])

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        if node.info is None or node.info:
            return None
        if self.noop_with_empty_axes or self.kind in _ONE_IS_ITSELF:
            return replace_node(graph, node, Identity(), node.inputs[:1])  # reducing no axes
        return None

    def lower(self, lw, node) -> None:
        x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        mask = []
        if node.info is None:
            plan = R.AxesPlan(x.rank, empty_all=not self.noop_with_empty_axes,
                              dims="keep" if self.keepdims else "remove", n_in=x.rank, n_out=out.rank)
            mask, dims = runtime_axes(lw, node.inputs[1], plan, dims_in=[lw.slot(d) for d in x.shape])
            lw.define_dims(out.shape, dims)
        scratch = [lw.scratch("accumulator", t, out.shape) for t in R.scratch_dtypes(self.kind, x.dtype)]
        lw.call(R.build_reduce, (self.kind, node.info, self.noop_with_empty_axes),
                [lw.tensor(x.name)] + scratch + [lw.alloc(out.name)], mask)


@dataclass(frozen=True)
class ArgMax(CoreOp):
    axis: int = 0
    keepdims: bool = True
    select_last_index: bool = False

    largest: ClassVar[bool] = True

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, NUMERIC)
        if x.rank == 0:
            ctx.fail(f"input '{x.name}' is a scalar; {type(self).__name__} needs an axis")
        axis = ctx.axis(self.axis, x.rank)
        ctx.info = axis
        ctx.set_output(0, INT64, kept_shape(x.shape, [axis], self.keepdims))

    def lower(self, lw, node) -> None:
        axis = node.info
        lw.run_kernel(R.build_argmax, (axis, self.largest, self.select_last_index), node.inputs[:1],
                      node.outputs[:1],
                      error=f"{type(self).__name__.lower()} over axis {axis} of length {{0}}: the axis is empty")


@dataclass(frozen=True)
class ArgMin(ArgMax):
    largest: ClassVar[bool] = False


@dataclass(frozen=True)
class Softmax(CoreOp):
    """Softmax along one axis (ONNX 13's meaning; older versions are translated to it)."""

    axis: int = -1

    kernel_kind: ClassVar[str] = "softmax"

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, FLOATS)
        ctx.info = ctx.axis(self.axis, x.rank)
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(R.build_softmax, (node.info, self.kernel_kind), node.inputs[:1], node.outputs[:1])


@dataclass(frozen=True)
class LogSoftmax(Softmax):
    """log(Softmax), computed as ``x - max - log(sum(exp(x - max)))``."""

    kernel_kind: ClassVar[str] = "log_softmax"


@dataclass(frozen=True)
class Hardmax(Softmax):
    """1 at the first maximum along the axis, 0 elsewhere."""

    kernel_kind: ClassVar[str] = "hardmax"


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
