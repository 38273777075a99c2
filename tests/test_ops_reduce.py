"""ReduceSum, ReduceMean, ReduceMax and ArgMax on both targets against onnx.reference, each
compiled once and run with several bindings of its symbolic dims (0-sized dims included)."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, assert_outputs_match, build, check_model, const, make_model, rand, reference, vinfo

SHAPE = ["n", 4, "c"]
BINDINGS = [(1, 3), (3, 5), (7, 1), (0, 2), (2, 0)]  # n, c
# (axes, keepdims); axes None: none given, so all of them
AXES = [([1], 1), ([0, 2], 0), ([-1], 0), ([-3, 1], 1), ([0, 1, 2], 1), (None, 0)]


def reduce_model(op, dtype, axes, keepdims, opset, noop=0):
    """``op`` over ``axes`` given as an input (opset 18, or 13 for ReduceSum) or attribute."""
    from_input = op == "ReduceSum" or opset >= 18
    inputs, inits, attrs = ["x"], [], {"keepdims": keepdims}
    if noop:
        attrs["noop_with_empty_axes"] = noop
    if axes is not None and from_input:
        inputs.append("axes")
        inits.append(const("axes", np.array(axes, np.int64)))
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, inputs, ["y"], name="red", **attrs)
    return make_model([node], [vinfo("x", dtype, SHAPE)], [vinfo("y", dtype, None)], inits, opset)


def check_reduce(model, dtype, target, bindings=BINDINGS):
    rng = np.random.default_rng(1)
    check_model(model, target, [{"x": rand(rng, (n, 4, c), dtype, -9, 9)} for n, c in bindings], atol=1e-5)


@pytest.mark.parametrize("axes,keepdims", AXES, ids=str)
@pytest.mark.parametrize("op,opset", [("ReduceSum", 13), ("ReduceMax", 13), ("ReduceMax", 18), ("ReduceMean", 18)])
def test_reduce_axes(op, opset, axes, keepdims, target):
    # an empty mean is NaN with a numpy warning: reduce 0-sized dims only for Sum and Max
    bindings = BINDINGS if op != "ReduceMean" else [(1, 3), (3, 5), (7, 1)]
    check_reduce(reduce_model(op, np.float32, axes, keepdims, opset), np.float32, target, bindings)


def test_reduce_mean_attribute_axes(target):
    check_reduce(reduce_model("ReduceMean", np.float32, [-1, 0], 1, 13), np.float32, target, [(1, 3), (5, 7)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
def test_reduce_int(op, dtype, target):
    check_reduce(reduce_model(op, dtype, [0, 2], 0, 18), dtype, target)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean"])
def test_reduce_noop_with_empty_axes(op, target):
    check_reduce(reduce_model(op, np.float32, [], 1, 18, noop=1), np.float32, target, [(1, 3), (3, 0)])


def test_reduce_max_propagates_nan(target):
    model = reduce_model("ReduceMax", np.float32, [1], 0, 18)
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    x[1, 2, 0] = np.nan
    check_model(model, target, [{"x": x}, {"x": x[:1]}])


def test_reduce_axes_must_be_constant():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="red")
    model = make_model([node], [vinfo("x", np.float32, SHAPE), vinfo("axes", np.int64, [1])],
                       [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError, match=r"node 'red' \(ReduceSum\): axes \(input 'axes'\) must be a constant"):
        compile_model(model, _TMP / "red_axes.wasm")


# ----------------------------------------------------------------------------- ArgMax


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (1, 0, 1), (-1, 1, 1), (-1, 0, 0)])
def test_argmax(axis, keepdims, last, dtype, target):
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    model = make_model([node], [vinfo("x", dtype, SHAPE)], [vinfo("y", np.int64, None)])
    rng = np.random.default_rng(2)
    # few distinct values, so the maximum often repeats and the tie rule matters
    feeds = [{"x": rand(rng, (n, 4, c), dtype, -2, 3)} for n, c in [(1, 3), (3, 5), (7, 1)]]
    if axis != 0:
        feeds.append({"x": rand(rng, (0, 4, 2), dtype)})
    check_model(model, target, feeds)


@pytest.mark.parametrize("last", [0, 1])
def test_argmax_nan(last, target):
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=1, select_last_index=last)
    model = make_model([node], [vinfo("x", np.float32, ["n", 5])], [vinfo("y", np.int64, None)])
    x = np.array([[1, np.nan, 3, np.nan, 0], [np.nan, 2, 2, 1, 0], [1, 4, 4, 0, np.nan]], np.float32)
    check_model(model, target, [{"x": x}, {"x": x[:1]}])


def test_argmax_empty_axis(target):
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=0, name="am")
    model = make_model([node], [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.int64, None)])
    mod = build(model, target)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'am' \(ArgMax\): argmax over axis 0 of length 0"):
        mod.run({"x": np.zeros((0, 3), np.float32)})
    feeds = {"x": rand(np.random.default_rng(3), (4, 3))}
    assert_outputs_match(mod.run(feeds), reference(model, feeds))
