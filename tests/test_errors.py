"""Bad input gets a clear error and loses nothing: run-time errors name the input, op and
dim and leave the module usable; compile-time errors name the node and op."""
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import _TMP, assert_outputs_match, build, const, make_model, reference, vinfo
from conftest import ROOT


def _two_input_model():
    return make_model([helper.make_node("Mul", ["a", "b"], ["y"], name="mul")],
                      [vinfo("a", np.float32, ["n", 3]), vinfo("b", np.float32, ["n", 1])],
                      [vinfo("y", np.float32, None)])


def _ok(mod, model, n=2):
    feeds = {"a": np.arange(n * 3, dtype=np.float32).reshape(n, 3), "b": np.ones((n, 1), np.float32)}
    assert_outputs_match(mod.run(feeds), reference(model, feeds))


@pytest.fixture
def two_input(target):
    m = _two_input_model()
    mod = build(m, target)
    _ok(mod, m)
    return m, mod


def test_wrong_rank(two_input):
    m, mod = two_input
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'a': expected rank 2, got rank 3"):
        mod.run({"a": np.zeros((2, 3, 1), np.float32), "b": np.ones((2, 1), np.float32)})
    _ok(mod, m)


def test_wrong_dtype(two_input):
    m, mod = two_input
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'b': expected dtype float32, got int64"):
        mod.run({"a": np.zeros((2, 3), np.float32), "b": np.ones((2, 1), np.int64)})
    _ok(mod, m)


def test_static_dim_mismatch(two_input):
    m, mod = two_input
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'a' dim 1: expected 3, got 4"):
        mod.run({"a": np.zeros((2, 4), np.float32), "b": np.ones((2, 1), np.float32)})
    _ok(mod, m)


def test_symbol_bound_to_two_values(two_input):
    m, mod = two_input
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"input 'b' dim 0 \(n\): got 5, but n = 2 from input 'a' dim 0"):
        mod.run({"a": np.zeros((2, 3), np.float32), "b": np.ones((5, 1), np.float32)})
    _ok(mod, m, n=5)


def test_missing_and_unknown_inputs(two_input):
    m, mod = two_input
    with pytest.raises(wasm_runtime.ModelError, match="input 'b' is missing"):
        mod.run({"a": np.zeros((2, 3), np.float32)})
    with pytest.raises(wasm_runtime.ModelError, match="unknown input"):
        mod.run({"a": np.zeros((2, 3), np.float32), "b": np.ones((2, 1), np.float32), "c": np.ones(1)})
    _ok(mod, m)


def test_gather_index_out_of_range(target):
    m = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="pick")],
                   [vinfo("x", np.float32, ["n", 2]), vinfo("i", np.int64, ["k"])], [vinfo("y", np.float32, None)])
    mod = build(m, target)
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    with pytest.raises(wasm_runtime.ModelError) as e:
        mod.run({"x": x, "i": np.array([0, 7], np.int64)})
    msg = str(e.value)
    assert "node 'pick' (Gather)" in msg and "7" in msg and "5" in msg
    feeds = {"x": x, "i": np.array([4, -5, 1], np.int64)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def _range_model():
    return make_model([helper.make_node("Range", ["start", "limit", "step"], ["y"], name="arange")],
                      [vinfo("limit", np.int64, [])], [vinfo("y", np.int64, None)],
                      [const("start", np.array(0, np.int64)), const("step", np.array(1, np.int64))])


def test_too_large_allocation(target):
    m = _range_model()
    mod = build(m, target)
    with pytest.raises(wasm_runtime.ModelError) as e:
        mod.run({"limit": np.array(10 ** 12, np.int64)})
    assert e.value.status == 3
    assert "node 'arange' (Range): cannot allocate 8000000000000 bytes for 'y'" in str(e.value)
    feeds = {"limit": np.array(6, np.int64)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_memory_limit(target):
    m = _range_model()
    mod = build(m, target)
    mod.set_memory_limit(1000)
    with pytest.raises(wasm_runtime.ModelError, match=r"cannot allocate 8000 bytes .* \(memory limit 1000 bytes\)"):
        mod.run({"limit": np.array(1000, np.int64)})
    feeds = {"limit": np.array(100, np.int64)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_unsupported_op_names_node_and_op():
    m = make_model([helper.make_node("Frobnicate", ["x"], ["y"], name="dec")], [vinfo("x", np.uint8, ["n"])],
                   [vinfo("y", np.uint8, None)], opset=20)
    with pytest.raises(CompileError, match=r"node 'dec' \(Frobnicate\): unsupported op 'Frobnicate'"):
        compile_model(m, _TMP / "unsupported.wasm")


def test_undefined_input_names_node_and_op():
    m = make_model([helper.make_node("Relu", ["nope"], ["y"], name="r")], [vinfo("x", np.float32, [3])],
                   [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError, match=r"node 'r' \(Relu\): input 'nope' is not produced"):
        compile_model(m, _TMP / "undefined.wasm")


def test_static_broadcast_mismatch_at_compile_time():
    m = make_model([helper.make_node("Add", ["x", "y"], ["z"], name="add")],
                   [vinfo("x", np.float32, [3, 4]), vinfo("y", np.float32, [5])], [vinfo("z", np.float32, None)])
    with pytest.raises(CompileError, match=r"node 'add' \(Add\): shapes do not broadcast"):
        compile_model(m, _TMP / "bcast.wasm")


def test_unsupported_dtype():
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vinfo("x", np.float32, [3])],
                   [vinfo("y", np.float32, None)])
    m.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.COMPLEX64
    with pytest.raises(CompileError, match="input 'x' has dtype COMPLEX64, which is not supported"):
        compile_model(m, _TMP / "string.wasm")


def test_op_rejects_a_dtype_naming_node_op_and_dtype():
    """int32 is a supported dtype, but Exp takes only floats."""
    m = make_model([helper.make_node("Exp", ["x"], ["y"], name="e")], [vinfo("x", np.int32, ["n"])],
                   [vinfo("y", np.int32, None)])
    with pytest.raises(CompileError, match=r"node 'e' \(Exp\): input 'x' has dtype int32; Exp takes "
                                           r"float16, float32, float64"):
        compile_model(m, _TMP / "exp_int.wasm")


def test_malformed_file_cli(tmp_path):
    """A corrupt file: the CLI says what is wrong, with no traceback, exit status 1."""
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\x03abc\xff\xff\xff\xff garbage")
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "compile", str(bad), "-o", str(tmp_path / "o.wasm")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1
    assert "error: malformed ONNX file" in r.stderr
    assert "Traceback" not in r.stderr


def test_unsupported_op_cli(tmp_path):
    m = make_model([helper.make_node("Frobnicate", ["x"], ["y"], name="dec")], [vinfo("x", np.uint8, ["n"])],
                   [vinfo("y", np.uint8, None)], opset=20)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "compile", str(path)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 1
    assert "error: node 'dec' (Frobnicate): unsupported op" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("opset,message", [
    (99, r"opset 99 is newer than the onnx package knows"),
])
def test_unknown_opset_rejected(opset, message):
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vinfo("x", np.float32, [3])],
                   [vinfo("y", np.float32, None)], opset=opset)
    with pytest.raises(CompileError, match=message):
        compile_model(m, _TMP / "old.wasm")


def test_two_loads_do_not_share_state(target):
    """Two loads of one file are two independent models (natively they share the library, each with its own context)."""
    m = _two_input_model()
    a = build(m, target)
    b = wasm_runtime.load(a.path)
    fa = {"a": np.ones((2, 3), np.float32), "b": np.full((2, 1), 2, np.float32)}
    fb = {"a": np.ones((4, 3), np.float32), "b": np.full((4, 1), 3, np.float32)}
    ra = a.run(fa)["y"]
    rb = b.run(fb)["y"]
    assert ra.shape == (2, 3) and rb.shape == (4, 3)
    assert_outputs_match(a.run(fa), reference(m, fa))
    assert_outputs_match(b.run(fb), reference(m, fb))
    np.testing.assert_array_equal(ra, reference(m, fa)["y"])


def test_symbolic_broadcast_error_names_inputs(target):
    """[p] + [q]: whether they broadcast is decided at run time; the error names both inputs."""
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="add")],
                   [vinfo("a", np.float32, ["p"]), vinfo("b", np.float32, ["q"])], [vinfo("y", np.float32, None)])
    mod = build(m, target)
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'add' \(Add\): input 'a' dim 0 \(p\) and input 'b' dim 0 \(q\) do not "
                             r"broadcast: p = 2, q = 3"):
        mod.run({"a": np.ones(2, np.float32), "b": np.ones(3, np.float32)})
    feeds = {"a": np.ones(1, np.float32), "b": np.arange(3, dtype=np.float32)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_symbol_range(target):
    """--range seq=1:512: values outside are rejected naming the input, dim and bound."""
    m = make_model([helper.make_node("Neg", ["ids"], ["y"])], [vinfo("ids", np.float32, [2, "seq"])],
                   [vinfo("y", np.float32, None)])
    mod = build(m, target, ranges={"seq": (1, 512)})
    assert mod.metadata["symbols"]["seq"] == {"kind": "input", "min": 1, "max": 512}
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'ids' dim 1 \(seq\): 700 exceeds bound 512"):
        mod.run({"ids": np.zeros((2, 700), np.float32)})
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'ids' dim 1 \(seq\): 0 is below the minimum 1"):
        mod.run({"ids": np.zeros((2, 0), np.float32)})
    feeds = {"ids": np.ones((2, 512), np.float32)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))


def test_range_of_unknown_symbol():
    m = make_model([helper.make_node("Neg", ["x"], ["y"])], [vinfo("x", np.float32, ["n"])],
                   [vinfo("y", np.float32, None)])
    with pytest.raises(CompileError, match="--range names unknown symbols: seq"):
        compile_model(m, _TMP / "r.wasm", ranges={"seq": (1, 4)})
