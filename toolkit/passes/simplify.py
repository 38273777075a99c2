"""Apply each core op's ``simplify`` rewrite (a patch: the nodes that replace it) until none
applies: a Transpose of unit dims becomes a view, a Slice of everything an Identity, a
Gemm over constant transposed weights gets them transposed once, a Conv's constant
weights are packed for its kernel."""
from __future__ import annotations

from ..ir.graph import Graph, Node, regions


def simplify(graph: Graph) -> Graph:
    graph.nodes = _simplify(graph, graph.nodes)
    return graph


def _simplify(graph: Graph, nodes: list[Node]) -> list[Node]:
    for node in nodes:
        for r in regions(node):
            r.nodes = _simplify(graph, r.nodes)
    out: list[Node] = []
    work = list(reversed(nodes))
    while work:
        node = work.pop()
        patch = node.op.simplify(node, graph)
        if patch is None:
            out.append(node)
        else:
            work.extend(reversed(patch))  # a replacement may simplify further
    return out
