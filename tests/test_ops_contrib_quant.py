"""onnxruntime's quantization contrib ops (domain com.microsoft;
toolkit/frontend/onnx/ops/contrib_quant.py) against onnxruntime's own CPU kernels: each
model compiled once per target and run at several bindings of its symbolic dims. Integer
outputs must be equal (QLinearSigmoid within one step, see its test); float outputs of
the integer products too, or close where onnxruntime sums in float32 (MatMulNBits)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.util import build, const, ort_reference, vinfo
from toolkit.ir.graph import CompileError

RNG = np.random.default_rng(2026)
F32, U8, I8, I32 = np.float32, np.uint8, np.int8, np.int32
MS = "com.microsoft"


def contrib_model(nodes, inputs, outputs, initializers=()):
    g = helper.make_graph(list(nodes), "test", list(inputs), list(outputs), initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def ms_node(op: str, ins: list[str], outs: list[str], **attrs):
    return helper.make_node(op, ins, outs, name=outs[0], domain=MS, **attrs)


def check(model, target, feeds_list, steps: int = 0, rtol: float = 0.0, atol: float = 0.0):
    """One module, every feed set against onnxruntime: integers within ``steps``, floats
    within rtol/atol (both 0: bit for bit)."""
    m = build(model, target)
    for feeds in feeds_list:
        got, want = m.run(feeds), ort_reference(model, feeds)
        for name, w in want.items():
            g = got[name]
            assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape, g.dtype, w.dtype)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
            else:
                diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
                assert diff.max(initial=0) <= steps, (name, int(diff.max()), int((diff > steps).sum()))
    return m


def q(dtype, shape) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dtype)


def scale(lo: float = 0.002, hi: float = 0.1) -> np.ndarray:
    return np.array(RNG.uniform(lo, hi), F32)


def zp(dtype, shape=()) -> np.ndarray:
    return q(dtype, shape)


def all_pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of 8-bit values, as two (256, 256) operands: with random scales, some
    sums land within float32 rounding of a tie, where the order of roundings decides."""
    info = np.iinfo(dtype)
    v = np.arange(info.min, info.max + 1).astype(dtype)
    return np.repeat(v, 256).reshape(256, 256), np.tile(v, 256).reshape(256, 256)


# ----------------------------------------------------------------------------- QLinearAdd, QLinearMul

PARAMS = ["sa", "za", "sb", "zb", "sc", "zc"]


def _binary_model(op, dtype, a_shape, b_shape, zp_shape=()):
    ins = [vinfo("a", dtype, a_shape), vinfo("b", dtype, b_shape)]
    ins += [vinfo(p, F32 if p[0] == "s" else dtype, list(zp_shape)) for p in PARAMS]
    return contrib_model([ms_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"])], ins,
                         [vinfo("y", dtype, None)])


def _parameters(op, dtype) -> dict:
    feeds = {p: scale() if p[0] == "s" else zp(dtype) for p in PARAMS}
    if op == "QLinearMul":  # products of up to 2 ** 16 brought back to about the 8-bit range
        feeds["sc"] = np.asarray(feeds["sa"] * feeds["sb"] * F32(RNG.uniform(30, 300)), F32)
    return feeds


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_binary_every_pair(target, op, dtype):
    # parameters at run time (scalars: onnxruntime's shape inference refuses 1-D ones here);
    # every pair of values at 48 random scale sets: the fused multiply-adds of QLinearAdd
    # (and the rounding of its fixed part) and QLinearMul's zero point added in float32
    # before rounding decide the values within float32 rounding of a tie, a few in a
    # million, which another order of roundings gets wrong
    model = _binary_model(op, dtype, ["n", "m"], ["n", "m"])
    a, b = all_pairs(dtype)
    feeds = [{"a": a, "b": b, **_parameters(op, dtype)} for _ in range(48)]
    feeds.append({"a": q(dtype, (3, 5)), "b": q(dtype, (3, 5)), **_parameters(op, dtype)})
    check(model, target, feeds)


BROADCASTS = {  # (A's shape, B's shape): every pair of values at n = m = 256
    "B column": (["n", "m"], ["n", 1]),
    "B row": (["n", "m"], ["m"]),
    "A column": (["n", 1], ["n", "m"]),
    "A one": ([], ["n", "m"]),
    "B one": (["n", "m"], [1]),
}


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("case", list(BROADCASTS))
def test_qlinear_binary_broadcast(target, op, case):
    # one value of A or B per span (onnxruntime's kernel then takes that operand second,
    # QLinearAdd's operands trading places), or B a row of A
    a_shape, b_shape = BROADCASTS[case]
    dims = {"n": 256, "m": 256}
    for dtype in (U8, I8):
        model = _binary_model(op, dtype, a_shape, b_shape)
        rows, cols = all_pairs(dtype)
        feeds = []
        for _ in range(12):
            if case == "B column":
                a, b = cols, rows[:, :1]
            elif case == "B row":
                a, b = rows, cols[0]
            elif case == "A column":
                a, b = rows[:, :1], cols
            else:  # one value against all the others, a different one each time
                one = q(dtype, (1,) if case == "B one" else ())
                a, b = (rows, one) if case == "B one" else (one, rows)
            feeds.append({"a": a, "b": b, **_parameters(op, dtype)})
        small = {"n": 3, "m": 7}
        feeds.append({"a": q(dtype, tuple(small.get(d, d) for d in a_shape)),
                      "b": q(dtype, tuple(small.get(d, d) for d in b_shape)), **_parameters(op, dtype)})
        assert all(f["a"].shape == tuple(dims.get(d, d) for d in a_shape) for f in feeds[:-1])
        check(model, target, feeds)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_constant_parameters(target, op):
    # constant scales and zero points (combined at compile time), every pair of values; A of
    # one element, which trades places with B
    for dtype in (U8, I8):
        c_scale = F32(0.05) if op == "QLinearAdd" else F32(0.0004)
        inits = [const("sa", F32(0.031)), const("sb", F32(0.017)), const("sc", c_scale), const("za", zp(dtype)),
                 const("zb", zp(dtype)), const("zc", zp(dtype))]
        rows, cols = all_pairs(dtype)
        for a_shape in (["n", "m"], [1]):
            model = contrib_model([ms_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"])],
                                  [vinfo("a", dtype, a_shape), vinfo("b", dtype, ["n", "m"])],
                                  [vinfo("y", dtype, None)], inits)
            if a_shape == [1]:
                feeds = [{"a": rows[k, :1], "b": cols} for k in range(0, 256, 5)]
            else:
                feeds = [{"a": rows, "b": cols}]
            feeds.append({"a": q(dtype, (5, 9) if a_shape != [1] else (1,)), "b": q(dtype, (5, 9))})
            check(model, target, feeds)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary_absent_zero_points(target, op):
    # zero points left out mean 0; onnxruntime's shape inference refuses the node without
    # them, so its reference is the same node given zero points of 0
    rows, cols = all_pairs(I8)
    inits = [const("sa", F32(0.023)), const("sb", F32(0.041)), const("sc", F32(0.05 if op == "QLinearAdd" else 0.003))]
    ins, outs = [vinfo("a", I8, ["n", "m"]), vinfo("b", I8, ["n", "m"])], [vinfo("y", I8, None)]
    ours = contrib_model([ms_node(op, ["a", "sa", "", "b", "sb", "", "sc"], ["y"])], ins, outs, inits)
    theirs = contrib_model([ms_node(op, ["a", "sa", "z", "b", "sb", "z", "sc", "z"], ["y"])], ins, outs,
                           inits + [const("z", np.int8(0))])
    m = build(ours, target)
    for feeds in ({"a": rows, "b": cols}, {"a": q(I8, (2, 3)), "b": q(I8, (2, 3))}):
        np.testing.assert_array_equal(m.run(feeds)["y"], ort_reference(theirs, feeds)["y"])


def test_qlinear_binary_refusals():
    model = _binary_model("QLinearAdd", U8, ["n"], ["n"], [3])
    with pytest.raises(CompileError, match=r"QLinearAdd\): A_scale 'sa' has shape float32\(3,\); it must have one element"):
        build(model, "native")
    g = contrib_model([ms_node("QLinearMul", ["a", "s", "", "b", "s", "", "s", ""], ["y"])],
                      [vinfo("a", U8, [4]), vinfo("b", I8, [4]), vinfo("s", F32, [])], [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"A and B differ in dtype"):
        build(g, "native")


# ----------------------------------------------------------------------------- QLinearSigmoid, QLinearLeakyRelu


def _activation(op, dtype, constant: bool, ratio=None, **attrs):
    names = ["x", "xs", "xz", "ys", "yz"]
    params = {"xs": scale(0.01, 0.08), "xz": zp(dtype), "ys": scale(1 / 300, 1 / 200), "yz": zp(dtype)}
    if op == "QLinearLeakyRelu":
        params["ys"] = scale(0.005, 0.05) if ratio is None else np.asarray(params["xs"] * F32(ratio), F32)
    ins = [vinfo("x", dtype, ["n", "m"])]
    inits = []
    if constant:
        inits = [const(k, v) for k, v in params.items()]
    else:
        ins += [vinfo(k, v.dtype, []) for k, v in params.items()]
    model = contrib_model([ms_node(op, names, ["y"], **attrs)], ins, [vinfo("y", dtype, None)], inits)
    return model, ({} if constant else params)


def _every_value(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, info.max + 1).astype(dtype).reshape(16, 16)


@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_sigmoid(target, dtype):
    # every input value, parameters constant and at run time. onnxruntime maps each value
    # through a table built with MLAS's own sigmoid approximation; where sigmoid(x) / y_scale
    # lies within float32 rounding of a tie between two steps, the two approximations may
    # round to neighbouring steps, so one step is allowed (and no more)
    for constant in (True, False):
        for _ in range(4):
            model, params = _activation("QLinearSigmoid", dtype, constant)
            check(model, target, [{"x": _every_value(dtype), **params}, {"x": q(dtype, (3, 5)), **params}], steps=1)


@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_leaky_relu(target, dtype):
    # exact: dequantized, a float32 multiply by alpha (default 0.01), divided by y_scale;
    # y_scale twice x_scale puts half the non-negative values on ties
    for constant, ratio, attrs in ((True, None, {"alpha": 0.2}), (False, None, {}), (False, 2.0, {"alpha": 0.01}),
                                   (True, 2.0, {})):
        for _ in range(3):
            model, params = _activation("QLinearLeakyRelu", dtype, constant, ratio, **attrs)
            check(model, target, [{"x": _every_value(dtype), **params}, {"x": q(dtype, (1, 7)), **params}])


# ----------------------------------------------------------------------------- QLinearConcat


@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_concat(target, dtype):
    # three inputs: one at the output's own scale and zero point (the same values, copied),
    # one at constant other ones, one at run-time ones; concatenated along the symbolic axis 1
    ys, yz = scale(0.02, 0.05), zp(dtype)
    inits = [const("ys", ys), const("yz", yz), const("s1", scale()), const("z1", zp(dtype))]
    names = ["ys", "yz", "x0", "ys", "yz", "x1", "s1", "z1", "x2", "s2", "z2"]
    ins = [vinfo("x0", dtype, ["n", 2]), vinfo("x1", dtype, ["n", "k"]), vinfo("x2", dtype, ["n", 3]),
           vinfo("s2", F32, []), vinfo("z2", dtype, [])]
    model = contrib_model([ms_node("QLinearConcat", names, ["y"], axis=1)], ins, [vinfo("y", dtype, None)], inits)
    feeds = [{"x0": q(dtype, (n, 2)), "x1": q(dtype, (n, k)), "x2": q(dtype, (n, 3)), "s2": scale(0.01, 0.2),
              "z2": zp(dtype)} for n, k in ((256, 4), (5, 1), (1, 0))]
    check(model, target, feeds)


def test_qlinear_concat_refusals():
    ins = [vinfo("x", U8, [2]), vinfo("s", F32, []), vinfo("z", U8, [])]
    bad = contrib_model([ms_node("QLinearConcat", ["s", "z", "x", "s"], ["y"], axis=0)], ins, [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"QLinearConcat\): has 4 inputs"):
        build(bad, "native")
    no_axis = contrib_model([ms_node("QLinearConcat", ["s", "z", "x", "s", "z"], ["y"])], ins, [vinfo("y", U8, None)])
    with pytest.raises(CompileError, match=r"attribute 'axis' is required"):
        build(no_axis, "native")


# ----------------------------------------------------------------------------- pooling


@pytest.mark.parametrize("dtype", [U8, I8])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(target, dtype, channels_last):
    # symbolic spatial dims (the image size found at run time) and fixed ones (a constant
    # multiplier); parameters at run time and constant
    shape = ["n", "h", "w", 3] if channels_last else ["n", 3, "h", "w"]
    names = ["x", "xs", "xz", "ys", "yz"]
    runtime = [vinfo("xs", F32, []), vinfo("xz", dtype, []), vinfo("ys", F32, []), vinfo("yz", dtype, [])]
    model = contrib_model([ms_node("QLinearGlobalAveragePool", names, ["y"], channels_last=channels_last)],
                          [vinfo("x", dtype, shape)] + runtime, [vinfo("y", dtype, None)])

    def feeds(n, h, w, ratio=None):
        dims = {"n": n, "h": h, "w": w}
        f = {"x": q(dtype, tuple(dims.get(d, d) for d in shape)), "xs": scale(), "xz": zp(dtype),
             "ys": scale(0.001, 0.01), "yz": zp(dtype)}
        if ratio is not None:  # x_scale / (y_scale * image size) a float32 rounding of ratio
            f["xs"] = np.asarray(np.float64(f["ys"]) * h * w * ratio, F32)
        return f

    # each sum times a multiplier near 0.5 or 0.25 lies at or next to a tie, where the
    # float32 rounding of x_scale / (y_scale * image size), in that order, decides
    ties = [feeds(64, h, w, r) for h, w in ((3, 1), (5, 3), (7, 7)) for r in (0.5, 0.25, 1.5) for _ in range(3)]
    check(model, target, [feeds(n, h, w) for n, h, w in ((2, 7, 9), (1, 1, 1), (3, 32, 32), (2, 5, 3))] + ties)
    fixed = ["x", "xs", "xz", "ys", "yz"]
    static = [2, 6, 5, 3] if channels_last else [2, 3, 6, 5]
    params = {"xs": scale(), "xz": zp(dtype), "ys": scale(0.001, 0.01), "yz": zp(dtype)}
    model = contrib_model([ms_node("QLinearGlobalAveragePool", fixed, ["y"], channels_last=channels_last)],
                          [vinfo("x", dtype, static)], [vinfo("y", dtype, None)],
                          [const(k, v) for k, v in params.items()])
    check(model, target, [{"x": q(dtype, tuple(static))} for _ in range(5)])


POOLS = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [2, 3], "strides": [2, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER"},
]


@pytest.mark.parametrize("attrs", range(len(POOLS)))
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_average_pool(target, attrs, channels_last):
    # the float32 window sums (in the window's row-major order) and onnxruntime's
    # rint(avg / y_scale + y_zero_point), for uint8 and int8, parameters at run time
    for dtype in (U8, I8):
        shape = ["n", "h", "w", 4] if channels_last else ["n", 4, "h", "w"]
        names = ["x", "xs", "xz", "ys", "yz"]
        ins = [vinfo("x", dtype, shape), vinfo("xs", F32, []), vinfo("xz", dtype, []), vinfo("ys", F32, []),
               vinfo("yz", dtype, [])]
        model = contrib_model([ms_node("QLinearAveragePool", names, ["y"], channels_last=channels_last,
                                       **POOLS[attrs])], ins, [vinfo("y", dtype, None)])

        def feeds(n, h, w, ratio=None):
            dims = {"n": n, "h": h, "w": w}
            f = {"x": q(dtype, tuple(dims.get(d, d) for d in shape)), "xs": scale(), "xz": zp(dtype),
                 "ys": scale(0.002, 0.05), "yz": zp(dtype)}
            if ratio is not None:  # averages of multiples of y_scale * ratio: often near ties
                f["xs"] = np.asarray(f["ys"] * F32(ratio), F32)
            return f

        # near ties, the float32 division by y_scale and the zero point added before
        # rounding decide
        ties = [feeds(8, 12, 12, r) for r in (0.5, 0.25, 1.5, 0.75) for _ in range(3)]
        check(model, target, [feeds(n, h, w) for n, h, w in ((2, 9, 11), (1, 4, 3), (3, 16, 16))] + ties)
