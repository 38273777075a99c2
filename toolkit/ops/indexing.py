"""Indexing core ops: GatherElements, GatherND, ScatterElements, ScatterND (indices are
run-time tensors), Cumulative (CumSum, CumProd) and Trilu.

Indices are checked by the kernels as they read them (negative ones count from the end); an
index out of range fails the run with a message naming the node, the index and the dim, as
Gather's does. The number of data axes a GatherND or ScatterND index tuple addresses (the
indices' last dim) decides the output's rank, so it must be static; the other dims may be
symbolic. Cumulative's axis and Trilu's diagonal may be known only at run time: the kernels
then take them as scalars.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen import indexing as K
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import ALL, FLOAT16, FLOAT32, FLOAT64, INDEX, INT32, INT64, UINT32, UINT64
from ..ir.graph import Value
from .base import CoreOp, InferContext

CUMULATIVE_DTYPES = (FLOAT16, FLOAT32, FLOAT64, INT32, INT64, UINT32, UINT64)
OUT_OF_RANGE = "index {0} is out of range for data dim {2} of size {1}"


def _indices(ctx: InferContext, i: int) -> Value:
    v = ctx.input(i)
    if v.dtype not in INDEX:
        ctx.fail(f"indices '{v.name}' have dtype {v.dtype}; they must be int32 or int64")
    return v


def _check_reduction(ctx: InferContext, reduction: str, data: Value) -> None:
    """Every dtype takes every reduction (on bools numpy's: add and max are or, mul and min
    are and)."""
    if reduction not in K.REDUCTIONS:
        ctx.fail(f"reduction '{reduction}' is not one of {', '.join(K.REDUCTIONS)}")
    ctx.check_dtype(data, ALL)


def _same_dims(ctx: InferContext, a: Value, b: Value, what: str) -> list[Dim]:
    """``a`` and ``b`` have equal shapes (checked at run time where unknown); the shape,
    with the static dim where one of them has it."""
    if a.rank != b.rank:
        ctx.fail(f"{what}: '{a.name}' {D.fmt_shape(a.shape)} and '{b.name}' {D.fmt_shape(b.shape)} "
                 f"differ in rank")
    out = []
    for axis, (x, y) in enumerate(zip(a.shape, b.shape)):
        ctx.require_eq(y, x, f"{what}: dim {axis} of '{b.name}' and of '{a.name}'")
        out.append(y if isinstance(y, int) else x)
    return out


def _elements_axis(ctx: InferContext, axis: int, data: Value, idx: Value) -> int:
    """GatherElements' and ScatterElements' indices: the data's rank, and no larger than the
    data on the other axes (numpy's take_along_axis wants them equal, onnxruntime allows them
    smaller)."""
    if data.rank == 0:
        ctx.fail(f"data '{data.name}' is a scalar; it needs at least one axis")
    if idx.rank != data.rank:
        ctx.fail(f"indices '{idx.name}' {D.fmt_shape(idx.shape)} and data '{data.name}' "
                 f"{D.fmt_shape(data.shape)} differ in rank")
    axis = ctx.axis(axis, data.rank)
    for a in range(data.rank):
        if a != axis:
            ctx.require_le(idx.shape[a], data.shape[a], f"dim {a} of indices '{idx.name}' and of data '{data.name}'")
    return axis


def _tuple_length(ctx: InferContext, idx: Value, most: int) -> int:
    """The static last dim of ND indices: how many data axes each index tuple addresses."""
    if idx.rank == 0:
        ctx.fail(f"indices '{idx.name}' are a scalar; they need at least one dim")
    k = idx.shape[-1]
    if not isinstance(k, int):
        ctx.fail(f"the last dim of indices '{idx.name}' {D.fmt_shape(idx.shape)} is {k}; it must be static "
                 f"(it decides the output's rank)")
    if not 1 <= k <= most:
        ctx.fail(f"the last dim of indices '{idx.name}' is {k}; it must be between 1 and {most}")
    return k


# ----------------------------------------------------------------------------- Gather*


@dataclass(frozen=True)
class GatherElements(CoreOp):
    axis: int = 0

    def infer(self, ctx: InferContext) -> None:
        data, idx = ctx.input(0), _indices(ctx, 1)
        ctx.check_dtype(data, ALL)
        ctx.info = _elements_axis(ctx, self.axis, data, idx)
        ctx.set_output(0, data.dtype, idx.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_gather_elements, node.info, node.inputs[:2], node.outputs[:1], error=OUT_OF_RANGE)


@dataclass(frozen=True)
class GatherND(CoreOp):
    batch_dims: int = 0

    def infer(self, ctx: InferContext) -> None:
        data, idx = ctx.input(0), _indices(ctx, 1)
        ctx.check_dtype(data, ALL)
        b = self.batch_dims
        if not 0 <= b < min(data.rank, idx.rank):
            ctx.fail(f"batch_dims {b} must be at least 0 and less than the ranks of data '{data.name}' "
                     f"({data.rank}) and indices '{idx.name}' ({idx.rank})")
        k = _tuple_length(ctx, idx, data.rank - b)
        batch = []
        for a in range(b):
            ctx.require_eq(idx.shape[a], data.shape[a], f"batch dim {a} of indices '{idx.name}' and of data "
                                                         f"'{data.name}'")
            batch.append(data.shape[a] if isinstance(data.shape[a], int) else idx.shape[a])
        ctx.info = k
        ctx.set_output(0, data.dtype, batch + list(idx.shape[b:-1]) + list(data.shape[b + k:]))

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_gather_nd, (self.batch_dims, node.info), node.inputs[:2], node.outputs[:1],
                      error=OUT_OF_RANGE)


# ----------------------------------------------------------------------------- Scatter*


@dataclass(frozen=True)
class ScatterElements(CoreOp):
    """Inputs: data, indices, updates (the shape of indices)."""

    axis: int = 0
    reduction: str = "none"

    def infer(self, ctx: InferContext) -> None:
        data, idx, upd = ctx.input(0), _indices(ctx, 1), ctx.input(2)
        _check_reduction(ctx, self.reduction, data)
        if upd.dtype != data.dtype:
            ctx.fail(f"updates '{upd.name}' ({upd.dtype}) and data '{data.name}' ({data.dtype}) differ in dtype")
        ctx.info = _elements_axis(ctx, self.axis, data, idx)
        _same_dims(ctx, idx, upd, "updates and indices")
        ctx.set_output(0, data.dtype, data.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_scatter_elements, (node.info, self.reduction), node.inputs[:3], node.outputs[:1],
                      error=OUT_OF_RANGE)


@dataclass(frozen=True)
class ScatterND(CoreOp):
    """Inputs: data, indices, updates (indices' shape without its last dim, then the data
    axes an index tuple does not address)."""

    reduction: str = "none"

    def infer(self, ctx: InferContext) -> None:
        data, idx, upd = ctx.input(0), _indices(ctx, 1), ctx.input(2)
        _check_reduction(ctx, self.reduction, data)
        if upd.dtype != data.dtype:
            ctx.fail(f"updates '{upd.name}' ({upd.dtype}) and data '{data.name}' ({data.dtype}) differ in dtype")
        if data.rank == 0:
            ctx.fail(f"data '{data.name}' is a scalar; it needs at least one axis")
        k = _tuple_length(ctx, idx, data.rank)
        want = tuple(idx.shape[:-1]) + tuple(data.shape[k:])
        if upd.rank != len(want):
            ctx.fail(f"updates '{upd.name}' {D.fmt_shape(upd.shape)} must have shape {D.fmt_shape(want)} "
                     f"(indices' dims but the last, then data's dims from {k})")
        for axis, (u, w) in enumerate(zip(upd.shape, want)):
            ctx.require_eq(u, w, f"dim {axis} of updates '{upd.name}' (expected {D.fmt_shape(want)})")
        ctx.info = k
        ctx.set_output(0, data.dtype, data.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_scatter_nd, (node.info, self.reduction), node.inputs[:3], node.outputs[:1],
                      error=OUT_OF_RANGE)


# ----------------------------------------------------------------------------- Cumulative, Trilu


def _one_int(ctx: InferContext, i: int, what: str) -> Value:
    """Input ``i``: one int32 or int64 element (a scalar, or a tensor of one element)."""
    v = ctx.input(i)
    if v.dtype not in INDEX:
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be int32 or int64")
    if v.rank > 1 or v.numel != 1:
        ctx.fail(f"{what} '{v.name}' must be a scalar, has shape {D.fmt_shape(v.shape)}")
    return v


@dataclass(frozen=True)
class Cumulative(CoreOp):
    """Running sums (``kind`` "sum") or products ("prod") along an axis. Inputs: x, axis (a
    scalar, known at compile time or not)."""

    kind: str = "sum"
    exclusive: bool = False
    reverse: bool = False

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        if self.kind not in K.CUMULATIVE:
            ctx.fail(f"kind '{self.kind}' is not one of {', '.join(K.CUMULATIVE)}")
        ctx.check_dtype(x, CUMULATIVE_DTYPES)
        if x.rank == 0:
            ctx.fail(f"input '{x.name}' is a scalar; {ctx.node.source} needs an axis")
        known = _one_int(ctx, 1, "axis").int_contents()
        # None: the kernel reads the axis at run time
        ctx.info = ctx.axis(known[0], x.rank) if known is not None and isinstance(known[0], int) else None
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        x, out = lw.value(node.inputs[0]), node.outputs[0]
        tensors = [lw.tensor(x.name), lw.alloc(out)]
        if node.info is not None:
            lw.call(K.build_cumulative, (node.info, self.kind, self.exclusive, self.reverse), tensors)
            return
        axis = lw.values_of(node.inputs[1])[0]
        lw.call(K.build_cumulative, (None, self.kind, self.exclusive, self.reverse), tensors, [axis],
                error=f"axis {{0}} is out of range for '{x.name}' of rank {{1}}")


@dataclass(frozen=True)
class Trilu(CoreOp):
    """Inputs: x (rank >= 2), [k] (the diagonal, 0 when absent)."""

    upper: bool = True

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, ALL)
        if x.rank < 2:
            ctx.fail(f"input '{x.name}' {D.fmt_shape(x.shape)} has rank {x.rank}; Trilu needs at least 2")
        if ctx.has(1):
            _one_int(ctx, 1, "k")
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        k = lw.values_of(node.inputs[1])[0] if len(node.inputs) > 1 and node.inputs[1] else lw.const_slot(0)
        lw.call(K.build_trilu, self.upper, [lw.tensor(node.inputs[0]), lw.alloc(node.outputs[0])], [k])
