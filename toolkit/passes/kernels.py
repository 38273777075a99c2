"""The select-kernels pass: each op with more than one kernel (Conv, MatMul, Gemm, Resize, Pool:
those with a ``select`` method) gets its kernel plan (:class:`toolkit.codegen.plan.Plan`),
chosen once for the target from its constants (:func:`toolkit.codegen.plan.tuning`).

It runs after simplification and before fusion, which asks the plan whether the kernel takes
elementwise ops as its epilogue; lowering emits the plan and ``symwasm inspect`` prints it.
``routes`` (node name -> route) asks for a route by name, for tests that run every kernel
on every target: a route that cannot run the node is a CompileError naming both.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..codegen.plan import tuning as target_tuning
from ..ir.graph import CompileError, Graph


def select_kernels(graph: Graph, target, routes: Mapping[str, str] | None = None) -> Graph:
    tn = target_tuning(target)
    asked = dict(routes or {})
    for node in graph.all_nodes():
        select = getattr(node.op, "select", None)
        if select is None:
            continue
        route = asked.pop(node.name, None)
        try:
            plan = select(graph, node, tn, route)
        except ValueError as e:
            raise CompileError(f"{node.label()}: {e}") from None
        node.op = replace(node.op, plan=plan)
    if asked:
        raise CompileError(f"routes asked for nodes with no kernel choice: {', '.join(sorted(asked))}")
    return graph
