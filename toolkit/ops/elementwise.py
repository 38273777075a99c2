"""Elementwise core ops: ``Elementwise(fn, params)`` over the table :data:`SCALAR`, and
``Cast(to)``.

An elementwise op is one line of :data:`SCALAR`: how many inputs, which dtypes, the result
dtype, the LLVM IR of one element (written with :class:`toolkit.codegen.scalar.Scalar`, so
it holds for every dtype it accepts) and, optionally, the same operation on dims, which
keeps integer shape arithmetic (``Shape(x)[0] * 2``) symbolic at compile time.

Shape: numpy broadcasting of the inputs, with run-time checks where it is undecidable.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from llvmlite import ir

from ..codegen import mathlib
from ..codegen import fused
from ..codegen.elementwise import build_elementwise, power
from ..codegen.kernel import intrinsic
from ..codegen.minifloat import E8M0_ROUND_MODES
from ..codegen.scalar import Scalar, convert, from_bool, to_bool
from ..ir import dims as D
from ..ir.dtypes import ALL, BOOL, FLOAT8E8M0, FLOAT16, FLOAT32, FLOAT64, FLOATS, INDEX, INT32, INT64, INTS, NUMERIC, SIGNED, STRING, UINT32, UINT64, DType
from .base import CoreOp, Identity, InferContext, Patch, replace_node

ScalarBody = Callable[[Scalar, list[ir.Value], tuple], ir.Value]

F16_F32 = (FLOAT16, FLOAT32)  # what kernels written only for float32 take (toolkit.ops.rnn)
SIGNED_NUMERIC = FLOATS + SIGNED
POW_BASES = FLOATS + (INT32, INT64)
PRELU_TYPES = FLOATS + (INT32, INT64, UINT32, UINT64)


@dataclass(frozen=True)
class ScalarOp:
    """One elementwise operation. ``arity`` None: one or more inputs (folded left).
    ``typing``: "same" (all inputs one dtype from ``dtypes``; the result that dtype, or bool
    with ``to_bool``), "where" (bool condition, two values of one dtype) or "pow" (base from
    ``dtypes``, exponent of any numeric dtype, the result the base's). ``to_first``: the
    other inputs broadcast to the first one's shape (PRelu's slope), not numpy-style."""

    arity: int | None
    dtypes: tuple[DType, ...]
    body: ScalarBody
    typing: str = "same"
    to_bool: bool = False
    sym: Callable[..., D.Dim | None] | None = None  # on dims, for integer shape values
    to_first: bool = False


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


# HardSwish(x) = x * HardSigmoid(x; alpha, beta) with these (alpha, beta)
HARD_SWISH_GATE = (1 / 6, 0.5)


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


def _mod(s: Scalar, v: list, p: tuple) -> ir.Value:
    """p = (fmod,): fmod 1 is C's fmod (the sign of x), fmod 0 Python's % (the sign of y).
    Integer x % 0 is 0 (numpy's answer; ONNX leaves it undefined)."""
    b, (x, y), c_style = s.b, v, p[0]
    if s.is_float:
        r = mathlib.fmod(b, x, y)
        if c_style:
            return r
        # A - floor(A / B) * B: a nonzero remainder of the other sign than y moves by y; a
        # zero one takes y's sign.
        moves = b.and_(b.fcmp_ordered("!=", r, s.const(0)), b.xor(s.lt(r, s.const(0)), s.lt(y, s.const(0))))
        zero = b.fcmp_ordered("==", r, s.const(0))
        r = b.select(zero, intrinsic(b, "llvm.copysign", s.const(0), y), r)
        return b.select(moves, b.fadd(r, y), r)
    zero = s.const(0)
    is0 = b.icmp_unsigned("==", y, zero)
    if not s.dtype.is_signed:
        return b.select(is0, zero, b.urem(x, b.select(is0, s.const(1), y)))
    # wasm traps on x % 0 and LLVM leaves MIN % -1 undefined: both divide by 1 instead
    # (x % -1 is 0 either way)
    safe = b.or_(is0, b.icmp_signed("==", y, s.const(-1)))
    r = b.srem(x, b.select(safe, s.const(1), y))
    r = b.select(safe, zero, r)
    if c_style:
        return r
    moves = b.and_(b.icmp_signed("!=", r, zero), b.xor(s.lt(r, zero), s.lt(y, zero)))
    return b.select(moves, b.add(r, y), r)


def _bitshift(s: Scalar, v: list, p: tuple) -> ir.Value:
    """p = (left,). Shifts by a negative amount or by the width or more give what the
    sign fill alone gives (BitShift-28): 0, or -1 for a right shift of a negative x."""
    b, (x, y) = s.b, v
    width = s.const(s.t.width)
    out = b.icmp_unsigned(">=", y, width)  # negative amounts too
    amount = b.select(out, s.const(0), y)
    if p[0]:
        return b.select(out, s.const(0), b.shl(x, amount))
    if s.dtype.is_signed:
        return b.select(out, b.ashr(x, s.const(s.t.width - 1)), b.ashr(x, amount))
    return b.select(out, s.const(0), b.lshr(x, amount))


def _sign(s: Scalar, v: list, p: tuple) -> ir.Value:
    x, b = v[0], s.b
    zero, one = s.const(0), s.const(1)
    if not s.dtype.is_signed and not s.is_float:
        return b.select(b.icmp_unsigned("!=", x, zero), one, zero)
    r = s.select(s.cmp(">", x, zero), one, s.select(s.lt(x, zero), s.const(-1), zero))
    # nan stays nan (numpy's sign); both zeros give +0
    return b.select(b.fcmp_unordered("!=", x, x), x, r) if s.is_float else r


def _isinf(s: Scalar, v: list, p: tuple) -> ir.Value:
    """p = (detect_positive, detect_negative)."""
    b, x = s.b, v[0]
    pos = b.fcmp_ordered("==", x, s.const(math.inf))
    neg = b.fcmp_ordered("==", x, s.const(-math.inf))
    hit = b.or_(pos, neg) if p[0] and p[1] else pos if p[0] else neg if p[1] else ir.Constant(ir.IntType(1), 0)
    return from_bool(b, hit)


def _expm1_scaled(s: Scalar, x: ir.Value, alpha: float) -> ir.Value:
    """alpha (e^x - 1), the negative branch of Elu, Selu and Celu."""
    return s.mul(s.const(alpha), mathlib.expm1(s.b, x))


def _elu(s: Scalar, v: list, p: tuple) -> ir.Value:
    x = v[0]
    return s.select(s.cmp(">", x, s.const(0)), x, _expm1_scaled(s, x, p[0]))


def _selu(s: Scalar, v: list, p: tuple) -> ir.Value:
    """p = (alpha, gamma)."""
    x = v[0]
    return s.mul(s.const(p[1]), s.select(s.cmp(">", x, s.const(0)), x, _expm1_scaled(s, x, p[0])))


def _celu(s: Scalar, v: list, p: tuple) -> ir.Value:
    """max(0, x) + min(0, alpha (e^(x / alpha) - 1))."""
    x, alpha = v[0], p[0]
    neg = _expm1_scaled(s, s.div(x, s.const(alpha)), alpha)
    return s.add(s.max(s.const(0), x), s.min(s.const(0), neg))


def _shrink(s: Scalar, v: list, p: tuple) -> ir.Value:
    """p = (lambd, bias). Integers compute in float64 and truncate back, like the reference
    (``x + bias`` with a float bias, then ``astype``)."""
    x, (lambd, bias) = v[0], p
    f = s if s.is_float else Scalar(s.b, FLOAT64)
    xf = x if s.is_float else convert(s.b, x, s.dtype, FLOAT64)
    r = f.select(f.lt(xf, f.const(-lambd)), f.add(xf, f.const(bias)),
                 f.select(f.cmp(">", xf, f.const(lambd)), f.sub(xf, f.const(bias)), f.const(0)))
    return r if s.is_float else convert(s.b, r, FLOAT64, s.dtype)


def _gelu(s: Scalar, v: list, p: tuple) -> ir.Value:
    """p = (tanh approximation,): 0.5 x (1 + erf(x / sqrt 2)), or with
    tanh(sqrt(2 / pi) (x + 0.044715 x^3)) in place of the erf."""
    x, b = v[0], s.b
    if p[0]:
        inner = s.mul(s.const(math.sqrt(2 / math.pi)), s.add(x, s.mul(s.const(0.044715), s.mul(x, s.mul(x, x)))))
        t = mathlib.tanh(b, inner)
    else:
        t = mathlib.erf(b, s.mul(x, s.const(math.sqrt(0.5))))
    return s.mul(s.mul(s.const(0.5), x), s.add(s.const(1), t))


def _fake_quantize(s: Scalar, v: list, p: tuple) -> ir.Value:
    """A QuantizeLinear read only by a DequantizeLinear, both per tensor (p = (scale, zero
    point, the integer dtype's least and greatest values, the DequantizeLinear's scale and
    zero point)): ``(clamp(rint(x / scale) + zero_point) - zp') * scale'``, in float32. Every
    integer on the way is exact there (or saturates), and NaN quantizes to the zero point as
    the saturating conversion makes it, so the result is the two kernels' bit for bit.
    Internal: made by :func:`toolkit.passes.fuse.fake_quantize`, so it fuses into the
    convolution or GEMM before it."""
    scale, zero, lo, hi, scale2, zero2 = p
    r = intrinsic(s.b, "llvm.rint", s.div(v[0], s.const(scale)))
    r = s.select(s.b.fcmp_unordered("uno", r, r), s.const(0), r)
    r = s.add(r, s.const(zero))
    r = s.select(s.lt(r, s.const(lo)), s.const(lo), r)
    r = s.select(s.cmp(">", r, s.const(hi)), s.const(hi), r)
    return s.mul(s.sub(r, s.const(zero2)), s.const(scale2))


def _prelu(s: Scalar, v: list, p: tuple) -> ir.Value:
    x, slope = v
    return s.select(s.lt(x, s.const(0)), s.mul(x, slope), x)


def _bitwise(fn) -> ScalarBody:
    return lambda s, v, p: fn(s.b, v[0], v[1])


# name -> operation. ONNX names map here in toolkit/frontend/onnx/ops/elementwise.py.
SCALAR: dict[str, ScalarOp] = {
    "add": ScalarOp(None, NUMERIC, lambda s, v, p: s.fold(s.add, v), sym=D.add),
    "sub": ScalarOp(2, NUMERIC, lambda s, v, p: s.sub(*v), sym=lambda a, b: D.add(a, D.mul(b, -1))),
    "mul": ScalarOp(2, NUMERIC, lambda s, v, p: s.mul(*v), sym=D.mul),
    "div": ScalarOp(2, NUMERIC, lambda s, v, p: s.div(*v), sym=_sym_div),
    "mod": ScalarOp(2, NUMERIC, _mod),
    "max": ScalarOp(None, NUMERIC, lambda s, v, p: s.fold(s.max, v), sym=D.maximum),
    "min": ScalarOp(None, NUMERIC, lambda s, v, p: s.fold(s.min, v), sym=D.minimum),
    "mean": ScalarOp(None, FLOATS, lambda s, v, p: s.div(s.fold(s.add, v), s.const(len(v)))),
    "pow": ScalarOp(2, POW_BASES, lambda s, v, p: power(s.b, v[0], v[1], *p), typing="pow"),
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
    "bitwise_and": ScalarOp(2, INTS, _bitwise(ir.IRBuilder.and_)),
    "bitwise_or": ScalarOp(2, INTS, _bitwise(ir.IRBuilder.or_)),
    "bitwise_xor": ScalarOp(2, INTS, _bitwise(ir.IRBuilder.xor)),
    "bitwise_not": ScalarOp(1, INTS, lambda s, v, p: s.b.xor(v[0], s.const(-1))),
    "bitshift": ScalarOp(2, INTS, _bitshift),
    "neg": ScalarOp(1, SIGNED_NUMERIC, lambda s, v, p: s.neg(v[0]), sym=lambda a: D.mul(a, -1)),
    "abs": ScalarOp(1, NUMERIC, lambda s, v, p: s.abs(v[0])),
    "sign": ScalarOp(1, NUMERIC, _sign),
    "ceil": ScalarOp(1, FLOATS, lambda s, v, p: intrinsic(s.b, "llvm.ceil", v[0])),
    "floor": ScalarOp(1, FLOATS, lambda s, v, p: intrinsic(s.b, "llvm.floor", v[0])),
    # rint rounds half to even in the default rounding mode; like ceil and floor, an
    # instruction on both targets
    "round": ScalarOp(1, FLOATS, lambda s, v, p: intrinsic(s.b, "llvm.rint", v[0])),
    "isnan": ScalarOp(1, FLOATS, lambda s, v, p: from_bool(s.b, s.b.fcmp_unordered("!=", v[0], v[0])), to_bool=True),
    "isinf": ScalarOp(1, FLOATS, _isinf, to_bool=True),
    "relu": ScalarOp(1, SIGNED_NUMERIC, lambda s, v, p: s.select(s.lt(v[0], s.const(0)), s.const(0), v[0])),
    "leaky_relu": ScalarOp(1, FLOATS, lambda s, v, p: s.select(s.lt(v[0], s.const(0)),
                                                                 s.mul(v[0], s.const(p[0])), v[0])),
    "prelu": ScalarOp(2, PRELU_TYPES, _prelu, to_first=True),
    "thresholded_relu": ScalarOp(1, FLOATS, lambda s, v, p: s.select(s.cmp(">", v[0], s.const(p[0])), v[0],
                                                                       s.const(0))),
    "elu": ScalarOp(1, FLOATS, _elu),
    "selu": ScalarOp(1, FLOATS, _selu),
    "celu": ScalarOp(1, FLOATS, _celu),
    "shrink": ScalarOp(1, NUMERIC, _shrink),
    "gelu": ScalarOp(1, FLOATS, _gelu),
    "mish": ScalarOp(1, FLOATS, lambda s, v, p: s.mul(v[0], mathlib.tanh(s.b, mathlib.softplus(s.b, v[0])))),
    "swish": ScalarOp(1, FLOATS, lambda s, v, p: s.mul(v[0], mathlib.sigmoid(s.b, s.mul(s.const(p[0]), v[0])))),
    "hard_sigmoid": ScalarOp(1, FLOATS, lambda s, v, p: _hard_sigmoid(s, v[0], *p)),
    "hard_swish": ScalarOp(1, FLOATS, lambda s, v, p: s.mul(v[0], _hard_sigmoid(s, v[0], *HARD_SWISH_GATE))),
    "fake_quantize": ScalarOp(1, (FLOAT32,), _fake_quantize),
    "softsign": ScalarOp(1, FLOATS, lambda s, v, p: s.div(v[0], s.add(s.const(1), s.abs(v[0])))),
    "softplus": ScalarOp(1, FLOATS, _math(mathlib.softplus)),
    "sqrt": ScalarOp(1, FLOATS, lambda s, v, p: intrinsic(s.b, "llvm.sqrt", v[0])),  # an instruction, never a libcall
    "reciprocal": ScalarOp(1, FLOATS, lambda s, v, p: s.div(s.const(1), v[0])),
    "exp": ScalarOp(1, FLOATS, _math(mathlib.exp)),
    "log": ScalarOp(1, FLOATS, _math(mathlib.log)),
    "tanh": ScalarOp(1, FLOATS, _math(mathlib.tanh)),
    "sigmoid": ScalarOp(1, FLOATS, _math(mathlib.sigmoid)),
    "erf": ScalarOp(1, FLOATS, _math(mathlib.erf)),
    **{name: ScalarOp(1, FLOATS, _math(getattr(mathlib, name)))
       for name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")},
    "where": ScalarOp(3, ALL + (STRING,), lambda s, v, p: s.select(to_bool(s.b, v[0]), v[1], v[2]), typing="where",
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
    post: tuple = ()  # fused one-input or constant-scalar ops after it (codegen.fused.PostOp)

    def fusable(self, graph, node) -> bool:
        """Whether ops can fuse after it: its result is float32."""
        spec = self.spec
        return spec.typing == "same" and not spec.to_bool and graph.values[node.outputs[0]].dtype == FLOAT32

    @property
    def spec(self) -> ScalarOp:
        return SCALAR[self.fn]

    @property
    def kernel_name(self) -> str:
        return self.fn

    def __str__(self) -> str:
        chain = "".join(f"+{p}" for p in self.post)
        return f"{self.fn}{self.params if self.params else ''}{chain}"

    def infer(self, ctx: InferContext) -> None:
        spec = self.spec
        ins = ctx.inputs()
        if not ins or (spec.arity is not None and len(ins) != spec.arity):
            ctx.fail(f"takes {spec.arity or 'at least one'} input(s), got {len(ins)}")
        out = self._result_dtype(ctx, ins)
        if spec.to_first:
            for v in ins[1:]:
                ctx.unidirectional(v, ins[0].shape, "input")
            shape = tuple(ins[0].shape)
        else:
            shape = ctx.broadcast(ins)
        sym = None
        if (spec.sym is not None and (out in INDEX or (out == BOOL and spec.to_bool))
                and all(v.sym is not None for v in ins) and len(shape) <= 1):
            sym = _fold_syms(spec, ins, shape)
        ctx.set_output(0, out, shape, sym=sym)

    def _result_dtype(self, ctx: InferContext, ins) -> DType:
        spec = self.spec
        if spec.typing == "pow":
            ctx.check_dtype(ins[0], spec.dtypes)
            ctx.check_dtype(ins[1], NUMERIC)
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

    def simplify(self, node, graph):
        """Pow of a float base by a constant 2 is ``x * x``: the square, exactly rounded, of
        exported LayerNorms and variances, without pow's logarithm and exponential (12.7x
        onnxruntime-web's time over 256 x 1024 in Node). By a constant 3 it is ``x * x * x``
        (two roundings, as onnxruntime computes it): GPT-2's GELU cubes its input, and the
        pow took 9% of a small decoder's time natively."""
        if self.fn != "pow" or self.post:
            return None
        x, y = graph.values[node.inputs[0]], graph.values[node.inputs[1]]
        if x.dtype not in FLOATS or y.const is None or y.const.size != 1 or y.rank > x.rank:
            return None
        k = float(y.const.reshape(-1)[0])
        if k == 2.0:
            return replace_node(graph, node, Elementwise("mul"), [x.name, x.name])
        if k == 3.0:
            patch = Patch(graph, node)
            square = patch.add(Elementwise("mul"), [x.name, x.name], graph.fresh_name(f"{node.outputs[0]}/square"))
            patch.add(Elementwise("mul"), [square, x.name], node.outputs[0])
            return patch.nodes
        return None

    def scalar_fn(self, b: ir.IRBuilder, values: list[ir.Value], in_dtypes: Sequence[DType],
                  out_dtype: DType) -> ir.Value:
        spec = self.spec
        compute = in_dtypes[1] if spec.typing == "where" else in_dtypes[0]
        params = tuple(in_dtypes[:2]) if spec.typing == "pow" else self.params
        return fused.apply(b, self.post, spec.body(Scalar(b, compute), values, params))


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
    """``saturate`` (Cast-19): a value out of a float8 target's range becomes its largest
    finite value (True) or infinity/NaN (False); other targets ignore it. ``round_mode``
    (Cast-24: up, down or nearest) is how a float8 e8m0 target rounds; others ignore it."""

    to: DType
    saturate: bool = True
    round_mode: str = "up"
    # the float input holds integers that ``to`` holds exactly (the compiler proved it): a
    # Cast of the output back to the input's dtype reads the input itself (simplify)
    integral: bool = False

    def simplify(self, node, graph) -> list | None:
        """A Cast to float of an integral Cast from that float: the float itself, a view."""
        x = graph.values[node.inputs[0]]
        src = x.producer
        if (src is None or not isinstance(src.op, Cast) or not src.op.integral
                or graph.values[src.inputs[0]].dtype != self.to):
            return None
        return replace_node(graph, node, Identity(), [src.inputs[0]])

    @property
    def kernel_name(self) -> str:
        return (f"cast_to_{self.to.name}" + ("" if self.saturate or self.to.itemsize != 1 else "_nosat")
                + ("" if self.round_mode == "up" else f"_{self.round_mode}"))

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        sym = x.sym if self.to in INDEX and x.dtype in INDEX else None
        ctx.set_output(0, self.to, x.shape, sym=sym)

    def lower(self, lw, node) -> None:
        lw.run_kernel(build_elementwise, self, [node.inputs[0]], [node.outputs[0]])

    def scalar_fn(self, b, values, in_dtypes, out_dtype) -> ir.Value:
        # e8m0 is rounded from a float32, as onnx's to_float8e8m0 does: a float64 rounds to
        # nearest float32 first (not to odd, as for the one rounding of the other formats)
        return convert(b, values[0], in_dtypes[0], FLOAT32 if out_dtype == FLOAT8E8M0 else out_dtype)


__all__ = ["Elementwise", "Cast", "E8M0_ROUND_MODES", "SCALAR", "ScalarOp"]
