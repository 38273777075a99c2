"""Miscellaneous ops (toolkit/frontend/onnx/ops/misc.py): Einsum, EyeLike, ReverseSequence,
DepthToSpace, SpaceToDepth, Scatter, Upsample, Det, GridSample, BitCast — against
onnx.reference (numpy where noted), each module compiled once per target and run with
several bindings of its symbolic dims."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import wasm_runtime
from util import build, check_model, const, lower_model, make_model, rand, reference, vinfo
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(47)
F32, F64, F16, I32, I64 = np.float32, np.float64, np.float16, np.int32, np.int64


def node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], **attrs)


# ----------------------------------------------------------------------------- Einsum


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", (["n", "k"], ["k", "m"])),
    ("bij,bjk->bik", (["b", "n", "k"], ["b", "k", 3])),
    ("ii->i", (["n", "n"],)),
    ("ii", (["n", "n"],)),
    ("...ij,...jk", ([2, "b", "n", "k"], ["b", "k", "n"])),
    ("ij->", (["n", "m"],)),
    ("i,i", (["n"], ["n"])),
    ("ij,kj->ikj", (["n", "m"], ["k", "m"])),
    ("bii->bi", (["b", "n", "n"],)),
    ("ji", (["n", "m"],)),
    ("...i->...", ([3, "n", "m"],)),
    ("ab,bc,cd->ad", (["n", "k"], ["k", "m"], ["m", 2])),
])
def test_einsum(target, eq, shapes):
    names = ["x", "y", "z"][:len(shapes)]
    model = make_model([node("Einsum", names, ["out"], equation=eq)],
                       [vinfo(nm, F32, s) for nm, s in zip(names, shapes)], [vinfo("out", F32, None)], opset=12)

    def feeds(binding):
        return {nm: rand(RNG, [binding.get(d, d) for d in s]) for nm, s in zip(names, shapes)}

    check_model(model, target, [feeds({"n": 3, "k": 4, "m": 2, "b": 2}), feeds({"n": 1, "k": 5, "m": 3, "b": 1}),
                                feeds({"n": 4, "k": 1, "m": 1, "b": 3})], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("eq,shapes,weights", [
    ("bhid,bhjd->bhij", (["b", 2, "n", 8], ["b", 2, "m", 8]), None),  # attention's scores
    ("bhij,bhjd->bhid", (["b", 2, "n", "m"], ["b", 2, "m", 8]), None),
    ("abc,cd->abd", (["b", "n", 12],), (12, 5)),  # a dense layer (tf2onnx)
    ("abcd,cde->abe", (["b", "n", 3, 4],), (3, 4, 6)),  # two contracted labels
    ("bij,bjk->bki", (["b", "n", 5], ["b", 5, "m"]), None),  # the product transposed
    ("ij,kj->ki", (["n", 7], ["m", 7]), None),
])
def test_einsum_as_matmul(target, eq, shapes, weights):
    """Two float32 operands of batch, kept and contracted labels (no diagonal, nothing
    broadcast) compile to a MatMul between transposes and views, no Einsum kernel."""
    names = ["x", "y"][:len(shapes)]
    inits = [const("y", RNG.standard_normal(weights).astype(F32))] if weights else []
    model = make_model([node("Einsum", ["x", "y"], ["out"], equation=eq)],
                       [vinfo(nm, F32, sh) for nm, sh in zip(names, shapes)], [vinfo("out", F32, None)], inits,
                       opset=12)
    graph, _, _ = lower_model(model, target)
    ops = {type(n.op).__name__ for n in graph.nodes}
    assert "Einsum" not in ops and "MatMul" in ops, ops

    def feeds(binding):
        return {nm: rand(RNG, [binding.get(d, d) for d in sh]) for nm, sh in zip(names, shapes)}

    check_model(model, target, [feeds({"n": 3, "m": 4, "b": 2}), feeds({"n": 1, "m": 1, "b": 1}),
                                feeds({"n": 17, "m": 9, "b": 3})], rtol=1e-4, atol=1e-5)


def test_einsum_int_and_broadcast(target):
    model = make_model([node("Einsum", ["x", "y"], ["out"], equation="...j,...j->...")],
                       [vinfo("x", I64, ["n", 1, "k"]), vinfo("y", I64, ["m", "k"])], [vinfo("out", I64, None)],
                       opset=12)
    check_model(model, target, [{"x": rand(RNG, (n, 1, k), I64), "y": rand(RNG, (m, k), I64)}
                                for n, m, k in ((2, 3, 4), (1, 1, 1), (3, 2, 5))])


def test_einsum_errors(target):
    def model(eq, shapes):
        names = ["x", "y"][:len(shapes)]
        return make_model([node("Einsum", names, ["out"], equation=eq)],
                          [vinfo(nm, F32, s) for nm, s in zip(names, shapes)], [vinfo("out", F32, None)], opset=12)

    with pytest.raises(CompileError, match=r"node 'out' \(Einsum\): term 'ijk' has 3 labels for an input of rank 2"):
        build(model("ijk", [[2, 3]]), target)
    with pytest.raises(CompileError, match=r"does not match"):
        build(model("ij,jk", [[2, 3], [4, 2]]), target)
    m = build(model("ij,jk", [["a", "b"], ["c", "d"]]), target)
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'out' \(Einsum\)"):
        m.run({"x": rand(RNG, (2, 3)), "y": rand(RNG, (4, 2))})


# ----------------------------------------------------------------------------- EyeLike, ReverseSequence


def test_eye_like(target):
    nodes = [node("EyeLike", ["x"], ["e"]), node("EyeLike", ["x"], ["up"], k=2, dtype=TensorProto.FLOAT),
             node("EyeLike", ["x"], ["down"], k=-1, dtype=TensorProto.BOOL)]
    model = make_model(nodes, [vinfo("x", I32, ["n", "m"])],
                       [vinfo("e", I32, None), vinfo("up", F32, None), vinfo("down", np.bool_, None)], opset=9)
    check_model(model, target, [{"x": rand(RNG, s, I32)} for s in ((3, 4), (5, 2), (1, 1), (0, 3))])


def test_reverse_sequence(target):
    nodes = [node("ReverseSequence", ["x", "lens"], ["y"], time_axis=0, batch_axis=1),
             node("ReverseSequence", ["z", "lens"], ["w"], time_axis=1, batch_axis=0)]
    model = make_model(nodes, [vinfo("x", F32, ["t", "b", 2]), vinfo("z", I64, ["b", "t"]), vinfo("lens", I64, ["b"])],
                       [vinfo("y", F32, None), vinfo("w", I64, None)], opset=10)

    def feeds(t, b):
        return {"x": rand(RNG, (t, b, 2)), "z": rand(RNG, (b, t), I64, -100, 100),
                "lens": RNG.integers(0, t + 1, b).astype(I64)}

    m = check_model(model, target, [feeds(4, 3), feeds(1, 2), feeds(6, 1)])
    bad = feeds(3, 2)
    bad["lens"][1] = 4
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y' \(ReverseSequence\): sequence length 4"):
        m.run(bad)


# ----------------------------------------------------------------------------- DepthToSpace, SpaceToDepth


def test_depth_space(target):
    nodes = [node("DepthToSpace", ["x"], ["dcr"], blocksize=2),
             node("DepthToSpace", ["x"], ["crd"], blocksize=2, mode="CRD"),
             node("SpaceToDepth", ["x"], ["s2d"], blocksize=2)]
    model = make_model(nodes, [vinfo("x", F32, ["n", 8, "h", "w"])],
                       [vinfo(o, F32, None) for o in ("dcr", "crd", "s2d")], opset=13)
    check_model(model, target, [{"x": rand(RNG, (n, 8, h, w))} for n, h, w in ((1, 2, 4), (2, 4, 6), (1, 2, 2))])
    m = build(model, target)
    with pytest.raises(wasm_runtime.ModelError, match=r"not divisible by 2"):
        m.run({"x": rand(RNG, (1, 8, 3, 2))})


def test_space_to_depth_crd(target):
    model = make_model([node("SpaceToDepth", ["x"], ["y"], blocksize=3, mode="CRD")],
                       [vinfo("x", I32, ["n", "c", 6, 3])], [vinfo("y", I32, None)], opset=28)
    check_model(model, target, [{"x": rand(RNG, (n, c, 6, 3), I32, -9, 9)} for n, c in ((1, 2), (2, 1))])


# ----------------------------------------------------------------------------- Scatter, Upsample


def test_scatter_old_name(target):
    model = make_model([node("Scatter", ["d", "i", "u"], ["y"], axis=1)],
                       [vinfo("d", F32, ["n", 5]), vinfo("i", I64, ["n", "k"]), vinfo("u", F32, ["n", "k"])],
                       [vinfo("y", F32, None)], opset=10)

    def feeds(n, k):
        return {"d": rand(RNG, (n, 5)), "i": np.stack([RNG.permutation(5)[:k] for _ in range(n)]).astype(I64),
                "u": rand(RNG, (n, k))}

    # onnx.reference has no Scatter: its reference is the same node as ScatterElements-11
    same = make_model([node("ScatterElements", ["d", "i", "u"], ["y"], axis=1)], list(model.graph.input),
                      list(model.graph.output), opset=11)
    check_model(model, target, [feeds(2, 3), feeds(1, 5), feeds(3, 1)], ref=lambda _, f: reference(same, f))


def test_upsample(target):
    n7 = make_model([node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])],
                    [vinfo("x", F32, [1, "c", "h", "w"])], [vinfo("y", F32, None)], opset=7)
    n9 = make_model([node("Upsample", ["x", "s"], ["y"], mode="nearest")],
                    [vinfo("x", I64, ["n", "h"])], [vinfo("y", I64, None)],
                    [const("s", np.array([2.0, 2.0], F32))], opset=9)
    # onnx.reference's Upsample takes the scales only as an input (Upsample-9)
    n7_as_9 = make_model([node("Upsample", ["x", "s"], ["y"])], list(n7.graph.input), list(n7.graph.output),
                         [const("s", np.array([1.0, 1.0, 2.0, 3.0], F32))], opset=9)
    check_model(n7, target, [{"x": rand(RNG, (1, c, h, w))} for c, h, w in ((2, 3, 4), (1, 1, 2))],
                ref=lambda _, f: reference(n7_as_9, f))
    check_model(n9, target, [{"x": rand(RNG, (n, h), I64)} for n, h in ((2, 3), (4, 1))])


def test_upsample_linear(target):
    # onnx.reference implements only nearest Upsample; linear is Resize's linear with
    # asymmetric coordinates
    model = make_model([node("Upsample", ["x", "s"], ["y"], mode="linear")],
                       [vinfo("x", F32, [1, 1, "h", "w"])], [vinfo("y", F32, None)],
                       [const("s", np.array([1.0, 1.0, 2.0, 2.0], F32))], opset=9)
    resize = make_model([node("Resize", ["x", "", "s"], ["y"], mode="linear",
                              coordinate_transformation_mode="asymmetric")],
                        [vinfo("x", F32, [1, 1, "h", "w"])], [vinfo("y", F32, None)],
                        [const("s", np.array([1.0, 1.0, 2.0, 2.0], F32))], opset=11)
    m = build(model, target)
    for h, w in ((3, 4), (2, 2)):
        x = rand(RNG, (1, 1, h, w))
        np.testing.assert_allclose(m.run({"x": x})["y"], reference(resize, {"x": x})["y"], rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- Det, BitCast


@pytest.mark.parametrize("dtype", [F32, F64])
def test_det(target, dtype):
    model = make_model([node("Det", ["x"], ["d"])], [vinfo("x", dtype, ["b", "n", "n"])], [vinfo("d", dtype, None)],
                       opset=11)
    singular = np.array([[[1, 2, 3], [2, 4, 6], [0, 1, 1]], [[0, 0, 1], [0, 1, 0], [1, 0, 0]]], dtype)
    check_model(model, target, [{"x": rand(RNG, (b, n, n), dtype)} for b, n in ((2, 3), (1, 1), (3, 5), (2, 0))]
                + [{"x": singular}], rtol=1e-4, atol=1e-5)


def test_bitcast(target):
    nodes = [node("BitCast", ["x"], ["i"], to=TensorProto.INT32),
             node("BitCast", ["h"], ["u"], to=TensorProto.UINT16),
             node("BitCast", ["i"], ["back"], to=TensorProto.FLOAT)]
    model = make_model(nodes, [vinfo("x", F32, ["n"]), vinfo("h", F16, ["n", 2])],
                       [vinfo("i", I32, None), vinfo("u", np.uint16, None), vinfo("back", F32, None)], opset=26)
    check_model(model, target, [{"x": rand(RNG, (n,)), "h": rand(RNG, (n, 2), F16)} for n in (5, 1, 0)])
    with pytest.raises(CompileError, match=r"node 'y' \(BitCast\): input 'x' is float32 \(32 bits\)"):
        build(make_model([node("BitCast", ["x"], ["y"], to=TensorProto.INT64)], [vinfo("x", F32, [2])],
                         [vinfo("y", I64, None)], opset=26), target)


# ----------------------------------------------------------------------------- GridSample


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample(target, mode, padding, align):
    model = make_model([node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)],
                       [vinfo("x", F32, ["n", 2, "h", "w"]), vinfo("g", F32, ["n", "p", "q", 2])],
                       [vinfo("y", F32, None)], opset=20)

    def feeds(n, h, w, p, q):
        # coordinates beyond [-1, 1] exercise the padding
        return {"x": rand(RNG, (n, 2, h, w)), "g": RNG.uniform(-1.6, 1.6, (n, p, q, 2)).astype(F32)}

    # a dim of 1 has no room to reflect in with align_corners (onnx.reference divides by 0)
    tiny = feeds(1, 2, 3, 1, 2) if padding == "reflection" and align else feeds(1, 1, 3, 1, 2)
    check_model(model, target, [feeds(1, 3, 4, 2, 5), feeds(2, 5, 2, 3, 3), tiny], rtol=1e-4, atol=1e-5)


def test_grid_sample_volumetric(target):
    model = make_model([node("GridSample", ["x", "g"], ["y"], mode="linear", padding_mode="border")],
                       [vinfo("x", F64, ["n", 1, "d", "h", "w"]), vinfo("g", F64, ["n", "p", "q", "r", 3])],
                       [vinfo("y", F64, None)], opset=20)

    def feeds(n, d, h, w):
        return {"x": rand(RNG, (n, 1, d, h, w), F64), "g": RNG.uniform(-1.2, 1.2, (n, 2, 3, 2, 3))}

    check_model(model, target, [feeds(1, 2, 3, 4), feeds(2, 3, 2, 2)], rtol=1e-5, atol=1e-6)


def test_grid_sample_old_modes(target):
    model = make_model([node("GridSample", ["x", "g"], ["y"], mode="bicubic")],
                       [vinfo("x", F32, [1, 1, "h", "w"]), vinfo("g", F32, [1, 2, 2, 2])],
                       [vinfo("y", F32, None)], opset=16)
    # onnx.reference knows only GridSample-20's names: bicubic is cubic
    renamed = make_model([node("GridSample", ["x", "g"], ["y"], mode="cubic")], list(model.graph.input),
                         list(model.graph.output), opset=20)
    check_model(model, target, [{"x": rand(RNG, (1, 1, h, w)), "g": RNG.uniform(-1, 1, (1, 2, 2, 2)).astype(F32)}
                                for h, w in ((4, 4), (2, 5))], rtol=1e-4, atol=1e-5,
                ref=lambda _, f: reference(renamed, f))
