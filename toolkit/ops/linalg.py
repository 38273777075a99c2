"""Matrix products: MatMul (numpy semantics) and Gemm.

MatMul follows numpy (1-D operands, broadcast batch dims); the shared inner dim is proved
equal at compile time or checked at run time, naming both dims. A constant B with
``trans_b`` is transposed at compile time (a simplification). float32 products run the
GEMM microkernel (:mod:`toolkit.codegen.gemm`), with a constant 2-D B packed into panels at
compile time (:meth:`Lowerer.derived_const`), or kept row-major after a Relu (the plan's packing,
:func:`toolkit.codegen.plan.plan_matmul`),
and any other packed inside the kernel; the other dtypes run plain loops, a run-time
transposed B staged in a scratch buffer.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar


from ..codegen import gemm as G
from ..codegen import linalg as L
from ..codegen import plan as P
from ..ir.dtypes import FLOATS, INT32, INT64, UINT32, UINT64
from ..ir.graph import Graph, Node, Value
from .base import CoreOp, InferContext, planned, replace_node, scratch_of

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


def _b_reg(lw, plan: P.Plan, b: Value):
    """B's register as the plan reads it: packed into panels (:func:`.gemm.pack_b`) at
    compile time, or as it is."""
    if plan.packing == "panels":
        tile = plan.tile
        return lw.derived_const(b.name, f"panels{tile.nr}", lambda w: G.pack_b(w, tile.nr))
    return lw.tensor(b.name)


def _select(graph: Graph, a: str, b: str, rows, tuning: P.Tuning, route, trans_b: bool = False) -> P.Plan:
    av, bv = graph.values[a], graph.values[b]
    plan = P.plan_matmul(tuning, av.dtype, bv.shape, bv.const, rows(av), _relu_output(av), trans_b)
    P.check_route(route, [plan.route])
    return plan


@dataclass(frozen=True)
class MatMul(CoreOp):
    """``post``: elementwise ops fused after it (:class:`toolkit.codegen.gemm.PostOp`,
    :mod:`toolkit.passes.fuse`); their operands follow the inputs."""

    post: tuple = ()
    plan: P.Plan | None = field(default=None, repr=False)  # its kernel (toolkit.passes.kernels)
    operands_at: ClassVar[int] = 2

    def fusable(self, graph: Graph, node: Node) -> bool:
        """Whether the GEMM kernel runs it, which can take fused elementwise ops."""
        return self.plan is not None and self.plan.fusable

    def select(self, graph: Graph, node: Node, tuning: P.Tuning, route: str | None = None) -> P.Plan:
        """The kernel plan (:func:`toolkit.codegen.plan.plan_matmul`); M is made of A's
        leading dims."""
        return _select(graph, node.inputs[0], node.inputs[1], lambda a: a.shape[:-1], tuning, route)

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
        plan = planned(self, node)
        if plan.route == "loops":
            lw.run_kernel(L.build_matmul, None, node.inputs[:2], [node.outputs[0]])
            return
        extra = [lw.tensor(i) for i in node.inputs[self.operands_at:]]
        scratch = scratch_of(lw, plan)
        lw.call(L.build_matmul_f32, (plan.tile, plan.packing, self.post),
                [lw.tensor(node.inputs[0]), _b_reg(lw, plan, lw.value(node.inputs[1]))] + extra + scratch
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
    plan: P.Plan | None = field(default=None, repr=False)  # its kernel (toolkit.passes.kernels)
    operands_at: ClassVar[int] = 3

    def fusable(self, graph: Graph, node: Node) -> bool:
        return self.plan is not None and self.plan.fusable

    def select(self, graph: Graph, node: Node, tuning: P.Tuning, route: str | None = None) -> P.Plan:
        """The kernel plan (:func:`toolkit.codegen.plan.plan_matmul`); M is A's dim 0, or
        dim 1 with trans_a."""
        return _select(graph, node.inputs[0], node.inputs[1], lambda a: a.shape[1:] if self.trans_a else a.shape[:1],
                       tuning, route, self.trans_b)

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
        plan = planned(self, node)
        if plan.route == "gemm":
            c = [lw.tensor(node.inputs[2])] if has_c else []
            c += [lw.tensor(i) for i in node.inputs[self.operands_at:]]
            scratch = scratch_of(lw, plan)
            lw.call(L.build_gemm_f32, (self, has_c, plan.tile, plan.packing),
                    [lw.tensor(node.inputs[0]), _b_reg(lw, plan, b)] + c + scratch + [lw.alloc(node.outputs[0])])
            return
        regs = [lw.tensor(i) for i in node.inputs[:3] if i]
        if self.trans_b:
            regs.append(lw.scratch("transposed B", b.dtype, b.shape[::-1]))
        lw.call(L.build_gemm, (self, has_c), regs + [lw.alloc(node.outputs[0])])
