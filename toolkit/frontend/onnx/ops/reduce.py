"""Reductions: ReduceSum/Mean/Max/Min and ArgMax -> Reduce and ArgMax. The axes are an
attribute up to ReduceSum-11 and ReduceMean/Max/Min-13, and a constant input after."""
from __future__ import annotations

from ....ops.reduce import ArgMax, Reduce
from ..translate import TranslateContext

# op -> (kind, the first version whose axes are an input)
REDUCE = {"ReduceSum": ("sum", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18),
          "ReduceMin": ("min", 18)}


def reduce(ctx: TranslateContext) -> None:
    kind, axes_input = REDUCE[ctx.op_type]
    axes = ctx.const_ints(1, "axes") if ctx.version >= axes_input else ctx.ints("axes")
    ctx.emit(Reduce(kind, axes, bool(ctx.attr("keepdims", 1)), bool(ctx.attr("noop_with_empty_axes", 0))),
             ctx.inputs[:1])


def argmax(ctx: TranslateContext) -> None:
    ctx.emit(ArgMax(int(ctx.attr("axis", 0)), bool(ctx.attr("keepdims", 1)),
                    bool(ctx.attr("select_last_index", 0))))


def register(r) -> None:
    r.add("ReduceSum", (1, 11, 13), reduce)
    r.add("ReduceMean", (1, 11, 13, 18), reduce)
    r.add("ReduceMax", (1, 11, 12, 13, 18, 20), reduce)
    r.add("ReduceMin", (1, 11, 12, 13, 18, 20), reduce)
    r.add("ArgMax", (1, 11, 12, 13), argmax)
