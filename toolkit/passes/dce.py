"""Remove nodes none of whose outputs reach a graph output."""
from __future__ import annotations

from ..ir.graph import Graph


def dead_code(graph: Graph) -> Graph:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs if o):
            kept.append(node)
            live.update(i for i in node.inputs if i)
    graph.nodes = kept[::-1]
    live.update(o for node in kept for o in node.outputs if o)
    graph.values = {k: v for k, v in graph.values.items() if k in live or k in graph.inputs}
    return graph
