"""Graph passes, run as one flat ordered list (see :data:`PIPELINE`).

Each pass takes and returns a graph. With ``SYMWASM_DEBUG=verify`` the graph is verified
after every pass, and the failing pass is named.
"""
from __future__ import annotations

import os
from typing import Callable

from ..ir.graph import CompileError, Graph
from .dce import dead_code
from .fuse import fake_quantize, fold_batch_norm, fuse, gelu
from .simplify import simplify
from .verify import verify

PIPELINE: list[tuple[str, Callable[[Graph], Graph]]] = [
    ("fold-batch-norm", fold_batch_norm),
    ("simplify", simplify),
    ("fake-quantize", fake_quantize),
    ("dead-code", dead_code),
    ("gelu", gelu),
    ("fuse", fuse),
]


def run_pipeline(graph: Graph) -> Graph:
    check = "verify" in os.environ.get("SYMWASM_DEBUG", "").split(",")
    for name, fn in PIPELINE:
        graph = fn(graph)
        if check:
            try:
                verify(graph)
            except CompileError as e:
                raise CompileError(f"after pass '{name}': {e}") from None
    return graph
