"""The graph verifier run between passes at SYMWASM_DEBUG=verify."""
from __future__ import annotations

from ..ir.graph import CompileError, Graph, Node, regions
from ..ops.base import CoreOp


def verify(graph: Graph) -> None:
    defined = set(graph.inputs) | {n for n, v in graph.values.items() if v.known}
    _verify_nodes(graph, graph.nodes, defined)
    for o in graph.outputs:
        if o not in defined:
            raise CompileError(f"graph output '{o}' is never defined")


def _verify_nodes(graph: Graph, nodes: list[Node], defined: set[str]) -> None:
    """Every input defined before use, in this scope or an enclosing one."""
    for node in nodes:
        if not isinstance(node.op, CoreOp):
            raise CompileError(f"{node.label()}: {node.op!r} is not a core op")
        for i in node.inputs:
            if i and i not in defined:
                raise CompileError(f"{node.label()}: input '{i}' is not defined before use")
        for r in regions(node):
            inner = defined | set(r.inputs)
            _verify_nodes(graph, r.nodes, inner)
            for o in r.outputs:
                if o not in inner:
                    raise CompileError(f"{node.label()}: its region's output '{o}' is never defined")
        for o in node.outputs:
            if o and o not in graph.values:
                raise CompileError(f"{node.label()}: output '{o}' has no value")
            defined.add(o)
