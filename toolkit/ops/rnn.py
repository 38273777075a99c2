"""Recurrent core op: ``Recurrent(cell)`` for ONNX's RNN, GRU and LSTM.

One node runs the whole layer in one kernel (:func:`toolkit.codegen.rnn.build_recurrent`):
per direction, the input projection of every step ``X @ W^T + Wb`` is one GEMM up front,
then each step does the recurrent GEMM ``H @ R^T`` and one pass over the gates. A constant W
or R (every exported model's) is transposed at compile time (:meth:`Recurrent.simplify`),
so both GEMMs run with contiguous rows, as Gemm's do.

Inputs (ONNX positions, absent ones empty): X, W, R, [B], [sequence_lens], [initial_h],
and for LSTM [initial_c], [P]. Outputs: [Y], [Y_h], and for LSTM [Y_c]. The sequence length
and the batch may be symbolic; hidden and input sizes too (they are read from the tensors).

``sequence_lens`` as onnxruntime reads it: a batch entry of length L runs steps 0 .. L-1 (the
reverse direction L-1 down to 0); Y is zero past L, Y_h and Y_c hold the state after its
last step, and are zero when L is 0. A length outside [0, seq_length] fails the run naming
the node and the input.

Quantized weights (onnxruntime's DynamicQuantizeLSTM, ``Recurrent.quantized``): W and R are
8-bit, [directions, in, gates * hidden], with float32 scales (inputs W_SCALE and R_SCALE, one
per direction or one per column) and one zero point per direction. Each GEMM quantizes its
float operand to uint8 over that operand's own range first, as onnxruntime does
(:func:`toolkit.codegen.rnn._quantized_product`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from llvmlite import ir

from ..codegen import mathlib
from ..codegen import rnn as K
from ..codegen.scalar import Scalar
from ..ir import dims as D
from ..ir.dims import Dim
from ..ir.dtypes import FLOAT32, FLOATS, INDEX, INT8, INT32, UINT8, DType
from ..ir.graph import Graph, Node, Value
from .base import CoreOp, InferContext, replace_node
from .elementwise import SCALAR

X, W, R, B, SEQUENCE_LENS, INITIAL_H, INITIAL_C, P, W_SCALE, R_SCALE = range(10)
DIRECTIONS = ("forward", "reverse", "bidirectional")


@dataclass(frozen=True)
class Cell:
    gates: int  # blocks of hidden_size rows in W and R
    activations: int  # activation functions per direction
    defaults: tuple[str, ...]
    # rows of [batch, hidden] the kernel keeps: the hidden state, and GRU's reset hidden
    # state (r * H) or LSTM's cell state
    state_rows: int


CELLS = {
    "rnn": Cell(1, 1, ("tanh",), 1),
    "gru": Cell(3, 2, ("sigmoid", "tanh"), 2),
    "lstm": Cell(4, 3, ("sigmoid", "tanh", "tanh"), 2),
}


@dataclass(frozen=True)
class ActivationSpec:
    """An activation the recurrent ops name: the elementwise op (toolkit.ops.elementwise's
    SCALAR entry) that computes it, if there is one, and the defaults of its alpha and beta
    (None: it takes none; its parameters are (alpha, beta) in that order)."""

    scalar: str | None
    alpha: float | None = None
    beta: float | None = None


# by lower-case name. The defaults are those of the ONNX op of the same name (the spec
# says so); Affine's are the old experimental op's; ScaledTanh, which had none, gets (1, 1):
# plain tanh. onnxruntime defaults the alpha and beta of Affine, ThresholdedRelu and
# ScaledTanh to 0 instead.
ACTIVATIONS: dict[str, ActivationSpec] = {
    "relu": ActivationSpec("relu"),
    "tanh": ActivationSpec("tanh"),
    "sigmoid": ActivationSpec("sigmoid"),
    "affine": ActivationSpec(None, 1.0, 0.0),
    "leakyrelu": ActivationSpec("leaky_relu", 0.01),
    "thresholdedrelu": ActivationSpec("thresholded_relu", 1.0),
    "scaledtanh": ActivationSpec(None, 1.0, 1.0),
    "hardsigmoid": ActivationSpec("hard_sigmoid", 0.2, 0.5),
    "elu": ActivationSpec("elu", 1.0),
    "softsign": ActivationSpec("softsign"),
    "softplus": ActivationSpec("softplus"),
}


@dataclass(frozen=True)
class Activation:
    """One activation function (lower-case name, a key of ACTIVATIONS) with its alpha and
    beta (0 where it takes none)."""

    name: str
    alpha: float = 0.0
    beta: float = 0.0

    @property
    def params(self) -> tuple[float, ...]:
        spec = ACTIVATIONS[self.name]
        return ((self.alpha,) if spec.alpha is not None else ()) + ((self.beta,) if spec.beta is not None else ())

    def __str__(self) -> str:
        return f"{self.name}({', '.join(f'{p:g}' for p in self.params)})" if self.params else self.name

    def apply(self, s: Scalar, x: ir.Value) -> ir.Value:
        """The function of one element in the compute type (float32 for float16)."""
        spec = ACTIVATIONS[self.name]
        if spec.scalar is not None:
            return SCALAR[spec.scalar].body(s, [x], self.params)
        a, b = s.const(self.alpha), s.const(self.beta)
        if self.name == "affine":
            return s.add(s.mul(a, x), b)
        return s.mul(a, mathlib.tanh(s.b, s.mul(b, x)))  # scaledtanh


@dataclass(frozen=True)
class QuantizedWeights:
    """8-bit W and R as onnxruntime's DynamicQuantizeLSTM takes them: the zero point of each
    direction (onnxruntime reads one per direction, the first, even of per-column zero
    points, which it requires to be equal), and whether the scales (inputs W_SCALE and
    R_SCALE) hold one value per direction or one per column of [directions, gates * hidden]."""

    w_zero: tuple[int, ...]
    r_zero: tuple[int, ...]
    w_per_column: bool
    r_per_column: bool


@dataclass(frozen=True)
class Plan:
    """Which optional inputs and outputs a node has (the kernel's arguments)."""

    has_b: bool
    has_lens: bool
    has_h0: bool
    has_c0: bool
    has_p: bool
    has_y: bool
    has_yh: bool
    has_yc: bool


@dataclass(frozen=True)
class Recurrent(CoreOp):
    """One recurrent layer. ``activations`` holds the cell's functions for each direction
    in turn (f for RNN; f, g for GRU; f, g, h for LSTM). ``clip`` bounds every activation's
    input (None: no clip). ``w_transposed`` / ``r_transposed``: W and R come as
    [directions, in, gates * hidden] (a constant's transpose made at compile time) instead
    of ONNX's [directions, gates * hidden, in]. ``quantized``: W and R are 8-bit (see the
    module's docstring); they come transposed, both flags set."""

    cell: str
    direction: str = "forward"
    activations: tuple[Activation, ...] = ()
    hidden_size: int | None = None
    clip: float | None = None
    linear_before_reset: bool = False
    input_forget: bool = False
    layout: int = 0
    w_transposed: bool = False
    r_transposed: bool = False
    quantized: QuantizedWeights | None = None

    @property
    def kernel_name(self) -> str:
        return self.cell

    @property
    def spec(self) -> Cell:
        return CELLS[self.cell]

    @property
    def directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def infer(self, ctx: InferContext) -> None:
        cell = self.spec
        if self.direction not in DIRECTIONS:
            ctx.fail(f"direction '{self.direction}' is not one of {', '.join(DIRECTIONS)}")
        if len(self.activations) != cell.activations * self.directions:
            ctx.fail(f"{len(self.activations)} activations given, {self.cell.upper()} {self.direction} "
                     f"needs {cell.activations * self.directions}")
        if self.layout not in (0, 1):
            ctx.fail(f"layout {self.layout} is not 0 or 1")
        x = ctx.input(X)
        ctx.check_dtype(x, FLOATS)
        if x.rank != 3:
            ctx.fail(f"input X '{x.name}' has shape {D.fmt_shape(x.shape)}; it must have rank 3 "
                     f"({'[batch, seq, input]' if self.layout else '[seq, batch, input]'})")
        seq, batch = (x.shape[1], x.shape[0]) if self.layout else (x.shape[0], x.shape[1])
        dirs = self.directions
        w, r = ctx.input(W), ctx.input(R)
        if r.rank != 3:
            ctx.fail(f"R '{r.name}' has shape {D.fmt_shape(r.shape)}; it must have rank 3")
        hidden = r.shape[1] if self.r_transposed else r.shape[2]
        if self.hidden_size is not None:
            hidden = self.hidden_size
        gh = D.mul(hidden, cell.gates)
        size = x.shape[2]

        def expect(v: Value, shape: tuple[Dim, ...], what: str, layout: str) -> None:
            if v.rank != len(shape):
                ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}; expected {layout} "
                         f"{D.fmt_shape(shape)}")
            for axis, (got, want) in enumerate(zip(v.shape, shape)):
                ctx.require_eq(got, want, f"{what} '{v.name}' dim {axis} (expected {layout} {D.fmt_shape(shape)})")

        if self.quantized is None:
            for v in (w, r):
                ctx.check_dtype(v, (x.dtype,))
        else:
            self._check_quantized(ctx, x, w, r, dirs, gh)
        expect(w, (dirs, size, gh) if self.w_transposed else (dirs, gh, size), "W",
               "[directions, input, gates*hidden]" if self.w_transposed else "[directions, gates*hidden, input]")
        expect(r, (dirs, hidden, gh) if self.r_transposed else (dirs, gh, hidden), "R",
               "[directions, hidden, gates*hidden]" if self.r_transposed else "[directions, gates*hidden, hidden]")
        state = (batch, dirs, hidden) if self.layout else (dirs, batch, hidden)
        state_text = "[batch, directions, hidden]" if self.layout else "[directions, batch, hidden]"
        for i, what in ((B, "B"), (INITIAL_H, "initial_h"), (INITIAL_C, "initial_c"), (P, "P")):
            v = ctx.optional(i)
            if v is not None:
                ctx.check_dtype(v, (x.dtype,))
                if i == B:
                    expect(v, (dirs, D.mul(gh, 2)), what, "[directions, 2*gates*hidden]")
                elif i == P:
                    expect(v, (dirs, D.mul(hidden, 3)), what, "[directions, 3*hidden]")
                else:
                    expect(v, state, what, state_text)
        lens = ctx.optional(SEQUENCE_LENS)
        if lens is not None:
            if lens.dtype not in INDEX:
                ctx.fail(f"sequence_lens '{lens.name}' has dtype {lens.dtype}; it must be int32 (or int64)")
            expect(lens, (batch,), "sequence_lens", "[batch]")
        if self.cell != "lstm" and (ctx.has(INITIAL_C) or ctx.has(P) or ctx.wants(2)):
            ctx.fail(f"{self.cell.upper()} has no initial_c, P or Y_c")
        plan = Plan(ctx.has(B), lens is not None, ctx.has(INITIAL_H), ctx.has(INITIAL_C), ctx.has(P),
                    ctx.wants(0), ctx.wants(1), ctx.wants(2))
        # the kernel's scratch buffers: the input projection, the step's gates, the states
        scratch = ((D.mul(seq, batch), gh), (batch, gh), (cell.state_rows, batch, hidden))
        ctx.info = (plan, scratch, gh)
        y = (batch, seq, dirs, hidden) if self.layout else (seq, dirs, batch, hidden)
        for i, shape in enumerate((y, state, state)):
            ctx.set_output(i, x.dtype, shape)

    def _check_quantized(self, ctx: InferContext, x: Value, w: Value, r: Value, dirs: int, gh: Dim) -> None:
        q = self.quantized
        if self.cell != "lstm" or not (self.w_transposed and self.r_transposed) or self.layout:
            ctx.fail("quantized weights are onnxruntime's DynamicQuantizeLSTM's: LSTM, W and R given as "
                     "[directions, in, gates*hidden], layout 0")
        if x.dtype != FLOAT32:
            ctx.fail(f"input X '{x.name}' has dtype {x.dtype}; with 8-bit weights it must be float32")
        for v in (w, r):
            ctx.check_dtype(v, (INT8, UINT8))
        for i, what, per_column, zeros in ((W_SCALE, "W_scale", q.w_per_column, q.w_zero),
                                           (R_SCALE, "R_scale", q.r_per_column, q.r_zero)):
            v = ctx.input(i)
            ctx.check_dtype(v, (FLOAT32,))
            shape = (dirs, gh) if per_column else (dirs,)
            if v.rank != len(shape) or len(zeros) != dirs:
                ctx.fail(f"{what} '{v.name}' has shape {D.fmt_shape(v.shape)}; expected {D.fmt_shape(shape)} "
                         f"with {dirs} zero point(s)")
            for axis, (got, want) in enumerate(zip(v.shape, shape)):
                ctx.require_eq(got, want, f"{what} '{v.name}' dim {axis}")

    def simplify(self, node: Node, graph: Graph) -> list[Node] | None:
        """Transpose a constant W and R once, so the kernel's GEMMs read contiguous rows."""
        inputs, op = list(node.inputs), self
        for i, flag in ((W, "w_transposed"), (R, "r_transposed")):
            v = graph.values[inputs[i]]
            if getattr(op, flag) or v.const is None or v.rank != 3:
                continue
            name = f"{v.name}^T"
            if name not in graph.values:
                graph.add_value(Value(name, v.dtype, (v.shape[0], v.shape[2], v.shape[1]),
                                      const=v.const.transpose(0, 2, 1).copy()))
            inputs[i] = name
            op = replace(op, **{flag: True})
        return None if op is self else replace_node(graph, node, op, inputs)

    def lower(self, lw, node) -> None:
        plan, scratch, gh = node.info
        work = compute_dtype(lw.value(node.inputs[X]).dtype)
        tensors = [lw.tensor(node.inputs[i]) for i in range(len(node.inputs)) if node.inputs[i]]
        tensors += [lw.scratch(what, work, shape) for what, shape in zip(("input projection", "gates", "states"),
                                                                          scratch)]
        if self.quantized is not None:
            # one row of a quantized GEMM's int32 sums
            tensors.append(lw.scratch("integer sums", INT32, (gh,)))
        outs = [o for o in node.outputs if o]
        tensors += [lw.alloc(o) for o in outs]
        error = None
        if plan.has_lens:
            error = (f"sequence_lens '{node.inputs[SEQUENCE_LENS]}' element {{2}} is {{0}}; it must be "
                     f"between 0 and the sequence length {{1}}")
        lw.call(K.build_recurrent, (self, plan), tensors, error=error, outputs=len(outs))


def compute_dtype(dt: DType) -> DType:
    """What the kernel's scratch buffers hold: float32 for float16 inputs (kernels compute
    float16 in float32), else the input's dtype."""
    return FLOAT32 if dt.is_narrow_float else dt


__all__ = ["Recurrent", "Activation", "ActivationSpec", "Plan", "QuantizedWeights", "CELLS", "ACTIVATIONS"]
