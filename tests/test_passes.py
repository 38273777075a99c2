"""Passes as before/expected IR text; compile-only (no runtime needed)."""
import numpy as np
from onnx import helper

from toolkit.codegen.target import get_target
from toolkit.frontend.onnx.importer import import_model
from toolkit.passes import run_pipeline
from toolkit.passes.dce import dead_code
from toolkit.passes.simplify import simplify
from util import const, make_model, vinfo

WASM = get_target("wasm32")


def _graph():
    m = make_model([helper.make_node("Relu", ["x"], ["unused"], name="dead"),
                    helper.make_node("Neg", ["x"], ["y"], name="live")],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)])
    return import_model(m)


def test_dead_code():
    g = _graph()
    assert "relu(x)  # dead" in g.dump()
    assert dead_code(g).dump() == "\n".join([
        "graph test (opset 17)",
        "  input  x: float32(n, 3)",
        "  y: float32(n, 3) = neg(x)  # live",
        "  output y: float32(n, 3)",
    ])


def test_pipeline_with_verifier(monkeypatch):
    monkeypatch.setenv("SYMWASM_DEBUG", "verify")
    assert "relu" not in run_pipeline(_graph(), WASM).dump()


def test_symbolic_shape_values_fold_away():
    """Shape arithmetic on shape values leaves no nodes with unknown contents."""
    m = make_model([helper.make_node("Shape", ["x"], ["s"]),
                    helper.make_node("Mul", ["s", "two"], ["s2"]),
                    helper.make_node("ConstantOfShape", ["s2"], ["y"])],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)],
                   [const("two", np.array([2], np.int64))])
    g = import_model(m)
    assert g.values["s2"].sym is not None and str(g.values["s2"].sym) == "(2*n, 6)"
    assert str(g.values["y"].shape) == "(2*n, 6)"
    # the shape arithmetic is known at compile time, so only the fill runs
    assert [str(n.op) for n in dead_code(g).nodes] == ["Fill(value=0.0, dtype=float32)"]


def test_declared_output_names_data_dependent_dims():
    """idx: [count, 2] in the model names NonZero's count 'count' instead of 'nonzero_0'."""
    m = make_model([helper.make_node("NonZero", ["x"], ["nz"]),
                    helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0])],
                   [vinfo("x", np.float32, ["n", 4])], [vinfo("idx", np.int64, ["count", 2])])
    g = import_model(m)
    assert str(g.values["idx"].shape) == "(count, 2)"
    assert str(g.values["nz"].shape) == "(2, count)"
    assert g.scope.symbols["count"].kind == "data" and "nonzero_0" not in g.scope.symbols


def _simplified(nodes, inputs, inits=()):
    m = make_model(nodes, inputs, [vinfo("y", np.float32, None)], inits)
    return simplify(import_model(m)).dump().splitlines()[2:-1]


def test_simplify_transpose_of_unit_dims_is_a_view():
    lines = _simplified([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0, 2], name="t")],
                        [vinfo("x", np.float32, [1, "n", 4])])
    assert lines == ["  y: float32(n, 1, 4) = ViewAs(shape=(n, 1, 4))(x)  # t"]


def test_simplify_transpose_that_moves_data_stays():
    lines = _simplified([helper.make_node("Transpose", ["x"], ["y"], perm=[2, 1, 0], name="t")],
                        [vinfo("x", np.float32, [1, "n", 4])])
    assert lines == ["  y: float32(4, n, 1) = Transpose(perm=(2, 1, 0))(x)  # t"]


def test_simplify_full_slice_is_identity():
    lines = _simplified([helper.make_node("Slice", ["x", "s", "e"], ["y"], name="s")],
                        [vinfo("x", np.float32, ["n", 4])],
                        [const("s", np.array([0], np.int64)), const("e", np.array([2 ** 62], np.int64))])
    assert lines == ["  y: float32(n, 4) = Identity(x)  # s"]


def test_simplify_gemm_transposes_constant_weights_once():
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    g = import_model(make_model([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1, name="g")],
                                [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)],
                                [const("w", w)]))
    simplify(g)
    assert g.dump().splitlines()[2] == "  y: float32(n, 4) = Gemm(x, w^T)  # g"
    np.testing.assert_array_equal(g.values["w^T"].const, w.T)


def test_simplify_reduce_over_no_axes_is_identity():
    lines = _simplified([helper.make_node("ReduceSum", ["x", "axes"], ["y"], noop_with_empty_axes=1, name="r")],
                        [vinfo("x", np.float32, ["n", 4])], [const("axes", np.zeros(0, np.int64))])
    assert lines == ["  y: float32(n, 4) = Identity(x)  # r"]


def test_a_node_whose_shape_is_read_keeps_its_checks():
    """y = Reshape(x: [n], [1]) read only through Shape(y) need not run, but n != 1 must still
    fail, naming the Reshape: dead-code elimination leaves its checks behind."""
    from toolkit.ops.base import Checks

    m = make_model([helper.make_node("Reshape", ["x", "t"], ["y"], name="r"), helper.make_node("Shape", ["y"], ["s"])],
                   [vinfo("x", np.float32, ["n"])], [vinfo("s", np.int64, None)], [const("t", np.array([1], np.int64))])
    graph = run_pipeline(import_model(m), WASM)
    assert [type(n.op) for n in graph.nodes] == [Checks] and graph.nodes[0].checks
