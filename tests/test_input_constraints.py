"""Input constraints (issue 7): every relation among the inputs' dims that the compiled code
relies on is checked when a run starts, before any kernel, with an error naming the
input, dim, relation and value: a symbol shared by two inputs, an exact division (a head
count), two input dims an op needs equal, and --range bounds."""
import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from util import build, const, lower_model, make_model, reference, vinfo

F32 = np.float32


def _model():
    """split_heads reshapes x (b, s) to (b, -1, 4): s must be a multiple of 4; mm needs
    a's dim 1 equal to b's dim 0 (two symbols); y and x share the symbol b."""
    return make_model(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Reshape", ["r", "tgt"], ["heads"], name="split_heads"),
         helper.make_node("MatMul", ["a", "w"], ["z"], name="mm"),
         helper.make_node("Add", ["x", "y"], ["xy"], name="add")],
        [vinfo("x", F32, ["b", "s"]), vinfo("y", F32, ["b", "s"]), vinfo("a", F32, ["n", "k"]),
         vinfo("w", F32, ["k2", "m"])],
        [vinfo("heads", F32, None), vinfo("z", F32, None), vinfo("xy", F32, None)],
        [const("tgt", np.array([0, -1, 4], np.int64))])


def _feeds(b=2, s=8, y_b=None, k=3, k2=3):
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((b, s), F32), "y": rng.standard_normal((y_b or b, s), F32),
            "a": rng.standard_normal((2, k), F32), "w": rng.standard_normal((k2, 5), F32)}


def test_relations_are_checked_before_any_kernel():
    _, prog, _ = lower_model(_model())
    ops = [ins for _, _, ins in prog.instrs()]
    first_call = next(i for i, ins in enumerate(ops) if ins.name == "CALL")
    checks = [i for i, ins in enumerate(ops) if ins.name == "CHECK_EQ" or
              (ins.name == "ARITH" and ins.args[0] == "DIV")]
    assert len(checks) >= 3  # y's b, the inner dims of mm, the division by the head count
    assert max(checks) < first_call


@pytest.mark.parametrize("feeds,message", [
    (dict(s=10), r"node 'split_heads' \(Reshape\): .* = 20 is not divisible by .* = 8 \(b from input 'x' dim 0, "
                 r"s from input 'x' dim 1\)"),
    (dict(k=3, k2=4), r"node 'mm' \(MatMul\): inner dims \('a' dim 1 vs 'w' dim 0\): k = 3 does not equal k2 = 4"),
    (dict(b=2, y_b=3), r"input 'y' dim 0 \(b\): got 3, but b = 2 from input 'x' dim 0"),
])
def test_a_broken_relation_names_input_dim_and_values(target, feeds, message):
    mod = build(_model(), target)
    with pytest.raises(wasm_runtime.ModelError, match=message):
        mod.run(_feeds(**feeds))
    good = _feeds()
    got = mod.run(good)
    for name, want in reference(_model(), good).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6)


def test_range_bounds_are_checked_at_the_start(target):
    mod = build(_model(), target, ranges={"s": (4, 64)})
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'x' dim 1 \(s\): 68 exceeds bound 64"):
        mod.run(_feeds(s=68))
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'x' dim 1 \(s\): 0 is below the minimum 4"):
        mod.run(_feeds(s=0))
    assert mod.run(_feeds(s=64))["heads"].shape == (2, 16, 4)
