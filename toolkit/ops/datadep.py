"""Core ops whose output shape depends on tensor *values*: NonZero and Range.

Their output dims are fresh data-dependent symbols (``nonzero_0``) unless the values are
known at compile time. At run time a counting kernel computes the symbol before the
output is allocated, then the filling kernel runs: the shape function of seed 000.

Values known at compile time give static results (NonZero of a constant, a float Range of
constants), so a model whose shapes are all bound compiles to a static program: the
importer folds such nodes only once their output shape is static.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..codegen import datadep as K
from ..ir import dims as D
from ..ir.dtypes import ALL, BFLOAT16, BOOL, FLOAT16, FLOAT32, FLOAT64, INT16, INT32, INT64, DType
from ..ir.graph import SYM_LIMIT
from .base import CoreOp, InferContext

RANGE_DTYPES = (FLOAT32, FLOAT64, INT16, INT32, INT64, FLOAT16, BFLOAT16)
RANGE_STASH = (FLOAT32, FLOAT64)


@dataclass(frozen=True)
class NonZero(CoreOp):
    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, ALL)
        if x.rank == 0:
            ctx.fail("NonZero of a scalar is not supported (give the input at least one dim)")
        if x.const is not None:
            idx = np.array(np.nonzero(x.const), np.int64).reshape(x.rank, -1)
            ctx.set_output(0, INT64, idx.shape, const=idx,
                           sym=tuple(int(i) for i in idx.reshape(-1)) if idx.size <= SYM_LIMIT else None)
            return
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


def _float_length(start, limit, delta) -> int | None:
    """The length of a float Range of constants as onnx.reference computes it (np.arange,
    in double precision), or None when it is undefined (delta 0, NaN or infinite bounds)."""
    s, lim, d = (float(v.const.reshape(-1)[0]) for v in (start, limit, delta))
    q = (lim - s) / d if d != 0 else math.nan
    return max(0, math.ceil(q)) if math.isfinite(q) else None


@dataclass(frozen=True)
class Range(CoreOp):
    """``start + i * delta`` for i below ``max(0, ceil((limit - start) / delta))``, all
    computed in the inputs' dtype, except float16 and bfloat16, which compute in ``stash``
    (Range-27's stash_type: float32 or float64) and round each element once."""

    stash: DType = FLOAT32

    def infer(self, ctx: InferContext) -> None:
        start, limit, delta = ctx.input(0), ctx.input(1), ctx.input(2)
        if self.stash not in RANGE_STASH:
            ctx.fail(f"stash_type {self.stash} is not supported (float32 or float64)")
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
        elif start.dtype.is_float and all(v.const is not None for v in (start, limit, delta)) and \
                _float_length(start, limit, delta) is not None:
            # the values follow once the shape is static (the importer folds the node)
            ctx.set_output(0, start.dtype, (_float_length(start, limit, delta),))
        else:
            ctx.set_output(0, start.dtype, (ctx.fresh("range"),))

    def lower(self, lw, node) -> None:
        out = lw.value(node.outputs[0])
        n = out.shape[0]
        regs = [lw.tensor(i) for i in node.inputs[:3]]
        work = self.stash if out.dtype.is_narrow_float else out.dtype
        atom = n.atom() if isinstance(n, D.Expr) else None
        if not lw.is_defined(n) and isinstance(atom, D.Sym) and atom.kind == "data":
            slot = lw.result_slot(str(n))
            lw.call(K.build_range_count, work, regs, [slot], error="delta is 0, so the length is undefined",
                    outputs=0)
            lw.define(n, slot)
        lw.call(K.build_range_fill, work, regs + [lw.alloc(out.name)])


@dataclass(frozen=True)
class Assert(CoreOp):
    """Fails the run with ``message`` (after the node's name) when its input, a bool scalar,
    is true at run time; it has no outputs. What a translation uses to refuse a value it can
    only see at run time (Dropout-12 asked to drop at random)."""

    message: str
    has_effect: ClassVar[bool] = True

    def infer(self, ctx: InferContext) -> None:
        v = ctx.input(0)
        if v.dtype != BOOL or D.product(v.shape) != 1:
            ctx.fail(f"input '{v.name}' must be a bool scalar, is {v.dtype} {D.fmt_shape(v.shape)} (internal)")

    def lower(self, lw, node) -> None:
        lw.call(K.build_fail_if_true, None, [lw.tensor(node.inputs[0])], error=self.message, outputs=0)
