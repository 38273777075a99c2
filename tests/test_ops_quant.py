"""Quantization ops (toolkit/frontend/onnx/ops/quant.py): QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv — against
onnx.reference and onnxruntime, each module compiled once per target and run with several
bindings of its symbolic dims."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import wasm_runtime
from util import build, check_model, const, make_model, ort_reference, rand, reference, vinfo
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(31)
F32, F16, U8, I8, U16, I16, I32 = np.float32, np.float16, np.uint8, np.int8, np.uint16, np.int16, np.int32
QUANTIZED = (U8, I8, U16, I16)


def node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], **attrs)


def ties(shape, scale: float = 0.5) -> np.ndarray:
    """Values whose quotients by ``scale`` are often exactly halfway between integers (round
    half to even), with some far outside any quantized range (saturation)."""
    x = RNG.integers(-600, 600, size=shape).astype(F32) * np.float32(scale / 2)
    big = RNG.random(shape) < 0.1
    return np.where(big, x * 300, x).astype(F32)


def zero_point(dtype, shape=()) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -20), min(info.max, 20) + 1, size=shape).astype(dtype)


# ----------------------------------------------------------------------------- QuantizeLinear


@pytest.mark.parametrize("dtype", QUANTIZED)
def test_quantize_per_tensor(target, dtype):
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["y"])],
                       [vinfo("x", F32, ["n", "m"])], [vinfo("y", dtype, None)],
                       [const("s", np.float32(0.5)), const("z", zero_point(dtype))], opset=21)
    check_model(model, target, [{"x": ties((n, m))} for n, m in ((3, 4), (1, 7), (0, 2))])


def test_quantize_per_axis(target):
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1),
             node("QuantizeLinear", ["x", "s2", "z2"], ["y2"], axis=-1)]
    model = make_model(nodes, [vinfo("x", F32, ["n", 3, "m"]), vinfo("s2", F32, ["k"]), vinfo("z2", I8, ["k"])],
                       [vinfo("y", U8, None), vinfo("y2", I8, None)],
                       [const("s", np.array([0.5, 0.25, 2.0], F32)), const("z", np.array([0, 10, 128], U8))],
                       opset=13)

    def feeds(n, m):
        return {"x": ties((n, 3, m)), "s2": RNG.uniform(0.1, 2, m).astype(F32), "z2": zero_point(I8, (m,))}

    m = check_model(model, target, [feeds(2, 5), feeds(1, 1), feeds(4, 3)])
    bad = feeds(2, 5)
    bad["s2"], bad["z2"] = bad["s2"][:4], bad["z2"][:4]
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'y2' \(QuantizeLinear\): length of scale 's2'"):
        m.run(bad)


def test_quantize_blocked(target):
    # blocks of 2 along axis 1 (5 = 2 + 2 + 1) and of 3 along the symbolic axis 0
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2),
             node("QuantizeLinear", ["x", "t"], ["yt"], axis=0, block_size=3, output_dtype=TensorProto.INT16)]
    model = make_model(nodes, [vinfo("x", F32, ["n", 5]), vinfo("s", F32, ["n", 3]), vinfo("z", U8, ["n", 3]),
                               vinfo("t", F32, ["b", 5])],
                       [vinfo("y", U8, None), vinfo("yt", I16, None)], opset=21)

    def feeds(n):
        b = -(-n // 3)
        return {"x": ties((n, 5)), "s": RNG.uniform(0.2, 1, (n, 3)).astype(F32), "z": zero_point(U8, (n, 3)),
                "t": RNG.uniform(0.01, 0.1, (b, 5)).astype(F32)}

    m = check_model(model, target, [feeds(4), feeds(3), feeds(7), feeds(1)])
    bad = feeds(4)
    bad["t"] = bad["t"][:1]
    with pytest.raises(wasm_runtime.ModelError, match=r"node 'yt' \(QuantizeLinear\): dim 0 of scale 't'"):
        m.run(bad)


def test_quantize_float16_and_int32(target):
    # float16 divides in float16 (numpy), int32 in float64; no zero point means uint8
    nodes = [node("QuantizeLinear", ["h", "hs"], ["yh"]),
             node("QuantizeLinear", ["i", "s", "z"], ["yi"])]
    model = make_model(nodes, [vinfo("h", F16, ["n"]), vinfo("i", I32, ["n", 2])],
                       [vinfo("yh", U8, None), vinfo("yi", I8, None)],
                       [const("hs", np.float16(0.3)), const("s", np.float32(3.0)), const("z", np.int8(-3))],
                       opset=19)

    def feeds(n):
        return {"h": (RNG.uniform(-5, 90, n)).astype(F16), "i": RNG.integers(-500, 500, (n, 2)).astype(I32)}

    check_model(model, target, [feeds(9), feeds(1), feeds(30)])


def test_quantize_precision(target):
    # precision float16: x and the scale are rounded to float16 before dividing
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["y"], precision=TensorProto.FLOAT16)],
                       [vinfo("x", F32, ["n"])], [vinfo("y", I8, None)],
                       [const("s", np.float32(0.1234567)), const("z", np.int8(1))], opset=23)
    check_model(model, target, [{"x": RNG.uniform(-20, 20, n).astype(F32)} for n in (17, 3)])


def test_quantize_onnxruntime(target):
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)],
                       [vinfo("x", F32, [2, "m"])], [vinfo("y", I8, None)],
                       [const("s", np.array([0.5, 0.125], F32)), const("z", np.array([3, -4], I8))], opset=13)
    check_model(model, target, [{"x": ties((2, m))} for m in (6, 1)], ref=ort_reference)


def test_quantize_refusals():
    def model(dtype_attr=None, scale_shape=(3, 3), opset=21, **kw):
        attrs = {"output_dtype": dtype_attr} if dtype_attr else {}
        return make_model([node("QuantizeLinear", ["x", "s"], ["y"], **attrs, **kw)],
                          [vinfo("x", F32, [3, 3])], [vinfo("y", U8, None)],
                          [const("s", np.ones(scale_shape, F32))], opset=opset)

    with pytest.raises(CompileError, match=r"node 'y' \(QuantizeLinear\): output_dtype float8_e8m0fnu is not one of"):
        build(model(TensorProto.FLOAT8E8M0), "native")
    with pytest.raises(CompileError, match=r"scale 's' \(3, 3\) must have one element, be 1-D"):
        build(model(), "native")
    with pytest.raises(CompileError, match=r"dim 1 of scale 's' \(blocks of 2 along axis 1"):
        build(model(scale_shape=(3, 3), block_size=2), "native")


# ----------------------------------------------------------------------------- DequantizeLinear


@pytest.mark.parametrize("dtype", QUANTIZED + (I32,))
def test_dequantize_per_tensor(target, dtype):
    info = np.iinfo(dtype)
    model = make_model([node("DequantizeLinear", ["x", "s", "z"], ["y"])],
                       [vinfo("x", dtype, ["n", 2])], [vinfo("y", F32, None)],
                       [const("s", np.float32(0.37)), const("z", zero_point(dtype))], opset=21)

    def feeds(n):
        lo, hi = max(info.min, -(1 << 20)), min(info.max, 1 << 20)
        return {"x": RNG.integers(lo, hi, (n, 2), endpoint=True).astype(dtype)}

    check_model(model, target, [feeds(5), feeds(1), feeds(0)])


def test_dequantize_axis_blocked_float16(target):
    nodes = [node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-1),
             node("DequantizeLinear", ["x", "b"], ["yb"], axis=0, block_size=2),
             node("DequantizeLinear", ["x", "h", "z"], ["yh"], axis=2),
             node("DequantizeLinear", ["x", "s"], ["y16"], axis=2, output_dtype=TensorProto.FLOAT16)]
    model = make_model(nodes, [vinfo("x", I8, ["n", 2, 3]), vinfo("b", F32, ["k", 2, 3])],
                       [vinfo("y", F32, None), vinfo("yb", F32, None), vinfo("yh", F16, None),
                        vinfo("y16", F16, None)],
                       [const("s", np.array([0.5, 0.3, 1e-3], F32)), const("z", np.array([1, -2, 3], I8)),
                        const("h", np.array([0.5, 0.3, 7.1], F16))], opset=23)

    def feeds(n):
        return {"x": RNG.integers(-128, 128, (n, 2, 3)).astype(I8),
                "b": RNG.uniform(-1, 1, (-(-n // 2), 2, 3)).astype(F32)}

    check_model(model, target, [feeds(3), feeds(4), feeds(1)])


def test_quantized_weights_fold_natively(target):
    """Constant int8 and uint8 weights dequantized (opset 13, which onnx.reference cannot
    fold): natively the Dequantize nodes become float32 constants, which Conv and MatMul
    read as weights; a wasm32 module keeps them quantized and dequantizes them on every run.
    The folded values are the kernel's, bit for bit (output d of each target), and both
    targets match onnxruntime."""
    from util import lower_model

    wq = RNG.integers(-128, 128, (6, 4, 3, 3)).astype(I8)
    vq = RNG.integers(0, 256, (5, 7)).astype(U8)
    nodes = [node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
             node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
             node("DequantizeLinear", ["vq", "vs", "vz"], ["d"]),
             node("MatMul", ["a", "d"], ["m"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", 4, "h", "w"]), vinfo("a", F32, ["n", 5])],
                       [vinfo("y", F32, None), vinfo("d", F32, None), vinfo("m", F32, None)],
                       [const("wq", wq), const("ws", RNG.uniform(0.001, 0.1, 6).astype(F32)),
                        const("wz", zero_point(I8, (6,))), const("vq", vq), const("vs", np.float32(0.0371)),
                        const("vz", np.uint8(131))], opset=13)
    graph, _, _ = lower_model(model, target)
    dequantized = [n for n in graph.nodes if type(n.op).__name__ == "Dequantize"]
    assert len(dequantized) == (0 if target == "native" else 2)
    feeds = [{"x": rand(RNG, (n, 4, h, w)), "a": rand(RNG, (n, 5))} for n, h, w in [(1, 5, 6), (2, 3, 9)]]
    mod = check_model(model, target, feeds, ref=ort_reference, rtol=1e-5, atol=1e-5)
    want = (vq.astype(F32) - F32(131)) * F32(0.0371)
    np.testing.assert_array_equal(mod.run(feeds[0])["d"], want)


# ----------------------------------------------------------------------------- DynamicQuantizeLinear


def test_dynamic_quantize(target):
    model = make_model([node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])],
                       [vinfo("x", F32, ["n", "m"])],
                       [vinfo("y", U8, None), vinfo("scale", F32, None), vinfo("zp", U8, None)], opset=11)
    feeds = [{"x": rand(RNG, (3, 4))}, {"x": RNG.uniform(0.5, 4, (2, 5)).astype(F32)},
             {"x": RNG.uniform(-9, -1, (1, 1)).astype(F32)}, {"x": np.zeros((2, 2), F32)},
             {"x": np.array([[-1.0, 0.5, 254 / 255 * 2]], F32)}]
    check_model(model, target, feeds)
    # all zeros (an empty range): onnx.reference's scale is 1 / 255, onnxruntime's 1 (the
    # quantized values agree); symwasm follows onnx.reference
    check_model(model, target, feeds[:3] + feeds[4:], ref=ort_reference)


# ----------------------------------------------------------------------------- MatMulInteger


@pytest.mark.parametrize("dtypes", [(U8, U8), (I8, I8), (U8, I8)])
def test_matmul_integer(target, dtypes):
    ta, tb = dtypes
    model = make_model([node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                       [vinfo("a", ta, ["n", "m", "k"]), vinfo("b", tb, ["k", 3]), vinfo("az", ta, []),
                        vinfo("bz", tb, [3])], [vinfo("y", I32, None)], opset=10)

    def feeds(n, m, k):
        info_a, info_b = np.iinfo(ta), np.iinfo(tb)
        return {"a": RNG.integers(info_a.min, info_a.max, (n, m, k), endpoint=True).astype(ta),
                "b": RNG.integers(info_b.min, info_b.max, (k, 3), endpoint=True).astype(tb),
                "az": zero_point(ta), "bz": zero_point(tb, (3,))}

    fs = [feeds(2, 3, 4), feeds(1, 5, 1), feeds(3, 1, 17)]
    check_model(model, target, fs)
    # onnxruntime has no int8 x int8 kernel, and its uint8 x int8 kernel (pmaddubsw on x86
    # without VNNI) saturates pairs of products to int16, so only uint8 x uint8 is exact there
    if dtypes == (U8, U8):
        check_model(model, target, fs, ref=ort_reference)


def test_matmul_integer_constant_b_per_row_a(target):
    # a's 1-D zero point is per row (the spec), which numpy broadcasting (onnx.reference)
    # would apply per column: compared with numpy's product of the centred operands
    b = RNG.integers(0, 256, (4, 6)).astype(U8)
    model = make_model([node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                       [vinfo("a", U8, ["m", 4]), vinfo("az", U8, ["m"])], [vinfo("y", I32, None)],
                       [const("b", b), const("bz", np.uint8(128))], opset=10)

    def ref(model, feeds):
        a = feeds["a"].astype(np.int32) - feeds["az"].astype(np.int32)[:, None]
        return {"y": a @ (b.astype(np.int32) - 128)}

    feeds = [{"a": RNG.integers(0, 256, (m, 4)).astype(U8), "az": RNG.integers(0, 256, m).astype(U8)}
             for m in (3, 1, 8)]
    check_model(model, target, feeds, ref=ref)


@pytest.mark.parametrize("k, route", [(518, "float32"), (519, "int32")])
def test_matmul_integer_constant_b_as_float_gemm(target, k, route):
    """A constant b whose columns keep every partial sum within float32's exact integers
    (255 times a column's sum of |b - zero point| at most 2 ** 24) runs as the float32 GEMM;
    one more row of 127s passes the bound and keeps the int32 product. Exact either way, at
    the worst case (a all 255, zero point 0) and on random data; a Cast of the product to
    float32 then reads the float product itself (no Cast kernels)."""
    from util import lower_model

    b = np.full((k, 3), 127, I8)
    b[:, 1] = RNG.integers(-128, 128, k)
    b[:, 2] = -127  # the same sum of |b| as the first column, negative
    nodes = [node("MatMulInteger", ["a", "b", "az"], ["y"]), node("Cast", ["y"], ["f"], to=TensorProto.FLOAT)]
    model = make_model(nodes, [vinfo("a", U8, ["n", k]), vinfo("az", U8, [])],
                       [vinfo("y", I32, None), vinfo("f", F32, None)], [const("b", b)], opset=10)
    graph, _, _ = lower_model(model, target)
    products = [n for n in graph.nodes if type(n.op).__name__ == "MatMul"]
    assert len(products) == 1 and graph.values[products[0].outputs[0]].dtype.name == route
    only_f = make_model(nodes, [vinfo("a", U8, ["n", k]), vinfo("az", U8, [])], [vinfo("f", F32, None)],
                        [const("b", b)], opset=10)
    graph, _, _ = lower_model(only_f, target)
    product = next(n for n in graph.nodes if type(n.op).__name__ == "MatMul").outputs[0]
    readers = [type(n.op).__name__ for n in graph.nodes if product in n.inputs]
    assert readers == (["Identity"] if route == "float32" else ["Cast"])

    def ref(model, feeds):
        y = (feeds["a"].astype(np.int64) - feeds["az"].astype(np.int64)) @ b.astype(np.int64)
        return {"y": y.astype(np.int32), "f": y.astype(F32)}

    feeds = [{"a": np.full((2, k), 255, U8), "az": np.uint8(0)},
             {"a": RNG.integers(0, 256, (3, k)).astype(U8), "az": np.uint8(0)},
             {"a": RNG.integers(0, 256, (1, k)).astype(U8), "az": np.uint8(255)}]
    assert abs(int(ref(model, feeds[0])["y"][0, 0])) > (1 << 24) - 3000  # the worst case is near the bound
    check_model(model, target, feeds, ref=ref, rtol=0, atol=0)


# ----------------------------------------------------------------------------- QLinearMatMul


@pytest.mark.parametrize("dtype,scale", [(U8, F32), (I8, F32), (U8, F16), (I8, F16)])
def test_qlinear_matmul(target, dtype, scale):
    info = np.iinfo(dtype)
    model = make_model([node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
                       [vinfo("a", dtype, ["n", "m", 5]), vinfo("b", dtype, [5, "k"]), vinfo("bs", scale, ["k"]),
                        vinfo("bz", dtype, ["k"])], [vinfo("y", dtype, None)],
                       [const("as", scale(0.02)), const("az", zero_point(dtype)), const("ys", scale(0.35)),
                        const("yz", zero_point(dtype))], opset=21)

    def feeds(n, m, k):
        return {"a": RNG.integers(info.min, info.max, (n, m, 5), endpoint=True).astype(dtype),
                "b": RNG.integers(info.min, info.max, (5, k), endpoint=True).astype(dtype),
                "bs": RNG.uniform(0.01, 0.05, k).astype(scale), "bz": zero_point(dtype, (k,))}

    check_model(model, target, [feeds(2, 3, 4), feeds(1, 1, 1), feeds(2, 6, 2)])


def test_qlinear_matmul_onnxruntime(target):
    # opset 10, per-tensor b: onnxruntime rounds its float32 requantization like numpy's
    # float64 one except at exact ties, which these scales avoid
    model = make_model([node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
                       [vinfo("a", U8, ["m", 4]), vinfo("b", U8, [4, "k"])], [vinfo("y", U8, None)],
                       [const("as", np.float32(0.0213)), const("az", np.uint8(120)), const("bs", np.float32(0.0117)),
                        const("bz", np.uint8(131)), const("ys", np.float32(0.391)), const("yz", np.uint8(100))],
                       opset=10)

    def feeds(m, k):
        return {"a": RNG.integers(0, 256, (m, 4)).astype(U8), "b": RNG.integers(0, 256, (4, k)).astype(U8)}

    check_model(model, target, [feeds(3, 2), feeds(1, 7)], ref=ort_reference)
    check_model(model, target, [feeds(5, 3)])


# ----------------------------------------------------------------------------- ConvInteger


def ints(dtype, shape) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("dtypes", [(U8, U8), (I8, I8), (U8, I8)])
def test_conv_integer(target, dtypes):
    # 2-D, group 2, strides and pads, the weight's zero point per output channel
    tx, tw = dtypes
    model = make_model([node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], group=2, strides=[2, 1],
                             pads=[1, 0, 2, 1])],
                       [vinfo("x", tx, ["n", 4, "h", "w"]), vinfo("xz", tx, [])], [vinfo("y", I32, None)],
                       [const("w", ints(tw, (6, 2, 3, 2))), const("wz", zero_point(tw, (6,)))], opset=10)

    def feeds(n, h, w):
        return {"x": ints(tx, (n, 4, h, w)), "xz": zero_point(tx)}

    check_model(model, target, [feeds(2, 5, 6), feeds(1, 1, 1), feeds(3, 8, 3)])


@pytest.mark.parametrize("rank", [1, 3])
def test_conv_integer_nd(target, rank):
    # runtime weights and zero points, auto_pad SAME_UPPER with strides (and dilations:
    # onnxruntime refuses them with SAME, so it checks the model without)
    k = (3, 2, 2)[:rank]

    def model(**dilations):
        return make_model([node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], auto_pad="SAME_UPPER",
                                strides=[2] * rank, **dilations)],
                          [vinfo("x", U8, ["n", 2] + [f"s{a}" for a in range(rank)]), vinfo("w", U8, [3, 2, *k]),
                           vinfo("xz", U8, []), vinfo("wz", U8, [])], [vinfo("y", I32, None)], opset=10)

    def feeds(n, *sizes):
        return {"x": ints(U8, (n, 2) + sizes[:rank]), "w": ints(U8, (3, 2, *k)), "xz": zero_point(U8),
                "wz": zero_point(U8)}

    fs = [feeds(2, 5, 4, 3), feeds(1, 1, 1, 1), feeds(1, 9, 2, 6)]
    check_model(model(dilations=[2] + [1] * (rank - 1)), target, fs)
    # onnxruntime's ConvInteger takes uint8 x uint8 and per-tensor zero points only
    check_model(model(), target, fs, ref=ort_reference)


def test_conv_integer_errors(target):
    model = make_model([node("ConvInteger", ["x", "w"], ["y"])],
                       [vinfo("x", U8, ["n", "c", 4]), vinfo("w", U8, [2, 3, 2])], [vinfo("y", I32, None)], opset=10)
    m = build(model, target)
    with pytest.raises(wasm_runtime.ModelError, match=r"'y' \(ConvInteger\).*channels"):
        m.run({"x": ints(U8, (1, 2, 4)), "w": ints(U8, (2, 3, 2))})
    bad = make_model([node("ConvInteger", ["x", "w"], ["y"])],
                     [vinfo("x", I16, [1, 3, 4]), vinfo("w", I16, [2, 3, 2])], [vinfo("y", I32, None)], opset=10)
    with pytest.raises(CompileError, match=r"ConvInteger.*dtype int16"):
        build(bad, target)
    wz = make_model([node("ConvInteger", ["x", "w", "", "wz"], ["y"])],
                    [vinfo("x", U8, [1, 3, 4])], [vinfo("y", I32, None)],
                    [const("w", ints(U8, (2, 3, 2))), const("wz", zero_point(U8, (3,)))], opset=10)
    with pytest.raises(CompileError, match=r"zero point 'wz' has 3 elements"):
        build(wz, target)


@pytest.mark.parametrize("c, route", [(14, "float32"), (15, "int32")])
def test_conv_integer_constant_w_as_float_conv(target, c, route):
    """Constant weights whose output channels keep every sum within float32's exact integers
    (255 x the channel's sum of |w - zero point| <= 2 ** 24) run as the float32 convolution
    and are cast back exactly; 14 channels x 37 taps of 127 reach 255 * 127 * 518, just
    under the bound, 15 channels pass it and keep the int32 convolution. Exact against
    onnx.reference, at the worst case (x all 255, zero point 0) and on random data."""
    from util import lower_model

    w = np.full((2, c, 1, 37), 127, I8)
    w[1] = RNG.integers(-128, 128, (c, 1, 37))
    model = make_model([node("ConvInteger", ["x", "w"], ["y"])], [vinfo("x", U8, ["n", c, "h", "w"])],
                       [vinfo("y", I32, None)], [const("w", w)], opset=10)
    graph, _, _ = lower_model(model, target)
    convs = [n for n in graph.nodes if type(n.op).__name__ == "Conv"]
    assert len(convs) == 1 and graph.values[convs[0].outputs[0]].dtype.name == route
    feeds = [{"x": np.full((1, c, 2, 40), 255, U8)}, {"x": ints(U8, (2, c, 3, 37))}]
    mod = check_model(model, target, feeds, rtol=0, atol=0)
    assert abs(int(mod.run(feeds[0])["y"][0, 0, 0, 0])) == 255 * 127 * 37 * c


# ----------------------------------------------------------------------------- QLinearConv


QCONV_INPUTS = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]


@pytest.mark.parametrize("dtypes", [(U8, U8), (I8, I8), (U8, I8)])
def test_qlinear_conv(target, dtypes):
    # 2-D, per-channel weight scales and zero points, int32 bias, group 3, dilation
    tx, tw = dtypes
    model = make_model([node("QLinearConv", QCONV_INPUTS + ["b"], ["y"], group=3, dilations=[1, 2], pads=[1, 1, 1, 1])],
                       [vinfo("x", tx, ["n", 6, "h", "w"]), vinfo("w", tw, [3, 2, 2, 3]), vinfo("b", I32, [3])],
                       [vinfo("y", tx, None)],
                       [const("xs", np.float32(0.021)), const("xz", zero_point(tx)),
                        const("ws", np.array([0.013, 0.031, 0.007], F32)), const("wz", zero_point(tw, (3,))),
                        const("ys", np.float32(0.27)), const("yz", zero_point(tx))], opset=10)

    def feeds(n, h, w):
        return {"x": ints(tx, (n, 6, h, w)), "w": ints(tw, (3, 2, 2, 3)),
                "b": RNG.integers(-3000, 3000, 3).astype(I32)}

    check_model(model, target, [feeds(2, 4, 5), feeds(1, 1, 2), feeds(1, 7, 3)])


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_qlinear_conv_onnxruntime(target, rank):
    # per tensor, constant weights, strides: onnxruntime requantizes in float32, which
    # rounds as numpy's float64 except at exact ties, which these scales avoid; its
    # 1-D and 3-D cases are also where onnx.reference's per-channel path does not apply
    k = (3, 2, 2)[:rank]
    model = make_model([node("QLinearConv", QCONV_INPUTS + ["b"], ["y"], strides=[2] + [1] * (rank - 1),
                             pads=[1] * (2 * rank))],
                       [vinfo("x", U8, ["n", 3] + [f"s{a}" for a in range(rank)])], [vinfo("y", U8, None)],
                       [const("xs", np.float32(0.0213)), const("xz", np.uint8(120)), const("w", ints(U8, (4, 3, *k))),
                        const("ws", np.float32(0.0117)), const("wz", np.uint8(131)), const("ys", np.float32(0.391)),
                        const("yz", np.uint8(100)), const("b", RNG.integers(-500, 500, 4).astype(I32))], opset=10)

    def feeds(n, *sizes):
        return {"x": ints(U8, (n, 3) + sizes[:rank])}

    fs = [feeds(2, 5, 4, 3), feeds(1, 3, 2, 2), feeds(1, 8, 3, 4)]
    check_model(model, target, fs, ref=ort_reference)
    check_model(model, target, fs)


def test_qlinear_conv_per_channel_3d(target):
    # per-channel scales on a 3-D convolution: onnx.reference expands w_scale for 2-D
    # only, so compared with numpy: the int32 convolution (from ConvInteger's reference)
    # requantized in float64
    w, wz = ints(I8, (2, 1, 2, 1, 2)), zero_point(I8, (2,))
    scales = (np.float32(0.05), np.array([0.011, 0.023], F32), np.float32(0.19))
    model = make_model([node("QLinearConv", QCONV_INPUTS, ["y"], pads=[0, 1, 0, 1, 0, 1])],
                       [vinfo("x", I8, ["n", 1, "d", 3, 3])], [vinfo("y", I8, None)],
                       [const("xs", scales[0]), const("xz", np.int8(-3)), const("w", w), const("ws", scales[1]),
                        const("wz", wz), const("ys", scales[2]), const("yz", np.int8(5))], opset=10)

    def ref(model, feeds):
        x = feeds["x"].astype(np.int32) + 3
        wc = w.astype(np.int32) - wz.astype(np.int32).reshape(2, 1, 1, 1, 1)
        conv = make_model([node("Conv", ["x", "w"], ["y"], pads=[0, 1, 0, 1, 0, 1])],
                          [vinfo("x", np.float64, None), vinfo("w", np.float64, None)], [vinfo("y", np.float64, None)],
                          opset=11)
        acc = reference(conv, {"x": x.astype(np.float64), "w": wc.astype(np.float64)})["y"]
        mult = (scales[0] * scales[1] / scales[2]).astype(F32).reshape(1, 2, 1, 1, 1)
        return {"y": np.clip(np.rint(acc * mult) + 5, -128, 127).astype(I8)}

    check_model(model, target, [{"x": ints(I8, (2, 1, d, 3, 3))} for d in (2, 4, 1)], ref=ref)


def test_qlinear_conv_errors(target):
    def model(ws, b_dtype=I32):
        return make_model([node("QLinearConv", QCONV_INPUTS + ["b"], ["y"])],
                          [vinfo("x", U8, ["n", 2, 3]), vinfo("b", b_dtype, ["m"])], [vinfo("y", U8, None)],
                          [const("xs", np.float32(0.1)), const("xz", np.uint8(1)), const("w", ints(U8, (2, 2, 2))),
                           const("ws", ws), const("wz", np.uint8(2)), const("ys", np.float32(0.3)),
                           const("yz", np.uint8(3))], opset=10)

    with pytest.raises(CompileError, match=r"w_scale 'ws' has shape .*scalar or 1-D"):
        build(model(np.ones((2, 1), F32)), target)
    with pytest.raises(CompileError, match=r"bias 'b' has dtype float32; QLinearConv takes int32"):
        build(model(np.float32(0.2), F32), target)
    m = build(model(np.float32(0.2)), target)
    with pytest.raises(wasm_runtime.ModelError, match=r"\(QLinearConv\).*bias 'b'"):
        m.run({"x": ints(U8, (1, 2, 3)), "b": np.zeros(3, I32)})
    # a constant bias (the float32 convolution's route) of the wrong length: at compile time
    const_b = make_model([node("QLinearConv", QCONV_INPUTS + ["b"], ["y"])], [vinfo("x", U8, ["n", 2, 3])],
                         [vinfo("y", U8, None)],
                         [const("xs", np.float32(0.1)), const("xz", np.uint8(1)), const("w", ints(U8, (2, 2, 2))),
                          const("ws", np.float32(0.2)), const("wz", np.uint8(2)), const("ys", np.float32(0.3)),
                          const("yz", np.uint8(3)), const("b", np.zeros(3, I32))], opset=10)
    with pytest.raises(CompileError, match=r"\(QLinearConv\): bias 'b' has shape int32\(3,\); expected \(2,\), the "
                                           r"output channels"):
        build(const_b, target)


SMALL_QUANT = [(TensorProto.FLOAT8E4M3FN, "float8_e4m3fn"), (TensorProto.FLOAT8E5M2, "float8_e5m2"),
               (TensorProto.INT4, "int4"), (TensorProto.UINT4, "uint4"), (TensorProto.INT2, "int2"),
               (TensorProto.FLOAT4E2M1, "float4_e2m1fn")]


@pytest.mark.parametrize("code,name", SMALL_QUANT)
def test_quantize_dequantize_small_formats(code, name, target):
    """QuantizeLinear to the small formats (float8/float4: a saturating cast of x / scale;
    int4/int2: rounded and clamped to their range) and DequantizeLinear back, per axis,
    against onnx.reference."""
    import ml_dtypes

    t = getattr(ml_dtypes, name)
    zp = np.zeros(3, t) if code in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT4E2M1) \
        else np.array([0, 1, -1 if name.startswith("int") else 2], np.int64).astype(t)
    model = make_model([node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
                        node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
                       [vinfo("x", F32, ["n", 3])],
                       [helper.make_tensor_value_info("q", code, None), vinfo("y", F32, None)],
                       [const("s", np.array([0.5, 0.25, 2.0], F32)), const("z", zp)], opset=23)
    check_model(model, target, [{"x": RNG.uniform(-40, 40, (n, 3)).astype(F32)} for n in (1, 7, 0)])


# ----------------------------------------------------------------------------- QDQ pairs


def _fake_quantize_ref(x, scale, zero, dtype, scale2, zero2):
    """QuantizeLinear then DequantizeLinear, as numpy computes them (float32)."""
    info = np.iinfo(dtype)
    q = np.rint(x / F32(scale))
    q = np.where(np.isnan(q), 0, q)
    q = np.clip(q + zero, info.min, info.max).astype(dtype)
    return ((q.astype(F32) - F32(zero2)) * F32(scale2)).astype(F32)


@pytest.mark.parametrize("dtype, zero, zero2, scale2", [(I8, 3, 3, 0.25), (U8, 128, 128, 0.25), (U8, None, None, 0.25),
                                                         (U16, 1000, 7, 0.125)])
def test_quantize_dequantize_pair_is_one_op(target, dtype, zero, zero2, scale2):
    """A per-tensor QuantizeLinear read only by a DequantizeLinear becomes one fake_quantize
    (no integer tensor between them): bit for bit the two ops' values, ties rounded to even
    and saturation at both ends, against onnx.reference; NaN and infinities (which
    onnx.reference casts to int32 with numpy, undefined for them) against numpy's
    saturating reading: NaN to the zero point, infinities to the ends of the range, as the
    QuantizeLinear kernel alone gives (checked on the Q output too)."""
    from util import lower_model

    inits = [const("s", np.float32(0.25)), const("s2", np.float32(scale2))]
    if zero is not None:
        inits += [const("z", np.array(zero, dtype)), const("z2", np.array(zero2, dtype))]
    q_in, dq_in = (["x", "s", "z"], ["q", "s2", "z2"]) if zero is not None else (["x", "s"], ["q", "s2"])
    model = make_model([node("QuantizeLinear", q_in, ["q"]), node("DequantizeLinear", dq_in, ["y"])],
                       [vinfo("x", F32, ["n", 3])], [vinfo("y", F32, None)], inits, opset=21)
    graph, _, _ = lower_model(model, target)
    assert [type(n.op).__name__ for n in graph.nodes] == ["Elementwise"]
    x = ties((40, 3))
    mod = check_model(model, target, [{"x": x}, {"x": x[:1]}], rtol=0, atol=0)
    odd = np.array([[np.nan, np.inf, -np.inf]], F32)
    want = _fake_quantize_ref(odd, 0.25, zero or 0, dtype, scale2, zero2 or 0)
    np.testing.assert_array_equal(mod.run({"x": odd})["y"], want)
    # the QuantizeLinear kernel on its own (its output read by the graph too) agrees
    both = make_model(model.graph.node, [vinfo("x", F32, ["n", 3])], [vinfo("y", F32, None), vinfo("q", dtype, None)],
                      inits, opset=21)
    out = build(both, target).run({"x": odd})
    info = np.iinfo(dtype)
    np.testing.assert_array_equal(out["q"], np.array([[zero or 0, info.max, info.min]], dtype))
    np.testing.assert_array_equal(out["y"], want)


def test_quantize_dequantize_pair_fuses_into_conv(target):
    """Conv -> Relu -> QuantizeLinear -> DequantizeLinear (a QDQ model's activation): one
    convolution kernel with Relu and the fake quantization in its epilogue, whose values are
    the unfused convolution's output quantized and dequantized by numpy, exactly."""
    from util import lower_model

    rng = np.random.default_rng(5)
    w = rng.uniform(-1, 1, (8, 5, 3, 3)).astype(F32)
    conv = node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])
    plain = make_model([conv], [vinfo("x", F32, ["n", 5, "h", "w"])], [vinfo("c", F32, None)], [const("w", w)])
    nodes = [conv, node("Relu", ["c"], ["r"]), node("QuantizeLinear", ["r", "s", "z"], ["q"]),
             node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    model = make_model(nodes, [vinfo("x", F32, ["n", 5, "h", "w"])], [vinfo("y", F32, None)],
                       [const("w", w), const("s", np.float32(0.02)), const("z", np.uint8(0))], opset=13)
    graph, _, _ = lower_model(model, target)
    assert [type(n.op).__name__ for n in graph.nodes] == ["Conv"], graph.nodes
    assert [p.op.fn for p in graph.nodes[0].op.post] == ["relu", "fake_quantize"]
    fused, unfused = build(model, target), build(plain, target)
    for n, h, wd in [(1, 5, 7), (2, 9, 4)]:
        x = rng.uniform(-3, 3, (n, 5, h, wd)).astype(F32)
        c = np.maximum(unfused.run({"x": x})["c"], 0)
        np.testing.assert_array_equal(fused.run({"x": x})["y"], _fake_quantize_ref(c, 0.02, 0, U8, 0.02, 0))
