"""A QDQ model's constant weights are dequantized the same way on both targets: natively the
compiler folds DequantizeLinear of constant 8- and 16-bit integers into a float32 constant
(Dequantize.simplify), a wasm32 module keeps them quantized and its kernel dequantizes them on
every run. Both must give (q - zero point) * scale rounded once in float32, which is what
onnx.reference computes, per tensor, per axis and per block, so that a QDQ model's float
arithmetic starts from the same weights on both targets (checked here bit for bit)."""
import numpy as np
import pytest
from onnx import helper

from util import build, const, lower_model, make_model, reference, vinfo

RNG = np.random.default_rng(8)
F32 = np.float32


def _dequantize_model(q, scale, zp, opset, **attrs):
    """The dequantized weights as a graph output, and as the B of a MatMul (a weight the fold
    applies to whatever the output)."""
    nodes = [helper.make_node("DequantizeLinear", ["q", "s", "z"], ["w"], **attrs),
             helper.make_node("MatMul", ["a", "w"], ["y"])]
    return make_model(nodes, [vinfo("a", F32, ["n", q.shape[0]])], [vinfo("w", F32, None), vinfo("y", F32, None)],
                      [const("q", q), const("s", scale), const("z", zp)], opset=opset)


def _scales(n):
    # scales whose products with the integers need rounding (no power of two)
    return RNG.uniform(0.0011, 0.093, n).astype(F32)


CASES = {
    "tensor_int8": (RNG.integers(-128, 128, (24, 10)).astype(np.int8), _scales(1).reshape(()),
                    np.int8(-7), 13, {}),
    "axis1_int8": (RNG.integers(-128, 128, (24, 10)).astype(np.int8), _scales(10),
                   RNG.integers(-20, 20, 10).astype(np.int8), 13, {"axis": 1}),
    "axis0_uint8": (RNG.integers(0, 256, (24, 10)).astype(np.uint8), _scales(24),
                    RNG.integers(100, 150, 24).astype(np.uint8), 13, {"axis": 0}),
    "axis1_int16": (RNG.integers(-30000, 30000, (24, 10)).astype(np.int16), _scales(10),
                    RNG.integers(-300, 300, 10).astype(np.int16), 21, {"axis": 1}),
    "block_int8": (RNG.integers(-128, 128, (24, 10)).astype(np.int8), _scales(30).reshape(3, 10),
                   RNG.integers(-20, 20, (3, 10)).astype(np.int8), 21, {"axis": 0, "block_size": 8}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_weights_dequantize_alike_on_both_targets(case, target):
    q, scale, zp, opset, attrs = CASES[case]
    model = _dequantize_model(q, scale, zp, opset, **attrs)
    graph, _, _ = lower_model(model, target)
    kept = [n for n in graph.nodes if type(n.op).__name__ == "Dequantize"]
    # each target on its own path; from opset 19 the importer folds the all-constant node with
    # onnx.reference on both
    assert len(kept) == (1 if target == "wasm32" and opset < 19 else 0)
    feeds = {"a": RNG.uniform(-1, 1, (3, q.shape[0])).astype(F32)}
    ref_model = _dequantize_model(q, scale, zp, max(opset, 21), **attrs)  # onnx.reference: DQ from 19
    want = reference(ref_model, feeds)
    got = build(model, target).run(feeds)
    assert got["w"].dtype == want["w"].dtype == F32
    np.testing.assert_array_equal(got["w"], want["w"])
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)
