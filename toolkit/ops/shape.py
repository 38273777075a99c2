"""Shape core ops: views (Identity, Reshape, Flatten, Squeeze, Unsqueeze, ViewAs), the shape
readers (ShapeOf, Size), Expand and Fill; axes given at run time (``runtime_axes``,
``PerAxis``).

Integer tensors that hold shapes carry their elements as dims (``Value.sym``), so a chain
like ``Reshape(x, Concat([1], Shape(x)[0:1], [-1]))`` gets a symbolic output shape at
compile time and its shape arithmetic runs no kernel. A target shape known only at run
time gives fresh data-dependent dims, resolved by the VM. Views share their input's buffer
(``aliases_input``); Expand and Fill write new buffers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..codegen import movement as M
from ..codegen import reduce as R
from ..codegen.elementwise import build_elementwise
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import INT64, DType
from ..ir.graph import SYM_LIMIT, Value
from .base import CoreOp, InferContext, View, known_elements
from .base import Identity as Identity  # a view too, defined in base so that any family's simplify can make one
from .elementwise import Elementwise

# ----------------------------------------------------------------------------- views


@dataclass(frozen=True)
class ViewAs(View):
    """A view with a given shape of the same element count (what simplifications make of
    a Transpose that moves only dims of size 1, or of a reshape the compiler proved)."""

    shape: tuple

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.require_eq(D.product(self.shape), x.numel, f"view of '{x.name}' as {D.fmt_shape(self.shape)}")
        ctx.set_output(0, x.dtype, self.shape, sym=x.sym if all(isinstance(d, int) for d in self.shape) else None)


@dataclass(frozen=True)
class Flatten(View):
    axis: int

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        if not -x.rank <= self.axis <= x.rank:
            ctx.fail(f"axis {self.axis} is out of range for rank {x.rank}")
        axis = self.axis + x.rank if self.axis < 0 else self.axis
        ctx.set_output(0, x.dtype, (D.product(x.shape[:axis]), D.product(x.shape[axis:])), sym=x.sym)


@dataclass(frozen=True)
class Squeeze(View):
    """Inputs: x, [axes, known only at run time]. ``axes`` None (and no input): every dim
    that is 1."""

    axes: tuple | None

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        if ctx.has(1):
            k = ctx.shape_length(ctx.input(1), "axes")
            if k > x.rank:
                ctx.fail(f"axes '{ctx.input(1).name}' has {k} entries; '{x.name}' has only {x.rank} axes")
            ctx.set_output(0, x.dtype, [ctx.fresh("squeeze") for _ in range(x.rank - k)])
            return
        if self.axes is None:
            axes = []
            for a, d in enumerate(x.shape):
                lo, hi = D.bounds(d)
                if d == 1:
                    axes.append(a)
                elif not isinstance(d, int) and lo <= 1 and (hi is None or hi >= 1):
                    ctx.fail(f"without axes, dim {a} ({d}) of '{x.name}' is squeezed only if it is 1, "
                             f"which is unknown at compile time; give the axes")
        else:
            axes = normalize_axes(ctx, self.axes, x.rank)
            for a in axes:
                d = x.shape[a]
                if isinstance(d, int) and d != 1:
                    ctx.fail(f"cannot squeeze dim {a} of '{x.name}' {D.fmt_shape(x.shape)}: it is {d}, not 1")
                ctx.require_eq(d, 1, f"squeezed dim {a} of '{x.name}'")
        ctx.set_output(0, x.dtype, [d for a, d in enumerate(x.shape) if a not in axes], sym=x.sym)

    def lower(self, lw, node) -> None:
        if len(node.inputs) > 1 and node.inputs[1]:
            x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
            dims = [lw.slot(d) for d in x.shape]
            plan = R.AxesPlan(x.rank, dims="remove", n_in=x.rank, n_out=out.rank)
            mask, kept = runtime_axes(lw, node.inputs[1], plan, dims_in=dims)
            one = lw.const_slot(1)
            for a, (m, d) in enumerate(zip(mask, dims)):
                # d if squeezed, else 1
                v = lw.arith("ADD", lw.arith("MUL", m, lw.arith("SUB", d, one)), one)
                lw.check_eq(v, one, f"{lw.context()}: cannot squeeze dim {a} of '{x.name}': it is {{0}}, not 1")
            lw.define_dims(out.shape, kept)
        lw.view(node.outputs[0], node.inputs[0])


@dataclass(frozen=True)
class Unsqueeze(View):
    """Inputs: x, [axes, known only at run time, with a static number of entries]."""

    axes: tuple | None

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        if ctx.has(1):
            rank = x.rank + ctx.shape_length(ctx.input(1), "axes")
            ctx.set_output(0, x.dtype, [ctx.fresh("unsqueeze") for _ in range(rank)])
            return
        if self.axes is None:
            ctx.fail("axes are required")
        rank = x.rank + len(self.axes)
        axes = normalize_axes(ctx, self.axes, rank)
        rest = iter(x.shape)
        ctx.set_output(0, x.dtype, [1 if a in axes else next(rest) for a in range(rank)], sym=x.sym)

    def lower(self, lw, node) -> None:
        if len(node.inputs) > 1 and node.inputs[1]:
            x, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
            plan = R.AxesPlan(out.rank, dims="insert", n_in=x.rank, n_out=out.rank)
            _, dims = runtime_axes(lw, node.inputs[1], plan, dims_in=[lw.slot(d) for d in x.shape])
            lw.define_dims(out.shape, dims)
        lw.view(node.outputs[0], node.inputs[0])


def normalize_axes(ctx: InferContext, axes: Sequence[int], rank: int) -> list[int]:
    """Normalized, distinct axes (a compile error names any out of range or repeated)."""
    out = [ctx.axis(int(a), rank, "axes entry") for a in axes]
    if len(set(out)) != len(out):
        ctx.fail(f"axes {list(axes)} repeat an axis")
    return out


def runtime_axes(lw, axes: str, plan: R.AxesPlan, *, values: Sequence[str] = (), outputs: Sequence[str] = (),
                 dims_in: Sequence = ()) -> tuple[list, list]:
    """Run the axes kernel (``plan``) on the tensor ``axes``, known only at run time: slots of
    its mask (one per axis) and of the output dims the plan asks for; ``values`` are mapped
    into ``outputs`` per axis. An entry out of range or naming an axis twice fails the run,
    naming the node and the input."""
    mask = [lw.result_slot(f"{axes}.mask{a}") for a in range(plan.rank)]
    repeats = lw.result_slot(f"{axes}.repeats")
    dims = [lw.result_slot() for _ in range(plan.n_out)]
    tensors = [lw.tensor(axes)] + [lw.tensor(v) for v in values] + [lw.alloc(o) for o in outputs]
    lw.call(R.build_axes, plan, tensors, mask + [repeats] + list(dims_in) + dims,
            error=f"axes '{axes}' entry {{0}} is {{1}}, out of range for rank {plan.rank}", outputs=len(outputs))
    lw.check_eq(repeats, lw.const_slot(0), f"{lw.context()}: axes '{axes}' name an axis more than once")
    return mask, dims


@dataclass(frozen=True)
class PerAxis(CoreOp):
    """Inputs: axes (known only at run time), then value tensors of ``c`` blocks of one
    entry per axes entry; outputs: per value tensor, int64 ``c`` blocks of one entry per
    axis of a tensor of rank ``rank``: the entry of the axes entry naming that axis, or the
    default. What Slice's starts, ends and steps and Pad's pads become for every axis when
    their axes are known only at run time."""

    rank: int
    values: tuple[tuple[int, int], ...]  # per value tensor: (c, default)

    def infer(self, ctx: InferContext) -> None:
        axes = ctx.input(0)
        k = ctx.shape_length(axes, "axes")
        if k > self.rank:
            ctx.fail(f"axes '{axes.name}' has {k} entries for {self.rank} axes")
        for i, (c, _) in enumerate(self.values):
            v = ctx.input(1 + i)
            if ctx.shape_length(v, "values") != c * k:
                ctx.fail(f"'{v.name}' has {v.shape[0]} entries; {k} axes take {c * k}")
            ctx.set_output(i, INT64, (c * self.rank,))

    def lower(self, lw, node) -> None:
        runtime_axes(lw, node.inputs[0], R.AxesPlan(self.rank, values=self.values),
                     values=node.inputs[1:], outputs=node.outputs)


@dataclass(frozen=True)
class Reshape(View):
    """Inputs: data, the target shape (known at compile time or not). ``allowzero``: a 0 in
    the target is a 0 dim, not a copy of the input's dim."""

    allowzero: bool = False

    def infer(self, ctx: InferContext) -> None:
        x, target = ctx.input(0), ctx.input(1)
        n = ctx.shape_length(target, "shape")
        vals = target.int_contents()
        if vals is not None and any(not isinstance(v, int) and D.bounds(v)[0] < 0 for v in vals):
            # an entry computed from dims (-n) may be -1 (infer) at run time: resolved there
            ctx.info = "run time"
            vals = None
        if vals is None:
            ctx.set_output(0, x.dtype, [ctx.fresh("reshape") for _ in range(n)])
            return
        out = self._resolve(ctx, x, vals)
        # known elements need a static shape (a symbolic target dim must then equal a constant)
        ctx.set_output(0, x.dtype, out, sym=x.sym if all(isinstance(d, int) for d in out) else None)

    def _resolve(self, ctx: InferContext, x: Value, target: Sequence[Dim]) -> list[Dim]:
        """The output dims of a reshape to a target known at compile time.

        Without allowzero, a 0 in the target copies the input's dim: a symbolic target element
        that may be 0 becomes ``(v or input dim)``, simplified back to ``v`` when it cannot be
        0 or equals that dim (``Reshape(x, Concat(Shape(x)[0:1], [-1]))``)."""
        out: list[Dim] = []
        infer_at = None
        for i, v in enumerate(target):
            if not isinstance(v, int) and not self.allowzero and D.bounds(v)[0] <= 0:
                if i < x.rank:
                    v = D.ifzero(v, x.shape[i])
                else:
                    ctx.require_le(1, v, f"target dim {i} (0 would copy input dim {i}, but the input has "
                                         f"rank {x.rank})")
            if isinstance(v, int) and v == 0 and not self.allowzero:
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
        if not isinstance(rest, int) and D.bounds(rest)[0] <= 0:
            # as onnx.reference and onnxruntime: no -1 next to dims whose product is 0, even
            # where the division would cancel (n*m / m)
            ctx.require_le(1, rest, f"{what}: the -1 cannot be inferred when the other dims' product is 0")
        # not provably exact: the VM checks divisibility (DIV) when it evaluates the dim
        out[infer_at] = D.div_exact(x.numel, rest)
        return out

    def lower(self, lw, node) -> None:
        x, target, out = lw.value(node.inputs[0]), lw.value(node.inputs[1]), lw.value(node.outputs[0])
        if not target.known or node.info == "run time":
            slots = lw.values_of(target.name)
            msg = f"{lw.context()}: reshape of '{x.name}' {x.describe()} to the shape in '{target.name}'"
            if self.allowzero:
                slots = _resolve_allowzero(lw, x, slots, msg)
            else:
                slots = lw.reshape_target([lw.slot(d) for d in x.shape], slots, msg)
            for d, s in zip(out.shape, slots):
                lw.define(d, s)
        elif lw.graph.check_facts:
            # the target as computed at run time, resolved by the builtin, gives the dims the
            # compiler resolved (its 0s and -1)
            got = lw.loaded_values(lw.tensor(target.name), len(out.shape), f"'{target.name}'")
            msg = f"{lw.context()}: fact check failed: reshape of '{x.name}' {x.describe()} to '{target.name}'"
            dims = [lw.slot(d) for d in x.shape]
            got = _resolve_allowzero(lw, x, got, msg) if self.allowzero else lw.reshape_target(dims, got, msg)
            for i, (d, s) in enumerate(zip(out.shape, got)):
                lw.check_eq(s, lw.slot(d), f"{msg}: dim {i} is {{0}} at run time; the compiler resolved {d} = {{1}}")
        lw.view(out.name, x.name)


def _resolve_allowzero(lw, x: Value, slots: list, msg: str) -> list:
    """The RESHAPE builtin's work for allowzero (the builtin always copies input dims for
    0s): slots of the target with its -1 inferred; fails unless the element counts match."""
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
        lw.check_le(lw.const_slot(0), d, f"{msg}: the target has the negative dim {{1}}")
        out.append(d)
        product = lw.arith("MUL", product, d)
        count = lw.arith("ADD", count, m)
    lw.check_le(count, one, f"{msg}: the target has {{0}} dims of -1")
    lw.check_eq(total, product, f"{msg}: cannot reshape {{0}} elements into a shape of {{1}}")
    return out


# ----------------------------------------------------------------------------- shape readers


@dataclass(frozen=True)
class ShapeOf(CoreOp):
    """The shape (dims ``start:end``, clamped like Python slicing) as int64: always known at
    compile time as dims, so it never lowers."""

    start: int = 0
    end: int | None = None

    def infer(self, ctx: InferContext) -> None:
        dims = ctx.input(0).shape[self.start:self.end]
        ctx.set_output(0, INT64, (len(dims),), sym=dims)


@dataclass(frozen=True)
class Size(CoreOp):
    def infer(self, ctx: InferContext) -> None:
        ctx.set_output(0, INT64, (), sym=(ctx.input(0).numel,))


# ----------------------------------------------------------------------------- Expand, Fill


@dataclass(frozen=True)
class Expand(CoreOp):
    """Inputs: data, the target shape (known or not), broadcast numpy-style."""

    def infer(self, ctx: InferContext) -> None:
        x, shape = ctx.input(0), ctx.input(1)
        n = ctx.shape_length(shape, "shape")
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

    def lower(self, lw, node) -> None:
        x, shape, out = (lw.value(n) for n in (node.inputs[0], node.inputs[1], node.outputs[0]))
        if not shape.known:
            # both sides align on their last dims
            target = [lw.const_slot(1)] * (out.rank - shape.shape[0]) + lw.values_of(shape.name)
            padded = (1,) * (out.rank - x.rank) + tuple(x.shape)
            dims = [lw.bcast(lw.slot(d), t, f"{lw.context()}: dim {axis} of '{x.name}' ({d} = {{0}}) does not "
                                             f"broadcast to the target's {{1}}")
                    for axis, (d, t) in enumerate(zip(padded, target))]
            lw.define_dims(out.shape, dims)
        lw.run_kernel(build_elementwise, Elementwise("identity"), [x.name], [out.name])


@dataclass(frozen=True)
class Fill(CoreOp):
    """A tensor of the shape in input 0 (known or not) filled with ``value`` (ONNX's
    ConstantOfShape)."""

    value: float | int | bool
    dtype: DType

    def infer(self, ctx: InferContext) -> None:
        shape = ctx.input(0)
        n = ctx.shape_length(shape, "shape")
        vals = shape.int_contents()
        if vals is None:
            ctx.set_output(0, self.dtype, [ctx.fresh("constantofshape") for _ in range(n)])
            return
        if any(isinstance(v, int) and v < 0 for v in vals):
            ctx.fail(f"shape {D.fmt_shape(vals)} has a negative dim")
        const = None
        if all(isinstance(v, int) for v in vals) and int(np.prod(vals)) <= SYM_LIMIT:
            const = np.full([int(v) for v in vals], self.value, self.dtype.np)
        ctx.set_output(0, self.dtype, vals, const=const)

    def lower(self, lw, node) -> None:
        shape, out = lw.value(node.inputs[0]), lw.value(node.outputs[0])
        if not shape.known:
            lw.define_dims(out.shape, lw.values_of(shape.name))
        lw.run_kernel(M.build_fill, self.value, [], [out.name])
