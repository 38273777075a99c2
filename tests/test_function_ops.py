"""Ops symwasm has no translation for but ONNX defines as functions (RMSNormalization,
SoftmaxCrossEntropyLoss, Attention...) import as their function's nodes. Each is checked on
both targets, at several bindings of its symbolic dims from one module, against
onnx.reference (which runs its own implementation of the op, not the function)."""
import numpy as np
import pytest
from onnx import helper

from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import check_model, make_model, rand, vinfo


def test_rms_normalization(target):
    rng = np.random.default_rng(0)
    m = make_model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1, epsilon=1e-5)],
                   [vinfo("x", np.float32, ["b", "t", 8]), vinfo("s", np.float32, [8])],
                   [vinfo("y", np.float32, None)], opset=23)
    check_model(m, target, [{"x": rand(rng, (b, t, 8)), "s": rand(rng, (8,))} for b, t in [(1, 3), (2, 5), (3, 1)]],
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_loss(reduction, target):
    rng = np.random.default_rng(1)
    m = make_model([helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["loss"], reduction=reduction)],
                   [vinfo("x", np.float32, ["n", 5]), vinfo("t", np.int64, ["n"])],
                   [vinfo("loss", np.float32, None)], opset=13)
    check_model(m, target, [{"x": rand(rng, (n, 5)), "t": rng.integers(0, 5, n).astype(np.int64)} for n in (1, 4, 9)],
                rtol=1e-4, atol=1e-5)


def test_mean_variance_normalization(target):
    rng = np.random.default_rng(2)
    m = make_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2, 3])],
                   [vinfo("x", np.float32, ["n", 3, "h", 2])], [vinfo("y", np.float32, None)], opset=13)
    check_model(m, target, [{"x": rand(rng, (n, 3, h, 2))} for n, h in [(2, 2), (3, 1), (1, 4)]],
                rtol=1e-4, atol=1e-5)


def test_attention_gqa_symbolic_sequence(target):
    """Attention-23 with grouped heads (4 query heads, 2 key/value heads) and a causal mask."""
    rng = np.random.default_rng(3)
    m = make_model([helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
                   [vinfo("q", np.float32, ["b", 4, "s", 8]), vinfo("k", np.float32, ["b", 2, "s", 8]),
                    vinfo("v", np.float32, ["b", 2, "s", 8])],
                   [vinfo("y", np.float32, None)], opset=23)
    check_model(m, target, [{"q": rand(rng, (b, 4, s, 8)), "k": rand(rng, (b, 2, s, 8)),
                             "v": rand(rng, (b, 2, s, 8))} for b, s in [(1, 3), (2, 6)]], rtol=1e-4, atol=1e-5)


def test_error_inside_a_function_names_the_node(tmp_path):
    """A node of the function that cannot compile is reported under the node the user wrote."""
    m = make_model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=5, name="rms")],
                   [vinfo("x", np.float32, ["n", 4]), vinfo("s", np.float32, [4])],
                   [vinfo("y", np.float32, None)], opset=23)
    with pytest.raises(CompileError) as e:
        compile_model(m, tmp_path / "m.wasm")
    assert "node 'rms' (RMSNormalization)" in str(e.value)
