"""Layout core ops: Tile, Pad, Split. They move elements as stored, so they take every dtype.

Their parameters (repeats, pads, split sizes) are integer tensors. Known at compile time,
they give static or symbolic output dims (``Tile`` of ``(n, 3)`` by ``[2, 1]`` is
``(2*n, 3)``). Known only at run time, each output dim is a fresh data-dependent symbol
(``tile_0``) that the VM computes from the values with checked shape arithmetic before
the output is allocated, so a negative repeat, a pad that crops more than the dim holds or
split sizes that do not add up fail with a message naming the node.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..codegen import layout as K
from ..codegen import movement as M
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.graph import Graph, Node
from .base import CoreOp, InferContext, known_elements, replace_node
from .shape import Identity, normalize_axes

# ----------------------------------------------------------------------------- Tile


@dataclass(frozen=True)
class Tile(CoreOp):
    """Inputs: data, repeats (one per axis, known at compile time or not)."""

    def infer(self, ctx: InferContext) -> None:
        x, reps = ctx.input(0), ctx.input(1)
        if x.rank == 0:
            ctx.fail(f"cannot tile the scalar '{x.name}'")
        if ctx.shape_length(reps, "repeats") != x.rank:
            ctx.fail(f"repeats '{reps.name}' has {reps.shape[0]} elements; '{x.name}' has rank {x.rank}")
        vals = reps.int_contents()
        if vals is None:
            ctx.info = None
            ctx.set_output(0, x.dtype, [ctx.fresh("tile") for _ in x.shape])
            return
        for a, r in enumerate(vals):
            if isinstance(r, int) and r < 0:
                ctx.fail(f"repeats[{a}] is {r}; repeats must not be negative")
        ctx.info = tuple(vals)
        sym = None
        if all(isinstance(r, int) for r in vals):
            sym = known_elements(x.dtype, [x], lambda a: np.tile(a, [int(r) for r in vals]))
        ctx.set_output(0, x.dtype, [D.mul(d, r) for d, r in zip(x.shape, vals)], sym=sym)

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        if node.info is not None and all(r == 1 for r in node.info):
            return replace_node(graph, node, Identity(), [node.inputs[0]])
        return None

    def lower(self, lw, node) -> None:
        x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        reps: tuple[Dim, ...] | None = node.info
        if reps is not None:
            tiled = tuple(r != 1 for r in reps)
            scalars = []
            for a, r in enumerate(reps):
                if r != 1:
                    lw.check_nonnegative(r, f"{lw.context()}: repeats[{a}] ({r}) is {{1}}; repeats must not be negative")
                    scalars.append(lw.slot(r))
        else:
            tiled = (True,) * x.rank
            scalars = lw.values_of(node.inputs[1])
            zero = lw.const_slot(0)
            for a, (d, r) in enumerate(zip(x.shape, scalars)):
                lw.check_le(zero, r, f"{lw.context()}: repeats[{a}] is {{1}}; repeats must not be negative")
                lw.define(out.shape[a], lw.arith("MUL", lw.slot(d), r, f"{lw.context()}: dim {a} of "
                                                 f"'{x.name}' ({{0}}) times repeats[{a}] ({{1}}) overflows"))
        lw.call(K.build_tile, tiled, [lw.tensor(x.name), lw.alloc(out.name)], scalars)


# ----------------------------------------------------------------------------- Pad


@dataclass(frozen=True)
class PaddedAxis:
    """One padded axis: ``j`` indexes the pads (begin ``pads[j]``, end ``pads[k + j]``);
    with pads known at compile time, the elements padded before (``pb``), cropped before
    (``cb``) and kept (``n``) as dims, else None (the VM computes them)."""

    axis: int
    j: int
    pb: Dim | None = None
    cb: Dim | None = None
    n: Dim | None = None


@dataclass(frozen=True)
class Pad(CoreOp):
    """Inputs: data, pads (begins then ends of the padded axes, known at compile time or
    not), [constant value]. ``axes``: the axes the pads are for (None: all). Negative pads
    crop; the data is cropped first and then padded, so reflect, edge and wrap read the
    cropped data."""

    mode: str = "constant"
    axes: tuple[int, ...] | None = None

    def infer(self, ctx: InferContext) -> None:
        x, pads, value = ctx.input(0), ctx.input(1), ctx.optional(2)
        if self.mode not in K.PAD_MODES:
            ctx.fail(f"mode '{self.mode}' is not one of {', '.join(K.PAD_MODES)}")
        axes = list(range(x.rank)) if self.axes is None else normalize_axes(ctx, self.axes, x.rank)
        k = len(axes)
        if ctx.shape_length(pads, "pads") != 2 * k:
            ctx.fail(f"pads '{pads.name}' has {pads.shape[0]} elements; padding {k} axes takes {2 * k}")
        if value is not None and self.mode == "constant":
            if value.dtype != x.dtype:
                ctx.fail(f"constant value '{value.name}' has dtype {value.dtype}; the data '{x.name}' has {x.dtype}")
            if D.product(value.shape) != 1:
                ctx.fail(f"constant value '{value.name}' must hold one element, has shape {D.fmt_shape(value.shape)}")
        vals = pads.int_contents()
        shape = list(x.shape)
        plan: list[PaddedAxis] = []
        if vals is None or not all(isinstance(v, int) for v in vals):
            for j, a in enumerate(axes):
                shape[a] = ctx.fresh("pad")
                plan.append(PaddedAxis(a, j))
        else:
            for j, a in enumerate(axes):
                begin, end = int(vals[j]), int(vals[k + j])
                if begin == 0 and end == 0:
                    continue
                cb, ce = max(-begin, 0), max(-end, 0)
                d = x.shape[a]
                ctx.require_le(cb + ce, d, f"pads {begin} and {end} crop {cb + ce} elements of axis {a}")
                n = D.add(d, -(cb + ce))
                if isinstance(n, int) and n == 0 and self.mode != "constant" and max(begin, end) > 0:
                    ctx.fail(f"axis {a} has no elements left to pad in {self.mode} mode")
                shape[a] = D.add(d, begin + end)
                plan.append(PaddedAxis(a, j, max(begin, 0), cb, n))
        ctx.info = plan
        ctx.set_output(0, x.dtype, shape)

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        if not node.info:
            return replace_node(graph, node, Identity(), [node.inputs[0]])
        return None

    def lower(self, lw, node) -> None:
        # the kernel walks the padded axes in order
        plan: list[PaddedAxis] = sorted(node.info, key=lambda p: p.axis)
        x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        scalars = []
        pads = None
        for p in plan:
            if p.n is not None:
                scalars += [lw.slot(p.pb), lw.slot(p.cb), lw.slot(p.n)]
                continue
            if pads is None:
                pads = lw.values_of(node.inputs[1])
            begin, end = pads[p.j], pads[len(plan) + p.j]
            zero = lw.const_slot(0)
            overflow = f"{lw.context()}: pads[{p.j}] or pads[{len(plan) + p.j}] overflow ({{0}}, {{1}})"
            pb, pe = lw.arith("MAX", begin, zero), lw.arith("MAX", end, zero)
            cb, ce = lw.arith("SUB", pb, begin, overflow), lw.arith("SUB", pe, end, overflow)
            n = lw.arith("SUB", lw.arith("SUB", lw.slot(x.shape[p.axis]), cb, overflow), ce, overflow)
            lw.check_le(zero, n, f"{lw.context()}: pads[{p.j}] and pads[{len(plan) + p.j}] crop more than "
                                 f"the {x.shape[p.axis]} elements of axis {p.axis} ({{1}} would be left)")
            lw.define(out.shape[p.axis], lw.arith("ADD", lw.arith("ADD", pb, n, overflow), pe, overflow))
            scalars += [pb, cb, n]
        has_value = self.mode == "constant" and len(node.inputs) > 2 and bool(node.inputs[2])
        tensors = [lw.tensor(x.name)] + ([lw.tensor(node.inputs[2])] if has_value else []) + [lw.alloc(out.name)]
        plan_k = K.PadPlan(self.mode, tuple(p.axis for p in plan), has_value)
        lw.call(K.build_pad, plan_k, tensors, scalars,
                error=f"axis {{0}} has no elements left to pad in {self.mode} mode")


# ----------------------------------------------------------------------------- Split


@dataclass(frozen=True)
class Split(CoreOp):
    """Inputs: data, [sizes (known at compile time or not)]. Without sizes, the axis splits
    into as many parts as there are outputs: equal ones (``even``: the dim must divide),
    or chunks of ``ceil(dim / parts)`` with a smaller last one."""

    axis: int = 0
    even: bool = True

    def infer(self, ctx: InferContext) -> None:
        x, sizes_v = ctx.input(0), ctx.optional(1)
        if x.rank == 0:
            ctx.fail(f"cannot split the scalar '{x.name}'")
        axis = ctx.axis(self.axis, x.rank)
        d = x.shape[axis]
        parts = len(ctx.node.outputs)
        sizes: list[Dim] | None
        if sizes_v is not None:
            if ctx.shape_length(sizes_v, "split") != parts:
                ctx.fail(f"split '{sizes_v.name}' has {sizes_v.shape[0]} sizes for {parts} outputs")
            sizes = None if sizes_v.int_contents() is None else list(sizes_v.int_contents())
            if sizes is not None:
                for i, s in enumerate(sizes):
                    if isinstance(s, int) and s < 0:
                        ctx.fail(f"split[{i}] is {s}; sizes must not be negative")
                ctx.require_eq(sum(sizes, 0), d, f"the split sizes against dim {axis} of '{x.name}'")
        elif self.even:
            ctx.require_eq(D.mod(d, parts), 0, f"dim {axis} of '{x.name}' splits into {parts} equal parts "
                                               f"only if divisible; the remainder")
            sizes = [D.floordiv(d, parts)] * parts
        else:
            chunk = D.ceildiv(d, parts)
            last = D.add(d, D.mul(chunk, -(parts - 1)))
            ctx.require_le(D.mul(chunk, parts - 1), d, f"dim {axis} of '{x.name}' ({d}) leaves a negative last "
                                                       f"part in chunks of {chunk} for {parts} outputs")
            sizes = [chunk] * (parts - 1) + [last]
        ctx.info = (axis, sizes)
        if sizes is None:
            for i in range(parts):
                ctx.set_output(i, x.dtype, x.shape[:axis] + (ctx.fresh("split"),) + x.shape[axis + 1:])
            return
        for i, s in enumerate(sizes):
            sym = None
            if all(isinstance(v, int) for v in sizes):
                start = sum(sizes[:i])
                index = (slice(None),) * axis + (slice(start, start + s),)
                sym = known_elements(x.dtype, [x], lambda a, index=index: a[index])
            ctx.set_output(i, x.dtype, x.shape[:axis] + (s,) + x.shape[axis + 1:], sym=sym)

    def lower(self, lw, node) -> None:
        axis, sizes = node.info
        x = lw.value(node.inputs[0])
        outs = node.outputs
        if sizes is None:
            slots = lw.values_of(node.inputs[1])
            zero = lw.const_slot(0)
            total = zero
            for i, s in enumerate(slots):
                lw.check_le(zero, s, f"{lw.context()}: split[{i}] is {{1}}; sizes must not be negative")
                total = lw.arith("ADD", total, s, f"{lw.context()}: split sizes overflow ({{0}} + {{1}})")
            lw.check_eq(total, lw.slot(x.shape[axis]),
                        f"{lw.context()}: split sizes add up to {{0}}, but dim {axis} of '{x.name}' is {{1}}")
            starts = [zero]
            for o, s in zip(outs, slots):
                if o:
                    lw.define(lw.value(o).shape[axis], s)
            for s in slots[:-1]:
                starts.append(lw.arith("ADD", starts[-1], s))
        else:
            for s in sizes:
                lw.check_nonnegative(s, f"{lw.context()}: split size {s} is {{1}}; sizes must not be negative")
            starts, at = [], 0
            for s in sizes:
                starts.append(lw.slot(at))
                at = D.add(at, s)
        one = lw.const_slot(1)
        for o, start in zip(outs, starts):
            if o:
                lw.call(M.build_slice, ((axis,), (1,)), [lw.tensor(x.name), lw.alloc(o)], [start, one])
