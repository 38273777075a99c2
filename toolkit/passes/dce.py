"""Remove nodes that need not run: none of their outputs reaches a graph output, or every
output is known at compile time (a constant, or a shape value such as ``Shape(x)``), which
is materialized where a kernel reads it."""
from __future__ import annotations

from ..ir.graph import Graph


def dead_code(graph: Graph) -> Graph:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        outs = [o for o in node.outputs if o]
        if any(o in live for o in outs) and not all(graph.values[o].known for o in outs):
            kept.append(node)
            live.update(i for i in node.inputs if i)
    graph.nodes = kept[::-1]
    live.update(o for node in kept for o in node.outputs if o)
    graph.values = {k: v for k, v in graph.values.items() if k in live or k in graph.inputs}
    return graph
