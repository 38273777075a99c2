"""Conv, ConvTranspose and the pools over float16 and bfloat16, Range over float16 and
bfloat16 (Range-27's stash_type), and Dropout whose training_mode is a run-time input, on
both targets, each module run with several bindings of its symbolic dims.

The narrow floats compute in float32 (or Range's stash_type) and round once when stored,
so their reference is the same model in float32 (onnx.reference), its outputs rounded to
the narrow dtype; the results may differ from it by a rounding of the last place, where a
float32 sum taken in another order lands on the other side of a rounding boundary."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.ir.graph import CompileError
from util import build, check_model, const, make_model, ort_reference, rand, reference, vinfo
from wasm_runtime._abi import STATUS

NARROW = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# two units in the last place of each format's results, and as much absolute error near 0
TOL = {"float16": dict(rtol=2.0 ** -9, atol=2e-3), "bfloat16": dict(rtol=2.0 ** -6, atol=2e-2)}


def narrow_reference(make, wide_ref=reference):
    """A reference for ``make(dtype)``'s model in a narrow dtype: ``make(float32)`` run by
    ``wide_ref`` on the feeds widened to float32, its float outputs rounded back."""
    def ref(model, feeds):
        dt = next(a.dtype for a in feeds.values() if a.dtype.name in NARROW)
        wide = {k: a.astype(np.float32) if a.dtype == dt else a for k, a in feeds.items()}
        out = wide_ref(make(np.float32), wide)
        return {k: v.astype(dt) if v.dtype == np.float32 else v for k, v in out.items()}
    return ref


def weights(rng, shape, dtype):
    return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32).astype(dtype)


# ----------------------------------------------------------------------------- Conv


@pytest.mark.parametrize("name", sorted(NARROW))
def test_conv1d_depthwise_symbolic_batch_and_length(name, target):
    """The causal depthwise Conv of CausalConvWithState: (N, C, L) with N and L symbolic, the
    weight a model input."""
    dt = NARROW[name]

    def make(dtype):
        node = helper.make_node("Conv", ["x", "w"], ["y"], group=4, pads=[3, 0])
        return make_model([node], [vinfo("x", dtype, ["N", 4, "L"]), vinfo("w", dtype, [4, 1, 4])],
                          [vinfo("y", dtype, None)])

    rng = np.random.default_rng(1)
    w = weights(rng, (4, 1, 4), dt)
    feeds = [{"x": rand(rng, (n, 4, length)).astype(dt), "w": w} for n, length in [(2, 8), (1, 3), (3, 17)]]
    check_model(make(dt), target, feeds, ref=narrow_reference(make), **TOL[name])


@pytest.mark.parametrize("name", sorted(NARROW))
def test_conv2d_bias_group_stride_symbolic(name, target):
    """A 2-D Conv with constant weights and bias, groups, strides and pads, over symbolic
    batch, height and width; 40 input channels make long float32 sums."""
    dt = NARROW[name]
    rng = np.random.default_rng(2)
    w = weights(rng, (6, 20, 3, 3), np.float32)
    b = rng.standard_normal(6).astype(np.float32)

    def make(dtype):
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=2, strides=[2, 1], pads=[1, 1, 1, 0])
        return make_model([node], [vinfo("x", dtype, ["N", 40, "H", "W"])], [vinfo("y", dtype, None)],
                          [const("w", w.astype(dtype)), const("b", b.astype(dtype))])

    feeds = [{"x": rand(rng, (n, 40, h, wd)).astype(dt)} for n, h, wd in [(1, 5, 7), (2, 8, 3), (1, 3, 12)]]
    check_model(make(dt), target, feeds, ref=narrow_reference(make), **TOL[name])


@pytest.mark.parametrize("name", sorted(NARROW))
def test_conv_transpose_symbolic(name, target):
    dt = NARROW[name]
    rng = np.random.default_rng(3)
    w = weights(rng, (3, 4, 3, 2), np.float32)

    def make(dtype):
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 1], pads=[1, 0, 0, 1],
                                output_padding=[1, 0])
        return make_model([node], [vinfo("x", dtype, ["N", 3, "H", "W"])], [vinfo("y", dtype, None)],
                          [const("w", w.astype(dtype))])

    feeds = [{"x": rand(rng, (n, 3, h, wd)).astype(dt)} for n, h, wd in [(1, 4, 5), (2, 2, 9)]]
    check_model(make(dt), target, feeds, ref=narrow_reference(make), **TOL[name])


@pytest.mark.parametrize("op, attrs", [("MaxPool", dict(kernel_shape=[3, 2], pads=[1, 0, 1, 1])),
                                       ("AveragePool", dict(kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 1])),
                                       ("AveragePool", dict(kernel_shape=[3, 3], count_include_pad=1,
                                                            pads=[1, 1, 1, 1]))])
@pytest.mark.parametrize("name", sorted(NARROW))
def test_pools(name, op, attrs, target):
    """The pools took the narrow floats already: their sums are float32 registers. The
    reference is onnxruntime's: onnx.reference sizes asymmetrically padded pools wrongly."""
    dt = NARROW[name]

    def make(dtype):
        return make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [vinfo("x", dtype, ["N", 2, "H", "W"])],
                          [vinfo("y", dtype, None)])

    rng = np.random.default_rng(4)
    feeds = [{"x": rand(rng, (n, 2, h, w)).astype(dt)} for n, h, w in [(1, 5, 6), (3, 4, 9)]]
    check_model(make(dt), target, feeds, ref=narrow_reference(make, ort_reference), **TOL[name])


def test_deform_conv_float16_refused():
    """DeformConv still takes float32 and float64 only: said at compile time."""
    m = make_model([helper.make_node("DeformConv", ["x", "w", "off"], ["y"], name="dc")],
                   [vinfo("x", np.float16, [1, 1, 3, 3]), vinfo("w", np.float16, [1, 1, 2, 2]),
                    vinfo("off", np.float16, [1, 8, 2, 2])], [vinfo("y", np.float16, None)], opset=22)
    with pytest.raises(CompileError, match=r"node 'dc' \(DeformConv\): input 'x' has dtype float16; DeformConv "
                                           r"takes float32, float64"):
        build(m, "native")


# ----------------------------------------------------------------------------- Range

RANGES = [(0, 10, 3), (10, 0, -3), (0.5, 2.2, 0.25), (1, 1, 1), (-4, 60, 0.5)]


@pytest.mark.parametrize("stash", [None, 1, 11])
@pytest.mark.parametrize("name", sorted(NARROW))
def test_range_narrow(name, stash, target):
    """Run-time bounds: one module, outputs of different lengths; the count and the
    elements computed in stash_type (float32 by default), each element rounded once."""
    dt = NARROW[name]
    attrs = {} if stash is None else dict(stash_type=stash)
    m = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"], **attrs)],
                   [vinfo(n, dt, []) for n in "sld"], [vinfo("y", dt, None)], opset=27)
    mod = check_model(m, target, [{k: np.array(v, dt) for k, v in zip("sld", r)} for r in RANGES])
    with pytest.raises(wasm_runtime.ModelError, match=r"\(Range\): delta is 0") as e:
        mod.run({"s": np.array(0, dt), "l": np.array(3, dt), "d": np.array(0, dt)})
    assert e.value.status == STATUS["INVALID_INPUT"]


def test_range_stash_type_refused():
    m = make_model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="r", stash_type=10)],
                   [vinfo(n, np.float16, []) for n in "sld"], [vinfo("y", np.float16, None)], opset=27)
    with pytest.raises(CompileError, match=r"node 'r' \(Range\): stash_type float16 is not supported"):
        build(m, "native")


# ----------------------------------------------------------------------------- Dropout

TRAINING_REFUSED = r"node 'drop' \(Dropout\): at run time, training_mode 't' is true and ratio {}: " \
                   r"training-mode dropout \(random\) is not supported"


def dropout_model(ratio_input: bool = True, ratio_const=None, mode_const=None, dtype=np.float32):
    """Dropout(x, r, t) with outputs y and the mask; r and t are model inputs unless given
    as constants (``ratio_input`` False and no constant: r absent, 0.5 by default)."""
    inputs = [vinfo("x", dtype, ["N", "C"])]
    inits = []
    if ratio_const is not None:
        inits.append(const("r", np.array(ratio_const, dtype)))
    elif ratio_input:
        inputs.append(vinfo("r", dtype, []))
    if mode_const is not None:
        inits.append(const("t", np.array(mode_const, np.bool_)))
    else:
        inputs.append(vinfo("t", np.bool_, []))
    r = "r" if ratio_input or ratio_const is not None else ""
    node = helper.make_node("Dropout", ["x", r, "t"], ["y", "z"], name="drop", seed=0)
    return make_model([node], inputs, [vinfo("y", dtype, None), vinfo("z", np.bool_, None)], inits, opset=22)


def refuses(mod, feeds, ratio_text: str) -> None:
    with pytest.raises(wasm_runtime.ModelError, match=TRAINING_REFUSED.format(ratio_text)) as e:
        mod.run(feeds)
    assert e.value.status == STATUS["INVALID_INPUT"]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dropout_runtime_training_mode_and_ratio(dtype, target):
    """Training with ratio 0, or not training: the input and a mask of ones, at two shapes;
    training with any other ratio (NaN included) fails, and the module runs on after."""
    rng = np.random.default_rng(5)
    feeds = [{"x": rand(rng, (n, c), dtype), "r": np.array(r, dtype), "t": np.array(t)}
             for (n, c), r, t in [((3, 4), 0.0, True), ((2, 7), 0.5, False), ((1, 1), 0.0, False),
                                  ((4, 2), -0.0, True)]]
    mod = check_model(dropout_model(dtype=dtype), target, feeds)
    for r in (0.5, np.nan, -0.25):
        refuses(mod, {"x": rand(rng, (2, 3), dtype), "r": np.array(r, dtype), "t": np.array(True)}, "'r' is not 0")
    again = mod.run(feeds[0])
    np.testing.assert_array_equal(again["y"], feeds[0]["x"])
    assert again["z"].all()


def test_dropout_runtime_training_mode_constant_ratio(target):
    rng = np.random.default_rng(6)
    mod = check_model(dropout_model(ratio_const=0.3), target,
                      [{"x": rand(rng, (n, 3)), "t": np.array(False)} for n in (2, 5)])
    refuses(mod, {"x": rand(rng, (2, 3)), "t": np.array(True)}, "'r' is 0.3")
    # ratio 0: an identity whatever training_mode says, and nothing to check
    check_model(dropout_model(ratio_const=0.0), target,
                [{"x": rand(rng, (n, 3)), "t": np.array(t)} for n, t in ((2, True), (4, False))])


def test_dropout_runtime_training_mode_default_ratio(target):
    rng = np.random.default_rng(7)
    mod = check_model(dropout_model(ratio_input=False), target,
                      [{"x": rand(rng, (n, 2)), "t": np.array(False)} for n in (1, 6)])
    refuses(mod, {"x": rand(rng, (3, 2)), "t": np.array(True)}, r"\(the default\) is 0.5")


def test_dropout_constant_training_mode_runtime_ratio(target):
    rng = np.random.default_rng(8)
    mod = check_model(dropout_model(mode_const=True), target,
                      [{"x": rand(rng, (n, 3)), "r": np.array(0.0, np.float32)} for n in (2, 3)])
    refuses(mod, {"x": rand(rng, (2, 3)), "r": np.array(0.1, np.float32)}, "'r' is not 0")


def test_dropout_training_refused_at_compile_time():
    with pytest.raises(CompileError, match=r"node 'drop' \(Dropout\): training_mode 't' is true and ratio 'r' is "
                                           r"0.25: training-mode dropout \(random\) is not supported"):
        build(dropout_model(ratio_const=0.25, mode_const=True), "native")
    with pytest.raises(CompileError, match=r"node 'drop' \(Dropout\): training_mode 't' has dtype float32; it "
                                           r"must be bool"):
        m = dropout_model()
        m.graph.input[2].type.tensor_type.elem_type = 1
        build(m, "native")
