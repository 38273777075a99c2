"""compile --check-facts (issue 34): the module checks at run time every fact the compiler
relied on about a value or a dim, and fails naming the node and the fact. Each test breaks
one derivation of the compiler on purpose (a shape function, Reshape's resolution) or builds
a model whose facts hold, and checks both: the failure names the node, the clean run agrees
with onnx.reference on both targets at two bindings."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from toolkit.ir import dims as D
from toolkit.ops import elementwise
from util import build, check_model, const, make_model, reference, vinfo


def _trim_one():
    """y := zeros of shape (Shape(x)[1] - 1,): the compiler derives the Sub's value as m - 1."""
    return make_model([helper.make_node("Shape", ["x"], ["s"]),
                       helper.make_node("Slice", ["s", "one", "two"], ["s1"]),
                       helper.make_node("Sub", ["s1", "one"], ["d"], name="minus_one"),
                       helper.make_node("ConstantOfShape", ["d"], ["y"])],
                      [vinfo("x", np.float32, ["n", "m"])], [vinfo("y", np.float32, None)],
                      [const("one", np.array([1])), const("two", np.array([2]))])


def _feeds(*shapes):
    rng = np.random.default_rng(0)
    return [{"x": rng.standard_normal(s, dtype=np.float32)} for s in shapes]


def test_a_model_whose_facts_hold_runs_as_before(target):
    mod = check_model(_trim_one(), target, _feeds((2, 5), (3, 9)), check_facts=True)
    assert mod.metadata["model"]["check_facts"] is True


def test_a_wrong_shape_value_is_named(target, monkeypatch):
    """Sub's shape value derived as a - b + 1: without the check the output is silently one
    element too long; with it, the Sub computed at run time disagrees and names itself."""
    wrong = dataclasses.replace(elementwise.SCALAR["sub"], sym=lambda a, b: D.add(D.add(a, D.mul(b, -1)), 1))
    monkeypatch.setitem(elementwise.SCALAR, "sub", wrong)
    monkeypatch.delenv("SYMWASM_CHECK_FACTS", raising=False)  # (make check-facts sets it for every compile)
    m = _trim_one()
    feeds = _feeds((2, 5))[0]
    assert build(m, target).run(feeds)["y"].shape == (5,)  # the silent wrong answer the check exists for
    mod = build(m, target, check_facts=True)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'minus_one' \(Sub\): fact check failed: 'd'\[0\] is 4 "
                                                      r"at run time; the compiler derived m = 5"):
        mod.run(feeds)


def test_a_wrong_reshape_resolution_is_named(target, monkeypatch):
    """Reshape's 0 (copy the input's dim) resolved at compile time to the wrong dim: the
    builtin's resolution of the target computed at run time disagrees."""
    from toolkit.ops import shape

    real = shape.Reshape._resolve

    def off_by_one(self, ctx, x, target):
        out = real(self, ctx, x, target)
        return [out[1], out[0]] + list(out[2:])

    monkeypatch.setattr(shape.Reshape, "_resolve", off_by_one)
    m = make_model([helper.make_node("Reshape", ["x", "t"], ["y"], name="flat")],
                   [vinfo("x", np.float32, ["n", 6])], [vinfo("y", np.float32, None)],
                   [const("t", np.array([0, -1]))])
    mod = build(m, target, check_facts=True)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'flat' \(Reshape\): fact check failed: reshape of 'x' "
                                                      r"float32\(n, 6\) to 't': dim 0 is 2 at run time; the compiler "
                                                      r"resolved 6 = 6"):
        mod.run(_feeds((2, 6))[0])


def test_a_branch_decided_at_compile_time_is_checked(target, monkeypatch):
    """An If on 'dim 1 == 1' decided from the derived shape value: with Equal's derivation
    broken (always true), the run-time condition names the If's fact."""
    branch = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [vinfo("t", np.float32, None)])
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [vinfo("e", np.float32, None)])
    m = make_model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["d"]),
                    helper.make_node("Equal", ["d", "four"], ["c"], name="is_four"),
                    helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other, name="pick")],
                   [vinfo("x", np.float32, ["n", 4])], [vinfo("y", np.float32, None)],
                   [const("one", np.array(1)), const("four", np.array(4))])
    check_model(m, target, _feeds((2, 4), (5, 4)), check_facts=True)
    wrong = dataclasses.replace(elementwise.SCALAR["equal"], sym=lambda a, b: 0)
    monkeypatch.setitem(elementwise.SCALAR, "equal", wrong)
    mod = build(m, target, check_facts=True)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'is_four' \(Equal\): fact check failed: 'c'\[0\] is 1 "
                                                      r"at run time; the compiler derived 0 = 0"):
        mod.run(_feeds((2, 4))[0])


def test_a_bound_proved_from_ranges_becomes_a_check():
    """require_le of a fact the compiler proves from a symbol's range records a run-time check
    under --check-facts only, worded as the fact."""
    from toolkit.ir.graph import Graph, Node
    from toolkit.ops.base import Checks, InferContext

    for check_facts in (False, True):
        g = Graph("g", 17, D.SymbolScope(), check_facts=check_facts)
        n = g.scope.get("n", lo=2, hi=8)
        ctx = InferContext(g, Node(Checks(), "s", "Slice", [], []))
        ctx.require_le(1, n, "the start")
        ctx.require_le(n, n, "the same dim")  # the same expression: nothing to check
        assert [c.message for c in ctx.checks] == (
            ["node 's' (Slice): the start: fact check failed: the compiler proved 1 <= n, but 1 = {0} and n = {1}"]
            if check_facts else [])


def test_a_bound_proved_from_ranges_runs(target):
    """--range n=2:8 lets the compiler prove facts about n; under --check-facts they are
    checked and hold: the runs agree with onnx.reference."""
    m = make_model([helper.make_node("Reshape", ["x", "t"], ["y"])],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)], [const("t", np.array([-1]))])
    mod = build(m, target, check_facts=True, ranges={"n": (2, 8)})
    for n in (2, 7):
        feeds = {"x": np.arange(3 * n, dtype=np.float32).reshape(n, 3)}
        np.testing.assert_array_equal(mod.run(feeds)["y"], reference(m, feeds)["y"])
