"""What an op's shape function sees and the helpers shape functions share."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...ir import dims as D
from ...ir.dims import Dim
from ...ir.graph import FLOAT32, INT32, INT64, SYM_LIMIT, Check, CompileError, DType, Graph, Node, Value


class InferContext:
    """One node's view of the graph while its shape function runs. The shape function
    calls :meth:`set_output` for each output; :meth:`fail` reports a compile error naming
    the node; :meth:`require_eq` / :meth:`require_bcast` prove a condition or defer it to a
    run-time check carried by the node."""

    def __init__(self, graph: Graph, node: Node) -> None:
        self.graph = graph
        self.node = node
        self.attrs = node.attrs
        self.opset = graph.opset
        self.scope = graph.scope

    # inputs -------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.node.inputs)

    def has(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    def input(self, i: int) -> Value:
        if not self.has(i):
            self.fail(f"input {i} is required")
        return self.graph.values[self.node.inputs[i]]

    def optional(self, i: int) -> Value | None:
        return self.input(i) if self.has(i) else None

    def inputs(self) -> list[Value]:
        return [self.input(i) for i in range(self.n_inputs) if self.has(i)]

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    # outputs ------------------------------------------------------------
    def set_output(self, i: int, dtype: DType, shape: Sequence[Dim], *,
                   sym: Sequence[Dim] | None = None, const: np.ndarray | None = None) -> None:
        if i >= len(self.node.outputs) or not self.node.outputs[i]:
            return
        name = self.node.outputs[i]
        v = Value(name, dtype, tuple(D.as_dim(d) for d in shape), const=const,
                  sym=tuple(D.as_dim(s) for s in sym) if sym is not None else None,
                  producer=self.node)
        if v.sym is not None and all(isinstance(s, int) for s in v.sym) and v.const is None:
            v.const = np.array(v.sym, dtype=dtype.np).reshape(
                [int(d) for d in v.shape])
        self.graph.add_value(v)

    # diagnostics and deferred checks ---------------------------------------
    def fail(self, reason: str) -> "None":
        raise CompileError(f"{self.node.label()}: {reason}")

    def require_eq(self, a: Dim, b: Dim, what: str) -> None:
        """``a == b``: an error now if provably false, a run-time check if unknown."""
        if a == b:
            return
        if isinstance(a, int) and isinstance(b, int):
            self.fail(f"{what}: {a} != {b}")
        self.node.checks.append(Check(
            "eq", a, b, f"{self.node.label()}: {what}: {a} = {{0}} does not equal {b} = {{1}}"))

    def require_bcast(self, d: Dim, out: Dim, what: str) -> None:
        """``d`` broadcasts to ``out`` (d is 1 or equal)."""
        if d == out or d == 1:
            return
        if isinstance(d, int) and isinstance(out, int):
            self.fail(f"{what}: dim {d} does not broadcast to {out}")
        self.node.checks.append(Check(
            "bcast", d, out,
            f"{self.node.label()}: {what}: dim {d} = {{0}} does not broadcast with {out} = {{1}}"))

    # shared shape helpers -------------------------------------------------
    def broadcast(self, values: Sequence[Value]) -> tuple[Dim, ...]:
        """numpy broadcasting of the inputs' shapes, with run-time checks for dims whose
        compatibility cannot be decided now. Messages name both inputs and the dim."""
        rank = max(v.rank for v in values)
        shapes = [(1,) * (rank - v.rank) + tuple(v.shape) for v in values]
        out: list[Dim] = []
        for axis in range(rank):
            d: Dim = 1
            for s in shapes:
                try:
                    d = D.bcast(d, s[axis])
                except D.BroadcastError:
                    self.fail(self._bcast_text(values, shapes, axis))
            out.append(d)
            self._name_bcast(d, values, shapes, axis)
        for v, s in zip(values, shapes):
            for axis in range(rank):
                if s[axis] != out[axis] and s[axis] != 1:
                    others = [f"'{w.name}' has {t[axis]}" for w, t in zip(values, shapes) if w is not v]
                    what = f"input '{v.name}' dim {axis - (rank - v.rank)} vs {', '.join(others)}"
                    self.require_bcast(s[axis], out[axis], what)
        return tuple(out)

    def _name_bcast(self, d: Dim, values, shapes, axis: int) -> None:
        """A dim decided only at run time (``bcast(p, q)``) gets a message naming the inputs."""
        atom = d.atom() if isinstance(d, D.Expr) else None
        if not (isinstance(atom, D._Op) and atom.op == "bcast"):
            return
        who = [f"input '{v.name}' dim {axis - (len(s) - v.rank)} ({s[axis]})"
               for v, s in zip(values, shapes) if s[axis] in atom.args]
        vals = ", ".join(f"{a} = {{{k}}}" for k, a in enumerate(atom.args[:2]))
        self.node.checks.append(Check("define", d, d, f"{self.node.label()}: {' and '.join(who)} "
                                                         f"do not broadcast: {vals}"))

    def _bcast_text(self, values, shapes, axis) -> str:
        parts = [f"input '{v.name}' {D.fmt_shape(v.shape)}" for v in values]
        return (f"shapes do not broadcast at output dim {axis}: "
                f"{', '.join(parts)} (dims {', '.join(str(s[axis]) for s in shapes)})")

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        if not -rank <= axis < max(rank, 1):
            self.fail(f"{what} {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def axes(self, axes: Sequence[int], rank: int) -> list[int]:
        """Normalized, distinct axes (a compile error names any out of range or repeated)."""
        out = [self.axis(int(a), rank, "axes entry") for a in axes]
        if len(set(out)) != len(out):
            self.fail(f"axes {list(axes)} repeat an axis")
        return out

    def const_ints(self, v: Value | None, what: str) -> list[int] | None:
        """The elements of an input that must be a compile-time constant (e.g. axes)."""
        if v is None:
            return None
        vals = v.int_contents()
        if vals is None or not all(isinstance(x, int) for x in vals):
            self.fail(f"{what} (input '{v.name}') must be a constant")
        return [int(x) for x in vals]

    def fresh(self, prefix: str) -> D.Expr:
        """A fresh data-dependent symbol, named after the node's op."""
        return self.scope.fresh(prefix, kind="data")


NUMERIC = (FLOAT32, INT32, INT64)


def check_dtype(ctx: InferContext, v: Value, allowed: Sequence[DType]) -> None:
    """Fail naming the input unless its dtype is one the op takes."""
    if v.dtype not in allowed:
        ctx.fail(f"input '{v.name}' has dtype {v.dtype}; {ctx.node.op} takes "
                 f"{', '.join(d.name for d in allowed)}")


def promote_sym(v: Value) -> tuple[Dim, ...] | None:
    """The contents of a small integer tensor as a shape value (``Value.sym``)."""
    if v.const is not None and v.const.size > SYM_LIMIT:
        return None
    return v.int_contents()
