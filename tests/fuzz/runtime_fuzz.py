"""A run-time fuzz campaign: a dozen small models with symbolic dims, each compiled once per
target, run on feeds that hypothesis draws.

- Legal feeds (shapes that bind the symbols consistently, 0-size dims, size-1 broadcasting,
  index values in range; every layout numpy makes: Fortran order, transposed, negative
  strides, strided, stride-0 broadcast, unaligned, big-endian, read-only, scalars, lists;
  dicts and other Mappings) must give what onnx.reference gives ("legal ok"), and leave
  the feed as it was. Under a tight memory limit or a tiny timeout they may instead fail
  with out-of-memory or cancelled.
- Illegal feeds (wrong rank or dtype, a symbol bound to two values, indices out of range,
  zero steps, bad Reshape and Expand targets, sizes past the memory limit or int64, missing,
  unknown or non-array inputs) must be refused with a ``wasm_runtime.ModelError`` that has
  a message ("rejected").
- After every error the same Model must run a legal feed right, or it is a "failed recovery".

Anything else is bad: a wrong result (or an illegal feed accepted), a trap, another
exception ("traceback"; a ModelError with status INTERNAL counts here too), a crash (the
child process dies) or a hang (an input runs past the watchdog). Each target runs in child
processes, so the campaign counts a crash or hang and goes on past that input.

    python -m tests.fuzz.runtime_fuzz [--inputs N] [--seed S] [--targets wasm32,native]

runs N inputs in all, split evenly between the targets (default 1,000), prints a table of
outcomes per target and a reproducer for each bad one, and exits 1 if there is one. Each
model gets the same share of inputs, half of them legal and half spread over its kinds of
illegal feed. The same seed on the same checkout draws the same inputs, on both targets.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import inspect
import itertools
import json
import math
import os
import pkgutil
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Callable

import numpy as np
import onnx
from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings
from hypothesis import strategies as st
from onnx import helper

import wasm_runtime
from tests.util import assert_outputs_match, const, make_model, vinfo

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("wasm32", "native")
GOOD = ("inputs run", "legal ok", "rejected")
BAD = ("wrong results", "traps", "crashes", "hangs", "tracebacks", "failed recoveries")
COLUMNS = GOOD + BAD

LIMIT = 64 << 20  # each Model's memory limit: far above any legal feed, far below the huge ones
RUN_TIMEOUT = 10.0  # seconds, passed to Model.run where it takes a timeout
TAKES_TIMEOUT = "timeout" in inspect.signature(wasm_runtime.Model.run).parameters
# legal feeds run under a limit that may stop them, and the status that says so
MAY_FAIL = {"tight memory limit": "OUT_OF_MEMORY", **({"tiny timeout": "CANCELLED"} if TAKES_TIMEOUT else {})}
HANG_SECONDS = 30.0  # the watchdog: an input running longer than this kills its child
MAX_RESTARTS = 20  # children started per target after crashes and hangs, before giving up
PER_INPUT_SECONDS = 0.2  # and 10 minutes more: a target's whole campaign (some 20 times what it needs)

F32, F16, I8, U8, I16, I32, I64, BOOL = (np.dtype(t) for t in ("float32", "float16", "int8", "uint8", "int16",
                                                                 "int32", "int64", "bool"))
INT64_MIN, INT64_MAX = int(np.iinfo(I64).min), int(np.iinfo(I64).max)
SUPPORTED = [np.dtype(t) for t in ("float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "bool",
                                   "float16", "float64", "uint32", "uint64")]
UNSUPPORTED = [np.dtype(t) for t in ("complex64", "longdouble", "U3", "S2", "object")]


class Tally(Counter):
    """Outcome counts of one target (the keys of COLUMNS), with a reproducer per bad outcome
    and the count of each (kind of feed, outcome) pair, to show what the campaign reached."""

    def __init__(self):
        super().__init__({c: 0 for c in COLUMNS})
        self.failures: list[str] = []
        self.kinds: Counter = Counter()
        self.notes: list[str] = []

    def bad(self) -> int:
        return sum(self[c] for c in BAD)


# ----------------------------------------------------------------------------- strategies

def ints(dtype) -> st.SearchStrategy:
    info = np.iinfo(dtype)
    return st.integers(int(info.min), int(info.max))


ANY_F32 = st.floats(width=32)  # NaN, infinities, -0.0, subnormals
# multiples of 1/8 in [-16, 16]: sums and products of a few are exact in float32, so
# accumulation order cannot make a difference
EXACT_F32 = st.integers(-128, 128).map(lambda v: v / 8)
SMALL = st.integers(0, 4)
DIM = st.one_of(st.integers(0, 4), st.integers(5, 40), st.integers(41, 300))  # past the kernel tiles too
EDGE_I64 = st.one_of(st.integers(-8, 8), st.sampled_from([INT64_MIN, INT64_MIN + 1, INT64_MAX - 1, INT64_MAX]),
                     st.integers(INT64_MIN, INT64_MAX))

LAYOUTS = ("contiguous", "fortran", "transposed", "reversed", "strided", "unaligned", "big-endian", "read-only")


def relayout(a: np.ndarray, layout: str):
    """The same values as ``a`` in another memory layout (or as another kind of object)."""
    if layout == "fortran":
        return np.asfortranarray(a)
    if layout == "transposed":
        return np.ascontiguousarray(a.T).T
    if layout == "reversed":  # negative strides on every axis
        axes = tuple(range(a.ndim))
        return np.flip(np.flip(a, axes).copy(), axes)
    if layout == "strided":
        big = np.zeros(tuple(2 * d for d in a.shape), a.dtype)
        view = big[tuple(slice(None, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    if layout == "unaligned":
        raw = np.zeros(a.nbytes + 1, np.uint8)[1:]
        view = raw.view(a.dtype).reshape(a.shape)
        view[...] = a
        return view
    if layout == "big-endian":
        return a.astype(a.dtype.newbyteorder(">"))
    if layout == "read-only":
        b = a.copy()
        b.flags.writeable = False
        return b
    if layout == "numpy scalar":
        return a[()]
    if layout == "python scalar":
        return a.item()
    if layout == "list":
        return a.tolist()
    return a


def layouts_for(dtype: np.dtype, shape: tuple) -> list[str]:
    """The layouts that keep a feed legal: np.asarray must give back the dtype and shape."""
    python_native = dtype in (I64, BOOL)  # what np.asarray makes of Python ints and bools
    if not shape:  # strides mean nothing to a 0-d array
        out = [layout for layout in LAYOUTS if layout not in ("fortran", "transposed", "reversed", "strided")]
        return out + ["numpy scalar"] + (["python scalar"] if python_native else [])
    out = list(LAYOUTS)
    if python_native and math.prod(shape) > 0:  # an empty list would come back float64
        out.append("list")
    return out


def values(draw, shape, dtype, elements) -> np.ndarray:
    """A C-contiguous array of values from ``elements``: each one drawn for a small array; for a
    bigger one, a few drawn values (the edge cases hypothesis favours: NaN, infinities,
    bounds) spread over it by a generator hypothesis seeds, which costs far less than a draw
    per element."""
    size = math.prod(shape)
    if size <= 8:
        return np.array(draw(st.lists(elements, min_size=size, max_size=size)), dtype).reshape(shape)
    palette = np.array(draw(st.lists(elements, min_size=1, max_size=8)), dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    return palette[rng.integers(0, len(palette), size)].reshape(shape)


def tensor(draw, shape, dtype, elements):
    """An array of ``shape`` and ``dtype`` in a drawn layout, one of which is a stride-0
    broadcast view (its values repeat along one axis)."""
    dtype, shape = np.dtype(dtype), tuple(shape)
    layout = draw(st.sampled_from(layouts_for(dtype, shape) + ["broadcast"]))
    if layout == "broadcast":
        axis = draw(st.integers(0, len(shape) - 1)) if shape else None
        small = shape if axis is None else shape[:axis] + (1,) + shape[axis + 1:]
        return np.broadcast_to(values(draw, small, dtype, elements), shape)
    return relayout(values(draw, shape, dtype, elements), layout)


def laid_out(draw, a: np.ndarray):
    """``a`` (values chosen by the caller) in a drawn layout."""
    return relayout(a, draw(st.sampled_from(layouts_for(a.dtype, a.shape))))


def index_values(size: int) -> st.SearchStrategy:
    """Legal Gather indices into an axis of ``size`` (the array holding them is empty if 0)."""
    return st.integers(-size, size - 1) if size else st.just(0)


def out_of_range(size: int, dtype) -> st.SearchStrategy:
    """Gather indices of ``dtype`` past an axis of ``size``, at either end."""
    info = np.iinfo(dtype)
    return st.one_of(st.integers(size, int(info.max)), st.integers(int(info.min), -size - 1),
                     st.sampled_from([size, -size - 1, int(info.max), int(info.min)]))


# ----------------------------------------------------------------------------- the models


class Case:
    """A model, how to draw legal feeds for it and the illegal feeds only it has (each
    ``fn(draw, base)``, where ``base`` is a legal feed to start from), and its reference."""

    def __init__(self, name: str, model: onnx.ModelProto, legal: Callable, illegal: dict | None = None,
                 ref: Callable | None = None):
        self.name, self.model, self.legal, self.illegal, self.ref = name, model, legal, illegal or {}, ref
        # (name, dtype, shape with ints and symbol names), the symbols as the compiler reads the
        # dim names: two inputs' copies of a name that never meet in an op are two symbols
        # (toolkit/frontend/onnx/shared_dims.py), which a feed may give different sizes
        from toolkit.frontend.onnx.importer import import_model

        graph = import_model(model)
        self.inputs = [(vi.name, helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type),
                        tuple(d if isinstance(d, int) else str(d) for d in graph.values[vi.name].shape))
                       for vi in model.graph.input]
        # dims no feed may change alone: static ones, and symbols that appear twice
        uses = Counter(d for _, _, dims in self.inputs for d in dims if isinstance(d, str))
        self.pinned = [(n, axis) for n, _, dims in self.inputs for axis, d in enumerate(dims)
                       if isinstance(d, int) or uses[d] > 1]
        # its own kinds first: a short campaign reaches the first kinds of each model
        self.kinds = list(self.illegal) + [k for k in GENERIC if k != "mismatched dim" or self.pinned]
        self.kinds += ["huge input"] if any(dims for _, _, dims in self.inputs) else []
        self.kinds += list(MAY_FAIL)


def _broadcast_add() -> Case:
    """Add of (n, m) and (k,), which broadcast when k or m is 1 or k = m; int8 Mul, which wraps."""
    model = make_model([helper.make_node("Add", ["x", "b"], ["y"], name="add"),
                        helper.make_node("Mul", ["p", "q"], ["w"], name="mul")],
                       [vinfo("x", F32, ["n", "m"]), vinfo("b", F32, ["k"]), vinfo("p", I8, ["n", 1]),
                        vinfo("q", I8, ["m"])], [vinfo("y", F32, None), vinfo("w", I8, None)])

    def feed(draw, n, m, k):
        return {"x": tensor(draw, (n, m), F32, ANY_F32), "b": tensor(draw, (k,), F32, ANY_F32),
                "p": tensor(draw, (n, 1), I8, ints(I8)), "q": tensor(draw, (m,), I8, ints(I8))}

    def legal(draw):
        n, m = draw(DIM), draw(DIM)
        return feed(draw, n, m, draw(SMALL) if m == 1 else draw(st.sampled_from([1, m])))

    def mismatch(draw, base):
        n, m = np.shape(base["x"])[0], draw(st.integers(2, 6))
        return feed(draw, n, m, draw(st.sampled_from([v for v in range(8) if v not in (1, m)])))

    return Case("broadcast_add", model, legal, {"broadcast mismatch": mismatch})


def _gather() -> Case:
    """Gather with int64 indices on axis 0 and int32 ones on axis 1, values from the feed."""
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y0"], axis=0, name="g0"),
                        helper.make_node("Gather", ["x", "j"], ["y1"], axis=1, name="g1")],
                       [vinfo("x", F32, ["n", "m"]), vinfo("i", I64, ["k"]), vinfo("j", I32, ["p", "q"])],
                       [vinfo("y0", F32, None), vinfo("y1", F32, None)])

    def legal(draw):
        n, m = draw(DIM), draw(SMALL)
        k = draw(SMALL) if n else 0  # no index is in range of an empty axis
        p, q = draw(SMALL), draw(SMALL)
        if not m:
            p = 0
        return {"x": tensor(draw, (n, m), F32, ANY_F32), "i": tensor(draw, (k,), I64, index_values(n)),
                "j": tensor(draw, (p, q), I32, index_values(m))}

    def bad_index(draw, base):
        n, m = np.shape(base["x"])
        name, size, dtype = draw(st.sampled_from([("i", n, I64), ("j", m, I32)]))
        shape = (draw(st.integers(1, 4)),) if name == "i" else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        idx = values(draw, shape, dtype, index_values(size) if size else ints(dtype))
        idx.flat[draw(st.integers(0, idx.size - 1))] = draw(out_of_range(size, dtype))
        return {**base, name: laid_out(draw, idx)}

    return Case("gather", model, legal, {"index out of range": bad_index})


def _divisors(v: int) -> list[int]:
    return [d for d in range(1, v + 1) if v % d == 0]


def _reshape() -> Case:
    """Reshape to a target from the feed (0 copies the input's dim, -1 is inferred), and to
    Concat(Shape(x)[1:2], [-1]), a target built from the input's own shape."""
    model = make_model([helper.make_node("Reshape", ["x", "t"], ["y"], name="r_data"),
                        helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "one", "two"], ["s1"]),
                        helper.make_node("Concat", ["s1", "minus1"], ["u"], axis=0),
                        helper.make_node("Reshape", ["x", "u"], ["z"], name="r_shape")],
                       [vinfo("x", F32, ["p", "q"]), vinfo("t", I64, [3])],
                       [vinfo("y", F32, None), vinfo("z", F32, None)],
                       [const("one", np.array([1])), const("two", np.array([2])), const("minus1", np.array([-1]))])

    def target(draw, shape):
        total = math.prod(shape)
        if total:
            d0 = draw(st.sampled_from(_divisors(total)))
            d1 = draw(st.sampled_from(_divisors(total // d0)))
            t = [d0, d1, total // d0 // d1]
            if draw(st.booleans()):
                t[draw(st.integers(0, 2))] = -1
        else:  # a literal 0 copies the input's dim: the zero must come from an empty input dim
            t = [draw(st.integers(1, 4)) for _ in range(3)]
            t[draw(st.sampled_from([a for a in (0, 1) if shape[a] == 0]))] = 0
        for a in (0, 1):
            if t[a] == shape[a] and draw(st.booleans()):
                t[a] = 0
        return t

    def feed(draw, shape):
        return {"x": tensor(draw, shape, F32, ANY_F32), "t": laid_out(draw, np.array(target(draw, shape), I64))}

    def legal(draw):
        p = draw(DIM)
        return feed(draw, (p, draw(st.integers(0 if p else 1, 8))))  # [q, -1] cannot infer -1 for (0, 0)

    def with_target(make):
        def fn(draw, base):
            return {**base, "t": laid_out(draw, np.array(make(draw, math.prod(np.shape(base["x"]))), I64))}
        return fn

    def wrong_product(draw, total):
        t = [draw(st.integers(1, 6)) for _ in range(3)]
        if math.prod(t) == total:
            t[0] += 1
        return t

    def two_inferred(draw, total):
        t = [-1, -1, draw(st.integers(1, 4))]
        return draw(st.permutations(t))

    def negative(draw, total):
        t = [draw(st.integers(1, 4)) for _ in range(3)]
        t[draw(st.integers(0, 2))] = draw(st.one_of(st.integers(INT64_MIN, -2), st.integers(-5, -2)))
        return t

    def copy_past_rank(draw, total):
        return [draw(st.integers(-1, 4)), draw(st.integers(1, 4)), 0]

    def overflow(draw, total):
        """A product past int64 that wraps around, perhaps onto the right total."""
        a = draw(st.integers(2, 1 << 32))
        t = [a, draw(st.integers(INT64_MAX // a + 1, INT64_MAX)), draw(st.integers(1, 3))]
        return draw(st.permutations(t))

    def empty_both(draw, base):
        return feed(draw, (0, 0))

    return Case("reshape", model, legal,
                {"wrong product": with_target(wrong_product), "two -1": with_target(two_inferred),
                 "negative dim": with_target(negative), "0 past the input rank": with_target(copy_past_rank),
                 "overflowing target": with_target(overflow), "-1 next to a copied 0": empty_both})


def _argwhere() -> Case:
    """Transpose(NonZero(x > 0)): an output length known only from the data."""
    model = make_model([helper.make_node("Greater", ["x", "zero"], ["mask"]),
                        helper.make_node("NonZero", ["mask"], ["nz"]),
                        helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0])],
                       [vinfo("x", F32, ["n", "m"])], [vinfo("idx", I64, None)], [const("zero", np.float32(0))])

    def legal(draw):
        return {"x": tensor(draw, (draw(DIM), draw(DIM)), F32, ANY_F32)}

    return Case("argwhere", model, legal)


def _slice() -> Case:
    """Slice with starts, ends and steps from the feed, extremes of int64 included."""
    model = make_model([helper.make_node("Slice", ["x", "s", "e", "axes"], ["y"], name="s_default"),
                        helper.make_node("Slice", ["x", "s", "e", "axes", "st"], ["z"], name="s_steps")],
                       [vinfo("x", F32, ["n", 3, "m"]), vinfo("s", I64, [2]), vinfo("e", I64, [2]),
                        vinfo("st", I64, [2])], [vinfo("y", F32, None), vinfo("z", F32, None)],
                       [const("axes", np.array([0, -1]))])
    steps = st.one_of(st.integers(-4, 4), EDGE_I64).map(lambda v: v or 1)

    def legal(draw):
        return {"x": tensor(draw, (draw(DIM), 3, draw(SMALL)), F32, ANY_F32),
                "s": tensor(draw, (2,), I64, EDGE_I64), "e": tensor(draw, (2,), I64, EDGE_I64),
                "st": tensor(draw, (2,), I64, steps)}

    def zero_step(draw, base):
        st_ = np.array(draw(st.lists(steps, min_size=2, max_size=2)), I64)
        st_[draw(st.integers(0, 1))] = 0
        return {**base, "st": laid_out(draw, st_)}

    return Case("slice", model, legal, {"step 0": zero_step})


def _range() -> Case:
    """Range over int64 and int32 scalars from the feed; lengths exact at the extremes. The
    reference is Python's range (onnx.reference's np.arange loses precision there)."""
    model = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="range64"),
                        helper.make_node("Range", ["s32", "l32", "d32"], ["y32"], name="range32")],
                       [vinfo(n, I64, []) for n in "sld"] + [vinfo(n + "32", I32, []) for n in "sld"],
                       [vinfo("y", I64, None), vinfo("y32", I32, None)])
    halves = {"": I64, "32": I32}

    def scalars(draw, suffix, start_limit_delta):
        return {k + suffix: tensor(draw, (), halves[suffix], st.just(v)) for k, v in zip("sld", start_limit_delta)}

    def bounds(suffix):
        info = np.iinfo(halves[suffix])
        return int(info.min), int(info.max)

    def legal_half(draw, suffix):
        lo, hi = bounds(suffix)
        d = draw(st.one_of(st.integers(-4, 4), st.integers(lo, hi), st.sampled_from([lo, lo + 1, hi]))) or 1
        s = draw(st.one_of(st.integers(-10, 10), st.integers(lo, hi), st.sampled_from([lo, hi])))
        n = draw(st.integers(0, 40))
        jitter = draw(st.integers(0, abs(d) - 1))  # any limit in (s + (n-1)d, s + nd] gives n elements
        limit = min(max(s + n * d - (jitter if d > 0 else -jitter), lo), hi)
        return scalars(draw, suffix, (s, limit, d))

    def legal(draw):
        return {**legal_half(draw, ""), **legal_half(draw, "32")}

    def zero_delta(draw, base):
        suffix = draw(st.sampled_from(list(halves)))
        lo, hi = bounds(suffix)
        return {**base, **scalars(draw, suffix, (draw(st.integers(lo, hi)), draw(st.integers(lo, hi)), 0))}

    def huge(draw, base):
        """More elements than the memory limit holds, up to the whole int64 span."""
        suffix = draw(st.sampled_from(list(halves)))
        lo, hi = bounds(suffix)
        if draw(st.booleans()):
            triple = draw(st.sampled_from([(lo, hi, 1), (hi, lo, -1), (0, lo, -1), (lo, hi, 2)]))
        else:
            count = draw(st.integers(LIMIT // halves[suffix].itemsize + 1, hi))
            step = draw(st.integers(1, max(1, hi // count)))
            if draw(st.booleans()):
                s = draw(st.integers(lo, hi - count * step))
                triple = (s, s + count * step, step)
            else:
                s = draw(st.integers(lo + count * step, hi))
                triple = (s, s - count * step, -step)
        return {**base, **scalars(draw, suffix, triple)}

    def ref(feeds):
        out = {}
        for suffix, dtype in halves.items():
            s, limit, d = (int(np.asarray(feeds[k + suffix])) for k in "sld")
            out["y" + suffix] = np.array(list(range(s, limit, d)), dtype)
        return out

    return Case("range", model, legal, {"delta 0": zero_delta, "huge length": huge}, ref=ref)


def _matmul() -> Case:
    """A batch of (n, k) by (k, m), k past a kernel tile at times."""
    model = make_model([helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")],
                       [vinfo("a", F32, ["b", "n", "k"]), vinfo("w", F32, ["k", "m"])], [vinfo("y", F32, None)])

    def legal(draw):
        b, n, k, m = draw(SMALL), draw(DIM), draw(st.one_of(SMALL, st.integers(5, 20))), draw(DIM)
        return {"a": tensor(draw, (b, n, k), F32, EXACT_F32), "w": tensor(draw, (k, m), F32, EXACT_F32)}

    return Case("matmul", model, legal)


def _concat_reduce() -> Case:
    """Concat on the axis of two symbols, then ReduceSum over each axis, keeping dims or not."""
    model = make_model([helper.make_node("Concat", ["a", "c"], ["cat"], axis=1, name="cat"),
                        helper.make_node("ReduceSum", ["cat", "ax1"], ["r1"], keepdims=1, name="sum1"),
                        helper.make_node("ReduceSum", ["cat", "ax0"], ["r0"], keepdims=0, name="sum0")],
                       [vinfo("a", F32, ["n", "p"]), vinfo("c", F32, ["n", "q"])],
                       [vinfo("cat", F32, None), vinfo("r1", F32, None), vinfo("r0", F32, None)],
                       [const("ax1", np.array([1])), const("ax0", np.array([0]))])

    def legal(draw):
        n = draw(DIM)
        return {"a": tensor(draw, (n, draw(SMALL)), F32, EXACT_F32), "c": tensor(draw, (n, draw(DIM)), F32, EXACT_F32)}

    return Case("concat_reduce", model, legal)


def _where_expand() -> Case:
    """Where over (1, m), (n, m) and (m,), then Expand to a shape from the feed."""
    model = make_model([helper.make_node("Where", ["c", "x", "y"], ["w"], name="where"),
                        helper.make_node("Expand", ["w", "t"], ["e"], name="expand")],
                       [vinfo("c", BOOL, [1, "m"]), vinfo("x", F32, ["n", "m"]), vinfo("y", F32, ["m"]),
                        vinfo("t", I64, [3])], [vinfo("w", F32, None), vinfo("e", F32, None)])

    def operands(draw, n, m):
        return {"c": tensor(draw, (1, m), BOOL, st.booleans()), "x": tensor(draw, (n, m), F32, ANY_F32),
                "y": tensor(draw, (m,), F32, ANY_F32)}

    def to(draw, size):
        """A target dim that broadcasts with ``size``."""
        return draw(st.integers(0, 4)) if size == 1 else draw(st.sampled_from([1, size]))

    def legal(draw):
        n, m = draw(DIM), draw(SMALL)
        t = np.array([draw(st.integers(0, 3)), to(draw, n), to(draw, m)], I64)
        return {**operands(draw, n, m), "t": laid_out(draw, t)}

    def no_broadcast(draw, base):
        n, m = np.shape(base["x"])
        axes = [a for a, size in ((1, n), (2, m)) if size != 1]
        if not axes:
            return negative(draw, base)
        t = np.array(base["t"]).copy()
        a = draw(st.sampled_from(axes))
        size = (n, m)[a - 1]
        t[a] = draw(st.sampled_from([v for v in range(7) if v not in (1, size)]))
        return {**base, "t": laid_out(draw, t)}

    def negative(draw, base):
        t = np.array(base["t"]).copy()
        t[draw(st.integers(0, 2))] = draw(st.one_of(st.integers(-5, -1), st.integers(INT64_MIN, -1)))
        return {**base, "t": laid_out(draw, t)}

    def huge(draw, base):
        """(1, 1) expanded to more elements than the limit holds, the count perhaps past int64."""
        t = [draw(st.integers(LIMIT // 4 + 1, INT64_MAX)), draw(st.integers(1, INT64_MAX)), draw(st.integers(1, 8))]
        return {**operands(draw, 1, 1), "t": laid_out(draw, np.array(draw(st.permutations(t)), I64))}

    return Case("where_expand", model, legal,
                {"does not broadcast": no_broadcast, "negative dim": negative, "huge target": huge})


def _cast() -> Case:
    """Casts between int8, uint8, int16, float16, bool and int64, integers wrapping as numpy's
    do (floats are kept in range of the integer types they are cast to)."""
    casts = {"a": (I8, [F32, U8, BOOL]), "b": (U8, [I8, F16]), "c": (I16, [I8, BOOL, F32]),
             "d": (F16, [F32, I32, BOOL, I64]), "e": (BOOL, [F32, I64, U8]), "f": (I64, [F16, I16, U8, F32])}
    nodes, outputs = [], []
    for src, (_, dsts) in casts.items():
        for dst in dsts:
            to = helper.np_dtype_to_tensor_dtype(dst)
            nodes.append(helper.make_node("Cast", [src], [f"{src}_{dst.name}"], to=to))
            outputs.append(vinfo(f"{src}_{dst.name}", dst, None))
    model = make_model(nodes, [vinfo(src, dt, ["n"]) for src, (dt, _) in casts.items()], outputs)
    elements = {I8: ints(I8), U8: ints(U8), I16: ints(I16), F16: st.floats(-1000, 1000, width=16),
                BOOL: st.booleans(), I64: ints(I64)}

    def legal(draw):
        n = draw(DIM)
        return {src: tensor(draw, (n,), dt, elements[dt]) for src, (dt, _) in casts.items()}

    return Case("cast", model, legal)


def _argmax() -> Case:
    """ArgMax over each axis, first and last index, on values that tie and include NaN."""
    model = make_model([helper.make_node("ArgMax", ["x"], ["first"], axis=1, keepdims=1, name="am1"),
                        helper.make_node("ArgMax", ["x"], ["last"], axis=0, keepdims=0, select_last_index=1,
                                         name="am0")],
                       [vinfo("x", F32, ["n", "m"])], [vinfo("first", I64, None), vinfo("last", I64, None)])
    ties = st.sampled_from([-1.0, 0.0, 2.5, np.inf, -np.inf, np.nan])

    def legal(draw):
        return {"x": tensor(draw, (draw(st.integers(1, 6)), draw(st.integers(1, 20))), F32, ties)}

    def empty_axis(draw, base):
        """(0, 0) is left out: both outputs are empty then, so nothing asks for an argmax."""
        size = draw(st.integers(1, 4))
        shape = draw(st.sampled_from([(0, size), (size, 0)]))
        return {"x": tensor(draw, shape, F32, ties)}

    return Case("argmax", model, legal, {"empty axis": empty_axis})


def _count_range() -> Case:
    """Range(0, count of x > 0, 1): a length that only the data gives, through Shape and Gather."""
    model = make_model([helper.make_node("Greater", ["x", "zero"], ["mask"]),
                        helper.make_node("NonZero", ["mask"], ["nz"]),
                        helper.make_node("Shape", ["nz"], ["sh"]), helper.make_node("Gather", ["sh", "one"], ["cnt"]),
                        helper.make_node("Range", ["zero_i", "cnt", "one"], ["y"])],
                       [vinfo("x", F32, ["n", 3])], [vinfo("y", I64, None)],
                       [const("zero", np.float32(0)), const("zero_i", np.int64(0)), const("one", np.int64(1))])

    def legal(draw):
        return {"x": tensor(draw, (draw(DIM), 3), F32, ANY_F32)}

    return Case("count_range", model, legal)


# ----------------------------------------------------------------------------- illegal feeds of any model

def _pick(draw, case: Case, ranked=False):
    names = [n for n, _, dims in case.inputs if dims or not ranked]
    name = draw(st.sampled_from(names))
    return name, next(i for i in case.inputs if i[0] == name)


def _wrong_rank(draw, case, base):
    name, _ = _pick(draw, case)
    a = np.asarray(base[name])
    fewer = a.ndim >= 2 or a.size == 1  # two dims merged, or a single element made 0-d
    how = draw(st.sampled_from(["one more", "past the maximum"] + (["one less"] if a.ndim and fewer else [])))
    if how == "one more":
        return {**base, name: a[None]}
    if how == "past the maximum":
        return {**base, name: a.reshape(a.shape + (1,) * (9 - a.ndim))}
    return {**base, name: a.reshape(a.shape[:-2] + (a.shape[-2] * a.shape[-1],) if a.ndim >= 2 else ())}


def _wrong_dtype(draw, case, base):
    name, (_, dtype, _) = _pick(draw, case)
    other = draw(st.sampled_from([d for d in SUPPORTED if d != dtype] + UNSUPPORTED))
    return {**base, name: np.asarray(base[name]).astype(other)}


def _mismatched_dim(draw, case, base):
    """A static dim, or a symbol that another input binds too, given another value."""
    name, axis = draw(st.sampled_from(case.pinned))
    a = np.asarray(base[name])
    shape = list(a.shape)
    shape[axis] = draw(st.sampled_from([v for v in (0, 1, 2, shape[axis] + 1, shape[axis] + 7) if v != shape[axis]]))
    return {**base, name: np.resize(a, shape)}


def _missing_input(draw, case, base):
    name, _ = _pick(draw, case)
    return {k: v for k, v in base.items() if k != name}


def _unknown_input(draw, case, base):
    name = draw(st.sampled_from(["bogus", "", "X", " x", "x\0", "é", 0, None, b"x"]))
    return {**base, name: np.zeros(2, np.float32)}


def _not_a_mapping(draw, case, base):
    """Neither a mapping nor a list or tuple of one array per input (in the inputs' order)."""
    how = draw(st.sampled_from(["short list", "long tuple", "None", "str", "array"]))
    return {"short list": list(base.values())[:-1], "long tuple": tuple(base.values()) + (np.zeros(1),),
            "None": None, "str": "x", "array": np.zeros(3, np.float32)}[how]


NOT_ARRAYS = [None, "text", {"a": 1}, object(), [[1.0], [1.0, 2.0]], b"\x00\x01", 1 + 2j, 1.5, 2 ** 70]


def _not_an_array(draw, case, base):
    name, _ = _pick(draw, case)
    return {**base, name: draw(st.sampled_from(NOT_ARRAYS))}


def _huge_input(draw, case, base, limit: int):
    """A stride-0 view standing for more bytes than ``limit``; the other dims at least 1."""
    name, (_, dtype, _) = _pick(draw, case, ranked=True)
    shape = [max(1, d) for d in np.shape(base[name])]
    axis = draw(st.integers(0, len(shape) - 1))
    shape[axis] = draw(st.integers(limit // dtype.itemsize + 1, 1 << 40))
    return {**base, name: np.broadcast_to(np.zeros((), dtype), shape)}


GENERIC = {"wrong rank": _wrong_rank, "wrong dtype": _wrong_dtype, "mismatched dim": _mismatched_dim,
           "missing input": _missing_input, "unknown input": _unknown_input, "not a mapping": _not_a_mapping,
           "not an array": _not_an_array}


def cases() -> list[Case]:
    return [_broadcast_add(), _gather(), _reshape(), _argwhere(), _slice(), _range(), _matmul(), _concat_reduce(),
            _where_expand(), _cast(), _argmax(), _count_range()]


class Plan:
    """One input: the feeds, their kind, the memory limit and timeout to run them under (None:
    the campaign's), and a legal feed for the recovery check."""

    def __init__(self, case: Case, kind: str, feeds, recovery: dict, limit: int | None = None,
                 timeout: float | None = None):
        self.case, self.kind, self.feeds, self.recovery = case, kind, feeds, recovery
        self.limit, self.timeout = limit, timeout
        self.legal = kind in ("legal",) + tuple(MAY_FAIL)
        self.may_fail_with = MAY_FAIL.get(kind)  # the status a legal feed may fail with, under a limit


def split(total: int, keys) -> dict:
    """``total`` shared evenly between ``keys``, the first ones taking the remainder."""
    share, rest = divmod(total, len(keys))
    return {key: share + (k < rest) for k, key in enumerate(keys)}


def schedule(inputs: int, all_cases: list[Case]) -> list[tuple[Case, str, int]]:
    """(model, kind of feed, how many) for ``inputs`` inputs: each model the same share, half
    of it legal feeds and half spread over its kinds of illegal feed. Hypothesis draws each
    (model, kind) group's feeds in a run of its own: left to choose the kind itself, it
    draws the first most of the time."""
    out = []
    shares = split(inputs, [case.name for case in all_cases])
    for case in all_cases:
        n = shares[case.name]
        out.append((case, "legal", (n + 1) // 2))
        out += [(case, kind, k) for kind, k in split(n // 2, case.kinds).items()]
    return [entry for entry in out if entry[2]]


class _Feeds(Mapping):
    """Feeds in a Mapping that is not a dict: the host may ask only what a Mapping answers."""

    def __init__(self, feeds: dict):
        self._feeds = dict(feeds)

    def __getitem__(self, name):
        return self._feeds[name]

    def __iter__(self):
        return iter(self._feeds)

    def __len__(self) -> int:
        return len(self._feeds)


def draw_plan(draw, case: Case, kind: str) -> Plan:
    """One input of ``kind`` for ``case``, from a legal feed drawn first."""
    base = case.legal(draw)
    recovery = case.legal(draw)
    if kind in case.illegal:
        return Plan(case, kind, case.illegal[kind](draw, base), recovery)
    if kind in GENERIC:
        return Plan(case, kind, GENERIC[kind](draw, case, base), recovery)
    if kind == "huge input":
        limit = draw(st.integers(0, 1 << 16))
        return Plan(case, kind, _huge_input(draw, case, base, limit), recovery, limit=limit)
    feeds = draw(st.sampled_from([dict, MappingProxyType, _Feeds]))(base)
    if kind == "tight memory limit":
        return Plan(case, kind, feeds, recovery, limit=draw(st.integers(0, 4096)))
    if kind == "tiny timeout":
        return Plan(case, kind, feeds, recovery, timeout=draw(st.floats(1e-6, 1e-3)))
    return Plan(case, kind, feeds, recovery)


def _show(value) -> str:
    """An array's layout and values as code (np.array_repr), or another object's repr."""
    if not isinstance(value, np.ndarray):
        return f"{type(value).__name__}: {value!r:.300}"
    flags = [f for f, on in (("unaligned", not value.flags.aligned), ("read-only", not value.flags.writeable)) if on]
    with np.printoptions(threshold=24, edgeitems=2, linewidth=150):
        text = np.array_repr(np.array(value))
    return f"shape {value.shape} strides {value.strides} {' '.join(flags)}\n        {text}"


def describe_feeds(feeds) -> str:
    if isinstance(feeds, Mapping):
        head = "" if type(feeds) is dict else f"    (a {type(feeds).__name__})\n"
        return head + "\n".join(f"    {k!r}: {_show(v)}" for k, v in feeds.items())
    return f"    feeds = {_show(feeds)}"


def describe(plan: Plan) -> str:
    """A reproducer: the model, the kind of feed, the memory limit and every array."""
    limit = f", memory limit {plan.limit}" if plan.limit is not None else ""
    limit += f", timeout {plan.timeout:g} s" if plan.timeout is not None else ""
    return f"model '{plan.case.name}', {plan.kind} feed{limit}\n{describe_feeds(plan.feeds)}"


# ----------------------------------------------------------------------------- running (in the child)

def normalized(feeds: dict) -> dict:
    """The feeds as the reference wants them: native byte order, contiguous, arrays."""
    out = {}
    for k, v in feeds.items():
        a = np.asarray(v)
        out[k] = np.array(a, dtype=a.dtype.newbyteorder("="), order="C")  # a copy: the feed may change
    return out


class Runner:
    """Every case compiled once for one target, loaded once, and run plan after plan."""

    def __init__(self, target: str, workdir: Path, all_cases: list[Case]):
        from toolkit.compiler import compile_model
        from onnx.reference import ReferenceEvaluator

        self.target = target
        self.paths, self.models, self.refs = {}, {}, {}
        for case in all_cases:
            path = workdir / f"{case.name}.{'wasm' if target == 'wasm32' else 'so'}"
            if not path.exists():  # compiled by the first child; children started after a crash reuse it
                compile_model(case.model, path.with_suffix(".tmp" + path.suffix), target=target)
                path.with_suffix(".tmp" + path.suffix).rename(path)
            self.paths[case.name] = path
            self.models[case.name] = self._load(case.name)
            if case.ref is None:
                self.refs[case.name] = ReferenceEvaluator(case.model)

    def _load(self, name: str):
        model = wasm_runtime.load(self.paths[name])
        model.set_memory_limit(LIMIT)
        return model

    def reference(self, case: Case, feeds: dict) -> dict:
        if case.ref is not None:
            return case.ref(feeds)
        names = [o.name for o in case.model.graph.output]
        return dict(zip(names, self.refs[case.name].run(None, feeds)))

    def _classify(self, e: Exception, plan: Plan, seconds: float) -> tuple[str, str]:
        """The column (and what to say) of a run that raised ``e``; called in its except block."""
        import wasmtime

        status = wasm_runtime._abi.STATUS
        if isinstance(e, wasm_runtime.ModelError):
            if not str(e).strip():
                return "tracebacks", f"ModelError (status {e.status}) without a message"
            if plan.may_fail_with and e.status == status[plan.may_fail_with]:
                return "rejected", ""
            if e.status == status.get("CANCELLED") or (TAKES_TIMEOUT and seconds >= 0.9 * RUN_TIMEOUT):
                return "hangs", f"stopped after {seconds:.1f} s (status {e.status}): {e}"
            if e.status == status["INTERNAL"]:  # the module's own bug, by its own account
                return "traps" if "trap" in str(e) else "tracebacks", f"status INTERNAL: {e}"
            if plan.legal:
                return "wrong results", f"a legal feed was refused (status {e.status}): {e}"
            return "rejected", ""
        column = "traps" if isinstance(e, (wasmtime.Trap, wasmtime.WasmtimeError)) or "trapped" in str(e) \
            else "tracebacks"
        return column, traceback.format_exc(limit=4).strip()

    def _compare(self, case: Case, feeds: dict, want_in: dict, got: dict) -> str | None:
        """None if ``got`` (the outputs of a legal feed) is the reference's and the run left the
        feed as it was, else what is wrong. The reference raising is a campaign bug: it raises."""
        want = self.reference(case, want_in)
        try:
            assert_outputs_match(got, want)
            for k, v in feeds.items():
                if not np.array_equal(np.asarray(v), want_in[k], equal_nan=want_in[k].dtype.kind == "f"):
                    raise AssertionError(f"input '{k}' was changed by the run")
        except AssertionError as e:
            return str(e).strip()
        return None

    def _recovers(self, case: Case, feeds: dict) -> str | None:
        """None if the model, after an error, runs the legal ``feeds`` right."""
        want_in = normalized(feeds)
        try:
            got = self.models[case.name].run(feeds, **({"timeout": RUN_TIMEOUT} if TAKES_TIMEOUT else {}))
        except Exception as e:  # noqa: BLE001 - any failure of a legal feed is one
            return f"{type(e).__name__}: {e}"
        return self._compare(case, feeds, want_in, got)

    def execute(self, plan: Plan) -> list[tuple[str, str]]:
        """The outcomes of one plan: its column, and "failed recoveries" when the legal feed
        after an error went wrong; each with what is wrong for the bad ones."""
        case, model = plan.case, self.models[plan.case.name]
        want_in = normalized(plan.feeds) if plan.legal else None
        if plan.limit is not None:
            model.set_memory_limit(plan.limit)
        timeout = {"timeout": plan.timeout or RUN_TIMEOUT} if TAKES_TIMEOUT else {}
        t0 = time.perf_counter()
        error = None
        try:
            got = model.run(plan.feeds, **timeout)
        except Exception as e:  # noqa: BLE001 - the point: anything but a ModelError is a bug
            error = self._classify(e, plan, time.perf_counter() - t0)
        finally:
            if plan.limit is not None:
                model.set_memory_limit(LIMIT)
        if error:
            wrong = self._recovers(case, plan.recovery)
            if not wrong:
                return [error]
            self.models[case.name] = self._load(case.name)  # so one broken instance counts once
            return [error, ("failed recoveries", f"the legal feed after it: {wrong}\n{describe_feeds(plan.recovery)}")]
        if not plan.legal:
            return [("wrong results", "an illegal feed was accepted")]
        wrong = self._compare(case, plan.feeds, want_in, got)
        return [("wrong results", wrong) if wrong else ("legal ok", "")]


def _group(runner: Runner, case: Case, kind: str, count: int, seed: int, first: int, start: int, show: int,
           emit) -> int:
    """One (model, kind of feed) group: ``count`` inputs numbered from ``first``, those
    before ``start`` drawn but not run. The number drawn."""
    counter = itertools.count(first)

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(st.data())
    def group(data):
        plan = draw_plan(data.draw, case, kind)
        i = next(counter)  # after the draws: an example hypothesis abandons mid-draw is not counted
        if i == show:
            emit(ev="describe", i=i, text=describe(plan))
        if i < start:
            return
        emit(ev="start", i=i, case=case.name, kind=kind)
        outcomes = runner.execute(plan)
        emit(ev="done", i=i, kind=kind, outcomes=[(c, d + "\n" + describe(plan) if d else "") for c, d in outcomes])

    group()
    return next(counter) - first


def _import_project() -> None:
    """Import every module of the project's packages. Hypothesis also draws constants it
    finds in the project's own modules, those imported when it first looks; with all of
    them imported before the first draw, the draws are the same on both targets and in a
    child started after a crash (which compiles nothing, so imports less)."""
    import toolkit
    import wasm_runtime

    for package in (toolkit, wasm_runtime):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)


def _child(target: str, inputs: int, seed: int, start: int, show: int, workdir: Path) -> None:
    """The campaign of one target, from input ``start`` on (earlier ones are drawn, not run,
    so the draws stay those of the seed); one JSON line per event on stdout."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever else writes to stdout (the VM, a library) cannot break the protocol
    sys.stdout = sys.stderr
    faulthandler.enable()  # a crash prints the Python stack to stderr, which the parent shows,
    faulthandler.register(signal.SIGUSR1)  # as does the parent's signal before it kills a hung child
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")

    def emit(**event):
        proto.write(json.dumps(event) + "\n")

    all_cases = cases()
    t0 = time.perf_counter()
    runner = Runner(target, workdir, all_cases)
    _import_project()
    emit(ev="ready", seconds=time.perf_counter() - t0)
    end = 0
    try:
        for case, kind, count in schedule(inputs, all_cases):
            first, end = end, end + count  # inputs first .. end - 1 are this group's
            if end <= start and not first <= show < end:
                continue
            drawn = _group(runner, case, kind, count, zlib.crc32(f"{seed}:{case.name}:{kind}".encode()), first,
                           start, show, emit)
            if drawn < count:
                emit(ev="short", case=case.name, kind=kind, drawn=drawn, wanted=count)
    except Exception:  # the campaign's own bug (a reference that fails, a bad strategy): not a crash
        emit(ev="campaign error", text=traceback.format_exc())
        raise
    emit(ev="finished")


# ----------------------------------------------------------------------------- the parent


class CampaignError(RuntimeError):
    """The campaign itself failed (a child died outside any input): not a finding."""


class _Target:
    """One target's child process, started again past an input that crashed or hung."""

    def __init__(self, target: str, inputs: int, seed: int, workdir: Path):
        self.target, self.inputs, self.seed, self.workdir = target, inputs, seed, workdir
        self.tally = Tally()
        self.next = 0  # the first input not accounted for
        self.current: tuple | None = None  # (index, model, kind, start time) of the input running
        self.pending: dict[int, int] = {}  # input -> its entry in tally.failures, awaiting a description
        self.show = -1
        self.restarts = 0
        self.finished = False
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.stderr: Path | None = None  # the current child's stderr, a file of its own
        self.ready_by: float | None = None  # when the child must have compiled and loaded every model
        self.deadline = time.monotonic() + 600 + inputs * PER_INPUT_SECONDS

    def spawn(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               "TMPDIR": str(self.workdir)}
        cmd = [sys.executable, "-m", "tests.fuzz.runtime_fuzz", "--child", self.target, "--inputs", str(self.inputs),
               "--seed", str(self.seed), "--start", str(self.next), "--show", str(self.show),
               "--workdir", str(self.workdir)]
        self.stderr = self.workdir / f"{self.target}.{self.restarts}.stderr"
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, cwd=ROOT,
                                         env=env, start_new_session=True)
        self.buffer = b""
        self.current = None
        self.ready_by = time.monotonic() + 600

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            ev = json.loads(line)
            kind = ev["ev"]
            if kind == "ready":
                self.ready_by = None
            elif kind == "start":
                self.current = (ev["i"], ev["case"], ev["kind"], time.monotonic())
            elif kind == "done":
                self.current = None
                self.next = ev["i"] + 1
                self.tally["inputs run"] += 1
                for column, detail in ev["outcomes"]:
                    self.tally[column] += 1
                    self.tally.kinds[(ev["kind"], column)] += 1
                    if column in BAD:
                        self.tally.failures.append(f"{self.target} input {ev['i']}: {column}: {detail}")
            elif kind == "describe" and ev["i"] in self.pending:
                self.tally.failures[self.pending.pop(ev["i"])] += "\n" + ev["text"]
            elif kind == "short":
                self.tally.notes.append(f"{self.target}: hypothesis drew {ev['drawn']} of {ev['wanted']} "
                                        f"'{ev['kind']}' feeds for model '{ev['case']}'")
            elif kind == "finished":
                self.finished = True
            elif kind == "campaign error":
                raise CampaignError(f"the {self.target} campaign failed:\n{ev['text']}")

    def overdue(self, now: float) -> bool:
        if now > self.deadline:
            return True
        if self.ready_by is not None:
            return now > self.ready_by
        return self.current is not None and now - self.current[3] > HANG_SECONDS

    def kill(self, hung: bool) -> None:
        if self.proc.poll() is None:
            if hung and self.ready_by is None:  # ask for the stack first
                os.kill(self.proc.pid, signal.SIGUSR1)
                time.sleep(0.5)
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def ended(self, hung: bool) -> bool:
        """The child is gone; count the input it was running and start another child past it.
        False when this target is done."""
        rc = self.proc.wait()
        self.proc.stdout.close()
        if self.finished:
            return False
        out_of_time = time.monotonic() > self.deadline
        if self.current is None and not out_of_time:
            tail = self.stderr.read_text(errors="replace")[-3000:]
            raise CampaignError(f"the {self.target} child {'did not start' if hung else f'exited with {rc}'} "
                                f"outside any input:\n{tail}")
        if self.current is not None:
            i, case, kind, started = self.current
            column = "hangs" if hung else "crashes"
            how = (f"was still running after {time.monotonic() - started:.0f} s" if hung else
                   f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with {rc}")
            err = self.stderr.read_text(errors="replace")
            stack = max(err.find("Fatal Python error"), err.find("Current thread"))  # faulthandler's, innermost first
            tail = "\n".join(err[stack:].splitlines()[:12] if stack >= 0 else err.splitlines()[-8:])
            self.tally["inputs run"] += 1
            self.tally[column] += 1
            self.tally.kinds[(kind, column)] += 1
            self.pending[i] = len(self.tally.failures)
            self.tally.failures.append(f"{self.target} input {i}: {column}: the child {how} (model '{case}', "
                                       f"{kind} feed); its stderr says:\n{tail}")
            self.next, self.show = i + 1, i
        if out_of_time:
            self.tally.notes.append(f"{self.target}: stopped at the campaign's time limit, "
                                    f"{self.inputs - self.next} inputs not run")
            return False
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            self.tally.notes.append(f"{self.target}: stopped after {MAX_RESTARTS} crashes and hangs, "
                                    f"{self.inputs - self.next} inputs not run")
            return False
        self.spawn()  # with next == inputs it only describes the last input
        return True


def campaign(inputs: int, seed: int, targets=TARGETS) -> dict[str, Tally]:
    """Run ``inputs`` inputs in all, split evenly between ``targets``, each target in child
    processes running side by side; the outcome counts per target (a :class:`Tally`, a
    Counter over COLUMNS whose ``failures`` hold the reproducers)."""
    with tempfile.TemporaryDirectory(prefix="symwasm-rtfuzz-") as tmp:
        runs = [_Target(t, n, seed, Path(tmp)) for t, n in split(inputs, targets).items()]
        sel = selectors.DefaultSelector()
        try:
            for r in runs:
                r.spawn()
                sel.register(r.proc.stdout, selectors.EVENT_READ, r)
            live = set(runs)
            while live:
                for key, _ in sel.select(timeout=0.5):
                    r = key.data
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        r.feed(chunk)
                        continue
                    sel.unregister(key.fileobj)
                    if r.ended(hung=False):
                        sel.register(r.proc.stdout, selectors.EVENT_READ, r)
                    else:
                        live.discard(r)
                now = time.monotonic()
                for r in [r for r in live if r.overdue(now)]:
                    r.kill(hung=True)
                    sel.unregister(r.proc.stdout)
                    if r.ended(hung=True):
                        sel.register(r.proc.stdout, selectors.EVENT_READ, r)
                    else:
                        live.discard(r)
        finally:
            for r in runs:
                if r.proc and r.proc.poll() is None:
                    r.kill(hung=False)
        return {r.target: r.tally for r in runs}


def table(results: dict[str, Tally]) -> str:
    rows = [("target",) + COLUMNS]
    total = Tally()
    for target, tally in results.items():
        rows.append((target,) + tuple(str(tally[c]) for c in COLUMNS))
        total.update(tally)
    if len(results) > 1:
        rows.append(("total",) + tuple(str(total[c]) for c in COLUMNS))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(w) if k else cell.ljust(w) for k, (cell, w) in enumerate(zip(r, widths)))
                     for r in rows)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=1000, help="inputs in all, split evenly between the targets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--verbose", action="store_true", help="also print the outcomes of each kind of feed")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--show", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.inputs, args.seed, args.start, args.show, args.workdir)
        return 0
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
    shares = split(args.inputs, targets)
    print(f"runtime fuzz: {args.inputs} inputs in all (seed {args.seed}): "
          + " + ".join(f"{n} on {t}" for t, n in shares.items()), flush=True)
    t0 = time.perf_counter()
    try:
        results = campaign(args.inputs, args.seed, targets)
    except CampaignError as e:
        print(f"runtime fuzz: {e}", file=sys.stderr)
        return 2
    for target, tally in results.items():
        for failure in tally.failures:
            print(f"--- {failure}\n", file=sys.stderr)
        for note in tally.notes:
            print(f"note: {note}", file=sys.stderr)
        if args.verbose:
            print(f"{target}, outcomes by kind of feed:")
            for (kind, column), n in sorted(tally.kinds.items()):
                print(f"    {kind:24} {column:18} {n}")
    print(table(results))
    total_run = sum(t["inputs run"] for t in results.values())
    bad = sum(t.bad() for t in results.values())
    print(f"{total_run} inputs run in {time.perf_counter() - t0:.0f} s; {bad} bad outcomes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
