"""The graph IR: values with a dtype and a shape of dims, and the nodes that produce them.

A value may also carry what is known of its *contents* at compile time:
``const`` (a numpy array) or ``sym`` (a tuple of dims, the flattened elements of a small
integer tensor such as the output of ``Shape``). ``sym`` is how shape arithmetic stays
symbolic through Shape / Gather / Concat / Reshape chains.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dims import Dim, Expr, SymbolScope, fmt_shape, product


# integer tensors longer than this are not tracked element by element as shape values
SYM_LIMIT = 64


@dataclass(frozen=True)
class DType:
    name: str
    code: int  # ONNX TensorProto code, also the module ABI's dtype code
    np: Any

    @property
    def itemsize(self) -> int:
        return np.dtype(self.np).itemsize

    def __str__(self) -> str:
        return self.name


FLOAT32 = DType("float32", 1, np.float32)
INT32 = DType("int32", 6, np.int32)
INT64 = DType("int64", 7, np.int64)
BOOL = DType("bool", 9, np.bool_)
DTYPES = {d.name: d for d in (FLOAT32, INT32, INT64, BOOL)}
DTYPE_BY_CODE = {d.code: d for d in DTYPES.values()}


def dtype_of_numpy(dt) -> DType:
    dt = np.dtype(dt)
    for d in DTYPES.values():
        if np.dtype(d.np) == dt:
            return d
    raise KeyError(str(dt))


class CompileError(Exception):
    """A user-facing compile failure: names the node, op and reason."""


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

    # "eq": a == b; "bcast": a broadcasts to b (a == 1 or a == b); "define": evaluate the
    # broadcast dim a (a bcast of input dims) with this message should they not broadcast
    kind: str
    a: Dim
    b: Dim
    message: str  # names node, op, inputs and dims; "{0}" and "{1}" are the run-time values


@dataclass
class Node:
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def label(self) -> str:
        return f"node '{self.name}' ({self.op})"


@dataclass
class Graph:
    name: str
    opset: int
    scope: SymbolScope
    values: dict[str, Value] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def add_value(self, v: Value) -> Value:
        self.values[v.name] = v
        return v

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {n: [] for n in self.values}
        for node in self.nodes:
            for i in node.inputs:
                if i:
                    out.setdefault(i, []).append(node)
        return out

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


def is_symbolic(d: Dim) -> bool:
    return isinstance(d, Expr)
