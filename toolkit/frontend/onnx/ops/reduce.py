"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp -> Reduce;
ArgMax, ArgMin.

The axes are an attribute up to ReduceSum-11 and the others' version 13, and an input
after (with ``noop_with_empty_axes``): a constant one becomes the op's parameter, one known
only at run time stays an input the kernels read. ReduceMax/Min-12 add int8 and uint8,
-20 bool; ReduceLogSum/LogSumExp-28 drop the integer types (symwasm takes floats only for
them: they are Log and Exp of sums). ArgMax/ArgMin-12 add ``select_last_index``.
"""
from __future__ import annotations

from ....ops.reduce import ArgMax, ArgMin, Reduce
from ..translate import TranslateContext
from .shape import known_axes

# op -> (kind, the first version whose axes are an input)
REDUCE = {"ReduceSum": ("sum", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18),
          "ReduceMin": ("min", 18), "ReduceProd": ("prod", 18), "ReduceL1": ("l1", 18), "ReduceL2": ("l2", 18),
          "ReduceSumSquare": ("sum_square", 18), "ReduceLogSum": ("log_sum", 18),
          "ReduceLogSumExp": ("log_sum_exp", 18)}


def reduce(ctx: TranslateContext) -> None:
    kind, axes_input = REDUCE[ctx.op_type]
    inputs = ctx.inputs[:1]
    if ctx.version < axes_input:
        axes = ctx.ints("axes")
    elif not ctx.has(1):
        axes = None
    else:
        axes = known_axes(ctx, 1)
        if axes is None:
            inputs = ctx.inputs[:2]
    ctx.emit(Reduce(kind, axes, bool(ctx.attr("keepdims", 1)), bool(ctx.attr("noop_with_empty_axes", 0))),
             inputs)


def arg_reduce(ctx: TranslateContext) -> None:
    op = ArgMax if ctx.op_type == "ArgMax" else ArgMin
    ctx.emit(op(int(ctx.attr("axis", 0)), bool(ctx.attr("keepdims", 1)), bool(ctx.attr("select_last_index", 0))))


def register(r) -> None:
    r.add("ReduceSum", (1, 11, 13), reduce)
    for op in ("ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare"):
        r.add(op, (1, 11, 13, 18), reduce)
    r.add("ReduceLogSum", (1, 11, 13, 18, 28), reduce)
    r.add("ReduceLogSumExp", (1, 11, 13, 18, 28), reduce)
    r.add("ReduceMax", (1, 11, 12, 13, 18, 20), reduce)
    r.add("ReduceMin", (1, 11, 12, 13, 18, 20), reduce)
    r.add("ArgMax", (1, 11, 12, 13), arg_reduce)
    r.add("ArgMin", (1, 11, 12, 13), arg_reduce)
