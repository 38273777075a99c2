"""benchmarks/first_result.py measures what it says: each peer in a fresh process, its load,
first run and peak memory (of that process, not of the one that started it), and a model's
failure is its own row."""
import re
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import ROOT
from util import const, make_model, vinfo

sys.path.insert(0, str(ROOT / "benchmarks"))
import first_result  # noqa: E402

pytestmark = pytest.mark.check  # fresh processes per peer: seconds for a benchmark's plumbing


def _model(tmp_path: Path) -> Path:
    w = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vinfo("x", np.float32, ["n", 64])],
                   [vinfo("y", np.float32, None)], [const("w", w)])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def test_each_peer_in_a_fresh_process(tmp_path):
    path = _model(tmp_path)
    assert first_result.parameter_bytes(path) == 64 * 256 * 4
    row = first_result.one_model("m", path, {"name": "n3", "inputs": {"x": [3, 64]}}, tmp_path, repeat=1)
    for peer in first_result.PEERS:
        r = row[peer]
        assert r["load_ms"] > 0 and r["first_run_ms"] > 0 and r["import_ms"] > 0, (peer, r)
        # the peak is this process's own: above what it held after the import, and far
        # below this (pytest's) process, whose peak ru_maxrss would have reported
        assert r["after_import_mb"] <= r["peak_mb"] < first_result._status_mb("VmHWM"), (peer, r)
    assert row["symwasm-wasm32"]["weights_bytes"] >= row["params_bytes"]
    lines = first_result.table([row, {"model": "bad", "config": "c", "error": "RuntimeError: a | b"}])
    assert lines[2].startswith("| m | n3 | ") and lines[3].startswith("| bad | c | error: RuntimeError: a \\| b |")
    assert len({len(re.findall(r"(?<!\\)\|", line)) for line in lines}) == 1, lines  # cells, not escaped bars


def test_parameters_made_by_constant_of_shape_count(tmp_path):
    """The light models fill their weights with ConstantOfShape: those are parameters too."""
    m = make_model([helper.make_node("ConstantOfShape", ["s"], ["w"],
                                     value=helper.make_tensor("v", onnx.TensorProto.FLOAT16, [1], [0.5])),
                    helper.make_node("Constant", [], ["b"], value=helper.make_tensor("b", onnx.TensorProto.INT8, [3], [1, 2, 3])),
                    helper.make_node("MatMul", ["x", "w"], ["y"])],
                   [vinfo("x", np.float16, ["n", 5])], [vinfo("y", np.float16, None)],
                   [const("s", np.array([5, 7], np.int64))])
    onnx.save(m, tmp_path / "c.onnx")
    assert first_result.parameter_bytes(tmp_path / "c.onnx") == 2 * 8 + 5 * 7 * 2 + 3
    m.graph.initializer.append(helper.make_tensor("q", onnx.TensorProto.INT4, [5], [1, -2, 3, 0, 7]))
    onnx.save(m, tmp_path / "q.onnx")  # 4-bit: two to a byte, rounded up
    assert first_result.parameter_bytes(tmp_path / "q.onnx") == 2 * 8 + 5 * 7 * 2 + 3 + 3
    m.graph.initializer.append(helper.make_tensor("r", onnx.TensorProto.UINT2, [5], [1, 2, 3, 0, 1]))
    onnx.save(m, tmp_path / "r.onnx")  # 2-bit: four to a byte
    assert first_result.parameter_bytes(tmp_path / "r.onnx") == 2 * 8 + 5 * 7 * 2 + 3 + 3 + 2


def test_a_failing_peer_names_itself(tmp_path):
    path = _model(tmp_path)
    np.savez(tmp_path / "in.npz", x=np.zeros((2, 63), np.float32))  # a bad input: dim 1 is 64
    with pytest.raises(RuntimeError, match="^onnxruntime: "):
        first_result.measure("onnxruntime", path, tmp_path / "in.npz")
