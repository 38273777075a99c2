"""Elementwise ops fused after another kernel (:mod:`toolkit.passes.fuse`): each is a
:class:`PostOp`, applied by the op's own scalar function to the value the kernel is about to
store: in a GEMM's epilogue (Conv, MatMul, Gemm: :func:`toolkit.codegen.gemm.apply_post`)
or after an elementwise op's own function (a chain in one loop)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from ..ir.dtypes import FLOAT32
from .kernel import F32, splat
from .scalar import Scalar


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


# ops a vector instruction or two apply: an epilogue of only these runs on a GEMM tile's
# accumulators as they are stored (:func:`toolkit.codegen.gemm.gemm`'s ``inline_epilogue``)
CHEAP = frozenset({"relu", "leaky_relu", "add", "sub", "mul", "max", "min", "neg", "abs", "identity", "clip"})


def cheap(post: tuple) -> bool:
    """Whether every fused op of ``post`` is a vector instruction or two (:data:`CHEAP`)."""
    return all(p.op.fn in CHEAP and not p.op.post for p in post)


def post_operands(post: tuple) -> int:
    """How many extra tensors the fused ops ``post`` read."""
    return sum(1 for p in post if p.reads_tensor)


# ops whose scalar functions are Scalar's arithmetic, intrinsics and mathlib's functions
# (which take vectors), so they also run on vectors (Lanes); the others run lane by lane
VECTOR_SAFE = frozenset({"relu", "leaky_relu", "thresholded_relu", "add", "sub", "mul", "div", "max", "min", "neg",
                         "abs", "identity", "clip", "hard_sigmoid", "hard_swish", "exp", "log", "tanh", "sigmoid",
                         "erf", "gelu", "softplus", "softsign", "swish", "mish", "elu", "selu", "celu", "sqrt",
                         "reciprocal", "ceil", "floor", "round", "fake_quantize"})


class Lanes(Scalar):
    """Scalar arithmetic on vectors of ``lanes`` float32: constants are splats."""

    def __init__(self, b: ir.IRBuilder, lanes: int):
        super().__init__(b, FLOAT32)
        self.t = ir.VectorType(F32, lanes)

    def const(self, v: float | int) -> ir.Constant:
        return ir.Constant(self.t, [float(v)] * self.t.count)


def splat_like(b: ir.IRBuilder, s: ir.Value, like: ir.Value) -> ir.Value:
    """The scalar ``s`` as a value of ``like``'s type (a vector: every lane)."""
    return splat(b, s, like.type.count) if isinstance(like.type, ir.VectorType) else s


def apply(b: ir.IRBuilder, post: tuple, v: ir.Value, load: Callable[[PostOp], ir.Value] | None = None) -> ir.Value:
    """v (a float32, or a vector of them) through ``post`` in order; ``load(p)`` gives a
    tensor operand's value, of v's type."""
    vector = isinstance(v.type, ir.VectorType)
    for p in post:
        args = [v]
        if p.operand:
            o = splat_like(b, ir.Constant(F32, p.value), v) if p.operand == "const" else load(p)
            args = [v, o] if p.left else [o, v]
        if not vector:
            v = p.op.scalar_fn(b, args, [FLOAT32] * len(args), FLOAT32)
        elif p.op.fn in VECTOR_SAFE and not p.op.post:
            v = p.op.spec.body(Lanes(b, v.type.count), args, p.op.params)
        else:
            out = ir.Constant(v.type, None)
            for lane in range(v.type.count):
                at = ir.Constant(ir.IntType(32), lane)
                e = p.op.scalar_fn(b, [b.extract_element(a, at) for a in args], [FLOAT32] * len(args), FLOAT32)
                out = b.insert_element(out, e, at)
            v = out
    return v
