"""toolkit.backend: symwasm as an onnx.backend.base.Backend, on both targets, checked against
onnx.reference; and through onnx's own backend test runner (onnx.backend.test.BackendTest)
on the model cases the onnx wheel ships."""
import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from toolkit import backend
from toolkit.ir.graph import CompileError
from util import const, make_model, rand, reference, vinfo


def _model():
    return make_model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
                       helper.make_node("Shape", ["y"], ["s"])],
                      [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None), vinfo("s", np.int64, None)],
                      [const("w", np.arange(12, dtype=np.float32).reshape(3, 4) - 5)])


def test_prepare_and_run(target):
    m = _model()
    rep = backend.prepare(m, target=target)
    try:
        assert rep.input_names == ["x"] and rep.output_names == ["y", "s"]
        rng = np.random.default_rng(0)
        for n in (1, 4, 0):
            x = rand(rng, (n, 3))
            want = reference(m, {"x": x})
            by_list = rep.run([x])
            by_name = rep.run({"x": x})
            for got in (by_list, by_name):
                np.testing.assert_allclose(got[0], want["y"], rtol=1e-6)
                np.testing.assert_array_equal(got.s, want["s"])  # outputs are also named
    finally:
        rep.close()


def test_run_model_and_run_node(target):
    rng = np.random.default_rng(1)
    a, b = rand(rng, (2, 3)), rand(rng, (3,))
    (y,) = backend.run_node(helper.make_node("Sub", ["a", "b"], ["y"]), [a, b], target=target)
    np.testing.assert_allclose(y, a - b)
    m = _model()
    y, s = backend.run_model(m, [a], target=target)
    np.testing.assert_allclose(y, reference(m, {"x": a})["y"], rtol=1e-6)


def test_errors(tmp_path):
    m = _model()
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    with pytest.raises(ValueError, match="CPU only"):
        backend.prepare(m, device="CUDA")
    with pytest.raises(ValueError, match="unknown target 'riscv'"):
        backend.prepare(m, target="riscv")
    rep = backend.prepare(m)
    with pytest.raises(wasm_runtime.ModelError, match=r"2 inputs given; the model takes 1 \(x\)"):
        rep.run([np.zeros((1, 3), np.float32)] * 2)
    with pytest.raises(wasm_runtime.ModelError, match="'x'"):
        rep.run([np.zeros((1, 4), np.float32)])  # the model's own check names the input and dim
    rep.close()
    bad = make_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="n0")], [vinfo("x", np.float32, [2])],
                     [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError, match="node 'n0' \\(NoSuchOp\\): unsupported op"):
        backend.prepare(bad)
    assert not backend.SymwasmBackend.is_compatible(bad)


def _opset6_add(b_shape):
    return make_model([helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1)],
                      [vinfo("a", np.float32, [2, 3, 4]), vinfo("b", np.float32, b_shape)],
                      [vinfo("y", np.float32, None)], opset=6)


def test_old_opset_is_upgraded(target):
    """An opset-6 model (older than symwasm reads) is upgraded by onnx's version converter."""
    rng = np.random.default_rng(2)
    a, b = rand(rng, (2, 3, 4)), rand(rng, (3, 4))
    (y,) = backend.run_model(_opset6_add([3, 4]), [a, b], target=target)
    np.testing.assert_allclose(y, a + b[None])


def test_unconvertible_old_opset_is_a_clear_error():
    """onnx's converter does not rewrite opset-6 broadcasts that numpy's rules don't cover
    (b of shape (3,) on axis 1 of (2, 3, 4))."""
    with pytest.raises(CompileError, match="opset 6 is older than symwasm reads .* version converter cannot"):
        backend.prepare(_opset6_add([3]))


def test_ai_onnx_ml_is_named():
    g = helper.make_graph([helper.make_node("SVMRegressor", ["x"], ["y"], domain="ai.onnx.ml")], "g",
                          [vinfo("x", np.float32, [2])], [vinfo("y", np.float32, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])
    with pytest.raises(CompileError, match="'ai.onnx.ml'"):
        backend.prepare(m)
    assert onnx.defs.onnx_opset_version() >= 7
