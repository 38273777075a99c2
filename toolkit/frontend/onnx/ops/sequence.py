"""ONNX optionals and sequences, resolved at compile time.

symwasm's VM carries tensors only, and each element of a sequence has its own shape, so an
optional or a sequence never becomes a value of the module. Inside a model, exporters build
them in chains whose structure is known at compile time (SequenceConstruct, SequenceInsert
at a constant position, SplitToSequence of a static axis, then ConcatFromSequence or
SequenceAt); the importer holds each such value under its name, beside the tensors, as a
:class:`TensorSequence` (the Values of its elements) or an :class:`OptionalValue` (a Value, a
sequence, or nothing), and the ops here rewrite one into another. Only element tensors reach
core ops: SequenceAt is an Identity of one, ConcatFromSequence a Concat of them,
SplitToSequence a Split into them; SequenceLength and OptionalHasElement are constants.

SequenceMap is unrolled: its body is inlined once per element, with that element (and the
same element of every other sequence input, or the whole of a tensor input) in place of the
body's inputs, so each copy is specialized to its element's own shape.

Positions must be known at compile time, and so must the number of parts SplitToSequence
makes. An optional or sequence may not be an input or output of the model, nor reach an op
other than these and Identity (the importer refuses both, naming the value); If branches and
Loop bodies that yield one are not supported.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from ....ir.dtypes import BOOL, FLOAT32, INT32, INT64, DType
from ....ir.graph import Value
from ....ops.base import promote_sym
from ....ops.layout import Split
from ....ops.movement import Concat
from ....ops.shape import Identity, Squeeze, Unsqueeze
from ..subgraphs import bind_subgraph, rename_in
from ..translate import TranslateContext


@dataclass(frozen=True)
class TensorSequence:
    """A sequence whose length is known at compile time; ``dtype`` is its elements' (an
    empty sequence has one too)."""

    elements: tuple[Value, ...]
    dtype: DType

    def describe(self) -> str:
        return f"a sequence of {len(self.elements)} {self.dtype} tensors"


@dataclass(frozen=True)
class OptionalValue:
    """An optional: its element (None when empty) and the element's type, as ONNX writes it
    (``tensor(float)``, ``seq(tensor(int64))``)."""

    element: "Value | TensorSequence | None"
    type: str

    def describe(self) -> str:
        if self.element is None:
            return f"an empty optional of {self.type}"
        return f"an optional holding {_describe(self.element)}"


Held = TensorSequence | OptionalValue

# the ops that read held values; Identity passes one on (its own translation takes tensors)
HELD_OPS = frozenset({"Identity", "Optional", "OptionalHasElement", "OptionalGetElement", "SequenceConstruct",
                      "SequenceEmpty", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength",
                      "ConcatFromSequence", "SplitToSequence", "SequenceMap"})


def _describe(v: "Value | Held | None") -> str:
    if v is None:
        return "missing"
    return f"a tensor {v.describe()}" if isinstance(v, Value) else v.describe()


def is_held(v) -> bool:
    return isinstance(v, (TensorSequence, OptionalValue))


def type_text(t: onnx.TypeProto) -> str:
    """An ONNX type as ONNX writes it: ``tensor(float)``, ``seq(tensor(int64))``."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        code = t.tensor_type.elem_type
        known = code in onnx.TensorProto.DataType.values()
        return f"tensor({onnx.TensorProto.DataType.Name(code).lower() if known else code})"
    if kind == "sequence_type":
        return f"seq({type_text(t.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_text(t.optional_type.elem_type)})"
    return kind or "undefined"


def _value_type(v: "Value | TensorSequence") -> str:
    elem = f"tensor({onnx.TensorProto.DataType.Name(v.dtype.code).lower()})"
    return elem if isinstance(v, Value) else f"seq({elem})"


# ----------------------------------------------------------------------------- reading


def _input(ctx: TranslateContext, i: int) -> "Value | Held | None":
    return ctx.graph.values[ctx.inputs[i]] if ctx.has(i) else None


def _sequence(ctx: TranslateContext, i: int) -> TensorSequence:
    v = _input(ctx, i)
    if not isinstance(v, TensorSequence):
        ctx.fail(f"input '{ctx.inputs[i]}' is {_describe(v)}; {ctx.op_type} takes a sequence")
    return v


def _tensor(ctx: TranslateContext, i: int, what: str) -> Value:
    v = _input(ctx, i)
    if not isinstance(v, Value):
        ctx.fail(f"{what} (input '{ctx.inputs[i]}') is {_describe(v)}; it must be a tensor")
    return v


def _position(ctx: TranslateContext, i: int, n: int, end_ok: bool) -> int:
    """Input ``i``, a position in a sequence of ``n`` elements, as an index from 0 (``n``
    allowed when ``end_ok``: an insertion at the end)."""
    v = _tensor(ctx, i, "position")
    if v.dtype not in (INT32, INT64) or v.rank != 0:
        ctx.fail(f"position (input '{v.name}') is {v.describe()}; it must be an int32 or int64 scalar")
    vals = v.int_contents()
    if vals is None or not isinstance(vals[0], int):
        ctx.fail(f"position (input '{v.name}') is known only at run time, which is not supported: symwasm resolves "
                 f"sequences at compile time, so positions must be constants")
    p = int(vals[0])
    hi = n if end_ok else n - 1
    if not -n <= p <= hi:
        ctx.fail(f"position {p} is out of range for a sequence of {n} elements (valid: {-n} to {hi})")
    return p + n if p < 0 else p


def _hold(ctx: TranslateContext, held: Held) -> None:
    """The output is ``held``."""
    ctx.graph.values[ctx.outputs[0]] = held


def _constant(ctx: TranslateContext, array: np.ndarray, dt: DType) -> None:
    v = Value(ctx.outputs[0], dt, tuple(array.shape), const=array)
    v.sym = promote_sym(v)
    ctx.graph.add_value(v)


def _same(ctx: TranslateContext, element: "Value | TensorSequence") -> None:
    """Output 0 is ``element``: a tensor through an Identity, a sequence as it is."""
    if isinstance(element, Value):
        ctx.emit(Identity(), [element.name], ctx.outputs[:1])
    else:
        _hold(ctx, element)


# ----------------------------------------------------------------------------- optionals


def identity(ctx: TranslateContext) -> None:
    """Identity of a held value (of a tensor, Identity's own translation runs)."""
    _hold(ctx, _input(ctx, 0))


def optional(ctx: TranslateContext) -> None:
    v = _input(ctx, 0)
    if v is None:
        t = ctx.attr("type")
        if t is None:
            ctx.fail("attribute 'type' is required when there is no input (it is the empty optional's type)")
        _hold(ctx, OptionalValue(None, type_text(t)))
        return
    if isinstance(v, OptionalValue):
        ctx.fail(f"input '{ctx.inputs[0]}' is {v.describe()}; an optional cannot hold an optional")
    _hold(ctx, OptionalValue(v, _value_type(v)))


def optional_has_element(ctx: TranslateContext) -> None:
    # from 18 the input may be left out (an empty optional) or be a tensor or sequence
    v = _input(ctx, 0)
    if isinstance(v, Value) and ctx.version < 18:
        ctx.fail(f"input '{ctx.inputs[0]}' is {_describe(v)}; OptionalHasElement-{ctx.version} takes an optional "
                 f"(from version 18 it also takes a tensor or sequence)")
    has = v.element is not None if isinstance(v, OptionalValue) else v is not None
    _constant(ctx, np.array(has), BOOL)


def optional_get_element(ctx: TranslateContext) -> None:
    v = _input(ctx, 0)
    if isinstance(v, OptionalValue):
        if v.element is None:
            ctx.fail(f"input '{ctx.inputs[0]}' is {v.describe()}: it has no element to get")
        _same(ctx, v.element)
        return
    if ctx.version < 18:
        ctx.fail(f"input '{ctx.inputs[0]}' is {_describe(v)}; OptionalGetElement-{ctx.version} takes an optional "
                 f"(from version 18 it also takes a tensor or sequence)")
    _same(ctx, v)


# ----------------------------------------------------------------------------- sequences


def sequence_construct(ctx: TranslateContext) -> None:
    elements = tuple(_tensor(ctx, i, f"element {i}") for i in range(len(ctx.inputs)))
    if not elements:
        ctx.fail("needs at least one input")
    for v in elements[1:]:
        if v.dtype != elements[0].dtype:
            ctx.fail(f"inputs '{elements[0].name}' ({elements[0].dtype}) and '{v.name}' ({v.dtype}) differ in "
                     f"dtype; a sequence's elements have one dtype")
    _hold(ctx, TensorSequence(elements, elements[0].dtype))


def sequence_empty(ctx: TranslateContext) -> None:
    code = ctx.attr("dtype")
    _hold(ctx, TensorSequence((), FLOAT32 if code is None else ctx.dtype(code, "dtype")))


def sequence_insert(ctx: TranslateContext) -> None:
    seq = _sequence(ctx, 0)
    x = _tensor(ctx, 1, "tensor")
    if x.dtype != seq.dtype:
        ctx.fail(f"tensor '{x.name}' is {x.dtype}; the sequence '{ctx.inputs[0]}' holds {seq.dtype} tensors")
    n = len(seq.elements)
    p = _position(ctx, 2, n, end_ok=True) if ctx.has(2) else n
    _hold(ctx, TensorSequence(seq.elements[:p] + (x,) + seq.elements[p:], seq.dtype))


def sequence_at(ctx: TranslateContext) -> None:
    seq = _sequence(ctx, 0)
    ctx.emit(Identity(), [seq.elements[_position(ctx, 1, len(seq.elements), end_ok=False)].name], ctx.outputs[:1])


def sequence_erase(ctx: TranslateContext) -> None:
    seq = _sequence(ctx, 0)
    n = len(seq.elements)
    if n == 0:
        ctx.fail(f"the sequence '{ctx.inputs[0]}' is empty: there is nothing to erase")
    p = _position(ctx, 1, n, end_ok=False) if ctx.has(1) else n - 1
    _hold(ctx, TensorSequence(seq.elements[:p] + seq.elements[p + 1:], seq.dtype))


def sequence_length(ctx: TranslateContext) -> None:
    _constant(ctx, np.array(len(_sequence(ctx, 0).elements), np.int64), INT64)


def concat_from_sequence(ctx: TranslateContext) -> None:
    seq = _sequence(ctx, 0)
    if not seq.elements:
        ctx.fail(f"the sequence '{ctx.inputs[0]}' is empty; there is nothing to concatenate")
    axis = int(ctx.attr("axis"))
    names = [v.name for v in seq.elements]
    if ctx.attr("new_axis", 0):
        rank = seq.elements[0].rank + 1
        if not -rank <= axis < rank:
            ctx.fail(f"axis {axis} is out of range for stacking rank-{rank - 1} tensors (valid: {-rank} to "
                     f"{rank - 1})")
        stacked = []
        for k, name in enumerate(names):
            stacked.append(ctx.tmp(f"element{k}"))
            ctx.emit(Unsqueeze((axis,)), [name], [stacked[-1]])
        names = stacked
    ctx.emit(Concat(axis), names, ctx.outputs[:1])


def split_to_sequence(ctx: TranslateContext) -> None:
    x = _tensor(ctx, 0, "input")
    if x.rank == 0:
        ctx.fail(f"cannot split the scalar '{x.name}'")
    axis = int(ctx.attr("axis", 0))
    if not -x.rank <= axis < x.rank:
        ctx.fail(f"axis {axis} is out of range for input '{x.name}' of rank {x.rank}")
    axis %= x.rank
    d = x.shape[axis]
    split = _tensor(ctx, 1, "split") if ctx.has(1) else None
    squeeze = split is None and not ctx.attr("keepdims", 1)
    if split is not None and split.rank == 1:
        n = split.shape[0]
        if not isinstance(n, int):
            ctx.fail(f"split '{split.name}' has {n} entries, known only at run time, which is not supported: "
                     f"the number of parts must be known at compile time")
        if n == 0:
            ctx.fail(f"split '{split.name}' is empty; it needs one length per part")
        inputs = [x.name, split.name]
    else:
        # a scalar chunk length (1 by default): the number of parts follows from the dim
        if split is None:
            chunk = 1
        else:
            vals = split.int_contents()
            if split.rank != 0:
                ctx.fail(f"split '{split.name}' is {split.describe()}; it must be a scalar or a 1-D tensor")
            if vals is None or not isinstance(vals[0], int):
                ctx.fail(f"split '{split.name}' is a scalar known only at run time, which is not supported: it "
                         f"decides the number of parts, which symwasm must know at compile time")
            chunk = int(vals[0])
            if chunk <= 0:
                ctx.fail(f"split is {chunk}; chunk lengths must be positive")
        if not isinstance(d, int):
            ctx.fail(f"dim {axis} of '{x.name}' is {d}, known only at run time, which is not supported for chunks "
                     f"of {chunk}: the number of parts must be known at compile time")
        n = -(-d // chunk)
        sizes = [chunk] * (n - 1) + [d - chunk * (n - 1)] if n else []
        inputs = [x.name, ctx.constant("split", np.array(sizes, np.int64))]
    parts = [ctx.tmp(f"part{k}") for k in range(n)]
    if parts:
        ctx.emit(Split(axis), inputs, parts)
    if squeeze:
        squeezed = [ctx.tmp(f"item{k}") for k in range(n)]
        for src, dst in zip(parts, squeezed):
            ctx.emit(Squeeze((axis,)), [src], [dst])
        parts = squeezed
    _hold(ctx, TensorSequence(tuple(ctx.graph.values[p] for p in parts), x.dtype))


def sequence_map(ctx: TranslateContext) -> None:
    body = ctx.attr("body")
    if body is None:
        ctx.fail("attribute 'body' is required")
    seq = _sequence(ctx, 0)
    n = len(seq.elements)
    args: list[Value | TensorSequence] = [seq]
    for i in range(1, len(ctx.inputs)):
        v = _input(ctx, i)
        if not isinstance(v, (Value, TensorSequence)):
            ctx.fail(f"input '{ctx.inputs[i]}' is {_describe(v)}; SequenceMap's inputs are sequences and tensors")
        if isinstance(v, TensorSequence) and len(v.elements) != n:
            ctx.fail(f"input '{ctx.inputs[i]}' is {v.describe()} and input '{ctx.inputs[0]}' {seq.describe()}; "
                     f"the sequences SequenceMap maps over must have one length")
        args.append(v)
    if len(body.input) != len(args):
        ctx.fail(f"the body takes {len(body.input)} inputs; the node has {len(args)}")
    if len(body.output) != len(ctx.outputs):
        ctx.fail(f"the body yields {len(body.output)} values; the node has {len(ctx.outputs)} outputs")
    dtypes = []
    for k, o in enumerate(body.output):
        code = o.type.tensor_type.elem_type if o.type.WhichOneof("value") == "tensor_type" else 0
        dtypes.append(ctx.dtype(code, f"body output {k} ('{o.name}') element type") if code else None)
    results: list[list[Value]] = [[] for _ in ctx.outputs]
    for k in range(n):
        # the body's names under '<node>/<k>/', its inputs replaced by this element's values,
        # then imported inline
        gp = bind_subgraph(body, {}, lambda x: x, f"{ctx.name}/{k}/")
        rename_in(gp, {inp.name: (a.elements[k] if isinstance(a, TensorSequence) else a).name
                        for inp, a in zip(gp.input, args)})
        del gp.input[:]
        region = ctx.import_region(gp, [], f"{ctx.label()} (element {k})")
        ctx.graph.nodes.extend(region.nodes)
        for j, o in enumerate(region.outputs):
            v = ctx.graph.values[o]
            if dtypes[j] is not None and v.dtype != dtypes[j]:
                ctx.fail(f"body output {j} ('{body.output[j].name}') is {v.dtype} for element {k}; the body "
                         f"declares {dtypes[j]}")
            if results[j] and v.dtype != results[j][0].dtype:
                ctx.fail(f"body output {j} ('{body.output[j].name}') is {v.dtype} for element {k} and "
                         f"{results[j][0].dtype} for element 0; a sequence's elements have one dtype")
            results[j].append(v)
    for j, out in enumerate(ctx.outputs):
        dt = results[j][0].dtype if results[j] else dtypes[j]
        if dt is None:
            ctx.fail(f"the sequences are empty and body output {j} ('{body.output[j].name}') declares no element "
                     f"type, so the output's dtype is unknown")
        ctx.graph.values[out] = TensorSequence(tuple(results[j]), dt)


def register(r) -> None:
    # none is folded: their outputs are held values (or tensors they only pass on)
    r.add("Optional", (15, 28), optional, foldable=False)
    r.add("OptionalHasElement", (15, 18, 28), optional_has_element, foldable=False)
    r.add("OptionalGetElement", (15, 18, 28), optional_get_element, foldable=False)
    r.add("SequenceConstruct", (11,), sequence_construct, foldable=False)
    r.add("SequenceEmpty", (11,), sequence_empty, foldable=False)
    r.add("SequenceInsert", (11,), sequence_insert, foldable=False)
    r.add("SequenceAt", (11,), sequence_at, foldable=False)
    r.add("SequenceErase", (11,), sequence_erase, foldable=False)
    r.add("SequenceLength", (11,), sequence_length, foldable=False)
    r.add("ConcatFromSequence", (11,), concat_from_sequence, foldable=False)
    r.add("SplitToSequence", (11, 24), split_to_sequence, foldable=False)
    r.add("SequenceMap", (17,), sequence_map, foldable=False)
