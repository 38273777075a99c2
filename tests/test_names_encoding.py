"""Names whose bytes are not valid UTF-8 (protobuf does not check proto2 strings, and
onnxruntime runs such models): a node, value, graph name or dim_param like that compiles,
runs, and every message prints it the same way, with its bad bytes as \\xff escapes; before,
the compiler died with a TypeError (bytes in the metadata's JSON) or an AttributeError."""
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from conftest import ROOT
from util import assert_outputs_match, build, const, make_model, ort_reference, vinfo

BAD = b"r\xff\xfelu"  # not UTF-8: 0xff and 0xfe never occur in it
SHOWN = "r\\xff\\xfelu"  # how messages print it


def _with_bytes(model: onnx.ModelProto, marks: dict[str, bytes]) -> onnx.ModelProto:
    """``model`` with each placeholder string replaced by raw bytes (of the same length, so the
    protobuf's length prefixes stay right), as a model from another writer could hold them."""
    data = model.SerializeToString()
    for mark, raw in marks.items():
        assert len(raw) == len(mark) and mark.encode() in data
        data = data.replace(mark.encode(), raw)
    return onnx.load_from_string(data)


def _model(where: str, raw: bytes | None = BAD) -> onnx.ModelProto:
    """Relu then Reshape to (5, 4) (a run-time error when x is not 20 elements), with the
    name ``raw`` where ``where`` says (without ``raw``, the placeholder 'PLACE')."""
    x = "PLACE" if where == "value" else "x"
    nodes = [helper.make_node("Relu", [x], ["h"], name="PLACE" if where == "node" else "relu"),
             helper.make_node("Reshape", ["h", "s"], ["y"], name="PLACE" if where == "reshape" else "reshape")]
    m = make_model(nodes, [vinfo(x, np.float32, ["PLACE" if where == "dim" else "n", 4])], [vinfo("y", np.float32, None)],
                   [const("s", np.array([5, 4]))])
    if where == "graph":
        m.graph.name = "PLACE"
    return _with_bytes(m, {"PLACE": raw}) if raw else m


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT)


@pytest.mark.parametrize("where", ["node", "value", "graph", "dim"])
def test_cli_compiles_a_model_with_a_name_not_utf8(where, tmp_path):
    m = _model(where)
    assert BAD in m.SerializeToString()
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    r = _cli("compile", path, "-o", tmp_path / "m.wasm")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    if where == "dim":
        assert f"from symbols {SHOWN}" in r.stdout


@pytest.mark.parametrize("where", ["node", "value", "graph", "dim"])
def test_runs_like_onnxruntime(where, target):
    m = _model(where)
    mod = build(m, target)
    x = SHOWN if where == "value" else "x"
    assert [i.name for i in mod.inputs] == [x]
    feeds = {x: np.linspace(-2, 2, 20, dtype=np.float32).reshape(5, 4)}
    # onnxruntime runs the bytes model, but its Python API cannot name such an input: the
    # same model with a text name is the reference
    plain = _model(where, raw=None)
    assert_outputs_match(mod.run(feeds), ort_reference(plain, {plain.graph.input[0].name: feeds[x]}))


def test_a_run_time_error_names_the_node(target):
    mod = build(_model("reshape"), target)
    with pytest.raises(wasm_runtime.ModelError, match=rf"node '{SHOWN.replace(chr(92), chr(92) * 2)}' \(Reshape\)"):
        mod.run({"x": np.ones((3, 4), np.float32)})


def test_a_compile_error_names_the_node(tmp_path):
    m = make_model([helper.make_node("Frobnicate", ["x"], ["y"], name="PLACE")], [vinfo("x", np.float32, [2])],
                   [vinfo("y", np.float32, None)])
    path = tmp_path / "m.onnx"
    path.write_bytes(_with_bytes(m, {"PLACE": BAD}).SerializeToString())
    r = _cli("compile", path, "-o", tmp_path / "m.wasm")
    assert r.returncode == 1
    assert f"error: node '{SHOWN}' (Frobnicate): unsupported op" in r.stderr
    assert "Traceback" not in r.stderr


def test_names_differing_only_in_bad_bytes_stay_apart(target):
    """Decoding with U+FFFD for every bad byte would make these one value."""
    m = make_model([helper.make_node("Relu", ["x"], ["AAAA"]), helper.make_node("Neg", ["x"], ["BBBB"]),
                    helper.make_node("Sub", ["AAAA", "BBBB"], ["y"])],
                   [vinfo("x", np.float32, ["n"])], [vinfo("y", np.float32, None)])
    m = _with_bytes(m, {"AAAA": b"v\xff\xfe1", "BBBB": b"v\xfe\xff1"})
    feeds = {"x": np.linspace(-2, 2, 7, dtype=np.float32)}
    assert_outputs_match(build(m, target).run(feeds), ort_reference(m, feeds))
