"""Fuse one-input elementwise ops into the GEMM kernel that produces their input: a Conv,
MatMul or Gemm followed by Relu (or any chain of one-input float32 elementwise ops: Clip,
LeakyRelu, Sigmoid, ...) becomes one node whose op carries the chain in ``post``, and the
kernel applies it as each output element is stored (the GEMM's epilogue, see
:func:`toolkit.codegen.gemm.apply_post`), so the activation costs no pass over memory and
its tensor no buffer.

A producer fuses when its op says its kernel can (``fusable(graph, node)``), the
intermediate value has no other reader (no other node, region or graph output reads it),
and the consumer is in the same node list (not inside a region)."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..ir.dtypes import FLOAT32
from ..ir.graph import Graph, Node, regions
from ..ops.elementwise import Elementwise


def fuse(graph: Graph) -> Graph:
    uses: Counter[str] = Counter(graph.outputs)
    for node in graph.all_nodes():
        uses.update(i for i in node.inputs if i)
        for r in regions(node):
            uses.update(r.outputs)
    graph.nodes = _fuse(graph, graph.nodes, uses)
    return graph


def _unary(graph: Graph, node: Node) -> bool:
    """A one-input elementwise op from float32 to float32."""
    if not isinstance(node.op, Elementwise) or len([i for i in node.inputs if i]) != 1 or len(node.outputs) != 1:
        return False
    spec = node.op.spec
    return (spec.typing == "same" and not spec.to_bool and graph.values[node.inputs[0]].dtype == FLOAT32
            and graph.values[node.outputs[0]].dtype == FLOAT32)


def _fuse(graph: Graph, nodes: list[Node], uses: Counter) -> list[Node]:
    out: list[Node] = []
    producers: dict[str, Node] = {}  # output -> the fusable node that makes it
    for node in nodes:
        for r in regions(node):
            r.nodes = _fuse(graph, r.nodes, uses)
        if _unary(graph, node):
            src = node.inputs[0]
            producer = producers.pop(src, None)
            if producer is not None and uses[src] == 1:
                producer.op = replace(producer.op, post=producer.op.post + (node.op,))
                producer.outputs = [node.outputs[0]]
                producers[node.outputs[0]] = producer
                del graph.values[src]
                continue
        out.append(node)
        fusable = getattr(node.op, "fusable", None)
        if fusable is not None and len(node.outputs) == 1 and fusable(graph, node):
            producers[node.outputs[0]] = node
    return out
