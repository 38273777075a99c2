"""Layout ops (toolkit/frontend/onnx/ops/layout.py): Tile, Pad, Split — against
onnx.reference (onnxruntime where the reference is wrong, with the reason), each module
compiled once with symbolic dims and run with several bindings and several run-time
repeats, pads and split sizes; bad run-time values fail with a ModelError naming the node."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import wasm_runtime
from tests.test_ops_shape import compile_checked, shape_of
from util import _TMP, check_model, const, make_model, ort_reference, rand, vinfo
from toolkit.compiler import compile_model
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(23)
F32, I64 = np.float32, np.int64


def node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], **attrs)


def ints(name: str, *values: int):
    return const(name, np.array(values, I64))


def compile_error(model, match: str) -> None:
    with pytest.raises(CompileError, match=match):
        compile_model(model, _TMP / "layout_error.so", target="native")


# ----------------------------------------------------------------------------- Tile


def test_tile_constant_repeats(target):
    nodes = [node("Tile", ["x", "r0"], ["a"]), node("Tile", ["x", "r1"], ["b"]),
             node("Tile", ["i", "r2"], ["c"]), node("Tile", ["x", "ones"], ["same"])]
    inits = [ints("r0", 2, 1, 3), ints("r1", 1, 0, 2), ints("r2", 3, 2), ints("ones", 1, 1, 1)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 2]), vinfo("i", I64, ["k", 3])],
                       [vinfo("a", F32, None), vinfo("b", F32, None), vinfo("c", I64, None), vinfo("same", F32, None)],
                       inits, opset=13)
    feeds = [{"x": rand(RNG, (2, 3, 2)), "i": rand(RNG, (4, 3), I64)},
             {"x": rand(RNG, (1, 1, 2)), "i": rand(RNG, (1, 3), I64)},
             {"x": rand(RNG, (0, 2, 2)), "i": rand(RNG, (0, 3), I64)}]
    r = compile_checked(model, target, feeds)
    assert [shape_of(r, k) for k in "abc"] == ["(2*n, m, 6)", "(n, 0, 4)", "(3*k, 6)"]
    assert shape_of(r, "same") == "(n, m, 2)"
    assert len(r.program.kernels) == 3  # Tile by ones is the input itself


def test_tile_runtime_repeats(target):
    nodes = [node("Tile", ["x", "r"], ["y"]), node("Tile", ["i", "r"], ["z"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", 3, "m"]), vinfo("i", I64, ["n", 3, "m"]), vinfo("r", I64, [3])],
                       [vinfo("y", F32, None), vinfo("z", I64, None)], opset=13)

    def feeds(shape, reps):
        return {"x": rand(RNG, shape), "i": rand(RNG, shape, I64), "r": np.array(reps, I64)}

    r = compile_checked(model, target, [feeds((2, 3, 4), [1, 2, 3]), feeds((3, 3, 1), [2, 1, 5]),
                                        feeds((1, 3, 2), [0, 3, 1]), feeds((2, 3, 0), [4, 4, 4])])
    assert shape_of(r, "y").startswith("(tile_")
    m = wasm_runtime.load(r.path)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Tile\): repeats\[1\] is -2; repeats must not be "
                                                      r"negative"):
        m.run(feeds((2, 3, 4), [1, -2, 1]))


def test_huge_parameters_fail_cleanly(target):
    """Repeats and pads near the int64 limits fail with a message (overflow or memory),
    never a trap or a wrong size."""
    nodes = [node("Tile", ["x", "r"], ["t"]), node("Pad", ["x", "p"], ["p_out"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", 2]), vinfo("r", I64, [2]), vinfo("p", I64, [4])],
                       [vinfo("t", F32, None), vinfo("p_out", F32, None)], opset=13)
    good = {"x": rand(RNG, (2, 2)), "r": np.array([2, 1], I64), "p": np.array([0, 1, 1, 0], I64)}
    m = check_model(model, target, [good])
    big, low = np.iinfo(I64).max, np.iinfo(I64).min
    cases = [({"r": np.array([big, 1], I64)}, r"node 't' \(Tile\): dim 0 of 'x' \(2\) times repeats\[0\] "
                                              r"\(9223372036854775807\) overflows"),
             ({"r": np.array([1 << 40, 1], I64)}, r"node 't' \(Tile\): cannot allocate"),
             ({"p": np.array([low, 0, 0, 0], I64)}, r"node 'p_out' \(Pad\): pads\[0\] or pads\[2\] overflow"),
             ({"p": np.array([1 << 60, 0, 0, 0], I64)}, r"node 'p_out' \(Pad\): cannot allocate")]
    for change, match in cases:
        with pytest.raises(wasm_runtime.ModelError, match=match):
            m.run({**good, **change})


def test_tile_repeats_of_symbolic_length(target):
    """A repeats input of symbolic length is checked against the rank at run time."""
    model = make_model([node("Tile", ["x", "r"], ["y"])], [vinfo("x", I64, ["n", 2]), vinfo("r", I64, ["k"])],
                       [vinfo("y", I64, None)], opset=7)  # Tile-6
    m = check_model(model, target, [{"x": rand(RNG, (3, 2), I64), "r": np.array([2, 2], I64)},
                                    {"x": rand(RNG, (1, 2), I64), "r": np.array([1, 3], I64)}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Tile\): view of 'r' as \(2,\)"):
        m.run({"x": rand(RNG, (1, 2), I64), "r": np.array([1, 3, 1], I64)})


def test_tile_of_a_shape_stays_symbolic(target):
    """Tile of Shape(x): the elements stay dims, so the Reshape target is symbolic."""
    nodes = [node("Shape", ["x"], ["s"]), node("Tile", ["s", "two"], ["t"]), node("Reshape", ["y", "t"], ["z"])]
    model = make_model(nodes, [vinfo("x", F32, ["n"]), vinfo("y", F32, ["n", "n"])], [vinfo("z", F32, None)],
                       [ints("two", 2)], opset=13)
    r = compile_checked(model, target, [{"x": rand(RNG, (3,)), "y": rand(RNG, (3, 3))},
                                        {"x": rand(RNG, (2,)), "y": rand(RNG, (2, 2))}])
    assert shape_of(r, "z") == "(n, n)"


def test_tile_negative_constant_repeat_rejected():
    model = make_model([node("Tile", ["x", "r"], ["y"])], [vinfo("x", F32, ["n"])], [vinfo("y", F32, None)],
                       [ints("r", -1)], opset=13)
    compile_error(model, r"node 'y' \(Tile\): repeats\[0\] is -1; repeats must not be negative")


# ----------------------------------------------------------------------------- Pad


MODES = ("constant", "reflect", "edge", "wrap")


@pytest.mark.parametrize("mode", MODES)
def test_pad_constant_pads(mode, target):
    extra = ["v"] if mode == "constant" else []
    nodes = [node("Pad", ["x", "p"] + extra, ["y"], mode=mode),
             node("Pad", ["i", "p"] + (["vi"] if mode == "constant" else []), ["z"], mode=mode),
             node("Pad", ["x", "big"], ["w"], mode=mode)]  # pads wider than the dims
    inits = [ints("p", 1, 0, 2, 0, 3, 1), ints("big", 0, 5, 0, 0, 7, 0), const("v", np.array(2.5, F32)),
             const("vi", np.array(-7, I64))]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m", 3]), vinfo("i", I64, ["n", "m", 3])],
                       [vinfo("y", F32, None), vinfo("z", I64, None), vinfo("w", F32, None)], inits, opset=19)

    def feeds(n, m):
        return {"x": rand(RNG, (n, m, 3)), "i": rand(RNG, (n, m, 3), I64)}

    r = compile_checked(model, target, [feeds(2, 3), feeds(4, 1), feeds(1, 5)])
    # x and i never meet in an op: i's dims are its own (n@i, m@i)
    assert [shape_of(r, k) for k in "yzw"] == ["(1 + n, 3 + m, 6)", "(1 + n@i, 3 + m@i, 6)", "(n, 12 + m, 3)"]


@pytest.mark.parametrize("mode", MODES)
def test_pad_runtime_pads(mode, target):
    nodes = [node("Pad", ["x", "p"] + (["v"] if mode == "constant" else []), ["y"], mode=mode),
             node("Pad", ["i", "p"], ["z"], mode=mode)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("i", I64, ["n", "m"]), vinfo("p", I64, [4]),
                               vinfo("v", F32, [])],
                       [vinfo("y", F32, None), vinfo("z", I64, None)], opset=19)

    def feeds(shape, pads, v=0.5):
        return {"x": rand(RNG, shape), "i": rand(RNG, shape, I64), "p": np.array(pads, I64), "v": np.array(v, F32)}

    r = compile_checked(model, target, [feeds((2, 3), [1, 2, 3, 4]), feeds((4, 5), [0, 0, 0, 0], -1.0),
                                        feeds((3, 2), [0, 7, 5, 1]), feeds((1, 1), [2, 2, 2, 2]),
                                        feeds((2, 4), [9, 0, 0, 9])])
    assert shape_of(r, "y").startswith("(pad_")


@pytest.mark.parametrize("mode", MODES)
def test_pad_negative_pads_crop(mode, target):
    """Negative pads remove elements: the data is cropped, then padded (the modes read the
    cropped data). onnxruntime is the reference: onnx.reference pads with numpy.pad, which
    rejects negative widths."""
    nodes = [node("Pad", ["x", "c"], ["y"], mode=mode), node("Pad", ["x", "p"], ["z"], mode=mode)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("p", I64, [4])],
                       [vinfo("y", F32, None), vinfo("z", F32, None)], [ints("c", -1, 1, 1, -2)], opset=19)

    def feeds(shape, pads):
        return {"x": rand(RNG, shape), "p": np.array(pads, I64)}

    # (onnxruntime pads reflect only up to the dim - 1, and edge and wrap only a non-empty dim)
    check_model(model, target, [feeds((3, 4), [-1, 1, -1, -2]), feeds((4, 5), [1, -2, -2, 1]),
                                feeds((3, 5), [-2, -3, 0, 0]), feeds((5, 6), [0, 2, 0, -1])], ref=ort_reference)


def test_pad_axes_and_old_versions(target):
    """Pad-18's axes (negative too); Pad-11 and Pad-13 (inputs); Pad-2 (attributes)."""
    m18 = make_model([node("Pad", ["x", "p", "", "ax"], ["y"], mode="edge"),
                      node("Pad", ["x", "q", "v", "ax2"], ["z"])],
                     [vinfo("x", F32, ["n", 2, "m"]), vinfo("p", I64, [2])], [vinfo("y", F32, None), vinfo("z", F32, None)],
                     [ints("ax", -1), ints("ax2", 2, 0), ints("q", 1, 2, 0, 1), const("v", np.array(9, F32))], opset=18)
    check_model(m18, target, [{"x": rand(RNG, (2, 2, 3)), "p": np.array([1, 2], I64)},
                              {"x": rand(RNG, (1, 2, 1)), "p": np.array([0, 3], I64)}])
    for opset in (11, 13):
        m = make_model([node("Pad", ["x", "p"], ["y"], mode="reflect"), node("Pad", ["x", "q", "v"], ["z"])],
                       [vinfo("x", I64, ["n", 3]), vinfo("p", I64, [4])], [vinfo("y", I64, None), vinfo("z", I64, None)],
                       [ints("q", 1, 1, 0, 2), const("v", np.array(-1, I64))], opset=opset)
        check_model(m, target, [{"x": rand(RNG, (2, 3), I64), "p": np.array([1, 2, 0, 1], I64)},
                                {"x": rand(RNG, (4, 3), I64), "p": np.array([3, 0, 2, 2], I64)}])
    m2 = make_model([node("Pad", ["x"], ["y"], pads=[0, 1, 2, 1], value=1.5),
                     node("Pad", ["x"], ["z"], pads=[1, 1, 1, 1], mode="edge")],
                    [vinfo("x", F32, ["n", 2])], [vinfo("y", F32, None), vinfo("z", F32, None)], opset=10)
    check_model(m2, target, [{"x": rand(RNG, (3, 2))}, {"x": rand(RNG, (1, 2))}])


def test_pad_runtime_errors(target):
    nodes = [node("Pad", ["x", "p"], ["c"]), node("Pad", ["x", "p"], ["r"], mode="reflect")]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"]), vinfo("p", I64, [4])],
                       [vinfo("c", F32, None), vinfo("r", F32, None)], opset=19)
    m = check_model(model, target, [{"x": rand(RNG, (2, 3)), "p": np.array([1, -1, 0, 1], I64)},
                                    {"x": rand(RNG, (3, 3)), "p": np.array([0, 0, 0, 0], I64)}], ref=ort_reference)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'c' \(Pad\): pads\[1\] and pads\[3\] crop more than the m "
                                                      r"elements of axis 1 \(-1 would be left\)"):
        m.run({"x": rand(RNG, (2, 3)), "p": np.array([0, -2, 0, -2], I64)})
    # constant mode pads an empty axis; reflect has nothing to reflect
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'r' \(Pad\): axis 1 has no elements left to pad in "
                                                      r"reflect mode"):
        m.run({"x": rand(RNG, (2, 0)), "p": np.array([0, 1, 0, 0], I64)})


def test_pad_wrong_length_pads(target):
    model = make_model([node("Pad", ["x", "p"], ["y"])], [vinfo("x", F32, ["n", 2]), vinfo("p", I64, ["k"])],
                       [vinfo("y", F32, None)], opset=13)
    m = check_model(model, target, [{"x": rand(RNG, (2, 2)), "p": np.array([1, 0, 0, 1], I64)}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(Pad\): view of 'p' as \(4,\)"):
        m.run({"x": rand(RNG, (2, 2)), "p": np.array([1, 0, 0], I64)})


def test_pad_compile_errors():
    x = [vinfo("x", F32, ["n", 2])]
    y = [vinfo("y", F32, None)]
    compile_error(make_model([node("Pad", ["x", "p"], ["y"], mode="wrap")], x, y, [ints("p", 0, 0, 1, 1)], opset=18),
                  r"node 'y' \(Pad\): mode 'wrap' exists from Pad-19")
    compile_error(make_model([node("Pad", ["x", "p"], ["y"])], x, y, [ints("p", 0, 1, 1)], opset=13),
                  r"node 'y' \(Pad\): pads 'p' has 3 elements; padding 2 axes takes 4")
    compile_error(make_model([node("Pad", ["x", "p"], ["y"])], x, y, [ints("p", 0, -2, 0, -1)], opset=13),
                  r"node 'y' \(Pad\): pads -2 and -1 crop 3 elements of axis 1: 3 > 2")


# ----------------------------------------------------------------------------- Split


def test_split_constant_sizes(target):
    nodes = [node("Split", ["x", "s"], ["a", "b", "c"], axis=1),
             node("Split", ["i"], ["d", "e"], axis=-1, split=[1, 3])]
    model13 = make_model(nodes[:1], [vinfo("x", F32, ["n", 6, "m"])], [vinfo(k, F32, None) for k in "abc"],
                         [ints("s", 1, 0, 5)], opset=13)
    r = compile_checked(model13, target, [{"x": rand(RNG, (2, 6, 3))}, {"x": rand(RNG, (1, 6, 0))}])
    assert [shape_of(r, k) for k in "abc"] == ["(n, 1, m)", "(n, 0, m)", "(n, 5, m)"]
    model11 = make_model(nodes[1:], [vinfo("i", I64, ["n", 4])], [vinfo(k, I64, None) for k in "de"], opset=11)
    check_model(model11, target, [{"i": rand(RNG, (3, 4), I64)}, {"i": rand(RNG, (1, 4), I64)}])


def test_split_constant_sizes_of_a_symbolic_dim(target):
    model = make_model([node("Split", ["x", "s"], ["a", "b"])], [vinfo("x", F32, ["n", 2])],
                       [vinfo(k, F32, None) for k in "ab"], [ints("s", 2, 3)], opset=13)
    m = check_model(model, target, [{"x": rand(RNG, (5, 2))}])
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'a' \(Split\): the split sizes against dim 0 of 'x'"):
        m.run({"x": rand(RNG, (4, 2))})


def test_split_runtime_sizes(target):
    nodes = [node("Split", ["x", "s"], ["a", "b", "c"], axis=1), node("Split", ["i", "s"], ["d", "e", "f"], axis=0)]
    model = make_model(nodes, [vinfo("x", F32, [2, "m"]), vinfo("i", I64, ["m", 3]), vinfo("s", I64, [3])],
                       [vinfo(k, F32, None) for k in "abc"] + [vinfo(k, I64, None) for k in "def"], opset=13)

    def feeds(m, sizes):
        return {"x": rand(RNG, (2, m)), "i": rand(RNG, (m, 3), I64), "s": np.array(sizes, I64)}

    r = compile_checked(model, target, [feeds(6, [1, 2, 3]), feeds(4, [0, 4, 0]), feeds(0, [0, 0, 0]),
                                        feeds(7, [5, 1, 1])])
    assert shape_of(r, "a").startswith("(2, split_")
    m = wasm_runtime.load(r.path)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'a' \(Split\): split sizes add up to 5, but dim 1 of "
                                                      r"'x' is 6"):
        m.run(feeds(6, [1, 1, 3]))
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'a' \(Split\): split\[1\] is -1; sizes must not be "
                                                      r"negative"):
        m.run(feeds(6, [4, -1, 3]))


def test_split_equal_parts(target):
    """Before Split-18 the parts must be equal (onnxruntime refuses the rest; onnx.reference
    would make a smaller last part, the meaning num_outputs gets at 18)."""
    model = make_model([node("Split", ["x"], ["a", "b", "c"], axis=1)], [vinfo("x", I64, [2, "m"])],
                       [vinfo(k, I64, None) for k in "abc"], opset=13)
    r = compile_checked(model, target, [{"x": rand(RNG, (2, 6), I64)}, {"x": rand(RNG, (2, 0), I64)},
                                        {"x": rand(RNG, (2, 9), I64)}])
    assert shape_of(r, "a") == "(2, (m // 3))"
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'a' \(Split\): dim 1 of 'x' splits into 3 equal parts "
                                                      r"only if divisible"):
        wasm_runtime.load(r.path).run({"x": rand(RNG, (2, 7), I64)})


def test_split_num_outputs(target):
    """Split-18: chunks of ceil(dim / n), the last one smaller; without num_outputs or sizes
    too (as onnx.reference reads it)."""
    nodes = [node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3), node("Split", ["x"], ["d", "e"], axis=1)]
    model = make_model(nodes, [vinfo("x", F32, ["n", "m"])], [vinfo(k, F32, None) for k in "abcde"], opset=18)
    r = compile_checked(model, target, [{"x": rand(RNG, (7, 3))}, {"x": rand(RNG, (6, 4))}, {"x": rand(RNG, (3, 1))},
                                        {"x": rand(RNG, (4, 5))}])
    assert shape_of(r, "c") == "(-2*(2 + n // 3) + n, m)"  # n - 2 * ceil(n / 3)
    # one row in chunks of 1 leaves -1 rows for the third output: onnxruntime refuses it
    # too (onnx.reference returns an empty part, by numpy's clamping of slices)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'a' \(Split\): dim 0 of 'x' \(n\) leaves a negative "
                                                      r"last part"):
        wasm_runtime.load(r.path).run({"x": rand(RNG, (1, 3))})


def test_split_compile_errors():
    x = [vinfo("x", F32, ["n", 4])]
    outs = [vinfo(k, F32, None) for k in "ab"]
    compile_error(make_model([node("Split", ["x", "s"], ["a", "b"], axis=1)], x, outs, [ints("s", 1, 2)], opset=13),
                  r"node 'a' \(Split\): the split sizes against dim 1 of 'x': 3 != 4")
    compile_error(make_model([node("Split", ["x", "s"], ["a", "b"], axis=1)], x, outs, [ints("s", 1, 2, 1)],
                             opset=13), r"node 'a' \(Split\): split 's' has 3 sizes for 2 outputs")
    compile_error(make_model([node("Split", ["x"], ["a", "b"], num_outputs=3)], x, outs, opset=18),
                  r"node 'a' \(Split\): num_outputs is 3, but the node has 2 outputs")
