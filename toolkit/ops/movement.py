"""Data-movement core ops: Transpose, Gather, Concat, Slice. They copy elements as stored,
so they take every dtype.

Each keeps shape values symbolic when its inputs' elements are known (``Gather`` of a
``Shape`` with constant indices, ``Concat`` of shape pieces, ``Slice`` of a shape), so
shape arithmetic needs no kernel. Slice bounds known at compile time give symbolic output
dims with ONNX's clamping; bounds known only at run time go through the VM's slice builtin.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ..codegen import movement as M
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import INDEX
from ..ir.graph import SYM_LIMIT, Graph, Node
from .base import CoreOp, InferContext, known_elements, replace_node
from .shape import Identity, ViewAs

# inputs per Concat kernel call: the VM passes a kernel at most 64 tensors
CONCAT_CHUNK = 63
# |start| or |end| this large is beyond any dim: INT64_MAX means "to the end"
BIG = 1 << 62


# ----------------------------------------------------------------------------- Transpose


@dataclass(frozen=True)
class Transpose(CoreOp):
    perm: tuple[int, ...] | None = None  # None: reverse the axes

    def _perm(self, rank: int) -> list[int]:
        return list(range(rank - 1, -1, -1)) if self.perm is None else list(self.perm)

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        perm = self._perm(x.rank)
        if sorted(perm) != list(range(x.rank)):
            ctx.fail(f"perm {perm} is not a permutation of the {x.rank} axes of '{x.name}'")
        ctx.set_output(0, x.dtype, [x.shape[p] for p in perm],
                       sym=known_elements(x.dtype, [x], lambda a: a.transpose(perm)))

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        x = graph.values[node.inputs[0]]
        perm = self._perm(x.rank)
        moved = [p for p in perm if x.shape[p] != 1]
        if moved != sorted(moved):
            return None
        # only dims of size 1 move: the element order is unchanged, a view suffices
        return replace_node(graph, node, ViewAs(graph.values[node.outputs[0]].shape))

    def lower(self, lw, node) -> None:
        x = lw.value(node.inputs[0])
        lw.run_kernel(M.build_transpose, tuple(self._perm(x.rank)), [x.name], [node.outputs[0]])


# ----------------------------------------------------------------------------- Gather


@dataclass(frozen=True)
class Gather(CoreOp):
    axis: int = 0

    def infer(self, ctx: InferContext) -> None:
        data, idx = ctx.input(0), ctx.input(1)
        if data.rank == 0:
            ctx.fail(f"data '{data.name}' is a scalar; Gather needs at least one axis")
        if idx.dtype not in INDEX:
            ctx.fail(f"indices '{idx.name}' have dtype {idx.dtype}; they must be int32 or int64")
        axis = ctx.axis(self.axis, data.rank)
        ctx.info = axis
        shape = data.shape[:axis] + idx.shape + data.shape[axis + 1:]
        sym = None
        n = data.shape[axis]
        ivals = idx.int_contents() if idx.is_static and D.product(idx.shape) <= SYM_LIMIT else None
        if ivals is not None and isinstance(n, int) and all(isinstance(i, int) for i in ivals):
            bad = [i for i in ivals if not -n <= i < n]
            if bad:
                ctx.fail(f"index {bad[0]} is out of range for axis {axis} of size {n}")
            where = np.array([i % n for i in ivals], np.int64).reshape([int(d) for d in idx.shape])
            sym = known_elements(data.dtype, [data], lambda a: np.take(a, where, axis=axis))
        ctx.set_output(0, data.dtype, shape, sym=sym)

    def lower(self, lw, node) -> None:
        axis = node.info
        lw.run_kernel(M.build_gather, axis, node.inputs[:2], [node.outputs[0]],
                      error=f"index {{0}} is out of range for axis {axis} of size {{1}}")


# ----------------------------------------------------------------------------- Concat


@dataclass(frozen=True)
class Concat(CoreOp):
    axis: int

    in_place_inputs = True

    def infer(self, ctx: InferContext) -> None:
        ins = ctx.inputs()
        if not ins:
            ctx.fail("needs at least one input")
        first = ins[0]
        for v in ins[1:]:
            if v.dtype != first.dtype:
                ctx.fail(f"inputs '{first.name}' ({first.dtype}) and '{v.name}' ({v.dtype}) differ in dtype")
            if v.rank != first.rank:
                ctx.fail(f"inputs '{first.name}' {D.fmt_shape(first.shape)} and '{v.name}' "
                         f"{D.fmt_shape(v.shape)} differ in rank")
        if first.rank == 0:
            ctx.fail("cannot concatenate scalars")
        axis = ctx.axis(self.axis, first.rank)
        ctx.info = axis
        shape: list[Dim] = []
        for a in range(first.rank):
            if a == axis:
                shape.append(sum((v.shape[a] for v in ins[1:]), first.shape[a]))
                continue
            # the static dim, if any input has one, is the most useful name for the result
            d = next((v.shape[a] for v in ins if isinstance(v.shape[a], int)), first.shape[a])
            for v in ins:
                ctx.require_eq(v.shape[a], d, f"dim {a} of input '{v.name}'")
            shape.append(d)
        ctx.set_output(0, first.dtype, shape,
                       sym=known_elements(first.dtype, ins, lambda *a: np.concatenate(a, axis=axis)))

    def input_offsets(self, node: Node, graph: Graph) -> list[int] | None:
        """The inputs lie one after another in the output when every dim before the axis is
        1; each then starts after the bytes of those before it."""
        out = graph.values[node.outputs[0]]
        axis = node.info
        if any(int(d) != 1 for d in out.shape[:axis]):
            return None
        inner = prod(int(d) for d in out.shape[axis + 1:]) * out.dtype.itemsize
        offsets, at = [], 0
        for i in node.inputs:
            offsets.append(at)
            at += int(graph.values[i].shape[axis]) * inner
        return offsets

    def lower(self, lw, node) -> None:
        axis = node.info
        out_reg = lw.alloc(node.outputs[0])
        # the inputs their producers wrote in place (memory.plan_in_place) are skipped; the
        # others are copied, runs of up to CONCAT_CHUNK at a time
        start: Dim = 0
        runs: list[tuple[Dim, list]] = []  # (where, registers) of inputs copied by one call
        after_copied = False
        for name in (i for i in node.inputs if i):
            reg = lw.tensor(name)
            if reg in lw.in_place:
                after_copied = False
            else:
                if not after_copied or len(runs[-1][1]) == CONCAT_CHUNK:
                    runs.append((start, []))
                runs[-1][1].append(reg)
                after_copied = True
            start = D.add(start, lw.value(name).shape[axis])
        for first, regs in runs:
            lw.call(M.build_concat, axis, regs + [out_reg], [lw.slot(first)])


# ----------------------------------------------------------------------------- Slice


@dataclass(frozen=True)
class SlicedAxis:
    """One sliced axis: ``j`` indexes starts/ends/steps; ``first`` and ``count`` are dims
    when the bounds are known at compile time, else None (the VM computes them)."""

    axis: int
    j: int
    step: int | None
    first: Dim | None
    count: Dim | None


def _nonneg(v: Dim) -> bool:
    return D.bounds(v)[0] >= 0


def slice_bounds(d: Dim, start: Dim, end: Dim, step: int) -> tuple[Dim, Dim]:
    """(first, count) of ``range(d)[start:end:step]`` (numpy's clamping, as in
    onnx.reference) for bounds that are ints or provably non-negative dims. A position past
    the far end is left unclamped where that cannot change the count (so ``x[1:]`` has
    ``max(n - 1, 0)`` elements, not ``n - min(1, n)``); ``first`` matters only when the
    count is positive."""
    low = 0 if step > 0 else -1
    high = d if step > 0 else D.add(d, -1)

    def position(v: Dim, clamp_high: bool) -> Dim:
        if isinstance(v, int):
            if v >= BIG:
                return high
            if v <= -BIG:
                return low
            if v < 0:
                return D.maximum(D.add(d, v), low)
        return D.minimum(v, high) if clamp_high else v

    if step > 0:
        first, stop = position(start, False), position(end, True)
        if stop == d and isinstance(start, int) and -BIG < start < 0:
            # x[-k:]: d - max(d - k, 0) is min(d, k)
            return first, D.ceildiv(D.minimum(d, -start), step)
        return first, D.maximum(0, D.ceildiv(D.add(stop, D.mul(first, -1)), step))
    first, stop = position(start, True), position(end, False)
    return first, D.maximum(0, D.ceildiv(D.add(first, D.mul(stop, -1)), -step))


@dataclass(frozen=True)
class Slice(CoreOp):
    """Inputs: data, starts, ends, [steps] (each known at compile time or not). ``axes``
    (the sliced axes, as given) are parameters: they decide the kernel's loops."""

    axes: tuple[int, ...] | None = None  # None: the first len(starts) axes

    def _plan(self, ctx: InferContext) -> list[SlicedAxis]:
        x, starts, ends, steps_v = ctx.input(0), ctx.input(1), ctx.input(2), ctx.optional(3)
        if x.rank == 0:
            ctx.fail(f"cannot slice the scalar '{x.name}'")
        k = ctx.shape_length(starts, "starts")
        if ctx.shape_length(ends, "ends") != k:
            ctx.fail(f"starts '{starts.name}' and ends '{ends.name}' differ in length")
        if steps_v is not None and ctx.shape_length(steps_v, "steps") != k:
            ctx.fail(f"steps '{steps_v.name}' and starts '{starts.name}' differ in length")
        if self.axes is None:
            axes = list(range(k))
        else:
            if len(self.axes) != k:
                ctx.fail(f"{len(self.axes)} axes and {k} starts ('{starts.name}') differ in length")
            axes = [ctx.axis(int(a), x.rank, "axes entry") for a in self.axes]
            if len(set(axes)) != len(axes):
                ctx.fail(f"axes {list(self.axes)} repeat an axis")
        s, e = starts.int_contents(), ends.int_contents()
        st = steps_v.int_contents() if steps_v is not None else (1,) * k
        plan = []
        for j, a in enumerate(axes):
            step = st[j] if st is not None and isinstance(st[j], int) else None
            if step == 0:
                ctx.fail(f"step {j} is 0")
            first = count = None
            if step is not None and s is not None and e is not None and \
                    all(isinstance(v, int) or _nonneg(v) for v in (s[j], e[j])):
                first, count = slice_bounds(x.shape[a], s[j], e[j], step)
            plan.append(SlicedAxis(a, j, step, first, count))
        return plan

    def infer(self, ctx: InferContext) -> None:
        plan = self._plan(ctx)
        ctx.info = plan
        x, starts, ends = ctx.input(0), ctx.input(1), ctx.input(2)
        shape = list(x.shape)
        for p in plan:
            shape[p.axis] = p.count if p.count is not None else ctx.fresh("slice")
        sym = None
        s, e = starts.int_contents(), ends.int_contents()
        if all(p.count is not None for p in plan):
            index = [slice(None)] * x.rank
            for p in plan:
                index[p.axis] = slice(s[p.j], e[p.j], p.step)
            if all(isinstance(v, int) for sl in index for v in (sl.start, sl.stop, sl.step) if v is not None):
                sym = known_elements(x.dtype, [x], lambda a: a[tuple(index)])
        ctx.set_output(0, x.dtype, shape, sym=sym)

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        x = graph.values[node.inputs[0]]
        if all(p.first == 0 and p.step == 1 and p.count == x.shape[p.axis] for p in node.info):
            return replace_node(graph, node, Identity(), [node.inputs[0]])
        return None

    def lower(self, lw, node) -> None:
        plan: list[SlicedAxis] = node.info
        x, starts, ends = lw.value(node.inputs[0]), lw.value(node.inputs[1]), lw.value(node.inputs[2])
        steps = lw.value(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
        out = lw.value(node.outputs[0])
        runtime: list[list] = []
        scalars = []
        for p in plan:
            if p.first is not None:
                scalars += [lw.slot(p.first), lw.slot(p.step)]
                continue
            if not runtime:
                runtime = [lw.values_of(starts.name), lw.values_of(ends.name),
                           lw.values_of(steps.name) if steps is not None else [lw.const_slot(1)] * len(plan)]
            step = runtime[2][p.j]
            first, count = lw.slice_dim(
                lw.slot(x.shape[p.axis]), runtime[0][p.j], runtime[1][p.j], step,
                f"{lw.context()}: step {p.j} is 0 (axis {p.axis} of size {{0}}, start {{1}}, end {{2}})",
                name=f"{out.name}.first{p.axis}")
            lw.define(out.shape[p.axis], count)
            scalars += [first, step]
        params = (tuple(p.axis for p in plan), tuple(p.step for p in plan))
        lw.call(M.build_slice, params, [lw.tensor(x.name), lw.alloc(out.name)], scalars)
