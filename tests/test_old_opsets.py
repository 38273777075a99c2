"""Models of opset 7 to 12 import as they are (the onnx wheel's light_* models of opset 9 are
tests/test_light_models.py's): each op whose attributes or meaning changed since is checked
in its old form against an independent reference.

onnx.reference (1.23) is wrong for three of these, so they are checked against onnxruntime,
which agrees with the ONNX spec and with symwasm: it gives Softmax-1/11 Softmax-13's meaning
(no coercion to 2-D), its LRN sums the squares over a window of the batch dim instead of the
channels, and its BatchNormalization-6/7 does not run."""

import numpy as np
import onnx
import pytest
from onnx import helper

from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, check_model, const, make_model, ort_reference, rand, vinfo

# ----------------------------------------------------------------------------- old op versions


def _check(nodes, inputs, outputs, feeds_list, opset, target, inits=(), **kw):
    m = make_model(nodes, inputs, outputs, inits, opset=opset)
    return check_model(m, target, feeds_list, **kw)


def test_softmax_before_13_normalizes_the_flattened_tail(target):
    """Softmax-11 with axis 1 on [n, 3, 4] normalizes over 12 elements at once."""
    rng = np.random.default_rng(0)
    _check([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [vinfo("x", np.float32, ["n", 3, 4])],
           [vinfo("y", np.float32, None)], [{"x": rand(rng, (n, 3, 4))} for n in (1, 3)], 11, target, rtol=2e-6,
           ref=ort_reference)


def test_softmax_before_13_default_axis(target):
    rng = np.random.default_rng(1)
    _check([helper.make_node("Softmax", ["x"], ["y"])], [vinfo("x", np.float32, [2, "n", 3])],
           [vinfo("y", np.float32, None)], [{"x": rand(rng, (2, n, 3))} for n in (1, 4)], 9, target, rtol=2e-6,
           ref=ort_reference)


def test_slice_before_10_takes_attributes(target):
    rng = np.random.default_rng(2)
    _check([helper.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[1000, -1], axes=[0, 2])],
           [vinfo("x", np.float32, ["n", 4, 5])], [vinfo("y", np.float32, None)],
           [{"x": rand(rng, (n, 4, 5))} for n in (2, 5)], 9, target)


@pytest.mark.parametrize("opset", [9, 11])
def test_squeeze_unsqueeze_before_13_take_attributes(opset, target):
    rng = np.random.default_rng(3)
    axes = [0, 3] if opset == 9 else [0, -1]  # negative axes arrive at version 11
    _check([helper.make_node("Unsqueeze", ["x"], ["u"], axes=axes),
            helper.make_node("Squeeze", ["u"], ["y"], axes=axes)],
           [vinfo("x", np.float32, ["n", 4])], [vinfo("u", np.float32, None), vinfo("y", np.float32, None)],
           [{"x": rand(rng, (n, 4))} for n in (1, 3)], opset, target)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
def test_reductions_before_13_take_attribute_axes(op, target):
    rng = np.random.default_rng(4)
    _check([helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)], [vinfo("x", np.float32, ["n", 4, 3])],
           [vinfo("y", np.float32, None)], [{"x": rand(rng, (n, 4, 3))} for n in (1, 3)], 11, target, rtol=2e-6)


def test_clip_6_takes_attribute_bounds(target):
    rng = np.random.default_rng(5)
    _check([helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=1.25)], [vinfo("x", np.float32, ["n"])],
           [vinfo("y", np.float32, None)], [{"x": rand(rng, (n,))} for n in (3, 8)], 9, target)


def test_dropout_7_with_its_mask(target):
    rng = np.random.default_rng(6)
    _check([helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.3)], [vinfo("x", np.float32, ["n", 2])],
           [vinfo("y", np.float32, None), vinfo("mask", np.bool_, None)],
           [{"x": rand(rng, (n, 2))} for n in (1, 4)], 9, target)


def test_batchnorm_7_and_pools_before_10(target):
    """BatchNormalization-7 (spatial), MaxPool-8, AveragePool-7 (no ceil_mode yet)."""
    rng = np.random.default_rng(7)
    c = 3
    inits = [const(n, rng.uniform(0.5, 1.5, c).astype(np.float32)) for n in ("s", "b", "m", "v")]
    _check([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], spatial=1, epsilon=1e-3),
            helper.make_node("MaxPool", ["bn"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("AveragePool", ["bn"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                             count_include_pad=1)],
           [vinfo("x", np.float32, ["n", c, 6, 6])], [vinfo("mp", np.float32, None), vinfo("y", np.float32, None)],
           [{"x": rand(rng, (n, c, 6, 6))} for n in (1, 2)], 8, target, inits, rtol=1e-5, ref=ort_reference)


def test_gemm_7_reshape_5_concat_4(target):
    rng = np.random.default_rng(8)
    inits = [const("w", rand(rng, (6, 4))), const("c", rand(rng, (4,))), const("shape", np.array([0, 2, 2], np.int64))]
    _check([helper.make_node("Concat", ["x", "x"], ["xx"], axis=1),
            helper.make_node("Gemm", ["xx", "w", "c"], ["g"], alpha=0.5, beta=2.0),
            helper.make_node("Reshape", ["g", "shape"], ["y"])],
           [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)],
           [{"x": rand(rng, (n, 3))} for n in (1, 5)], 7, target, inits)


def test_lrn(target):
    rng = np.random.default_rng(9)
    _check([helper.make_node("LRN", ["x"], ["y"], size=3, alpha=2e-4, beta=0.75, bias=1.5)],
           [vinfo("x", np.float32, ["n", 5, 3, 4])], [vinfo("y", np.float32, None)],
           [{"x": rand(rng, (n, 5, 3, 4))} for n in (1, 2)], 9, target, rtol=2e-6, ref=ort_reference)


def test_a_version_symwasm_does_not_implement_is_named():
    """Upsample-10 (the version that deprecates it; Resize replaces it) is not a version
    symwasm reads, while Upsample-7 and -9 are."""
    assert onnx.defs.get_schema("Upsample", 10, "").since_version == 10
    m = make_model([helper.make_node("Upsample", ["x", "s"], ["y"], name="u")], [vinfo("x", np.float32, [1, 1, 2, 2])],
                   [vinfo("y", np.float32, None)], [const("s", np.array([1, 1, 2, 2], np.float32))], opset=10)
    with pytest.raises(CompileError, match=r"node 'u' \(Upsample\): Upsample version 10 \(in effect at "
                                           r"opset 10\) is not supported; symwasm implements versions 7, 9"):
        compile_model(m, _TMP / "upsample10.wasm")
