"""Elementwise ops fused after another kernel (:mod:`toolkit.passes.fuse`): each is a
:class:`PostOp`, applied by the op's own scalar function to the value the kernel is about to
store: in a GEMM's epilogue (Conv, MatMul, Gemm: :func:`toolkit.codegen.gemm.apply_post`)
or after an elementwise op's own function (a chain in one loop)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from ..ir.dtypes import FLOAT32
from .kernel import F32


@dataclass(frozen=True)
class PostOp:
    """One fused elementwise op: ``op`` is an elementwise core op. A two-input op has its
    other input as ``operand``: "const" (a constant scalar, ``value``), "full" (a tensor of
    the output's shape: the element at the output's position, a residual) or "row" (one
    value per column j: MatMul's bias); ``left``: the fused value is the op's first input."""

    op: object
    operand: str = ""
    left: bool = True
    value: float = 0.0

    def __str__(self) -> str:
        if not self.operand:
            return str(self.op)
        other = f"{self.value:g}" if self.operand == "const" else self.operand
        return f"{self.op}({'.' if self.left else other}, {other if self.left else '.'})"

    @property
    def reads_tensor(self) -> bool:
        return self.operand in ("full", "row")


def post_operands(post: tuple) -> int:
    """How many extra tensors the fused ops ``post`` read."""
    return sum(1 for p in post if p.reads_tensor)


def apply(b: ir.IRBuilder, post: tuple, v: ir.Value, load: Callable[[PostOp], ir.Value] | None = None) -> ir.Value:
    """v (a float32) through ``post`` in order; ``load(p)`` gives a tensor operand's value."""
    for p in post:
        if not p.operand:
            v = p.op.scalar_fn(b, [v], [FLOAT32], FLOAT32)
            continue
        o = ir.Constant(F32, p.value) if p.operand == "const" else load(p)
        v = p.op.scalar_fn(b, [v, o] if p.left else [o, v], [FLOAT32, FLOAT32], FLOAT32)
    return v
