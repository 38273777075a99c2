"""Shape ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand, ConstantOfShape.

Integer tensors that hold shapes carry their elements as dims (``Value.sym``), so a chain
like ``Reshape(x, Concat([1], Shape(x)[0:1], [-1]))`` gets a symbolic output shape at
compile time and its shape arithmetic runs no kernel. A target shape known only at run
time gives fresh data-dependent dims, resolved by the VM. Reshape, Flatten, Squeeze and
Unsqueeze are views; Expand and ConstantOfShape write new buffers.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ....codegen import elementwise as E
from ....codegen import movement as M
from ....ir import dims as D
from ....ir.dims import Dim
from ....ir.graph import INT32, INT64, SYM_LIMIT, DType, Value, dtype_of_numpy
from ..infer import InferContext

# ----------------------------------------------------------------------------- shared helpers


def known_elements(dtype: DType, values: Sequence[Value],
                   positions: Callable[..., np.ndarray]) -> list[Dim] | None:
    """The elements of an integer output computed from known inputs by moving elements.

    ``positions`` gets, per input, an int array of the input's shape holding the indices of
    its elements in one pool (all inputs' elements in order), and returns the pool indices
    of the output's elements: the op itself applied to positions (``np.take``, slicing...).
    None when the dtype is not integer, an input is unknown, or a tensor is large
    (all-constant nodes are folded by the importer anyway)."""
    if dtype not in (INT32, INT64):
        return None
    pool: list[Dim] = []
    arrays = []
    for v in values:
        if not v.is_static or D.product(v.shape) > SYM_LIMIT:
            return None
        vals = v.int_contents()
        if vals is None:
            return None
        arrays.append(np.arange(len(pool), len(pool) + len(vals)).reshape([int(d) for d in v.shape]))
        pool.extend(vals)
    out = np.asarray(positions(*arrays))
    if out.size > SYM_LIMIT:
        return None
    return [pool[i] for i in out.reshape(-1)]


def shape_length(ctx: InferContext, v: Value, what: str) -> int:
    """The static length of a 1-D integer tensor holding a shape (or starts, axes...)."""
    if v.dtype not in (INT32, INT64):
        ctx.fail(f"{what} '{v.name}' has dtype {v.dtype}; it must be int64 or int32")
    if v.rank != 1:
        ctx.fail(f"{what} '{v.name}' must be 1-D, has shape {D.fmt_shape(v.shape)}")
    if not isinstance(v.shape[0], int):
        ctx.fail(f"{what} '{v.name}' has {v.shape[0]} elements; its length must be static")
    return v.shape[0]


def lower_view(lw, node) -> None:
    lw.view(node.outputs[0], node.inputs[0])


def define_from_values(lw, dims: Sequence[Dim], slots: Sequence[int]) -> None:
    """Bind the data-dependent ``dims`` of an output to run-time values, checking that
    each is a valid (non-negative) dim."""
    zero = lw.const_slot(0)
    for axis, (d, s) in enumerate(zip(dims, slots)):
        if not lw.is_defined(d):
            lw.emit("CHECK_LE", zero, s, lw.string(f"{lw.context()}: output dim {axis} is {{1}}"))
            lw.define(d, s)


# ----------------------------------------------------------------------------- Shape, Size


def infer_shape_13(ctx: InferContext) -> None:
    x = ctx.input(0)
    ctx.set_output(0, INT64, (x.rank,), sym=x.shape)


def infer_shape_15(ctx: InferContext) -> None:
    """Shape-15 adds start/end, which clamp exactly like Python slicing."""
    x = ctx.input(0)
    dims = x.shape[int(ctx.attr("start", 0)):ctx.attr("end")]
    ctx.set_output(0, INT64, (len(dims),), sym=dims)


def infer_size(ctx: InferContext) -> None:
    ctx.set_output(0, INT64, (), sym=(ctx.input(0).numel,))


# ----------------------------------------------------------------------------- Reshape


def _resolve_target(ctx: InferContext, x: Value, target: Sequence[Dim], allowzero: bool) -> list[Dim]:
    """The output dims of a Reshape to a target known at compile time.

    A symbolic target element is taken as its value. Were it 0 at run time, ONNX would copy
    the input dim instead, but the element counts still have to match, so the two can only
    differ for an empty tensor."""
    out: list[Dim] = []
    infer_at = None
    for i, v in enumerate(target):
        if isinstance(v, int) and v == 0 and not allowzero:
            if i >= x.rank:
                ctx.fail(f"target dim {i} is 0 (copy the input dim), but the input has rank {x.rank}")
            v = x.shape[i]
        elif isinstance(v, int) and v == -1:
            if infer_at is not None:
                ctx.fail(f"target {D.fmt_shape(target)} has more than one -1")
            infer_at = i
        elif isinstance(v, int) and v < 0:
            ctx.fail(f"target {D.fmt_shape(target)} has the negative dim {v}")
        out.append(v)
    what = f"reshape of '{x.name}' {D.fmt_shape(x.shape)} to {D.fmt_shape(out)}"
    if infer_at is None:
        ctx.require_eq(D.product(out), x.numel, f"{what}: element count")
        return out
    rest = D.product(out[:infer_at] + out[infer_at + 1:])
    if rest == 0:
        ctx.fail(f"{what}: the -1 cannot be inferred next to a 0 dim")
    if isinstance(rest, int) and isinstance(x.numel, int) and x.numel % rest:
        ctx.fail(f"{what}: {x.numel} elements are not a multiple of {rest}")
    # not provably exact: the VM checks divisibility (DIV) when it evaluates the dim
    out[infer_at] = D.div_exact(x.numel, rest)
    return out


def _infer_reshape(ctx: InferContext, allowzero: bool) -> None:
    x, target = ctx.input(0), ctx.input(1)
    n = shape_length(ctx, target, "shape")
    vals = target.int_contents()
    if vals is None:
        ctx.set_output(0, x.dtype, [ctx.fresh("reshape") for _ in range(n)])
    else:
        out = _resolve_target(ctx, x, vals, allowzero)
        # known elements need a static shape (a symbolic target dim must then equal a constant)
        ctx.set_output(0, x.dtype, out, sym=x.sym if all(isinstance(d, int) for d in out) else None)


def infer_reshape_13(ctx: InferContext) -> None:
    _infer_reshape(ctx, False)


def infer_reshape_14(ctx: InferContext) -> None:
    """Reshape-14 adds allowzero: a 0 in the target is a 0 dim, not a copy."""
    _infer_reshape(ctx, bool(ctx.attr("allowzero", 0)))


def _resolve_allowzero(lw, x: Value, slots: list[int], msg: str) -> list[int]:
    """RESHAPE's work for allowzero=1 (the builtin always copies input dims for 0s): slots
    of the target with its -1 inferred; fails unless the element counts match."""
    one, two, minus_one = lw.const_slot(1), lw.const_slot(2), lw.const_slot(-1)
    total = lw.slot(x.numel)
    marks, known = [], one
    for s in slots:
        m = lw.arith("EQ", s, minus_one)
        marks.append(m)
        known = lw.arith("MUL", known, lw.arith("ADD", s, lw.arith("MUL", m, two)))  # -1 counts as 1
    # the inferred dim is -1 + (inferred + 1)
    inferred_1 = lw.arith("ADD", lw.arith("FLOORDIV", total, lw.arith("MAX", known, one)), one)
    out, product, count = [], one, lw.const_slot(0)
    for s, m in zip(slots, marks):
        d = lw.arith("ADD", s, lw.arith("MUL", m, inferred_1))
        lw.emit("CHECK_LE", lw.const_slot(0), d, lw.string(f"{msg}: the target has the negative dim {{1}}"))
        out.append(d)
        product = lw.arith("MUL", product, d)
        count = lw.arith("ADD", count, m)
    lw.emit("CHECK_LE", count, one, lw.string(f"{msg}: the target has {{0}} dims of -1"))
    lw.emit("CHECK_EQ", total, product, lw.string(
        f"{msg}: cannot reshape {{0}} elements into a shape of {{1}}"))
    return out


def lower_reshape(lw, node) -> None:
    x, target, out = lw.value(node.inputs[0]), lw.value(node.inputs[1]), lw.value(node.outputs[0])
    if not target.known:
        slots = lw.values_of(target.name)
        msg = f"{lw.context()}: reshape of '{x.name}' {x.describe()} to the shape in '{target.name}'"
        if lw.graph.opset >= 14 and node.attrs.get("allowzero", 0):
            slots = _resolve_allowzero(lw, x, slots, msg)
        else:
            lw.emit("RESHAPE", lw.string(msg), [lw.slot(d) for d in x.shape], slots)
        for d, s in zip(out.shape, slots):
            lw.define(d, s)
    lw.view(out.name, x.name)


# ----------------------------------------------------------------------------- Flatten, Squeeze, Unsqueeze


def infer_flatten(ctx: InferContext) -> None:
    x = ctx.input(0)
    axis = int(ctx.attr("axis", 1))
    if not -x.rank <= axis <= x.rank:
        ctx.fail(f"axis {axis} is out of range for rank {x.rank}")
    if axis < 0:
        axis += x.rank
    ctx.set_output(0, x.dtype, (D.product(x.shape[:axis]), D.product(x.shape[axis:])), sym=x.sym)


def infer_squeeze(ctx: InferContext) -> None:
    x = ctx.input(0)
    axes = ctx.const_ints(ctx.optional(1), "axes")
    if axes is None:
        axes = []
        for a, d in enumerate(x.shape):
            lo, hi = D.bounds(d)
            if d == 1:
                axes.append(a)
            elif not isinstance(d, int) and lo <= 1 and (hi is None or hi >= 1):
                ctx.fail(f"without axes, dim {a} ({d}) of '{x.name}' is squeezed only if it is 1, "
                         f"which is unknown at compile time; give the axes input")
    else:
        axes = ctx.axes(axes, x.rank)
        for a in axes:
            d = x.shape[a]
            if isinstance(d, int) and d != 1:
                ctx.fail(f"cannot squeeze dim {a} of '{x.name}' {D.fmt_shape(x.shape)}: it is {d}, not 1")
            ctx.require_eq(d, 1, f"squeezed dim {a} of '{x.name}'")
    ctx.set_output(0, x.dtype, [d for a, d in enumerate(x.shape) if a not in axes], sym=x.sym)


def infer_unsqueeze(ctx: InferContext) -> None:
    x = ctx.input(0)
    raw = ctx.const_ints(ctx.input(1), "axes")
    rank = x.rank + len(raw)
    axes = ctx.axes(raw, rank)
    rest = iter(x.shape)
    ctx.set_output(0, x.dtype, [1 if a in axes else next(rest) for a in range(rank)], sym=x.sym)


# ----------------------------------------------------------------------------- Expand


def infer_expand(ctx: InferContext) -> None:
    x, shape = ctx.input(0), ctx.input(1)
    n = shape_length(ctx, shape, "shape")
    vals = shape.int_contents()
    if vals is None:
        rank = max(x.rank, n)
        padded = (1,) * (rank - x.rank) + tuple(x.shape)
        # a dim that cannot be 1 stays; the others come from the run-time target
        out = [d if D.bounds(d)[0] >= 2 else ctx.fresh("expand") for d in padded]
        ctx.set_output(0, x.dtype, out)
        return
    if any(isinstance(v, int) and v < 0 for v in vals):
        ctx.fail(f"target shape {D.fmt_shape(vals)} has a negative dim")
    out = ctx.broadcast([x, Value(shape.name, shape.dtype, tuple(vals))])
    sym = None
    if all(isinstance(d, int) for d in out):
        sym = known_elements(x.dtype, [x], lambda a: np.broadcast_to(a, [int(d) for d in out]))
    ctx.set_output(0, x.dtype, out, sym=sym)


def lower_expand(lw, node) -> None:
    x, shape, out = (lw.value(n) for n in (node.inputs[0], node.inputs[1], node.outputs[0]))
    if not shape.known:
        # both sides align on their last dims
        target = [lw.const_slot(1)] * (out.rank - shape.shape[0]) + lw.values_of(shape.name)
        padded = (1,) * (out.rank - x.rank) + tuple(x.shape)
        dims = []
        for axis, (d, t) in enumerate(zip(padded, target)):
            s = lw.new_slot()
            lw.emit("BCAST", s, lw.slot(d), t, lw.string(
                f"{lw.context()}: dim {axis} of '{x.name}' ({d} = {{0}}) does not broadcast to "
                f"the target's {{1}}"))
            dims.append(s)
        define_from_values(lw, out.shape, dims)
    lw.run_kernel(("expand", x.dtype.name, x.shape, out.shape), lambda kb: E.build_elementwise(
        kb, [(x.dtype, x.shape)], (out.dtype, out.shape), E.identity), [x.name], [out.name])


# ----------------------------------------------------------------------------- ConstantOfShape


def _fill_value(attrs: dict) -> np.ndarray:
    value = attrs.get("value")
    return np.zeros((), np.float32) if value is None else np.asarray(value).reshape(-1)


def infer_constant_of_shape(ctx: InferContext) -> None:
    value = _fill_value(ctx.attrs)
    if value.size != 1:
        ctx.fail(f"value must hold one element, has {value.size}")
    try:
        dt = dtype_of_numpy(value.dtype)
    except KeyError:
        ctx.fail(f"value has dtype {value.dtype}, which is not supported (float32, int32, int64, bool)")
    shape = ctx.input(0)
    n = shape_length(ctx, shape, "shape")
    vals = shape.int_contents()
    if vals is None:
        ctx.set_output(0, dt, [ctx.fresh("constantofshape") for _ in range(n)])
        return
    if any(isinstance(v, int) and v < 0 for v in vals):
        ctx.fail(f"shape {D.fmt_shape(vals)} has a negative dim")
    const = None
    if all(isinstance(v, int) for v in vals) and int(np.prod(vals)) <= SYM_LIMIT:
        const = np.full([int(v) for v in vals], value.reshape(()), dt.np)
    ctx.set_output(0, dt, vals, const=const)


def lower_constant_of_shape(lw, node) -> None:
    shape, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
    if not shape.known:
        define_from_values(lw, out.shape, lw.values_of(shape.name))
    value = _fill_value(node.attrs).item()
    lw.run_kernel(("fill", out.dtype.name, out.shape, value),
                  lambda kb: M.build_fill(kb, out.dtype, out.shape, value), [], [out.name])


def register(r) -> None:
    # Shape and Size always have known outputs (sym), so they never lower
    r.add("Shape", 13, infer_shape_13, None)
    r.add("Shape", 15, infer_shape_15, None)
    r.add("Size", 13, infer_size, None)
    r.add("Reshape", 13, infer_reshape_13, lower_reshape)
    r.add("Reshape", 14, infer_reshape_14, lower_reshape)
    r.add("Flatten", 13, infer_flatten, lower_view)
    r.add("Squeeze", 13, infer_squeeze, lower_view)
    r.add("Unsqueeze", 13, infer_unsqueeze, lower_view)
    r.add("Expand", 13, infer_expand, lower_expand)
    r.add("ConstantOfShape", 13, infer_constant_of_shape, lower_constant_of_shape)
