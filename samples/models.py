"""The sample models: small ONNX graphs that show what symwasm is for. Each entry gives the
model and the input sets the demo runs (different bindings of its symbolic dims)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64
OPSET = 17


def _model(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="symwasm-samples")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def argwhere():
    """Seed 000: argwhere(x > 0) — the output's length is known only once the data is seen."""
    m = _model("argwhere", [
        helper.make_node("Greater", ["x", "zero"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
    ], [helper.make_tensor_value_info("x", F, ["n", 4])],
        [helper.make_tensor_value_info("idx", I64, ["count", 2])],
        [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    rng = np.random.default_rng(0)
    return m, [{"x": rng.standard_normal((n, 4)).astype(np.float32)} for n in (3, 8)]


def reshape_of_shape():
    """Seed 002: reshape(c, [1, shape(c)[0], shape(c)[1], 1]) keeps a symbolic shape, (1, (n or 10), 10, 1):
    ONNX's 0 in a target copies the input's dim, so it is (1, n, 10, 1) for every n >= 1."""
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    two = numpy_helper.from_array(np.array([2], np.int64), "two")
    m = _model("reshape_of_shape", [
        helper.make_node("Add", ["a", "b"], ["c"]),
        helper.make_node("Shape", ["c"], ["cshape"]),
        helper.make_node("Slice", ["cshape", "zero", "one"], ["d0"]),
        helper.make_node("Slice", ["cshape", "one", "two"], ["d1"]),
        helper.make_node("Concat", ["one", "d0", "d1", "one"], ["target"], axis=0),
        helper.make_node("Reshape", ["c", "target"], ["d"]),
    ], [helper.make_tensor_value_info("a", F, ["n", 10]), helper.make_tensor_value_info("b", F, [1])],
        [helper.make_tensor_value_info("d", F, [1, "n", 10, 1])], [one, zero, two])
    rng = np.random.default_rng(1)
    return m, [{"a": rng.standard_normal((n, 10)).astype(np.float32), "b": np.ones(1, np.float32)} for n in (2, 5)]


def mlp():
    """A two-layer perceptron with a symbolic batch: Gemm, Relu, Softmax."""
    rng = np.random.default_rng(2)
    w1 = (rng.standard_normal((32, 16)) * 0.25).astype(np.float32)
    w2 = (rng.standard_normal((3, 32)) * 0.25).astype(np.float32)
    m = _model("mlp", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ], [helper.make_tensor_value_info("x", F, ["batch", 16])],
        [helper.make_tensor_value_info("probs", F, ["batch", 3])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(np.zeros(32, np.float32), "b1"),
         numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(np.zeros(3, np.float32), "b2")])
    return m, [{"x": rng.standard_normal((b, 16)).astype(np.float32)} for b in (1, 4)]


def arange_of_length():
    """Seed 003: positions = arange(data.shape[0]) for data [L, N]."""
    m = _model("arange_of_length", [
        helper.make_node("Shape", ["data"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["len"], axis=0),
        helper.make_node("Range", ["start", "len", "step"], ["positions"]),
    ], [helper.make_tensor_value_info("data", F, ["L", "N"])],
        [helper.make_tensor_value_info("positions", I64, ["L"])],
        [numpy_helper.from_array(np.array(0, np.int64), n) for n in ("i0", "start")]
        + [numpy_helper.from_array(np.array(1, np.int64), "step")])
    return m, [{"data": np.zeros((k, 3), np.float32)} for k in (4, 9)]


WEB = Path(__file__).resolve().parent / "web"


def digits():
    """The web app's model (samples/web/): on a canvas of any size NonZero finds the ink, the
    crop to its bounding box has a shape only the data decides, and a small CNN classifies it;
    an empty canvas gives a 0 x 0 crop."""
    digit = np.array(json.loads((WEB / "digits.json").read_text())["gallery"][0]["pixels"], np.float32)
    digit = digit.reshape(8, 8) / 16
    canvas = np.zeros((120, 150), np.float32)
    canvas[12:108, 40:136] = np.kron(digit, np.ones((12, 12), np.float32))
    return onnx.load(WEB / "digits.onnx"), [{"canvas": digit}, {"canvas": canvas},
                                            {"canvas": np.zeros((30, 40), np.float32)}]


SAMPLES = {"argwhere": argwhere, "reshape_of_shape": reshape_of_shape, "mlp": mlp,
           "arange_of_length": arange_of_length, "digits": digits}
