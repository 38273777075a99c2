"""Property tests of shape-manipulating graphs: hypothesis builds small random ONNX graphs of
Shape, Gather (of shape values and of data), Concat, Reshape (targets computed from Shape
values, with 0 and -1), Unsqueeze, Squeeze, Slice (constant and shape-valued bounds,
negative values, steps), Expand, Transpose and broadcasting Add, Mul and Where, over inputs
whose dims are shared symbols. Each graph is compiled once per target and run for several
bindings of its symbols (one with a symbol of 1, one with a symbol of 0), each compared with
onnx.reference.

The generator tracks, for every binding it will try, the concrete shape of every value (and
the contents of integer shape values), and keeps a node only if it is valid for the
bindings it considers. With ``allow_errors`` it may keep a node that only the first binding
satisfies: then onnx.reference rejects the other bindings, and symwasm must reject them too
with a ModelError naming a node (never a crash, a trap or a wrong result).

CI runs a few examples per target, derandomized. A long campaign:
``SYMWASM_HYPOTHESIS_EXAMPLES=300 .venv/bin/python -m pytest tests/test_shape_graph_properties.py -n 0``
(``SYMWASM_HYPOTHESIS_RANDOM=1`` draws a fresh random sequence instead of the fixed one).
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from onnx import helper

import wasm_runtime
from util import assert_outputs_match, build, const, make_model, reference, vinfo
from toolkit.ir.graph import CompileError

TARGETS = ("wasm32", "native")
I64 = np.int64
F32 = np.float32
INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)
SYMS = ("n", "m", "k")
MAX_RANK = 5
MAX_ELEMS = 4096

EXAMPLES = int(os.environ.get("SYMWASM_HYPOTHESIS_EXAMPLES", "0") or 0) or 60
DERANDOMIZE = os.environ.get("SYMWASM_HYPOTHESIS_RANDOM", "0") in ("", "0")


class TooBig(Exception):
    """A node whose result would be too large for a quick test: not generated."""


class Val:
    """A value of the graph being built: kind "data" (float32), "int" (int64) or "bool"; its
    contents for each binding (None once that binding has failed); ``static_len``: an int
    value whose shape symwasm knows at compile time (usable as a whole as a target)."""

    def __init__(self, name: str, kind: str, vals: list, static_len: bool = False) -> None:
        self.name, self.kind, self.vals, self.static_len = name, kind, vals, static_len

    @property
    def ndim(self) -> int:
        return next(v for v in self.vals if v is not None).ndim

    def __repr__(self) -> str:
        return f"{self.name}:{self.kind}{[None if v is None else v.shape for v in self.vals]}"


def _guard(shape) -> tuple[int, ...]:
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_RANK or any(d > 64 for d in shape) or int(np.prod(shape, dtype=object)) > MAX_ELEMS:
        raise TooBig
    return shape


def _reshape(a, t, allowzero):
    """onnx.reference's Reshape (its zeros copy the input's dims unless allowzero)."""
    new = np.array(t, I64, copy=True)
    if np.any(new < -1):
        raise ValueError("a negative target dim other than -1")  # numpy takes any negative as -1
    if not allowzero:
        z = np.where(t == 0)
        new[z] = np.array(a.shape, I64)[z]
    if len(new) > MAX_RANK or any(d > 64 for d in new):
        raise TooBig
    return np.reshape(a, new)


def _expand(a, s):
    _guard(np.broadcast_shapes(a.shape, tuple(int(d) for d in s)))
    return a * np.ones(s, a.dtype)


def _take(a, i, axis):
    """Gather as the spec says: every index in range, even when no element is copied (numpy's
    take, and so onnx.reference, accepts any index into an empty axis when another axis is
    0; onnxruntime and symwasm reject it)."""
    n = a.shape[axis]
    if np.any((i < -n) | (i >= n)):
        raise IndexError(f"index out of range for axis {axis} of size {n}")
    return np.take(a, i, axis=axis)


def _slice(a, starts, ends, axes, steps):
    index = [slice(None)] * a.ndim
    for j, ax in enumerate(axes):
        index[ax] = slice(int(starts[j]), int(ends[j]), int(steps[j]))
    return a[tuple(index)]


class Builder:
    def __init__(self, draw, nbind: int, allow_errors: bool) -> None:
        self.draw = draw
        self.nb = nbind
        self.live = [True] * nbind
        self.allow_errors = allow_errors
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.values: list[Val] = []  # inputs and node outputs (not constants)
        self.bools: list[Val] = []
        self.consumed: set[str] = set()
        self.count = 0

    # ------------------------------------------------------------------ basics
    def pick(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def flip(self) -> bool:
        return self.draw(st.booleans())

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def live_idx(self) -> list[int]:
        return [b for b in range(self.nb) if self.live[b]]

    def scope(self) -> list[int]:
        """The bindings this node is made valid for: every live one, or (allow_errors,
        sometimes) only binding 0, so that onnx.reference and symwasm must reject the others."""
        live = self.live_idx()
        if self.allow_errors and len(live) > 1 and self.draw(st.integers(0, 2)) == 0:
            return [0]
        return live

    def const(self, arr, dtype=I64) -> Val:
        arr = np.asarray(arr, dtype)
        name = self.fresh("c")
        self.inits.append(const(name, arr))
        kind = {"f": "data", "b": "bool"}.get(arr.dtype.kind, "int")
        return Val(name, kind, [arr] * self.nb, static_len=True)

    def node(self, op: str, inputs: list, fn, kind: str | None = None, static_len: bool = False,
             **attrs) -> Val | None:
        """Adds ``op`` if it is valid for binding 0 (and, without allow_errors, every live
        binding); ``fn`` computes its result from the inputs' contents (numpy semantics, as
        onnx.reference)."""
        outs, fails = [], []
        for b in range(self.nb):
            if not self.live[b]:
                outs.append(None)
                continue
            try:
                with np.errstate(all="ignore"):
                    r = np.asarray(fn(*[None if v is None else v.vals[b] for v in inputs]))
                _guard(r.shape)
                outs.append(r)
            except TooBig:
                return None
            except (ValueError, IndexError, TypeError):
                outs.append(None)
                fails.append(b)
        if fails and (0 in fails or not self.allow_errors):
            return None
        for b in fails:
            self.live[b] = False
        name = self.fresh()
        self.nodes.append(helper.make_node(op, [v.name if v is not None else "" for v in inputs], [name],
                                           name=name, **attrs))
        for v in inputs:
            if v is not None:
                self.consumed.add(v.name)
        val = Val(name, kind or inputs[0].kind, outs, static_len)
        (self.bools if val.kind == "bool" else self.values).append(val)
        return val

    def shapes(self, v: Val, scope) -> list[tuple]:
        return [v.vals[b].shape for b in scope]

    def pick_x(self, min_rank: int = 0, max_rank: int = MAX_RANK) -> Val | None:
        """An operand, data (not shape values) two times in three when there is one."""
        data = self.tensors(min_rank, max_rank, ("data",))
        ints = self.tensors(min_rank, max_rank, ("int",))
        if data and (not ints or self.draw(st.integers(0, 2)) > 0):
            return self.pick(data)
        return self.pick(ints) if ints else None

    def tensors(self, min_rank: int = 0, max_rank: int = MAX_RANK, kinds=("data", "int")) -> list[Val]:
        return [v for v in self.values if v.kind in kinds and min_rank <= v.ndim <= max_rank
                and v.vals[0] is not None]

    # ------------------------------------------------------------------ shape pieces
    def dim_piece(self, want: dict[int, int]) -> Val | None:
        """A 1-D int64 value of one element whose contents in each binding ``b`` of ``want``
        are ``want[b]``: an element of an existing shape value, a Shape of a value with that
        dim, or a constant when it is the same everywhere."""
        scope = list(want)
        cands = []
        for v in self.values:
            if any(v.vals[b] is None for b in scope):
                continue
            if v.kind == "int" and v.ndim == 1:
                n = min(len(v.vals[b]) for b in scope)
                cands += [(v, "elem", e) for e in range(n) if all(v.vals[b][e] == want[b] for b in scope)]
            if v.kind in ("data", "int"):
                cands += [(v, "dim", a) for a in range(v.ndim)
                          if all(v.vals[b].shape[a] == want[b] for b in scope)]
        if len(set(want.values())) == 1:
            cands.append((None, "const", want[scope[0]]))
        if not cands:
            return None
        v, how, e = self.pick(cands)
        if how == "const":
            return self.const([e])
        if how == "dim":
            r = v.ndim
            way = self.draw(st.integers(0, 2))
            if way == 0:
                return self.node("Shape", [v], lambda a: np.array(a.shape, I64)[e:e + 1], kind="int",
                                 static_len=True, start=e, end=e + 1)
            if way == 1:  # negative start and end (or none for the last dim)
                end = {} if e == r - 1 and self.flip() else {"end": e + 1 - r if e + 1 < r else e + 1}
                return self.node("Shape", [v], lambda a: np.array(a.shape, I64)[e:e + 1], kind="int",
                                 static_len=True, start=e - r, **end)
            s = self.node("Shape", [v], lambda a: np.array(a.shape, I64), kind="int", static_len=True)
            if s is None:
                return None
            v = s
        lengths = {len(v.vals[b]) for b in scope}
        way = self.draw(st.integers(0, 2))
        if way == 0:
            idx = self.const([e - lengths.pop()] if len(lengths) == 1 and self.flip() else [e])
            return self.node("Gather", [v, idx], lambda a, i: _take(a, i, 0), static_len=True)
        if way == 1:
            s0, s1 = self.const([e]), self.const([e + 1])
            return self.node("Slice", [v, s0, s1], lambda a, s, t: a[int(s[0]):int(t[0])], static_len=True)
        g = self.node("Gather", [v, self.const(e)], lambda a, i: _take(a, i, 0), static_len=True)
        if g is None:
            return None
        return self.node("Unsqueeze", [g, self.const([0])], lambda a, ax: np.expand_dims(a, 0), static_len=True)

    def opaque(self, p: Val | None) -> Val | None:
        """``p`` through a Where of a constant condition: the same contents, which symwasm
        knows only at run time (a kernel computes them)."""
        if p is None or self.draw(st.integers(0, 3)):
            return p
        keep = self.flip()
        c = self.const(np.array([keep] * len(p.vals[0]), np.bool_), np.bool_)
        junk = self.const(np.full(len(p.vals[0]), 7, I64))
        ins = [c, p, junk] if keep else [c, junk, p]
        return self.node("Where", ins, np.where, kind="int", static_len=p.static_len)

    def mul_pieces(self, pieces: list[Val]) -> Val | None:
        acc = pieces[0]
        for p in pieces[1:]:
            acc = self.node("Mul", [acc, p], np.multiply, static_len=True)
            if acc is None:
                return None
        return acc

    def random_dim(self, scope) -> dict[int, int] | None:
        """The dims (per binding of scope) of some axis of some value."""
        cands = [(v, a) for v in self.tensors(1) if all(v.vals[b] is not None for b in scope)
                 for a in range(v.ndim)]
        if not cands:
            return None
        v, a = self.pick(cands)
        return {b: v.vals[b].shape[a] for b in scope}

    def bound_piece(self, scope) -> Val | None:
        """A slice bound from shape values: a dim, maybe plus a constant or negated."""
        want = self.random_dim(scope)
        if want is None:
            return None
        p = self.dim_piece(want)
        if p is None:
            return None
        way = self.draw(st.integers(0, 3))
        if way == 1:
            p = self.node("Add", [p, self.const([self.draw(st.integers(-3, 3))])], np.add, static_len=True)
        if way == 2:
            p = self.node("Mul", [self.const([-1]), p], np.multiply, static_len=True)
        return self.opaque(p)

    def vector(self, entries: list) -> Val | None:
        """A 1-D int64 tensor of ``entries`` (ints, or one-element Vals): one constant, or a
        Concat of the pieces (consecutive ints merged into one constant, or not)."""
        if all(isinstance(e, int) for e in entries):
            return self.const(entries)
        pieces, run = [], []
        merge = self.flip()
        for e in entries:
            if isinstance(e, int):
                run.append(e)
                if not merge:
                    pieces.append(self.const(run))
                    run = []
                continue
            if run:
                pieces.append(self.const(run))
                run = []
            pieces.append(e)
        if run:
            pieces.append(self.const(run))
        if len(pieces) == 1:
            return self.opaque(pieces[0])
        return self.opaque(self.node("Concat", pieces, lambda *xs: np.concatenate(xs, axis=0), static_len=True,
                                     axis=0))

    # ------------------------------------------------------------------ ops
    def op_shape(self):
        x = self.pick_x()
        if x is None:
            return None
        r = x.ndim
        attrs = {}
        if self.flip():
            attrs["start"] = self.draw(st.integers(-r - 1, r + 1))
        if self.flip():
            # onnx.reference computes an end below -rank as rank + end without clamping it
            # to 0 (then Python wraps it again); the spec clamps: test_shape_end_below_rank
            attrs["end"] = self.draw(st.integers(-r, r + 1))
        s, e = attrs.get("start", 0), attrs.get("end")
        return self.node("Shape", [x], lambda a: np.array(a.shape, I64)[s:e], kind="int", static_len=True,
                         **attrs)

    def op_gather_shape(self):
        xs = [v for v in self.tensors(1, 1, ("int",)) if all(len(v.vals[b]) for b in self.live_idx())]
        if not xs:
            return self.op_shape()
        x = self.pick(xs)
        scope = self.scope()
        n = min(len(x.vals[b]) for b in scope)
        if n == 0:
            return None
        ix = st.integers(-n, n - 1)
        idx = self.const(self.draw(st.one_of(ix, st.lists(ix, min_size=1, max_size=3))))
        return self.node("Gather", [x, idx], lambda a, i: _take(a, i, 0), static_len=x.static_len)

    def op_gather(self):
        x = self.pick_x(1)
        if x is None:
            return None
        r = x.ndim
        axis = self.draw(st.integers(-r, r - 1))
        scope = self.scope()
        n = min(x.vals[b].shape[axis] for b in scope)
        # indices from shape values whose elements are in range
        srcs = [v for v in self.tensors(0, 2, ("int",)) if v is not x
                and all(v.vals[b] is not None and np.all((-n <= v.vals[b]) & (v.vals[b] < n)) for b in scope)]
        if srcs and self.draw(st.integers(0, 3)) == 0:
            idx = self.pick(srcs)
        else:
            ix = st.integers(-n, n - 1) if n else st.nothing()
            shape = self.pick([(), (1,), (2,), (3,), (1, 2), (2, 1), (0,)] if n else [(0,)])
            vals = self.draw(st.lists(ix, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))) \
                if n else []
            idx = self.const(np.array(vals, I64).reshape(shape))
        return self.node("Gather", [x, idx], lambda a, i: _take(a, i, axis), axis=axis,
                         static_len=x.static_len and idx.static_len)

    def op_concat(self):
        x = self.pick_x(1)
        if x is None:
            return None
        r = x.ndim
        axis = self.draw(st.integers(-r, r - 1))
        a = axis % r
        scope = self.scope()

        def others(s):
            return s[:a] + s[a + 1:]

        partners = [v for v in self.tensors(r, r, (x.kind,))
                    if all(v.vals[b] is not None and others(v.vals[b].shape) == others(x.vals[b].shape)
                           for b in scope)]
        ins = [x] + self.draw(st.lists(st.sampled_from(partners), min_size=0, max_size=2))
        if x.kind == "int" and r == 1 and self.flip():
            ins.insert(self.draw(st.integers(0, len(ins))), self.const(self.draw(st.lists(
                st.integers(-2, 5), min_size=1, max_size=2))))
        ins = self.draw(st.permutations(ins))
        return self.node("Concat", ins, lambda *xs: np.concatenate(xs, axis=axis), axis=axis,
                         static_len=all(v.static_len for v in ins))

    def op_reshape(self):
        x = self.pick_x()
        if x is None:
            return None
        scope = self.scope()
        r = x.ndim
        groups, cur = [], []
        for i in range(r):
            cur.append(i)
            if i == r - 1 or self.flip():
                groups.append(cur)
                cur = []
        for _ in range(self.draw(st.integers(0, 1 if r else 2))):
            groups.insert(self.draw(st.integers(0, len(groups))), [])
        if len(groups) > MAX_RANK:
            return None
        infer_at = self.draw(st.sampled_from([None] + list(range(len(groups)))))
        entries: list = []
        for j, g in enumerate(groups):
            want = {b: int(np.prod([x.vals[b].shape[i] for i in g], dtype=np.int64)) for b in scope}
            way = self.draw(st.integers(0, 3))
            if j == infer_at:
                entries.append(-1)
            elif len(g) == 1 and g[0] == j and way == 0:
                entries.append(0)  # copy the input's dim
            elif len(set(want.values())) == 1 and way <= 1:
                entries.append(want[scope[0]])  # a literal (checked at run time when symbolic)
            else:
                pieces = [self.dim_piece({b: x.vals[b].shape[i] for b in scope}) for i in g] if g else \
                    [self.dim_piece({b: 1 for b in scope})]
                if any(p is None for p in pieces):
                    return None
                p = self.mul_pieces(pieces)
                if p is None:
                    return None
                entries.append(p)
        # a whole existing shape value as the target, sometimes
        # (no entry that may be negative: test_reshape_target_symbolic_minus_one)
        whole = [v for v in self.tensors(1, 1, ("int",)) if v.static_len and len(v.vals[0]) <= MAX_RANK
                 and all(v.vals[b] is None or np.all(v.vals[b] >= 0) for b in range(self.nb))]
        if whole and self.draw(st.integers(0, 4)) == 0:
            target = self.pick(whole)
        else:
            target = self.vector(entries)
        if target is None:
            return None
        allowzero = 0 not in entries and self.draw(st.integers(0, 3)) == 0
        return self.node("Reshape", [x, target], lambda a, t: _reshape(a, t, allowzero),
                         static_len=False, **({"allowzero": 1} if allowzero else {}))

    def op_unsqueeze(self):
        x = self.pick_x(0, MAX_RANK - 1)
        if x is None:
            return None
        r = x.ndim
        k = self.draw(st.integers(1, min(2, MAX_RANK - r)))
        pos = self.draw(st.permutations(range(r + k)))[:k]
        axes = [p - (r + k) if self.flip() else p for p in pos]
        return self.node("Unsqueeze", [x, self.const(axes)], lambda a, ax: np.expand_dims(a, tuple(sorted(pos))),
                         static_len=x.static_len)

    def op_squeeze(self):
        scope = self.scope()
        cands = [(v, [a for a in range(v.ndim) if all(v.vals[b].shape[a] == 1 for b in scope)])
                 for v in self.tensors(1) if all(v.vals[b] is not None for b in scope)]
        cands = [(v, ax) for v, ax in cands if ax]
        if not cands:
            return None
        x, ones = self.pick(cands)
        pos = self.draw(st.lists(st.sampled_from(ones), min_size=1, max_size=len(ones), unique=True))
        axes = [p - x.ndim if self.flip() else p for p in pos]
        return self.node("Squeeze", [x, self.const(axes)], lambda a, ax: np.squeeze(a, axis=tuple(pos)),
                         static_len=x.static_len)

    def op_slice(self):
        x = self.pick_x(1)
        if x is None:
            return None
        r = x.ndim
        scope = self.scope()
        k = self.draw(st.integers(1, r))
        axes = list(self.draw(st.permutations(range(r)))[:k])
        give_axes = self.flip() or axes != list(range(k))
        if not give_axes:
            axes = list(range(k))
        bound = st.one_of(st.integers(-5, 6), st.sampled_from([INT64_MAX, INT64_MIN, -INT64_MAX, 1 << 40]))
        starts, ends, steps, literal = [], [], [], True
        for _ in axes:
            steps.append(self.draw(st.sampled_from([1, 1, 2, 3, -1, -1, -2])))
            for lst in (starts, ends):
                p = self.bound_piece(scope) if self.draw(st.integers(0, 2)) == 0 else None
                literal = literal and p is None
                lst.append(p if p is not None else self.draw(bound))
        s, e = self.vector(starts), self.vector(ends)
        if s is None or e is None:
            return None
        ins = [x, s, e]
        axes_vals = [a - r if self.flip() else a for a in axes]
        if give_axes or steps != [1] * k:
            ins.append(self.const(axes_vals) if give_axes else None)
        if steps != [1] * k or self.flip():
            ins += [None] * (4 - len(ins)) + [self.const(steps)]
        return self.node("Slice", ins, lambda a, s_, e_, *rest: _slice(a, s_, e_, axes, steps),
                         kind=x.kind, static_len=x.static_len and literal)

    def op_expand(self):
        x = self.pick_x(0, MAX_RANK)
        if x is None:
            return None
        scope = self.scope()
        r = x.ndim
        whole = [v for v in self.tensors(1, 1, ("int",)) if v.static_len and len(v.vals[0]) <= MAX_RANK]
        if whole and self.draw(st.integers(0, 3)) == 0:
            target = self.pick(whole)
        else:
            t = self.draw(st.integers(max(0, r - 2), min(MAX_RANK, r + 2)))
            out = max(r, t)
            entries: list = []
            for p in range(out - t, out):
                xa = p - (out - r)  # x's axis here, or < 0
                way = self.draw(st.integers(0, 3))
                if xa >= 0:
                    dims = {b: x.vals[b].shape[xa] for b in scope}
                    if way == 0:
                        entries.append(1)
                        continue
                    if not (way == 1 and set(dims.values()) == {1}):
                        if len(set(dims.values())) == 1 and self.flip():
                            entries.append(dims[scope[0]])
                        else:
                            entries.append(self.dim_piece(dims))
                        continue
                if way <= 1:
                    entries.append(self.draw(st.integers(1, 3)))
                else:
                    want = self.random_dim(scope)
                    entries.append(self.dim_piece(want) if want is not None else 1)
            if any(e is None for e in entries):
                return None
            target = self.vector(entries)
        if target is None:
            return None
        return self.node("Expand", [x, target], _expand, static_len=False)

    def op_transpose(self):
        x = self.pick_x(1)
        if x is None:
            return None
        perm = list(self.draw(st.permutations(range(x.ndim))))
        if self.draw(st.integers(0, 4)) == 0:
            return self.node("Transpose", [x], lambda a: np.transpose(a), static_len=x.static_len and x.ndim == 1)
        return self.node("Transpose", [x], lambda a: np.transpose(a, perm), perm=perm,
                         static_len=x.static_len and x.ndim == 1)

    def _partner(self, x: Val, scope) -> Val:
        """A value broadcasting with ``x`` in every binding of scope: another value, or a
        constant shaped like some of x's trailing dims (1 where they differ)."""
        partners = [v for v in self.tensors(0, MAX_RANK, (x.kind,))
                    if all(v.vals[b] is not None for b in scope)
                    and all(_broadcasts(x.vals[b].shape, v.vals[b].shape) for b in scope)]
        if partners and self.flip():
            return self.pick(partners)
        return self._const_like(x, scope, x.kind)

    def _const_like(self, x: Val, scope, kind: str) -> Val:
        r = x.ndim
        keep = self.draw(st.integers(0, r))
        shape = []
        for a in range(r - keep, r):
            dims = {x.vals[b].shape[a] for b in scope}
            shape.append(dims.pop() if len(dims) == 1 and self.flip() else 1)
        shape = [1] * self.draw(st.integers(0, 1 if r < MAX_RANK else 0)) + shape
        if kind == "data":
            arr = np.random.default_rng(self.count).standard_normal(shape).astype(F32)
        elif kind == "bool":
            arr = np.random.default_rng(self.count).random(shape) < 0.5
        else:
            arr = np.random.default_rng(self.count).integers(-2, 4, shape).astype(I64)
        return self.const(arr, arr.dtype)

    def op_binary(self):
        x = self.pick_x()
        if x is None:
            return None
        scope = self.scope()
        y = self._partner(x, scope)
        op = self.pick(["Add", "Mul"])
        a, b = (x, y) if self.flip() else (y, x)
        return self.node(op, [a, b], np.add if op == "Add" else np.multiply,
                         static_len=a.static_len and b.static_len and max(a.ndim, b.ndim) <= 1)

    def op_where(self):
        x = self.pick_x()
        if x is None:
            return None
        scope = self.scope()
        y = self._partner(x, scope)
        ints = [v for v in self.tensors(0, MAX_RANK, ("int",)) if all(v.vals[b] is not None for b in scope)
                and all(_broadcasts(x.vals[b].shape, v.vals[b].shape) for b in scope)]
        if ints and self.flip():
            c = self.node("Less", [self.pick(ints), self.const(self.draw(st.integers(0, 4)))], np.less,
                          kind="bool")
            if c is None:
                return None
        else:
            c = self._const_like(x, scope, "bool")
        a, b = (x, y) if self.flip() else (y, x)
        return self.node("Where", [c, a, b], np.where, kind=x.kind,
                         static_len=a.static_len and b.static_len and max(a.ndim, b.ndim, c.ndim) <= 1)

    OPS = ("shape", "reshape", "slice", "expand", "gather_shape", "gather", "concat", "unsqueeze", "squeeze",
           "transpose", "binary", "where", "reshape", "slice", "expand", "shape")


def _broadcasts(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


@st.composite
def graphs(draw):
    """(model, list of feeds): a random shape graph and the bindings it is run with."""
    n_in = draw(st.integers(1, 3))
    dim = st.one_of(st.sampled_from(SYMS), st.integers(1, 4))
    in_shapes = [draw(st.lists(dim, min_size=0 if k else 1, max_size=3)) for k in range(n_in)]
    used = sorted({d for s in in_shapes for d in s if isinstance(d, str)})
    # binding 0 is generic; binding 1 has a symbol of 1, binding 2 a symbol of 0 (where
    # the graph allows it), binding 3 any values
    bindings = [{s: draw(st.integers(1, 5)) for s in used}]
    for special in (1, 0):
        b = {s: draw(st.integers(0, 5)) for s in used}
        if used:
            b[draw(st.sampled_from(used))] = special
        bindings.append(b)
    bindings.append({s: draw(st.integers(0, 5)) for s in used})
    g = Builder(draw, len(bindings), allow_errors=draw(st.integers(0, 2)) == 0)
    inputs = []
    for k, shape in enumerate(in_shapes):
        name = "xyz"[k]
        vals = [np.zeros([b[d] if isinstance(d, str) else d for d in shape], F32) for b in bindings]
        g.values.append(Val(name, "data", vals))
        inputs.append(vinfo(name, F32, shape))
    for _ in range(draw(st.integers(1, 10))):
        getattr(g, "op_" + draw(st.sampled_from(Builder.OPS)))()
    if not g.nodes:
        g.op_shape()
    produced = [v for v in g.values[n_in:] + g.bools]
    outs = [v for v in produced if v.name not in g.consumed or draw(st.integers(0, 3)) == 0]
    dt = {"data": F32, "int": I64, "bool": np.bool_}
    model = make_model(g.nodes, inputs, [vinfo(v.name, dt[v.kind], None) for v in outs], g.inits)
    rng = np.random.default_rng(0)
    feeds = [{name: rng.standard_normal(v.vals[b].shape).astype(F32) for name, v in
              zip("xyz", g.values[:n_in])} for b in range(len(bindings))]
    return model, feeds, bindings, [not ok for ok in g.live]


def check_graph(model: onnx.ModelProto, feeds_list, target: str, invalid=None) -> None:
    """Compile once; every binding gives onnx.reference's outputs, or (where onnx.reference
    rejects it, or ``invalid`` says the spec does) a ModelError naming a node."""
    try:
        m = build(model, target)
    except CompileError as e:
        raise AssertionError(f"compile error on a valid graph: {e}") from e
    valid = 0
    for b, feeds in enumerate(feeds_list):
        note(f"binding: { {k: v.shape for k, v in feeds.items()} }")
        try:
            want = reference(model, feeds)
            if invalid is not None and invalid[b]:
                raise ValueError("invalid by the spec (a Gather index out of range of an empty axis)")
        except Exception as e:  # noqa: BLE001 - onnx.reference rejects this binding
            note(f"onnx.reference rejects it: {type(e).__name__}: {e}")
            with pytest.raises(wasm_runtime.ModelError, match=r"node '") as info:
                m.run(feeds)
            assert info.value.status != wasm_runtime.STATUS["INTERNAL"], str(info.value)
            continue
        valid += 1
        assert_outputs_match(m.run(feeds), want)
    assert valid >= 1


@pytest.mark.parametrize("tgt", TARGETS)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(graphs())
def test_shape_graphs_match_reference(tgt, case):
    model, feeds_list, bindings, invalid = case
    note(onnx.printer.to_text(model.graph))
    note(f"bindings: {bindings}")
    check_graph(model, feeds_list, tgt, invalid)


# ----------------------------------------------------------------------------- regressions
# Plain tests of what the property test found (minimized; fixed in toolkit/ops/shape.py and
# toolkit/passes/dce.py), and of the places where it departs from onnx.reference.


def _node(op: str, ins: list[str], out: str, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, ins, [out], name=out, **attrs)


def _ints(name: str, *values: int) -> onnx.TensorProto:
    return const(name, np.array(values, I64))


def _feeds(name: str, *shapes) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{name: rng.standard_normal(s).astype(F32)} for s in shapes]


@pytest.mark.parametrize("tgt", TARGETS)
def test_shape_end_below_rank(tgt):
    """Shape-15 clamps ``end`` to [0, rank]: Shape(x, end=-4) of a rank-3 x is empty.
    onnx.reference computes rank + end = -1 and slices [0:-1] (two dims), so the generator
    draws no end below -rank; this checks symwasm against the spec."""
    model = make_model([_node("Shape", ["x"], "s", end=-4), _node("Shape", ["x"], "t", start=-9, end=-3)],
                       [vinfo("x", F32, ["n", "n", 1])], [vinfo("s", I64, None), vinfo("t", I64, None)])
    m = build(model, tgt)
    for feeds in _feeds("x", (2, 2, 1), (0, 0, 1)):
        out = m.run(feeds)
        assert out["s"].shape == (0,) and out["t"].shape == (0,)


@pytest.mark.parametrize("tgt", TARGETS)
def test_gather_index_out_of_range_of_an_empty_axis(tgt):
    """Gather(x, 0, axis=1) of x: [n, n] with n = 0 copies nothing, but the index is out of
    range: onnxruntime and symwasm reject it, onnx.reference (numpy's take) returns an empty
    tensor."""
    model = make_model([_node("Gather", ["x", "i"], "y", axis=1)], [vinfo("x", F32, ["n", "n"])],
                       [vinfo("y", F32, None)], [const("i", np.array(0, I64))])
    m = build(model, tgt)
    for feeds in _feeds("x", (1, 1), (3, 3)):
        assert_outputs_match(m.run(feeds), reference(model, feeds))
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Gather\): index 0 is out of range for axis 1 "
                                                      r"of size 0"):
        m.run({"x": np.zeros((0, 0), F32)})


@pytest.mark.parametrize("tgt", TARGETS)
def test_reshape_minus_one_next_to_a_zero_dim(tgt):
    """Reshape(y: [n, m], [-1, 0]): the 0 copies m; for m = 0 the -1 cannot be inferred
    (onnx.reference and onnxruntime reject it); symwasm returned shape (n, 0)."""
    model = make_model([_node("Reshape", ["y", "t"], "z")], [vinfo("y", F32, ["n", "m"])],
                       [vinfo("z", F32, None)], [_ints("t", -1, 0)])
    m = build(model, tgt)
    for feeds in _feeds("y", (2, 3), (1, 1)):
        assert_outputs_match(m.run(feeds), reference(model, feeds))
    for shape in ((2, 0), (0, 0)):
        with pytest.raises(wasm_runtime.ModelError, match=r"node 'z' \(Reshape\)"):
            m.run({"y": np.zeros(shape, F32)})


def _shape_only_model(op: str, ins: list[str], inputs, inits=()) -> onnx.ModelProto:
    """``y = op(ins)``, whose only use is ``s = Shape(y)``, the graph's output."""
    return make_model([_node(op, ins, "y"), _node("Shape", ["y"], "s")], inputs, [vinfo("s", I64, None)],
                      list(inits))


def _check_rejects(model: onnx.ModelProto, tgt: str, good, bad) -> None:
    m = build(model, tgt)
    assert_outputs_match(m.run(good), reference(model, good))
    with pytest.raises(Exception):
        reference(model, bad)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' "):
        m.run(bad)


@pytest.mark.parametrize("tgt", TARGETS)
def test_shape_only_use_keeps_checks_reshape(tgt):
    """y = Reshape(x: [n], [1]); s = Shape(y). For n = 2 the reshape is invalid (the Reshape was
    dropped as dead code with its check, and symwasm returned [1])."""
    model = _shape_only_model("Reshape", ["x", "t"], [vinfo("x", F32, ["n"])], [_ints("t", 1)])
    _check_rejects(model, tgt, {"x": np.zeros(1, F32)}, {"x": np.zeros(2, F32)})


@pytest.mark.parametrize("tgt", TARGETS)
def test_shape_only_use_keeps_checks_where(tgt):
    """y = Where(c: [2], x: [n], x); s = Shape(y). For n = 3 it does not broadcast (symwasm
    returned [2])."""
    model = _shape_only_model("Where", ["c", "x", "x"], [vinfo("x", F32, ["n"])],
                              [const("c", np.array([True, False]))])
    _check_rejects(model, tgt, {"x": np.zeros(2, F32)}, {"x": np.zeros(3, F32)})


@pytest.mark.parametrize("tgt", TARGETS)
def test_shape_only_use_keeps_checks_add(tgt):
    """y = Add(x: [n], z: [m]); s = Shape(y). For n = 3, m = 2 it fails naming the Add (the error
    was 'model: dims m = 2 and n = 3 do not broadcast')."""
    model = _shape_only_model("Add", ["x", "z"], [vinfo("x", F32, ["n"]), vinfo("z", F32, ["m"])])
    _check_rejects(model, tgt, {"x": np.zeros(2, F32), "z": np.zeros(1, F32)},
                   {"x": np.zeros(3, F32), "z": np.zeros(2, F32)})


@pytest.mark.parametrize("tgt", TARGETS)
def test_reshape_target_symbolic_minus_one(tgt):
    """y = Reshape(x: [n], Mul(Shape(x), [-1])): for n = 1 the target is [-1], a valid
    reshape to (1,) (onnx.reference and onnxruntime agree)."""
    model = make_model([_node("Shape", ["x"], "s"), _node("Mul", ["s", "neg"], "t"), _node("Reshape", ["x", "t"], "y")],
                       [vinfo("x", F32, ["n"])], [vinfo("y", F32, None)], [_ints("neg", -1)])
    m = build(model, tgt)
    feeds = {"x": np.ones(1, F32)}
    assert_outputs_match(m.run(feeds), reference(model, feeds))
