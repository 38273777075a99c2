"""If, Loop and Scan (issue 7): each model compiled once per target and run with several
bindings of its symbols and several data that take different paths, against onnx.reference
(onnxruntime where onnx.reference is wrong, said where)."""
import json
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import util
import wasm_runtime
from toolkit.ir.graph import CompileError
from wasm_runtime._abi import STATUS
from util import _TMP, build, check_model, const, lower_model, make_model, ort_reference, vinfo

F32, I64, BOOL = np.float32, np.int64, np.bool_


def _graph(name, nodes, inputs, outputs, inits=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(inits))


def _if(cond, outs, then_nodes, then_outs, else_nodes, else_outs, name="if", dtype=F32):
    return helper.make_node("If", [cond], outs, name=name,
                            then_branch=_graph("then", then_nodes, [], [vinfo(o, dtype, None) for o in then_outs]),
                            else_branch=_graph("else", else_nodes, [], [vinfo(o, dtype, None) for o in else_outs]))


def _opcodes(model, **kw):
    _, prog, _ = lower_model(model, **kw)
    return [ins.name for _, _, ins in prog.instrs()], prog


# ----------------------------------------------------------------------------- If


def _if_shapes_model():
    """The branches yield different shapes: relu(x) (n, 3) or concat(x, x) (2n, 3)."""
    return make_model(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         _if("c", ["y"], [helper.make_node("Relu", ["x"], ["t"])], ["t"],
             [helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], ["e"])],
        [vinfo("x", F32, ["n", 3])], [vinfo("y", F32, None)], [const("zero", np.array(0, F32))])


def test_if_branches_yield_different_shapes(target):
    rng = np.random.default_rng(1)
    mod = check_model(_if_shapes_model(), target, [
        {"x": np.abs(rng.standard_normal((2, 3), F32))},  # then: (2, 3)
        {"x": -np.abs(rng.standard_normal((4, 3), F32))},  # else: (8, 3)
        {"x": np.zeros((0, 3), F32)},  # else, empty
        {"x": np.abs(rng.standard_normal((5, 3), F32))}])
    assert mod.outputs[0].shape == ("y_dim0_0", 3)  # a fresh symbol, read after the branch ran


def test_if_program_has_blocks_and_moves_results_out():
    ops, prog = _opcodes(_if_shapes_model())
    text = prog.dump()
    for label in ("else:", "then:", "endif:"):
        assert label in text
    assert ops.count("MOVE") == 2 and "COPY" not in ops  # each branch's buffer leaves without a copy
    assert "BRANCH" in ops and "JUMP" in ops


def test_if_branch_reads_outer_values_and_yields_them(target):
    """A branch may yield a value of the enclosing graph (copied out) or compute from
    several outer values; the outputs are two, one of them a constant in one branch."""
    m = make_model(
        [_if("c", ["y", "z"],
             [helper.make_node("Add", ["x", "b"], ["t1"]), helper.make_node("Identity", ["b"], ["t2"])], ["t1", "t2"],
             [helper.make_node("Mul", ["x", "x"], ["e1"])], ["e1", "k"])],
        [vinfo("c", BOOL, []), vinfo("x", F32, ["n", 4]), vinfo("b", F32, [4])],
        [vinfo("y", F32, None), vinfo("z", F32, None)], [const("k", np.arange(4, dtype=F32))])
    rng = np.random.default_rng(2)
    feeds = []
    for c, n in ((True, 3), (False, 1), (True, 0), (False, 6)):
        feeds.append({"c": np.array(c), "x": rng.standard_normal((n, 4), F32), "b": rng.standard_normal(4, F32)})
    check_model(m, target, feeds)


def test_if_with_a_known_condition_inlines_the_branch(target):
    m = make_model([_if("c", ["y"], [helper.make_node("Relu", ["x"], ["t"])], ["t"],
                        [helper.make_node("Neg", ["x"], ["e"])], ["e"])],
                   [vinfo("x", F32, ["n"])], [vinfo("y", F32, None)], [const("c", np.array(False))])
    ops, _ = _opcodes(m)
    assert "BRANCH" not in ops and "MOVE" not in ops
    check_model(m, target, [{"x": np.arange(k, dtype=F32) - 2} for k in (1, 5)])


def _if_on_shape_model():
    """Seed 003's tf.cond on a shape: long inputs are summed in halves, short ones doubled."""
    return make_model(
        [helper.make_node("Shape", ["x"], ["sh"]),
         helper.make_node("Gather", ["sh", "zero"], ["n"]),
         helper.make_node("Greater", ["n", "four"], ["c"]),
         _if("c", ["y"],
             [helper.make_node("Reshape", ["x", "halves"], ["h"]),
              helper.make_node("ReduceSum", ["h", "ax0"], ["t"], keepdims=0)], ["t"],
             [helper.make_node("Add", ["x", "x"], ["e"])], ["e"])],
        [vinfo("x", F32, ["n_x"])], [vinfo("y", F32, None)],
        [const("zero", np.array(0, I64)), const("four", np.array(4, I64)),
         const("halves", np.array([2, -1], I64)), const("ax0", np.array([0], I64))])


def test_if_on_a_shape(target):
    check_model(_if_on_shape_model(), target, [{"x": np.arange(k, dtype=F32)} for k in (2, 4, 6, 10)])


def test_if_on_a_shape_folds_when_bound():
    """--bind n_x=8 makes the condition known: the taken branch alone is compiled."""
    ops, _ = _opcodes(_if_on_shape_model())
    assert "BRANCH" in ops
    from toolkit.frontend.onnx.importer import import_model
    from toolkit.codegen.target import get_target
    from toolkit.passes import run_pipeline

    graph = run_pipeline(import_model(_if_on_shape_model(), {"n_x": 8}), get_target("wasm32"))
    assert "If" not in {n.source for n in graph.all_nodes() if type(n.op).__name__ == "If"}
    assert not any(type(n.op).__name__ == "If" for n in graph.all_nodes())
    assert graph.values[graph.outputs[0]].shape == (4,)


def test_a_branch_not_taken_costs_nothing(target):
    """The else branch would need 4 GiB; a run that takes the then branch allocates none of it."""
    m = make_model(
        [_if("c", ["y"], [helper.make_node("Neg", ["x"], ["t"])], ["t"],
             [helper.make_node("Expand", ["x", "huge"], ["big"]),
              helper.make_node("ReduceSum", ["big", "ax0"], ["e"], keepdims=0)], ["e"])],
        [vinfo("c", BOOL, []), vinfo("x", F32, ["n"]), vinfo("huge", I64, [2])], [vinfo("y", F32, None)],
        [const("ax0", np.array([0], I64))])
    mod = build(m, target)
    mod.set_memory_limit(64 << 20)
    x = np.arange(1024, dtype=F32)
    huge = np.array([1 << 20, 1024], I64)
    np.testing.assert_array_equal(mod.run({"c": np.array(True), "x": x, "huge": huge})["y"], -x)
    with pytest.raises(wasm_runtime.ModelError, match="cannot allocate 4294967296 bytes for 'big'") as e:
        mod.run({"c": np.array(False), "x": x, "huge": huge})
    assert e.value.status == STATUS["OUT_OF_MEMORY"]
    np.testing.assert_array_equal(mod.run({"c": np.array(True), "x": x, "huge": huge})["y"], -x)


def test_if_branches_of_different_ranks_leaving_the_graph_fail_at_compile_time():
    """Nothing after the If brings its output back to one rank: the graph's output would
    have a rank known only from data."""
    m = make_model([_if("c", ["y"], [helper.make_node("Relu", ["x"], ["t"])], ["t"],
                        [helper.make_node("Flatten", ["x"], ["e"], axis=0)], ["e"], name="pick")],
                   [vinfo("c", BOOL, []), vinfo("x", F32, ["n", 2, 2])], [vinfo("y", F32, None)])
    with pytest.raises(CompileError, match=r"node 'pick' \(If\): output 0 \('y'\) has rank 3 in the then branch "
                                           r"\('t'\) and 2 in the else branch \('e'\); symwasm needs the ranks of the "
                                           r"values that leave a graph to be known at compile time"):
        lower_model(m)


def _squeeze_if(x: str, cond: str, out: str, k: int) -> list:
    """torch's ``if cond: x = x.squeeze(1)`` on ``x``, then ``out`` := x if its rank is 2
    else the sum over axis 1 (the rank tested again through Size(Shape(x)))."""
    return [
        _if(cond, [f"r{k}"], [helper.make_node("Squeeze", [x, "axes1"], [f"sq{k}"])], [f"sq{k}"],
            [helper.make_node("Identity", [x], [f"id{k}"])], [f"id{k}"], name=f"squeeze_if{k}"),
        helper.make_node("Shape", [f"r{k}"], [f"rs{k}"]),
        helper.make_node("Size", [f"rs{k}"], [f"rank{k}"]),
        helper.make_node("Equal", [f"rank{k}", "two"], [f"two{k}"]),
        _if(f"two{k}", [out], [helper.make_node("Identity", [f"r{k}"], [f"o1_{k}"])], [f"o1_{k}"],
            [helper.make_node("ReduceSum", [f"r{k}", "axes1"], [f"o2_{k}"], keepdims=0)], [f"o2_{k}"],
            name=f"rank_is_two{k}"),
    ]


_RANK_CONSTS = [const("one", np.array(1)), const("two", np.array(2)), const("axes1", np.array([1]))]


def test_code_after_a_rank_polymorphic_if_is_specialized_per_branch(target):
    """The code after an If whose branches yield rank 2 and rank 3 (squeeze when dim 1 is 1)
    is copied into both, where the rank test folds; a node that does not read the If's output
    (Neg) stays outside. Both paths from one module, against onnxruntime
    (shared/regressions/if_rank)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["d"]),
             helper.make_node("Equal", ["d", "one"], ["unit"])]
    nodes += _squeeze_if("x", "unit", "y", 0) + [helper.make_node("Neg", ["x"], ["nx"]),
                                                 helper.make_node("Mul", ["y", "y"], ["yy"])]
    m = make_model(nodes, [vinfo("x", F32, ["b", "c", "t"])], [vinfo("yy", F32, None), vinfo("nx", F32, None)],
                   _RANK_CONSTS)
    graph, _, _ = lower_model(m)
    assert [n.source for n in graph.nodes].count("Neg") == 1
    rng = np.random.default_rng(0)
    check_model(m, target, [{"x": rng.standard_normal(s, dtype=F32)} for s in ((2, 1, 5), (2, 3, 5), (1, 1, 7))],
                ref=ort_reference)


def test_rank_polymorphic_ifs_in_a_row_stop_at_the_bound():
    """Each specialization copies what follows into both branches, so k such Ifs in a row on
    independent conditions take 2**k - 1 of them; past MAX_SPECIALIZATIONS in one model the
    compiler stops, naming the If."""
    from toolkit.frontend.onnx.importer import MAX_SPECIALIZATIONS

    def model(k):
        nodes, prev = [], "x"
        for i in range(k):
            nodes += _squeeze_if(prev, f"c{i}", f"y{i}", i)
            nodes.append(helper.make_node("Unsqueeze", [f"y{i}", "axes1"], [f"x{i + 1}"]))
            prev = f"x{i + 1}"
        return make_model(nodes, [vinfo("x", F32, ["b", 1, "t"])] + [vinfo(f"c{i}", BOOL, []) for i in range(k)],
                          [vinfo(prev, F32, None)], _RANK_CONSTS)

    assert 2 ** 3 - 1 <= MAX_SPECIALIZATIONS < 2 ** 4 - 1
    lower_model(model(3))
    with pytest.raises(CompileError, match=rf"node 'squeeze_if\d' \(If\): output 0 \('r\d@(then|else)'\) has rank 2 "
                                           rf"in the then branch .*the code after {MAX_SPECIALIZATIONS} such Ifs was "
                                           rf"already specialized"):
        lower_model(model(4))


def test_a_branch_that_cannot_run_fails_only_when_taken(target):
    """silero-vad's decoder, as torch exports it: after ``if x.shape[2] == 1: x = x.squeeze(2)``
    the LSTM gets a rank-3 input only on the squeezed side; the other side is ill-typed for
    every input (a rank-4 LSTM input) and never runs for the inputs the model takes. The
    branch compiles to a run-time error naming the node and why, noted for inspect;
    onnxruntime too fails only when it runs it."""
    lstm_w = const("w", np.random.default_rng(0).standard_normal((1, 8, 3), dtype=F32))
    lstm_r = const("r", np.random.default_rng(1).standard_normal((1, 8, 2), dtype=F32))
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "two"], ["d"]),
             helper.make_node("Equal", ["d", "one"], ["unit"])]
    nodes += [_if("unit", ["y"], [helper.make_node("Squeeze", ["x", "axes2"], ["sq"])], ["sq"],
                  [helper.make_node("Identity", ["x"], ["id"])], ["id"], name="squeeze_if_unit"),
              helper.make_node("LSTM", ["y", "w", "r"], ["h"], hidden_size=2, name="rnn")]
    m = make_model(nodes, [vinfo("x", F32, ["t", "b", "k", 3])], [vinfo("h", F32, None)],
                   [const("one", np.array(1)), const("two", np.array(2)), const("axes2", np.array([2])), lstm_w,
                    lstm_r])
    graph, _, _ = lower_model(m)
    assert any("its else branch cannot run, and a run that takes it fails" in n for n in graph.notes)
    rng = np.random.default_rng(2)
    mod = check_model(m, target, [{"x": rng.standard_normal((t, b, 1, 3), dtype=F32)} for t, b in ((4, 1), (2, 3))],
                      ref=ort_reference, rtol=1e-5, atol=1e-6)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'squeeze_if_unit/specialized' \(If\): its else branch "
                                                      r"cannot run: node 'rnn' \(LSTM\): input X .* must have rank 3"):
        mod.run({"x": rng.standard_normal((2, 3, 2, 3), dtype=F32)})


def test_if_condition_must_be_bool():
    m = make_model([_if("c", ["y"], [helper.make_node("Relu", ["x"], ["t"])], ["t"],
                        [helper.make_node("Neg", ["x"], ["e"])], ["e"], name="pick")],
                   [vinfo("c", F32, []), vinfo("x", F32, ["n"])], [vinfo("y", F32, None)])
    with pytest.raises(CompileError, match=r"node 'pick' \(If\): condition 'c' has dtype float32; it must be bool"):
        lower_model(m)


# ----------------------------------------------------------------------------- Loop


def _growing_loop_model():
    """The carried tensor grows by x each iteration; the body stops when its sum passes
    ``lim``; a scan output collects each iteration's sum times the iteration number."""
    body = _graph("body", [
        helper.make_node("Concat", ["acc_in", "x"], ["acc_out"], axis=0),
        helper.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
        helper.make_node("Less", ["s", "lim"], ["c_out"]),
        helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["s", "fi"], ["item"]),
        helper.make_node("Unsqueeze", ["item", "ax0"], ["item2"]),
        helper.make_node("Concat", ["item2", "item2"], ["pair"], axis=0)],
        [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("acc_in", F32, None)],
        [vinfo("c_out", BOOL, []), vinfo("acc_out", F32, None), vinfo("pair", F32, None)])
    return make_model([helper.make_node("Loop", ["M", "c0", "a0"], ["acc", "items"], body=body, name="grow")],
                      [vinfo("M", I64, []), vinfo("c0", BOOL, []), vinfo("a0", F32, ["k", 2]),
                       vinfo("x", F32, ["n", 2]), vinfo("lim", F32, [])],
                      [vinfo("acc", F32, None), vinfo("items", F32, None)], [const("ax0", np.array([0], I64))])


def _loop_feeds(rng, m, c0, k, n, lim):
    return {"M": np.array(m, I64), "c0": np.array(c0), "a0": rng.random((k, 2), dtype=F32),
            "x": rng.random((n, 2), dtype=F32), "lim": np.array(lim, F32)}


def test_loop_carried_tensor_grows_each_iteration(target):
    rng = np.random.default_rng(3)
    mod = check_model(_growing_loop_model(), target, [
        _loop_feeds(rng, 3, True, 1, 2, 100),  # stops at M
        _loop_feeds(rng, 50, True, 2, 1, 5),  # stops at the body's condition
        _loop_feeds(rng, 4, True, 0, 3, 1e9),  # starts empty
        _loop_feeds(rng, 7, True, 5, 0, 1e9)])  # grows by nothing
    assert [o.shape for o in mod.outputs] == [("acc_dim0_0", 2), ("items_count_0", 2)]


def test_loop_of_zero_iterations(target):
    """M = 0, or the condition false from the start: the carried value is the initial one
    and the scan output is empty with the item's shape, (0, 2), as the spec says (neither
    reference can say it: onnx.reference fails to stack nothing, onnxruntime guesses (0,))."""
    rng = np.random.default_rng(4)
    mod = build(_growing_loop_model(), target)
    for feeds in (_loop_feeds(rng, 0, True, 2, 1, 100), _loop_feeds(rng, 5, False, 3, 2, 100)):
        out = mod.run(feeds)
        np.testing.assert_array_equal(out["acc"], feeds["a0"])
        assert out["items"].shape == (0, 2) and out["items"].dtype == F32


def test_loop_program_moves_the_carried_value():
    ops, prog = _opcodes(_growing_loop_model())
    text = prog.dump()
    assert "loop:" in text and "body:" in text and "endloop:" in text
    assert ops.count("COPY") == 1  # the initial value, once; each iteration's result moves
    assert "APPEND" in ops


def test_loop_scalar_scan_items(target):
    """Scalar items stack into a 1-D output. onnx.reference stacks them as (n, 1), against
    the spec; onnxruntime gives (n,)."""
    body = _graph("body", [helper.make_node("Add", ["v_in", "x"], ["v_out"]),
                           helper.make_node("ReduceSum", ["v_out"], ["item"], keepdims=0),
                           helper.make_node("Identity", ["c_in"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", F32, None), vinfo("item", F32, None)])
    m = make_model([helper.make_node("Loop", ["M", "", "v0"], ["v", "sums"], body=body)],
                   [vinfo("M", I64, []), vinfo("v0", F32, ["n"]), vinfo("x", F32, ["n"])],
                   [vinfo("v", F32, None), vinfo("sums", F32, None)])
    rng = np.random.default_rng(5)
    check_model(m, target, [{"M": np.array(t, I64), "v0": rng.random(n, dtype=F32), "x": rng.random(n, dtype=F32)}
                            for t, n in ((3, 4), (1, 1), (6, 0))], ref=ort_reference)


def test_loop_with_a_constant_trip_count_has_a_static_scan_length(target):
    """M = 4 and no condition: exactly 4 iterations, so the scan output's first dim is 4,
    not a fresh symbol; the body reads an outer value and the iteration number.
    onnx.reference runs no iteration of a Loop without a condition input and then fails to
    stack the rows; onnxruntime is the reference."""
    body = _graph("body", [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
                           helper.make_node("Mul", ["x", "fi"], ["row"]),
                           helper.make_node("Add", ["v_in", "row"], ["v_out"]),
                           helper.make_node("Identity", ["c_in"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", F32, None), vinfo("row", F32, None)])
    m = make_model([helper.make_node("Loop", ["M", "", "v0"], ["v", "rows"], body=body)],
                   [vinfo("v0", F32, ["n"]), vinfo("x", F32, ["n"])],
                   [vinfo("v", F32, None), vinfo("rows", F32, None)], [const("M", np.array(4, I64))])
    rng = np.random.default_rng(6)
    mod = check_model(m, target, [{"v0": rng.random(n, dtype=F32), "x": rng.random(n, dtype=F32)} for n in (3, 1, 7)],
                      ref=ort_reference)
    assert [o.shape for o in mod.outputs] == [("n",), (4, "n")]


def test_loop_with_only_a_condition(target):
    """No M: the loop runs while the body's condition holds (halving until below 1)."""
    body = _graph("body", [helper.make_node("Div", ["v_in", "two"], ["v_out"]),
                           helper.make_node("ReduceMax", ["v_out"], ["mx"], keepdims=0),
                           helper.make_node("Greater", ["mx", "one"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", F32, None)])
    m = make_model([helper.make_node("Loop", ["", "c0", "v0"], ["v"], body=body)],
                   [vinfo("c0", BOOL, []), vinfo("v0", F32, ["n"])], [vinfo("v", F32, None)],
                   [const("two", np.array(2, F32)), const("one", np.array(1, F32))])
    check_model(m, target, [{"c0": np.array(True), "v0": np.array(v, F32)}
                            for v in ([100.0, 3.0], [0.5], [7.0, 9.0, 1000.0])])


def test_nested_if_in_loop_in_if(target):
    """An If inside a Loop inside an If, each reading values of the scopes around it.
    onnx.reference skips the Loop here (it returns x unchanged); onnxruntime runs it."""
    inner_if = _if("odd", ["step"], [helper.make_node("Mul", ["x", "three"], ["s1"])], ["s1"],
                   [helper.make_node("Neg", ["x"], ["s2"])], ["s2"], name="inner")
    body = _graph("body", [helper.make_node("Div", ["i", "two_i"], ["h"]),
                           helper.make_node("Mul", ["h", "two_i"], ["h2"]),
                           helper.make_node("Equal", ["h2", "i"], ["odd"]),
                           inner_if,
                           helper.make_node("Add", ["v_in", "step"], ["v_out"]),
                           helper.make_node("Identity", ["c_in"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", F32, None)])
    loop = helper.make_node("Loop", ["M", "", "x"], ["lv"], body=body, name="loop")
    m = make_model([_if("c", ["y"], [loop], ["lv"], [helper.make_node("Sigmoid", ["x"], ["e"])], ["e"], name="outer")],
                   [vinfo("c", BOOL, []), vinfo("M", I64, []), vinfo("x", F32, ["n"])], [vinfo("y", F32, None)],
                   [const("three", np.array(3, F32)), const("two_i", np.array(2, I64))])
    rng = np.random.default_rng(7)
    check_model(m, target, [{"c": np.array(c), "M": np.array(t, I64), "x": rng.standard_normal(n, F32)}
                            for c, t, n in ((True, 5, 3), (False, 2, 4), (True, 0, 2), (True, 3, 0))],
                ref=ort_reference)


def test_loop_is_bounded_by_the_memory_limit(target):
    """A loop whose carried value doubles each iteration forever stops at the memory limit
    with an error naming the node; the module runs again afterwards."""
    body = _graph("body", [helper.make_node("Concat", ["v_in", "v_in"], ["v_out"], axis=0),
                           helper.make_node("Identity", ["c_in"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", F32, None)])
    m = make_model([helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body, name="double")],
                   [vinfo("M", I64, []), vinfo("v0", F32, ["n"])], [vinfo("v", F32, None)])
    mod = build(m, target)
    mod.set_memory_limit(32 << 20)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'Concat_0' \(Concat\): cannot allocate "
                                                      r"\d+ bytes for 'v_out' float32\(2\*v_in_iter0_0,\)") as e:
        mod.run({"M": np.array(1 << 40, I64), "v0": np.ones(4, F32)})
    assert e.value.status == STATUS["OUT_OF_MEMORY"]
    np.testing.assert_array_equal(mod.run({"M": np.array(2, I64), "v0": np.ones(1, F32)})["v"], np.ones(4, F32))


def test_an_endless_loop_is_stopped_by_its_timeout(target):
    body = _graph("body", [helper.make_node("Add", ["v_in", "one"], ["v_out"]),
                           helper.make_node("Identity", ["c_in"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", F32, None)])
    m = make_model([helper.make_node("Loop", ["", "c0", "v0"], ["v"], body=body)],
                   [vinfo("c0", BOOL, []), vinfo("v0", F32, ["n"])], [vinfo("v", F32, None)],
                   [const("one", np.array(1, F32))])
    mod = build(m, target)
    with pytest.raises(wasm_runtime.ModelError, match="timed out") as e:
        mod.run({"c0": np.array(True), "v0": np.zeros(3, F32)}, timeout=0.2)
    assert e.value.status == STATUS["CANCELLED"]
    np.testing.assert_array_equal(mod.run({"c0": np.array(False), "v0": np.zeros(3, F32)})["v"], np.zeros(3, F32))


def test_scan_items_that_change_shape_are_refused_at_run_time(target):
    """Items are stacked, so each iteration must yield the same shape; the error names the
    node, the scan output and the dim."""
    body = _graph("body", [helper.make_node("Concat", ["v_in", "v_in"], ["v_out"], axis=0),
                           helper.make_node("Identity", ["c_in"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", F32, None), vinfo("v_out", F32, None)])
    body.output.pop()
    body.output.extend([vinfo("v_out", F32, None)])
    m = make_model([helper.make_node("Loop", ["M", "", "v0"], ["v", "all"], body=body, name="grow")],
                   [vinfo("M", I64, []), vinfo("v0", F32, ["n"])], [vinfo("v", F32, None), vinfo("all", F32, None)])
    mod = build(m, target)
    one = mod.run({"M": np.array(1, I64), "v0": np.ones(2, F32)})
    assert one["all"].shape == (1, 4)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'grow' \(Loop\): scan output 'all': dim 0 is 8 in "
                                                      r"this iteration, 4 in the first"):
        mod.run({"M": np.array(2, I64), "v0": np.ones(2, F32)})


def test_loop_carried_dtype_must_not_change():
    body = _graph("body", [helper.make_node("Cast", ["v_in"], ["v_out"], to=TensorProto.INT64),
                           helper.make_node("Identity", ["c_in"], ["c_out"])],
                  [vinfo("i", I64, []), vinfo("c_in", BOOL, []), vinfo("v_in", F32, None)],
                  [vinfo("c_out", BOOL, []), vinfo("v_out", I64, None)])
    m = make_model([helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body, name="cast")],
                   [vinfo("M", I64, []), vinfo("v0", F32, ["n"])], [vinfo("v", F32, None)])
    with pytest.raises(CompileError, match=r"node 'cast' \(Loop\): loop-carried value 0 \('v_in'\) starts as "
                                           r"float32\(n,\) and the body yields 'v_out' int64\(n,\); its dtype and rank must "
                                           r"stay the same"):
        lower_model(m)


def _paddle_while(rank_of_start):
    """paddle2onnx's while loop: a counter that starts as a scalar and adds a [1] each step (or
    starts as [1] and is summed to a scalar), while it is below n; the loop also doubles a
    tensor x each step."""
    count = ([helper.make_node("Add", ["i_in", "one"], ["i_out"])] if rank_of_start == 0 else
             [helper.make_node("Add", ["i_in", "one"], ["i_next"]),
              helper.make_node("ReduceSum", ["i_next"], ["i_out"], keepdims=0)])
    body = _graph("body", count + [helper.make_node("Less", ["i_out", "n"], ["less"]),
                                   helper.make_node("Identity", ["less"], ["c_out"]),
                                   helper.make_node("Add", ["x_in", "x_in"], ["x_out"])],
                  [vinfo("it", I64, []), vinfo("c_in", BOOL, None), vinfo("i_in", I64, None), vinfo("x_in", F32, None)],
                  [vinfo("c_out", BOOL, None), vinfo("i_out", I64, None), vinfo("x_out", F32, None)])
    body.initializer.append(const("one", np.ones([1], np.int64)))
    return make_model([helper.make_node("Cast", ["start"], ["i0"], to=TensorProto.INT64),
                       helper.make_node("Less", ["i0", "n"], ["go"]),
                       helper.make_node("Loop", ["", "go", "i0", "x"], ["i", "y"], body=body, name="while")],
                      [vinfo("start", I64, [1] * rank_of_start), vinfo("n", I64, []), vinfo("x", F32, ["k"])],
                      [vinfo("i", I64, None), vinfo("y", F32, None)])


@pytest.mark.parametrize("rank_of_start", [0, 1])
def test_a_loop_carried_value_of_one_element_may_change_rank(target, rank_of_start):
    """The counter is carried at the rank the body gives it: onnxruntime's outputs at every
    trip count but zero, where onnxruntime would return the initial rank, and the run fails
    naming the Loop instead of returning another rank."""
    m = _paddle_while(rank_of_start)
    mod = build(m, target)
    rng = np.random.default_rng(7)
    start = np.zeros([1] * rank_of_start, I64)
    for n, k in ((1, 3), (4, 1), (9, 6)):
        feeds = {"start": start, "n": np.array(n, I64), "x": rng.standard_normal(k).astype(F32)}
        got, want = mod.run(feeds), ort_reference(m, feeds)
        assert got["i"].shape == want["i"].shape == ((1,) if rank_of_start == 0 else ())
        util.assert_outputs_match(got, want)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'while' \(Loop\): loop-carried value 0 \('i_in'\) starts "
                                                      r"with another rank than the body gives it; .* zero times .*: "
                                                      r"the number of iterations: .* = 0 is less than 1"):
        mod.run({"start": start + 5, "n": np.array(2, I64), "x": np.ones(2, F32)})


# ----------------------------------------------------------------------------- Scan


def _scan_model(in_dir=0, out_dir=0, out_axis=0, in_axis=0):
    """A running sum over the scanned axis: the state adds each slice; the output stacks
    the state after each step (and a second output the slice doubled)."""
    body = _graph("body", [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                           helper.make_node("Identity", ["s_out"], ["y_t"]),
                           helper.make_node("Add", ["x_t", "x_t"], ["d"])],
                  [vinfo("s_in", F32, None), vinfo("x_t", F32, None)],
                  [vinfo("s_out", F32, None), vinfo("y_t", F32, None), vinfo("d", F32, None)])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys", "ds"], body=body, num_scan_inputs=1,
                            scan_input_directions=[in_dir], scan_output_directions=[out_dir, 0],
                            scan_output_axes=[out_axis, 0], scan_input_axes=[in_axis])
    x_shape = ["t", "n"] if in_axis == 0 else ["n", "t"]
    return make_model([node], [vinfo("s0", F32, ["n"]), vinfo("x", F32, x_shape)],
                      [vinfo("s", F32, None), vinfo("ys", F32, None), vinfo("ds", F32, None)])


@pytest.mark.parametrize("in_dir,out_dir,out_axis,in_axis",
                         [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (1, 1, 1, 1)])
def test_scan(target, in_dir, out_dir, out_axis, in_axis):
    """onnx.reference implements only forward scans along axis 0: onnxruntime is the
    reference for the rest."""
    rng = np.random.default_rng(8)
    feeds = []
    for t, n in ((4, 3), (1, 2), (6, 1)):
        x = rng.standard_normal((t, n) if in_axis == 0 else (n, t), F32)
        feeds.append({"s0": rng.standard_normal(n, F32), "x": x})
    ref = util.reference if (in_dir, out_dir, out_axis, in_axis) == (0, 0, 0, 0) else ort_reference
    check_model(_scan_model(in_dir, out_dir, out_axis, in_axis), target, feeds, ref=ref)


def test_scan_of_an_empty_sequence(target):
    """Zero steps: the state is the initial one and the outputs are empty, (0, n). Both
    references fail on it (onnx.reference cannot stack nothing; onnxruntime refuses to slice
    an empty input), so the expectation is the spec's, computed here."""
    mod = build(_scan_model(), target)
    for n in (3, 1):
        s0 = np.arange(n, dtype=F32)
        out = mod.run({"s0": s0, "x": np.zeros((0, n), F32)})
        np.testing.assert_array_equal(out["s"], s0)
        assert out["ys"].shape == (0, n) and out["ds"].shape == (0, n)


# ----------------------------------------------------------------------------- inspect


def test_inspect_prints_the_program_with_its_blocks(tmp_path):
    from toolkit.compiler import compile_model

    path = tmp_path / "loop.wasm"
    compile_model(_growing_loop_model(), path)
    out = subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", str(path)], capture_output=True,
                         text=True, check=True).stdout
    for label in ("loop:", "body:", "endloop:"):
        assert label in out
    assert "APPEND" in out and "MOVE" in out
    meta = json.loads(subprocess.run([sys.executable, "-m", "toolkit.cli", "inspect", "--json", str(path)],
                                     capture_output=True, text=True, check=True).stdout)
    assert meta["outputs"][0]["shape"] == ["acc_dim0_0", 2]


assert _TMP  # (the compiled modules go where util puts them)
