"""Ops onnxruntime defines in the default domain before onnx has them, as its transformer
optimizer writes them: LayerNormalization in models of opset 13 (onnx's arrives at 17, with
the semantics onnxruntime's own version 1 has had). Against onnxruntime on both targets, at
several bindings from one module."""
import numpy as np
import pytest
from onnx import helper

from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import check_model, const, make_model, ort_reference, rand, vinfo

HIDDEN = 6


def test_layer_normalization_before_opset_17(target):
    """The optimizer's form (axis -1, its epsilon), with the optional Mean and InvStdDev."""
    rng = np.random.default_rng(7)
    m = make_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv"], name="ln",
                                     epsilon=1e-3)],
                   [vinfo("x", np.float32, ["b", "s", HIDDEN])],
                   [vinfo(o, np.float32, None) for o in ("y", "mean", "inv")],
                   [const("g", rand(rng, (HIDDEN,))), const("b", rand(rng, (HIDDEN,)))], opset=13)
    check_model(m, target, [{"x": rand(rng, (b, s, HIDDEN))} for b, s in [(1, 1), (2, 5), (3, 4)]],
                rtol=1e-5, atol=1e-5, ref=ort_reference)


def test_layer_normalization_before_opset_17_defaults(target):
    """Over the last two axes, epsilon and stash_type at their defaults, no bias."""
    rng = np.random.default_rng(8)
    m = make_model([helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln", axis=1)],
                   [vinfo("x", np.float32, ["b", 3, HIDDEN])], [vinfo("y", np.float32, None)],
                   [const("g", rand(rng, (3, HIDDEN)))], opset=12)
    check_model(m, target, [{"x": rand(rng, (b, 3, HIDDEN), lo=-1e-2, hi=1e-2)} for b in (1, 4)],
                rtol=1e-4, atol=1e-5, ref=ort_reference)


def test_layer_normalization_stash_type_refused(tmp_path):
    m = make_model([helper.make_node("LayerNormalization", ["x", "g"], ["y"], name="ln", stash_type=0)],
                   [vinfo("x", np.float32, ["n", 4])], [vinfo("y", np.float32, None)],
                   [const("g", np.ones(4, np.float32))], opset=13)
    with pytest.raises(CompileError, match=r"^node 'ln' \(LayerNormalization\): stash_type 0 is not supported"):
        compile_model(m, tmp_path / "m.wasm")
