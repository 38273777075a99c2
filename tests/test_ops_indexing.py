"""Indexing ops (toolkit/frontend/onnx/ops/indexing.py): GatherElements, GatherND,
ScatterElements, ScatterND, CumSum, Trilu — against onnx.reference (onnxruntime where noted),
each module compiled once per target and run with several bindings of its symbolic dims."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from util import assert_outputs_match, check_model, const, make_model, ort_reference, rand, reference, vinfo
from toolkit.frontend.onnx.importer import import_model
from toolkit.ir import dims as D
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(23)
F32, I64, I32 = np.float32, np.int64, np.int32
REDUCTIONS = ("none", "add", "mul", "max", "min")
# the dtypes the movement ops are tested with besides float32
DTYPES = (np.float64, np.int32, np.int64, np.bool_, np.float16, np.uint8)


def node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], **attrs)


def outs(*names: str, dtype=F32):
    return [vinfo(n, dtype, None) for n in names]


def idx(shape, n: int, dtype=I64, unique: bool = False) -> np.ndarray:
    """Indices into a dim of size ``n`` (half of them negative, counted from the end)."""
    shape = tuple(shape)
    count = int(np.prod(shape))
    if unique:
        pos = RNG.permutation(n)[:count]
    else:
        pos = RNG.integers(0, n, size=count) if n else np.zeros(count, np.int64)
    neg = RNG.random(count) < 0.5
    return np.where(neg, pos - n, pos).reshape(shape).astype(dtype)


def shape_of(model, name: str) -> str:
    g = import_model(model)
    return D.fmt_shape(g.values[name].shape)


# ----------------------------------------------------------------------------- GatherElements


def test_gather_elements(target):
    nodes = [node("GatherElements", ["x", "i0"], ["a0"], axis=0),
             node("GatherElements", ["x", "i1"], ["a1"], axis=1)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 3]), vinfo("i0", I64, ["k", "m", 3]),
                               vinfo("i1", I32, ["n", "k", 3])], outs("a0", "a1"), opset=13)

    def feeds(n, m, k):
        return {"x": rand(RNG, (n, m, 3)), "i0": idx((k, m, 3), n), "i1": idx((n, k, 3), m, I32)}

    check_model(model, target, [feeds(2, 3, 4), feeds(5, 1, 2), feeds(3, 2, 0), feeds(0, 2, 0)])
    # i0's k and i1's k never meet in an op, so each is its own dim (k@i1), as onnxruntime reads names
    assert shape_of(model, "a1") == "(n, k@i1, 3)"


def test_gather_elements_onnxruntime(target):
    # against onnxruntime: onnx.reference's GatherElements (np.choose over swapped axes)
    # compares index.shape[:axis] + index.shape[axis + 1:] with the data's, which for
    # axis -1 is the whole shape plus all but the last dim, so it fails; and it requires the
    # indices to equal the data on the other axes, where onnxruntime (and the spec) allow
    # them smaller
    nodes = [node("GatherElements", ["x", "i"], ["g"], axis=1),
             node("GatherElements", ["x", "j"], ["last"], axis=-1)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("i", I64, ["p", "k"]),
                               vinfo("j", I32, ["n", "k"])], outs("g", "last"), opset=13)

    def feeds(n, m, p, k):
        return {"x": rand(RNG, (n, m)), "i": idx((p, k), m), "j": idx((n, k), m, I32)}

    m = check_model(model, target, [feeds(4, 5, 2, 7), feeds(3, 2, 3, 1), feeds(2, 3, 0, 0)], ref=ort_reference)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'g' \(GatherElements\): dim 0 of indices 'i'"):
        m.run(feeds(2, 5, 3, 1))


# ----------------------------------------------------------------------------- GatherND


def test_gather_nd(target):
    nodes = [node("GatherND", ["x", "i1"], ["nd1"]),
             node("GatherND", ["x", "i2"], ["nd2"]),
             node("GatherND", ["x", "i3"], ["nd3"]),
             node("GatherND", ["x", "b1"], ["bd1"], batch_dims=1),
             node("GatherND", ["x", "b2"], ["bd2"], batch_dims=1),
             node("GatherND", ["x", "b3"], ["bd3"], batch_dims=2)]
    model = make_model(nodes, [vinfo("x", F32, ["b", "n", 3]), vinfo("i1", I64, ["k", 1]),
                               vinfo("i2", I32, ["k", 2]), vinfo("i3", I64, [2, "k", 3]),
                               vinfo("b1", I32, ["b", "k", 1]), vinfo("b2", I64, ["b", 2]),
                               vinfo("b3", I64, ["b", "n", 1])],
                       outs("nd1", "nd2", "nd3", "bd1", "bd2", "bd3"), opset=13)

    def feeds(b, n, k):
        def tuples(shape, dims, dtype=I64):
            return np.stack([idx(shape, d, dtype) for d in dims], axis=-1)
        return {"x": rand(RNG, (b, n, 3)), "i1": tuples((k,), [b]), "i2": tuples((k,), [b, n], I32),
                "i3": tuples((2, k), [b, n, 3]), "b1": tuples((b, k), [n], I32), "b2": tuples((b,), [n, 3]),
                "b3": tuples((b, n), [3])}

    check_model(model, target, [feeds(3, 4, 5), feeds(1, 2, 2), feeds(2, 1, 0)])
    # the index inputs' k never meet in an op: each is its own dim (k@i2 ...); b and n meet x's
    assert [shape_of(model, k) for k in ("nd1", "nd2", "nd3", "bd1", "bd2", "bd3")] == \
        ["(k, n, 3)", "(k@i2, 3)", "(2, k@i3)", "(b, k@b1, 3)", "(b,)", "(b, n)"]


def test_gather_nd_empty_batch(target):
    # a batch of no elements with tuples in it: onnx.reference reshapes the indices to
    # (0, -1, k), which numpy refuses; onnxruntime gives the empty result
    model = make_model([node("GatherND", ["x", "i"], ["g"], batch_dims=1)],
                       [vinfo("x", F32, ["b", "n", 3]), vinfo("i", I64, ["b", "k", 1])], outs("g"), opset=13)
    check_model(model, target, [{"x": rand(RNG, (0, 4, 3)), "i": np.zeros((0, 2, 1), I64)},
                                {"x": rand(RNG, (2, 4, 3)), "i": idx((2, 3, 1), 4)}], ref=ort_reference)


def test_gather_nd_last_dim_must_be_static():
    model = make_model([node("GatherND", ["x", "i"], ["g"])],
                       [vinfo("x", F32, ["n", 3]), vinfo("i", I64, ["k", "d"])], outs("g"), opset=13)
    with pytest.raises(CompileError, match=r"node 'g' \(GatherND\): the last dim of indices 'i' \(k, d\) is d; "
                                           r"it must be static"):
        import_model(model)


# ----------------------------------------------------------------------------- ScatterND


def test_scatter_nd(target):
    nodes = [node("ScatterND", ["x", "rows", "u"], [f"r_{r}"], reduction=r) for r in REDUCTIONS]
    nodes += [node("ScatterND", ["x", "dup", "u"], ["dup_add"], reduction="add"),
              node("ScatterND", ["x", "cells", "v"], ["cells_max"], reduction="max"),
              node("ScatterND", ["x", "cells", "v"], ["cells_none"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("rows", I64, ["k", 1]),
                               vinfo("u", F32, ["k", "m"]), vinfo("dup", I64, ["k", 1]),
                               vinfo("cells", I32, ["p", 2]), vinfo("v", F32, ["p"])],
                       outs(*(f"r_{r}" for r in REDUCTIONS), "dup_add", "cells_max", "cells_none"), opset=18)

    def feeds(n, m, k, p):
        # distinct targets where the order of updates would matter without a reduction
        flat = RNG.permutation(n * m)[:p]
        cells = np.stack([flat // m, flat % m], axis=-1) - np.where(RNG.random((p, 2)) < 0.5, [n, m], 0)
        return {"x": rand(RNG, (n, m)), "rows": idx((k, 1), n, unique=True), "u": rand(RNG, (k, m)),
                "dup": idx((k, 1), n), "cells": cells.astype(I32), "v": rand(RNG, (p,))}

    check_model(model, target, [feeds(5, 3, 4, 6), feeds(2, 7, 2, 1), feeds(3, 0, 2, 0), feeds(0, 4, 0, 0)])


# ----------------------------------------------------------------------------- ScatterElements


def test_scatter_elements(target):
    nodes = [node("ScatterElements", ["x", "i1", "u1"], [f"a1_{r}"], axis=1, reduction=r) for r in REDUCTIONS]
    nodes += [node("ScatterElements", ["x", "i0", "u0"], ["a0"], axis=-2, reduction="add"),
              node("ScatterElements", ["x", "i0", "u0"], ["a0_none"], axis=0)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("i1", I64, ["p", "k"]),
                               vinfo("u1", F32, ["p", "k"]), vinfo("i0", I32, ["q", "m"]),
                               vinfo("u0", F32, ["q", "m"])],
                       outs(*(f"a1_{r}" for r in REDUCTIONS), "a0", "a0_none"), opset=18)

    def feeds(n, m, p, k, q):  # p <= n: indices may be smaller than the data on other axes
        return {"x": rand(RNG, (n, m)), "i1": idx((p, k), m), "u1": rand(RNG, (p, k)),
                "i0": idx((q, m), n, I32), "u0": rand(RNG, (q, m))}

    check_model(model, target, [feeds(4, 5, 4, 3, 6), feeds(3, 2, 1, 5, 2), feeds(2, 3, 0, 0, 0),
                                feeds(0, 3, 0, 2, 0)])


def test_scatter_reduction_versions():
    """reduction appears in version 16 (none, add, mul); max and min in 18."""
    def model(op: str, opset: int, reduction: str):
        ins = [vinfo("x", F32, ["n", 2]), vinfo("i", I64, ["k", 1] if op == "ScatterND" else ["k", 2]),
               vinfo("u", F32, ["k", 2])]
        return make_model([node(op, ["x", "i", "u"], ["y"], reduction=reduction)], ins, outs("y"), opset=opset)

    for op in ("ScatterND", "ScatterElements"):
        import_model(model(op, 16, "mul"))
        with pytest.raises(CompileError, match=rf"node 'y' \({op}\): reduction 'max' is not one of none, add, "
                                               rf"mul \({op}-16\)"):
            import_model(model(op, 17, "max"))
        with pytest.raises(CompileError, match="'reduction' is not an attribute"):
            import_model(model(op, 13, "add"))


# ----------------------------------------------------------------------------- index errors


def test_index_out_of_range(target):
    nodes = [node("GatherElements", ["x", "ge"], ["ge_out"], axis=1),
             node("GatherND", ["x", "gn"], ["gn_out"]),
             node("ScatterElements", ["x", "se", "x"], ["se_out"], axis=1),
             node("ScatterND", ["x", "sn", "sn_u"], ["sn_out"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", 4]), vinfo("ge", I64, ["n", 4]), vinfo("gn", I32, ["k", 2]),
                               vinfo("se", I32, ["n", 4]), vinfo("sn", I64, ["k", 1]), vinfo("sn_u", F32, ["k", 4])],
                       outs("ge_out", "gn_out", "se_out", "sn_out"))

    def feeds(n, k):
        return {"x": rand(RNG, (n, 4)), "ge": idx((n, 4), 4), "gn": np.stack([idx((k,), n), idx((k,), 4)], -1)
                .astype(I32), "se": idx((n, 4), 4, I32), "sn": idx((k, 1), n, unique=True), "sn_u": rand(RNG, (k, 4))}

    m = check_model(model, target, [feeds(3, 2), feeds(5, 4)])
    cases = [("ge", (1, 2), 4, "GatherElements", "data dim 1 of size 4"),
             ("ge", (0, 0), -5, "GatherElements", "data dim 1 of size 4"),
             ("gn", (1, 0), 3, "GatherND", "data dim 0 of size 3"),
             ("gn", (0, 1), -5, "GatherND", "data dim 1 of size 4"),
             ("se", (2, 3), 1 << 30, "ScatterElements", "data dim 1 of size 4"),
             ("sn", (1, 0), -4, "ScatterND", "data dim 0 of size 3"),
             ("sn", (0, 0), np.iinfo(I64).min, "ScatterND", "data dim 0 of size 3")]
    for name, where, bad, op, dim in cases:
        f = feeds(3, 2)
        f[name][where] = bad
        with pytest.raises(wasm_runtime.ModelError,
                           match=rf"node '{name}_out' \({op}\): index {bad} is out of range for {dim}"):
            m.run(f)
    good = feeds(4, 3)  # the module still runs after a failure
    assert_outputs_match(m.run(good), reference(model, good))


# ----------------------------------------------------------------------------- CumSum


def test_cumsum_constant_axis(target):
    nodes, inits = [], []
    for axis in (0, 1, -1):
        inits.append(const(f"ax{axis}", np.array(axis, I64)))
        for ex in (0, 1):
            for rev in (0, 1):
                nodes.append(node("CumSum", ["x", f"ax{axis}"], [f"c{axis}_{ex}{rev}"], exclusive=ex, reverse=rev))
    names = [n.output[0] for n in nodes]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 3])], outs(*names), inits, opset=14)
    check_model(model, target, [{"x": rand(RNG, (2, 5, 3))}, {"x": rand(RNG, (4, 1, 3))},
                                {"x": rand(RNG, (0, 2, 3))}, {"x": rand(RNG, (3, 0, 3))}])


def test_cumsum_runtime_axis(target):
    # the axis is an input: one kernel per (exclusive, reverse) takes it as a scalar
    nodes = [node("CumSum", ["x", "axis"], [f"c{ex}{rev}"], exclusive=ex, reverse=rev)
             for ex in (0, 1) for rev in (0, 1)]
    nodes.append(node("CumSum", ["i", "axis32"], ["ci"], reverse=1))
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 2]), vinfo("axis", I64, []),
                               vinfo("i", I64, ["n", "m"]), vinfo("axis32", I32, [])],
                       outs("c00", "c01", "c10", "c11") + outs("ci", dtype=I64), opset=14)

    def feeds(n, m, axis, axis32):
        return {"x": rand(RNG, (n, m, 2)), "axis": np.array(axis, I64), "i": rand(RNG, (n, m), I64, -50, 50),
                "axis32": np.array(axis32, I32)}

    m = check_model(model, target, [feeds(3, 4, 0, 1), feeds(2, 5, 1, 0), feeds(4, 3, 2, -1), feeds(3, 2, -3, -2),
                                    feeds(0, 3, 1, 1), feeds(2, 0, -1, 0)])
    for bad in (3, -4):
        with pytest.raises(wasm_runtime.ModelError,
                           match=rf"node 'c00' \(CumSum\): axis {bad} is out of range for 'x' of rank 3"):
            m.run(feeds(2, 2, bad, 0))


def test_cumsum_dtypes(target):
    dtypes = (np.float64, np.int32, np.int64, np.uint32, np.uint64, np.float16)
    nodes = [node("CumSum", [f"x{k}", "axis"], [f"y{k}"], exclusive=k % 2, reverse=k // 2 % 2)
             for k in range(len(dtypes))]
    model = make_model(nodes, [vinfo(f"x{k}", dt, ["n", "m"]) for k, dt in enumerate(dtypes)]
                       + [vinfo("axis", I64, [])],
                       [vinfo(f"y{k}", dt, None) for k, dt in enumerate(dtypes)], opset=14)

    def feeds(n, m, axis):
        f = {f"x{k}": rand(RNG, (n, m), dt, 0, 9) for k, dt in enumerate(dtypes)}
        # float16: sums that round along the way (numpy rounds each partial sum)
        f[f"x{len(dtypes) - 1}"] = rand(RNG, (n, m), np.float16, 0, 700)
        return {**f, "axis": np.array(axis, I64)}

    check_model(model, target, [feeds(3, 40, 1), feeds(50, 2, 0), feeds(0, 3, 1)], rtol=0, atol=0)


def test_cumsum_axis_checks():
    def model(axis_info, init=()):
        return make_model([node("CumSum", ["x", "a"], ["y"])], [vinfo("x", F32, ["n", 3])]
                          + ([axis_info] if axis_info else []), outs("y"), init, opset=14)

    with pytest.raises(CompileError, match=r"node 'y' \(CumSum\): axis 2 is out of range for rank 2"):
        import_model(model(None, [const("a", np.array(2, I64))]))
    with pytest.raises(CompileError, match=r"node 'y' \(CumSum\): axis 'a' must be a scalar, has shape \(2,\)"):
        import_model(model(vinfo("a", I64, [2])))
    with pytest.raises(CompileError, match=r"axis 'a' has dtype float32"):
        import_model(model(vinfo("a", F32, [])))


# ----------------------------------------------------------------------------- Trilu


def test_trilu(target):
    nodes = [node("Trilu", ["x"], ["up"]),
             node("Trilu", ["x"], ["low"], upper=0),
             node("Trilu", ["x", "k1"], ["up_k1"]),
             node("Trilu", ["x", "km2"], ["low_km2"], upper=0),
             node("Trilu", ["x", "km2"], ["up_km2"]),
             node("Trilu", ["y", "k"], ["up_k"]),
             node("Trilu", ["y", "k"], ["low_k"], upper=0)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("y", F32, ["b", "n", "m"]), vinfo("k", I64, [])],
                       outs("up", "low", "up_k1", "low_km2", "up_km2", "up_k", "low_k"),
                       [const("k1", np.array(1, I64)), const("km2", np.array(-2, I64))], opset=14)

    def feeds(b, n, m, k):
        return {"x": rand(RNG, (n, m)), "y": rand(RNG, (b, n, m)), "k": np.array(k, I64)}

    m = check_model(model, target, [feeds(2, 4, 5, 0), feeds(3, 6, 3, 2), feeds(1, 3, 7, -3),
                                    feeds(2, 5, 5, 100), feeds(2, 0, 4, 1), feeds(0, 3, 3, -1)])
    # k at the ends of int64: numpy's tri (onnx.reference) overflows computing arange(-k, m - k)
    for k in (np.iinfo(I64).min, np.iinfo(I64).max):
        f = feeds(2, 3, 4, k)
        assert_outputs_match(m.run(f), ort_reference(model, f))


def test_trilu_needs_a_matrix():
    model = make_model([node("Trilu", ["x"], ["t"])], [vinfo("x", F32, ["n"])], outs("t"), opset=14)
    with pytest.raises(CompileError, match=r"node 't' \(Trilu\): input 'x' \(n,\) has rank 1; Trilu needs at least 2"):
        import_model(model)


# ----------------------------------------------------------------------------- dtypes, versions


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_movement_dtypes(target, dtype):
    nodes = [node("GatherElements", ["x", "ie"], ["ge"], axis=1),
             node("GatherND", ["x", "nd"], ["gn"]),
             node("ScatterElements", ["x", "ie", "x"], ["se"], axis=1),
             node("ScatterND", ["x", "rows", "u"], ["sn"]),
             node("Trilu", ["x"], ["tr"], upper=0)]
    if dtype != np.bool_:
        nodes.append(node("ScatterND", ["x", "rows", "u"], ["sn_add"], reduction="add"))
    names = [n.output[0] for n in nodes]
    model = make_model(nodes, [vinfo("x", dtype, ["n", "m"]), vinfo("ie", I64, ["n", "m"]),
                               vinfo("nd", I64, ["k", 2]), vinfo("rows", I32, ["k", 1]), vinfo("u", dtype, ["k", "m"])],
                       outs(*names, dtype=dtype), opset=18)

    def feeds(n, m, k):
        return {"x": rand(RNG, (n, m), dtype), "ie": idx((n, m), m),
                "nd": np.stack([idx((k,), n), idx((k,), m)], -1), "rows": idx((k, 1), n, I32, unique=True),
                "u": rand(RNG, (k, m), dtype)}

    check_model(model, target, [feeds(3, 4, 2), feeds(5, 2, 5), feeds(2, 0, 0)])


def test_bool_scatter_reductions(target):
    # numpy's meaning: add and max are or, mul and min are and
    nodes = [node("ScatterElements", ["x", "i", "u"], [f"b_{r}"], axis=0, reduction=r) for r in REDUCTIONS]
    model = make_model(nodes, [vinfo("x", np.bool_, ["n", 3]), vinfo("i", I64, ["k", 3]), vinfo("u", np.bool_, ["k", 3])],
                       outs(*(f"b_{r}" for r in REDUCTIONS), dtype=np.bool_), opset=18)
    check_model(model, target, [{"x": rand(RNG, (4, 3), np.bool_), "i": idx((6, 3), 4), "u": rand(RNG, (6, 3), np.bool_)},
                                {"x": rand(RNG, (2, 3), np.bool_), "i": idx((1, 3), 2), "u": rand(RNG, (1, 3), np.bool_)}])


def test_opset_11_versions(target):
    """GatherElements-11, GatherND-11 (no batch_dims), ScatterElements-11, ScatterND-11 (no
    reduction) and CumSum-11, in a model of opset 11."""
    nodes = [node("GatherElements", ["x", "ie"], ["ge"], axis=0),
             node("GatherND", ["x", "nd"], ["gn"]),
             node("ScatterElements", ["x", "ie", "x"], ["se"], axis=0),
             node("ScatterND", ["x", "rows", "u"], ["sn"]),
             node("CumSum", ["x", "axis"], ["cs"], exclusive=1)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("ie", I64, ["n", "m"]), vinfo("nd", I64, ["k", 1]),
                               vinfo("rows", I64, ["k", 1]), vinfo("u", F32, ["k", "m"]), vinfo("axis", I32, [])],
                       outs("ge", "gn", "se", "sn", "cs"), opset=11)

    def feeds(n, m, k, axis):
        return {"x": rand(RNG, (n, m)), "ie": idx((n, m), n), "nd": idx((k, 1), n),
                "rows": idx((k, 1), n, unique=True), "u": rand(RNG, (k, m)), "axis": np.array(axis, I32)}

    check_model(model, target, [feeds(4, 3, 2, 0), feeds(3, 5, 3, 1)])
    assert "GatherND-11" in " ".join(import_model(model).notes)


def test_gather_nd_12(target):
    """GatherND-12 brings batch_dims; the batch dims of data and indices are checked at run
    time when they are different symbols."""
    model = make_model([node("GatherND", ["x", "i"], ["g"], batch_dims=1)],
                       [vinfo("x", F32, ["b", "n"]), vinfo("i", I64, ["c", 1])], outs("g"), opset=12)
    m = check_model(model, target, [{"x": rand(RNG, (3, 4)), "i": idx((3, 1), 4)},
                                    {"x": rand(RNG, (5, 2)), "i": idx((5, 1), 2)}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'g' \(GatherND\): batch dim 0 of indices 'i' "
                                                      r"and of data 'x': c = 2 does not equal b = 3"):
        m.run({"x": rand(RNG, (3, 4)), "i": idx((2, 1), 4)})
