"""The core op protocol and what a shape function sees.

A core op is a frozen dataclass whose fields are its parameters, decoded once by a
frontend (:mod:`toolkit.frontend.onnx`): ``Conv(kernel=(3, 3), strides=(1, 1), ...)``.
Frontends know source formats and versions; core ops know only their own meaning. Each
core op class provides:

- ``infer(ctx)``: the shape function. Sets each output's dtype, symbolic shape and known
  contents, proves what it can and defers the rest to run-time checks, and may leave what
  lowering needs in ``ctx.info`` (a Conv's window). It can be re-run (passes do).
- ``lower(lw, node)``: emits the node's part of the program through the
  :class:`toolkit.program.lower.Lowerer`: kernel calls, views, shape builtins.
- optionally ``simplify(node, graph)``: a rewrite returning replacement nodes (a patch),
  or None; the ``simplify`` pass applies them. A Transpose that moves only dims of size 1
  becomes a view there, not inside its lowering.
- ``aliases_input``: True when output 0 is a view of input 0's buffer (no kernel, no copy);
  planners and fusion read it.
- ``in_place_inputs``: True when the op's inputs may be written in place into parts of
  output 0's buffer (a Concat's), ``input_offsets`` saying where for one node; memory
  planning (:func:`toolkit.program.memory.plan_in_place`) reads them, and the op's lowering
  skips the inputs placed there (``lw.in_place``).
- elementwise ops also have ``scalar_fn(b, values, in_dtypes, out_dtype)`` (the LLVM IR of
  one element), which the elementwise kernels (and later fusion) compose.

Kernel keys are derived from the op's fields, the dtypes and the static-shape pattern of
its tensors (:mod:`toolkit.program.kernels`): there is no key to write by hand.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Sequence

import numpy as np

from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import INDEX, DType, names
from ..ir.graph import SYM_LIMIT, Check, CompileError, Graph, Node, ShapeError, Value

if TYPE_CHECKING:
    from ..program.lower import Lowerer


class CoreOp:
    """Base of core ops (subclasses are ``@dataclass(frozen=True)``)."""

    aliases_input: ClassVar[bool] = False
    in_place_inputs: ClassVar[bool] = False
    # runs for its effect (a run-time failure), not its outputs: dead-code elimination keeps it
    has_effect: ClassVar[bool] = False

    def infer(self, ctx: "InferContext") -> None:
        raise NotImplementedError

    def lower(self, lw: "Lowerer", node: Node) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no lowering")

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        return None

    def input_offsets(self, node: Node, graph: Graph) -> list[int] | None:
        """For an op with ``in_place_inputs``, whose output 0 is static: the byte offset in
        output 0's buffer of each input, when each is a contiguous part of it in this node;
        else None."""
        return None

    def __str__(self) -> str:
        """The class name and the fields that differ from their defaults."""
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            parts.append(f"{f.name}={_short(v)}")
        return f"{type(self).__name__}({', '.join(parts)})" if parts else type(self).__name__


def _short(v: Any) -> str:
    if isinstance(v, DType):
        return v.name
    if isinstance(v, tuple):
        return "(" + ", ".join(_short(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return str(v)


class InferContext:
    """One node's view of the graph while its shape function runs. The shape function
    calls :meth:`set_output` for each output; :meth:`fail` reports a compile error naming
    the node; :meth:`require_eq` / :meth:`require_bcast` prove a condition or defer it to a
    run-time check; ``info`` is what lowering will need."""

    def __init__(self, graph: Graph, node: Node) -> None:
        self.graph = graph
        self.node = node
        self.op = node.op
        self.scope = graph.scope
        self.checks: list[Check] = []
        self.info: Any = None

    # inputs -------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.node.inputs)

    def has(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    def input(self, i: int) -> Value:
        if not self.has(i):
            self.fail(f"input {i} is required")
        return self.graph.values[self.node.inputs[i]]

    def optional(self, i: int) -> Value | None:
        return self.input(i) if self.has(i) else None

    def inputs(self) -> list[Value]:
        return [self.input(i) for i in range(self.n_inputs) if self.has(i)]

    def wants(self, i: int) -> bool:
        """Whether output ``i`` exists (optional outputs may be left out)."""
        return i < len(self.node.outputs) and bool(self.node.outputs[i])

    # outputs ------------------------------------------------------------
    def set_output(self, i: int, dtype: DType, shape: Sequence[Dim], *,
                   sym: Sequence[Dim] | None = None, const: np.ndarray | None = None) -> None:
        if not self.wants(i):
            return
        name = self.node.outputs[i]
        v = Value(name, dtype, tuple(D.as_dim(d) for d in shape), const=const,
                  sym=tuple(D.as_dim(s) for s in sym) if sym is not None else None,
                  producer=self.node)
        if v.sym is not None and all(isinstance(s, int) for s in v.sym) and v.const is None:
            v.const = np.array(v.sym, dtype=dtype.np).reshape([int(d) for d in v.shape])
        self.graph.add_value(v)

    # diagnostics and deferred checks ---------------------------------------
    def fail(self, reason: str) -> NoReturn:
        raise ShapeError(f"{self.node.label()}: {reason}")

    def require_eq(self, a: Dim, b: Dim, what: str) -> None:
        """``a == b``: an error now if provably false, a run-time check if unknown."""
        if a == b:
            return
        if isinstance(a, int) and isinstance(b, int):
            self.fail(f"{what}: {a} != {b}")
        self.checks.append(Check(
            "eq", a, b, f"{self.node.label()}: {what}: {a} = {{0}} does not equal {b} = {{1}}"))

    def require_le(self, a: Dim, b: Dim, what: str) -> None:
        """``a <= b``: an error now if provably false, a run-time check if unknown (and, under
        --check-facts, when proved from symbols' ranges too)."""
        if D.provably_le(a, b):
            if self.graph.check_facts and not (isinstance(a, int) and isinstance(b, int)) and a != b:
                self.checks.append(Check(
                    "le", a, b, f"{self.node.label()}: {what}: fact check failed: the compiler proved {a} <= {b}, "
                                f"but {a} = {{0}} and {b} = {{1}}"))
            return
        if isinstance(a, int) and isinstance(b, int):
            self.fail(f"{what}: {a} > {b}")
        self.checks.append(Check(
            "le", a, b, f"{self.node.label()}: {what}: {b} = {{1}} is less than {a} = {{0}}"))

    def require_bcast(self, d: Dim, out: Dim, what: str) -> None:
        """``d`` broadcasts to ``out`` (d is 1 or equal)."""
        if d == out or d == 1:
            return
        if isinstance(d, int) and isinstance(out, int):
            self.fail(f"{what}: dim {d} does not broadcast to {out}")
        self.checks.append(Check(
            "bcast", d, out,
            f"{self.node.label()}: {what}: dim {d} = {{0}} does not broadcast with {out} = {{1}}"))

    def check_dtype(self, v: Value, allowed: Sequence[DType]) -> None:
        """Fail naming the input, op and dtype unless the op takes that dtype."""
        if v.dtype not in allowed:
            self.fail(f"input '{v.name}' has dtype {v.dtype}; {self.node.source} takes {names(allowed)}")

    # shared shape helpers -------------------------------------------------
    def broadcast(self, values: Sequence[Value]) -> tuple[Dim, ...]:
        """numpy broadcasting of the inputs' shapes, with run-time checks for dims whose
        compatibility cannot be decided now. Messages name both inputs and the dim."""
        rank = max(v.rank for v in values)
        shapes = [(1,) * (rank - v.rank) + tuple(v.shape) for v in values]
        out: list[Dim] = []
        for axis in range(rank):
            d: Dim = 1
            for s in shapes:
                try:
                    d = D.bcast(d, s[axis])
                except D.BroadcastError:
                    self.fail(self._bcast_text(values, shapes, axis))
            out.append(d)
            self._name_bcast(d, values, shapes, axis)
        for v, s in zip(values, shapes):
            for axis in range(rank):
                if s[axis] != out[axis] and s[axis] != 1:
                    others = [f"'{w.name}' has {t[axis]}" for w, t in zip(values, shapes) if w is not v]
                    what = f"input '{v.name}' dim {axis - (rank - v.rank)} vs {', '.join(others)}"
                    self.require_bcast(s[axis], out[axis], what)
        return tuple(out)

    def _name_bcast(self, d: Dim, values, shapes, axis: int) -> None:
        """A dim decided only at run time (``bcast(p, q)``) gets a message naming the inputs."""
        op = D.atom_op(d)
        if op is None or op[0] != "bcast":
            return
        args = op[1]
        who = [f"input '{v.name}' dim {axis - (len(s) - v.rank)} ({s[axis]})"
               for v, s in zip(values, shapes) if s[axis] in args]
        vals = ", ".join(f"{a} = {{{k}}}" for k, a in enumerate(args[:2]))
        self.checks.append(Check("define", d, d, f"{self.node.label()}: {' and '.join(who)} "
                                                    f"do not broadcast: {vals}"))

    def _bcast_text(self, values, shapes, axis) -> str:
        parts = [f"input '{v.name}' {D.fmt_shape(v.shape)}" for v in values]
        return (f"shapes do not broadcast at output dim {axis}: "
                f"{', '.join(parts)} (dims {', '.join(str(s[axis]) for s in shapes)})")

    def unidirectional(self, v: Value, shape: Sequence[Dim], what: str) -> None:
        """``v`` broadcasts to ``shape`` without changing it."""
        if v.rank > len(shape):
            self.fail(f"{what} '{v.name}' {D.fmt_shape(v.shape)} has more dims than {D.fmt_shape(shape)}")
        for axis, d in enumerate(v.shape):
            self.require_bcast(d, shape[len(shape) - v.rank + axis], f"{what} '{v.name}' dim {axis}")

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        if not -rank <= axis < max(rank, 1):
            self.fail(f"{what} {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def fresh(self, prefix: str) -> D.Expr:
        """A fresh data-dependent symbol, named after the op."""
        return self.scope.fresh(prefix, kind="data")

    def shape_length(self, v: Value, what: str) -> int:
        """The static length of a 1-D integer tensor holding a shape (or starts, axes...)."""
        if v.dtype not in INDEX:
            self.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be int64 or int32")
        if v.rank != 1:
            self.fail(f"{what} '{v.name}' must be 1-D, has shape {D.fmt_shape(v.shape)}")
        if not isinstance(v.shape[0], int):
            self.fail(f"{what} '{v.name}' has {v.shape[0]} elements; its length must be static")
        return v.shape[0]


class Checks(CoreOp):
    """What is left of a node that need not run but whose shapes are read (``Shape(Reshape(
    x, t))``): its run-time checks, so that inputs it would reject are still rejected, with
    its name. Dead-code elimination makes these; lowering emits only the checks."""

    def infer(self, ctx: "InferContext") -> None:
        ctx.checks = list(ctx.node.checks)

    def lower(self, lw: "Lowerer", node: Node) -> None:
        pass

    def __str__(self) -> str:
        return "Checks"


@dataclasses.dataclass(frozen=True)
class Assume(CoreOp):
    """--check-facts: input 0 holds ``values`` at run time, as the compiler decided from what
    it derived (the condition of an If whose branch it took at compile time)."""

    values: tuple[int, ...]
    what: str
    has_effect: ClassVar[bool] = True

    def infer(self, ctx: "InferContext") -> None:
        pass

    def lower(self, lw: "Lowerer", node: Node) -> None:
        lw.check_values(lw.tensor(node.inputs[0]), self.values, f"{self.what} '{node.inputs[0]}'")


class View(CoreOp):
    """Output 0 is input 0's buffer with another shape: no kernel, no copy."""

    aliases_input = True

    def lower(self, lw: "Lowerer", node: Node) -> None:
        lw.view(node.outputs[0], node.inputs[0])


@dataclasses.dataclass(frozen=True)
class Identity(View):
    """Output 0 is input 0 (what a simplification that proves a node does nothing makes of it)."""

    def infer(self, ctx: "InferContext") -> None:
        x = ctx.input(0)
        ctx.set_output(0, x.dtype, x.shape, sym=x.sym, const=x.const)


# the most elements of a value that --check-facts computes again at run time: shape values
# (a Concat of dims, a Gather from a shape), not data
FACT_ELEMENTS = 64
FACT_DTYPES = frozenset({"int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool"})


def recomputable(graph: Graph, node: Node) -> bool:
    """Under --check-facts, whether ``node``, whose outputs the compiler knows (as numbers or
    dims, so it would not run), still runs, its outputs then checked against what the
    compiler derived: it has a kernel, reads only known values, and yields small integer or
    bool values. A wrong shape function, a folded value or a dim slot overwritten at run time
    (shared/regressions/reshape_zero_trunk) then fails naming the node."""
    if not graph.check_facts or type(node.op).lower is CoreOp.lower or getattr(node.op, "regions", ()):
        return False
    outs = [graph.values[o] for o in node.outputs if o]
    ins = [graph.values[i] for i in node.inputs if i]
    return bool(outs) and all(v.known for v in ins + outs) and all(
        v.dtype.name in FACT_DTYPES and v.is_static
        and int(np.prod([int(d) for d in v.shape])) <= FACT_ELEMENTS for v in outs)


def run_infer(graph: Graph, node: Node) -> None:
    """Run ``node``'s shape function, replacing its outputs, checks and info."""
    ctx = InferContext(graph, node)
    try:
        node.op.infer(ctx)
    except CompileError:
        raise
    except Exception as e:  # a bug in a shape function still names the node
        raise CompileError(f"{node.label()}: shape inference failed: {type(e).__name__}: {e}") from e
    for o in node.outputs:
        if o and o not in graph.values:
            raise CompileError(f"{node.label()}: output '{o}' was not inferred")
    node.checks, node.info = ctx.checks, ctx.info


class Patch:
    """The nodes a simplification puts in place of ``node``, built one at a time: each takes
    ``node``'s name and source and is inferred as it is added, so the next can read it."""

    def __init__(self, graph: Graph, node: Node):
        self.graph, self.node, self.nodes = graph, node, []

    def add(self, op: CoreOp, inputs: Sequence[str], output: str) -> str:
        """A node of ``op`` reading ``inputs`` into ``output``; returns ``output``."""
        n = Node(op, self.node.name, self.node.source, list(inputs), [output])
        run_infer(self.graph, n)
        self.nodes.append(n)
        return output


def planned(op: Any, node: Node) -> Any:
    """The kernel plan (:class:`toolkit.codegen.plan.Plan`) the select-kernels pass gave
    ``op`` (:mod:`toolkit.passes.kernels`); an op with more than one kernel lowers only so."""
    if op.plan is None:
        raise CompileError(f"{node.label()}: no kernel plan (the select-kernels pass did not run)")
    return op.plan


def scratch_of(lw: "Lowerer", plan: Any) -> list:
    """The registers of a kernel plan's scratch buffers, in the order its kernel takes them."""
    return [lw.scratch(s.what, s.dtype, s.shape) for s in plan.scratch]


def replace_node(graph: Graph, node: Node, op: CoreOp, inputs: Sequence[str] | None = None) -> list[Node]:
    """``node`` with another op (and inputs), inferred: the usual simplification patch."""
    new = Node(op, node.name, node.source, list(node.inputs if inputs is None else inputs), list(node.outputs))
    run_infer(graph, new)
    return [new]


def known_elements(dtype: DType, values: Sequence[Value], positions) -> list[Dim] | None:
    """The elements of an integer output computed from known inputs by moving elements.

    ``positions`` gets, per input, an int array of the input's shape holding the indices of
    its elements in one pool (all inputs' elements in order), and returns the pool indices
    of the output's elements: the op itself applied to positions (``np.take``, slicing...).
    None when the dtype is not an index dtype, an input is unknown, or a tensor is large
    (all-constant nodes are folded by the importer anyway)."""
    if dtype not in INDEX:
        return None
    pool: list[Dim] = []
    arrays = []
    for v in values:
        if not v.is_static or D.product(v.shape) > SYM_LIMIT:
            return None
        vals = v.int_contents()
        if vals is None:
            return None
        arrays.append(np.arange(len(pool), len(pool) + len(vals)).reshape([int(d) for d in v.shape]))
        pool.extend(vals)
    out = np.asarray(positions(*arrays))
    if out.size > SYM_LIMIT:
        return None
    return [pool[i] for i in out.reshape(-1)]


def promote_sym(v: Value) -> tuple[Dim, ...] | None:
    """The contents of a small integer tensor as a shape value (``Value.sym``)."""
    if v.const is not None and v.const.size > SYM_LIMIT:
        return None
    return v.int_contents()


__all__ = ["CoreOp", "Checks", "InferContext", "run_infer", "replace_node", "known_elements", "promote_sym", "CompileError"]
