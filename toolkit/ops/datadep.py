"""Core ops whose output shape depends on tensor *values*: NonZero and Range.

Their output dims are fresh data-dependent symbols (``nonzero_0``) unless the values are
known at compile time. At run time a counting kernel computes the symbol before the
output is allocated, then the filling kernel runs: the shape function of seed 000.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen import datadep as K
from ..ir import dims as D
from ..ir.dtypes import ALL, FLOAT32, FLOAT64, INT16, INT32, INT64
from .base import CoreOp, InferContext

RANGE_DTYPES = (FLOAT32, FLOAT64, INT16, INT32, INT64)


@dataclass(frozen=True)
class NonZero(CoreOp):
    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, ALL)
        if x.rank == 0:
            ctx.fail("NonZero of a scalar is not supported (give the input at least one dim)")
        ctx.set_output(0, INT64, (x.rank, ctx.fresh("nonzero")))

    def lower(self, lw, node) -> None:
        out = lw.value(node.outputs[0])
        x = lw.tensor(node.inputs[0])
        count = lw.result_slot(str(out.shape[1]))
        lw.call(K.build_count_nonzero, None, [x], [count], outputs=0)
        lw.define(out.shape[1], count)
        lw.call(K.build_nonzero, None, [x, lw.alloc(out.name)])


def range_length(start: D.Dim, limit: D.Dim, delta: int) -> D.Dim:
    """max(0, ceil((limit - start) / delta)) for a constant non-zero delta."""
    if delta > 0:
        return D.maximum(0, D.ceildiv(D.add(limit, D.mul(start, -1)), delta))
    return D.maximum(0, D.ceildiv(D.add(start, D.mul(limit, -1)), -delta))


@dataclass(frozen=True)
class Range(CoreOp):
    def infer(self, ctx: InferContext) -> None:
        start, limit, delta = ctx.input(0), ctx.input(1), ctx.input(2)
        for v in (start, limit, delta):
            ctx.check_dtype(v, RANGE_DTYPES)
            if v.dtype != start.dtype:
                ctx.fail(f"inputs differ in dtype: '{start.name}' {start.dtype}, '{v.name}' {v.dtype}")
            if D.product(v.shape) != 1:
                ctx.fail(f"input '{v.name}' must be a scalar, has shape {D.fmt_shape(v.shape)}")
        known = [v.int_contents() if not v.dtype.is_float else None for v in (start, limit, delta)]
        if all(k is not None for k in known) and isinstance(known[2][0], int) and known[2][0] != 0:
            n = range_length(known[0][0], known[1][0], known[2][0])
            sym = None
            if isinstance(n, int) and n <= 64:
                sym = [D.add(known[0][0], i * known[2][0]) for i in range(n)]
            ctx.set_output(0, start.dtype, (n,), sym=sym)
        else:
            ctx.set_output(0, start.dtype, (ctx.fresh("range"),))

    def lower(self, lw, node) -> None:
        out = lw.value(node.outputs[0])
        n = out.shape[0]
        regs = [lw.tensor(i) for i in node.inputs[:3]]
        atom = n.atom() if isinstance(n, D.Expr) else None
        if not lw.is_defined(n) and isinstance(atom, D.Sym) and atom.kind == "data":
            slot = lw.result_slot(str(n))
            lw.call(K.build_range_count, None, regs, [slot], error="delta is 0, so the length is undefined",
                    outputs=0)
            lw.define(n, slot)
        lw.call(K.build_range_fill, None, regs + [lw.alloc(out.name)])
