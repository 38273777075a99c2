"""The graph verifier run between passes at SYMWASM_DEBUG=verify."""
from __future__ import annotations

from ..ir.graph import CompileError, Graph
from ..ops.base import CoreOp


def verify(graph: Graph) -> None:
    defined = set(graph.inputs) | {n for n, v in graph.values.items() if v.known}
    for node in graph.nodes:
        if not isinstance(node.op, CoreOp):
            raise CompileError(f"{node.label()}: {node.op!r} is not a core op")
        for i in node.inputs:
            if i and i not in defined:
                raise CompileError(f"{node.label()}: input '{i}' is not defined before use")
        for o in node.outputs:
            if o and o not in graph.values:
                raise CompileError(f"{node.label()}: output '{o}' has no value")
            defined.add(o)
    for o in graph.outputs:
        if o not in defined:
            raise CompileError(f"graph output '{o}' is never defined")
