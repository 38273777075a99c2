"""A model's own functions (``model.functions``, as onnxscript and torch's dynamo exporter write
them, in a domain of their own): a node that names one imports as its body, with the node's
attributes bound (the function's defaults for the others), at the opsets the function itself
imports, calls between the model's functions expanded in turn and recursion refused by name.
Checked on both targets at several bindings from one module against numpy: onnxruntime inlines
a function at the model's opset, not the function's, and onnx.reference ignores a function's
attribute defaults."""
import numpy as np
import pytest
from onnx import helper, parser

from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError
from util import check_model, make_model, rand, vinfo

# scaled_sum reads its axes from the caller or its default ([1]), a scale from the
# caller; at opset 12 ReduceSum takes axes as an attribute (an input from opset 13 on): the
# model itself imports opset 18, so the function's own import must be the one honoured
FUNCTIONS = [parser.parse_function(text) for text in '''
<domain: "this", opset_import: ["" : 12]>
scaled_sum <axes: ints = [1], scale> (x) => (y) {
   s = ReduceSum <axes: ints = @axes, keepdims: int = 1> (x)
   c = Constant <value_float: float = @scale> ()
   y = Mul (s, c)
}

<domain: "this", opset_import: ["" : 18, "this" : 1]>
centred <scale> (x) => (y, total) {
   total = this.scaled_sum <scale: float = @scale> (x)
   y = Sub (x, total)
}
'''.split("\n\n")]


def _model(nodes, functions=FUNCTIONS):
    m = make_model(nodes, [vinfo("x", np.float32, ["n", "k"])],
                   [vinfo(o, np.float32, None) for o in nodes[-1].output], opset=18)
    m.opset_import.append(helper.make_opsetid("this", 1))
    m.functions.extend(functions)
    return m


def test_nested_local_functions_with_attributes(target):
    m = _model([helper.make_node("centred", ["x"], ["c", "t"], domain="this", name="a", scale=0.5),
                helper.make_node("scaled_sum", ["c"], ["r"], domain="this", axes=[0], scale=2.0),
                helper.make_node("Add", ["r", "t"], ["y"])])
    m.graph.output.insert(0, vinfo("c", np.float32, None))
    rng = np.random.default_rng(0)
    check_model(m, target, [{"x": rand(rng, (n, k))} for n, k in [(1, 3), (4, 2), (3, 7)]],
                rtol=1e-5, atol=1e-5, ref=_numpy)


def _numpy(_, feeds):
    x = feeds["x"]
    total = 0.5 * x.sum(axis=1, keepdims=True)  # centred: scaled_sum's default axes, the caller's scale
    c = x - total
    return {"c": c, "y": 2.0 * c.sum(axis=0, keepdims=True) + total}


RECURSIVE = [parser.parse_function(text) for text in '''
<domain: "this", opset_import: ["" : 18, "this" : 1]>
f (x) => (y) { y = this.g (x) }

<domain: "this", opset_import: ["" : 18, "this" : 1]>
g (x) => (y) { t = Neg (x)  y = this.f (t) }
'''.split("\n\n")]


def test_recursion_refused(tmp_path):
    m = _model([helper.make_node("f", ["x"], ["y"], domain="this", name="top")], RECURSIVE)
    with pytest.raises(CompileError, match=r"^node 'top' \(f\), expanded from the model's function 'this.f': "
                                           r"node 'top/g_0' \(g\), expanded from the model's function 'this.g': "
                                           r"node 'top/g_0/f_1' \(f\): the model's function 'this.f' calls itself "
                                           r"\(this.f -> this.g -> this.f\); ONNX functions cannot recurse$"):
        compile_model(m, tmp_path / "m.wasm")


def test_unknown_attribute_refused(tmp_path):
    m = _model([helper.make_node("scaled_sum", ["x"], ["y"], domain="this", name="s", scale=1.0, axis=0)])
    with pytest.raises(CompileError, match=r"^node 's' \(scaled_sum\): 'axis' is not an attribute of the model's "
                                           r"function 'this.scaled_sum' \(it has: axes, scale\)$"):
        compile_model(m, tmp_path / "m.wasm")


def test_local_function_called_inside_a_branch(target):
    """A call in an If branch is expanded there, at the branch's place in the model."""
    then = helper.make_graph([helper.make_node("scaled_sum", ["x"], ["t"], domain="this", scale=3.0)], "then", [],
                             [vinfo("t", np.float32, None)])
    other = helper.make_graph([helper.make_node("ReduceMax", ["x"], ["e"], keepdims=1, axes=[1])], "else", [],
                              [vinfo("e", np.float32, None)])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)])
    m.opset_import[0].version = 17  # ReduceMax takes its axes as an attribute until 18
    m.graph.input.append(vinfo("c", np.bool_, []))
    rng = np.random.default_rng(1)
    feeds = [{"x": rand(rng, (n, k)), "c": np.array(c)} for n, k, c in [(2, 3, True), (4, 1, False), (1, 5, True)]]
    check_model(m, target, feeds, rtol=1e-5, atol=1e-5,
                ref=lambda _, f: {"y": 3.0 * f["x"].sum(axis=1, keepdims=True) if f["c"]
                                  else f["x"].max(axis=1, keepdims=True)})
