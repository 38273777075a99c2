"""Unique, Compress, TopK, NonMaxSuppression and OneHot: outputs sized from data or from a
run-time input, on both targets. Each model is compiled once with symbolic dims and run
with several bindings (outputs of different sizes, zero-length ones included), compared
with onnx.reference, or with onnxruntime where onnx.reference is wrong (the reason is next
to the test), or with numpy where both differ from the spec."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.ir.graph import CompileError
from util import build, check_model, const, make_model, ort_reference, rand, reference, vinfo

RNG = np.random.default_rng(7)


def _ints(shape, dtype, lo=0, hi=4):
    """Small integers (many ties and duplicates) as ``dtype``."""
    return RNG.integers(lo, hi, size=shape).astype(dtype)


# ----------------------------------------------------------------------------- Unique


def _unique_model(x_shape, dtype, outputs=("y", "i", "inv", "c"), opset=17, **attrs):
    out_types = {"y": dtype, "i": np.int64, "inv": np.int64, "c": np.int64}
    return make_model([helper.make_node("Unique", ["x"], list(outputs), name="u", **attrs)],
                      [vinfo("x", dtype, x_shape)], [vinfo(o, out_types[o], None) for o in outputs if o], opset=opset)


UNIQUE_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8, np.bool_]


@pytest.mark.parametrize("dtype", UNIQUE_DTYPES)
def test_unique_flat_sorted(dtype, target):
    m = _unique_model(["a", "b"], dtype, sorted=1)
    check_model(m, target, [{"x": _ints((4, 6), dtype)}, {"x": _ints((7, 3), dtype, -5, 9)},
                            {"x": _ints((1, 1), dtype)}, {"x": np.zeros((0, 3), dtype)}])


@pytest.mark.parametrize("dtype", UNIQUE_DTYPES)
def test_unique_flat_unsorted(dtype, target):
    """1-D input: onnx.reference's sorted=0 path (np.take along axis 0) is right there."""
    m = _unique_model(["n"], dtype, sorted=0)
    check_model(m, target, [{"x": _ints(20, dtype)}, {"x": _ints(9, dtype, -5, 9)}, {"x": _ints(1, dtype)},
                            {"x": np.zeros(0, dtype)}])


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_unique_flat_unsorted_2d(dtype, target):
    """onnxruntime: onnx.reference takes the unsorted Y along axis 0 of the unflattened
    input, which is wrong for rank > 1."""
    m = _unique_model(["a", "b"], dtype, sorted=0)
    check_model(m, target, [{"x": _ints((4, 6), dtype)}, {"x": _ints((3, 2), dtype, -5, 9)},
                            {"x": np.zeros((2, 0), dtype)}], ref=ort_reference)


@pytest.mark.parametrize("sorted_", [0, 1])
def test_unique_y_only(sorted_, target):
    """onnxruntime: with Y as the only output onnx.reference returns the sorted values
    even for sorted=0."""
    m = _unique_model(["n"], np.float32, outputs=("y",), sorted=sorted_)
    mod = check_model(m, target, [{"x": np.array([3, 1, 3, 2, 1, 5], np.float32)}, {"x": _ints(17, np.float32)},
                                  {"x": np.zeros(0, np.float32)}], ref=ort_reference)
    assert str(mod.outputs[0].shape[0]).startswith("unique_")


def test_unique_some_outputs(target):
    """indices and counts without inverse_indices (an empty name leaves one out)."""
    m = _unique_model(["n"], np.int64, outputs=("y", "i", "", "c"), sorted=1)
    check_model(m, target, [{"x": _ints(15, np.int64)}, {"x": np.zeros(0, np.int64)}])


def test_unique_nan_and_signed_zero(target):
    """NaNs are one value, sorted last; -0.0 equals 0.0 (numpy 2's unique)."""
    m = _unique_model(["n"], np.float32, sorted=1)
    x = np.array([np.nan, 1, np.nan, 0.0, -0.0, 1, -2, np.nan], np.float32)
    check_model(m, target, [{"x": x}, {"x": x[::-1].copy()}, {"x": np.array([np.nan], np.float32)}])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_unique_axis_sorted(axis, dtype, target):
    m = _unique_model(["a", "b", "c"], dtype, sorted=1, axis=axis)
    base = _ints((2, 3, 2), dtype, 0, 2)
    # repeated slices along every axis
    x = np.concatenate([base, base[:, ::-1], base], axis=axis % 3)
    x = np.concatenate([x, x], axis=(axis + 1) % 3)
    check_model(m, target, [{"x": x}, {"x": _ints((3, 5, 2), dtype, 0, 2)}, {"x": _ints((1, 1, 1), dtype)},
                            {"x": np.zeros((2, 0, 3), dtype)}, {"x": np.zeros((0, 2, 0), dtype)}])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_unique_axis_unsorted(axis, target):
    """onnxruntime for axis != 0: onnx.reference takes the unsorted Y along axis 0."""
    m = _unique_model(["a", "b", "c"], np.float32, sorted=0, axis=axis)
    x = np.concatenate([_ints((2, 2, 2), np.float32, 0, 2)] * 3, axis=axis)
    check_model(m, target, [{"x": x}, {"x": _ints((3, 4, 2), np.float32, 0, 2)}, {"x": np.zeros((2, 0, 2), np.float32)}],
                ref=reference if axis == 0 else ort_reference)


def test_unique_empty_slices(target):
    """Slices of no elements are all equal: one group (numpy's answer)."""
    m = _unique_model(["a", "b"], np.float32, sorted=1, axis=0)
    check_model(m, target, [{"x": np.zeros((3, 0), np.float32)}, {"x": _ints((4, 2), np.float32, 0, 2)}])


def test_unique_bad_attributes():
    with pytest.raises(CompileError, match=r"node 'u' \(Unique\): attribute sorted = 2; it must be 0 or 1"):
        build(_unique_model(["n"], np.float32, sorted=2), "native")
    with pytest.raises(CompileError, match=r"node 'u' \(Unique\): axis 2 is out of range for rank 2"):
        build(_unique_model(["a", "b"], np.float32, axis=2), "native")


# ----------------------------------------------------------------------------- Compress


def _compress_model(x_shape, dtype, opset=17, **attrs):
    return make_model([helper.make_node("Compress", ["x", "c"], ["y"], name="cp", **attrs)],
                      [vinfo("x", dtype, x_shape), vinfo("c", np.bool_, ["k"])], [vinfo("y", dtype, None)],
                      opset=opset)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.bool_, np.float16])
def test_compress(axis, dtype, target):
    attrs = {} if axis is None else {"axis": axis}
    m = _compress_model(["a", "b"], dtype, **attrs)
    x = rand(RNG, (4, 5), dtype)
    n = x.size if axis is None else x.shape[axis]
    feeds = [{"x": x, "c": RNG.random(n) < 0.5},
             {"x": x, "c": np.array([True, False, True])},  # shorter: the rest is dropped
             {"x": x, "c": np.concatenate([RNG.random(n) < 0.5, [False, False]])},  # longer, false past the end
             {"x": x, "c": np.zeros(n, np.bool_)},  # selects nothing
             {"x": x, "c": np.ones(n, np.bool_)},
             {"x": rand(RNG, (2, 3), dtype), "c": np.array([], np.bool_)},
             {"x": np.zeros((0, 3), dtype), "c": np.array([True, True], np.bool_)[:0 if axis in (None, 0) else 2]}]
    check_model(m, target, feeds)


def test_compress_constant_condition(target):
    """A constant condition gives a static dim; one past a symbolic axis is checked at run
    time."""
    m = make_model([helper.make_node("Compress", ["x", "c"], ["y"], name="cp", axis=1)],
                   [vinfo("x", np.float32, [2, "n"])], [vinfo("y", np.float32, None)],
                   [const("c", np.array([True, False, True, False]))])
    mod = check_model(m, target, [{"x": rand(RNG, (2, 3))}, {"x": rand(RNG, (2, 6))}])
    assert mod.outputs[0].shape == (2, 2)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'cp' \(Compress\): condition is true at index 2"):
        mod.run({"x": rand(RNG, (2, 2))})


def test_compress_true_past_the_end(target):
    """numpy.compress (which the spec names) fails on a true entry past the input."""
    m = _compress_model(["a", "b"], np.float32, axis=0)
    mod = check_model(m, target, [{"x": rand(RNG, (2, 3)), "c": np.array([True, True, False])}])
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'cp' \(Compress\): condition is true at index 2, past the input's length 2 "
                             r"along axis 0"):
        mod.run({"x": rand(RNG, (2, 3)), "c": np.array([True, False, True])})
    flat = build(_compress_model(["a", "b"], np.float32), target)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'cp' \(Compress\): condition is true at index 6, "
                                                      r"past the input's size 6"):
        flat.run({"x": rand(RNG, (2, 3)), "c": np.eye(1, 8, 6, dtype=np.bool_)[0]})


def test_compress_compile_errors():
    m = make_model([helper.make_node("Compress", ["x", "c"], ["y"], name="cp")],
                   [vinfo("x", np.float32, ["n"]), vinfo("c", np.int64, ["n"])], [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError, match=r"node 'cp' \(Compress\): condition 'c' has dtype int64; it must be bool"):
        build(m, "native")
    with pytest.raises(CompileError, match=r"node 'cp' \(Compress\): axis = -1: Compress-9 takes no negative axis"):
        build(_compress_model(["a", "b"], np.float32, opset=9, axis=-1), "native")


def test_compress_opset9(target):
    check_model(_compress_model(["a", "b"], np.float32, opset=9, axis=1), target,
                [{"x": rand(RNG, (3, 4)), "c": np.array([False, True, True])},
                 {"x": rand(RNG, (2, 2)), "c": np.array([True])}])


# ----------------------------------------------------------------------------- TopK


def _topk_model(x_shape, dtype, opset=11, **attrs):
    return make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk", **attrs)],
                      [vinfo("x", dtype, x_shape), vinfo("k", np.int64, [1])],
                      [vinfo("v", dtype, None), vinfo("i", np.int64, None)], opset=opset)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.uint8, np.float16])
def test_topk_last_axis(dtype, largest, target):
    m = _topk_model(["a", "n"], dtype, largest=largest)
    feeds = [{"x": _ints((3, 9), dtype, 0, 5), "k": np.array([4])},  # many ties: lower index first
             {"x": rand(RNG, (2, 33), dtype, 0, 100), "k": np.array([33])},
             {"x": rand(RNG, (4, 1), dtype, 0, 9), "k": np.array([1])},
             {"x": rand(RNG, (2, 5), dtype, 0, 9), "k": np.array([0])},  # k = 0: empty outputs
             {"x": np.zeros((0, 5), dtype), "k": np.array([2])},
             {"x": np.zeros((3, 0), dtype), "k": np.array([0])}]
    check_model(m, target, feeds)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_topk_long_rows(dtype, largest, target):
    """Along a contiguous row of 4- or 8-byte numbers the kernel tests a vector of the row at
    a time against the heap's root, and only lanes not strictly behind it take the exact
    test: rows of many vectors and a few elements after the last (1003 = k + 62 x 16 + 1
    natively), values that climb (every element enters), that fall (none does after the
    first k), many ties with the root (lower index first), and for floats NaN, infinities
    and both zeros (NaN counts as the largest value)."""
    m = _topk_model(["a", "n"], dtype, largest=largest)
    n = 1003
    climb = np.arange(n).astype(dtype)
    rows = [rand(RNG, (3, n), dtype, -1000, 1000), _ints((2, n), dtype, 0, 4), np.stack([climb, climb[::-1]])]
    if np.dtype(dtype).kind == "f":
        x = rand(RNG, (2, n), dtype, -5, 5)
        x[0, RNG.integers(0, n, 40)] = np.nan
        x[1, RNG.integers(0, n, 30)] = np.inf
        x[1, RNG.integers(0, n, 30)] = -np.inf
        x[:, RNG.integers(0, n, 50)] = 0.0
        x[:, RNG.integers(0, n, 50)] = -0.0
        rows.append(x)
    feeds = [{"x": r, "k": np.array([k])} for r in rows for k in (1, 10, 40)]
    check_model(m, target, feeds)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_key_extremes(largest, target):
    """Numbers of at most 32 bits rank by an int32 key: unsigned values on both sides of
    2^31, the signed extremes, and floats with subnormals, both zeros, infinities and NaNs
    of either sign (every NaN ranks above every number, all NaNs equal: by index)."""
    u32 = np.array([0, 1, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 7, 2**31, 0, 2**32 - 2], np.uint32)
    i32 = np.array([0, -1, 2**31 - 1, -2**31, 5, -2**31 + 1, 2**31 - 2, -1, 0, 3], np.int32)
    i8 = np.array([0, -1, 127, -128, 5, -127, 126, -1, 0, 3], np.int8)
    neg_nan = np.array([0xFFC00001], np.uint32).view(np.float32)[0]
    f32 = np.array([0.0, -0.0, 1e-45, -1e-45, np.inf, -np.inf, np.nan, neg_nan, 3.5, -3.5, 1e-45, 0.0],
                   np.float32)
    for x in (u32, i32, i8, f32):
        m = _topk_model(["n"], x.dtype, largest=largest)
        check_model(m, target, [{"x": x, "k": np.array([k])} for k in (1, 4, x.size)])


@pytest.mark.parametrize("axis", [0, 1, -3])
def test_topk_other_axes(axis, target):
    m = _topk_model(["a", "b", "c"], np.float32, axis=axis, sorted=1)
    check_model(m, target, [{"x": _ints((5, 4, 3), np.float32, 0, 6), "k": np.array([2])},
                            {"x": rand(RNG, (3, 7, 2)), "k": np.array([3])},
                            {"x": rand(RNG, (2, 2, 2)), "k": np.array([0])}])


def test_topk_unsorted_and_nan(target):
    """sorted=0 leaves the order free; like onnx.reference (and onnxruntime) the result is
    sorted. NaN counts as the largest value."""
    for largest in (1, 0):
        m = _topk_model(["n"], np.float32, largest=largest, sorted=0)
        x = np.array([1, np.nan, 3, np.nan, 3, -np.inf, 0.0, -0.0], np.float32)
        check_model(m, target, [{"x": x, "k": np.array([5])}, {"x": x[::-1].copy(), "k": np.array([8])}])


def test_topk_constant_k(target):
    """A constant k gives a static dim; k <= n is checked at run time for a symbolic n."""
    m = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")],
                   [vinfo("x", np.float32, [2, "n"])], [vinfo("v", np.float32, None), vinfo("i", np.int64, None)],
                   [const("k", np.array([3], np.int64))], opset=11)
    mod = check_model(m, target, [{"x": rand(RNG, (2, 5))}, {"x": rand(RNG, (2, 3))}])
    assert mod.outputs[0].shape == (2, 3) and mod.outputs[1].shape == (2, 3)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'tk' \(TopK\): k exceeds the length of axis 1"):
        mod.run({"x": rand(RNG, (2, 2))})


@pytest.mark.parametrize("opset", [9, 10])
def test_topk_old_versions(opset, target):
    """TopK-1 takes k as an attribute; TopK-10 as an input; both are largest-first."""
    if opset == 9:
        m = make_model([helper.make_node("TopK", ["x"], ["v", "i"], name="tk", k=2, axis=0)],
                       [vinfo("x", np.float32, ["n", 3])], [vinfo("v", np.float32, None), vinfo("i", np.int64, None)],
                       opset=9)
        feeds = [{"x": _ints((5, 3), np.float32)}, {"x": rand(RNG, (2, 3))}]
    else:
        m = _topk_model(["a", "n"], np.float32, opset=10)
        feeds = [{"x": _ints((2, 6), np.float32), "k": np.array([3])}, {"x": rand(RNG, (3, 2)), "k": np.array([2])}]
    check_model(m, target, feeds)


def test_topk_bad_k(target):
    """k < 0 and k > the axis fail naming the node (onnxruntime also fails both;
    onnx.reference returns nothing for k < 0)."""
    mod = build(_topk_model(["a", "n"], np.float32), target)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'tk' \(TopK\): k = -1 is negative"):
        mod.run({"x": rand(RNG, (2, 5)), "k": np.array([-1])})
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'tk' \(TopK\): k = 6 exceeds the length 5 of axis 1 \(n\) of input 'x'"):
        mod.run({"x": rand(RNG, (2, 5)), "k": np.array([6])})


def test_topk_compile_errors():
    with pytest.raises(CompileError, match=r"node 'tk' \(TopK\): input 'x' has dtype int64; TopK-10 takes "
                                           r"float16, float32, float64"):
        build(_topk_model(["n"], np.int64, opset=10), "native")
    with pytest.raises(CompileError, match=r"node 'tk' \(TopK\): attribute largest = 2; it must be 0 or 1"):
        build(_topk_model(["n"], np.float32, largest=2), "native")
    with pytest.raises(CompileError, match=r"node 'tk' \(TopK\): axis 1 is out of range for rank 1"):
        build(_topk_model(["n"], np.float32, axis=1), "native")
    with pytest.raises(CompileError, match=r"node 'tk' \(TopK\): input 'x' has dtype bool; TopK takes"):
        build(_topk_model(["n"], np.bool_), "native")
    m = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")],
                   [vinfo("x", np.float32, [2, 4])], [vinfo("v", np.float32, None), vinfo("i", np.int64, None)],
                   [const("k", np.array([5], np.int64))], opset=11)
    with pytest.raises(CompileError, match=r"node 'tk' \(TopK\): k exceeds the length of axis 1: 5 > 4"):
        build(m, "native")
    m = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")],
                   [vinfo("x", np.float32, ["n"]), vinfo("k", np.int64, ["m"])],
                   [vinfo("v", np.float32, None), vinfo("i", np.int64, None)], opset=11)
    with pytest.raises(CompileError, match=r"node 'tk' \(TopK\): K 'k' has shape \(m,\); it must have exactly one "
                                           r"element \(a static shape\)"):
        build(m, "native")


# ----------------------------------------------------------------------------- NonMaxSuppression


def _nms_model(inputs=("b", "s", "m", "iou", "t"), **attrs):
    types = {"b": (np.float32, ["B", "S", 4]), "s": (np.float32, ["B", "C", "S"]), "m": (np.int64, [1]),
             "iou": (np.float32, [1]), "t": (np.float32, [1])}
    return make_model([helper.make_node("NonMaxSuppression", list(inputs), ["y"], name="nms", **attrs)],
                      [vinfo(i, *types[i]) for i in inputs if i], [vinfo("y", np.int64, None)], opset=11)


def _boxes(nb, ns, center):
    if center:  # [x_center, y_center, width, height]
        c = RNG.uniform(0, 4, (nb, ns, 2))
        wh = RNG.uniform(0.5, 3, (nb, ns, 2))
        return np.concatenate([c, wh], axis=2).astype(np.float32)
    corners = RNG.uniform(0, 5, (nb, ns, 4)).astype(np.float32)
    return np.round(corners, 1)  # ties of coordinates and overlaps of 0


def _nms_feeds(nb, nc, ns, center, max_out, iou, thr):
    scores = np.round(RNG.uniform(0, 1, (nb, nc, ns)), 1).astype(np.float32)  # tied scores
    return {"b": _boxes(nb, ns, center), "s": scores, "m": np.array([max_out]),
            "iou": np.array([iou], np.float32), "t": np.array([thr], np.float32)}


@pytest.mark.parametrize("center", [0, 1])
def test_nms(center, target):
    m = _nms_model(center_point_box=center)
    feeds = [_nms_feeds(1, 1, 6, center, 3, 0.5, 0.0), _nms_feeds(2, 3, 10, center, 4, 0.3, 0.2),
             _nms_feeds(3, 2, 25, center, 100, 0.0, 0.5), _nms_feeds(1, 2, 40, center, 40, 1.0, -1.0),
             _nms_feeds(2, 2, 8, center, 5, 0.5, 2.0),  # every score below the threshold: no box
             _nms_feeds(2, 2, 8, center, 0, 0.5, 0.0),  # at most 0 boxes
             _nms_feeds(0, 2, 8, center, 3, 0.5, 0.0), _nms_feeds(2, 2, 0, center, 3, 0.5, 0.0)]
    check_model(m, target, feeds)


def test_nms_no_score_threshold(target):
    m = _nms_model(("b", "s", "m", "iou"))
    feeds = [_nms_feeds(1, 2, 12, 0, 5, 0.4, 0.0), _nms_feeds(2, 1, 7, 0, 2, 0.7, 0.0)]
    for f in feeds:
        del f["t"]
    check_model(m, target, feeds)


def test_nms_defaults(target):
    """onnxruntime: onnx.reference fails when iou_threshold is absent (it reads .size of
    None) and when max_output_boxes_per_class is negative (max(a[0], 0) is no array)."""
    m = _nms_model(("b", "s", "m"))
    feeds = [_nms_feeds(1, 2, 12, 0, 5, 0, 0), _nms_feeds(2, 1, 7, 0, 2, 0, 0)]
    for f in feeds:
        del f["t"], f["iou"]
    check_model(m, target, feeds, ref=ort_reference)
    neg = _nms_model()
    check_model(neg, target, [_nms_feeds(1, 2, 5, 0, -3, 0.5, 0.0), _nms_feeds(1, 1, 5, 0, 2, 0.5, 0.0)],
                ref=ort_reference)


def test_nms_without_max_output(target):
    """No max_output_boxes_per_class means 0: nothing selected, a static [0, 3] output
    (onnxruntime: onnx.reference fails on the absent inputs)."""
    m = _nms_model(("b", "s"))
    f = _nms_feeds(1, 2, 6, 0, 0, 0, 0)
    mod = check_model(m, target, [{"b": f["b"], "s": f["s"]}], ref=ort_reference)
    assert mod.outputs[0].shape == (0, 3)


def test_nms_bad_inputs(target):
    """iou_threshold outside [0, 1] fails (onnxruntime: "iou_threshold must be in range
    [0, 1]"); boxes and scores that disagree fail the shape check."""
    mod = build(_nms_model(), target)
    for bad in (1.5, -0.1, np.nan):
        with pytest.raises(wasm_runtime.ModelError,
                           match=r"node 'nms' \(NonMaxSuppression\): iou_threshold is outside \[0, 1\]"):
            mod.run(_nms_feeds(1, 1, 4, 0, 2, bad, 0.0))
    m = make_model([helper.make_node("NonMaxSuppression", ["b", "s", "m"], ["y"], name="nms")],
                   [vinfo("b", np.float32, ["B", "S", 4]), vinfo("s", np.float32, ["B", "C", "T"]),
                    vinfo("m", np.int64, [1])],
                   [vinfo("y", np.int64, None)], opset=11)
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'nms' \(NonMaxSuppression\): scores 's' dim 2 vs boxes dim 1 \(boxes\): "
                             r"T = 5 does not equal S = 4"):
        build(m, target).run({"b": np.zeros((1, 4, 4), np.float32), "s": np.zeros((1, 1, 5), np.float32),
                              "m": np.array([1])})


def test_nms_compile_errors():
    with pytest.raises(CompileError,
                       match=r"node 'nms' \(NonMaxSuppression\): attribute center_point_box = 2; it must be 0 or 1"):
        build(_nms_model(center_point_box=2), "native")
    m = make_model([helper.make_node("NonMaxSuppression", ["b", "s"], ["y"], name="nms")],
                   [vinfo("b", np.float32, [1, "S", 3]), vinfo("s", np.float32, [1, 1, "S"])],
                   [vinfo("y", np.int64, None)], opset=11)
    with pytest.raises(CompileError, match=r"node 'nms' \(NonMaxSuppression\): boxes 'b' dim 2 \(the box "
                                           r"coordinates\): 3 != 4"):
        build(m, "native")


# ----------------------------------------------------------------------------- OneHot


def _onehot_model(ind_shape, ind_dtype, depth_dtype, values_dtype, opset=11, depth_shape=(), **attrs):
    return make_model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="oh", **attrs)],
                      [vinfo("i", ind_dtype, ind_shape), vinfo("d", depth_dtype, list(depth_shape)),
                       vinfo("v", values_dtype, [2])], [vinfo("y", values_dtype, None)], opset=opset)


@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
@pytest.mark.parametrize("ind_dtype,depth_dtype,values_dtype", [
    (np.int64, np.int64, np.float32), (np.int32, np.float32, np.int64), (np.float32, np.int32, np.int32),
    (np.int64, np.float64, np.float64), (np.uint8, np.int64, np.int64)])
def test_onehot(axis, ind_dtype, depth_dtype, values_dtype, target):
    m = _onehot_model(["a", "b"], ind_dtype, depth_dtype, values_dtype, axis=axis)
    lo = 0 if ind_dtype == np.uint8 else -6
    values = np.array([2, 7], values_dtype)
    feeds = [{"i": _ints((2, 3), ind_dtype, lo, 7), "d": np.array(5, depth_dtype), "v": values},
             {"i": _ints((4, 1), ind_dtype, lo, 4), "d": np.array(3, depth_dtype), "v": values[::-1].copy()},
             {"i": _ints((3, 2), ind_dtype, 0, 2), "d": np.array(1, depth_dtype), "v": values},
             {"i": np.zeros((0, 2), ind_dtype), "d": np.array(4, depth_dtype), "v": values}]
    check_model(m, target, feeds)


def test_onehot_constant_depth(target):
    """A constant depth gives a static dim."""
    m = make_model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="oh", axis=0)],
                   [vinfo("i", np.int64, ["n"])], [vinfo("y", np.float32, None)],
                   [const("d", np.array(4, np.int64)), const("v", np.array([0, 1], np.float32))], opset=11)
    mod = check_model(m, target, [{"i": np.array([0, 3, -1, 9])}, {"i": np.array([2])}])
    assert mod.outputs[0].shape[0] == 4


def test_onehot_fractional_depth(target):
    """onnxruntime: a float depth truncates toward zero (onnx.reference's np.arange takes
    the ceiling: 3.7 would give 4 classes)."""
    m = _onehot_model(["n"], np.int64, np.float32, np.float32, depth_shape=[1])
    check_model(m, target, [{"i": np.array([0, 3, 2, -1]), "d": np.array([3.7], np.float32),
                             "v": np.array([0, 1], np.float32)},
                            {"i": np.array([1]), "d": np.array([2.0], np.float32), "v": np.array([5, 6], np.float32)}],
                ref=ort_reference)


def test_onehot_9_negative_indices(target):
    """OneHot-9: an index outside [0, depth) gives all off values, negative ones included,
    as the spec says (onnx.reference and onnxruntime count them from the end, OneHot-11's
    meaning), so the expected output is computed here."""
    m = _onehot_model(["n"], np.int64, np.int64, np.float32, opset=9)
    mod = build(m, target)
    for idx, depth in (([0, -1, 2, 3, -3], 3), ([-1, 1], 2)):
        i = np.array(idx)
        want = (i[:, None] == np.arange(depth)[None, :]).astype(np.float32) * 4 + 1
        got = mod.run({"i": i, "d": np.array(depth), "v": np.array([1, 5], np.float32)})["y"]
        np.testing.assert_array_equal(got, want)


def test_onehot_bad_depth(target):
    """depth < 1 fails (onnxruntime: "Depth is negative"; onnx.reference gives an empty
    dim for 0)."""
    mod = build(_onehot_model(["n"], np.int64, np.int64, np.float32), target)
    for d in (0, -2):
        with pytest.raises(wasm_runtime.ModelError, match=rf"node 'oh' \(OneHot\): depth = {d} is less than 1"):
            mod.run({"i": np.array([0, 1]), "d": np.array(d), "v": np.array([0, 1], np.float32)})


def test_onehot_compile_errors():
    m = make_model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="oh")],
                   [vinfo("i", np.int64, ["n"]), vinfo("v", np.float32, [2])], [vinfo("y", np.float32, None)],
                   [const("d", np.array(0, np.int64))], opset=11)
    with pytest.raises(CompileError, match=r"node 'oh' \(OneHot\): depth = 0 is less than 1"):
        build(m, "native")
    with pytest.raises(CompileError, match=r"node 'oh' \(OneHot\): values 'v' length \(\[off_value, on_value\]\): "
                                           r"3 != 2"):
        build(make_model([helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="oh")],
                         [vinfo("i", np.int64, ["n"]), vinfo("d", np.int64, []), vinfo("v", np.float32, [3])],
                         [vinfo("y", np.float32, None)], opset=11), "native")
    with pytest.raises(CompileError, match=r"node 'oh' \(OneHot\): axis 3 is out of range for rank 3"):
        build(_onehot_model(["a", "b"], np.int64, np.int64, np.float32, axis=3), "native")
