"""Axes given at run time (a graph input, not a constant): the reductions, Squeeze,
Unsqueeze, Slice and Pad, each compiled once and run with several axes values and several
bindings of its symbolic dims on both targets, against onnx.reference. Entries out of range
or naming an axis twice fail the run with a ModelError naming the node and the input."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, assert_outputs_match, build, check_model, const, make_model, rand, reference, vinfo

F32, I64 = np.float32, np.int64
ModelError = wasm_runtime.ModelError
KINDS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def axes(*v, dtype=I64):
    return np.array(v, dtype)


def reduce_model(keepdims, k, noop=0, opset=18):
    """Every reduction kind over the run-time axes (``k`` entries) of one input (positive
    values, so LogSum has a log)."""
    nodes = [helper.make_node(op, ["x", "axes"], [op], name=op, keepdims=keepdims, noop_with_empty_axes=noop)
             for op in KINDS]
    return make_model(nodes, [vinfo("x", F32, ["n", 4, "c"]), vinfo("axes", I64, [k])],
                      [vinfo(op, F32, None) for op in KINDS], opset=opset)


@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduce_runtime_axes(keepdims, target):
    """Two axes, several of their values and of the input's dims, one module."""
    rng = np.random.default_rng(1)
    feeds = [{"x": rand(rng, (n, 4, c), F32, 0.1, 2), "axes": a}
             for (n, c), a in [((2, 3), axes(0, 2)), ((3, 5), axes(1, -1)), ((1, 2), axes(-3, 1)),
                               ((2, 1), axes(2, 0)), ((4, 3), axes(-1, -2))]]
    check_model(reduce_model(keepdims, 2), target, feeds, atol=1e-5)


def test_reduce_runtime_axes_any_count_with_keepdims(target):
    """With keepdims=1 the number of axes may be symbolic: one, two, all three or none (all
    axes, noop_with_empty_axes being 0)."""
    rng = np.random.default_rng(2)
    feeds = [{"x": rand(rng, (n, 4, c), F32, 0.1, 2), "axes": a}
             for (n, c), a in [((2, 3), axes(1)), ((3, 2), axes(0, 2)), ((2, 2), axes(2, 0, 1)), ((3, 1), axes())]]
    check_model(reduce_model(1, "k"), target, feeds, atol=1e-5)


def test_reduce_runtime_axes_noop_with_empty_axes(target):
    """noop_with_empty_axes and an empty axes tensor at run time: the output is the input
    (onnx.reference agrees for ReduceSum; for the kinds that map elements first it returns
    the map, |x| or log x, where the ONNX spec says the input)."""
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1, noop_with_empty_axes=1)
    model = make_model([node], [vinfo("x", F32, ["n", 3]), vinfo("axes", I64, ["k"])], [vinfo("y", F32, None)],
                       opset=13)
    rng = np.random.default_rng(3)
    m = check_model(model, target, [{"x": rand(rng, (n, 3)), "axes": a} for n, a in
                                    [(2, axes()), (3, axes(1)), (4, axes(0, 1)), (0, axes())]])
    node = helper.make_node("ReduceL1", ["x", "axes"], ["y"], keepdims=1, noop_with_empty_axes=1)
    model = make_model([node], [vinfo("x", F32, ["n", 3]), vinfo("axes", I64, ["k"])], [vinfo("y", F32, None)],
                       opset=18)
    m = build(model, target)
    x = rand(rng, (2, 3))
    np.testing.assert_array_equal(m.run({"x": x, "axes": axes()})["y"], x)
    assert_outputs_match(m.run({"x": x, "axes": axes(0)}), reference(model, {"x": x, "axes": axes(0)}))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_])
def test_reduce_runtime_axes_dtypes(dtype, target):
    """int32 axes, integer and bool data, a 0-sized reduced axis (the identity)."""
    ops = ["ReduceMax", "ReduceMin"] + (["ReduceSum", "ReduceProd"] if dtype == np.int32 else [])
    nodes = [helper.make_node(op, ["x", "axes"], [op], keepdims=0) for op in ops]
    model = make_model(nodes, [vinfo("x", dtype, ["n", "c"]), vinfo("axes", np.int32, [1])],
                       [vinfo(op, dtype, None) for op in ops], opset=20)
    rng = np.random.default_rng(4)
    check_model(model, target, [{"x": rand(rng, (n, c), dtype, 0, 5), "axes": axes(a, dtype=np.int32)}
                                for (n, c), a in [((2, 3), 0), ((3, 4), 1), ((0, 2), 0), ((2, 3), -1)]])


@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduce_bad_runtime_axes(keepdims, target):
    m = build(reduce_model(keepdims, 2), target)
    x = np.ones((2, 4, 3), F32)
    with pytest.raises(ModelError, match=r"node 'ReduceSum' \(ReduceSum\): axes 'axes' entry 1 is 3, out of range "
                                         r"for rank 3"):
        m.run({"x": x, "axes": axes(0, 3)})
    with pytest.raises(ModelError, match=r"node 'ReduceSum' \(ReduceSum\): axes 'axes' entry 0 is -4, out of range "
                                         r"for rank 3"):
        m.run({"x": x, "axes": axes(-4, 1)})
    with pytest.raises(ModelError, match=r"node 'ReduceSum' \(ReduceSum\): axes 'axes' name an axis more than once"):
        m.run({"x": x, "axes": axes(1, -2)})
    # the module still works afterwards
    assert_outputs_match(m.run({"x": x, "axes": axes(0, 1)}),
                         reference(reduce_model(keepdims, 2), {"x": x, "axes": axes(0, 1)}))


def test_reduce_runtime_axes_too_many_entries():
    node = helper.make_node("ReduceMax", ["x", "axes"], ["y"], name="r", keepdims=0)
    model = make_model([node], [vinfo("x", F32, ["n", 2]), vinfo("axes", I64, [3])], [vinfo("y", F32, None)],
                       opset=18)
    with pytest.raises(CompileError, match=r"node 'r' \(ReduceMax\): axes 'axes' has 3 entries; 'x' has only 2 axes"):
        compile_model(model, _TMP / "too_many.wasm")


# ----------------------------------------------------------------------------- Squeeze, Unsqueeze


def test_squeeze_runtime_axes(target):
    model = make_model([helper.make_node("Squeeze", ["x", "axes"], ["y"], name="sq")],
                       [vinfo("x", F32, ["a", "b", "c"]), vinfo("axes", I64, [2])], [vinfo("y", F32, None)], opset=13)
    rng = np.random.default_rng(5)
    m = check_model(model, target, [{"x": rand(rng, s), "axes": a} for s, a in
                                    [((1, 3, 1), axes(0, 2)), ((4, 1, 1), axes(-1, 1)), ((1, 1, 5), axes(1, 0))]])
    with pytest.raises(ModelError, match=r"node 'sq' \(Squeeze\): cannot squeeze dim 1 of 'x': it is 3, not 1"):
        m.run({"x": rand(rng, (1, 3, 1)), "axes": axes(0, 1)})
    with pytest.raises(ModelError, match=r"node 'sq' \(Squeeze\): axes 'axes' entry 1 is 3, out of range"):
        m.run({"x": rand(rng, (1, 3, 1)), "axes": axes(0, 3)})
    with pytest.raises(ModelError, match=r"node 'sq' \(Squeeze\): axes 'axes' name an axis more than once"):
        m.run({"x": rand(rng, (1, 3, 1)), "axes": axes(0, -3)})


def test_unsqueeze_runtime_axes(target):
    model = make_model([helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="un")],
                       [vinfo("x", F32, ["n", "c"]), vinfo("axes", I64, [2])], [vinfo("y", F32, None)], opset=13)
    rng = np.random.default_rng(6)
    m = check_model(model, target, [{"x": rand(rng, s), "axes": a} for s, a in
                                    [((2, 3), axes(0, 3)), ((4, 1), axes(-1, 1)), ((3, 2), axes(2, 0)),
                                     ((0, 2), axes(1, 2))]])
    with pytest.raises(ModelError, match=r"node 'un' \(Unsqueeze\): axes 'axes' entry 0 is 4, out of range "
                                                      r"for rank 4"):
        m.run({"x": rand(rng, (2, 3)), "axes": axes(4, 0)})
    with pytest.raises(ModelError, match=r"node 'un' \(Unsqueeze\): axes 'axes' name an axis more than once"):
        m.run({"x": rand(rng, (2, 3)), "axes": axes(3, -1)})


def test_unsqueeze_then_reduce(target):
    """Run-time dims flow on: Unsqueeze's fresh dims feed a static-axes reduction."""
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
             helper.make_node("ReduceSum", ["u", "last"], ["y"], keepdims=0)]
    model = make_model(nodes, [vinfo("x", F32, ["n"]), vinfo("axes", I64, [1])], [vinfo("y", F32, None)],
                       [const("last", axes(-1))], opset=13)
    rng = np.random.default_rng(7)
    check_model(model, target, [{"x": rand(rng, (n,)), "axes": axes(a)} for n, a in [(3, 0), (4, 1), (2, -1)]])


# ----------------------------------------------------------------------------- Slice


def test_slice_runtime_axes(target):
    """Axes at run time, with starts, ends and steps at run time too (negative steps
    included) or constant."""
    model = make_model([helper.make_node("Slice", ["x", "s", "e", "axes", "st"], ["y"], name="sl"),
                        helper.make_node("Slice", ["x", "s2", "e2", "axes"], ["z"])],
                       [vinfo("x", F32, ["n", 4, "c"]), vinfo("s", I64, [2]), vinfo("e", I64, [2]),
                        vinfo("axes", I64, [2]), vinfo("st", I64, [2])],
                       [vinfo("y", F32, None), vinfo("z", F32, None)],
                       [const("s2", axes(1, 0)), const("e2", axes(3, -1))])
    rng = np.random.default_rng(8)
    cases = [((3, 5), axes(0, 2), axes(1, 0), axes(3, 4), axes(1, 2)),
             ((4, 6), axes(2, 1), axes(-1, 3), axes(-9, 0), axes(-1, -1)),
             ((2, 3), axes(-1, 0), axes(0, 0), axes(10, 1), axes(2, 1)),
             ((5, 2), axes(1, -3), axes(1, -1), axes(100, -100), axes(1, -2))]
    m = check_model(model, target, [{"x": rand(rng, (n, 4, c)), "s": s, "e": e, "axes": a, "st": st}
                                    for (n, c), a, s, e, st in cases])
    with pytest.raises(ModelError, match=r"node 'sl' \(Slice\): axes 'axes' name an axis more than once"):
        m.run({"x": rand(rng, (2, 4, 3)), "s": axes(0, 0), "e": axes(1, 1), "axes": axes(0, -3), "st": axes(1, 1)})
    with pytest.raises(ModelError, match=r"node 'sl' \(Slice\): axes 'axes' entry 1 is -4, out of range"):
        m.run({"x": rand(rng, (2, 4, 3)), "s": axes(0, 0), "e": axes(1, 1), "axes": axes(0, -4), "st": axes(1, 1)})


# ----------------------------------------------------------------------------- Pad


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_runtime_axes(mode, target):
    inputs = ["x", "pads"] + (["value"] if mode == "constant" else [""]) + ["axes"]
    model = make_model([helper.make_node("Pad", inputs, ["y"], name="pad", mode=mode)],
                       [vinfo("x", F32, ["n", 4, "c"]), vinfo("pads", I64, [4]), vinfo("axes", I64, [2])],
                       [vinfo("y", F32, None)], [const("value", np.array(2.5, F32))], opset=19)
    rng = np.random.default_rng(9)
    # (onnx.reference takes no negative pads; tests/test_ops_layout.py crops)
    cases = [((3, 5), axes(0, 2), axes(1, 0, 2, 1)), ((4, 3), axes(-1, 1), axes(0, 2, 1, 1)),
             ((2, 4), axes(2, 0), axes(1, 1, 2, 0))]
    m = check_model(model, target, [{"x": rand(rng, (n, 4, c)), "pads": p, "axes": a} for (n, c), a, p in cases])
    with pytest.raises(ModelError, match=r"node 'pad' \(Pad\): axes 'axes' name an axis more than once"):
        m.run({"x": rand(rng, (2, 4, 3)), "pads": axes(1, 1, 1, 1), "axes": axes(2, -1)})
    with pytest.raises(ModelError, match=r"node 'pad' \(Pad\): axes 'axes' entry 0 is 3, out of range"):
        m.run({"x": rand(rng, (2, 4, 3)), "pads": axes(1, 1, 1, 1), "axes": axes(3, 1)})
