"""Apply each core op's ``simplify`` rewrite (a patch: the nodes that replace it) until none
applies: a Transpose of unit dims becomes a view, a Slice of everything an Identity, a
Gemm over constant transposed weights gets them transposed once, a Conv's constant
weights are packed for its kernel."""
from __future__ import annotations

from ..ir.graph import Graph, Node


def simplify(graph: Graph) -> Graph:
    out: list[Node] = []
    work = list(reversed(graph.nodes))
    while work:
        node = work.pop()
        patch = node.op.simplify(node, graph)
        if patch is None:
            out.append(node)
        else:
            work.extend(reversed(patch))  # a replacement may simplify further
    graph.nodes = out
    return graph
