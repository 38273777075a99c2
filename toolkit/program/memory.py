"""Memory planning: where each buffer lives.

Three kinds of buffer, three homes:

- *static* (every dim known at compile time): the static arena, offsets planned by
  :func:`.liveness.plan_arena`, allocated once when a context is created. A static buffer
  may be a part of another (:class:`~.ir.StaticBuffer`'s ``parent``): before lowering,
  :func:`plan_in_place` gives the inputs an op declares it can take in place
  (:meth:`~toolkit.ops.base.CoreOp.in_place_inputs`, a Concat's) their parts of its
  output's buffer, so that their producers write them there and the op copies nothing;
- *symbolic* (sizes are expressions of input symbols, ``4*b*s*256``): the **dynamic arena**
  planned here, after lowering. Buffers whose live ranges never overlap share a block of it
  when their sizes are provably compatible (equal, or one provably no larger; otherwise the
  block takes the max of the two). Block offsets and the arena's size are expressions,
  evaluated once per run right after the inputs are bound; an ``ARENA`` instruction sizes
  the arena (kept between runs, so a run no larger than an earlier one allocates nothing)
  and each buffer is an ``ALLOC_AT`` at its block's offset. With upper bounds on the
  symbols (``--range seq=1:512``), the arena is sized for the largest legal shapes the
  first time, and steady-state runs allocate nothing at all;
- *data-dependent* (a NonZero count, a loop's result, a buffer that leaves a region): the
  run-time allocator, each freed after its last reader; its free list reuses the space.

The plan (:class:`MemoryPlan`) goes into the module's metadata: ``required_bytes`` in the
hosts evaluates the arenas' size for given bindings before a run.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from math import prod

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.graph import Graph
from . import liveness
from .ir import Block, Instr, Point, Program, Reg, StaticBuffer
from .shapes import ShapeEmitter
from ..vm import isa

ALIGN = liveness.ARENA_ALIGN


@dataclass
class Share:
    """A block of the dynamic arena and the buffers that take turns in it."""

    size: Dim
    end: int  # the last position of its latest user
    values: list[str] = field(default_factory=list)
    offset: Dim = 0


@dataclass
class MemoryPlan:
    static_bytes: int = 0
    dynamic_bytes: Dim = 0  # an expression of the input symbols
    reserve: int = 0  # the dynamic arena at the symbols' upper bounds (0: unbounded)
    blocks: list[Share] = field(default_factory=list)
    runtime: list[str] = field(default_factory=list)  # buffers left to the run-time allocator
    placed: list[tuple[Reg, Share]] = field(default_factory=list)  # each planned buffer's block

    def to_json(self) -> dict:
        return {"static_bytes": self.static_bytes, "dynamic_bytes": dim_json(self.dynamic_bytes),
                "dynamic_formula": str(self.dynamic_bytes), "reserve": self.reserve,
                "blocks": [{"offset": str(b.offset), "size": str(b.size), "values": b.values} for b in self.blocks],
                "runtime": self.runtime}


def dim_json(d: Dim):
    """A dim expression as JSON the hosts evaluate (wasm_runtime.formula, js_loader):
    an int, ``["sym", name]``, ``["poly", [[coef, [atom, ...]], ...]]`` or ``[op, args...]``
    for floordiv, mod, div, min, max, bcast and ifzero."""
    if isinstance(d, int):
        return d
    if isinstance(d, D.Sym):
        return ["sym", d.name]
    if isinstance(d, D.Atom):
        return [d.op] + [dim_json(a) for a in d.args]
    return ["poly", [[coef, [dim_json(a) for a in mono]] for mono, coef in d.terms]]


def _bytes(reg: Reg) -> Dim:
    return D.mul(D.product(reg.shape), reg.dtype.itemsize)


def _aligned(d: Dim) -> Dim:
    return D.mul(D.ceildiv(d, ALIGN), ALIGN)


def plan_in_place(graph: Graph) -> dict[str, StaticBuffer]:
    """The static buffers of the values written in place, by name: each input of a
    top-level node that can take its inputs in place, at the offset the op gives
    (:meth:`~toolkit.ops.base.CoreOp.in_place_inputs`), and that node's output, which holds
    them. The output must be static, not strings and not known at compile time, and not
    itself a part (no nesting). An input qualifies when a node of the graph makes it (a
    kernel writes it into a buffer of its own, unless it is a view: the Lowerer's ``alloc``
    decides), it is not a graph output, no other such node takes it, and it is not itself
    a placed output. Squeezenet's fire modules spend 4% of their native time in the copies
    this saves."""
    made = {o for n in graph.nodes for o in n.outputs if o}
    outputs = set(graph.outputs)
    takers = [n for n in graph.nodes if n.op.in_place_inputs and n.outputs[0]]
    uses = Counter(i for n in takers for i in n.inputs if i)
    places: dict[str, StaticBuffer] = {}
    for n in takers:
        out = graph.values[n.outputs[0]]
        if (not out.is_static or out.dtype.is_string or out.const is not None or out.known
                or n.outputs[0] in places):
            continue
        offsets = n.op.input_offsets(n, graph)
        if offsets is None:
            continue
        for i, at in zip(n.inputs, offsets):
            v = graph.values[i]
            if (i in made and i not in outputs and uses[i] == 1 and v.const is None and not v.known
                    and i not in places):
                whole = places.setdefault(n.outputs[0], StaticBuffer(out.dtype.itemsize * out.numel))
                places[i] = StaticBuffer(v.dtype.itemsize * prod(int(d) for d in v.shape), parent=whole, at=at)
    return places


def plan_dynamic(prog: Program, prologue: ShapeEmitter, at: Point, spans: dict) -> MemoryPlan:
    """Move every ALLOC whose size is an expression of input symbols into the dynamic arena
    (see the module doc). ``prologue``: an emitter that knows the dims defined at ``at``,
    where the inputs have been bound and checked (:meth:`.shapes.ShapeEmitter.fork`), and
    where the offsets and the arena's size are evaluated; ``spans``: the buffers' live
    ranges (:func:`.liveness.intervals`)."""
    plan = MemoryPlan()
    moved = {ins.args[1] for _, _, ins in prog.instrs() if ins.name == "MOVE"}
    candidates: list[tuple[int, Block, int, Instr, Dim]] = []
    for block, k, ins in prog.instrs():
        if ins.name != "ALLOC":
            continue
        reg = ins.args[0]
        size = _bytes(reg)
        syms = D.free_symbols(size)
        if reg in moved or not all(s.kind == "input" and prologue.is_defined(D.atom_expr(s)) for s in syms):
            plan.runtime.append(reg.name)
            continue
        candidates.append((spans.get(reg, (0, 0))[0], block, k, ins, size))
    shares: list[Share] = []
    placed: list[tuple[Instr, Share]] = []
    for start, block, k, ins, size in sorted(candidates, key=lambda c: c[0]):
        reg = ins.args[0]
        size = _aligned(size)
        end = spans.get(reg, (start, start))[1]
        free = [s for s in shares if s.end < start]
        share = (next((s for s in free if s.size == size), None)
                 or next((s for s in free if D.provably_le(size, s.size)), None)
                 or next((s for s in free if D.provably_le(s.size, size)), None)
                 or (free[0] if free else None))
        if share is None:
            share = Share(size, end)
            shares.append(share)
        else:
            share.size = size if D.provably_le(share.size, size) else \
                share.size if D.provably_le(size, share.size) else D.maximum(share.size, size)
            share.end = max(share.end, end)
        share.values.append(reg.name)
        placed.append((ins, share))
        plan.placed.append((reg, share))
    plan.static_bytes = prog.arena_size
    plan.blocks = shares
    if not shares:
        return plan
    total: Dim = 0
    for s in shares:
        s.offset = total
        total = D.add(total, s.size)
    plan.dynamic_bytes = total
    hi = D.bounds(total)[1]
    plan.reserve = hi if hi is not None and hi <= isa.ARENA_LIMIT else 0

    # the offsets and the size, evaluated right after the inputs are bound
    offsets = {id(s): prologue.slot(s.offset) for s in shares}
    prologue.block.instrs.append(Instr(isa.BY_NAME["ARENA"], [
        prologue.slot(total), plan.reserve,
        "model: cannot allocate {0} bytes for the buffers planned from the input dims (memory limit {1} bytes)"]))
    prog.insert(at, prologue.block.instrs)
    for ins, share in placed:
        reg, dtype, _msg, dims = ins.args
        ins.op = isa.BY_NAME["ALLOC_AT"]
        ins.args = [reg, dtype, offsets[id(share)], dims]
    return plan


def live_peak(prog: Program, bindings: dict[str, int], plan: MemoryPlan) -> int:
    """The lower bound of any plan: the most bytes live at one position of the program, for
    these symbol values (static buffers at their sizes, the others evaluated)."""
    spans = liveness.static_spans(prog, liveness.intervals(prog))
    sizes: dict[Reg, int] = {}
    for _, _, ins in prog.instrs():
        if ins.name in ("ALLOC", "ALLOC_STATIC", "ALLOC_AT", "COPY"):
            if ins.name == "ALLOC_STATIC" and ins.args[2].parent is not None:
                continue  # its bytes are its parent's
            reg = ins.args[0]
            n = evaluate(_bytes(reg), bindings)
            if n is not None:
                sizes[reg] = max(sizes.get(reg, 0), n)
    events: list[tuple[int, int]] = []
    for reg, n in sizes.items():
        s, e = spans.get(reg, (0, 0))
        events += [(s, n), (e + 1, -n)]
    live = peak = 0
    for _, delta in sorted(events, key=lambda ev: (ev[0], ev[1])):
        live += delta
        peak = max(peak, live)
    return peak


def evaluate(d: Dim, bindings: dict[str, int]) -> int | None:
    """``d`` for these symbol values (None if one is missing)."""
    if isinstance(d, int):
        return d
    missing = [s.name for s in D.free_symbols(d) if s.name not in bindings]
    if missing:
        return None
    return D.substitute(d, lambda s: bindings[s.name])

