"""Remove nodes that need not run: none of their outputs reaches a graph output, or every
output is known at compile time (a constant, or a shape value such as ``Shape(x)``), which
is materialized where a kernel reads it.

A node that need not run but whose shapes are read (``Shape(Reshape(x, t))``) leaves its
run-time checks behind (a :class:`~toolkit.ops.base.Checks` node), so inputs it would reject
are still rejected, naming it.

A value is needed through its data as well as through its *symbols*: ``Range(0, Shape(
NonZero(x))[1], 1)`` reads no tensor of NonZero, but its length is NonZero's count, a data-
dependent symbol only the NonZero node computes at run time. So the node that defines a
data symbol is kept while any needed value's shape or contents mention it.
"""
from __future__ import annotations

from ..ir import dims as D
from ..ir.graph import Graph, Node, Value, captures, regions
from ..ops.base import Checks, recomputable


def _data_symbols(v: Value) -> set[D.Sym]:
    out: set[D.Sym] = set()
    for d in v.shape + (v.sym or ()):
        out |= {s for s in D.free_symbols(d) if s.kind == "data"}
    return out


def definers(graph: Graph, nodes: list[Node] | None = None) -> dict[D.Sym, Node]:
    """The node that brings each data-dependent symbol into the graph (or among ``nodes``,
    a region's)."""
    found: dict[D.Sym, Node] = {}
    for node in graph.nodes if nodes is None else nodes:
        seen = set().union(*[_data_symbols(graph.values[i]) for i in node.inputs if i]) if node.inputs else set()
        for o in node.outputs:
            if o:
                for s in _data_symbols(graph.values[o]) - seen:
                    found.setdefault(s, node)
    return found


def dead_code(graph: Graph) -> Graph:
    live = _prune(graph, graph.nodes, graph.outputs, lambda kept: setattr(graph, "nodes", kept))
    graph.values = {k: v for k, v in graph.values.items() if k in live or k in graph.inputs}
    return graph


def _prune(graph: Graph, nodes: list[Node], roots, store) -> set[str]:
    """Keep the nodes of ``nodes`` that ``roots`` need (see the module doc), pruning the
    regions of kept control-flow nodes the same way; ``store`` gets the kept list. Returns
    the names of the live values, the regions' included."""
    defined_by = definers(graph, nodes)
    live: set[str] = set()
    needed: set[int] = set()  # ids of the nodes that define needed symbols

    def use(name: str) -> None:
        if name and name not in live:
            live.add(name)
            v = graph.values.get(name)
            if v is not None:
                needed.update(id(defined_by[s]) for s in _data_symbols(v) if s in defined_by)

    shapes_read: set[str] = set()  # values whose shapes (not data) something reads

    for o in roots:
        use(o)
    kept = []
    def keep_checks(node: Node) -> None:
        kept.append(node if isinstance(node.op, Checks) else
                    Node(Checks(), node.name, node.source, [], [], checks=list(node.checks)))
        for c in node.checks:
            for d in (c.a, c.b):
                needed.update(id(defined_by[s]) for s in D.free_symbols(d) if s.kind == "data" and s in defined_by)

    for node in reversed(nodes):  # a symbol's definer comes before every node using it
        outs = [o for o in node.outputs if o]
        reached = any(o in live for o in outs)
        runs = (reached and (not all(graph.values[o].known for o in outs) or recomputable(graph, node))) \
            or node.op.has_effect
        if isinstance(node.op, Checks):
            keep_checks(node)
        elif not (runs or id(node) in needed):
            if reached or any(o in shapes_read for o in outs):
                # its shapes are read (Shape of it, or of a value after it): keep the checks
                # that reject inputs it cannot take, and follow its inputs' shapes
                if node.checks:
                    keep_checks(node)
                shapes_read.update(i for i in node.inputs if i)
        else:
            kept.append(node)
            inner = regions(node)
            for r in inner:
                for name in _prune(graph, r.nodes, r.outputs, lambda k, r=r: setattr(r, "nodes", k)):
                    use(name)  # (its symbols may come from a node out here)
                for name in r.inputs:
                    use(name)
            if inner:  # what the regions read from outside, now that they are pruned
                fixed = node.inputs[:node.op.n_operands]
                node.inputs = fixed + [c for c in captures(inner) if c not in fixed]
            for i in node.inputs:
                use(i)
            for o in outs:  # what a kept node computes is there: its outputs' symbols too
                use(o)
    store(kept[::-1])
    return live

