"""Passes as before/expected IR text; compile-only (no runtime needed)."""
import numpy as np
from onnx import helper

from toolkit.frontend.onnx.importer import import_model
from toolkit.passes import run_pipeline
from toolkit.passes.dce import dead_code
from util import make_model, vinfo


def _graph():
    m = make_model([helper.make_node("Relu", ["x"], ["unused"], name="dead"),
                    helper.make_node("Neg", ["x"], ["y"], name="live")],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)])
    return import_model(m)


def test_dead_code():
    g = _graph()
    assert "Relu" in g.dump()
    assert dead_code(g).dump() == "\n".join([
        "graph test (opset 17)",
        "  input  x: float32(n, 3)",
        "  y: float32(n, 3) = Neg(x)  # live",
        "  output y: float32(n, 3)",
    ])


def test_pipeline_with_verifier(monkeypatch):
    monkeypatch.setenv("SYMWASM_DEBUG", "verify")
    assert "Relu" not in run_pipeline(_graph()).dump()


def test_symbolic_shape_values_fold_away():
    """Shape arithmetic on shape values leaves no nodes with unknown contents."""
    from util import const
    m = make_model([helper.make_node("Shape", ["x"], ["s"]),
                    helper.make_node("Mul", ["s", "two"], ["s2"]),
                    helper.make_node("ConstantOfShape", ["s2"], ["y"])],
                   [vinfo("x", np.float32, ["n", 3])], [vinfo("y", np.float32, None)],
                   [const("two", np.array([2], np.int64))])
    g = import_model(m)
    assert g.values["s2"].sym is not None and str(g.values["s2"].sym) == "(2*n, 6)"
    assert str(g.values["y"].shape) == "(2*n, 6)"


def test_declared_output_names_data_dependent_dims():
    """idx: [count, 2] in the model names NonZero's count 'count' instead of 'nonzero_0'."""
    m = make_model([helper.make_node("NonZero", ["x"], ["nz"]),
                    helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0])],
                   [vinfo("x", np.float32, ["n", 4])], [vinfo("idx", np.int64, ["count", 2])])
    g = import_model(m)
    assert str(g.values["idx"].shape) == "(count, 2)"
    assert str(g.values["nz"].shape) == "(2, count)"
    assert g.scope.symbols["count"].kind == "data" and "nonzero_0" not in g.scope.symbols
