"""A dim name that several inputs give (toolkit/frontend/onnx/shared_dims.py): inputs whose
copies never meet in an op may be fed different sizes, as onnxruntime allows; copies that meet
(a broadcast, an equality an op requires) stay one dim, checked when a run binds it; and one
dim is kept where the copies apart would cost what the compiler knows."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import wasm_runtime
from toolkit import cli
from toolkit.frontend.onnx.importer import import_model
from util import _TMP, assert_outputs_match, build, check_model, make_model, ort_reference, vinfo

F32 = np.float32


def _unrelated():
    """x and y both (N, .), never combined."""
    return make_model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["y"], ["b"])],
                      [vinfo("x", F32, ["N", 4]), vinfo("y", F32, ["N", 3])],
                      [vinfo("a", F32, ["N", 4]), vinfo("b", F32, ["N", 3])])


def _similarity():
    """CLIP's shape: texts (B, D) and images (B, D) meet only as the two dims of their
    similarity matrix, and a third input z meets x in an Add."""
    return make_model([helper.make_node("Add", ["x", "z"], ["xz"]),
                       helper.make_node("Transpose", ["y"], ["yt"], perm=[1, 0]),
                       helper.make_node("MatMul", ["xz", "yt"], ["sim"])],
                      [vinfo("x", F32, ["B", 8]), vinfo("y", F32, ["B", 8]), vinfo("z", F32, ["B", 8])],
                      [vinfo("sim", F32, ["B", "B"])])


def _run(model, target, feeds_list):
    return check_model(model, target, feeds_list, ref=ort_reference)


def test_inputs_that_never_meet_take_their_own_sizes(target):
    rng = np.random.default_rng(0)
    m = _unrelated()
    g = import_model(m)
    assert [g.values[i].shape for i in g.inputs] == [(g.scope.get("N"), 4), (g.scope.get("N@y"), 3)]
    assert any("dim 'N' is named by several inputs" in n and "'y': N@y" in n for n in g.notes), g.notes
    _run(m, target, [{"x": rng.standard_normal((2, 4), F32), "y": rng.standard_normal((5, 3), F32)},
                     {"x": rng.standard_normal((3, 4), F32), "y": rng.standard_normal((3, 3), F32)},
                     {"x": rng.standard_normal((0, 4), F32), "y": rng.standard_normal((1, 3), F32)}])


def test_required_bytes_sizes_a_copy_from_its_declared_name(target):
    mod = build(_unrelated(), target)
    assert mod.required_bytes(N=3) == mod.required_bytes(**{"N": 3, "N@y": 3})
    # y's copy sizes y's buffer (6 more rows of 3 float32) and b's block in the dynamic arena
    assert mod.required_bytes(**{"N": 3, "N@y": 9}) > mod.required_bytes(N=3) + 6 * 3 * 4


def test_copies_that_meet_in_a_broadcast_are_one_dim_and_the_others_stay_apart(target):
    rng = np.random.default_rng(1)
    m = _similarity()
    g = import_model(m)
    shapes = {i: g.values[i].shape[0] for i in g.inputs}
    assert shapes["x"] == shapes["z"] != shapes["y"], shapes
    mod = _run(m, target, [{"x": rng.standard_normal((2, 8), F32), "y": rng.standard_normal((5, 8), F32),
                            "z": rng.standard_normal((2, 8), F32)},
                           {"x": rng.standard_normal((4, 8), F32), "y": rng.standard_normal((1, 8), F32),
                            "z": rng.standard_normal((4, 8), F32)}])
    # x and z meet in the Add: a run that gives them different sizes is refused, naming both
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'z' dim 0 \(B\): got 3, but B = 2 from input 'x' dim 0"):
        mod.run({"x": np.zeros((2, 8), F32), "y": np.zeros((5, 8), F32), "z": np.zeros((3, 8), F32)})


def test_groups_merged_earlier_in_one_pass_are_found_by_their_inputs(target):
    """a meets c and b meets d, then c meets d: when the third meeting is read, c's and d's
    copies have been merged into a's and b's groups, and the two groups are still one dim
    (the importer failed with an IndexError, on a Llama step with a KV cache exported by
    torch.export, where seven inputs name 'batch')."""
    m = make_model([helper.make_node("Add", ["a", "c"], ["ac"]), helper.make_node("Add", ["b", "d"], ["bd"]),
                    helper.make_node("Add", ["c", "d"], ["cd"])],
                   [vinfo(i, F32, ["N", 3]) for i in "abcd"], [vinfo(o, F32, None) for o in ("ac", "bd", "cd")])
    g = import_model(m)
    assert {g.values[i].shape for i in g.inputs} == {(g.scope.get("N"), 3)}
    rng = np.random.default_rng(4)
    mod = _run(m, target, [{i: rng.standard_normal((k, 3), F32) for i in "abcd"} for k in (2, 5)])
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'd' dim 0 \(N\): got 3, but N = 2 from input 'a'"):
        mod.run({"a": np.zeros((2, 3), F32), "b": np.zeros((2, 3), F32), "c": np.zeros((2, 3), F32),
                 "d": np.zeros((3, 3), F32)})


def test_copies_apart_that_would_cost_what_the_compiler_knows_stay_one_dim(target):
    """An If that yields x or y: with x's N and y's N apart its output's dim would be known
    only at run time; as one dim it is N."""
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["o1"])], "t", [], [vinfo("o1", F32, None)])
    other = helper.make_graph([helper.make_node("Identity", ["y"], ["o2"])], "e", [], [vinfo("o2", F32, None)])
    m = make_model([helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other),
                    helper.make_node("Relu", ["o"], ["r"])],
                   [vinfo("c", np.bool_, []), vinfo("x", F32, ["N", 4]), vinfo("y", F32, ["N", 4])],
                   [vinfo("r", F32, None)])
    g = import_model(m)
    n = g.scope.get("N")
    assert g.values["x"].shape == g.values["y"].shape == g.values["r"].shape == (n, 4)
    assert not any("named by several inputs" in note for note in g.notes)
    rng = np.random.default_rng(2)
    _run(m, target, [{"c": np.array(c), "x": rng.standard_normal((k, 4), F32), "y": rng.standard_normal((k, 4), F32)}
                     for c, k in ((True, 2), (False, 6))])


def test_a_bound_name_is_bound_in_every_input(target):
    rng = np.random.default_rng(3)
    m = _unrelated()
    mod = build(m, target, binds={"N": 3})
    feeds = {"x": rng.standard_normal((3, 4), F32), "y": rng.standard_normal((3, 3), F32)}
    assert_outputs_match(mod.run(feeds), ort_reference(m, feeds))
    with pytest.raises(wasm_runtime.ModelError, match=r"input 'y' dim 0: expected 3, got 2"):
        mod.run({"x": feeds["x"], "y": np.zeros((2, 3), F32)})


def test_run_random_and_inspect_bind_size_every_copy_from_the_declared_name(capsys):
    path = _TMP / "shared_dims_random.wasm"
    onnx.save(_unrelated(), _TMP / "shared_dims_random.onnx")
    assert cli.main(["compile", str(_TMP / "shared_dims_random.onnx"), "-o", str(path), "-q"]) == 0
    assert cli.main(["run", str(path), "--random", "N=3"]) == 0
    out = capsys.readouterr().out
    assert "a: float32[3, 4]" in out and "b: float32[3, 3]" in out, out
    assert cli.main(["inspect", str(path), "--no-program", "--bind", "N=3"]) == 0
    out = capsys.readouterr().out
    assert "for N=3: " in out and "needs a value" not in out, out  # N@y sized from N
