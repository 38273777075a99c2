"""Matrix products: MatMul (numpy semantics) and Gemm.

MatMul follows numpy (1-D operands, broadcast batch dims); the shared inner dim is proved
equal at compile time or checked at run time, naming both dims. A constant B with
``trans_b`` is transposed at compile time (a simplification). float32 products run the
GEMM microkernel (:mod:`toolkit.codegen.gemm`), with a constant 2-D B packed into panels at
compile time (:meth:`Lowerer.derived_const`), or kept row-major after a Relu (:func:`b_form`),
and any other packed inside the kernel; the other dtypes run plain loops, a run-time
transposed B staged in a scratch buffer.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from math import prod
from typing import ClassVar

import numpy as np

from ..codegen import gemm as G
from ..codegen import linalg as L
from ..ir.dtypes import FLOAT32, FLOATS, INT32, INT64, UINT32, UINT64
from ..ir.dims import Dim
from ..ir.graph import Graph, Node, Value
from .base import CoreOp, InferContext, replace_node

MATMUL_DTYPES = FLOATS + (INT32, INT64, UINT32, UINT64)


def _relu_output(v: Value) -> bool:
    """Whether ``v`` is made by a Relu: an elementwise relu, or a kernel whose fused ops end
    with one."""
    node = v.producer
    if node is None:
        return False
    post = getattr(node.op, "post", ())
    last = post[-1].op if post else node.op
    return getattr(last, "fn", None) == "relu"


def b_form(lw, a: Value, b: Value, rows: Sequence[Dim]) -> str:
    """How the float32 GEMM reads B: "" (B is not a constant matrix: the kernel packs it),
    "panels" (packed at compile time, :func:`.gemm.pack_b`) or "rows" (kept row-major for
    :func:`.gemm.sparse_row`, which skips the rows of B that a lone row of A's zeros would
    multiply). "rows" when A is a Relu's output (at batch 1, a ReLU MLP's hidden layers: about
    half zeros), its ``rows`` (the dims making M) may multiply to 1, B has at least a chunk of
    columns (:data:`.gemm.SPARSE_UNROLL` vectors) and only finite elements (a skipped 0 * inf
    would have been a NaN). With more rows than one, the GEMM reads such a B in place natively
    (when N is a multiple of its panels' width) and otherwise packs it a block at a time, as
    a run-time B."""
    if b.const is None or b.rank != 2:
        return ""
    if not _relu_output(a) or (all(isinstance(d, int) for d in rows) and prod(rows) != 1):
        return "panels"
    if b.shape[1] < G.SPARSE_UNROLL * lw.target.f32_lanes or not np.isfinite(b.const).all():
        return "panels"
    return "rows"


def _b_reg(lw, form: str, b: Value, tile: G.GemmTile):
    """B's register in ``form`` (:func:`b_form`)."""
    if form == "panels":
        return lw.derived_const(b.name, f"panels{tile.nr}", lambda w: G.pack_b(w, tile.nr))
    return lw.tensor(b.name)


def _rows_scratch(lw, form: str, b: Value) -> list:
    """The nonzero rows' scratch of :func:`.gemm.sparse_row`, when B is read as rows."""
    return [lw.scratch("nonzero rows", INT32, (b.shape[0],))] if form == "rows" else []


@dataclass(frozen=True)
class MatMul(CoreOp):
    """``post``: elementwise ops fused after it (:class:`toolkit.codegen.gemm.PostOp`,
    :mod:`toolkit.passes.fuse`); their operands follow the inputs."""

    post: tuple = ()
    operands_at: ClassVar[int] = 2

    def fusable(self, graph: Graph, node: Node) -> bool:
        """Whether the GEMM kernel runs it, which can take fused elementwise ops."""
        a, b = graph.values[node.inputs[0]], graph.values[node.inputs[1]]
        return a.dtype == FLOAT32 and b.rank >= 2

    def infer(self, ctx: InferContext) -> None:
        a, b = ctx.input(0), ctx.input(1)
        for v in (a, b):
            ctx.check_dtype(v, MATMUL_DTYPES)
            if v.rank == 0:
                ctx.fail(f"input '{v.name}' is a scalar; MatMul needs at least one dim")
        if a.dtype != b.dtype:
            ctx.fail(f"inputs '{a.name}' ({a.dtype}) and '{b.name}' ({b.dtype}) differ in dtype")
        kb_axis = max(b.rank - 2, 0)
        ctx.require_eq(a.shape[-1], b.shape[kb_axis],
                       f"inner dims ('{a.name}' dim {a.rank - 1} vs '{b.name}' dim {kb_axis})")
        # batch dims of 1-D and 2-D operands are empty; naming them after the operands keeps
        # broadcast messages pointing at the right input and dim
        batch = ctx.broadcast([Value(a.name, a.dtype, a.shape[:-2]), Value(b.name, b.dtype, b.shape[:-2])])
        rows = a.shape[-2:-1]
        cols = b.shape[-1:] if b.rank >= 2 else ()
        ctx.set_output(0, a.dtype, batch + rows + cols)

    def lower(self, lw, node) -> None:
        a, b = lw.value(node.inputs[0]), lw.value(node.inputs[1])
        if a.dtype != FLOAT32 or b.rank < 2:
            lw.run_kernel(L.build_matmul, None, node.inputs[:2], [node.outputs[0]])
            return
        tile = G.tile_for(lw.target)
        extra = [lw.tensor(i) for i in node.inputs[self.operands_at:]]
        form = b_form(lw, a, b, a.shape[:-1])
        lw.call(L.build_matmul_f32, (tile, form, self.post),
                [lw.tensor(a.name), _b_reg(lw, form, b, tile)] + extra + _rows_scratch(lw, form, b)
                + [lw.alloc(node.outputs[0])])


@dataclass(frozen=True)
class Gemm(CoreOp):
    """alpha * A' @ B' + beta * C with A' = A^T if trans_a (B' likewise); C, if given,
    broadcasts to [M, N]. A C that beta 0 ignores is not an input (the frontend drops it)."""

    alpha: float = 1.0
    beta: float = 1.0
    trans_a: bool = False
    trans_b: bool = False
    post: tuple = ()  # elementwise ops fused after it (gemm.PostOp; toolkit.passes.fuse)
    operands_at: ClassVar[int] = 3

    def fusable(self, graph: Graph, node: Node) -> bool:
        return graph.values[node.inputs[1]].dtype == FLOAT32

    def infer(self, ctx: InferContext) -> None:
        a, b = ctx.input(0), ctx.input(1)
        for v in (a, b):
            ctx.check_dtype(v, FLOATS)
            if v.rank != 2:
                ctx.fail(f"input '{v.name}' has rank {v.rank}; Gemm takes matrices")
        if a.dtype != b.dtype:
            ctx.fail(f"inputs '{a.name}' ({a.dtype}) and '{b.name}' ({b.dtype}) differ in dtype")
        m, k = a.shape[::-1] if self.trans_a else a.shape
        k2, n = b.shape[::-1] if self.trans_b else b.shape
        ctx.require_eq(k, k2, f"inner dims ('{a.name}' dim {0 if self.trans_a else 1} vs "
                              f"'{b.name}' dim {1 if self.trans_b else 0})")
        c = ctx.optional(2)
        if c is not None:
            if c.dtype != a.dtype:
                ctx.fail(f"C '{c.name}' has dtype {c.dtype}, A '{a.name}' {a.dtype}")
            ctx.unidirectional(c, (m, n), "C")
        ctx.set_output(0, a.dtype, (m, n))

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        b = graph.values[node.inputs[1]]
        if not self.trans_b or b.const is None:
            return None
        # the kernel wants B's rows contiguous along N (see toolkit.codegen.linalg)
        name = f"{b.name}^T"
        if name not in graph.values:
            graph.add_value(Value(name, b.dtype, b.shape[::-1], const=b.const.T.copy()))
        inputs = [node.inputs[0], name] + node.inputs[2:]
        return replace_node(graph, node, replace(self, trans_b=False), inputs)

    def lower(self, lw, node) -> None:
        b = lw.value(node.inputs[1])
        has_c = len(node.inputs) > 2 and bool(node.inputs[2])
        if b.dtype == FLOAT32:
            tile = G.tile_for(lw.target)
            c = [lw.tensor(node.inputs[2])] if has_c else []
            c += [lw.tensor(i) for i in node.inputs[self.operands_at:]]
            a = lw.value(node.inputs[0])
            form = b_form(lw, a, b, a.shape[1:] if self.trans_a else a.shape[:1]) if not self.trans_b else ""
            lw.call(L.build_gemm_f32, (self, has_c, tile, form),
                    [lw.tensor(a.name), _b_reg(lw, form, b, tile)] + c + _rows_scratch(lw, form, b)
                    + [lw.alloc(node.outputs[0])])
            return
        regs = [lw.tensor(i) for i in node.inputs[:3] if i]
        if self.trans_b:
            regs.append(lw.scratch("transposed B", b.dtype, b.shape[::-1]))
        lw.call(L.build_gemm, (self, has_c), regs + [lw.alloc(node.outputs[0])])
