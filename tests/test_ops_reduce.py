"""The reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp), ArgMax and
ArgMin, LogSoftmax and Hardmax, and CumProd on both targets against onnx.reference (or
onnxruntime where noted), each compiled once and run with several bindings of its symbolic
dims (0-sized dims included). Axes given at run time: tests/test_runtime_axes.py."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import (_TMP, assert_outputs_match, build, check_model, const, make_model, ort_reference, rand, reference,
                  vinfo)

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


def test_reduce_runtime_axes_need_static_count_without_keepdims():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="red", keepdims=0)
    model = make_model([node], [vinfo("x", np.float32, SHAPE), vinfo("axes", np.int64, ["k"])],
                       [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError, match=r"node 'red' \(ReduceSum\): axes 'axes' has k entries; with keepdims=0 "
                                           r"the output's rank depends on their number, so it must be static"):
        compile_model(model, _TMP / "red_axes.wasm")


# ----------------------------------------------------------------------------- every kind, every dtype

KINDS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
FLOAT_ONLY = ("ReduceLogSum", "ReduceLogSumExp")
# (dtype, ops): ONNX's types for each op (int8, uint8 and bool only for max and min)
KIND_DTYPES = [(np.float32, KINDS), (np.float16, KINDS), (np.float64, KINDS)] + \
    [(t, [k for k in KINDS if k not in FLOAT_ONLY]) for t in (np.int32, np.int64, np.uint32, np.uint64)] + \
    [(t, ["ReduceMax", "ReduceMin"]) for t in (np.int8, np.uint8, np.bool_)]


def values(rng, shape, dtype, positive=False):
    """Small values (products and squares of integers stay exact), positive for LogSum."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" or positive else -3
        return rng.integers(lo, 4, size=shape).astype(dtype)
    return rng.uniform(0.1 if positive else -2, 2, size=shape).astype(dtype)


def kinds_model(ops, dtype, opset, attribute_axes=False):
    """Every op in ``ops`` over axes [0, 2] (keepdims=0) and [1] (kept) of one input (a
    positive one for LogSum), the axes a constant input or (opset < 18) an attribute."""
    nodes, inits = [], [const("a02", np.array([0, 2], np.int64)), const("a1", np.array([1], np.int64))]
    outs = []
    for op in ops:
        src = "p" if op == "ReduceLogSum" else "x"
        for axes, keep, tag in (([0, 2], 0, "a02"), ([1], 1, "a1")):
            out = f"{op}_{tag}"
            if attribute_axes or (opset < 18 and op != "ReduceSum") or (opset < 13):
                nodes.append(helper.make_node(op, [src], [out], keepdims=keep, axes=axes))
            else:
                nodes.append(helper.make_node(op, [src, tag], [out], keepdims=keep))
            outs.append(vinfo(out, dtype, None))
    return make_model(nodes, [vinfo("x", dtype, SHAPE), vinfo("p", dtype, SHAPE)], outs, inits, opset)


def typed_reference(model, feeds):
    """onnx.reference's outputs in the model's dtype: its ReduceSumSquare sums int32 and
    uint32 squares in 64 bits (numpy's sum promotes) and returns them so; the low 32 bits
    are the sum in the input's type, as ONNX defines it."""
    dtype = feeds["x"].dtype
    return {k: np.asarray(v).astype(dtype) for k, v in reference(model, feeds).items()}


@pytest.mark.parametrize("dtype,ops", KIND_DTYPES, ids=lambda v: np.dtype(v).name if not isinstance(v, list) else "")
def test_reduce_kinds_dtypes(dtype, ops, target):
    model = kinds_model(ops, dtype, 20)
    rng = np.random.default_rng(5)
    # onnx.reference sums float16 in float16; float64 computes in float64 (exp and log too)
    tol = {np.float16: 2e-2, np.float64: 1e-12}.get(dtype, 1e-5)
    feeds = [{"x": values(rng, (n, 4, c), dtype), "p": values(rng, (n, 4, c), dtype, True)}
             for n, c in [(1, 3), (3, 5), (2, 1)]]
    check_model(model, target, feeds, rtol=tol, atol=tol, ref=typed_reference)


@pytest.mark.parametrize("opset", [1, 11, 13])
def test_reduce_kinds_attribute_axes(opset, target):
    """The versions whose axes are an attribute (all of them before 13, all but ReduceSum at 13)."""
    model = kinds_model(KINDS, np.float32, opset, attribute_axes=opset < 13)
    rng = np.random.default_rng(6)
    feeds = [{"x": values(rng, (n, 4, c), np.float32), "p": values(rng, (n, 4, c), np.float32, True)}
             for n, c in [(2, 3), (1, 6)]]
    check_model(model, target, feeds, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_reduce_empty_set(dtype, target):
    """Reducing a 0-sized axis gives each kind's identity (-inf for the logs), as
    onnx.reference does; kept 0-sized axes give empty outputs."""
    ops = [k for k in KINDS if np.dtype(dtype).kind == "f" or k not in FLOAT_ONLY]
    if dtype == np.bool_:
        ops = ["ReduceMax", "ReduceMin"]
    else:
        ops.remove("ReduceMean")  # 0 / 0: NaN with a numpy warning (floats), undefined (integers)
    model = kinds_model(ops, dtype, 20)
    rng = np.random.default_rng(7)
    feeds = [{"x": values(rng, (n, 4, c), dtype), "p": values(rng, (n, 4, c), dtype, True)}
             for n, c in [(0, 3), (2, 0), (1, 2)]]
    check_model(model, target, feeds, ref=typed_reference)


def test_reduce_log_sum_exp_is_stable(target):
    """The max is subtracted first: no overflow at 1000; a row of -inf gives -inf, one with
    +inf gives +inf. numpy's logaddexp is the reference: onnx.reference gives NaN for the
    row of -inf (it subtracts a max of -inf)."""
    model = kinds_model(["ReduceLogSumExp"], np.float32, 18)
    x = np.array([[[1000, 999, 998], [0, 1, 2], [-np.inf, -np.inf, -np.inf], [np.inf, 1, 2]]], np.float32)

    def ref(model, feeds):
        x = feeds["x"].astype(np.float64)
        return {"ReduceLogSumExp_a02": np.logaddexp.reduce(x, axis=(0, 2)).astype(np.float32),
                "ReduceLogSumExp_a1": np.logaddexp.reduce(x, axis=1, keepdims=True).astype(np.float32)}

    check_model(model, target, [{"x": x, "p": x}, {"x": x[:, :, :1], "p": x[:, :, :1]}], ref=ref)


@pytest.mark.parametrize("op", ["ReduceL2", "ReduceLogSum"])
def test_reduce_scalar_input(op, target):
    """A scalar reduces over no axes: each kind's map of its one element (|x|, log x)."""
    node = helper.make_node(op, ["x"], ["y"], keepdims=1)
    model = make_model([node], [vinfo("x", np.float32, [])], [vinfo("y", np.float32, None)], opset=18)
    check_model(model, target, [{"x": np.array(v, np.float32)} for v in (2.5, -3.0 if op == "ReduceL2" else 0.5)])


# ----------------------------------------------------------------------------- ArgMax


ARG_DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64,
              np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", ARG_DTYPES)
def test_arg_dtypes(dtype, target):
    """ArgMax and ArgMin, first and last index, kept and dropped axes, in one model per dtype."""
    nodes = [helper.make_node(op, ["x"], [f"{op}{axis}{keep}{last}"], axis=axis, keepdims=keep, select_last_index=last)
             for op in ("ArgMax", "ArgMin") for axis, keep, last in [(0, 1, 0), (1, 0, 1), (-1, 1, 1), (-1, 0, 0)]]
    model = make_model(nodes, [vinfo("x", dtype, SHAPE)], [vinfo(n.output[0], np.int64, None) for n in nodes])
    rng = np.random.default_rng(2)
    # few distinct values, so the extreme often repeats and the tie rule matters
    feeds = [{"x": values(rng, (n, 4, c), dtype)} for n, c in [(1, 3), (3, 5), (7, 1)]]
    check_model(model, target, feeds)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last", [(1, 0, 1), (-1, 0, 0)])
def test_arg_empty_rows(op, axis, keepdims, last, target):
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    model = make_model([node], [vinfo("x", np.float32, SHAPE)], [vinfo("y", np.int64, None)])
    rng = np.random.default_rng(3)
    check_model(model, target, [{"x": rand(rng, (0, 4, 2))}, {"x": rand(rng, (2, 4, 3), np.float32, -2, 3)}])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_nan(op, last, target):
    node = helper.make_node(op, ["x"], ["y"], axis=1, select_last_index=last)
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


def test_argmin_empty_axis(target):
    node = helper.make_node("ArgMin", ["x"], ["y"], axis=1, keepdims=0, name="am")
    model = make_model([node], [vinfo("x", np.float32, [3, "n"])], [vinfo("y", np.int64, None)])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'am' \(ArgMin\): argmin over axis 1 of length 0"):
        build(model, target).run({"x": np.zeros((3, 0), np.float32)})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("n", [1, 3, 4, 7, 1001])
def test_reduce_max_min_split_runs(op, n, target):
    """A float max or min over a contiguous run is folded as four partial results over its
    quarters and the rest (reduce._split_accumulate): NaN in one quarter or in the rest
    still wins, and infinities order as numbers."""
    from toolkit.codegen.reduce import SPLIT_RUNS
    assert SPLIT_RUNS == 4
    model = make_model([helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)], [vinfo("x", np.float32, ["r", n])],
                       [vinfo("y", np.float32, None)], opset=13)
    rng = np.random.default_rng(n)
    x = rand(rng, (6, n), np.float32, -100, 100)
    x[1, -1] = np.nan  # the rest (or a quarter, for n = 4)
    x[2, n // 2] = np.nan
    x[3, 0] = np.inf
    x[4, n - 1] = -np.inf
    check_model(model, target, [{"x": x}, {"x": x[:1]}, {"x": x[:0]}])


# ----------------------------------------------------------------------------- LogSoftmax, Hardmax


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax", "Softmax"])
def test_softmax_family(op, dtype, target):
    """Version 13: along one axis (each axis of a rank-3 input, in one model)."""
    nodes = [helper.make_node(op, ["x"], [f"y{axis}"], axis=axis) for axis in (0, 1, -1)]
    model = make_model(nodes, [vinfo("x", dtype, SHAPE)], [vinfo(f"y{a}", dtype, None) for a in (0, 1, -1)], opset=13)
    rng = np.random.default_rng(8)
    tol = {np.float16: 5e-3, np.float64: 1e-12}.get(dtype, 1e-5)
    # few distinct values for Hardmax, so the maximum repeats and the first one must win
    feeds = [{"x": values(rng, (n, 4, c), dtype) if op == "Hardmax" else rand(rng, (n, 4, c), dtype, -5, 5)}
             for n, c in [(1, 3), (3, 5), (2, 1), (0, 2)]]
    check_model(model, target, feeds, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("op", ["LogSoftmax", "Softmax"])
def test_softmax_inner_axis_chunks(op, dtype, target):
    """Along an axis that is not the last, rows go through the passes SOFTMAX_CHUNK (256)
    at a time: 300 inner positions are a whole chunk and a partial one, with -inf, and for
    Softmax large values (the maximum must come first; onnx.reference's LogSoftmax takes the
    log of a softmax, so there a spread that underflows would be its error, not ours)."""
    from toolkit.codegen.reduce import SOFTMAX_CHUNK
    assert SOFTMAX_CHUNK < 300 < 2 * SOFTMAX_CHUNK
    nodes = [helper.make_node(op, ["x"], [f"y{axis}"], axis=axis) for axis in (0, 1)]
    model = make_model(nodes, [vinfo("x", dtype, ["n", 6, "c"])], [vinfo(f"y{a}", dtype, None) for a in (0, 1)],
                       opset=13)
    rng = np.random.default_rng(18)
    tol = {np.float16: 5e-3, np.float64: 1e-12}.get(dtype, 1e-5)
    feeds = []
    for n, c in [(2, 300), (1, 7), (3, 256)]:
        x = rand(rng, (n, 6, c), dtype, *((-60, 60) if op == "Softmax" else (-5, 5)))
        x[0, 2, 0] = -np.inf
        feeds.append({"x": x})
    check_model(model, target, feeds, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_last_axis_rows(op, target):
    """float32 along the last axis runs by vectors per row (reduce._softmax_rows): rows
    shorter than a vector (element by element), of whole vectors (wasm32 4 lanes, AVX-512
    16), of whole vectors and a remainder (one more vector overlapping the last: the sum must
    count its new lanes once), and longer than MAX_CHAINS vectors; in one model with the row
    length symbolic. Masked entries as attention makes them (-1e4, float32's lowest, -inf)
    give exact zeros (Softmax), values spread past exp's normal range flush to 0 where the
    reference has subnormals (< 1.7e-38), and NaN and +inf rows give NaN. The reference is
    numpy in float64."""
    from toolkit.codegen.reduce import MAX_CHAINS
    node = helper.make_node(op, ["x"], ["y"], axis=-1)
    model = make_model([node], [vinfo("x", np.float32, ["r", "n"])], [vinfo("y", np.float32, None)], opset=13)
    lowest = np.finfo(np.float32).min

    def ref(model, feeds):
        x = feeds["x"].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            m = x.max(axis=-1, keepdims=True)
            e = np.exp(x - m)
            total = e.sum(axis=-1, keepdims=True)
            y = e / total if op == "Softmax" else x - m - np.log(total)
        return {"y": y.astype(np.float32)}

    rng = np.random.default_rng(30)
    feeds = []
    for n in (1, 3, 4, 7, 16, 19, 37, 64, 4 * MAX_CHAINS * 16 + 5, 300):
        x = rng.uniform(-8, 8, (6, n)).astype(np.float32)
        x[1, n // 2:] = -1e4
        x[2, : (n + 1) // 2] = lowest
        x[3, n - 1] = -np.inf
        x[4, 0] = 0
        x[4, 1:] = -95  # exp(-95) = 5.5e-42, a subnormal: flushed
        x[5, n // 3] = np.nan
        feeds.append({"x": x})
    feeds.append({"x": np.array([[1, np.inf, 2, 3, 4]], np.float32)})
    m = build(model, target)
    for f in feeds:
        got, want = m.run(f)["y"], ref(model, f)["y"]
        # LogSoftmax's log of a float32 sum near 1 is off by its ulp, 1.2e-7, in absolute terms
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-37 if op == "Softmax" else 2e-7, equal_nan=True,
                                   err_msg=str(f["x"].shape))
        if op == "Softmax":
            masked = (f["x"] == -1e4) | (f["x"] == lowest) | (f["x"] == -np.inf)
            masked &= f["x"] < f["x"].max(axis=-1, keepdims=True)  # not a row's maximum (nor a NaN row)
            assert (got[masked] == 0).all()


@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
def test_softmax_family_old_versions(op, opset, target):
    """Before 13 the input is flattened to 2-D at ``axis`` (default 1). onnx.reference reads
    these versions with version 13's meaning (one axis), so onnxruntime is the reference."""
    nodes = [helper.make_node(op, ["x"], ["y_default"]), helper.make_node(op, ["x"], ["y0"], axis=0),
             helper.make_node(op, ["x"], ["y_last"], axis=-1)]
    model = make_model(nodes, [vinfo("x", np.float32, SHAPE)],
                       [vinfo(n, np.float32, None) for n in ("y_default", "y0", "y_last")], opset=opset)
    model.ir_version = 7
    rng = np.random.default_rng(9)
    feeds = [{"x": values(rng, (n, 4, c), np.float32) if op == "Hardmax" else rand(rng, (n, 4, c))}
             for n, c in [(1, 3), (3, 5)]]
    check_model(model, target, feeds, ref=ort_reference)


def test_log_softmax_large_and_infinite(target):
    """x - max - log(sum(exp(x - max))): no overflow at 1000, no underflow to -inf at -2000.
    numpy's logaddexp is the reference: onnx.reference takes the log of a softmax that
    underflowed to 0."""
    node = helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)
    model = make_model([node], [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)], opset=13)
    x = np.array([[1000, 999, 998], [-1000, 0, 1000], [0, -np.inf, 1]], np.float32)

    def ref(model, feeds):
        x = feeds["x"].astype(np.float64)
        return {"y": (x - np.logaddexp.reduce(x, axis=-1, keepdims=True)).astype(np.float32)}

    check_model(model, target, [{"x": x}, {"x": x[:1]}], ref=ref)


def test_hardmax_nan_is_the_maximum(target):
    node = helper.make_node("Hardmax", ["x"], ["y"], axis=1)
    model = make_model([node], [vinfo("x", np.float32, ["n", 4])], [vinfo("y", np.float32, None)], opset=13)
    x = np.array([[1, np.nan, 3, np.nan], [2, 2, 1, 0]], np.float32)
    # numpy's argmax: the first NaN is the maximum
    want = np.array([[0, 1, 0, 0], [1, 0, 0, 0]], np.float32)
    m = build(model, target)
    for rows in (2, 1):
        np.testing.assert_array_equal(m.run({"x": x[:rows]})["y"], want[:rows])


# ----------------------------------------------------------------------------- CumProd


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int64, np.uint32, np.uint64])
def test_cumprod(dtype, target):
    nodes = [helper.make_node("CumProd", ["x", f"a{axis}"], [f"y{axis}{ex}{rev}"], exclusive=ex, reverse=rev)
             for axis in (0, -1) for ex in (0, 1) for rev in (0, 1)]
    inits = [const("a0", np.array(0, np.int64)), const("a-1", np.array(-1, np.int32))]
    model = make_model(nodes, [vinfo("x", dtype, ["n", "c"])], [vinfo(n.output[0], dtype, None) for n in nodes],
                       inits, opset=26)
    rng = np.random.default_rng(10)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    feeds = [{"x": values(rng, (n, c), dtype, positive=True)} for n, c in [(1, 3), (4, 2), (0, 3), (3, 0)]]
    check_model(model, target, feeds, rtol=tol, atol=tol)


def test_cumprod_runtime_axis(target):
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], name="cp", reverse=1)
    model = make_model([node], [vinfo("x", np.float32, ["n", 3]), vinfo("axis", np.int64, [])],
                       [vinfo("y", np.float32, None)], opset=26)
    rng = np.random.default_rng(11)
    m = check_model(model, target, [{"x": rand(rng, (n, 3)), "axis": np.array(a, np.int64)}
                                    for n, a in [(2, 0), (4, 1), (3, -1), (1, -2)]])
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'cp' \(CumProd\): axis 2 is out of range for 'x' of rank 2"):
        m.run({"x": rand(rng, (2, 3)), "axis": np.array(2, np.int64)})
