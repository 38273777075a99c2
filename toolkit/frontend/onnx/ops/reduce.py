"""Reductions: ReduceSum, ReduceMean, ReduceMax and ArgMax.

The reduced axes decide the output's rank and the kernel's loops, so they must be known
at compile time: an attribute before opset 18 (ReduceMean, ReduceMax), an input from 13
(ReduceSum) and 18 (the others) that must be a constant. Reducing no axes
(``noop_with_empty_axes``) is a view of the input.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ....codegen import reduce as R
from ....ir.dims import Dim
from ....ir.graph import FLOAT32, INT64, DType, Value
from ..infer import NUMERIC, InferContext, check_dtype, promote_sym

# op -> (fold kind, divide by the count, dtypes)
REDUCE_OPS: dict[str, tuple[str, bool, tuple[DType, ...]]] = {
    "ReduceSum": ("sum", False, NUMERIC),
    "ReduceMean": ("sum", True, (FLOAT32,)),
    "ReduceMax": ("max", False, NUMERIC),
}


def _resolve(raw: Sequence[int] | None, rank: int, noop: bool) -> list[int]:
    """The sorted reduced axes: none given means all, or none with noop_with_empty_axes."""
    if raw is None or len(raw) == 0:
        return [] if noop else list(range(rank))
    return sorted({int(a) % rank for a in raw})


def _kept_shape(shape: Sequence[Dim], axes: Sequence[int], keepdims: bool) -> list[Dim]:
    if keepdims:
        return [1 if a in axes else d for a, d in enumerate(shape)]
    return [d for a, d in enumerate(shape) if a not in axes]


def _raw_axes_of_node(node, values: Callable[[str], Value], from_input: bool) -> Sequence[int] | None:
    """The axes as the node gives them (at lowering, shape inference has checked them)."""
    if not from_input:
        return node.attrs.get("axes")
    has = len(node.inputs) > 1 and node.inputs[1]
    return promote_sym(values(node.inputs[1])) if has else None


def infer_reduce(from_input: bool) -> Callable[[InferContext], None]:
    def infer(ctx: InferContext) -> None:
        x = ctx.input(0)
        check_dtype(ctx, x, REDUCE_OPS[ctx.node.op][2])
        raw = ctx.const_ints(ctx.optional(1), "axes") if from_input else ctx.attr("axes")
        if raw and x.rank == 0:
            ctx.fail(f"input '{x.name}' is a scalar; it has no axes {list(raw)} to reduce")
        if raw:
            ctx.axes(raw, x.rank)
        axes = _resolve(raw, x.rank, bool(ctx.attr("noop_with_empty_axes", 0)))
        ctx.set_output(0, x.dtype, _kept_shape(x.shape, axes, bool(ctx.attr("keepdims", 1))))

    return infer


def lower_reduce(from_input: bool) -> Callable:
    def lower(lw, node) -> None:
        x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        axes = _resolve(_raw_axes_of_node(node, lw.value, from_input), x.rank,
                        bool(node.attrs.get("noop_with_empty_axes", 0)))
        if not axes:
            lw.view(out.name, x.name)
            return
        kind, mean, _ = REDUCE_OPS[node.op]
        lw.run_kernel(("reduce", node.op, x.dtype.name, x.shape, tuple(axes), out.shape),
                   lambda kb: R.build_reduce(kb, kind, x.dtype, x.shape, axes, out.shape, mean),
                   [x.name], [out.name])

    return lower


def infer_argmax(ctx: InferContext) -> None:
    x = ctx.input(0)
    check_dtype(ctx, x, NUMERIC)
    if x.rank == 0:
        ctx.fail(f"input '{x.name}' is a scalar; ArgMax needs an axis")
    axis = ctx.axis(int(ctx.attr("axis", 0)), x.rank)
    ctx.set_output(0, INT64, _kept_shape(x.shape, [axis], bool(ctx.attr("keepdims", 1))))


def lower_argmax(lw, node) -> None:
    x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
    axis = int(node.attrs.get("axis", 0)) % x.rank
    last = bool(node.attrs.get("select_last_index", 0))
    lw.run_kernel(("argmax", x.dtype.name, x.shape, axis, last, out.shape),
               lambda kb: R.build_argmax(kb, x.dtype, x.shape, axis, out.shape, last),
               [x.name], [out.name], error=f"argmax over axis {axis} of length {{0}}: the axis is empty")


def register(r) -> None:
    r.add("ReduceSum", 13, infer_reduce(True), lower_reduce(True))
    for op in ("ReduceMean", "ReduceMax"):
        r.add(op, 13, infer_reduce(False), lower_reduce(False))
        r.add(op, 18, infer_reduce(True), lower_reduce(True))
    r.add("ArgMax", 13, infer_argmax, lower_argmax)
