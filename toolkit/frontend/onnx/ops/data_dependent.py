"""Ops whose output shape depends on tensor *values*: NonZero and Range.

Their output dims are fresh data-dependent symbols (``nonzero_0``) unless the values are
known at compile time. At run time a counting kernel computes the symbol before the
output is allocated, then the filling kernel runs: the shape function of seed 000.
"""
from __future__ import annotations

from ....codegen import datadep as K
from ....ir import dims as D
from ....ir.graph import FLOAT32, INT64
from ..infer import NUMERIC, InferContext

def infer_nonzero(ctx: InferContext) -> None:
    x = ctx.input(0)
    if x.rank == 0:
        ctx.fail("NonZero of a scalar is not supported (give the input at least one dim)")
    count = ctx.fresh("nonzero")
    ctx.set_output(0, INT64, (x.rank, count))


def lower_nonzero(lw, node) -> None:
    x = lw.value(node.inputs[0])
    out = lw.value(node.outputs[0])
    count_slot = lw.new_slot(str(out.shape[1]))
    k = lw.kernel(("nonzero_count", x.dtype.name, x.shape), lambda kb: K.build_count_nonzero(kb, x))
    xr = lw.tensor(x.name)
    lw.call(k, [xr], [count_slot])
    lw.define(out.shape[1], count_slot)
    fill = lw.kernel(("nonzero_fill", x.dtype.name, x.shape), lambda kb: K.build_nonzero(kb, x, out))
    lw.call(fill, [xr, lw.alloc(out.name)])


def _range_length(start: D.Dim, limit: D.Dim, delta: int) -> D.Dim:
    """max(0, ceil((limit - start) / delta)) for a constant non-zero delta."""
    if delta > 0:
        return D.maximum(0, D.ceildiv(D.add(limit, D.mul(start, -1)), delta))
    return D.maximum(0, D.ceildiv(D.add(start, D.mul(limit, -1)), -delta))


def infer_range(ctx: InferContext) -> None:
    start, limit, delta = ctx.input(0), ctx.input(1), ctx.input(2)
    for v in (start, limit, delta):
        if v.dtype not in NUMERIC:
            ctx.fail(f"input '{v.name}' has dtype {v.dtype}; Range takes float32, int32, int64")
        if v.dtype != start.dtype:
            ctx.fail(f"inputs differ in dtype: '{start.name}' {start.dtype}, '{v.name}' {v.dtype}")
        if D.product(v.shape) != 1:
            ctx.fail(f"input '{v.name}' must be a scalar, has shape {D.fmt_shape(v.shape)}")
    known = [v.int_contents() if v.dtype != FLOAT32 else None for v in (start, limit, delta)]
    if all(k is not None for k in known) and isinstance(known[2][0], int) and known[2][0] != 0:
        n = _range_length(known[0][0], known[1][0], known[2][0])
        sym = None
        if isinstance(n, int) and n <= 64:
            sym = [D.add(known[0][0], i * known[2][0]) for i in range(n)]
        ctx.set_output(0, start.dtype, (n,), sym=sym)
    else:
        ctx.set_output(0, start.dtype, (ctx.fresh("range"),))


def lower_range(lw, node) -> None:
    start, limit, delta = (lw.value(i) for i in node.inputs[:3])
    out = lw.value(node.outputs[0])
    n = out.shape[0]
    regs = [lw.tensor(v.name) for v in (start, limit, delta)]
    if not lw.is_defined(n) and isinstance(n, D.Expr) and n.atom() is not None \
            and isinstance(n.atom(), D.Sym) and n.atom().kind == "data":
        slot = lw.new_slot(str(n))
        k = lw.kernel(("range_count", start.dtype.name), lambda kb: K.build_range_count(kb, start.dtype))
        lw.call(k, regs, [slot], error="delta is 0, so the length is undefined")
        lw.define(n, slot)
    fill = lw.kernel(("range_fill", start.dtype.name, n), lambda kb: K.build_range_fill(kb, start.dtype, n))
    lw.call(fill, regs + [lw.alloc(out.name)])


def register(r) -> None:
    r.add("NonZero", 13, infer_nonzero, lower_nonzero)
    r.add("Range", 13, infer_range, lower_range)
