"""Which values stay dynamic, and why: the analysis behind ``symwasm compile --static`` and
the ``dynamic`` section of a module's metadata (``symwasm inspect``).

A dim is dynamic when it mentions a symbol. An *input* symbol is a graph input's dim
(``--bind`` fixes it); a *data* symbol is brought in by one node (:func:`.dce.definers`)
that sizes its output from tensor values known only at run time: NonZero's count, a
Reshape whose target a kernel computes. Each dynamic dim is reported with that chain:

    node 'nz' (NonZero): value 'nz' dim 1 (nonzero_0) depends on data: NonZero 'nz' counts
    its non-zero elements at run time

A static module's program is kernel calls over a compile-time arena, so a control-flow node
(If, Loop: its program branches) keeps a model off the static path even when every shape is
known.
"""
from __future__ import annotations

import re

from ..describe import describe
from ..ir import dims as D
from ..ir.dims import Sym
from ..ir.dtypes import INDEX
from ..ir.graph import CompileError, Graph, Node, regions
from ..ops.datadep import NonZero, Range
from ..ops.movement import Slice
from ..ops.shape import Expand, Fill, Reshape
from .dce import definers

# per op sizing its output from values: what those values are to it, and which inputs hold them
_SIZED_BY = {Range: ("its length", (0, 1, 2)), Reshape: ("its target shape", (1,)),
             Expand: ("its target shape", (1,)), Fill: ("its shape", (0,)), Slice: ("its bounds", (1, 2, 3))}
# how far back a reason follows the values an op's output size is read from
_CHAIN_DEPTH = 4


def _all_nodes(graph: Graph) -> list[Node]:
    out = []
    for node in graph.nodes:
        out.append(node)
        for r in regions(node):
            out.extend(r.walk())
    return out


class _Causes:
    """Where each symbol of a graph comes from, as text."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.definer = definers(graph, _all_nodes(graph))
        self.origin: dict[Sym, tuple[str, int]] = {}  # input symbol -> (input, axis)
        for name in graph.inputs:
            for axis, d in enumerate(graph.values[name].shape):
                atom = d.atom() if isinstance(d, D.Expr) else None
                if isinstance(atom, Sym):
                    self.origin.setdefault(atom, (name, axis))
        self._memo: dict[Sym, str] = {}

    def __call__(self, s: Sym) -> str:
        if s not in self._memo:
            self._memo[s] = self._input(s) if s.kind == "input" else self._data(s)
        return self._memo[s]

    def _input(self, s: Sym) -> str:
        if s not in self.origin:
            return f"the input symbol '{s}': bind it with --bind {s}=<value>"
        name, axis = self.origin[s]
        where = f"input '{name}' dim {axis}"
        # the importer's name for a dim the model leaves unnamed; --bind only takes dim_param names
        if re.fullmatch(rf"{re.escape(_ident(name))}_dim{axis}_\d+", s.name):
            return (f"{where}, a dim the model leaves unnamed (symwasm calls it '{s}'): --bind takes only "
                    f"named dims, so give it a size (or a name) in the model")
        return f"{where}, the symbol '{s}': bind it with --bind {s}=<value>"

    def _data(self, s: Sym) -> str:
        node = self.definer.get(s)
        if node is None:
            return f"data: the symbol '{s}' is computed at run time"
        who = f"{node.source} '{node.name}'"
        if isinstance(node.op, NonZero):
            return f"data: {who} counts its non-zero elements at run time"
        if regions(node):
            cond = [i for i in node.inputs if i and not self.graph.values[i].known]
            on = f" on {self._chain(cond[0], _CHAIN_DEPTH)}" if cond else ""
            return f"data: {who} decides it at run time, by the branch or iterations it runs (control flow{on})"
        what, at = _SIZED_BY.get(type(node.op), (None, None))
        if at is None:
            # an op this table does not know: sizes are in its integer inputs (Tile's repeats),
            # or it counts what its data holds (Unique, Compress)
            unknown = [i for i in node.inputs if i and not self.graph.values[i].known]
            sizes = [i for i in unknown if self.graph.values[i].dtype in INDEX]
            if not (sizes or unknown):
                return f"data: {who} sizes it at run time"
            return f"data: {who} sizes it at run time from {self._chain((sizes or unknown)[0], _CHAIN_DEPTH)}"
        unknown = [node.inputs[k] for k in at
                   if k < len(node.inputs) and node.inputs[k] and not self.graph.values[node.inputs[k]].known]
        if not unknown:
            return self._symbolic(node, who, what, at)
        return f"data: {who} reads {what} at run time from {self._chain(unknown[0], _CHAIN_DEPTH)}"

    def _symbolic(self, node: Node, who: str, what: str, at) -> str:
        """The values that size the output are known as dims, yet the op cannot use them at
        compile time (a Slice bound ``n - 1`` may be negative, which changes its meaning)."""
        held = [self.graph.values[node.inputs[k]] for k in at if k < len(node.inputs) and node.inputs[k]]
        shown = ", ".join(f"'{v.name}' = [{', '.join(map(str, v.int_contents()))}]" for v in held
                          if v.int_contents() is not None and any(not isinstance(x, int) for x in v.int_contents()))
        if not shown:
            return f"data: {who} sizes it at run time"
        why = "may be negative" if isinstance(node.op, Slice) else "cannot be used at compile time"
        text = f"data: {who} sizes it at run time: {what} ({shown}) {why}"
        inputs = sorted({s.name for v in held for x in (v.int_contents() or ()) for s in D.free_symbols(x)
                         if s.kind == "input"})
        if inputs:
            text += f"; bind {', '.join(inputs)} to make it static"
        return text

    def _chain(self, name: str, depth: int) -> str:
        """Where the run-time values of ``name`` come from: its producers back to an input."""
        if name in self.graph.inputs:
            return f"input '{name}'"
        p = self.graph.values[name].producer
        if p is None:
            return f"'{name}'"
        text = f"'{name}', computed by {p.source} '{p.name}'"
        unknown = [i for i in p.inputs if i and not self.graph.values[i].known]
        if unknown and depth > 1:
            text += " from " + self._chain(unknown[0], depth - 1)
        elif unknown:
            text += " from ..."
        return text


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "v"


def report(graph: Graph) -> dict:
    """The metadata's ``dynamic`` section: each symbol's cause, each dynamic dim (compact: the
    text is :func:`describe`'s), each control-flow node. All empty for a model that
    ``--static`` accepts."""
    cause = _Causes(graph)
    values, used = [], set()
    for name, v in graph.values.items():
        for axis, d in enumerate(v.shape):
            if isinstance(d, int):
                continue
            syms = sorted(D.free_symbols(d), key=lambda s: s.name)
            used.update(syms)
            values.append({"value": name, "dim": axis, "expr": str(d),
                           "node": v.producer.name if v.producer else None,
                           "op": v.producer.source if v.producer else None,
                           "symbols": [s.name for s in syms]})
    symbols = {}
    for s in sorted(used, key=lambda s: s.name):
        origin = cause.origin.get(s)
        symbols[s.name] = {"kind": s.kind, "why": cause(s), "input": list(origin) if origin else None}
    return {"symbols": symbols, "values": values, "control_flow": control_flow(graph)}


def control_flow(graph: Graph) -> list[str]:
    """Why each control-flow node keeps the program from being static."""
    return [f"{node.label()}: control flow runs at run time (a static program has no branches or loops)"
            for node in _all_nodes(graph) if regions(node)]


def check_static(graph: Graph) -> None:
    """Fail unless every shape is known at compile time and nothing branches: the
    ``--static`` check. The message lists each cause and each dynamic value."""
    r = report(graph)
    if not r["values"] and not r["control_flow"]:
        return
    lines = ["--static: this model is not static: a static module needs every shape known at compile "
             "time and no control flow"]
    if r["symbols"]:
        lines.append("symbols known only at run time:")
        lines += [f"  {name}: {s['why']}" for name, s in r["symbols"].items()]
        lines.append(f"values with such dims ({len(r['values'])}):")
        lines += [f"  {describe(e, r['symbols'])}" for e in r["values"]]
    if r["control_flow"]:
        lines.append("control flow:")
        lines += [f"  {t}" for t in r["control_flow"]]
    raise CompileError("\n".join(lines))
