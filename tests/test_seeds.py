"""The failure cases of shared/seeds/, as named tests: each compiles once per target and runs
with several bindings of its symbolic dims."""
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.compiler import compile_model
from toolkit.frontend.onnx.importer import import_model
from util import _TMP, assert_outputs_match, check_model, const, make_model, reference, vinfo
from conftest import ROOT
from samples.models import reshape_of_shape


def test_seed000_argwhere_nonzero_transpose(target):
    """relay.build failed on argwhere: the module must size NonZero's output at run time."""
    m = make_model([helper.make_node("NonZero", ["x"], ["nz"]),
                    helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0])],
                   [vinfo("x", np.float32, ["n", "m"])], [vinfo("idx", np.int64, None)])
    rng = np.random.default_rng(0)
    some = rng.standard_normal((6, 5)).astype(np.float32)
    some[some < 0.3] = 0
    feeds = [{"x": np.zeros((4, 5), np.float32)},          # none nonzero
             {"x": some},                                  # some
             {"x": np.ones((3, 7), np.float32)},           # all
             {"x": np.zeros((0, 5), np.float32)}]          # empty input
    mod = check_model(m, target, feeds)
    assert mod.outputs[0].shape == ("nonzero_0", 2)


def _seed002_model():
    """c = a + b for a: [n, 10], then Reshape(c, Concat([1], Shape(c)[0:1], Shape(c)[1:2], [1]));
    the same graph the reshape_of_shape sample shows."""
    return reshape_of_shape()[0]


def test_seed002_reshape_from_shape_values(target):
    """reshape(c, [1, shape_of(c)[0], shape_of(c)[1], 1]) gets a static-rank symbolic shape at
    compile time, visible in `symwasm inspect`, and runs for several n. In ONNX a 0 in the
    target copies the input's dim, so the shape is (1, (n or 10), 10, 1): (1, n, 10, 1)
    whenever n >= 1, which declaring n's range makes exact."""
    m = _seed002_model()
    assert str(tuple(import_model(m, ranges={"n": (1, None)}).values["d"].shape)) == "(1, n, 10, 1)"
    path = _TMP / f"seed002.{target}"
    r = compile_model(m, path, target=target)
    assert str(tuple(r.graph.values["d"].shape)) == "(1, (n or 10), 10, 1)"
    # the reshape is a view: 'd' is defined by a VIEW of c's buffer, and no kernel copies data for it
    assert [ins for _, _, ins in r.program.instrs() if ins.name == "VIEW" and ins.args[0].name == "d"]
    assert not any("reshape" in k.name for k in r.program.kernels)
    out = subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", str(path)], capture_output=True,
                         text=True, cwd=ROOT, check=True).stdout
    assert "d: float32(1, (n or 10), 10, 1)" in out
    mod = wasm_runtime.load(path)
    rng = np.random.default_rng(2)
    for n in (1, 4, 9):
        feeds = {"a": rng.standard_normal((n, 10)).astype(np.float32), "b": rng.standard_normal(1).astype(np.float32)}
        assert_outputs_match(mod.run(feeds), reference(m, feeds))
    # n = 0: the target [1, 0, 10, 1] copies c's dim 1, and 100 elements cannot come from 0
    # (onnxruntime refuses it too)
    with pytest.raises(wasm_runtime.ModelError, match=r"element count: .*\(n or 10\).* = 100 does not equal .* = 0"):
        mod.run({"a": np.zeros((0, 10), np.float32), "b": np.zeros(1, np.float32)})


def test_seed003_arange_of_shape(target):
    """x = arange(data.shape[0]) for data: [L, N]."""
    m = make_model([helper.make_node("Shape", ["data"], ["s"]),
                    helper.make_node("Gather", ["s", "zero"], ["len"], axis=0),
                    helper.make_node("Range", ["start", "len", "step"], ["x"])],
                   [vinfo("data", np.float32, ["L", "N"])], [vinfo("x", np.int64, None)],
                   [const("zero", np.array(0, np.int64)), const("start", np.array(0, np.int64)),
                    const("step", np.array(1, np.int64))])
    mod = check_model(m, target, [{"data": np.zeros((k, 3), np.float32)} for k in (5, 1, 12, 0)])
    assert mod.outputs[0].shape == ("L",)


def test_seed003_boolean_mask(target):
    """x[x > 0]: Greater, NonZero, Gather; the output length changes per run."""
    m = make_model([helper.make_node("Greater", ["x", "zero"], ["mask"]),
                    helper.make_node("NonZero", ["mask"], ["nz"]),
                    helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
                    helper.make_node("Gather", ["x", "idx"], ["y"], axis=0)],
                   [vinfo("x", np.float32, ["n"])], [vinfo("y", np.float32, None)],
                   [const("zero", np.array(0.0, np.float32)), const("flat", np.array([-1], np.int64))])
    rng = np.random.default_rng(3)
    feeds = [{"x": rng.standard_normal(k).astype(np.float32)} for k in (10, 3, 40)]
    feeds.append({"x": -np.ones(6, np.float32)})
    mod = check_model(m, target, feeds)
    lengths = {mod.run(f)["y"].shape[0] for f in feeds}
    assert len(lengths) > 1


def _broadcast_model():
    return make_model([helper.make_node("Add", ["x", "y"], ["z"], name="add")],
                      [vinfo("x", np.float32, [10, "a"]), vinfo("y", np.float32, [10, 10])],
                      [vinfo("z", np.float32, None)])


def test_seed003_broadcast_any_dim(target):
    """Broadcast((10, a), (10, 10)): fine for a = 1 and a = 10, an error naming both dims
    for a = 3, and the module still works afterwards."""
    m = _broadcast_model()
    rng = np.random.default_rng(4)
    mod = check_model(m, target, [{"x": rng.standard_normal((10, a)).astype(np.float32),
                                   "y": rng.standard_normal((10, 10)).astype(np.float32)} for a in (1, 10)])
    with pytest.raises(wasm_runtime.ModelError) as e:
        mod.run({"x": np.zeros((10, 3), np.float32), "y": np.zeros((10, 10), np.float32)})
    msg = str(e.value)
    assert "node 'add' (Add)" in msg and "'x'" in msg and "'y'" in msg
    assert "a = 3" in msg and "10" in msg
    feeds = {"x": np.ones((10, 1), np.float32), "y": np.ones((10, 10), np.float32)}
    assert_outputs_match(mod.run(feeds), reference(m, feeds))
