"""symwasm diff: a model through symwasm and a reference, every output (and with --nodes every
intermediate value) compared; a kernel broken on purpose is found at its node, and bad usage
ends in one line and exit status 2."""
import dataclasses
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import ROOT
from toolkit import cli
from toolkit.diff import DiffError, DiffResult, compare, diff_model
from toolkit.ops import elementwise
from util import const, make_model, vinfo

N = helper.make_node


def branch(name: str, op: str, value: str, out: str) -> onnx.GraphProto:
    """An If branch of one node over an outer value (captured, not passed in)."""
    return helper.make_graph([N(op, [value, value], [out])], name, [], [vinfo(out, np.float32, None)])


def chain_model() -> onnx.ModelProto:
    """Sixteen nodes over x (n, 4) and x2 (n, 3): a MatMul, bias, Relu and the Sub the
    break-a-kernel test breaks, then a shape read (a constant once n is bound), a sequence
    (not exposable: skipped), an If over a captured value, and a mean."""
    rng = np.random.default_rng(7)
    nodes = [N("MatMul", ["x", "w"], ["h"], name="project"),
             N("Add", ["h", "b"], ["h2"], name="bias"),
             N("Relu", ["h2"], ["r"], name="relu"),
             N("Sub", ["r", "x2"], ["s"], name="minus_x2"),
             N("Tanh", ["s"], ["t"], name="squash"),
             N("Shape", ["x"], ["shp"], name="shape"),
             N("Gather", ["shp", "zero"], ["n_i"], name="rows"),
             N("Cast", ["n_i"], ["n_f"], name="rows_f", to=onnx.TensorProto.FLOAT),
             N("Div", ["t", "n_f"], ["scaled"], name="per_row"),
             N("SplitToSequence", ["scaled"], ["cols"], name="split", axis=1, keepdims=1),
             N("SequenceAt", ["cols", "zero"], ["first"], name="first_col"),
             N("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
             N("Greater", ["total", "zero_f"], ["positive"], name="positive"),
             N("If", ["positive"], ["picked"], name="pick",
               then_branch=branch("then", "Add", "scaled", "twice"),
               else_branch=branch("else", "Mul", "scaled", "square")),
             N("ReduceMean", ["picked"], ["y"], name="mean", keepdims=0),
             N("Mul", ["first", "first"], ["z"], name="first_sq")]
    return make_model(nodes, [vinfo("x", np.float32, ["n", 4]), vinfo("x2", np.float32, ["n", 3])],
                      [vinfo("y", np.float32, None), vinfo("z", np.float32, None)],
                      [const("w", rng.standard_normal((4, 3)).astype(np.float32)),
                       const("b", np.full(3, 0.5, np.float32)), const("zero", np.array(0, np.int64)),
                       const("zero_f", np.array(0, np.float32))], opset=17)


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(), path)
    return path


@pytest.mark.parametrize("reference", ["ort", "onnx"])
def test_matches(target, model_file, reference):
    """Every output and every intermediate value agrees, at two bindings of n (each a module
    with n fixed, where Shape folds) and with given inputs at two sizes (one module each, n
    left symbolic); the sequence is skipped and said so."""
    for n in (1, 5):
        r = diff_model(model_file, target, binds={"n": n}, reference=reference, nodes=True)
        assert r.ok, r.lines()
        assert [c.name for c in r.outputs] == ["y", "z"]
        assert r.nodes.compared == 13 and r.nodes.first is None and r.nodes.diverging_nodes == 0
        assert r.nodes.skipped == {"cols": "a sequence or optional, which symwasm does not return"}
        assert r.inputs["x"].shape == (n, 4)
    rng = np.random.default_rng(3)
    for n in (2, 6):
        feeds = {"x": rng.standard_normal((n, 4)).astype(np.float32),
                 "x2": rng.standard_normal((n, 3)).astype(np.float32)}
        r = diff_model(model_file, target, inputs=feeds, reference=reference)
        assert r.ok and r.nodes is None, r.lines()


def test_broken_kernel_is_named(target, model_file, monkeypatch):
    """Sub's scalar function made an Add (the one seam every elementwise kernel, fused or
    not, takes its element from): --nodes names the Sub node, its output and its agreeing
    inputs, though three nodes after it diverge too; the plain diff sees the outputs diverge."""
    sub = elementwise.SCALAR["sub"]
    monkeypatch.setitem(elementwise.SCALAR, "sub", dataclasses.replace(sub, body=lambda s, v, p: s.add(*v)))
    r = diff_model(model_file, target, binds={"n": 3}, nodes=True)
    assert not r.ok
    first = r.nodes.first
    assert (first.node, first.op, first.value.name) == ("minus_x2", "Sub", "s")
    assert not first.value.ok and first.value.max_abs > 0.1 and first.value.got_shape == (3, 3)
    assert list(first.inputs) == ["r", "x2"] and first.inputs["x2"].shape == (3, 3) and not first.unchecked
    assert r.nodes.diverging_nodes > 1  # what follows diverges as well; only the first is named
    text = "\n".join(r.lines())
    assert "node 3 'minus_x2' (Sub), output 's'" in text and "input x2: float32(3, 3) min" in text

    plain = diff_model(model_file, target, binds={"n": 3})
    assert not plain.ok and not all(c.ok for c in plain.outputs) and plain.nodes is None


def test_untyped_contrib_value(target, tmp_path):
    """A value ONNX's shape inference cannot type (com.microsoft's FastGelu) is exposed too:
    symwasm and onnxruntime infer it."""
    nodes = [N("Add", ["x", "x"], ["x2"], name="double"),
             N("FastGelu", ["x2"], ["g"], name="gelu", domain="com.microsoft"),
             N("Neg", ["g"], ["y"], name="neg")]
    m = make_model(nodes, [vinfo("x", np.float32, ["n", 8])], [vinfo("y", np.float32, None)])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    r = diff_model(m, target, binds={"n": 2}, reference="ort", nodes=True)
    assert r.ok and r.nodes.compared == 2 and not r.nodes.skipped, r.lines()


def test_failed_run_diverges(target, model_file, monkeypatch, capsys):
    """symwasm's run failing where the reference's does not is a divergence (exit 1), said in
    one line with the module's message."""
    import wasm_runtime

    def fail(self, inputs, timeout=None):
        raise wasm_runtime.ModelError("node 'minus_x2' (Sub): out of memory")

    monkeypatch.setattr(wasm_runtime.Model, "run", fail)
    code, out, _ = run_cli(capsys, "diff", model_file, "--bind", "n=2", "-q", "--target", target)
    assert code == 1
    assert "DIVERGES: symwasm's run failed where the reference's did not: node 'minus_x2' (Sub): out of memory" in out


def run_cli(capsys, *args):
    code = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_usage_errors(model_file, tmp_path, capsys):
    """Each mistake is one line naming it, and exit status 2, before anything compiles."""
    code, _, err = run_cli(capsys, "diff", model_file, "-q")
    assert code == 2 and err.count("\n") == 1
    assert "unbound symbol: n (input 'x' dim 0, 'x2' dim 0): give each a value, e.g. --bind n=4" in err

    np.savez(tmp_path / "short.npz", x=np.zeros((2, 4), np.float32))
    code, _, err = run_cli(capsys, "diff", model_file, "--inputs", tmp_path / "short.npz")
    assert code == 2 and err.count("\n") == 1 and "lacks input 'x2'" in err and "the model's inputs: x, x2" in err

    np.savez(tmp_path / "ints.npz", x=np.zeros((2, 4), np.int64), x2=np.zeros((2, 3), np.float32))
    code, _, err = run_cli(capsys, "diff", model_file, "--inputs", tmp_path / "ints.npz")
    assert code == 2 and "input 'x' is int64, the model declares float32" in err

    np.savez(tmp_path / "wide.npz", x=np.zeros((2, 5), np.float32), x2=np.zeros((2, 3), np.float32))
    code, _, err = run_cli(capsys, "diff", model_file, "--inputs", tmp_path / "wide.npz")
    assert code == 2 and "input 'x' dim 1 is 5, the model declares 4 (n, 4)" in err

    code, _, err = run_cli(capsys, "diff", model_file, "--bind", "n=2,batch=3")
    assert code == 2 and "--bind names batch, which no input dim uses (the inputs' symbols: n)" in err

    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.float32))
    code, _, err = run_cli(capsys, "diff", model_file, "--inputs", tmp_path / "x.npy")
    assert code == 2 and "not a .npz archive" in err

    code, _, err = run_cli(capsys, "diff", model_file, "--bind", "n=two")
    assert code == 2 and "--bind n: 'two' is not an integer" in err

    code, _, err = run_cli(capsys, "diff", tmp_path / "missing.onnx", "--bind", "n=2")
    assert code == 2 and "cannot read" in err and "Traceback" not in err


def test_compile_error_is_exit_2(tmp_path, capsys):
    """A model symwasm cannot compile: the compiler's message, exit 2."""
    m = make_model([N("Relu", ["x"], ["y"])], [vinfo("x", np.float32, [2])], [vinfo("y", np.float32, None)])
    m.graph.node[0].op_type = "NoSuchOp"
    path = tmp_path / "bad.onnx"
    onnx.save(m, path)
    code, _, err = run_cli(capsys, "diff", path, "-q")
    assert code == 2 and err.startswith("error: symwasm cannot compile") and "NoSuchOp" in err


def test_cli_subprocess(model_file, tmp_path):
    """The console command end to end: progress on stderr, JSON on stdout, exit 0; then a
    table and exit 0 with inputs from a .npz (n left symbolic)."""
    cmd = [sys.executable, "-m", "toolkit.cli", "diff", str(model_file)]
    r = subprocess.run(cmd + ["--bind", "n=3", "--nodes", "--json", "--target", "native"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "compiling" in r.stderr and "running symwasm (native)" in r.stderr and "Traceback" not in r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] and report["nodes"]["compared"] == 13 and report["nodes"]["first_divergence"] is None
    assert [o["name"] for o in report["outputs"]] == ["y", "z"] and report["outputs"][0]["max_abs"] < 1e-5
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal((4, 4)).astype(np.float32),
             x2=rng.standard_normal((4, 3)).astype(np.float32))
    r = subprocess.run(cmd + ["--inputs", str(tmp_path / "in.npz"), "-q"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and not r.stderr, r.stderr
    assert "outputs match: 2 of 2" in r.stdout and "  y  " in r.stdout


def test_random_inputs_need_a_name_or_size():
    m = make_model([N("Relu", ["x"], ["y"])], [vinfo("x", np.float32, [None, 2])], [vinfo("y", np.float32, None)])
    with pytest.raises(DiffError, match=r"input 'x' dim 0 has neither a size nor a name.*--inputs FILE.npz"):
        diff_model(m)


def test_compare_verdicts():
    """compare's verdict is numpy's allclose (NaN equal to NaN) at the given tolerances, its
    max abs error numpy's; other dtypes compare exactly; shape and dtype mismatches diverge;
    16-bit floats get wider default tolerances; the JSON of an infinite error is valid JSON."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal(1000).astype(np.float32)
    for scale in (1e-7, 1e-5, 1e-3):
        g = (w + scale * rng.standard_normal(1000)).astype(np.float32)
        g[3] = w[3] = np.nan
        c = compare("v", g, w, 1e-4, 1e-5)
        assert c.ok == np.allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
        assert c.max_abs == pytest.approx(np.nanmax(np.abs(g.astype(np.float64) - w)))
        assert c.max_rel == pytest.approx(np.nanmax(np.abs(g.astype(np.float64) - w) / np.abs(w)))
    g = w.copy()
    g[7] = np.nan
    c = compare("v", g, w)
    assert not c.ok and c.max_abs == np.inf and c.why == "1 of 1000 elements beyond tolerance"
    report = DiffResult("m.onnx", "wasm32", "onnxruntime", {}, "given", {}, [c]).to_json()
    assert json.loads(json.dumps(report, allow_nan=False))["outputs"][0]["max_abs"] == "inf"
    ints = rng.integers(0, 5, 10)
    assert compare("i", ints, ints).ok and not compare("i", ints + (ints == 0), ints).ok
    assert compare("s", ints.reshape(2, 5), ints).why == "shapes differ"
    assert compare("d", ints.astype(np.int32), ints).why == "dtypes differ"
    half = w.astype(np.float16)
    assert compare("h", (half.astype(np.float32) * (1 + 2e-3)).astype(np.float16), half).ok
    assert not compare("f", w * (1 + 2e-3), w).ok
    words = np.array(["a", "b"], dtype=object)
    assert compare("t", words, np.array(["a", "b"])).ok and not compare("t", words, np.array(["a", "c"])).ok
