"""Elementwise core ops: ``Elementwise(fn, params)`` over the table :data:`SCALAR`, and
``Cast(to)``.

An elementwise op is one line of :data:`SCALAR`: how many inputs, which dtypes, the result
dtype, the LLVM IR of one element (written with :class:`toolkit.codegen.scalar.Scalar`, so
it holds for every dtype it accepts) and, optionally, the same operation on dims, which
keeps integer shape arithmetic (``Shape(x)[0] * 2``) symbolic at compile time.

Shape: numpy broadcasting of the inputs, with run-time checks where it is undecidable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llvmlite import ir

from ..codegen import mathlib
from ..codegen.elementwise import build_elementwise, power
from ..codegen.kernel import intrinsic
from ..codegen.scalar import Scalar, convert, from_bool, to_bool
from ..ir import dims as D
from ..ir.dtypes import ALL, BOOL, FLOAT16, FLOAT32, FLOATS, INDEX, INTS, NUMERIC, SIGNED, DType
from .base import CoreOp, InferContext

ScalarBody = Callable[[Scalar, list[ir.Value], tuple], ir.Value]

F16_F32 = (FLOAT16, FLOAT32)  # what the float32 math library computes
SIGNED_NUMERIC = FLOATS + SIGNED


@dataclass(frozen=True)
class ScalarOp:
    """One elementwise operation. ``arity`` None: one or more inputs (folded left).
    ``typing``: "same" (all inputs one dtype from ``dtypes``; the result that dtype, or bool
    with ``to_bool``), "where" (bool condition, two values of one dtype) or "pow" (base and
    exponent each from ``dtypes``, the result the base's)."""

    arity: int | None
    dtypes: tuple[DType, ...]
    body: ScalarBody
    typing: str = "same"
    to_bool: bool = False
    sym: Callable[..., D.Dim | None] | None = None  # on dims, for integer shape values


def _sym_div(a, b):
    if isinstance(b, int) and b > 0 and D.bounds(a)[0] >= 0:
        return D.floordiv(a, b)  # truncation equals floor for non-negative operands
    return None


def _cmp(op: str) -> ScalarBody:
    return lambda s, v, p: from_bool(s.b, s.cmp(op, v[0], v[1]))


def _math(fn) -> ScalarBody:
    return lambda s, v, p: fn(s.b, v[0])


def _bools(fn) -> ScalarBody:
    return lambda s, v, p: from_bool(s.b, fn(s.b, to_bool(s.b, v[0]), to_bool(s.b, v[1])))


def _sym_compare(decide):
    """A comparison on dims: 1 or 0 when provable, else None (not known at compile time).
    ``decide(a, b)`` says True, False or None."""
    def fn(a, b):
        r = decide(D.as_dim(a), D.as_dim(b))
        return None if r is None else int(r)
    return fn


def _lt(a, b):
    if D.provably_le(D.add(a, 1), b):
        return True
    return False if D.provably_le(b, a) else None


def _eq(a, b):
    if a == b:
        return True
    return False if _lt(a, b) or _lt(b, a) else None


def _sym_where(c, a, b):
    return (a if c else b) if isinstance(c, int) else None


def _hard_sigmoid(s: Scalar, x: ir.Value, alpha: float, beta: float) -> ir.Value:
    return s.max(s.const(0), s.min(s.const(1), s.add(s.mul(s.const(alpha), x), s.const(beta))))


def _clip(s: Scalar, v: list, p: tuple) -> ir.Value:
    """p = (has_min, has_max): the bounds present follow x."""
    x, rest = v[0], iter(v[1:])
    if p[0]:
        lo = next(rest)
        x = s.select(s.lt(x, lo), lo, x)
    if p[1]:
        hi = next(rest)
        x = s.select(s.cmp(">", x, hi), hi, x)
    return x


# name -> operation. ONNX names map here in toolkit/frontend/onnx/ops/elementwise.py.
SCALAR: dict[str, ScalarOp] = {
    "add": ScalarOp(None, NUMERIC, lambda s, v, p: s.fold(s.add, v), sym=D.add),
    "sub": ScalarOp(2, NUMERIC, lambda s, v, p: s.sub(*v), sym=lambda a, b: D.add(a, D.mul(b, -1))),
    "mul": ScalarOp(2, NUMERIC, lambda s, v, p: s.mul(*v), sym=D.mul),
    "div": ScalarOp(2, NUMERIC, lambda s, v, p: s.div(*v), sym=_sym_div),
    "max": ScalarOp(None, NUMERIC, lambda s, v, p: s.fold(s.max, v), sym=D.maximum),
    "min": ScalarOp(None, NUMERIC, lambda s, v, p: s.fold(s.min, v), sym=D.minimum),
    "pow": ScalarOp(2, F16_F32 + INTS, lambda s, v, p: power(s.b, v[0], v[1], *p), typing="pow"),
    # comparisons of shape values fold when provable (exporters' Where(Equal(Shape(x), -1), ...))
    "equal": ScalarOp(2, ALL, _cmp("=="), to_bool=True, sym=_sym_compare(_eq)),
    "less": ScalarOp(2, NUMERIC, _cmp("<"), to_bool=True, sym=_sym_compare(_lt)),
    "greater": ScalarOp(2, NUMERIC, _cmp(">"), to_bool=True, sym=_sym_compare(lambda a, b: _lt(b, a))),
    "less_equal": ScalarOp(2, NUMERIC, _cmp("<="), to_bool=True,
                           sym=_sym_compare(lambda a, b: None if _lt(b, a) is None else not _lt(b, a))),
    "greater_equal": ScalarOp(2, NUMERIC, _cmp(">="), to_bool=True,
                              sym=_sym_compare(lambda a, b: None if _lt(a, b) is None else not _lt(a, b))),
    "and": ScalarOp(2, (BOOL,), _bools(ir.IRBuilder.and_)),
    "or": ScalarOp(2, (BOOL,), _bools(ir.IRBuilder.or_)),
    "xor": ScalarOp(2, (BOOL,), _bools(ir.IRBuilder.xor)),
    "not": ScalarOp(1, (BOOL,), lambda s, v, p: s.b.xor(v[0], ir.Constant(v[0].type, 1))),
    "neg": ScalarOp(1, SIGNED_NUMERIC, lambda s, v, p: s.neg(v[0]), sym=lambda a: D.mul(a, -1)),
    "abs": ScalarOp(1, NUMERIC, lambda s, v, p: s.abs(v[0])),
    "relu": ScalarOp(1, SIGNED_NUMERIC, lambda s, v, p: s.select(s.lt(v[0], s.const(0)), s.const(0), v[0])),
    "leaky_relu": ScalarOp(1, FLOATS, lambda s, v, p: s.select(s.lt(v[0], s.const(0)),
                                                                 s.mul(v[0], s.const(p[0])), v[0])),
    "hard_sigmoid": ScalarOp(1, FLOATS, lambda s, v, p: _hard_sigmoid(s, v[0], *p)),
    "hard_swish": ScalarOp(1, FLOATS, lambda s, v, p: s.mul(v[0], _hard_sigmoid(s, v[0], 1 / 6, 0.5))),
    "softsign": ScalarOp(1, FLOATS, lambda s, v, p: s.div(v[0], s.add(s.const(1), s.abs(v[0])))),
    "softplus": ScalarOp(1, F16_F32, lambda s, v, p: mathlib.log(s.b, s.add(mathlib.exp(s.b, v[0]), s.const(1)))),
    "sqrt": ScalarOp(1, FLOATS, lambda s, v, p: intrinsic(s.b, "llvm.sqrt", v[0])),  # an instruction, never a libcall
    "reciprocal": ScalarOp(1, FLOATS, lambda s, v, p: s.div(s.const(1), v[0])),
    "exp": ScalarOp(1, F16_F32, _math(mathlib.exp)),
    "log": ScalarOp(1, F16_F32, _math(mathlib.log)),
    "tanh": ScalarOp(1, F16_F32, _math(mathlib.tanh)),
    "sigmoid": ScalarOp(1, F16_F32, _math(mathlib.sigmoid)),
    "erf": ScalarOp(1, F16_F32, _math(mathlib.erf)),
    "where": ScalarOp(3, ALL, lambda s, v, p: s.select(to_bool(s.b, v[0]), v[1], v[2]), typing="where",
                      sym=_sym_where),
    "clip": ScalarOp(None, NUMERIC, _clip),
    "identity": ScalarOp(1, ALL, lambda s, v, p: v[0]),
    # y * scale (+ bias), LayerNormalization's affine step when it cannot fuse into its kernel
    "affine": ScalarOp(None, FLOATS, lambda s, v, p: s.fold(s.add, [s.mul(v[0], v[1])] + v[2:])),
}


@dataclass(frozen=True)
class Elementwise(CoreOp):
    """``fn`` names a :data:`SCALAR` entry; ``params`` are its parameters (LeakyRelu's alpha,
    Clip's present bounds)."""

    fn: str
    params: tuple = ()

    @property
    def spec(self) -> ScalarOp:
        return SCALAR[self.fn]

    @property
    def kernel_name(self) -> str:
        return self.fn

    def __str__(self) -> str:
        return f"{self.fn}{self.params if self.params else ''}"

    def infer(self, ctx: InferContext) -> None:
        spec = self.spec
        ins = ctx.inputs()
        if not ins or (spec.arity is not None and len(ins) != spec.arity):
            ctx.fail(f"takes {spec.arity or 'at least one'} input(s), got {len(ins)}")
        out = self._result_dtype(ctx, ins)
        shape = ctx.broadcast(ins)
        sym = None
        if (spec.sym is not None and (out in INDEX or (out == BOOL and spec.to_bool))
                and all(v.sym is not None for v in ins) and len(shape) <= 1):
            sym = _fold_syms(spec, ins, shape)
        ctx.set_output(0, out, shape, sym=sym)

    def _result_dtype(self, ctx: InferContext, ins) -> DType:
        spec = self.spec
        if spec.typing == "pow":
            for v in ins:
                ctx.check_dtype(v, spec.dtypes)
            return ins[0].dtype
        values = ins
        if spec.typing == "where":
            ctx.check_dtype(ins[0], (BOOL,))
            values = ins[1:]
        for v in values:
            ctx.check_dtype(v, spec.dtypes)
        if len({v.dtype for v in values}) > 1:
            ctx.fail("inputs have different dtypes: " + ", ".join(f"'{v.name}' {v.dtype}" for v in values))
        return BOOL if spec.to_bool else values[0].dtype

    def lower(self, lw, node) -> None:
        lw.run_kernel(build_elementwise, self, [i for i in node.inputs if i], [node.outputs[0]])

    def scalar_fn(self, b: ir.IRBuilder, values: list[ir.Value], in_dtypes: Sequence[DType],
                  out_dtype: DType) -> ir.Value:
        spec = self.spec
        compute = in_dtypes[1] if spec.typing == "where" else in_dtypes[0]
        params = tuple(in_dtypes[:2]) if spec.typing == "pow" else self.params
        return spec.body(Scalar(b, compute), values, params)


def _fold_syms(spec: ScalarOp, ins, shape) -> list[Any] | None:
    """The op on known integer contents element by element, or None if not expressible."""
    n = shape[0] if shape else 1
    if not isinstance(n, int):
        return None
    vals = []
    for k in range(n):
        xs = [v.sym[k if len(v.sym) > 1 else 0] for v in ins]
        if spec.arity == 1:
            acc = spec.sym(xs[0])
        elif spec.arity == 3:
            acc = spec.sym(*xs)
        else:
            acc = xs[0]
            for x in xs[1:]:
                acc = spec.sym(acc, x)
                if acc is None:
                    return None
        if acc is None:
            return None
        vals.append(acc)
    return vals


@dataclass(frozen=True)
class Cast(CoreOp):
    to: DType

    @property
    def kernel_name(self) -> str:
        return f"cast_to_{self.to.name}"

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        sym = x.sym if self.to in INDEX and x.dtype in INDEX else None
        ctx.set_output(0, self.to, x.shape, sym=sym)

    def lower(self, lw, node) -> None:
        lw.run_kernel(build_elementwise, self, [node.inputs[0]], [node.outputs[0]])

    def scalar_fn(self, b, values, in_dtypes, out_dtype) -> ir.Value:
        return convert(b, values[0], in_dtypes[0], out_dtype)


__all__ = ["Elementwise", "Cast", "SCALAR", "ScalarOp"]
