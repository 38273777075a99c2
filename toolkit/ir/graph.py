"""The graph IR: values with a dtype and a shape of dims, and the nodes of core ops
(:mod:`toolkit.ops`) that produce them.

A value may also carry what is known of its *contents* at compile time:
``const`` (a numpy array) or ``sym`` (a tuple of dims, the flattened elements of a small
integer tensor such as the output of ``Shape``). ``sym`` is how shape arithmetic stays
symbolic through Shape / Gather / Concat / Reshape chains.

A node keeps the name and op type of the source node it came from (an ONNX node), so
every message names what the user wrote; one source node may become several core nodes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .dims import Dim, SymbolScope, fmt_shape, product
from .dtypes import (  # noqa: F401  (re-exported: the graph's dtypes)
    BOOL, DTYPE_BY_CODE, DTYPES, FLOAT16, FLOAT32, FLOAT64, INT8, INT16, INT32, INT64, UINT8, UINT16,
    UINT32, UINT64, DType, dtype_of_numpy)

# integer tensors longer than this are not tracked element by element as shape values
SYM_LIMIT = 64
# constants computed at compile time (all-constant nodes, quantized weights) only up to this
# many elements, unless a kernel reads them as weights (WEIGHT_INPUTS)
FOLD_LIMIT = 1 << 20
# the inputs a kernel reads as weights, by op (an ONNX op type, and the core op of the same
# name): a constant there is packed (or transformed) at compile time, so one computed from
# constants is folded whatever its size
WEIGHT_INPUTS = {"Conv": (1,), "ConvTranspose": (1,), "Gemm": (1,), "MatMul": (1,)}


class CompileError(Exception):
    """A user-facing compile failure: names the node, op and reason."""


class ShapeError(CompileError):
    """A node's shape function proved its inputs wrong (a rank, a dim, a dtype). In an If
    branch, code a run may never reach: the branch then fails at run time instead
    (:func:`toolkit.frontend.onnx.ops.control.if_`), as onnxruntime does."""


@dataclass
class Value:
    name: str
    dtype: DType
    shape: tuple[Dim, ...]
    const: np.ndarray | None = None
    sym: tuple[Dim, ...] | None = None
    producer: "Node | None" = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> Dim:
        return product(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def int_contents(self) -> tuple[Dim, ...] | None:
        """The elements of an integer (or bool) tensor as dims, when known at compile time."""
        if self.sym is not None:
            return self.sym
        if self.const is not None and self.const.dtype.kind in "iub":
            return tuple(int(x) for x in self.const.reshape(-1))
        return None

    @property
    def known(self) -> bool:
        """Whether the contents are known at compile time (as numbers or dims)."""
        return self.const is not None or self.sym is not None

    def describe(self) -> str:
        return f"{self.dtype}{fmt_shape(self.shape)}"


@dataclass
class Check:
    """A shape condition the compiler could not prove; the VM checks it at run time."""

    # "eq": a == b; "le": a <= b; "bcast": a broadcasts to b (a == 1 or a == b); "define":
    # evaluate the broadcast dim a (a bcast of input dims) with this message should they not
    # broadcast
    kind: str
    a: Dim
    b: Dim
    message: str  # names node, op, inputs and dims; "{0}" and "{1}" are the run-time values


@dataclass
class Node:
    op: Any  # a core op (toolkit.ops.base.CoreOp)
    name: str  # the source node's name
    source: str  # the source node's op type ("Relu"), for messages
    inputs: list[str]
    outputs: list[str]
    # set by the op's infer (which may be re-run): run-time checks, and what it derived
    # from the inputs that lowering needs (a Conv's window, a Slice's plan)
    checks: list[Check] = field(default_factory=list)
    info: Any = None

    def label(self) -> str:
        return f"node '{self.name}' ({self.source})"


@dataclass(eq=False)
class Region:
    """A subgraph: an If branch, a Loop body. Its nodes' values live in the enclosing
    :class:`Graph`'s ``values`` (names are unique across the model); ``inputs`` are bound
    when the region starts (a Loop body's iteration number, condition and carried values),
    ``outputs`` are what it yields. Its nodes may read values of enclosing scopes
    (:meth:`captures`)."""

    inputs: list[str]
    nodes: list[Node]
    outputs: list[str]

    def defined(self) -> set[str]:
        """The names this region defines: its inputs and its nodes' outputs (nested regions'
        too, which are never visible outside them, but never clash either)."""
        out = set(self.inputs)
        for node in self.nodes:
            out.update(o for o in node.outputs if o)
            for r in regions(node):
                out |= r.defined()
        return out

    def captures(self) -> list[str]:
        """Values of enclosing scopes this region reads, in first-read order."""
        inner = self.defined()
        seen: dict[str, None] = {}
        for node in self.nodes:
            for i in node.inputs:
                if i and i not in inner:
                    seen.setdefault(i)
        for o in self.outputs:
            if o not in inner:
                seen.setdefault(o)
        return list(seen)

    def reads(self) -> set[str]:
        """The names its own nodes (and nested regions) read, and its outputs."""
        out = set(self.outputs)
        for node in self.walk():
            out.update(i for i in node.inputs if i)
        return out

    def walk(self):
        """Every node in this region and the regions nested in it."""
        for node in self.nodes:
            yield node
            for r in regions(node):
                yield from r.walk()


def captures(regions_: "Sequence[Region]") -> list[str]:
    """Values of enclosing scopes any of these regions reads, in first-read order."""
    seen: dict[str, None] = {}
    for r in regions_:
        for c in r.captures():
            seen.setdefault(c)
    return list(seen)


def regions(node: "Node") -> tuple[Region, ...]:
    """The subgraphs of a control-flow node (none for other ops)."""
    return getattr(node.op, "regions", ())


@dataclass
class Graph:
    name: str
    opset: int  # the source model's, for the metadata
    scope: SymbolScope
    values: dict[str, Value] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the importer did that inspect should say
    # constant 8- and 16-bit weights stay quantized, dequantized on every run (a wasm32 module:
    # 4x fewer bytes to download), rather than folded into float32 constants (natively)
    keep_quantized_weights: bool = False
    # compile --check-facts: every fact the compiler relied on about a value or a dim is
    # checked at run time too (:func:`toolkit.ops.base.recomputable`, InferContext.require_le)
    check_facts: bool = False
    # initializers the model also lists as graph inputs (IR < 4): compiled as constants, and
    # named when a run feeds one (onnxruntime lets a run override them)
    weight_inputs: list[str] = field(default_factory=list)
    # initializers listed as inputs that compile --overridable keeps as inputs: their values,
    # which a run that does not feed them gets
    input_defaults: dict[str, np.ndarray] = field(default_factory=dict)

    def add_value(self, v: Value) -> Value:
        self.values[v.name] = v
        return v

    def fresh_name(self, base: str) -> str:
        """A value name not used yet, made from ``base``."""
        name, k = base, 0
        while name in self.values:
            k += 1
            name = f"{base}.{k}"
        return name

    def all_nodes(self):
        """Every node, those of regions (If branches, Loop bodies) included."""
        for node in self.nodes:
            yield node
            for r in regions(node):
                yield from r.walk()

    def dump(self) -> str:
        """Readable text of the graph: one line per node, with symbolic shapes."""
        lines = [f"graph {self.name} (opset {self.opset})"]
        for name in self.inputs:
            lines.append(f"  input  {name}: {self.values[name].describe()}")
        for node in self.nodes:
            outs = ", ".join(f"{o}: {self.values[o].describe()}" for o in node.outputs if o)
            ins = ", ".join(node.inputs)
            lines.append(f"  {outs} = {node.op}({ins})  # {node.name}")
        for name in self.outputs:
            lines.append(f"  output {name}: {self.values[name].describe()}")
        return "\n".join(lines)
