"""The model behind tests/data/runtime_model.wasm, which tests/test_install.py runs in an
environment with only the runtime installed (no onnx there to compile it). Regenerate the
.wasm after changing this file, or after a major format version change:

    .venv/bin/python tests/data/runtime_model.py

A dense layer with a ReLU on a symbolic batch, and the indices of its non-zero outputs (a
dim known only at run time): y = relu(x @ w + b), nz = NonZero(y).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = Path(__file__).resolve().parent
WASM = HERE / "runtime_model.wasm"


def model() -> onnx.ModelProto:
    rng = np.random.default_rng(10)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["pre"]),
             helper.make_node("Relu", ["pre"], ["y"]), helper.make_node("NonZero", ["y"], ["nz"])]
    graph = helper.make_graph(
        nodes, "runtime_model", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 6])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("nz", onnx.TensorProto.INT64, [2, None])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main() -> None:
    sys.path.insert(0, str(HERE.parents[1]))
    from toolkit.compiler import compile_model

    r = compile_model(model(), WASM, target="wasm32")
    print(f"wrote {WASM} ({r.module_bytes} bytes)")


if __name__ == "__main__":
    main()
