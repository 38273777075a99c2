"""Control flow: If and Loop, whose bodies are :class:`~toolkit.ir.graph.Region` s.

Shapes. An If's output dim is the branches' common dim when both yield the same
expression of symbols known outside them; otherwise a fresh data-dependent symbol, read
from the result after the branch ran. A Loop's carried value keeps each dim the body
provably preserves; a dim the body changes is a fresh symbol inside the body (read from the
carried tensor at the top of every iteration) and another for the final value. A scan
output (the per-iteration values stacked) has the iteration count as its first dim. The
translation (:mod:`toolkit.frontend.onnx.ops.control`) works the shapes out once and
gives them to the op (``out_types``); ``infer`` only states them.

Lowering (program blocks, in order)::

    If:    cond -> BRANCH then | else: ... JUMP end | then: ... | end:
    Loop:  init | head: stop if i >= M or !cond | body: ... i += 1, JUMP head | end:

A region's results leave it through :meth:`Lowerer.yield_to`: a buffer the region
allocated moves to the destination register (no copy), anything else is copied. The
register of an If's output is defined on both paths; a Loop's carried registers are
redefined by each iteration. A branch not taken runs nothing: its constants and buffers
are materialized inside it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import BOOL, INT64, DType
from ..ir.graph import Region
from .base import CoreOp, InferContext

OutTypes = tuple[tuple[DType, tuple[Dim, ...]], ...]


def _describe(region: Region) -> str:
    return f"{len(region.nodes)} node{'s' * (len(region.nodes) != 1)}"


def _check_scalar(ctx: InferContext, i: int, dtypes: Sequence[DType], what: str) -> None:
    if not ctx.has(i):
        return
    v = ctx.input(i)
    if v.dtype not in dtypes:
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be {' or '.join(d.name for d in dtypes)}")
    if D.product(v.shape) != 1:
        ctx.fail(f"{what} '{v.name}' must hold one element, has shape {D.fmt_shape(v.shape)}")


def _define_new_dims(lw, reg, shape: Sequence[Dim]) -> None:
    """Bind the fresh symbols among ``shape`` to the run-time dims of ``reg``."""
    for axis, d in enumerate(shape):
        atom = d.atom() if isinstance(d, D.Expr) else None
        if isinstance(atom, D.Sym) and not lw.is_defined(d):
            lw.define(d, lw.dim_of(reg, axis))


@dataclass(frozen=True, eq=False)
class If(CoreOp):
    """Inputs: the condition, then the values of enclosing scopes the branches read."""

    then: Region
    orelse: Region
    out_types: OutTypes
    n_operands = 1

    @property
    def regions(self) -> tuple[Region, ...]:
        return (self.then, self.orelse)

    def __str__(self) -> str:
        return f"If(then: {_describe(self.then)}, else: {_describe(self.orelse)})"

    def infer(self, ctx: InferContext) -> None:
        _check_scalar(ctx, 0, (BOOL,), "condition")
        for i, (dtype, shape) in enumerate(self.out_types):
            ctx.set_output(i, dtype, shape)

    def lower(self, lw, node) -> None:
        cond = lw.load_scalar(node.inputs[0], "condition")
        outs = [lw.new_reg(o, lw.value(o).dtype, lw.value(o).shape) for o in node.outputs]
        then_block, end = lw.new_block("then"), lw.new_block("endif")
        lw.branch(cond, then_block)
        lw.start(lw.new_block("else"))
        self._arm(lw, self.orelse, outs, node)
        lw.jump(end)
        lw.start(then_block)
        self._arm(lw, self.then, outs, node)
        lw.start(end)
        for name, reg in zip(node.outputs, outs):
            lw.bind(name, reg)
            lw.own(reg)
            _define_new_dims(lw, reg, lw.value(name).shape)

    @staticmethod
    def _arm(lw, region: Region, outs, node) -> None:
        saved = lw.enter_region()
        srcs = lw.lower_region(region, {})
        lw.yield_to(srcs, outs, node.outputs)
        lw.leave_region(saved)


@dataclass(frozen=True)
class Unreachable(CoreOp):
    """An If branch that provably cannot run (a shape function refused it at compile time):
    it fails with ``message``. Its outputs, empty tensors of the other branch's dtypes and
    ranks, make the program whole; no run ever reads them."""

    message: str
    out_types: OutTypes
    has_effect: ClassVar[bool] = True

    def infer(self, ctx: InferContext) -> None:
        for i, (dtype, shape) in enumerate(self.out_types):
            ctx.set_output(i, dtype, shape)

    def lower(self, lw, node) -> None:
        lw.check_eq(lw.const_slot(0), lw.const_slot(1), self.message)
        for o in node.outputs:
            lw.alloc(o)


@dataclass(frozen=True)
class RanOnce(CoreOp):
    """A Loop compiled for the rank its body gives a one-element carried value (paddle2onnx's
    while loops start a counter as a scalar and add a [1] to it): a run where it iterates
    zero times would keep the initial rank, so it fails instead, naming the Loop. Input 0: a
    scan output of the Loop, as long as it iterated."""

    what: str
    has_effect: ClassVar[bool] = True

    def infer(self, ctx: InferContext) -> None:
        ctx.require_le(1, ctx.input(0).shape[0], self.what)

    def lower(self, lw, node) -> None:
        pass  # its check is all it does


@dataclass(frozen=True, eq=False)
class Loop(CoreOp):
    """ONNX Loop. Inputs: the trip count M and the condition (each may be ""), the carried
    values' initial values, then the values of enclosing scopes the body reads. The body's
    inputs: iteration number, condition, carried values; its outputs: condition, carried
    values, scan items. Outputs: final carried values, then scan outputs."""

    body: Region
    n_carried: int
    out_types: OutTypes

    @property
    def n_operands(self) -> int:
        return 2 + self.n_carried

    @property
    def regions(self) -> tuple[Region, ...]:
        return (self.body,)

    def __str__(self) -> str:
        n_scan = len(self.body.outputs) - 1 - self.n_carried
        return f"Loop(body: {_describe(self.body)}, carried={self.n_carried}, scans={n_scan})"

    def infer(self, ctx: InferContext) -> None:
        _check_scalar(ctx, 0, (INT64,), "trip count")
        _check_scalar(ctx, 1, (BOOL,), "condition")
        for i, (dtype, shape) in enumerate(self.out_types):
            ctx.set_output(i, dtype, shape)

    def lower(self, lw, node) -> None:
        body, nc = self.body, self.n_carried
        n_scan = len(body.outputs) - 1 - nc
        trip = lw.load_scalar(node.inputs[0], "trip count") if node.inputs[0] else None
        cond = None
        if node.inputs[1]:
            cond = lw.new_slot("cond")
            lw.load_scalar(node.inputs[1], "condition", into=cond)
        i = lw.new_slot("iteration")
        lw.assign(i, lw.const_slot(0))
        carried = []
        for k in range(nc):
            init = lw.tensor(node.inputs[2 + k])
            reg = lw.new_reg(body.inputs[2 + k], init.dtype, init.shape)
            lw.copy(reg, init, f"the initial value of '{body.inputs[2 + k]}'")
            carried.append(reg)
        accs = []
        for j in range(n_scan):
            out = lw.value(node.outputs[nc + j])
            acc = lw.new_reg(out.name, out.dtype, out.shape)
            dims = [lw.const_slot(0)] + [lw.slot(d) if lw.can_evaluate(d) else lw.const_slot(0)
                                         for d in out.shape[1:]]
            lw.alloc_empty(acc, dims, f"scan output '{out.name}'")
            accs.append(acc)

        head, body_block, end = lw.new_block("loop"), lw.new_block("body"), lw.new_block("endloop")
        lw.start(head)
        if trip is not None:
            lw.branch(lw.arith("LE", trip, i), end)
        if cond is not None:
            if trip is not None:
                lw.start(lw.new_block("test"))
            lw.branch(lw.arith("EQ", cond, lw.const_slot(0)), end)
        if trip is not None or cond is not None:  # (else the loop never stops by itself)
            lw.start(body_block)
        saved = lw.enter_region()
        bind = {}
        reads = body.reads()
        if body.inputs[0] in reads:
            v = lw.value(body.inputs[0])
            bind[body.inputs[0]] = lw.store_scalar(v.name, INT64, i, v.shape)
        if body.inputs[1] in reads:
            v = lw.value(body.inputs[1])
            bind[body.inputs[1]] = lw.store_scalar(v.name, BOOL, cond or lw.const_slot(1), v.shape)
        for k, reg in enumerate(carried):
            v = lw.value(body.inputs[2 + k])
            _define_new_dims(lw, reg, v.shape)
            bind[v.name] = lw.view_of(v.name, reg)
        lw.loop_depth += 1
        srcs = lw.lower_region(body, bind)
        lw.loop_depth -= 1
        if cond is not None:
            lw.load_scalar(body.outputs[0], "condition", into=cond)
        for j, acc in enumerate(accs):
            lw.append(acc, srcs[1 + nc + j], f"scan output '{node.outputs[nc + j]}'")
        passed = [None if body.outputs[1 + k] == body.inputs[2 + k] else srcs[1 + k] for k in range(nc)]
        lw.yield_to(passed, carried, body.inputs[2:])
        lw.arith_into("ADD", i, i, lw.const_slot(1))
        lw.jump(head)
        lw.leave_region(saved)
        lw.start(end)
        for name, reg in zip(node.outputs, carried + accs):
            out = lw.new_reg(name, lw.value(name).dtype, lw.value(name).shape)
            lw.move(out, reg)
            lw.own(out)
            lw.bind(name, out)
            _define_new_dims(lw, out, lw.value(name).shape)
