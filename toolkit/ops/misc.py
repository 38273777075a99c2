"""Miscellaneous core ops: Einsum, EyeLike, ReverseSequence, Det, BitCast, GridSample.

Einsum's equation is decoded by the frontend into labels per operand (an ellipsis already
expanded into labels of its own, right-aligned across operands as numpy does) and the
output's labels. A label's dims must agree across operands, or be 1 (broadcast); a label
repeated within one operand takes its diagonal, so those dims must be equal.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen import misc as K
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import ALL, FLOAT32, FLOAT64, FLOATS, INT64, NUMERIC, DType
from ..ir.graph import Graph, Node
from .base import CoreOp, InferContext, Patch
from .linalg import MatMul
from .movement import Transpose
from .shape import ViewAs

GRID_MODES = ("linear", "nearest", "cubic")
GRID_PADDINGS = ("zeros", "border", "reflection")


@dataclass(frozen=True)
class Einsum(CoreOp):
    """``terms``: each operand's labels; ``output``: the output's labels (every one appears
    in some operand)."""

    terms: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]

    def infer(self, ctx: InferContext) -> None:
        ins = ctx.inputs()
        if len(ins) != len(self.terms):
            ctx.fail(f"the equation has {len(self.terms)} operands, the node {len(ins)} inputs")
        for v in ins:
            ctx.check_dtype(v, NUMERIC)
        if len({v.dtype for v in ins}) > 1:
            ctx.fail("inputs have different dtypes: " + ", ".join(f"'{v.name}' {v.dtype}" for v in ins))
        dims: dict[int, Dim] = {}
        for v, term in zip(ins, self.terms):
            if v.rank != len(term):
                ctx.fail(f"input '{v.name}' {D.fmt_shape(v.shape)} has rank {v.rank}; its term has "
                         f"{len(term)} labels")
            seen: dict[int, int] = {}
            for a, (lab, d) in enumerate(zip(term, v.shape)):
                if lab in seen:
                    ctx.require_eq(d, v.shape[seen[lab]], f"diagonal dims {seen[lab]} and {a} of '{v.name}'")
                    continue
                seen[lab] = a
                if lab not in dims:
                    dims[lab] = d
                    continue
                try:
                    out = D.bcast(dims[lab], d)
                except D.BroadcastError:
                    ctx.fail(f"dim {a} of '{v.name}' ({d}) does not match the other operands' {dims[lab]}")
                ctx.require_bcast(d, out, f"dim {a} of '{v.name}'")
                ctx.require_bcast(dims[lab], out, f"the label of dim {a} of '{v.name}' in the other operands")
                dims[lab] = out
        if any(lab not in dims for lab in self.output):
            ctx.fail("an output label appears in no operand")
        ctx.set_output(0, ins[0].dtype, [dims[lab] for lab in self.output])

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        """Two float32 operands whose every label is a batch label (in both and the output),
        a contracted one (in both, not the output) or kept from one of them, with no diagonal
        and no dim broadcast, are a MatMul: each operand transposed to (batch, kept,
        contracted) / (batch, contracted, kept) and viewed as 3 dims, the product viewed back
        and transposed to the output's order. The loop kernel took 9.9x onnxruntime-web's time
        in Node on attention's ``bhid,bhjd->bhij``."""
        if len(self.terms) != 2:
            return None
        (ta, tb), out = self.terms, self.output
        a, b = graph.values[node.inputs[0]], graph.values[node.inputs[1]]
        if a.dtype != FLOAT32 or len(set(ta)) != len(ta) or len(set(tb)) != len(tb) or len(set(out)) != len(out):
            return None
        dim = {**dict(zip(tb, b.shape)), **dict(zip(ta, a.shape))}
        if any(lab in tb and dim[lab] != b.shape[tb.index(lab)] for lab in ta):
            return None  # a broadcast label
        batch = [lab for lab in out if lab in ta and lab in tb]
        kept_a = [lab for lab in out if lab in ta and lab not in tb]
        kept_b = [lab for lab in out if lab in tb and lab not in ta]
        contracted = [lab for lab in ta if lab in tb and lab not in out]
        if len(batch) + len(kept_a) + len(contracted) != len(ta) or len(batch) + len(kept_b) + len(contracted) != len(tb):
            return None  # a label summed out of one operand alone
        patch = Patch(graph, node)

        def add(op: CoreOp, inputs: list[str], tag: str, output: str | None = None) -> str:
            return patch.add(op, inputs, output or graph.fresh_name(f"{node.outputs[0]}/{tag}"))

        def arranged(name: str, term: tuple[int, ...], order: list[int], shape: tuple, tag: str) -> str:
            perm = tuple(term.index(lab) for lab in order)
            if perm != tuple(range(len(perm))):
                name = add(Transpose(perm), [name], f"{tag}.t")
            return add(ViewAs(shape), [name], f"{tag}.v")

        bshape = tuple(dim[lab] for lab in batch)
        fa, fb, k = (D.product(dim[lab] for lab in g) for g in (kept_a, kept_b, contracted))
        lhs = arranged(node.inputs[0], ta, batch + kept_a + contracted, bshape + (fa, k), "a")
        rhs = arranged(node.inputs[1], tb, batch + contracted + kept_b, bshape + (k, fb), "b")
        prod = add(MatMul(), [lhs, rhs], "mm")
        natural = batch + kept_a + kept_b
        shape = tuple(dim[lab] for lab in natural)
        if natural == list(out):
            add(ViewAs(shape), [prod], "", node.outputs[0])
            return patch.nodes
        viewed = add(ViewAs(shape), [prod], "mm.v")
        add(Transpose(tuple(natural.index(lab) for lab in out)), [viewed], "", node.outputs[0])
        return patch.nodes

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_einsum, (self.terms, self.output), [i for i in node.inputs if i], node.outputs[:1])


@dataclass(frozen=True)
class EyeLike(CoreOp):
    """A matrix of input 0's shape with ones on diagonal ``k``; ``dtype`` None: the input's."""

    dtype: DType | None = None
    k: int = 0

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, ALL)
        if x.rank != 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; EyeLike takes a matrix")
        ctx.set_output(0, self.dtype or x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.call(K.build_eye, self.k, [lw.alloc(node.outputs[0])])


@dataclass(frozen=True)
class ReverseSequence(CoreOp):
    """Inputs: x, sequence_lens (int64, one per entry of the batch axis)."""

    time_axis: int = 0
    batch_axis: int = 1

    def infer(self, ctx: InferContext) -> None:
        x, lens = ctx.input(0), ctx.input(1)
        ctx.check_dtype(x, ALL)
        if x.rank < 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; it needs a time and a batch axis")
        if {self.time_axis, self.batch_axis} != {0, 1}:
            ctx.fail(f"time_axis {self.time_axis} and batch_axis {self.batch_axis} must be 0 and 1, in either order")
        ctx.check_dtype(lens, (INT64,))
        if lens.rank != 1:
            ctx.fail(f"sequence_lens '{lens.name}' must be 1-D, has shape {D.fmt_shape(lens.shape)}")
        ctx.require_eq(lens.shape[0], x.shape[self.batch_axis],
                       f"length of sequence_lens '{lens.name}' and batch dim {self.batch_axis} of '{x.name}'")
        ctx.set_output(0, x.dtype, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_reverse_sequence, (self.time_axis, self.batch_axis), node.inputs[:2],
                      node.outputs[:1], error="sequence length {0} is not between 0 and the time dim {1} "
                                              "(batch entry {2})")


@dataclass(frozen=True)
class Det(CoreOp):
    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, FLOATS)
        if x.rank < 2:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; Det takes matrices (the last two dims)")
        ctx.require_eq(x.shape[-2], x.shape[-1], f"the matrices of '{x.name}' must be square: dims {x.rank - 2} "
                                                 f"and {x.rank - 1}")
        ctx.set_output(0, x.dtype, x.shape[:-2])

    def lower(self, lw, node) -> None:
        x = lw.value(node.inputs[0])
        n = x.shape[-1]
        scratch = lw.scratch("matrix being eliminated", FLOAT64 if x.dtype == FLOAT64 else FLOAT32, (n, n))
        lw.call(K.build_det, None, [lw.tensor(x.name), scratch, lw.alloc(node.outputs[0])], outputs=2)


@dataclass(frozen=True)
class BitCast(CoreOp):
    to: DType

    def infer(self, ctx: InferContext) -> None:
        x = ctx.input(0)
        ctx.check_dtype(x, ALL)
        if x.dtype.itemsize != self.to.itemsize:
            ctx.fail(f"input '{x.name}' is {x.dtype} ({8 * x.dtype.itemsize} bits); {self.to} has "
                     f"{8 * self.to.itemsize}: BitCast keeps the size")
        ctx.set_output(0, self.to, x.shape)

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_bitcast, None, node.inputs[:1], node.outputs[:1])


@dataclass(frozen=True)
class GridSample(CoreOp):
    """Inputs: X (N, C, spatial...), grid (N, out spatial..., number of spatial axes)."""

    mode: str = "linear"
    padding: str = "zeros"
    align_corners: bool = False

    def infer(self, ctx: InferContext) -> None:
        if self.mode not in GRID_MODES:
            ctx.fail(f"mode '{self.mode}' is not one of {', '.join(GRID_MODES)}")
        if self.padding not in GRID_PADDINGS:
            ctx.fail(f"padding_mode '{self.padding}' is not one of {', '.join(GRID_PADDINGS)}")
        x, grid = ctx.input(0), ctx.input(1)
        ctx.check_dtype(x, FLOATS)
        ctx.check_dtype(grid, FLOATS)
        if x.rank < 3:
            ctx.fail(f"input '{x.name}' has shape {D.fmt_shape(x.shape)}; expected (N, C, spatial...)")
        r = x.rank - 2
        if grid.rank != x.rank or grid.shape[-1] != r:
            ctx.fail(f"grid '{grid.name}' has shape {D.fmt_shape(grid.shape)}; for '{x.name}' "
                     f"{D.fmt_shape(x.shape)} it must be (N, out spatial..., {r})")
        ctx.require_eq(grid.shape[0], x.shape[0], f"batch dims of grid '{grid.name}' and '{x.name}'")
        ctx.set_output(0, x.dtype, (x.shape[0], x.shape[1]) + tuple(grid.shape[1:-1]))

    def lower(self, lw, node) -> None:
        lw.run_kernel(K.build_grid_sample, (self.mode, self.padding, self.align_corners), node.inputs[:2],
                      node.outputs[:1])


__all__ = ["Einsum", "EyeLike", "ReverseSequence", "Det", "BitCast", "GridSample"]
