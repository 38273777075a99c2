"""What exporters write that is legal and must compile as onnxruntime reads it (issue 34,
item 3): negative dim_values and anonymous dim_params as unknown dims, value_info that
contradicts inference (inference wins; inspect notes it), opset imports of domains no node
uses, weights in an external data file, initializers listed as inputs, and nodes out of
order. Each model runs at two bindings on both targets against onnxruntime."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import onnx
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.frontend.onnx.importer import import_model
from toolkit.ir.graph import CompileError
from util import _TMP, assert_outputs_match, build, check_model, const, make_model, ort_reference, vinfo


def _run_both(model, target, feeds_list):
    return check_model(model, target, feeds_list, ref=ort_reference)


def _relu_sum(shape):
    """y = Relu(x) + x summed over axis 1: every dim of x is read."""
    return make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("ReduceSum", ["r", "ax"], ["y"])],
                      [vinfo("x", np.float32, shape)], [vinfo("y", np.float32, None)], [const("ax", np.array([1]))])


def test_negative_dim_values_are_unknown_dims(target):
    """dim_value -1 (and any negative value) is an unknown dim, as onnxruntime reads it."""
    m = _relu_sum([-1, 3, -5])
    rng = np.random.default_rng(0)
    _run_both(m, target, [{"x": rng.standard_normal((n, 3, k), dtype=np.float32)} for n, k in ((1, 2), (4, 7))])


def test_anonymous_dim_params_are_separate_unknown_dims(target):
    """'?' for both height and width (paddle2onnx, TensorFlow) are two unknown dims, not one
    dim named '?': an image of 5 x 9 runs."""
    m = _relu_sum(["N", 3, "?", "?"])
    g = import_model(m)
    h, w = g.values["x"].shape[2:]
    assert h is not w and "?" not in g.scope.symbols
    rng = np.random.default_rng(1)
    _run_both(m, target, [{"x": rng.standard_normal(s, dtype=np.float32)} for s in ((1, 3, 5, 9), (2, 3, 4, 4))])


def test_value_info_that_contradicts_inference_is_noted_and_overruled(target):
    """A stale value_info (rank and dims from before a rewrite) and a wrong output dim: the
    graph's own inference decides, and each contradiction is a note for inspect."""
    m = make_model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"])],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("b", np.float32, ["n", 4])])
    m.graph.value_info.append(vinfo("a", np.float32, [7, 9, 2]))
    notes = import_model(m).notes
    assert "the model's type of 'a' says rank 3; symwasm infers float32(n, 3) and uses that" in notes
    assert "the model's type of 'b' says dim 1 = 4; symwasm infers float32(n, 3) and uses that" in notes
    rng = np.random.default_rng(2)
    # onnxruntime refuses the contradicting output type itself, so the reference is numpy's
    mod = build(m, target)
    for n in (1, 5):
        x = rng.standard_normal((n, 3), dtype=np.float32)
        np.testing.assert_array_equal(mod.run({"x": x})["b"], -np.maximum(x, 0))


def test_opset_imports_of_unused_domains_are_ignored(target):
    m = _relu_sum(["n", 2])
    m.opset_import.extend([helper.make_opsetid(d, v) for d, v in
                           (("ai.onnx.ml", 3), ("com.microsoft", 1), ("ai.onnx.training", 1), ("org.pytorch.aten", 1))])
    rng = np.random.default_rng(3)
    _run_both(m, target, [{"x": rng.standard_normal((n, 2), dtype=np.float32)} for n in (1, 6)])


def test_weights_in_an_external_data_file(target):
    """A model saved with its weights in m.onnx.data beside it (as exporters save models over
    2 GB) compiles from its path."""
    rng = np.random.default_rng(4)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vinfo("x", np.float32, ["n", 64])],
                   [vinfo("y", np.float32, None)], [const("w", rng.standard_normal((64, 32), dtype=np.float32))])
    folder = _TMP / f"external_{target}"
    folder.mkdir()
    saved = onnx.ModelProto()
    saved.CopyFrom(m)  # saving moves the weights out of the proto it is given
    onnx.save_model(saved, folder / "m.onnx", save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    on_disk = onnx.load(folder / "m.onnx", load_external_data=False)
    assert on_disk.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL
    out = folder / ("m.so" if target == "native" else "m.wasm")
    compile_model(folder / "m.onnx", out, target=target)
    mod = wasm_runtime.load(out)
    for n in (1, 3):
        feeds = {"x": rng.standard_normal((n, 64), dtype=np.float32)}
        assert_outputs_match(mod.run(feeds), ort_reference(m, feeds), rtol=1e-5, atol=1e-5)


def test_weights_listed_as_inputs_run_as_constants(target):
    """ONNX IR version 3 lists every initializer among the inputs. symwasm compiles them as
    the constants they hold (so they fold and pack), runs without them as onnxruntime does,
    and refuses a feed of one naming it as such and the flag that lets a run feed it
    (onnxruntime refuses it as an invalid input name)."""
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [vinfo("x", np.float32, ["n", 3]),
                                                                   vinfo("w", np.float32, [3])],
                   [vinfo("y", np.float32, None)], [const("w", np.array([1, 2, 3], np.float32))], opset=8)
    m.ir_version = 3
    assert ("1 initializers the model also lists as inputs (as IR version 3 wrote weights) are compiled as the "
            "constants they hold; a run cannot feed them (compile --overridable NAME keeps one an input with its "
            "value as the default)") in import_model(m).notes
    rng = np.random.default_rng(5)
    mod = _run_both(m, target, [{"x": rng.standard_normal((n, 3), dtype=np.float32)} for n in (1, 4)])
    with pytest.raises(wasm_runtime.ModelError, match=r"unknown input\(s\) w; the model takes x \(w: initializers the "
                                                      r"model also lists as inputs, which symwasm compiles as the "
                                                      r"constants they hold; compile with --overridable w to let a "
                                                      r"run feed them\)"):
        mod.run({"x": np.ones((2, 3), np.float32), "w": np.zeros(3, np.float32)})


def _with_defaults(ir_version: int) -> onnx.ModelProto:
    """y = x * s + b, where the initializers s (a scalar) and b (a vector) are listed as inputs."""
    m = make_model([helper.make_node("Mul", ["x", "s"], ["xs"]), helper.make_node("Add", ["xs", "b"], ["y"])],
                   [vinfo("x", np.float32, ["n", 3]), vinfo("s", np.float32, []), vinfo("b", np.float32, [3])],
                   [vinfo("y", np.float32, None)],
                   [const("s", np.array(2, np.float32)), const("b", np.array([1, 2, 3], np.float32))], opset=8)
    m.ir_version = ir_version
    return m


def test_overridable_initializers_are_inputs_with_their_values_as_defaults(target):
    """compile --overridable keeps initializers listed as inputs as inputs a run may feed or
    omit, as onnxruntime reads them from IR version 4 on: checked against onnxruntime with each
    omitted, overridden, and overridden with another shape where the input's dims allow it."""
    m = _with_defaults(8)
    assert import_model(m, overridable=["s"]).input_defaults.keys() == {"s"}
    mod = build(m, target, overridable=["all"])
    rng = np.random.default_rng(6)
    for n in (1, 4):
        x = rng.standard_normal((n, 3), dtype=np.float32)
        for extra in ({}, {"s": np.array(-3, np.float32)}, {"b": np.array([5, 6, 7], np.float32)},
                      {"s": np.array(0.5, np.float32), "b": np.zeros(3, np.float32)}):
            feeds = {"x": x, **extra}
            assert_outputs_match(mod.run(feeds), ort_reference(m, feeds))
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'b' dim 0: expected 3, got 4"):
        mod.run({"x": np.ones((2, 3), np.float32), "b": np.zeros(4, np.float32)})
    # IR version 3, where onnxruntime never takes the override: opting in makes the same inputs
    m3 = _with_defaults(3)
    mod3 = build(m3, target, overridable=["s", "b"])
    x = rng.standard_normal((2, 3), dtype=np.float32)
    np.testing.assert_allclose(mod3.run({"x": x})["y"], x * 2 + np.array([1, 2, 3], np.float32), rtol=1e-6)
    np.testing.assert_allclose(mod3.run({"x": x, "s": np.array(3, np.float32)})["y"],
                               x * 3 + np.array([1, 2, 3], np.float32), rtol=1e-6)


def test_overridable_names_an_initializer_listed_as_an_input():
    m = _with_defaults(8)
    with pytest.raises(CompileError, match=r"--overridable names x, zz, which are not an initializer the model lists "
                                           r"as an input \(those are: s, b\)"):
        import_model(m, overridable=["x", "zz"])
    bad = _with_defaults(8)
    bad.graph.input[1].type.tensor_type.elem_type = onnx.TensorProto.INT64
    with pytest.raises(CompileError, match=r"input 's' is int64\(\), but its initializer, the default --overridable "
                                           r"gives it, is float32\(\)"):
        import_model(bad, overridable=["s"])


def test_nodes_out_of_order_are_sorted_as_onnxruntime_sorts_them(target):
    """onnxruntime's float16 converter writes graphs whose nodes are out of order, and
    onnxruntime sorts them when it loads them; so does symwasm: here every node comes before
    the nodes it reads, and an If's branch reads a value produced after the If in the list."""
    then = helper.make_graph([helper.make_node("Mul", ["a", "two"], ["t"])], "then", [], [vinfo("t", np.float32, None)])
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["e"])], "else", [], [vinfo("e", np.float32, None)])
    nodes = [helper.make_node("Add", ["r", "x"], ["y"]),
             helper.make_node("If", ["positive"], ["r"], then_branch=then, else_branch=other),
             helper.make_node("Greater", ["total", "zero"], ["positive"]),
             helper.make_node("ReduceSum", ["a"], ["total"], keepdims=0),
             helper.make_node("Relu", ["x"], ["a"])]
    m = make_model(nodes, [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)],
                   [const("two", np.array(2, np.float32)), const("zero", np.array(0, np.float32))])
    rng = np.random.default_rng(8)
    _run_both(m, target, [{"x": rng.standard_normal((n, 3), dtype=np.float32)} for n in (1, 5)]
              + [{"x": -np.ones((2, 3), np.float32)}])
    # a cycle is not sorted away: the import names the node that reads what nothing before it made
    m.graph.node[4].input[0] = "y"
    with pytest.raises(CompileError, match=r"input '.*' is not produced by any earlier node, initializer or graph "
                                           r"input \(malformed or unsorted graph\)"):
        import_model(m)


def test_a_graph_from_onnxruntimes_float16_converter(target):
    """The real case of the test above: onnxruntime's convert_float_to_float16 (keep_io_types)
    on the zoo's Whisper encoder leaves its Casts out of order. Compiled as onnxruntime loads it,
    within a few float16 steps of onnxruntime (the sums run in another order)."""
    import json

    from onnxruntime.transformers.float16 import convert_float_to_float16

    from toolkit.frontend.onnx.importer import in_order

    zoo = Path(__file__).resolve().parent / "models" / "zoo"
    info = json.loads((zoo / "zoo.json").read_text())["whisper_encoder_op17"]
    m = convert_float_to_float16(onnx.load(zoo / info["file"]), keep_io_types=True)
    assert [n.name for n in in_order(m.graph.node)] != [n.name for n in m.graph.node], "the converter sorted it"
    arrays = np.load(zoo / "whisper_encoder_op17.npz")
    mod = build(m, target)
    for k in range(len(info["bindings"])):
        feeds = {i: arrays[f"{k}/in/{i}"] for i in info["inputs"]}
        assert_outputs_match(mod.run(feeds), ort_reference(m, feeds), rtol=2e-3, atol=4e-3)
