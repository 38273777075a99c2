"""Graph passes, run as one flat ordered list (see :data:`PIPELINE`).

Each pass takes and returns a graph. With ``SYMWASM_DEBUG=verify`` the graph is verified
after every pass, and the failing pass is named.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Callable

from ..ir.graph import CompileError, Graph
from .dce import dead_code
from .fuse import fake_quantize, fold_batch_norm, fuse, gelu
from .kernels import select_kernels
from .simplify import simplify
from .verify import verify

PIPELINE: list[tuple[str, Callable[[Graph], Graph]]] = [
    ("fold-batch-norm", fold_batch_norm),
    ("simplify", simplify),
    ("fake-quantize", fake_quantize),
    ("dead-code", dead_code),
    ("gelu", gelu),
    ("select-kernels", select_kernels),  # (given the target by run_pipeline)
    ("fuse", fuse),
]


def run_pipeline(graph: Graph, target, routes: Mapping[str, str] | None = None) -> Graph:
    """The passes in order, for ``target`` (a :class:`toolkit.codegen.target.Target`; the
    select-kernels pass chooses its kernels, ``routes`` forcing some by node name)."""
    check = "verify" in os.environ.get("SYMWASM_DEBUG", "").split(",")
    for name, fn in PIPELINE:
        graph = select_kernels(graph, target, routes) if fn is select_kernels else fn(graph)
        if check:
            try:
                verify(graph)
            except CompileError as e:
                raise CompileError(f"after pass '{name}': {e}") from None
    return graph
