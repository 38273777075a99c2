"""Elementwise ops: arithmetic, comparisons, logic, math functions, Where, Cast, Clip.

Shape: numpy broadcasting of the inputs (run-time checks where undecidable). Integer
arithmetic on shape values (``Shape(x)[0] * 2``) stays symbolic through ``sym``.
"""
from __future__ import annotations

from ....codegen import elementwise as E
from ....ir import dims as D
from ....ir.graph import BOOL, DTYPE_BY_CODE, FLOAT32, INT32, INT64, DType
from ..infer import NUMERIC, InferContext, check_dtype
from .shape import lower_view

ARITH = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min")
COMPARE = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
LOGIC = ("And", "Or")
UNARY_FLOAT = ("Sqrt", "Reciprocal", "Exp", "Log", "Sigmoid", "Tanh", "Erf", "LeakyRelu")
UNARY_NUMERIC = ("Neg", "Abs", "Relu")


def _check_dtypes(ctx: InferContext, allowed: tuple[DType, ...]) -> DType:
    """Every input has an allowed dtype, and all the same one."""
    ins = ctx.inputs()
    for v in ins:
        check_dtype(ctx, v, allowed)
    if len({v.dtype for v in ins}) > 1:
        ctx.fail("inputs have different dtypes: " + ", ".join(f"'{v.name}' {v.dtype}" for v in ins))
    return ins[0].dtype


def _sym_arith(op: str, a, b):
    """Elementwise arithmetic on known integer contents, or None if not expressible."""
    if op == "Add":
        return D.add(a, b)
    if op == "Sub":
        return D.add(a, D.mul(b, -1))
    if op == "Mul":
        return D.mul(a, b)
    if op == "Div" and isinstance(b, int) and b > 0 and D.bounds(a)[0] >= 0:
        return D.floordiv(a, b)  # truncation equals floor for non-negative operands
    if op in ("Max", "Min"):
        return D.maximum(a, b) if op == "Max" else D.minimum(a, b)
    return None


def infer_arith(ctx: InferContext) -> None:
    op = ctx.node.op
    if op == "Pow":
        base = ctx.input(0)
        check_dtype(ctx, base, NUMERIC)
        check_dtype(ctx, ctx.input(1), NUMERIC)
        dt = base.dtype
    else:
        if ctx.n_inputs < 1:
            ctx.fail("needs at least one input")
        dt = _check_dtypes(ctx, NUMERIC)
    ins = ctx.inputs()
    shape = ctx.broadcast(ins)
    sym = None
    if dt in (INT32, INT64) and op != "Pow" and all(v.sym is not None for v in ins) and len(shape) <= 1:
        n = shape[0] if shape else 1
        if isinstance(n, int):
            vals = []
            for k in range(n):
                acc = None
                for v in ins:
                    x = v.sym[k if len(v.sym) > 1 else 0]
                    acc = x if acc is None else _sym_arith(op, acc, x)
                    if acc is None:
                        break
                if acc is None:
                    break
                vals.append(acc)
            else:
                sym = vals
    ctx.set_output(0, dt, shape, sym=sym)


def infer_compare(ctx: InferContext) -> None:
    allowed = (FLOAT32, INT32, INT64, BOOL) if ctx.node.op == "Equal" else NUMERIC
    _check_dtypes(ctx, allowed)
    ctx.set_output(0, BOOL, ctx.broadcast(ctx.inputs()))


def infer_logic(ctx: InferContext) -> None:
    _check_dtypes(ctx, (BOOL,))
    ctx.set_output(0, BOOL, ctx.broadcast(ctx.inputs()))


def infer_not(ctx: InferContext) -> None:
    _check_dtypes(ctx, (BOOL,))
    ctx.set_output(0, BOOL, ctx.input(0).shape)


def infer_unary(ctx: InferContext) -> None:
    allowed = (FLOAT32,) if ctx.node.op in UNARY_FLOAT else NUMERIC
    x = ctx.input(0)
    check_dtype(ctx, x, allowed)
    sym = None
    if ctx.node.op == "Neg" and x.sym is not None:
        sym = [D.mul(s, -1) for s in x.sym]
    ctx.set_output(0, x.dtype, x.shape, sym=sym)


def infer_where(ctx: InferContext) -> None:
    c, a, b = ctx.input(0), ctx.input(1), ctx.input(2)
    check_dtype(ctx, c, (BOOL,))
    if a.dtype != b.dtype:
        ctx.fail(f"inputs '{a.name}' ({a.dtype}) and '{b.name}' ({b.dtype}) differ in dtype")
    ctx.set_output(0, a.dtype, ctx.broadcast([c, a, b]))


def infer_cast(ctx: InferContext) -> None:
    x = ctx.input(0)
    to = DTYPE_BY_CODE.get(int(ctx.attr("to")))
    if to is None:
        ctx.fail(f"cast to dtype code {ctx.attr('to')} is not supported (float32, int32, int64, bool)")
    sym = x.sym if to in (INT32, INT64) and x.dtype in (INT32, INT64) else None
    ctx.set_output(0, to, x.shape, sym=sym)


def infer_clip(ctx: InferContext) -> None:
    x = ctx.input(0)
    check_dtype(ctx, x, NUMERIC)
    for i in (1, 2):
        v = ctx.optional(i)
        if v is not None:
            if v.dtype != x.dtype:
                ctx.fail(f"bound '{v.name}' is {v.dtype}, input is {x.dtype}")
            if v.rank != 0 and D.product(v.shape) != 1:
                ctx.fail(f"bound '{v.name}' must be a scalar, has shape {D.fmt_shape(v.shape)}")
    ctx.set_output(0, x.dtype, x.shape)


def infer_identity(ctx: InferContext) -> None:
    x = ctx.input(0)
    ctx.set_output(0, x.dtype, x.shape, sym=x.sym, const=x.const)


# ----------------------------------------------------------------------------- lowering


def lower_with(fn_of):
    """A lowering that runs one broadcasting elementwise kernel over the present inputs."""
    def lower(lw, node) -> None:
        ins = [lw.value(i) for i in node.inputs if i]
        out = lw.value(node.outputs[0])
        key = ("ew", node.op, tuple((v.dtype.name, v.shape) for v in ins), out.shape,
               tuple(sorted((k, str(v)) for k, v in node.attrs.items())),
               tuple(bool(i) for i in node.inputs))
        fn = fn_of(node, ins, out)
        k = lw.kernel(key, lambda kb: E.build_elementwise(
            kb, [(v.dtype, v.shape) for v in ins], (out.dtype, out.shape), fn))
        regs = [lw.tensor(v.name) for v in ins]
        lw.call(k, regs + [lw.alloc(out.name)])
    return lower


def register(r) -> None:
    for op in ARITH:
        r.add(op, 13, infer_arith,
              lower_with(lambda node, ins, out: E.binary(node.op, ins[0].dtype)))
    for op in COMPARE:
        r.add(op, 13, infer_compare,
              lower_with(lambda node, ins, out: E.binary(node.op, ins[0].dtype)))
    for op in LOGIC:
        r.add(op, 13, infer_logic, lower_with(lambda node, ins, out: E.logical(node.op)))
    r.add("Not", 13, infer_not, lower_with(lambda node, ins, out: E.unary("Not", BOOL, {})))
    for op in UNARY_FLOAT + UNARY_NUMERIC:
        r.add(op, 13, infer_unary, lower_with(lambda node, ins, out: E.unary(node.op, ins[0].dtype, node.attrs)))
    r.add("Where", 13, infer_where, lower_with(lambda node, ins, out: E.where))
    r.add("Cast", 13, infer_cast, lower_with(lambda node, ins, out: E.cast(ins[0].dtype, out.dtype)))
    r.add("Clip", 13, infer_clip, lower_with(
        lambda node, ins, out: E.clip(ins[0].dtype, bool(node.inputs[1:2] and node.inputs[1]),
                                      bool(node.inputs[2:3] and node.inputs[2]))))
    r.add("Identity", 13, infer_identity, lower_view)
