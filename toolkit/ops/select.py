"""Core ops that select or rank elements: Unique, Compress, TopK, NonMaxSuppression, OneHot.

An output dim that depends on tensor values (how many distinct values, true conditions or
kept boxes) or on a run-time input (TopK's k, OneHot's depth) is a fresh data-dependent
symbol (``unique_0``, ``topk_0``), computed at run time before the output is allocated,
like NonZero's: a counting kernel, or the VM loading k, then the checks, then the filling
kernel. When that value is known at compile time (a constant k, depth or condition, or a
shape value), the dim is that value or expression instead, checked where it can be.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codegen import select as K
from ..ir import dims as D
from ..ir.dtypes import ALL, BOOL, FLOAT32, INT64, NUMERIC
from ..ir.graph import Value
from .base import CoreOp, InferContext


def _one_element(ctx: InferContext, v: Value, what: str) -> None:
    """``v`` holds exactly one element (a scalar or a 1-element tensor), known statically."""
    n = v.numel
    if not isinstance(n, int):
        ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}; it must have exactly one element "
                 f"(a static shape)")
    if n != 1:
        ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}; it must have exactly one element")


def _with_dim(shape, axis: int, d: D.Dim) -> tuple[D.Dim, ...]:
    return tuple(shape[:axis]) + (d,) + tuple(shape[axis + 1:])


# ----------------------------------------------------------------------------- Unique


@dataclass(frozen=True)
class Unique(CoreOp):
    """numpy.unique of the elements (``axis`` None) or of the slices along ``axis``;
    outputs Y, [indices], [inverse_indices], [counts]; in sorted order or (``sorted``
    False) in order of first occurrence."""

    axis: int | None = None
    sorted: bool = True

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, ALL)
        if not ctx.wants(0):
            ctx.fail("output 0 (Y) is required")
        axis = None if self.axis is None else ctx.axis(self.axis, x.rank)
        n = x.numel if axis is None else x.shape[axis]
        u = ctx.fresh("unique")
        ctx.set_output(0, x.dtype, (u,) if axis is None else _with_dim(x.shape, axis, u))
        ctx.set_output(1, INT64, (u,))
        ctx.set_output(2, INT64, (n,))
        ctx.set_output(3, INT64, (u,))
        ctx.info = axis

    def lower(self, lw, node) -> None:
        axis = node.info
        xv = lw.value(node.inputs[0])
        n = xv.numel if axis is None else xv.shape[axis]
        y = lw.value(node.outputs[0])
        u = y.shape[0 if axis is None else axis]
        x = lw.tensor(node.inputs[0])
        order = lw.scratch("sort order", INT64, (2, n))
        grp = lw.scratch("group of each element", INT64, (n,))
        count = lw.result_slot(str(u))
        scratch = [order, grp]
        if axis is None:
            scratch.append(lw.scratch("sorted values", x.dtype, (2, n)))
        lw.call(K.build_unique_count, axis, [x] + scratch, [count], outputs=len(scratch))
        lw.define(u, count)
        work = lw.scratch("group positions and counts", INT64, (2, u))
        wants = tuple(i < len(node.outputs) and bool(node.outputs[i]) for i in (1, 2, 3))
        outs = [lw.alloc(node.outputs[i]) for i, w in zip((0, 1, 2, 3), (True,) + wants) if w]
        lw.call(K.build_unique_fill, (axis, self.sorted, wants), [x, grp, work] + outs, outputs=1 + len(outs))


# ----------------------------------------------------------------------------- Compress


@dataclass(frozen=True)
class Compress(CoreOp):
    """numpy.compress: the slices along ``axis`` (the flattened elements when None) whose
    condition entry is true. A condition shorter than the axis drops the rest; a longer one
    may only be false past the end."""

    axis: int | None = None

    def infer(self, ctx: InferContext) -> None:
        x, cond = ctx.input(0), ctx.input(1)
        ctx.check_dtype(x, ALL)
        if cond.dtype != BOOL:
            ctx.fail(f"condition '{cond.name}' has dtype {cond.dtype}; it must be bool")
        if cond.rank != 1:
            ctx.fail(f"condition '{cond.name}' must be 1-D, has shape {D.fmt_shape(cond.shape)}")
        axis = None if self.axis is None else ctx.axis(self.axis, x.rank)
        n = x.numel if axis is None else x.shape[axis]
        known = cond.int_contents()
        fresh = known is None or not all(isinstance(c, int) for c in known)
        if fresh:
            k: D.Dim = ctx.fresh("compress")
        else:
            picked = [i for i, c in enumerate(known) if c]
            if picked:
                ctx.require_le(picked[-1] + 1, n, f"condition is true at index {picked[-1]}, past the length "
                                                  f"of the input {'' if axis is None else f'along axis {axis} '}")
            k = len(picked)
        ctx.set_output(0, x.dtype, (k,) if axis is None else _with_dim(x.shape, axis, k))
        ctx.info = (axis, fresh)

    def lower(self, lw, node) -> None:
        axis, fresh = node.info
        out = lw.value(node.outputs[0])
        k = out.shape[0 if axis is None else axis]
        x, cond = lw.tensor(node.inputs[0]), lw.tensor(node.inputs[1])
        if fresh:
            slot = lw.result_slot(str(k))
            where = "the input's size {1}" if axis is None else f"the input's length {{1}} along axis {axis}"
            lw.call(K.build_compress_count, axis, [x, cond], [slot], outputs=0,
                    error=f"condition is true at index {{0}}, past {where}")
            lw.define(k, slot)
        lw.call(K.build_compress, axis, [x, cond, lw.alloc(out.name)])


# ----------------------------------------------------------------------------- TopK


@dataclass(frozen=True)
class TopK(CoreOp):
    """The k largest (or smallest) elements along ``axis`` and their int64 indices, sorted,
    ties by lower index; NaN counts as the largest value. Inputs: X, K (one int64)."""

    axis: int = -1
    largest: bool = True

    def infer(self, ctx: InferContext) -> None:
        x, kv = ctx.input(0), ctx.input(1)
        ctx.check_dtype(x, NUMERIC)
        if kv.dtype != INT64:
            ctx.fail(f"K '{kv.name}' has dtype {kv.dtype}; it must be int64")
        _one_element(ctx, kv, "K")
        if x.rank == 0:
            ctx.fail(f"input '{x.name}' is a scalar; TopK needs an axis")
        if not (ctx.wants(0) and ctx.wants(1)):
            ctx.fail("both outputs (Values, Indices) are required")
        axis = ctx.axis(self.axis, x.rank)
        n = x.shape[axis]
        known = kv.int_contents()
        fresh = known is None
        if fresh:
            k: D.Dim = ctx.fresh("topk")
        else:
            k = known[0]
            if isinstance(k, int) and k < 0:
                ctx.fail(f"k = {k} is negative")
            ctx.require_le(0, k, "k must not be negative")
            ctx.require_le(k, n, f"k exceeds the length of axis {axis}")
        shape = _with_dim(x.shape, axis, k)
        ctx.set_output(0, x.dtype, shape)
        ctx.set_output(1, INT64, shape)
        ctx.info = (axis, fresh)

    def lower(self, lw, node) -> None:
        axis, fresh = node.info
        x = lw.value(node.inputs[0])
        k = lw.value(node.outputs[0]).shape[axis]
        n = x.shape[axis]
        if fresh:
            slot = lw.values_of(node.inputs[1])[0]
            lw.check_le(lw.const_slot(0), slot, f"{lw.context()}: k = {{1}} is negative")
            lw.check_le(slot, lw.slot(n), f"{lw.context()}: k = {{0}} exceeds the length {{1}} of axis {axis} "
                                          f"({n}) of input '{x.name}'")
            lw.define(k, slot)
        heap = lw.scratch("heap", INT64, (k,))
        lw.call(K.build_topk, (axis, self.largest),
                [lw.tensor(x.name), heap, lw.alloc(node.outputs[0]), lw.alloc(node.outputs[1])], outputs=3)


# ----------------------------------------------------------------------------- NonMaxSuppression


@dataclass(frozen=True)
class NonMaxSuppression(CoreOp):
    """Inputs: boxes (B, S, 4), scores (B, C, S), [max_output_boxes_per_class],
    [iou_threshold], [score_threshold]; output (num_selected, 3) int64 rows of (batch,
    class, box). No max_output_boxes_per_class (or a constant one <= 0) selects nothing."""

    center_point_box: bool = False

    def infer(self, ctx: InferContext) -> None:
        boxes, scores = ctx.input(0), ctx.input(1)
        for v, what in ((boxes, "boxes"), (scores, "scores")):
            if v.dtype != FLOAT32:
                ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be float32")
            if v.rank != 3:
                ctx.fail(f"{what} '{v.name}' must be 3-D, has shape {D.fmt_shape(v.shape)}")
        ctx.require_eq(boxes.shape[2], 4, f"boxes '{boxes.name}' dim 2 (the box coordinates)")
        ctx.require_eq(scores.shape[0], boxes.shape[0], f"scores '{scores.name}' dim 0 vs boxes dim 0 (batches)")
        ctx.require_eq(scores.shape[2], boxes.shape[1], f"scores '{scores.name}' dim 2 vs boxes dim 1 (boxes)")
        for i, what, dtype in ((2, "max_output_boxes_per_class", INT64), (3, "iou_threshold", FLOAT32),
                               (4, "score_threshold", FLOAT32)):
            v = ctx.optional(i)
            if v is not None:
                if v.dtype != dtype:
                    ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be {dtype}")
                _one_element(ctx, v, what)
        limit = ctx.optional(2)
        known = limit.int_contents() if limit is not None else (0,)
        if known is not None and isinstance(known[0], int) and known[0] <= 0:
            ctx.set_output(0, INT64, (0, 3), const=np.zeros((0, 3), np.int64))  # nothing can be selected
        else:
            ctx.set_output(0, INT64, (ctx.fresh("nms"), 3))

    def lower(self, lw, node) -> None:
        out = lw.value(node.outputs[0])
        boxes = lw.value(node.inputs[0])
        nb, ns = boxes.shape[0], boxes.shape[1]
        nc = lw.value(node.inputs[1]).shape[1]
        has = [i < len(node.inputs) and bool(node.inputs[i]) for i in range(5)]
        ins = [lw.tensor(node.inputs[i]) for i in range(5) if has[i]]
        order = lw.scratch("candidate order", INT64, (2, ns))
        sel = lw.scratch("kept boxes", INT64, (nb, nc, ns))
        nsel = lw.scratch("kept box counts", INT64, (nb, nc))
        count = lw.result_slot(str(out.shape[0]))
        lw.call(K.build_nms_count, (self.center_point_box, has[3], has[4]), ins + [order, sel, nsel], [count],
                error="iou_threshold is outside [0, 1]", outputs=3)
        lw.define(out.shape[0], count)
        lw.call(K.build_nms_fill, None, [sel, nsel, lw.alloc(out.name)])


# ----------------------------------------------------------------------------- OneHot


@dataclass(frozen=True)
class OneHot(CoreOp):
    """Inputs: indices, depth (one number; a float truncates toward zero), values [off, on].
    The output has a new dim of size depth at ``axis``. An index is taken as int64; a
    negative one counts from the end when ``wrap_negative`` (OneHot-11), otherwise it
    matches nothing (OneHot-9)."""

    axis: int = -1
    wrap_negative: bool = True

    def infer(self, ctx: InferContext) -> None:
        ind, depth, values = ctx.input(0), ctx.input(1), ctx.input(2)
        ctx.check_dtype(ind, NUMERIC)
        ctx.check_dtype(depth, NUMERIC)
        ctx.check_dtype(values, ALL)
        _one_element(ctx, depth, "depth")
        if values.rank != 1:
            ctx.fail(f"values '{values.name}' must be 1-D [off_value, on_value], has shape "
                     f"{D.fmt_shape(values.shape)}")
        ctx.require_eq(values.shape[0], 2, f"values '{values.name}' length ([off_value, on_value])")
        axis = ctx.axis(self.axis, ind.rank + 1)
        fresh = False
        if depth.const is not None:
            v = depth.const.reshape(-1)[0]
            if depth.dtype.is_float and not np.isfinite(v):
                ctx.fail(f"depth is {v}")
            d: D.Dim = int(v)  # truncates a float toward zero, like onnxruntime
            if d < 1:
                ctx.fail(f"depth = {d} is less than 1")
        elif depth.sym is not None:
            d = depth.sym[0]
            ctx.require_le(1, d, "depth must be at least 1")
        else:
            d, fresh = ctx.fresh("onehot"), True
        ctx.set_output(0, values.dtype, tuple(ind.shape[:axis]) + (d,) + tuple(ind.shape[axis:]))
        ctx.info = (axis, fresh)

    def lower(self, lw, node) -> None:
        axis, fresh = node.info
        out = lw.value(node.outputs[0])
        if fresh:
            d = out.shape[axis]
            slot = lw.result_slot(str(d))
            lw.call(K.build_onehot_depth, None, [lw.tensor(node.inputs[1])], [slot], outputs=0)
            lw.check_le(lw.const_slot(1), slot, f"{lw.context()}: depth = {{1}} is less than 1")
            lw.define(d, slot)
        lw.call(K.build_onehot, (axis, self.wrap_negative),
                [lw.tensor(node.inputs[0]), lw.tensor(node.inputs[2]), lw.alloc(out.name)])


__all__ = ["Unique", "Compress", "TopK", "NonMaxSuppression", "OneHot"]
