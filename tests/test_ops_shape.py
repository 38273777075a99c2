"""Shape ops (toolkit/frontend/onnx/ops/shape.py): Shape, Size, Reshape, Flatten, Squeeze,
Unsqueeze, Expand, ConstantOfShape — against onnx.reference, each module compiled once and
run with several bindings of its symbolic dims."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from util import _TMP, assert_outputs_match, check_model, const, make_model, rand, reference, vinfo
from toolkit.compiler import CompileResult, compile_model
from toolkit.ir import dims as D
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(7)
I64 = np.int64
F32 = np.float32


def node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], **attrs)


def outs(*names: str, dtype=F32):
    return [vinfo(n, dtype, None) for n in names]


def ints(name: str, *values: int):
    return const(name, np.array(values, I64))


def compile_checked(model, target: str, feeds_list) -> CompileResult:
    """Like util.check_model, but returns the compile result (graph and program)."""
    # a fresh directory: a native library must never reuse the path of a loaded one
    path = Path(tempfile.mkdtemp(dir=_TMP)) / ("m.wasm" if target == "wasm32" else "m.so")
    result = compile_model(model, path, target=target)
    m = wasm_runtime.load(path)
    for feeds in feeds_list:
        assert_outputs_match(m.run(feeds), reference(model, feeds))
    return result


def shape_of(result: CompileResult, name: str) -> str:
    return D.fmt_shape(result.graph.values[name].shape)


def test_shape_and_size(target):
    nodes = [node("Shape", ["x"], ["s"]), node("Size", ["x"], ["z"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 3])], outs("s", "z", dtype=I64), opset=13)
    r = compile_checked(model, target, [{"x": rand(RNG, (2, 4, 3))}, {"x": rand(RNG, (5, 0, 3))}])
    assert r.program.kernels == []


def test_shape_start_end(target):
    ranges = [(1, None), (-2, None), (0, -1), (-10, 10), (2, 1)]
    nodes = [node("Shape", ["x"], [f"s{k}"], start=a, **({} if b is None else {"end": b}))
             for k, (a, b) in enumerate(ranges)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 3])],
                       outs(*(f"s{k}" for k in range(len(ranges))), dtype=I64), opset=15)
    r = compile_checked(model, target, [{"x": rand(RNG, (2, 4, 3))}, {"x": rand(RNG, (1, 7, 3))}])
    assert D.fmt_shape(r.graph.values["s0"].sym) == "(m, 3)"


def test_reshape_constant_targets(target):
    targets = {"a": (0, -1), "b": (-1, 6), "c": (0, 0, 3, 1), "d": (2, -1, 3), "e": (-1,)}
    nodes = [node("Reshape", ["x", f"t{k}"], [k]) for k in targets]
    inits = [ints(f"t{k}", *v) for k, v in targets.items()]
    model = make_model(nodes, [vinfo("x", F32, ["n", 4, 3])], outs(*targets), inits)
    r = compile_checked(model, target, [{"x": rand(RNG, (2, 4, 3))}, {"x": rand(RNG, (5, 4, 3))},
                                        {"x": rand(RNG, (1, 4, 3))}])
    assert [shape_of(r, k) for k in targets] == \
        ["(n, 12)", "(2*n, 6)", "(n, 4, 3, 1)", "(2, 2*n, 3)", "(12*n,)"]
    assert r.program.kernels == []  # all views


def test_reshape_inferred_dim_checked_at_run_time(target):
    model = make_model([node("Reshape", ["x", "t"], ["y"])], [vinfo("x", F32, ["n"])], outs("y"),
                       [ints("t", -1, 4)])
    m = check_model(model, target, [{"x": rand(RNG, (8,))}, {"x": rand(RNG, (12,))}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Reshape\).*6.*not divisible by 4"):
        m.run({"x": rand(RNG, (6,))})


@pytest.mark.plain_program  # (asserts that no kernel runs)
def test_reshape_target_built_from_shape(target):
    """Shape/Slice/Gather/Concat chains stay symbolic: static rank, no kernel."""
    nodes = [
        node("Shape", ["c"], ["s"]),
        node("Slice", ["s", "zero", "one"], ["s0"]),
        node("Gather", ["s", "minus1"], ["s1"]),  # negative constant index
        node("Concat", ["one", "s0", "s1", "one"], ["t"], axis=0),
        node("Reshape", ["c", "t"], ["y"]),
        # (n, 10) -> (n, 2, 5) via Gather of a scalar index, Unsqueeze and a -1
        node("Gather", ["s", "scalar0"], ["n"]),
        node("Unsqueeze", ["n", "zero"], ["n1"]),
        node("Concat", ["n1", "two", "minus1"], ["t2"], axis=0),
        node("Reshape", ["c", "t2"], ["y2"]),
    ]
    inits = [ints("zero", 0), ints("one", 1), ints("two", 2), ints("minus1", -1),
             const("scalar0", np.array(0, I64))]
    model = make_model(nodes, [vinfo("c", F32, ["n", 10])], outs("y", "y2"), inits)
    r = compile_checked(model, target, [{"c": rand(RNG, (3, 10))}, {"c": rand(RNG, (1, 10))}])
    assert shape_of(r, "y") == "(1, (n or 10), 10, 1)"  # a 0 in the target copies c's dim
    assert shape_of(r, "y2") == "(n, 2, 5)"
    assert r.program.kernels == []


def test_reshape_runtime_target(target):
    model = make_model([node("Reshape", ["x", "t"], ["y"])],
                       [vinfo("x", F32, ["n", 6]), vinfo("t", I64, [3])], outs("y"))
    feeds = [{"x": rand(RNG, (2, 6)), "t": np.array([0, -1, 2], I64)},
             {"x": rand(RNG, (4, 6)), "t": np.array([3, 2, -1], I64)},
             {"x": rand(RNG, (1, 6)), "t": np.array([6, 1, 1], I64)}]
    r = compile_checked(model, target, feeds)
    assert r.graph.values["y"].rank == 3
    m = wasm_runtime.load(r.path)
    with pytest.raises(wasm_runtime.ModelError,
                       match=r"node 'y' \(Reshape\): reshape of 'x'.*cannot reshape 12 elements"):
        m.run({"x": rand(RNG, (2, 6)), "t": np.array([5, 5, 5], I64)})
    assert_outputs_match(m.run(feeds[1]), reference(model, feeds[1]))


def test_reshape_allowzero_runtime_target(target):
    model = make_model([node("Reshape", ["x", "t"], ["y"], allowzero=1)],
                       [vinfo("x", F32, ["n", 3]), vinfo("t", I64, [2])], outs("y"))
    feeds = [{"x": rand(RNG, (0, 3)), "t": np.array([3, 0], I64)},
             {"x": rand(RNG, (4, 3)), "t": np.array([-1, 2], I64)},
             {"x": rand(RNG, (2, 3)), "t": np.array([3, 2], I64)}]
    m = check_model(model, target, feeds)
    for bad in ([4, 4], [-1, -1], [-2, -3]):
        with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Reshape\)"):
            m.run({"x": rand(RNG, (4, 3)), "t": np.array(bad, I64)})


def test_flatten(target):
    axes = {"f0": 0, "f1": 1, "f2": 2, "fm1": -1, "f3": 3}
    nodes = [node("Flatten", ["x"], [k], axis=a) for k, a in axes.items()]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 4])], outs(*axes))
    r = compile_checked(model, target, [{"x": rand(RNG, (2, 3, 4))}, {"x": rand(RNG, (5, 1, 4))}])
    assert shape_of(r, "f2") == "(m*n, 4)"


def test_squeeze_unsqueeze(target):
    nodes = [node("Squeeze", ["x", "sq"], ["a"]),
             node("Unsqueeze", ["x", "unsq"], ["b"]),
             node("Unsqueeze", ["a", "zero"], ["c"]),
             node("Squeeze", ["x", "k_axis"], ["d"]),
             node("Squeeze", ["z"], ["e"])]  # no axes: every static 1
    inits = [ints("sq", 1, -1), ints("unsq", 0, -1), ints("zero", 0), ints("k_axis", 2)]
    model = make_model(nodes, [vinfo("x", F32, ["n", 1, "k", 1]), vinfo("z", F32, [1, 3, 1])],
                       outs("a", "b", "c", "d", "e"), inits)
    z = rand(RNG, (1, 3, 1))
    r = compile_checked(model, target, [{"x": rand(RNG, (3, 1, 1, 1)), "z": z},
                                        {"x": rand(RNG, (2, 1, 1, 1)), "z": z}])
    assert [shape_of(r, k) for k in "abcde"] == \
        ["(n, k)", "(1, n, 1, k, 1, 1)", "(1, n, k)", "(n, 1, 1)", "(3,)"]
    m = wasm_runtime.load(r.path)
    # the squeezed symbolic dim k must be 1 at run time
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'd' \(Squeeze\).*squeezed dim 2"):
        m.run({"x": rand(RNG, (3, 1, 2, 1)), "z": z})


def test_squeeze_without_axes_needs_static_dims():
    ambiguous = make_model([node("Squeeze", ["x"], ["y"])], [vinfo("x", F32, ["n", 3])], outs("y"))
    with pytest.raises(CompileError, match=r"node 'y' \(Squeeze\).*dim 0 \(n\).*give the axes"):
        compile_model(ambiguous, _TMP / "squeeze_ambiguous.so", target="native")


def test_unsqueeze_axes_of_symbolic_count_rejected():
    """Run-time axes work (tests/test_runtime_axes.py) when their count, and so the output's
    rank, is known; a symbolic count is refused by name."""
    model = make_model([node("Unsqueeze", ["x", "axes"], ["y"])],
                       [vinfo("x", F32, ["n"]), vinfo("axes", I64, ["k"])], outs("y"))
    with pytest.raises(CompileError, match=r"node 'y' \(Unsqueeze\): .*'axes'"):
        compile_model(model, _TMP / "unsqueeze_axes.so", target="native")


def test_expand_constant_and_built_shapes(target):
    nodes = [node("Expand", ["x", "t"], ["a"]),
             node("Shape", ["y"], ["sy"]),
             node("Expand", ["row", "sy"], ["b"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", 1, 3]), vinfo("y", F32, ["p", "q"]),
                               vinfo("row", I64, [1, "q"])],
                       [vinfo("a", F32, None), vinfo("b", I64, None)], [ints("t", 2, 1, 4, 1)])
    feeds = [{"x": rand(RNG, (2, 1, 3)), "y": rand(RNG, (3, 4)), "row": rand(RNG, (1, 4), I64)},
             {"x": rand(RNG, (1, 1, 3)), "y": rand(RNG, (1, 2)), "row": rand(RNG, (1, 2), I64)}]
    r = compile_checked(model, target, feeds)
    assert shape_of(r, "a") == "(2, n, 4, 3)"
    assert shape_of(r, "b") == "(p, q)"


def test_expand_runtime_shape(target):
    model = make_model([node("Expand", ["x", "t"], ["y"]), node("Expand", ["x", "t1"], ["y1"])],
                       [vinfo("x", F32, ["n", 1]), vinfo("t", I64, [3]), vinfo("t1", I64, [1])],
                       outs("y", "y1"))
    one = np.array([4], I64)
    feeds = [{"x": rand(RNG, (3, 1)), "t": np.array([2, 1, 5], I64), "t1": one},
             {"x": rand(RNG, (1, 1)), "t": np.array([2, 4, 5], I64), "t1": np.array([1], I64)},
             {"x": rand(RNG, (2, 1)), "t": np.array([1, 2, 1], I64), "t1": one}]
    m = check_model(model, target, feeds)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Expand\).*does not broadcast"):
        m.run({"x": rand(RNG, (3, 1)), "t": np.array([1, 2, 1], I64), "t1": one})
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Expand\).*dim 2 is -4"):
        m.run({"x": rand(RNG, (3, 1)), "t": np.array([1, 1, -4], I64), "t1": one})


def test_constant_of_shape(target):
    nodes = [node("Shape", ["x"], ["sx"]),
             node("ConstantOfShape", ["sx"], ["a"]),
             node("ConstantOfShape", ["t"], ["b"], value=helper.make_tensor("v", 7, [1], [7])),
             node("ConstantOfShape", ["c"], ["c_out"], value=helper.make_tensor("v", 6, [1], [-1])),
             node("ConstantOfShape", ["t"], ["d"], value=helper.make_tensor("v", 1, [1], [1.5]))]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("t", I64, [2])],
                       [vinfo("a", F32, None), vinfo("b", I64, None), vinfo("c_out", np.int32, None),
                        vinfo("d", F32, None)], [ints("c", 2, 3)])
    feeds = [{"x": rand(RNG, (2, 3)), "t": np.array([4, 1], I64)},
             {"x": rand(RNG, (0, 5)), "t": np.array([2, 3], I64)}]
    r = compile_checked(model, target, feeds)
    assert shape_of(r, "a") == "(n, m)"
    assert r.graph.values["c_out"].const is not None
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'b' \(ConstantOfShape\).*dim 0 is -1"):
        wasm_runtime.load(r.path).run({"x": rand(RNG, (2, 3)), "t": np.array([-1, 2], I64)})
