"""ONNX control flow: If, Loop and Scan.

The subgraphs are imported into regions (``TranslateContext.import_region``) and the output
shapes worked out here, once (see :mod:`toolkit.ops.control` for the rules). An If whose
condition is known at compile time (a constant, or a comparison of dims that folded) is
replaced by the branch it takes. A Loop body is imported with its carried values' initial
shapes; each dim the body changes becomes a fresh symbol and the body is imported again,
until the shapes settle. Scan is a Loop over the scanned axis whose body starts by
gathering the iteration's slice of each scanned input; Scan-8, whose inputs and outputs
have a leading batch axis, is a Loop over the batch around that one.
"""
from __future__ import annotations

import numpy as np

from ....ir import dims as D
from ....abi import MAX_RANK
from ....ir.dtypes import BOOL, INT64
from ....ir.graph import Check, CompileError, Node, Region, ShapeError, Value, captures
from ....ops.base import Assume, Checks, run_infer
from ....ops.control import If, Loop, RanOnce, Unreachable
from ....ops.elementwise import Elementwise
from ....ops.movement import Gather, Slice, Transpose
from ....ops.shape import Identity, ShapeOf, ViewAs
from ..translate import TranslateContext, ident

VERSIONS = (1, 11, 13, 16, 19, 21, 23, 24, 25)


class RankPolymorphicIf(CompileError):
    """An If whose branches yield values of different ranks. The importer then specializes
    the code after it into each branch (:func:`..importer.specialize_after_if`); raised
    past that, the values that leave the graph still differ in rank."""


def _import(ctx: TranslateContext, gp, bound: list[Value]) -> Region:
    return ctx.import_region(gp, bound)


def _outer(d: D.Dim, local: set) -> bool:
    return not (D.free_symbols(d) & local)


def _new_symbols(ctx: TranslateContext, before: set[str]) -> set:
    return {s for name, s in ctx.graph.scope.symbols.items() if name not in before}


# ----------------------------------------------------------------------------- If


def if_(ctx: TranslateContext) -> None:
    graph = ctx.graph
    cond = ctx.value(0)
    known = cond.int_contents()
    if known is not None and len(known) == 1 and isinstance(known[0], int):
        if graph.check_facts and cond.producer is not None:  # decided from what the compiler derived
            ctx.emit(Assume((int(known[0]),), "the condition of the If"), [ctx.inputs[0]], [])
        _inline(ctx, ctx.attr("then_branch" if known[0] else "else_branch"))
        return
    before = set(graph.scope.symbols)
    then, then_error = _import_branch(ctx, "then")
    orelse, else_error = _import_branch(ctx, "else")
    if then_error and else_error:
        raise then_error
    for r, which in ((then, "then"), (orelse, "else")):
        if r is not None and len(r.outputs) != len(ctx.outputs):
            ctx.fail(f"the {which} branch yields {len(r.outputs)} values; the node has {len(ctx.outputs)} outputs")
    if then_error or else_error:
        then, orelse = (_unreachable(ctx, "then", then_error, orelse) if then is None else then,
                        _unreachable(ctx, "else", else_error, then) if orelse is None else orelse)
    local = _new_symbols(ctx, before)
    types = []
    for k, (name, a, b) in enumerate(zip(ctx.outputs, then.outputs, orelse.outputs)):
        va, vb = graph.values[a], graph.values[b]
        if then_error or else_error:  # the branch that runs decides
            va = vb = vb if then_error else va
        if va.dtype != vb.dtype:
            ctx.fail(f"output {k} ('{name}') is {va.dtype} in the then branch ('{a}') and {vb.dtype} in the "
                     f"else branch ('{b}')")
        if va.rank != vb.rank:
            raise RankPolymorphicIf(f"{ctx.label()}: output {k} ('{name}') has rank {va.rank} in the then branch "
                                    f"('{a}') and {vb.rank} in the else branch ('{b}')")
        shape = []
        for axis, (da, db) in enumerate(zip(va.shape, vb.shape)):
            if da == db and _outer(da, local):
                shape.append(da)
            else:
                shape.append(graph.scope.fresh(f"{ident(name or 'if')}_dim{axis}"))
        types.append((va.dtype, tuple(shape)))
    op = If(then, orelse, tuple(types))
    ctx.emit(op, [ctx.inputs[0]] + [c for c in captures([then, orelse]) if c != ctx.inputs[0]])


def _import_branch(ctx: TranslateContext, which: str) -> tuple[Region | None, ShapeError | None]:
    """The region of the If's ``which`` branch, or the error that proves it cannot run: code a
    run may never reach (torch exports both sides of ``if x.dim() == 2``, and one side may be
    ill-typed for every input the model takes), which onnxruntime too refuses only when it is
    reached."""
    graph = ctx.graph
    names = set(graph.values)
    try:
        return _import(ctx, ctx.attr(f"{which}_branch"), []), None
    except ShapeError as e:
        for name in set(graph.values) - names:
            del graph.values[name]
        return None, e


def _unreachable(ctx: TranslateContext, which: str, error: ShapeError, other: Region) -> Region:
    """A region for a branch that cannot run: it fails with ``error``'s reason, and yields
    empty tensors of ``other``'s dtypes and ranks, which no run ever sees."""
    graph = ctx.graph
    outs = [graph.fresh_name(f"{o}/unreachable") for o in other.outputs]
    types = tuple((graph.values[o].dtype, tuple(0 for _ in graph.values[o].shape)) for o in other.outputs)
    message = f"{ctx.label()}: its {which} branch cannot run: {error}"
    node = Node(Unreachable(message.replace("{", "(").replace("}", ")"), types), ctx.name, ctx.op_type, [], outs)
    run_infer(graph, node)
    graph.notes.append(f"{ctx.label()}: its {which} branch cannot run, and a run that takes it fails ({error})")
    return Region([], [node], outs)


def _inline(ctx: TranslateContext, gp) -> None:
    """The branch a known condition takes, as nodes of the enclosing graph."""
    region = _import(ctx, gp, [])
    if len(region.outputs) != len(ctx.outputs):
        ctx.fail(f"the branch taken yields {len(region.outputs)} values; the node has {len(ctx.outputs)} outputs")
    ctx.graph.nodes.extend(region.nodes)
    for src, out in zip(region.outputs, ctx.outputs):
        ctx.emit(Identity(), [src], [out])


# ----------------------------------------------------------------------------- Loop


def _one_element(shape) -> bool:
    return all(d == 1 for d in shape)


def _settle(ctx: TranslateContext, init: list[Value], importer, what: str, reranked: dict | None = None):
    """Import a loop body with ``importer(carried)`` (``carried``: fresh values for the
    carried inputs; it returns a region in the Loop form: iteration, condition, carried
    inputs -> condition, carried outputs, items), re-importing with a fresh symbol for
    every carried dim the body changes until the shapes settle. Returns the region, the
    carried shapes it was imported with and the symbols local to the loop. With
    ``reranked`` (a dict to fill), a one-element carried value whose rank the body changes
    (a scalar counter plus a [1]) is carried at the body's rank from the start: its index,
    to the shape its initial value must be viewed as; otherwise a rank change is refused."""
    graph = ctx.graph
    before = set(graph.scope.symbols)
    shapes = [tuple(v.shape) for v in init]
    variant: set = set()
    for _ in range(3 + sum(v.rank for v in init)):
        names = set(graph.values)
        region = importer([Value("", v.dtype, s) for v, s in zip(init, shapes)])
        outs = [graph.values[o] for o in region.outputs[1:1 + len(init)]]
        changed = False
        new_shapes = []
        for k, (v, out, shape) in enumerate(zip(init, outs, shapes)):
            name = region.inputs[2 + k]
            if (reranked is not None and k not in reranked and out.dtype == v.dtype and out.rank != len(shape)
                    and _one_element(shape) and _one_element(out.shape)):
                reranked[k] = tuple(out.shape)
                new_shapes.append(reranked[k])
                changed = True
                continue
            if out.dtype != v.dtype or out.rank != len(shape):
                ctx.fail(f"{what} {k} ('{name}') starts as {v.describe()} and the body yields "
                         f"'{out.name}' {out.describe()}; its dtype and rank must stay the same"
                         + (" (the rank may change only for a value of one element)" if reranked is not None else ""))
            dims = list(shape)
            for axis, (din, dout) in enumerate(zip(shape, out.shape)):
                if din != dout and din not in variant:
                    dims[axis] = graph.scope.fresh(f"{ident(name)}_iter{axis}")
                    variant.add(dims[axis])
                    changed = True
            new_shapes.append(tuple(dims))
        if not changed:
            return region, shapes, _new_symbols(ctx, before)
        for name in set(graph.values) - names:
            del graph.values[name]
        shapes = new_shapes
    ctx.fail(f"the shapes of the {what}s do not settle")


def _scalar_shape(gp, k: int) -> tuple:
    """The declared shape of body input ``k`` when it is a static one-element shape, else ()."""
    t = gp.input[k].type.tensor_type
    if t.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if all(d == 1 for d in dims):
            return tuple(dims)
    return ()


def _loop_outputs(ctx: TranslateContext, region: Region, init: list[Value], shapes, local: set,
                  trips: D.Dim | None, outputs: list[str]) -> tuple:
    """Output types: carried values keep their invariant dims; scan outputs stack items."""
    graph = ctx.graph
    nc = len(init)
    types = []
    for k, (v, shape) in enumerate(zip(init, shapes)):
        name = outputs[k] or "loop"
        types.append((v.dtype, tuple(d if d == i and _outer(d, local) else
                                     graph.scope.fresh(f"{ident(name)}_dim{axis}")
                                     for axis, (d, i) in enumerate(zip(shape, v.shape)))))
    for j, item_name in enumerate(region.outputs[1 + nc:]):
        item = graph.values[item_name]
        name = outputs[nc + j] or "scan"
        if item.rank + 1 > MAX_RANK:
            ctx.fail(f"scan output '{name}' would have rank {item.rank + 1}; at most {MAX_RANK} dims are supported")
        first = trips if trips is not None else graph.scope.fresh(f"{ident(name)}_count")
        types.append((item.dtype, (first,) + tuple(
            d if _outer(d, local) else graph.scope.fresh(f"{ident(name)}_dim{axis + 1}")
            for axis, d in enumerate(item.shape))))
    return tuple(types)


def _emit_loop(ctx: TranslateContext, region: Region, nc: int, types, operands: list[str], outputs: list[str]):
    ctx.emit(Loop(region, nc, types), operands + [c for c in region.captures() if c not in operands], outputs)


def loop(ctx: TranslateContext) -> None:
    gp = ctx.attr("body")
    init = [ctx.value(i) for i in range(2, len(ctx.inputs))]
    if any(v is None for v in init):
        ctx.fail("a loop-carried initial value is missing (optional carried values are not supported)")
    nc = len(init)
    if len(gp.input) != 2 + nc:
        ctx.fail(f"the body takes {len(gp.input)} inputs; it must take 2 + {nc} (iteration, condition, "
                 f"carried values)")
    n_scan = len(gp.output) - 1 - nc
    if n_scan < 0:
        ctx.fail(f"the body yields {len(gp.output)} values; it must yield at least 1 + {nc}")
    if len(ctx.outputs) > nc + n_scan:
        ctx.fail(f"{len(ctx.outputs)} outputs; the body gives {nc} carried values and {n_scan} scan outputs")

    def importer(carried: list[Value]) -> Region:
        fixed = [Value("", INT64, _scalar_shape(gp, 0)), Value("", BOOL, _scalar_shape(gp, 1))]
        return _import(ctx, gp, fixed + carried)

    reranked: dict[int, tuple] = {}
    region, shapes, local = _settle(ctx, init, importer, "loop-carried value", reranked)
    trips = None
    m = ctx.value(0)
    if m is not None and not ctx.has(1) and m.int_contents() is not None:
        trips = D.maximum(0, m.int_contents()[0])  # no condition: exactly max(M, 0) iterations
    operands = [ctx.inputs[0] if ctx.has(0) else "", ctx.inputs[1] if ctx.has(1) else ""] + list(ctx.inputs[2:])
    for k, shape in reranked.items():  # the initial value at the body's rank: the same one element
        operands[2 + k] = ctx.tmp(f"carried{k}_reranked")
        ctx.emit(ViewAs(shape), [init[k].name], [operands[2 + k]])
        init[k] = ctx.graph.values[operands[2 + k]]
    if reranked:  # a hidden scan output, the iteration numbers: as long as the loop iterated
        region.outputs.append(region.inputs[0])
    outputs = list(ctx.outputs) + [""] * (nc + n_scan - len(ctx.outputs))
    outputs = [o or ctx.graph.fresh_name(f"{ctx.name}/unused{k}") for k, o in enumerate(outputs)]
    outputs += [ctx.graph.fresh_name(f"{ctx.name}/iterations")] if reranked else []
    types = _loop_outputs(ctx, region, init, shapes, local, trips, outputs)
    _emit_loop(ctx, region, nc, types, operands, outputs)
    if reranked:
        changed = ", ".join(f"{k} ('{region.inputs[2 + k]}')" for k in reranked)
        ctx.emit(RanOnce(f"loop-carried value {changed} starts with another rank than the body gives it; "
                         f"symwasm carries it at the body's rank, which a loop that iterates zero times would "
                         f"not give (onnxruntime would return the initial rank): the number of iterations"),
                 [outputs[-1]], [])


# ----------------------------------------------------------------------------- Scan


def _scan_arity(ctx: TranslateContext, gp, values: list[Value | None]) -> tuple[int, int, int]:
    """(states, scan inputs, scan outputs) of a Scan whose state and scan inputs are ``values``."""
    n_in = int(ctx.attr("num_scan_inputs"))
    if any(v is None for v in values):
        ctx.fail("an input is missing")
    n_state = len(values) - n_in
    if n_in < 1 or n_state < 0:
        ctx.fail(f"num_scan_inputs is {n_in}, with {len(values)} inputs")
    n_out = len(gp.output) - n_state
    if len(gp.input) != len(values) or n_out < 0 or len(ctx.outputs) != n_state + n_out:
        ctx.fail(f"the body takes {len(gp.input)} inputs and yields {len(gp.output)}; the node has "
                 f"{n_state} states, {n_in} scan inputs and {len(ctx.outputs)} outputs")
    return n_state, n_in, n_out


def _output_names(ctx: TranslateContext, outputs: list[str]) -> list[str]:
    return [o or ctx.graph.fresh_name(f"{ctx.name}/unused{k}") for k, o in enumerate(outputs)]


def scan(ctx: TranslateContext) -> None:
    gp = ctx.attr("body")
    values = [ctx.value(i) for i in range(len(ctx.inputs))]
    n_state, n_in, n_out = _scan_arity(ctx, gp, values)
    in_axes = list(ctx.ints("scan_input_axes") or [0] * n_in)
    in_dirs = list(ctx.ints("scan_input_directions") or [0] * n_in)
    out_axes = list(ctx.ints("scan_output_axes") or [0] * n_out)
    out_dirs = list(ctx.ints("scan_output_directions") or [0] * n_out)
    if not (len(in_axes) == len(in_dirs) == n_in and len(out_axes) == len(out_dirs) == n_out):
        ctx.fail("scan_input_axes/directions and scan_output_axes/directions need one entry per scan "
                 "input and output")
    _scan_loop(ctx, gp, values[:n_state], values[n_state:], in_axes, in_dirs, out_axes, out_dirs,
               _output_names(ctx, ctx.outputs))


def _scan_loop(ctx: TranslateContext, gp, states: list[Value], scanned: list[Value], in_axes: list[int],
               in_dirs: list[int], out_axes: list[int], out_dirs: list[int], final: list[str]) -> None:
    """Scan-9's meaning as a Loop (and the Slices and Transposes that place its scan
    outputs), emitted into the current node list, writing ``final``."""
    graph = ctx.graph
    n_state, n_out = len(states), len(out_axes)
    axes = []
    for v, a in zip(scanned, in_axes):
        if not -v.rank <= a < v.rank:
            ctx.fail(f"scan_input_axes entry {a} is out of range for '{v.name}' of rank {v.rank}")
        axes.append(a % v.rank)
    n = scanned[0].shape[axes[0]]
    for v, a in zip(scanned[1:], axes[1:]):
        if v.shape[a] != n:
            ctx.fail(f"scan input '{v.name}' has {v.shape[a]} along axis {a}; '{scanned[0].name}' has {n} "
                     f"(scan inputs must have the same length)")

    trip = ctx.tmp("trip_count")  # the scanned length, a one-element shape value
    ctx.emit(ShapeOf(start=axes[0], end=axes[0] + 1), [scanned[0].name], [trip])
    minus_one = ctx.constant("minus_one", np.array(-1, np.int64))

    def importer(carried: list[Value]) -> Region:
        """The Scan body in the Loop form, its scan inputs bound to Gathers of the
        iteration's slices (index -1 - i when reversed)."""
        slices = [Value("", v.dtype, v.shape[:a] + v.shape[a + 1:]) for v, a in zip(scanned, axes)]
        region = _import(ctx, gp, carried + slices)
        it, cd = graph.fresh_name(f"{ctx.name}/iteration"), graph.fresh_name(f"{ctx.name}/cond")
        graph.add_value(Value(it, INT64, ()))
        graph.add_value(Value(cd, BOOL, ()))
        nodes = []
        for v, a, d, name in zip(scanned, axes, in_dirs, region.inputs[n_state:]):
            idx = it
            if d:
                idx = graph.fresh_name(f"{name}/index")
                nodes.append(Node(Elementwise("sub"), ctx.name, ctx.op_type, [minus_one, it], [idx]))
            nodes.append(Node(Gather(axis=a), ctx.name, ctx.op_type, [v.name, idx], [name]))
        for node in nodes:
            run_infer(graph, node)
        region.nodes[:0] = nodes
        region.inputs[:] = [it, cd] + region.inputs[:n_state]
        region.outputs[:0] = [cd]  # the condition: never read (the Loop has none)
        return region

    region, shapes, local = _settle(ctx, states, importer, "state")
    # scan outputs stacked along a new first axis, then reversed and moved where asked
    outputs = list(final[:n_state])
    for j in range(n_out):
        o = final[n_state + j]
        outputs.append(o if not out_dirs[j] and out_axes[j] == 0 else graph.fresh_name(f"{o}/stacked"))
    types = _loop_outputs(ctx, region, states, shapes, local, n, outputs)
    _emit_loop(ctx, region, n_state, types, [trip, ""] + [v.name for v in states], outputs)
    for j in range(n_out):
        src, dst = outputs[n_state + j], final[n_state + j]
        if src == dst:
            continue
        rank = graph.values[src].rank
        a = out_axes[j]
        if not -rank <= a < rank:
            ctx.fail(f"scan_output_axes entry {a} is out of range for rank {rank}")
        a %= rank
        if out_dirs[j]:
            rev = dst if a == 0 else ctx.tmp("reversed")
            ctx.emit(Slice(axes=(0,)), [src, ctx.constant("starts", np.array([-1], np.int64)),
                                        ctx.constant("ends", np.array([np.iinfo(np.int64).min], np.int64)),
                                        ctx.constant("steps", np.array([-1], np.int64))], [rev])
            src = rev
        if a != 0:
            perm = list(range(1, rank))
            perm.insert(a, 0)
            ctx.emit(Transpose(tuple(perm)), [src], [dst])


def scan_8(ctx: TranslateContext) -> None:
    """Scan-8 batches: every input and output has a leading batch axis the body does not
    see, and the scanned axis is 1. It becomes a Loop over the batch whose body takes the
    batch element of each input and runs Scan-9's Loop on them; the outer Loop stacks its
    results along axis 0, which is the batch axis of every output."""
    graph = ctx.graph
    gp = ctx.attr("body")
    if ctx.has(0):
        ctx.fail(f"sequence_lens ('{ctx.inputs[0]}') is not supported: symwasm's Scan-8 scans the whole "
                 f"sequence axis of every batch element (omit it, or use Scan-9 and up)")
    values = [ctx.value(i) for i in range(1, len(ctx.inputs))]
    n_state, n_in, n_out = _scan_arity(ctx, gp, values)
    dirs = list(ctx.ints("directions") or [0] * n_in)
    if len(dirs) != n_in:
        ctx.fail(f"directions has {len(dirs)} entries; it needs one per scan input ({n_in})")
    for k, v in enumerate(values):
        least = 1 if k < n_state else 2
        if v.rank < least:
            what = "state" if k < n_state else "scan input"
            ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}; Scan-8 needs a leading batch axis"
                     + (" and a sequence axis" if least == 2 else ""))
    scanned = values[n_state:]
    batch = scanned[0].shape[0]
    checks = []
    for v in values:
        d = v.shape[0]
        if d == batch:
            continue
        what = f"'{v.name}' batch size (dim 0) vs '{scanned[0].name}'"
        if isinstance(d, int) and isinstance(batch, int):
            ctx.fail(f"{what}: {d} != {batch}")
        checks.append(Check("eq", d, batch, f"{ctx.label()}: {what}: {d} = {{0}} does not equal {batch} = {{1}}"))
    if checks:
        ctx.emit(Checks(), [], []).checks = checks

    before = set(graph.scope.symbols)
    it, cd = graph.fresh_name(f"{ctx.name}/batch"), graph.fresh_name(f"{ctx.name}/batch_cond")
    graph.add_value(Value(it, INT64, ()))
    graph.add_value(Value(cd, BOOL, ()))
    outputs = _output_names(ctx, ctx.outputs)
    items = [graph.fresh_name(f"{o}/batch_item") for o in outputs]
    outer_nodes, graph.nodes = graph.nodes, []
    try:
        elements = []
        for v in values:
            element = graph.fresh_name(f"{v.name}/batch_element")
            ctx.emit(Gather(axis=0), [v.name, it], [element])
            elements.append(graph.values[element])
        _scan_loop(ctx, gp, elements[:n_state], elements[n_state:], [0] * n_in, dirs, [0] * n_out, [0] * n_out,
                   items)
    finally:
        body_nodes, graph.nodes = graph.nodes, outer_nodes
    region = Region([it, cd], body_nodes, [cd] + items)
    types = _loop_outputs(ctx, region, [], [], _new_symbols(ctx, before), batch, outputs)
    trip = ctx.tmp("batch_size")
    ctx.emit(ShapeOf(start=0, end=1), [scanned[0].name], [trip])
    _emit_loop(ctx, region, 0, types, [trip, ""], outputs)


def register(r) -> None:
    r.add("If", VERSIONS, if_, foldable=False)
    r.add("Loop", VERSIONS, loop, foldable=False)
    r.add("Scan", (8,), scan_8, foldable=False)
    r.add("Scan", (9, 11, 16, 19, 21, 23, 24, 25), scan, foldable=False)
