"""Indexing ONNX ops -> GatherElements, GatherND, ScatterElements, ScatterND, Cumulative
(CumSum, CumProd), Trilu.

What changed between versions: GatherND-12 adds ``batch_dims``; ScatterND-16 and
ScatterElements-16 add ``reduction`` (none, add, mul) and version 18 adds max and min to it.
The other new versions (GatherND-13, GatherElements-13, ScatterND-13, ScatterElements-13,
CumSum-14) only add types: bfloat16, which symwasm does not carry, and float16 for CumSum.
CumProd-26 is CumSum's twin.
"""
from __future__ import annotations

from ....ops.indexing import Cumulative, GatherElements, GatherND, ScatterElements, ScatterND, Trilu
from ..translate import TranslateContext


def _reduction(ctx: TranslateContext) -> str:
    if ctx.version < 16:
        return "none"
    allowed = ("none", "add", "mul") if ctx.version < 18 else ("none", "add", "mul", "max", "min")
    reduction = ctx.attr("reduction", "none")
    if reduction not in allowed:
        ctx.fail(f"reduction '{reduction}' is not one of {', '.join(allowed)} "
                 f"({ctx.op_type}-{ctx.version})")
    return reduction


def gather_elements(ctx: TranslateContext) -> None:
    ctx.emit(GatherElements(int(ctx.attr("axis", 0))))


def gather_nd(ctx: TranslateContext) -> None:
    ctx.emit(GatherND(int(ctx.attr("batch_dims", 0)) if ctx.version >= 12 else 0))


def scatter_elements(ctx: TranslateContext) -> None:
    ctx.emit(ScatterElements(int(ctx.attr("axis", 0)), _reduction(ctx)))


def scatter_nd(ctx: TranslateContext) -> None:
    ctx.emit(ScatterND(_reduction(ctx)))


def cumulative(ctx: TranslateContext) -> None:
    kind = "sum" if ctx.op_type == "CumSum" else "prod"
    ctx.emit(Cumulative(kind, bool(ctx.attr("exclusive", 0)), bool(ctx.attr("reverse", 0))))


def trilu(ctx: TranslateContext) -> None:
    ctx.emit(Trilu(bool(ctx.attr("upper", 1))), [i for i in ctx.inputs[:2] if i])


def register(r) -> None:
    r.add("GatherElements", (11, 13), gather_elements)
    r.add("GatherND", (11, 12, 13), gather_nd)
    r.add("ScatterElements", (11, 13, 16, 18), scatter_elements)
    r.add("ScatterND", (11, 13, 16, 18), scatter_nd)
    r.add("CumSum", (11, 14), cumulative)
    r.add("CumProd", (26,), cumulative)
    r.add("Trilu", (14,), trilu)
